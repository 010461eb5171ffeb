"""``dependency-analysis``: flow/output/anti edges from the physical bytes each instruction touches.

Runs after allocation, so tensors that share addresses (reused memory) are ordered too. Each operand's footprint
is its partition-independent byte span, tracked in chunks (64 B in SBUF — the allocation alignment, so distinct small tiles never share one — 512 B in PSUM, 4 KiB in HBM): a coarse
chunk can only add an edge, never lose one. For every chunk we keep the last writer and the readers since; an
operand's chunks are one interval (the span's), so the tables are kept per memory variable as sorted intervals of
chunks with the same state (``_Intervals``): the cost of an operand is the number of intervals it overlaps, not the
number of chunks it spans (a 128-row tile of a wide HBM tensor spans hundreds of 4 KiB chunks).

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

from bisect import bisect_left, bisect_right
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


Footprint = tuple[tuple[str, str], int, int]  # ((memory, variable), first chunk, last chunk + 1)
RegClass = tuple[int, int]  # (register, bytes the address moves per unit of it)


def footprint(inst: bir.BirInst, role: str, locs: dict[str, bir.MemLocOp]) -> Footprint:
    """The chunks an operand may touch: those of its byte span (of its whole tensor if the address is dynamic)."""
    return _footprints(inst, role, locs)[1]


def _footprints(
    inst: bir.BirInst, role: str, locs: dict[str, bir.MemLocOp]
) -> tuple[Footprint, Footprint, RegClass | None]:
    """The operand's chunks at its static address, the chunks it may touch (its whole tensor when its address is
    known at run time only), and for a register-offset operand its class (register, byte scale)."""
    name, ap = inst.ref(role), inst.ap(role)
    assert name is not None and ap is not None
    loc = locs[name]
    p = place(loc, ap, inst, role)
    lo, hi = p.byte_span()
    c = CHUNK[p.memory]
    precise = ((p.memory, p.var), lo // c, (hi - 1) // c + 1)
    if not ap.is_dynamic:
        return precise, precise, None
    lo, hi = _whole(loc, p)  # the address is known at run time only: the operand may touch its whole tensor
    whole = ((p.memory, p.var), lo // c, (hi - 1) // c + 1)
    cls = None
    if ap.dyn_kind.data == "reg":
        cls = (ap.dyn_reg.data, ap.dyn_scale.data * dtype_size(ap.operand_dtype(loc.dtype.data)))
    return precise, whole, cls


def _stretch_footprints(insts: list[bir.BirInst], locs: dict[str, bir.MemLocOp]) -> dict[int, list[Footprint]]:
    """Each operand's chunks (in role order) in one barrier-free stretch. Registers change only at control
    instructions, so within a stretch two operands offset by the same register with the same byte scale move
    together: when every operand that may touch the bytes of a register-offset operand's tensor is of that one class
    (a rolled loop's body, where iteration copies or groups address one tensor through the loop's counter), their
    static addresses alone decide whether they overlap. Otherwise the operand keeps its whole tensor."""
    found = {inst.inst_id: [_footprints(inst, role, locs) for role in inst.role_names] for inst in insts}
    if all(cls is None for ops in found.values() for _, _, cls in ops):  # no register operand (unrolled code)
        return {me: [whole for _, whole, _ in ops] for me, ops in found.items()}
    spans: dict[tuple[str, str], list[tuple[int, int, RegClass | None]]] = {}
    for ops in found.values():
        for _, (var, lo, hi), cls in ops:
            spans.setdefault(var, []).append((lo, hi, cls))

    def alone(whole: Footprint, cls: RegClass) -> bool:
        """No operand of another class may touch a chunk of ``whole``."""
        var, lo, hi = whole
        return all(c == cls or h <= lo or l >= hi for l, h, c in spans[var])

    return {
        me: [precise if cls is not None and alone(whole, cls) else whole for precise, whole, cls in ops]
        for me, ops in found.items()
    }


def footprint_chunks(inst: bir.BirInst, role: str, locs: dict[str, bir.MemLocOp]) -> list[tuple[str, str, int]]:
    """The operand's chunks one by one (the reference the interval tables must agree with)."""
    (memory, var), lo, hi = footprint(inst, role, locs)
    return [(memory, var, k) for k in range(lo, hi)]


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


class _Intervals:
    """The last writer and the readers since, for every chunk of one memory variable, as maximal runs of chunks
    with the same state: ``starts[j]`` is where run ``j`` begins (run 0 begins at chunk 0, the last run never ends).
    Splitting a run copies its readers; a write merges the runs it covers into one."""

    __slots__ = ("starts", "writer", "readers")

    def __init__(self) -> None:
        self.starts: list[int] = [0]
        self.writer: list[int | None] = [None]
        self.readers: list[list[int]] = [[]]

    def _cut(self, x: int) -> int:
        """Make a run begin at chunk ``x``; its index."""
        j = bisect_right(self.starts, x) - 1
        if self.starts[j] == x:
            return j
        self.starts.insert(j + 1, x)
        self.writer.insert(j + 1, self.writer[j])
        self.readers.insert(j + 1, list(self.readers[j]))
        return j + 1

    def runs(self, lo: int, hi: int) -> range:
        """The runs overlapping chunks [lo, hi)."""
        starts = self.starts
        return range(bisect_right(starts, lo) - 1, bisect_left(starts, hi))

    def read(self, lo: int, hi: int, me: int) -> None:
        j, k = self._cut(lo), self._cut(hi)
        for rs in self.readers[j:k]:
            if not rs or rs[-1] != me:  # once per instruction, as with a set of chunks
                rs.append(me)

    def write(self, lo: int, hi: int, me: int) -> None:
        j, k = self._cut(lo), self._cut(hi)
        self.starts[j + 1 : k] = []
        self.writer[j:k] = [me]
        self.readers[j:k] = [[]]


Access = tuple[list[Footprint], list[Footprint]]  # (chunks read, chunks written)


PAGE_BITS = 12  # a table covers 4096 chunks: a run list stays short (inserting into it is a copy of the list)


def _pages(spans: list[Footprint]) -> list[tuple[tuple[str, str, int], int, int]]:
    """``spans`` cut at page boundaries, each piece keyed by (memory, variable, page). A chunk is in one page, so
    per-page tables give the same last writer and readers per chunk as one table per variable; pages keep each
    table short where a variable is large and finely cut (``pre-schedule`` gives every tile a private address)."""
    out = []
    for (memory, var), lo, hi in spans:
        first, last = lo >> PAGE_BITS, (hi - 1) >> PAGE_BITS
        if first == last:
            out.append(((memory, var, first), lo, hi))
            continue
        for page in range(first, last + 1):
            out.append(((memory, var, page), max(lo, page << PAGE_BITS), min(hi, (page + 1) << PAGE_BITS)))
    return out


class _ChunkTables:
    """The flow/output/anti edges of a sequence of instructions from the chunks each reads and writes."""

    def __init__(self) -> None:
        self.vars: dict[tuple[str, str, int], _Intervals] = {}

    def edges(self, me: int, reads: list[Footprint], writes: list[Footprint], edges: dict[int, str]) -> None:
        """Add ``me``'s edges to ``edges`` (kinds already there stay): flow on the last writer of a chunk it reads,
        output on the last writer of a chunk it writes, anti on the readers since; an instruction that would get
        output on one chunk and anti on another gets output."""
        for key, lo, hi in _pages(reads):
            t = self.vars.get(key)
            if t is not None:
                for j in t.runs(lo, hi):
                    w = t.writer[j]
                    if w is not None:
                        edges.setdefault(w, "flow")
        anti: list[list[int]] = []
        for key, lo, hi in _pages(writes):
            t = self.vars.get(key)
            if t is not None:
                for j in t.runs(lo, hi):
                    w = t.writer[j]
                    if w is not None:
                        edges.setdefault(w, "output")
                    anti.append(t.readers[j])
        for rs in anti:
            for r in rs:
                if r != me:
                    edges.setdefault(r, "anti")

    def record(self, me: int, reads: list[Footprint], writes: list[Footprint]) -> None:
        for key, lo, hi in _pages(reads):
            t = self.vars.get(key)
            if t is None:
                t = self.vars[key] = _Intervals()
            t.read(lo, hi, me)
        for key, lo, hi in _pages(writes):
            t = self.vars.get(key)
            if t is None:
                t = self.vars[key] = _Intervals()
            t.write(lo, hi, me)


def accesses(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], chosen: list[Footprint] | None = None) -> Access:
    """The chunk intervals ``inst`` reads and writes (``dst`` is read too when the instruction accumulates into it);
    ``chosen``: its operands' footprints in role order (``_stretch_footprints``), else each one's ``footprint``."""
    reads: list[Footprint] = []
    writes: list[Footprint] = []
    write_roles = inst.SPEC.write_roles
    for k, role in enumerate(inst.role_names):
        f = footprint(inst, role, locs) if chosen is None else chosen[k]
        (writes if role in write_roles else reads).append(f)
        if role == "dst" and reads_dst(inst):
            reads.append(f)
    return reads, writes


def analyse(fn: bir.FunctionOp) -> None:
    locs = fn.memlocs()
    chunks = _ChunkTables()
    state = _StateOrder()
    all_edges: dict[int, dict[int, str]] = {}
    late: dict[int, dict[int, str]] = {}
    tagged: dict[str, int] = {}  # explicit-ordering tag -> the latest instruction carrying it
    insts = list(fn.instructions())
    footprints: dict[int, list[Footprint]] = {}
    for i, inst in enumerate(insts):
        if inst.has_trait(IsControl):
            chunks, state, tagged = _ChunkTables(), _StateOrder(), {}
            all_edges[inst.inst_id] = {}
            continue
        me = inst.inst_id
        if me not in footprints:  # the start of a stretch: its operands, all at once
            footprints = _stretch_footprints(_stretch(insts, i), locs)
        reads, writes = accesses(inst, locs, footprints[me])
        edges = {d: k for d, k in state.edges(inst, late).items() if d != me}
        chunks.edges(me, reads, writes, edges)
        for tag in _after(inst):
            if tag in tagged:
                edges.setdefault(tagged[tag], "ordered")
        if inst.tag is not None:
            tagged[inst.tag.data] = me
        chunks.record(me, reads, writes)
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
