"""``dependency-analysis``: flow/output/anti edges from the physical bytes each instruction touches.

Runs after allocation, so tensors that share addresses (reused memory) are ordered too. Each operand's footprint
is its partition-independent byte span, tracked in chunks (64 B in SBUF — the allocation alignment, so distinct small tiles never share one — 512 B in PSUM, 4 KiB in HBM): a coarse
chunk can only add an edge, never lose one. For every chunk we keep the last writer and the readers since.

State inside an engine is ordered the same way, per (engine, state): the accumulator registers (``reduce_cmd``: an
instruction that continues an accumulation — ``reduce`` / ``load_reduce``, or ``idle`` with a ``reduce_res`` —
reads them; ``reset*``/``reduce``/``load_reduce`` write them) and whatever a declaration names in ``reads_state`` /
``writes_state`` (the PRNG state of ``rng``, ``dropout``, ``set_rng_seed`` …); a state of ``CORE_STATES`` (the
position in the core's sendrecv sequence) is one per core, whatever the engine. A reader depends on the last writer
(flow), a writer on the readers since (anti) and on the last writer (output).

A register-offset operand (a rolled loop's ``+ c*r``) may touch its whole tensor, except that inside one stretch
between control instructions (where registers do not change) operands moving with the same register by the same
byte scale keep their static footprints when they are the only ones touching those bytes (``_stretch_footprints``).

A control instruction (register or loop, ``IsControl``) is a barrier every engine reaches together: it orders
everything before it before everything after it, so it has no edges and the tables start afresh after it.

Explicit edges (``nisa.NkiInstruction.depends_on``): an instruction whose ``after`` lists a tag gets an ``ordered``
edge on the latest earlier instruction carrying that ``tag`` (in unrolled BIR: the same iteration's copy, or the one
in an enclosing scope; after a loop, its last iteration's). A producer before the last control instruction is
already ordered by that barrier, so it adds no edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.instructions import reads_dst, str_field
from nkic.dialects.traits import IsControl
from nkic.passes.physical import Placement, place
from nkic.target.instructions import CORE_STATES
from nkic.target.vocab import dtype_size

CHUNK = {"sbuf": 64, "psum": 512, "hbm": 4096}


Chunk = tuple[str, str, int]
RegClass = tuple[int, int]  # (register, bytes the address moves per unit of it)


def footprint_chunks(inst: bir.BirInst, role: str, locs: dict[str, bir.MemLocOp]) -> list[Chunk]:
    return _footprints(inst, role, locs)[1]


def _footprints(
    inst: bir.BirInst, role: str, locs: dict[str, bir.MemLocOp]
) -> tuple[list[Chunk], list[Chunk], RegClass | None]:
    """The operand's chunks at its static address, the chunks it may touch (its whole tensor when its address is
    known at run time only), and for a register-offset operand its class (register, byte scale)."""
    name, ap = inst.ref(role), inst.ap(role)
    assert name is not None and ap is not None
    loc = locs[name]
    p = place(loc, ap, inst, role)
    lo, hi = p.byte_span()
    c = CHUNK[p.memory]
    precise = [(p.memory, p.var, k) for k in range(lo // c, (hi - 1) // c + 1)]
    if not ap.is_dynamic:
        return precise, precise, None
    lo, hi = _whole(loc, p)  # the address is known at run time only: the operand may touch its whole tensor
    whole = [(p.memory, p.var, k) for k in range(lo // c, (hi - 1) // c + 1)]
    cls = None
    if ap.dyn_kind.data == "reg":
        cls = (ap.dyn_reg.data, ap.dyn_scale.data * dtype_size(ap.operand_dtype(loc.dtype.data)))
    return precise, whole, cls


def _stretch_footprints(
    insts: list[bir.BirInst], locs: dict[str, bir.MemLocOp]
) -> dict[int, list[tuple[str, list[Chunk]]]]:
    """Each operand's chunks in one barrier-free stretch. Registers change only at control instructions, so
    within a stretch two operands offset by the same register with the same byte scale move together: when every
    operand that may touch the bytes of a register-offset operand's tensor is of that one class (a rolled loop's
    body, where iteration copies or groups address one tensor through the loop's counter), their static addresses
    alone decide whether they overlap. Otherwise the operand keeps its whole tensor."""
    found = {inst.inst_id: [(role, *_footprints(inst, role, locs)) for role in inst.role_names] for inst in insts}
    classes: dict[Chunk, set[RegClass | None]] = {}
    for ops in found.values():
        for _, _, whole, cls in ops:
            for k in whole:
                classes.setdefault(k, set()).add(cls)
    result: dict[int, list[tuple[str, list[Chunk]]]] = {}
    for me, ops in found.items():
        result[me] = [
            (role, precise if cls is not None and all(classes[k] == {cls} for k in whole) else whole)
            for role, precise, whole, cls in ops
        ]
    return result


def _whole(loc: bir.MemLocOp, p: Placement) -> tuple[int, int]:
    """The bytes of a memloc: its variable in HBM, its bytes per partition on chip."""
    size = dtype_size(loc.dtype.data)
    for d in (loc.dims if p.memory == "hbm" else loc.dims[1:]):
        size *= d
    base = 0 if p.memory == "hbm" else loc.addr[1]
    return base, base + size


_READS_REGISTERS = frozenset({"reduce", "load_reduce"})
_WRITES_REGISTERS = frozenset({"reset", "reset_reduce", "reduce", "load_reduce"})


def register_use(inst: bir.BirInst) -> tuple[bool, bool]:
    """(reads, writes) of the engine's accumulator registers, from the instruction's ``reduce_cmd``."""
    if not any(f.kind == "reduce_cmd" for f in inst.SPEC.fields):
        return False, False
    cmd = str_field(inst, "reduce_cmd") or "idle"
    reads = cmd in _READS_REGISTERS or (cmd == "idle" and inst.has("reduce_res"))
    return reads, cmd in _WRITES_REGISTERS


def state_use(inst: bir.BirInst) -> dict[str, tuple[bool, bool]]:
    """(reads, writes) per piece of engine state: the accumulator registers (from ``reduce_cmd``) and what the
    declaration names (``reads_state`` / ``writes_state``, e.g. the PRNG state)."""
    spec = inst.SPEC
    named = spec.reads_state | spec.writes_state
    uses = {name: (name in spec.reads_state, name in spec.writes_state) for name in named}
    reads, writes = register_use(inst)
    if reads or writes:
        uses["accumulators"] = (reads, writes)
    return uses


EngineState = tuple[str, str]  # (engine, state name)


@dataclass
class _StateOrder:
    """Orders the readers and writers of engine state, one (engine, state) at a time.

    A reader depends on the last writer (flow); a writer on the readers since (anti). Writes with no read in between
    stay unordered while nobody reads (the accumulator writes of consecutive ``reset_reduce`` activations, each
    consumed by its own ``reduce_res``), but once a reader depends on the last of them, that writer is ordered after
    the others (output), so none of them can slip between it and the reader (two seeds then a draw)."""

    writer: dict[EngineState, int] = field(default_factory=dict)
    readers: dict[EngineState, list[int]] = field(default_factory=dict)
    unordered: dict[EngineState, list[int]] = field(default_factory=dict)  # earlier writers not before the writer

    def edges(self, inst: bir.BirInst, late: dict[int, dict[int, str]]) -> dict[int, str]:
        """``inst``'s edges; output edges of an earlier writer go to ``late[writer]``."""
        me, edges = inst.inst_id, {}
        for name, (reads, writes) in state_use(inst).items():
            key = ("core" if name in CORE_STATES else inst.engine.data, name)
            last = self.writer.get(key)
            if reads and last is not None:
                edges[last] = "flow"
                for w in self.unordered.pop(key, ()):
                    late.setdefault(last, {}).setdefault(w, "output")
            if writes:
                since = [r for r in self.readers.get(key, ()) if r != me]
                edges.update({r: "anti" for r in since if edges.get(r) != "flow"})
                if last is not None and last != me and not since and not reads:
                    self.unordered.setdefault(key, []).append(last)
                self.writer[key], self.readers[key] = me, []
            if reads:
                self.readers.setdefault(key, []).append(me)
        return edges


def analyse(fn: bir.FunctionOp) -> None:
    locs = fn.memlocs()
    writer: dict[tuple[str, str, int], int] = {}
    readers: dict[tuple[str, str, int], list[int]] = {}
    state = _StateOrder()
    all_edges: dict[int, dict[int, str]] = {}
    late: dict[int, dict[int, str]] = {}
    tagged: dict[str, int] = {}  # explicit-ordering tag -> the latest instruction carrying it
    insts = list(fn.instructions())
    footprints: dict[int, list[tuple[str, list[Chunk]]]] = {}
    for i, inst in enumerate(insts):
        if inst.has_trait(IsControl):
            writer, readers, state, tagged = {}, {}, _StateOrder(), {}
            all_edges[inst.inst_id] = {}
            continue
        if inst.inst_id not in footprints:  # the start of a stretch: its operands, all at once
            footprints = _stretch_footprints(_stretch(insts, i), locs)
        reads: set[tuple[str, str, int]] = set()
        writes: set[tuple[str, str, int]] = set()
        for role, chunks in footprints[inst.inst_id]:
            (writes if role in inst.SPEC.write_roles else reads).update(chunks)
            if role == "dst" and reads_dst(inst):
                reads.update(chunks)
        edges = {d: k for d, k in state.edges(inst, late).items() if d != inst.inst_id}
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
        for tag in _after(inst):
            if tag in tagged:
                edges.setdefault(tagged[tag], "ordered")
        if inst.tag is not None:
            tagged[inst.tag.data] = me
        for c in reads:
            readers.setdefault(c, []).append(me)
        for c in writes:
            writer[c] = me
            readers[c] = []
        all_edges[me] = edges
    for inst in insts:
        edges = all_edges[inst.inst_id]
        for d, k in late.get(inst.inst_id, {}).items():
            edges.setdefault(d, k)
        if edges:
            inst.properties["deps"] = bir.deps_attr((k, i) for i, k in sorted(edges.items()))
        else:
            inst.properties.pop("deps", None)


def _stretch(insts: list[bir.BirInst], start: int) -> list[bir.BirInst]:
    """The instructions from ``start`` up to the next control instruction."""
    end = start
    while end < len(insts) and not insts[end].has_trait(IsControl):
        end += 1
    return insts[start:end]


def _after(inst: bir.BirInst) -> list[str]:
    """The tags ``inst`` runs after (``nisa.NkiInstruction.depends_on``)."""
    return [] if inst.after is None else [a.data for a in inst.after.data]


@dataclass(frozen=True)
class DependencyAnalysisPass(ModulePass):
    name = "dependency-analysis"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            if any(isinstance(o, bir.LoopOp) for o in fn.body.walk()):
                raise PassFailedException("dependency-analysis needs unrolled BIR (run bir-unroll first)")
            analyse(fn)
