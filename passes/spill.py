"""``spill``: when more SBUF bytes are live at once than SBUF holds, tensors round-trip through HBM.

A tensor is live from its first to its last instruction (``allocate-memory``'s live ranges, in the order the
function has now: ``pre-schedule``'s). Walking that order, wherever the bytes live at once (each tensor rounded up
to the allocator's 64-byte granule; explicitly placed tensors counted, never chosen) exceed the budget, the pass
evicts the live tensor whose next use is furthest away (Belady's rule, as register allocators spill; among equals
the largest), one at a time until the rest fit:

* a ``dma_copy`` stores the whole tensor to an internal HBM scratch tensor ``<name>.spill`` right after its last
  use before that point;
* a ``dma_copy`` reloads it, right before its next use, into a fresh SBUF tensor ``<name>.r<k>`` that every later
  instruction uses instead (so it gets its own live range and its own place; it may be spilled again, and when no
  instruction wrote the reloaded copy since its reload, the scratch still holds it: no store then, only the reload,
  as register allocators treat a clean value).

The stores and reloads are ordinary DMAs: ``dependency-analysis`` orders them by their bytes like any other (the
store after the writes it copies, the reload after the store, the readers after the reload), the scheduler and the
cost model see their transfer time, and ``insert-semaphores`` gives them waits. A tensor used by the instruction at
the over-full point is never a candidate; if nothing else is live, nothing is spilled there (allocation then fails
with its message). PSUM is never spilled: a matmul accumulates into its tile in place. Functions with runtime loops
are left alone (their body's tensors live across iterations).

``allocate-memory`` calls :func:`spill_function` only when a kernel does not fit otherwise, with a budget of all of
SBUF first and then less (fragmentation), so a kernel that fits never changes; ``nkic-opt -p spill{budget=N}`` runs
it alone. ``spill_stats`` counts the spills of a function (``print-metrics``, the compile warning).
"""

from __future__ import annotations

import bisect
import heapq
import warnings
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass

from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr, names_attr
from nkic.dialects.traits import CopiesData, IsDma
from nkic.passes.dependency_analysis import body, has_loops, kind_of
from nkic.passes.targeting import target_of

SBUF_ALIGN = 64  # allocate-memory's SBUF granule
SCRATCH = ".spill"  # suffix of a spilled tensor's HBM scratch memloc


class AllocationWarning(UserWarning):
    """The allocator changed the kernel to make it fit (spills), or could not use the planned order."""


@dataclass
class _Segment:
    """One SBUF memloc's live range: ``uses`` are the positions of the instructions naming it, in order."""

    name: str
    base: str  # the memloc as the kernel declared it (before any reload renamed it)
    size: int
    uses: list[int]
    spillable: bool
    writes: frozenset[int] = frozenset()  # the positions among ``uses`` that write it

    @property
    def start(self) -> int:
        return self.uses[0]

    @property
    def end(self) -> int:
        return self.uses[-1]


@dataclass
class Spill:
    """``name`` is stored after position ``after`` and reloaded as ``reload`` before position ``before``."""

    base: str
    name: str
    reload: str
    after: int
    before: int
    size: int
    store: bool = True  # False: a reloaded copy no instruction wrote since, still in its scratch (a clean spill)


@dataclass
class SpillStats:
    stores: int = 0
    reloads: int = 0
    bytes: int = 0  # moved by stores and reloads together
    tensors: set[str] = field(default_factory=set)


def spill_function(fn: bir.FunctionOp, budget: int) -> list[Spill]:
    """Spill SBUF tensors of ``fn`` until at most ``budget`` bytes per partition are live at once (where some
    tensor not used there can go); returns the spills made."""
    if has_loops(fn):
        return []
    insts, locs = body(fn)
    if not insts or any(kind_of(i).control for i in insts):
        return []
    segments = _segments(insts, locs)
    spills, rests = _plan(segments, len(insts), budget, set(locs))
    if spills:
        _rewrite(fn, insts, locs, spills, rests)
    return spills


def _segments(insts: list[bir.BirInst], locs: dict[str, bir.MemLocOp]) -> list[_Segment]:
    uses: dict[str, list[int]] = {}
    writes: dict[str, set[int]] = {}
    for pos, inst in enumerate(insts):
        written = kind_of(inst).write_roles
        for role, name in zip(inst.role_names, inst.ref_names):
            loc = locs.get(name)
            if loc is None or loc.mem != "sbuf":
                continue
            at = uses.setdefault(name, [])
            if not at or at[-1] != pos:
                at.append(pos)
            if role in written:
                writes.setdefault(name, set()).add(pos)
    out = []
    for name, at in uses.items():
        loc = locs[name]
        size = -(-loc.bytes_per_partition // SBUF_ALIGN) * SBUF_ALIGN
        spillable = (loc.kind.data == "internal" and loc.addr is None and loc.scope is None
                     and loc.data is None)  # fmt: skip
        out.append(_Segment(name, name, size, at, spillable, frozenset(writes.get(name, ()))))
    return out


def _plan(segments: list[_Segment], n: int, budget: int, taken: set[str]
          ) -> tuple[list[Spill], list[_Segment]]:  # fmt: skip
    """Belady's rule over the positions: where the live bytes exceed ``budget``, evict the live segment not used
    there whose next use is furthest (then the largest), splitting it into the part before and the reloaded part.
    Returns the spills and the reloaded parts (each with its final uses)."""
    starts: dict[int, list[_Segment]] = {}
    for s in segments:
        starts.setdefault(s.start, []).append(s)
    ends: list[tuple[int, int, _Segment]] = []  # (end, tie-break, segment) of the active ones
    active: dict[int, _Segment] = {}
    live, count = 0, 0
    spills: list[Spill] = []
    rests: list[_Segment] = []
    for i in range(n):
        while ends and ends[0][0] < i:
            _, _, s = heapq.heappop(ends)
            if active.pop(id(s), None) is not None:
                live -= s.size
        for s in starts.pop(i, ()):
            active[id(s)] = s
            heapq.heappush(ends, (s.end, id(s), s))
            live += s.size
        while live > budget:
            victim = _victim(active.values(), i)
            if victim is None:
                break
            seg, prev, nxt = victim
            count += 1
            reload = _fresh(f"{seg.base}.r{count}", taken)
            k = bisect.bisect_left(seg.uses, nxt)
            rest = _Segment(reload, seg.base, seg.size, seg.uses[k:], True, seg.writes)
            # a reloaded copy that nothing wrote since its reload is still in the scratch: no store again
            clean = seg.name != seg.base and not seg.writes.intersection(seg.uses[:k])
            seg.uses = seg.uses[:k]
            spills.append(Spill(seg.base, seg.name, reload, prev, nxt, seg.size, not clean))
            del active[id(seg)]
            live -= seg.size
            starts.setdefault(nxt, []).append(rest)
            rests.append(rest)
    return spills, rests


def _victim(active: object, i: int) -> tuple[_Segment, int, int] | None:
    """(segment, its last use before ``i``, its next use after ``i``) of the best one to evict at ``i``."""
    best: tuple[tuple[int, int], _Segment, int, int] | None = None
    for s in active:  # type: ignore[attr-defined]
        if not s.spillable or s.start >= i:
            continue
        k = bisect.bisect_left(s.uses, i)
        if k < len(s.uses) and s.uses[k] == i:
            continue  # used right here
        if k == len(s.uses):
            continue  # no later use: it is already dead
        key = (s.uses[k], s.size)
        if best is None or key > best[0]:
            best = (key, s, s.uses[k - 1], s.uses[k])
    return None if best is None else best[1:]


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _rewrite(fn: bir.FunctionOp, insts: list[bir.BirInst], locs: dict[str, bir.MemLocOp], spills: list[Spill],
             rests: list[_Segment]) -> None:  # fmt: skip
    """Declare the scratch and reload memlocs, rename the reloaded uses, insert the stores and reloads."""
    first = next(op for op in fn.body.block.ops if isinstance(op, bir.BirInst))
    for sp in spills:
        if f"{sp.base}{SCRATCH}" not in locs:
            locs[f"{sp.base}{SCRATCH}"] = _declare(fn, first, locs[sp.base], f"{sp.base}{SCRATCH}", "hbm")
        _declare(fn, first, locs[sp.base], sp.reload, "sbuf")
    for rest in rests:  # the instructions still name the declared tensor: each reloaded part's uses take its name
        for pos in rest.uses:
            inst = insts[pos]
            inst.properties["refs"] = names_attr([rest.name if r == rest.base else r for r in inst.ref_names])
    next_id = max(i.inst_id for i in insts) + 1
    for sp in spills:
        like = locs[sp.base]
        if sp.store:
            fn.body.block.insert_op_after(_copy(like, f"{sp.base}{SCRATCH}", sp.name, next_id, insts[sp.after]),
                                          insts[sp.after])  # fmt: skip
        reload = _copy(like, sp.reload, f"{sp.base}{SCRATCH}", next_id + 1, insts[sp.before])
        next_id += 2
        fn.body.block.insert_op_before(reload, insts[sp.before])


def _declare(fn: bir.FunctionOp, before: bir.BirInst, like: bir.MemLocOp, name: str, memory: str) -> bir.MemLocOp:
    loc = bir.MemLocOp(name, memory, like.dims, like.dtype.data, "internal")
    if like.loc is not None and memory == "sbuf":
        loc.properties["loc"] = like.loc
    fn.body.block.insert_op_before(loc, before)
    return loc


def _copy(like: bir.MemLocOp, dst: str, src: str, inst_id: int, near: bir.BirInst) -> bir.BirInst:
    """A whole-tensor ``dma_copy`` between two memlocs shaped like ``like`` (an SBUF tile and its HBM scratch)."""
    dims = like.dims
    row = 1
    for d in dims[1:]:
        row *= d
    ap = AccessPatternAttr(0, [(row, dims[0]), (1, row)])
    props = {
        "roles": names_attr(["dst", "src"]), "aps": ArrayAttr([ap, ap]), "refs": names_attr([dst, src]),
        "id": IntegerAttr(inst_id, i64), "engine": StringAttr("sp"), "call": StringAttr("spill"),
    }  # fmt: skip
    if near.loc is not None:
        props["loc"] = near.loc
    return bir.INSTRUCTION_OPS["dma_copy"].create(properties=props)


def spill_stats(fn: bir.FunctionOp) -> SpillStats:
    """The spill stores and reloads of ``fn`` (DMAs to or from a ``.spill`` scratch) and the bytes they move."""
    stats = SpillStats()
    locs = fn.memlocs()
    for inst in fn.instructions():
        if not (inst.has_trait(IsDma) and inst.has_trait(CopiesData)):  # spills are plain DMA copies
            continue
        dst, src = inst.ref("dst"), inst.ref("src")
        for ref, other, is_store in ((dst, src, True), (src, dst, False)):
            if ref is not None and ref.endswith(SCRATCH) and ref in locs and locs[ref].mem == "hbm":
                stats.stores += is_store
                stats.reloads += not is_store
                loc = locs[ref]
                stats.bytes += loc.bytes_per_partition * loc.dims[0]
                stats.tensors.add(ref[: -len(SCRATCH)])
    return stats


def warn_spills(fn: bir.FunctionOp, stats: SpillStats) -> None:
    """One warning line per kernel: what was spilled, at the line of the first spilled tensor's allocation."""
    if not stats.stores:
        return
    loc = fn.memlocs().get(min(stats.tensors))
    where = file_line(loc.loc.data) if loc is not None and loc.loc is not None else ("<kernel>", 0)
    kernel = min(stats.tensors).split(".")[0]  # the tracer names tensors <kernel>.<name>
    text = (f"kernel '{kernel}' does not fit in SBUF as scheduled: {len(stats.tensors)} tensors spilled to HBM "
            f"({stats.stores} stores, {stats.reloads} reloads, {stats.bytes} bytes moved); --metrics lists them")
    warnings.warn_explicit(text, AllocationWarning, where[0], where[1])


def file_line(text: str) -> tuple[str, int]:
    """``file:line[:col]`` -> (file, line)."""
    parts = text.split(":")
    for k in (2, 1):
        if len(parts) > k and all(p.isdigit() for p in parts[-k:]):
            return ":".join(parts[:-k]), int(parts[-k])
    return text, 0


@dataclass(frozen=True)
class SpillPass(ModulePass):
    name = "spill"
    budget: int = 0  # bytes per partition live at once; 0 = all of the module's target's SBUF

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        budget = self.budget or target_of(op).sbuf_bytes_per_partition
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            spill_function(fn, budget)
