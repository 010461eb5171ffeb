"""Splicing a BIR kernel function into a caller through name-keyed argument maps (used by the inline passes)."""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, StringAttr
from xdsl.ir import Operation
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.common import i64_attr, names_attr


def _check_binding(kernel: bir.MemLocOp, caller: bir.MemLocOp | None, what: str) -> None:
    if caller is None:
        raise PassFailedException(f"kernel {what} '{kernel.sym_name.data}' is bound to an undeclared memloc")
    if caller.dims != kernel.dims or caller.dtype.data != kernel.dtype.data:
        raise PassFailedException(
            f"kernel {what} '{kernel.sym_name.data}' is {list(kernel.dims)} {kernel.dtype.data} but is bound to "
            f"'{caller.sym_name.data}' of {list(caller.dims)} {caller.dtype.data}"
        )


def _take(op: Operation) -> Operation:
    op.detach()
    return op


def _renamed(
    op: Operation, names: dict[str, str], id_base: int, move: bool = False,
    refs_memo: dict[int, tuple[ArrayAttr[StringAttr], ArrayAttr[StringAttr]]] | None = None,
) -> Operation:
    """``op`` (a clone of it, unless ``move``) with its memloc references renamed and its ids shifted.
    ``refs_memo`` (one per inlined call: ``names`` is fixed) maps a ``refs`` attribute, by identity, to its renamed
    one: the attributes are shared (``names_attr``), so the loop body's instructions that read the same tiles
    are renamed once."""
    new = _take(op) if move else op.clone()
    for o in new.walk() if new.regions else (new,):  # most ops are instructions without a region to walk
        if isinstance(o, bir.BirInst):
            refs = o.refs
            hit = refs_memo.get(id(refs)) if refs_memo is not None else None
            if hit is None or hit[0] is not refs:  # the entry holds the attribute: its id cannot be reused
                hit = (refs, names_attr([names[r.data] for r in refs.data]))
                if refs_memo is not None:
                    refs_memo[id(refs)] = hit
            o.properties["refs"] = hit[1]
            if id_base:
                o.properties["id"] = i64_attr(o.inst_id + id_base)
                if o.deps is not None:
                    o.properties["deps"] = bir.deps_attr((k, i + id_base) for k, i in o.dep_list)
    return new


def _shared_base(callee: bir.FunctionOp) -> str:
    """The prefix of a shared_hbm tensor's name: the kernel's, without the SPMD program suffix (``k.p1`` -> ``k``),
    so that every program's copy of the k-th shared_hbm allocation (the tracer names them alike) is one HBM
    variable of the NEFF (``bir-to-isa`` keys shared tensors by name)."""
    name, pid = callee.sym_name.data, callee.properties.get("program_id")
    suffix = f".p{pid.value.data}" if isinstance(pid, IntegerAttr) else ""
    return name[: -len(suffix)] if suffix and name.endswith(suffix) else name


def inline_function(
    call: Operation, callee: bir.FunctionOp, arg_map: dict[str, str], out_map: dict[str, str], move: bool = False
) -> None:
    """Replace ``call`` (inside a bir.function) by the body of ``callee`` with its parameters rebound. With
    ``move`` (the callee's only call, the callee dropped afterwards) its ops are moved rather than cloned: a
    100k-instruction kernel's clone cost more than everything else the inlining does."""
    caller = bir.function_of(call)
    caller_locs = caller.memlocs()
    names: dict[str, str] = {}
    new_locs: list[Operation] = []
    for name, loc in callee.memlocs().items():
        kind = loc.kind.data
        if kind in ("input", "output"):
            mapping = arg_map if kind == "input" else out_map
            if name not in mapping:
                raise PassFailedException(f"kernel {kind} '{name}' of @{callee.sym_name.data} is not bound")
            _check_binding(loc, caller_locs.get(mapping[name]), kind)
            names[name] = mapping[name]
            continue
        base = _shared_base(callee) if loc.mem == "shared_hbm" else callee.sym_name.data
        fresh, i = f"{base}.{name}", 1
        # A constant is named after its contents (nl.shared_constant): inlined again, it is the same tensor.
        if kind == "constant" and fresh in caller_locs and caller_locs[fresh].data == loc.data:
            names[name] = fresh
            continue
        while fresh in caller_locs:
            fresh, i = f"{base}.{name}_{i}", i + 1
        names[name] = fresh
        clone = _take(loc) if move else loc.clone()
        clone.properties["sym_name"] = StringAttr(fresh)
        new_locs.append(clone)
        caller_locs[fresh] = clone
    id_base = 1 + max((i.inst_id for i in caller.instructions()), default=-1)
    refs_memo: dict[int, tuple[ArrayAttr[StringAttr], ArrayAttr[StringAttr]]] = {}
    body = [_renamed(op, names, id_base, move, refs_memo) for op in list(callee.body.block.ops)
            if not isinstance(op, bir.MemLocOp)]  # fmt: skip
    _relabel_loops(caller, body, new_locs)
    block = call.parent_block()
    assert block is not None
    first_non_loc = next((o for o in block.ops if not isinstance(o, bir.MemLocOp)), call)
    block.insert_ops_before(new_locs, first_non_loc)
    block.insert_ops_before(body, call)
    call.detach()
    call.erase()


def _relabel_loops(caller: bir.FunctionOp, body: list[Operation], locs: list[Operation]) -> None:
    """Give the inlined ``body``'s loops axis labels the caller does not use yet, and its memlocs' ``scope`` the
    same labels. Every traced kernel numbers its loops from ``L0``, while ``bir-unroll`` finds the tensors a loop
    allocates by their ``scope`` label: with two kernels' loops both called ``L5`` in one function, unrolling the
    first ``L5`` gave both kernels' scoped tensors per-iteration copies, renamed only the first kernel's accesses
    and dropped the originals the second kernel still named (``resolve-psum-accumulate``: ``KeyError``)."""
    loops = [o for op in body if op.regions for o in op.walk() if isinstance(o, bir.LoopOp)]
    if not loops:
        return
    caller_axes = {o.axis.data for op in caller.body.block.ops if op.regions for o in op.walk()
                   if isinstance(o, bir.LoopOp)}  # fmt: skip
    taken = caller_axes | {o.axis.data for o in loops}
    relabel: dict[str, str] = {}
    for axis in dict.fromkeys(o.axis.data for o in loops):
        if axis in caller_axes:
            i = 1
            while f"{axis}_{i}" in taken:
                i += 1
            relabel[axis] = f"{axis}_{i}"
            taken.add(relabel[axis])
    for o in loops:
        if o.axis.data in relabel:
            o.properties["axis"] = StringAttr(relabel[o.axis.data])
    for loc in locs:
        if isinstance(loc, bir.MemLocOp) and loc.scope is not None and loc.scope.data in relabel:
            loc.properties["scope"] = StringAttr(relabel[loc.scope.data])
