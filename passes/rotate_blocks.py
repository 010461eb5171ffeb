"""``rotate-blocks``: a block tensor indexed by a rolled loop's counter gets rotating buffers.

A legacy block tensor ``t = nl.ndarray((B, nl.par_dim(P), F), buffer=nl.sbuf)`` (one ``[P, B, F]`` memloc) whose
blocks a loop uses one iteration at a time (``t[i] = nl.load(a[i])``, ...) is, once ``bir-unroll{roll=true}`` keeps
the loop rolled, accessed as ``@t[off + c*r]``: the block moves with the counter register ``r`` at run time, so
``split-blocks`` cannot give each block its own memloc and the whole declaration must fit. The device compiler
allocates the blocks that are live, in as many buffers as the overlap of their live ranges needs; its modulo
allocation is the published form of that (aws-neuron-sdk ``nki/test/test_sbuf_modulo_alloc.py``,
``modulo_allocate_func``: block index ``i`` of a tensor with ``num_free_tiles=(K,)`` lives in slot ``i % K``).

Here that overlap is exact. A rolled body is one barrier-free stretch ending in ``counted_loop_end``, a barrier
(ARCHITECTURE.md "Rolled loops"), so a block touched only inside one execution of the body is dead at the barrier
after it. The pass asks of every internal, unplaced SBUF/PSUM memloc of rank 3 or more (``split_blocks``'s
candidates): are all its register-indexed accesses inside one top-level rolled loop, moving by the same whole number
``M`` of blocks per execution, each inside one block at its static offset, those blocks ``J`` spanning at most ``M``
(so no block is touched by two executions: nothing is carried from one to the next), with no static access inside
that loop and every access outside it (a peeled or leftover iteration) inside one block the loop never touches? Then
the loop's accesses move to a new memloc ``<name>.rot`` of ``K = max(J) - min(J) + 1`` blocks, each at its static
slot, the register term dropped: one buffer without interleaving, ``N`` for ``NKIC_ROLL_INTERLEAVE=N`` (the N copies
of the body are live in one stretch and overlap; no two stretches do). Accesses outside the loop keep the original
memloc (``split-blocks`` places their blocks); with none it is erased. Values are unchanged, only where bytes live.

Blocks carried between executions (``t[i + 1]`` loaded for the next iteration while ``t[i]`` is used) get modular
slots instead: block ``b`` in slot ``b mod K`` for every access, before, in and after the loop, K the fewest slots
that divide the blocks one execution advances (so each access keeps one static slot) and never hold two blocks live
at once in the unrolled program order, which the rolled program keeps (dependency-analysis orders the accesses to one
slot within a body; executions are apart by barriers). ``bir-unroll`` puts as many iterations in the body of a loop
that carries a block tensor declared beyond its memory as the blocks it keeps live (``loop_rolling.carried_blocks``),
so that K exists. Kept as is: a tensor used by two loops, or indexed by a loop nested in another rolled loop (the same
blocks then come round again in every outer iteration), or carried when no K fits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp
from xdsl.passes import ModulePass

from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr, names_attr
from nkic.passes.split_blocks import BlockGeometry, block_candidates, rebased_in_block
from nkic.target.vocab import dtype_size

_STATIC = ("", "", 0, 0)  # the dynamic term of a static access pattern


@dataclass(frozen=True)
class RotateBlocksPass(ModulePass):
    name = "rotate-blocks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            rotate_function(fn)


@dataclass(frozen=True)
class _Loop:
    """A top-level rolled loop: its control positions in the instruction list, counter register and movement."""

    begin: int
    end: int
    reg: int
    step: int  # the counter's step per execution of the body
    executions: int


@dataclass
class _Use:
    inst: bir.BirInst
    index: int  # the operand
    pos: int  # the instruction's position in the function


@dataclass
class _Uses:
    dynamic: list[_Use] = field(default_factory=list)
    static: list[_Use] = field(default_factory=list)


def _top_loops(insts: list[bir.BirInst]) -> list[_Loop]:
    """The rolled loops at nesting depth 0, by the positions of their ``counted_loop_begin``/``end``."""
    loops, stack = [], []
    for pos, inst in enumerate(insts):
        if inst.OPNAME == "counted_loop_begin":
            stack.append(pos)
        elif inst.OPNAME == "counted_loop_end":
            begin = stack.pop()
            if not stack:
                step, bound, reg = (_int(inst, k) for k in ("step", "bound", "iv_reg"))
                loops.append(_Loop(begin, pos, reg, step, max(1, -(-bound // step)) if step > 0 else 0))
    return loops


def _int(inst: bir.BirInst, name: str) -> int:
    value = inst.properties[name]
    assert isinstance(value, IntegerAttr)
    return value.value.data


def rotate_function(fn: bir.FunctionOp) -> int:
    """Give every qualifying block tensor of ``fn`` its rotating buffers (module docstring); the number rotated."""
    insts = list(fn.instructions())
    loops = [lp for lp in _top_loops(insts) if lp.step > 0]
    if not loops:
        return 0
    locs = fn.memlocs()
    geometry = block_candidates(locs, None)
    uses: dict[str, _Uses] = {name: _Uses() for name in geometry}
    for pos, inst in enumerate(insts):
        for i, (ref, ap) in enumerate(zip(inst.ref_names, inst.aps.data)):
            if ref in uses:
                group = uses[ref].dynamic if ap.is_dynamic else uses[ref].static
                group.append(_Use(inst, i, pos))
    done = 0
    for name, found in uses.items():
        plan = _plan(locs[name], geometry[name], found, loops)
        if plan is not None:
            _rotate(locs[name], geometry[name], found, plan)
            done += 1
    return done


def _elem(loc: bir.MemLocOp, ap: AccessPatternAttr) -> int:
    return dtype_size(ap.view_dtype or loc.dtype.data)


def _static(ap: AccessPatternAttr) -> AccessPatternAttr:
    offset, ivs, pairs, view, _ = ap.data
    return AccessPatternAttr((offset, ivs, pairs, view, _STATIC))


def _block_of(loc: bir.MemLocOp, g: BlockGeometry, use: _Use) -> int | None:
    ap = use.inst.aps.data[use.index]
    rebased = rebased_in_block(_static(ap), g, _elem(loc, ap))
    return None if rebased is None else rebased[0]


@dataclass(frozen=True)
class _Plan:
    """Where the loop's blocks go: ``slots`` buffers, the block of each moved use at counter 0 in ``slot(block)``."""

    slots: int
    modular: bool  # slot = block mod slots, every use moved; else slot = block - base, the loop's uses only
    base: int = 0

    def slot(self, block: int) -> int:
        return block % self.slots if self.modular else block - self.base


def _plan(loc: bir.MemLocOp, g: BlockGeometry, uses: _Uses, loops: list[_Loop]) -> _Plan | None:
    """How to rotate ``loc``'s blocks, or None to keep it whole."""
    if not uses.dynamic:
        return None
    first = uses.dynamic[0]
    loop = next((lp for lp in loops if lp.begin < first.pos < lp.end), None)
    if loop is None or loop.executions < 2:
        return None
    moves = set()
    for use in uses.dynamic:
        kind, _, reg, scale = use.inst.aps.data[use.index].dyn
        if kind != "reg" or reg != loop.reg or not loop.begin < use.pos < loop.end:
            return None
        moves.add(scale * _elem(loc, use.inst.aps.data[use.index]) * loop.step)
    if len(moves) != 1 or (move := moves.pop()) <= 0 or move % g.block:
        return None
    per_execution = move // g.block
    blocks = [_block_of(loc, g, use) for use in uses.dynamic]
    if any(b is None for b in blocks):
        return None
    lo, hi = min(blocks), max(blocks)  # type: ignore[type-var]
    total = g.row // g.block
    if hi + (loop.executions - 1) * per_execution >= total:
        return None
    if hi - lo + 1 > per_execution:  # carried from one execution to the next
        return _modular(loc, g, uses, loop, per_execution)
    touched = {b + n * per_execution for b in range(lo, hi + 1) for n in range(loop.executions)}
    for use in uses.static:
        if loop.begin < use.pos < loop.end or _block_of(loc, g, use) in touched | {None}:
            return None
    return _Plan(hi - lo + 1, False, lo) if hi - lo + 1 < total else None


def _modular(loc: bir.MemLocOp, g: BlockGeometry, uses: _Uses, loop: _Loop, per_execution: int) -> _Plan | None:
    """Blocks carried between executions (``t[i - 1]`` read in iteration ``i``): block ``b`` in slot ``b mod K`` for
    every use, K the fewest slots that divide the blocks an execution advances (so each use keeps one static slot)
    and never give one slot to two blocks live at once in program order (the unrolled order, which the rolled program
    keeps: within a body dependency-analysis orders accesses to one slot, and executions are apart by barriers)."""
    spans: dict[int, list[int]] = {}  # block -> [first, last] in the unrolled program order
    length = loop.end - loop.begin
    for use in uses.static:
        b = _block_of(loc, g, use)
        if b is None or loop.begin < use.pos < loop.end:
            return None
        at = use.pos if use.pos < loop.begin else use.pos + (loop.executions - 1) * length
        _widen(spans, b, at)
    for use in uses.dynamic:
        b = _block_of(loc, g, use)
        for n in range(loop.executions):
            _widen(spans, b + n * per_execution, use.pos + n * length)  # type: ignore[operator]
    total = g.row // g.block
    for k in (k for k in range(2, per_execution + 1) if per_execution % k == 0 and k < total):
        order: dict[int, list[list[int]]] = {}
        for b in sorted(spans, key=lambda b: spans[b][0]):
            order.setdefault(b % k, []).append(spans[b])
        if all(a[1] < c[0] for ranges in order.values() for a, c in zip(ranges, ranges[1:])):
            return _Plan(k, True)
    return None


def _widen(spans: dict[int, list[int]], block: int, at: int) -> None:
    span = spans.setdefault(block, [at, at])
    span[0], span[1] = min(span[0], at), max(span[1], at)


def _rotate(loc: bir.MemLocOp, g: BlockGeometry, uses: _Uses, plan: _Plan) -> None:
    """The moved accesses onto ``<name>.rot`` (``plan.slots`` blocks, each static in its slot)."""
    name, dims = loc.sym_name.data, loc.dims
    slots = plan.slots
    buffer = bir.MemLocOp(f"{name}.rot", loc.mem, [dims[0], slots, *dims[2:]], loc.dtype.data, "internal")
    if loc.loc is not None:
        buffer.properties["loc"] = loc.loc
    loc.parent_block().insert_op_before(buffer, loc)  # type: ignore[union-attr]
    for use in [*uses.dynamic, *(uses.static if plan.modular else ())]:
        ap = use.inst.aps.data[use.index]
        elem = _elem(loc, ap)
        b, within = rebased_in_block(_static(ap), g, elem)  # type: ignore[misc]
        partition, rest = divmod(within.offset_value * elem, g.block)
        offset = (partition * slots * g.block + plan.slot(b) * g.block + rest) // elem
        (_, nparts), *free = within.pairs
        moved = AccessPatternAttr((offset, (), ((slots * g.block // elem, nparts), *free), ap.view.data, _STATIC))
        refs, aps = use.inst.ref_names, list(use.inst.aps.data)
        refs[use.index], aps[use.index] = buffer.sym_name.data, moved
        use.inst.properties["refs"] = names_attr(refs)
        use.inst.properties["aps"] = ArrayAttr(aps)
    if plan.modular or not uses.static:
        loc.detach()
        loc.erase()
