"""``dependency-analysis``: flow/output/anti edges from the physical bytes each instruction touches.

Runs after allocation, so tensors that share addresses (reused memory) are ordered too. Each operand's footprint
is its partition-independent byte span, tracked in chunks (64 B in SBUF — the allocation alignment, so distinct small tiles never share one — 512 B in PSUM, 4 KiB in HBM): a coarse
chunk can only add an edge, never lose one. For every chunk we keep the last writer and the readers since.

The accumulator registers of an engine (``reduce_cmd``) are state too: an instruction that continues an
accumulation (``reduce`` / ``load_reduce``, or ``idle`` with a ``reduce_res``) depends on the last one that wrote
them (flow), and a new write waits for the readers since (anti). Writes that nobody reads in between need no order.

A control instruction (register or loop, ``IsControl``) is a barrier every engine reaches together: it orders
everything before it before everything after it, so it has no edges and the tables start afresh after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.instructions import reads_dst, str_field
from nkic.dialects.traits import IsControl
from nkic.passes.physical import place

CHUNK = {"sbuf": 64, "psum": 512, "hbm": 4096}


def footprint_chunks(inst: bir.BirInst, role: str, locs: dict[str, bir.MemLocOp]) -> list[tuple[str, str, int]]:
    name, ap = inst.ref(role), inst.ap(role)
    assert name is not None and ap is not None
    p = place(locs[name], ap, inst, role)
    lo, hi = p.byte_span()
    c = CHUNK[p.memory]
    return [(p.memory, p.var, k) for k in range(lo // c, (hi - 1) // c + 1)]


_READS_REGISTERS = frozenset({"reduce", "load_reduce"})
_WRITES_REGISTERS = frozenset({"reset", "reset_reduce", "reduce", "load_reduce"})


def register_use(inst: bir.BirInst) -> tuple[bool, bool]:
    """(reads, writes) of the engine's accumulator registers, from the instruction's ``reduce_cmd``."""
    if not any(f.kind == "reduce_cmd" for f in inst.SPEC.fields):
        return False, False
    cmd = str_field(inst, "reduce_cmd") or "idle"
    reads = cmd in _READS_REGISTERS or (cmd == "idle" and inst.has("reduce_res"))
    return reads, cmd in _WRITES_REGISTERS


def _register_edges(inst: bir.BirInst, writer: dict[str, int], readers: dict[str, list[int]]) -> dict[int, str]:
    reads, writes = register_use(inst)
    engine, edges = inst.engine.data, {}
    if reads and engine in writer:
        edges[writer[engine]] = "flow"
    if writes:
        edges.update({r: "anti" for r in readers.get(engine, ())})
        writer[engine], readers[engine] = inst.inst_id, []
    if reads:
        readers.setdefault(engine, []).append(inst.inst_id)
    return edges


def analyse(fn: bir.FunctionOp) -> None:
    locs = fn.memlocs()
    writer: dict[tuple[str, str, int], int] = {}
    readers: dict[tuple[str, str, int], list[int]] = {}
    reg_writer: dict[str, int] = {}
    reg_readers: dict[str, list[int]] = {}
    for inst in fn.instructions():
        if inst.has_trait(IsControl):
            writer, readers, reg_writer, reg_readers = {}, {}, {}, {}
            inst.properties.pop("deps", None)
            continue
        reads: set[tuple[str, str, int]] = set()
        writes: set[tuple[str, str, int]] = set()
        for role in inst.role_names:
            chunks = footprint_chunks(inst, role, locs)
            (writes if role in inst.SPEC.write_roles else reads).update(chunks)
            if role == "dst" and reads_dst(inst):
                reads.update(chunks)
        edges = {d: k for d, k in _register_edges(inst, reg_writer, reg_readers).items() if d != inst.inst_id}
        for c in reads:
            if c in writer:
                edges.setdefault(writer[c], "flow")
        for c in writes:
            if c in writer:
                edges.setdefault(writer[c], "output")
            for r in readers.get(c, ()):
                if r != inst.inst_id:
                    edges.setdefault(r, "anti")
        me = inst.inst_id
        for c in reads:
            readers.setdefault(c, []).append(me)
        for c in writes:
            writer[c] = me
            readers[c] = []
        if edges:
            inst.properties["deps"] = ArrayAttr([bir.DepAttr(k, i) for i, k in sorted(edges.items())])
        else:
            inst.properties.pop("deps", None)


@dataclass(frozen=True)
class DependencyAnalysisPass(ModulePass):
    name = "dependency-analysis"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            if any(isinstance(o, bir.LoopOp) for o in fn.body.walk()):
                raise PassFailedException("dependency-analysis needs unrolled BIR (run bir-unroll first)")
            analyse(fn)
