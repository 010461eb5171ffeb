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

import functools
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr, ApData, dense_ints
from nkic.dialects.instructions import reads_dst, str_field
from nkic.dialects.traits import AccumulatesDst, IsControl, IsDma, ReadsDst
from nkic.passes.physical import ON_CHIP, Placement
from nkic.target.instructions import CORE_STATES
from nkic.target.machine import NUM_PARTITIONS
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
    k = inst.role_index(role)
    assert k is not None
    return _at(inst, operands(inst, locs)[k], locs, None)


class _Operand(NamedTuple):
    """An operand's bytes relative to its memloc's address (on chip; in HBM, within its variable), everything
    ``physical.place`` decides that does not depend on the address. The checks ``place`` makes are kept as their
    messages, raised in ``place``'s order once the address is looked up: ``early`` before it (a loop index),
    ``late`` after it (a partition step that is not the row size); the message gets the instruction's id when
    raised (renumbering passes run between two analyses)."""

    role: str
    name: str  # the memloc
    key: tuple[str, str]  # (memory, variable) of the footprint
    chunk: int
    lo: int  # [lo, hi): the bytes of the access pattern's span
    hi: int
    size: int  # the bytes of the whole tensor (per partition on chip), for a dynamic address
    p0: int  # first partition and partitions, on chip
    nparts: int
    dynamic: bool
    cls: RegClass | None
    early: bool  # "still uses a loop index"
    late: str | None  # "the partition step ... of" (then the memloc)


def _operand(role: str, name: str, ap: AccessPatternAttr, loc_props: dict[str, Attribute]) -> _Operand:
    """What ``place`` and ``_whole`` compute for one operand, relative to the memloc's address."""
    rel = _relative(ap.data, loc_props["memory"].data, dense_ints(loc_props["shape"]),  # type: ignore[attr-defined]
                    loc_props["dtype"].data)  # type: ignore[attr-defined]  # fmt: skip
    # tuple.__new__: a NamedTuple's own constructor is a Python call, ~1 us for each of tens of thousands of operands
    return tuple.__new__(_Operand, (role, name, (rel[0], name if rel[0] == "hbm" else "")) + rel[1:])


@functools.lru_cache(maxsize=1 << 16)
def _relative(ap: ApData, mem: str, dims: tuple[int, ...], storage_dtype: str) -> tuple[Any, ...]:
    """``_operand`` less the names, from an access pattern's plain values and its memloc's memory, shape and dtype:
    shared by the many operands with the same tile pattern (attention's are a few dozen)."""
    offset, ivs, pairs, view, dyn = ap
    memory, p0, nparts, late = "hbm", 0, 0, None
    size = dtype_size(storage_dtype)
    dtype = view or storage_dtype
    es = dtype_size(dtype)
    early = bool(ivs)
    if not early and mem in ON_CHIP:
        memory = mem
        row = size
        for d in dims[1:]:
            row *= d
        size = row
        row //= es
        (pstep, nparts), *free = pairs
        pairs = tuple(free)
        if nparts > 1 and pstep != row:
            late = f"the partition step {pstep} must equal the row size {row} of"
        else:
            p0, offset = divmod(offset, row)
    elif not early:
        for d in dims:
            size *= d
    lo, hi = Placement(memory, "", 0, nparts, offset * es, pairs, dtype).byte_span()
    kind, _, reg, scale = dyn
    cls = (reg, scale * es) if kind == "reg" else None
    return (memory, CHUNK[memory], lo, hi, size, p0, nparts, bool(kind), cls, early, late)


_OPERANDS = "_nkic_dependency_operands"
Addresses = dict[str, tuple[int, ...]]  # memloc -> (partition, byte): addresses that stand in for the memlocs' own


def operands(inst: bir.BirInst, locs: dict[str, bir.MemLocOp]) -> list[_Operand]:
    """``inst``'s operands relative to their memlocs' addresses, in role order. Memoised on the instruction (the
    analysis runs twice, before and after allocation, with other addresses): an entry holds while the operand
    properties are the very same attributes and each memloc's memory, shape and dtype are equal."""
    props = inst.properties
    roles, aps, refs = props["roles"], props["aps"], props["refs"]
    names = [r.data for r in refs.data]
    loc_key = tuple([(p["memory"], p["shape"], p["dtype"]) for p in [locs[n].properties for n in names]])
    hit = inst.__dict__.get(_OPERANDS)
    if hit is not None and hit[0] is roles and hit[1] is aps and hit[2] is refs and hit[3] == loc_key:
        return hit[4]
    ops = [_operand(r.data, n, ap, locs[n].properties) for r, n, ap in zip(roles.data, names, aps.data)]
    inst.__dict__[_OPERANDS] = (roles, aps, refs, loc_key, ops)
    return ops


def _operand_footprints(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], addresses: Addresses | None = None
                        ) -> list[tuple[Footprint, Footprint, RegClass | None]]:  # fmt: skip
    """``_footprints`` of every operand in role order, at the memlocs' addresses (``addresses`` first)."""
    return [_at(inst, op, locs, addresses) for op in operands(inst, locs)]


def _at(inst: bir.BirInst, op: _Operand, locs: dict[str, bir.MemLocOp], addresses: Addresses | None
        ) -> tuple[Footprint, Footprint, RegClass | None]:  # fmt: skip
    """One operand's ``_footprints`` at its memloc's address, with ``place``'s checks in ``place``'s order."""
    if op.early:
        raise PassFailedException(f"instruction {inst.inst_id} still uses a loop index (run bir-unroll first)")
    base = 0
    if op.key[0] != "hbm":
        addr = None if addresses is None else addresses.get(op.name)
        if addr is None:
            addr = locs[op.name].addr
            if addr is None:
                raise PassFailedException(f"memloc '{op.name}' has no address (run allocate-memory first)")
        if op.late is not None:
            raise PassFailedException(f"instruction {inst.inst_id} {op.role}: {op.late} '{op.name}'")
        part, base = addr
        if op.p0 + part + op.nparts > NUM_PARTITIONS:
            raise PassFailedException(f"instruction {inst.inst_id} {op.role} reaches past partition "
                                      f"{NUM_PARTITIONS - 1}")  # fmt: skip
    c = op.chunk
    precise = (op.key, (base + op.lo) // c, (base + op.hi - 1) // c + 1)
    if not op.dynamic:
        return precise, precise, None
    # the address is known at run time only: the operand may touch its whole tensor
    return precise, (op.key, base // c, (base + op.size - 1) // c + 1), op.cls


def _stretch_footprints(insts: list[bir.BirInst], locs: dict[str, bir.MemLocOp], addresses: Addresses | None = None
                        ) -> dict[int, list[Footprint]]:  # fmt: skip
    """Each operand's chunks (in role order) in one barrier-free stretch. Registers change only at control
    instructions, so within a stretch two operands offset by the same register with the same byte scale move
    together: when every operand that may touch the bytes of a register-offset operand's tensor is of that one class
    (a rolled loop's body, where iteration copies or groups address one tensor through the loop's counter), their
    static addresses alone decide whether they overlap. Otherwise the operand keeps its whole tensor."""
    found: dict[int, list[tuple[Footprint, Footprint, RegClass | None]]] = {}
    wholes: dict[int, list[Footprint]] = {}
    register = False
    for inst in insts:
        me = inst.properties["id"].value.data  # type: ignore[attr-defined]
        ops = found[me] = _operand_footprints(inst, locs, addresses)
        wholes[me] = [whole for _, whole, _ in ops]
        register = register or any(cls is not None for _, _, cls in ops)
    if not register:  # no register operand (unrolled code): every operand's footprint as is
        return wholes
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


class Kind(NamedTuple):
    """What an instruction class declares, as the analysis and the schedulers ask for it (traits are class-level in
    xDSL: looked up once per class instead of once per instruction and pass)."""

    control: bool  # IsControl
    dma: bool  # IsDma
    write_roles: frozenset[str]
    reads_dst: bool  # ReadsDst: dst is always read too
    accumulates: bool  # AccumulatesDst: dst is read too unless ``accumulate = false``
    reduce_cmd: bool  # has a ``reduce_cmd`` field (accumulator registers)
    named: tuple[tuple[str, tuple[bool, bool]], ...]  # the declaration's (state, (reads, writes))


_KINDS: dict[type, Kind] = {}


def kind_of(inst: bir.BirInst) -> Kind:
    """``inst``'s class's ``Kind``."""
    cls = type(inst)
    k = _KINDS.get(cls)
    if k is None:
        spec = getattr(cls, "SPEC", None)
        write_roles: frozenset[str] = frozenset(spec.write_roles) if spec is not None else frozenset()
        named: tuple[tuple[str, tuple[bool, bool]], ...] = ()
        if spec is not None:
            both = spec.reads_state | spec.writes_state
            named = tuple((n, (n in spec.reads_state, n in spec.writes_state)) for n in both)
        k = _KINDS[cls] = Kind(
            cls.has_trait(IsControl), cls.has_trait(IsDma), write_roles, cls.has_trait(ReadsDst),
            cls.has_trait(AccumulatesDst), spec is not None and any(f.kind == "reduce_cmd" for f in spec.fields),
            named,
        )  # fmt: skip
    return k


def _state_use(inst: bir.BirInst, k: Kind) -> dict[str, tuple[bool, bool]]:
    """``state_use`` from the class's ``Kind``."""
    uses = dict(k.named)
    if k.reduce_cmd:
        reads, writes = register_use(inst)
        if reads or writes:
            uses["accumulators"] = (reads, writes)
    return uses


def _reads_dst(inst: bir.BirInst, k: Kind) -> bool:
    """``reads_dst`` from the class's ``Kind``."""
    if k.reads_dst:
        return True
    acc = inst.properties.get("accumulate")
    return k.accumulates and not (isinstance(acc, IntegerAttr) and acc.value.data == 0)


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
        uses = _state_use(inst, kind_of(inst))
        if not uses:
            return {}
        me, edges = inst.inst_id, {}
        for name, (reads, writes) in uses.items():
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
        self._edges(me, _pages(reads), _pages(writes), edges)

    def step(self, me: int, reads: list[Footprint], writes: list[Footprint], edges: dict[int, str]) -> None:
        """``edges`` then ``record``, the spans cut into pages once."""
        read_pages, write_pages = _pages(reads), _pages(writes)
        self._edges(me, read_pages, write_pages, edges)
        self._record(me, read_pages, write_pages)

    def _edges(self, me: int, reads: list[tuple[tuple[str, str, int], int, int]],
               writes: list[tuple[tuple[str, str, int], int, int]], edges: dict[int, str]) -> None:  # fmt: skip
        for key, lo, hi in reads:
            t = self.vars.get(key)
            if t is not None:
                for j in t.runs(lo, hi):
                    w = t.writer[j]
                    if w is not None:
                        edges.setdefault(w, "flow")
        anti: list[list[int]] = []
        for key, lo, hi in writes:
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
        self._record(me, _pages(reads), _pages(writes))

    def _record(self, me: int, reads: list[tuple[tuple[str, str, int], int, int]],
                writes: list[tuple[tuple[str, str, int], int, int]]) -> None:  # fmt: skip
        for key, lo, hi in reads:
            t = self.vars.get(key)
            if t is None:
                t = self.vars[key] = _Intervals()
            t.read(lo, hi, me)
        for key, lo, hi in writes:
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


def _accesses(inst: bir.BirInst, k: Kind, chosen: list[Footprint]) -> Access:
    """``accesses`` from the class's ``Kind`` and the operands' chosen footprints."""
    reads: list[Footprint] = []
    writes: list[Footprint] = []
    write_roles = k.write_roles
    for r, f in zip(inst.properties["roles"].data, chosen):  # type: ignore[attr-defined]
        role = r.data
        if role in write_roles:
            writes.append(f)
            if role == "dst" and _reads_dst(inst, k):
                reads.append(f)
        else:
            reads.append(f)
            if role == "dst" and _reads_dst(inst, k):
                reads.append(f)
    return reads, writes


def analyse(fn: bir.FunctionOp) -> None:
    """Set every instruction's ``deps`` (removed where it has none) from its accesses in program order."""
    insts, locs = body(fn)
    all_edges = edges(insts, locs)
    for inst in insts:
        found = all_edges[inst.inst_id]
        if found:
            inst.properties["deps"] = bir.deps_attr((k, i) for i, k in sorted(found.items()))
        else:
            inst.properties.pop("deps", None)


def body(fn: bir.FunctionOp) -> tuple[list[bir.BirInst], dict[str, bir.MemLocOp]]:
    """``fn``'s instructions in program order and its memlocs, in one pass over its block (``instructions()`` and
    ``memlocs()`` are a generic walk and a scan each; the passes ask for both on every function). A function with a
    region in its block (a runtime loop) has its instructions collected by ``instructions()``, loop bodies included."""
    insts: list[bir.BirInst] = []
    locs: dict[str, bir.MemLocOp] = {}
    nested = False
    for op in fn.body.block.ops:
        if isinstance(op, bir.BirInst):
            insts.append(op)
        elif isinstance(op, bir.MemLocOp):
            locs[op.sym_name.data] = op
        elif op.regions:
            nested = True
    return (list(fn.instructions()) if nested else insts), locs


def has_loops(fn: bir.FunctionOp) -> bool:
    """Whether ``fn`` has a runtime loop (a ``bir.loop``) at any depth: a nested one sits in a top-level one, so
    the block's own ops tell, unless another op with regions is there (then a walk)."""
    for op in fn.body.block.ops:
        if isinstance(op, bir.LoopOp):
            return True
        if op.regions:
            return any(isinstance(o, bir.LoopOp) for o in fn.body.walk())
    return False


def edges(insts: list[bir.BirInst], locs: dict[str, bir.MemLocOp], addresses: Addresses | None = None
          ) -> dict[int, dict[int, str]]:  # fmt: skip
    """Each instruction's edges (producer id -> kind) in the order ``insts``, at the memlocs' addresses
    (``addresses`` standing in for some: ``pre-schedule``'s private addresses)."""
    chunks = _ChunkTables()
    state = _StateOrder()
    all_edges: dict[int, dict[int, str]] = {}
    late: dict[int, dict[int, str]] = {}
    tagged: dict[str, int] = {}  # explicit-ordering tag -> the latest instruction carrying it
    kinds = [kind_of(inst) for inst in insts]
    control = [k.control for k in kinds]
    footprints: dict[int, list[Footprint]] = {}
    for i, inst in enumerate(insts):
        if control[i]:
            chunks, state, tagged = _ChunkTables(), _StateOrder(), {}
            all_edges[inst.inst_id] = {}
            continue
        me = inst.properties["id"].value.data  # type: ignore[attr-defined]
        if me not in footprints:  # the start of a stretch: its operands, all at once
            end = i
            while end < len(insts) and not control[end]:
                end += 1
            footprints = _stretch_footprints(insts[i:end], locs, addresses)
        reads, writes = _accesses(inst, kinds[i], footprints[me])
        found = {d: k for d, k in state.edges(inst, late).items() if d != me}
        chunks.step(me, reads, writes, found)  # the edges, then this instruction's accesses recorded
        after, tag = inst.properties.get("after"), inst.properties.get("tag")
        if after is not None:
            for a in after.data:  # type: ignore[attr-defined]
                if a.data in tagged:
                    found.setdefault(tagged[a.data], "ordered")
        if tag is not None:
            tagged[tag.data] = me  # type: ignore[attr-defined]
        all_edges[me] = found
    for producer, extra in late.items():
        found = all_edges[producer]
        for d, k in extra.items():
            found.setdefault(d, k)
    return all_edges


@dataclass(frozen=True)
class DependencyAnalysisPass(ModulePass):
    name = "dependency-analysis"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            if has_loops(fn):
                raise PassFailedException("dependency-analysis needs unrolled BIR (run bir-unroll first)")
            analyse(fn)
