"""``pre-schedule``: list scheduling before memory allocation, on the kernel's true dependencies.

``schedule-instructions`` runs after ``allocate-memory``, so tensors that share an address (reused memory) are
already chained by anti and output edges, and it cannot interleave work the allocation serialised. This pass
schedules first: it computes the dependency edges with ``dependency-analysis``'s own rules (flow/anti/output on
bytes, engine state, explicit ``depends_on`` order), every on-chip tensor without an explicit address standing at a
private virtual address (no two overlap; explicit addresses are kept, so deliberate aliasing stays ordered; the
virtual addresses are handed to the analysis, never written on the memlocs, and the edges are never stored), and
orders the instructions with ``schedule-instructions``' list scheduler on them. Allocation then follows the
scheduled order, so the live ranges it sees are the ones the engines will have.

Interleaving keeps more tensors live at once, so the scheduler tracks what is live (a tensor from its first
instruction to its last) and starts a new tensor only while SBUF stays under 85% and PSUM under its bank count
(each tile counted as whole banks); when nothing ready fits, the one that overshoots the budgets least goes
(finishing work rather than starting new tensors), the earliest in program order among equals.
When ``allocate-memory`` (without spilling) cannot place the new order, the program order is put back and an
``AllocationWarning`` gives the allocator's reason. Functions with runtime loops (control instructions) keep their
order. It needs engines (run ``assign-engines``
first; an ``unassigned`` instruction is planned on the first engine its operands allow).
"""

from __future__ import annotations

import heapq
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.passes.targeting import target_of
from nkic.dialects import bir
from nkic.passes.allocate_memory import AllocateMemoryPass
from nkic.passes.assign_engines import legal_engines
from nkic.passes.dependency_analysis import CHUNK, Addresses, body, edges, has_loops, kind_of, operands
from nkic.passes.schedule_instructions import _reorder, duration_ns
from nkic.passes.spill import AllocationWarning, file_line
from nkic.passes.options import DEFAULT_NUM_QUEUES
from nkic.target.machine import Target
from nkic.target.vocab import ON_CHIP

# Virtual addresses start on a dependency-analysis chunk of every on-chip memory: two unplaced memlocs never share
# a chunk, so no false edge joins them.
_ALIGN = max(CHUNK[m] for m in ON_CHIP)


def _virtual_addresses(fn: bir.FunctionOp) -> list[bir.MemLocOp]:
    """Give each unplaced on-chip memloc a private address above every explicit one; returns the memlocs set.
    (``dma-transpose`` uses it; this pass hands ``_private_addresses`` to the analysis instead.)"""
    locs = fn.memlocs()
    placed = []
    for name, (part, byte) in _private_addresses(locs).items():
        locs[name].properties["address"] = DenseArrayBase.from_list(i64, [part, byte])
        placed.append(locs[name])
    return placed


def _private_addresses(locs: dict[str, bir.MemLocOp]) -> Addresses:
    """A private address for each unplaced on-chip memloc, above every explicit one. Handed to the dependency
    analysis as stand-ins for the memlocs' addresses: the memlocs themselves are not touched."""
    on_chip = [m for m in locs.values() if m.mem in ("sbuf", "psum")]
    top = max((m.addr[1] + m.bytes_per_partition for m in on_chip if m.addr is not None), default=0)
    virtual: Addresses = {}
    for m in on_chip:
        if m.addr is not None:
            continue
        top = -(-top // _ALIGN) * _ALIGN
        virtual[m.sym_name.data] = (0, top)
        top += m.bytes_per_partition
    return virtual


SBUF_BUDGET = 0.85  # of SBUF, in bytes live at once: headroom for the allocator's alignment and fragmentation


def _budgets(target: Target) -> dict[str, float]:
    """What may be live at once: SBUF bytes, and PSUM banks (a tile takes whole banks here, to be safe)."""
    return {"sbuf": SBUF_BUDGET * target.sbuf_bytes_per_partition, "psum": float(target.psum_banks)}


def _footprint(m: bir.MemLocOp, target: Target) -> tuple[str, float]:
    if m.mem == "psum":
        return "psum", float(-(-m.bytes_per_partition // target.psum_bank_bytes))
    return "sbuf", float(m.bytes_per_partition)


def _order(insts: list[bir.BirInst], target: Target, num_queues: int, preds: list[list[int]],
           fn_locs: dict[str, bir.MemLocOp]) -> list[int]:  # fmt: skip
    """A list schedule (earliest start first, like ``schedule-instructions``) that never has more on-chip tensors
    live than the budgets allow; when nothing ready fits, the one that overshoots them least (then the earliest in
    program order) goes. ``preds[i]``: the positions of the instructions ``insts[i]`` depends on."""
    succs: list[list[int]] = [[] for _ in insts]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    names_of, tracked = _tracked_names(insts, fn_locs, target)
    uses: dict[str, int] = {}
    for names in names_of:
        for n in names:
            uses[n] = uses.get(n, 0) + 1
    budget, live = _budgets(target), {"sbuf": 0.0, "psum": 0.0}
    started: set[str] = set()
    waiting = [len(ps) for ps in preds]
    finish = [0.0] * len(insts)
    engine_free: dict[str, float] = {}
    queue_free = [0.0] * num_queues
    is_dma = [kind_of(inst).dma for inst in insts]
    # the resource class of an instruction: its engine, or "" for the DMA queues (their earliest free one)
    resource = ["" if is_dma[i] else inst.engine.data for i, inst in enumerate(insts)]
    ready = _Ready(resource)
    waiters: dict[str, list[int]] = {}  # a tensor not yet started -> the ready instructions that would start it

    def grow(i: int) -> tuple[float, float]:
        """What starting ``i`` adds to the live (SBUF, PSUM) footprints."""
        g = {"sbuf": 0.0, "psum": 0.0}
        for n in names_of[i]:
            if n not in started:
                mem, size = tracked[n]
                g[mem] += size
        return g["sbuf"], g["psum"]

    def fits(g: tuple[float, float]) -> bool:
        return live["sbuf"] + g[0] <= budget["sbuf"] and live["psum"] + g[1] <= budget["psum"]

    def overflow(g: tuple[float, float]) -> float:
        """How far past the budgets starting with growth ``g`` goes, as a fraction of each budget (summed)."""
        return max(0.0, live["sbuf"] + g[0] - budget["sbuf"]) / budget["sbuf"] + \
            max(0.0, live["psum"] + g[1] - budget["psum"]) / budget["psum"]

    def make_ready(i: int, data_ready: float) -> None:
        for n in names_of[i]:
            if n not in started:
                waiters.setdefault(n, []).append(i)
        ready.add(i, data_ready, grow(i))

    for i in range(len(insts)):
        if waiting[i] == 0:
            make_ready(i, 0.0)
    order: list[int] = []
    while ready:
        i = ready.take(fits, overflow)
        t = ready.start(i)
        finish[i] = t + duration_ns(insts[i], fn_locs, target)
        if is_dma[i]:
            queue_free[queue_free.index(min(queue_free))] = finish[i]
            ready.free_at("", min(queue_free))
        else:
            engine_free[resource[i]] = finish[i]
            ready.free_at(resource[i], finish[i])
        for n in names_of[i]:
            mem, size = tracked[n]
            if n not in started:
                started.add(n)
                live[mem] += size
                for w in waiters.pop(n, ()):
                    ready.regroup(w, grow(w))  # its growth shrank: it now ranks among cheaper starts
            uses[n] -= 1
            if uses[n] == 0:
                live[mem] -= size
        order.append(i)
        for s_ in succs[i]:
            waiting[s_] -= 1
            if waiting[s_] == 0:
                make_ready(s_, max([finish[p] for p in preds[s_]], default=0.0))
    if len(order) != len(insts):
        raise PassFailedException("pre-schedule: dependency edges form a cycle")
    return order


def _tracked_names(insts: list[bir.BirInst], fn_locs: dict[str, bir.MemLocOp], target: Target
                   ) -> tuple[list[list[str]], dict[str, tuple[str, float]]]:  # fmt: skip
    """Each instruction's distinct on-chip memlocs (first-use order), and each such memloc's (memory, footprint).
    Read from the dependency analysis's operand memo (memory and bytes per partition of each operand's memloc)."""
    tracked: dict[str, tuple[str, float]] = {}
    names_of = []
    psum_bank = target.psum_bank_bytes
    for inst in insts:
        names = []
        for op in operands(inst, fn_locs):
            n, memory = op.name, op.key[0]
            if memory not in ("sbuf", "psum") or n in names:
                continue
            if n not in tracked:  # ``_footprint``: PSUM in whole banks, SBUF in bytes
                tracked[n] = (memory, float(-(-op.size // psum_bank)) if memory == "psum" else float(op.size))
            names.append(n)
        names_of.append(names)
    return names_of, tracked


class _Ready:
    """The ready instructions, so that ``take`` finds the best-ranked one that fits the memory budgets without
    testing them all: rank is ``(start, index)``, start = ``max(data ready, resource free)``.

    Instructions are grouped by their growth (what starting them adds to the live SBUF and PSUM bytes; tile sizes
    are few, so groups are few): a whole group fits or not. Within a group, per resource (an engine, or "" for the
    DMA queues), a heap of those whose data is ready by the time the resource is free (their start is the
    resource's free time: they rank by index) and a heap of the later ones (by data-ready time, then index). A
    resource's free time never decreases (an instruction finishes after it starts), so an instruction only moves
    from the second heap to the first; a growth only shrinks (tensors start, never unstart), so an instruction
    only moves to a cheaper group. Stale heap entries (taken, or moved to another group) are dropped lazily, and a
    group is dropped with its heaps once no ready instruction is left in it (``take`` and ``free_at`` visit every
    group: as tensors start, the early growths empty and would otherwise stay for the rest of the kernel)."""

    def __init__(self, resource: list[str]) -> None:
        self.resource = resource
        self.data_ready = [0.0] * len(resource)
        self.taken = [False] * len(resource)
        self.group_of: list[tuple[float, float] | None] = [None] * len(resource)
        self.free: dict[str, float] = {}
        # growth -> resource -> (heap of indices ready by the free time, heap of (data ready, index) after it)
        self.groups: dict[tuple[float, float], dict[str, tuple[list[int], list[tuple[float, int]]]]] = {}
        self.lowest: dict[tuple[float, float], list[int]] = {}  # growth -> its indices, for "the earliest" among them
        self.members: dict[tuple[float, float], int] = {}  # growth -> ready instructions with it
        self.count = 0

    def __bool__(self) -> bool:
        return self.count > 0

    def start(self, i: int) -> float:
        return max(self.data_ready[i], self.free.get(self.resource[i], 0.0))

    def add(self, i: int, data_ready: float, growth: tuple[float, float]) -> None:
        self.count += 1
        self.data_ready[i] = data_ready
        self.regroup(i, growth)

    def regroup(self, i: int, growth: tuple[float, float]) -> None:
        if self.taken[i] or self.group_of[i] == growth:
            return
        self._leave(i)
        self.group_of[i] = growth
        self.members[growth] = self.members.get(growth, 0) + 1
        heapq.heappush(self.lowest.setdefault(growth, []), i)
        res = self.resource[i]
        now, later = self.groups.setdefault(growth, {}).setdefault(res, ([], []))
        if self.data_ready[i] <= self.free.get(res, 0.0):
            heapq.heappush(now, i)
        else:
            heapq.heappush(later, (self.data_ready[i], i))

    def _leave(self, i: int) -> None:
        """``i`` leaves its group (taken, or regrouped); an emptied group goes."""
        g = self.group_of[i]
        if g is None:
            return
        self.members[g] -= 1
        if self.members[g] == 0:
            del self.members[g], self.groups[g], self.lowest[g]

    def free_at(self, res: str, t: float) -> None:
        if t < self.free.get(res, 0.0):
            raise PassFailedException("pre-schedule: a resource's free time went back (negative duration)")
        self.free[res] = t
        for per_res in self.groups.values():
            heaps = per_res.get(res)
            if heaps is None:
                continue
            now, later = heaps
            while later and later[0][0] <= t:
                heapq.heappush(now, heapq.heappop(later)[1])

    def _lowest(self, growth: tuple[float, float]) -> int | None:
        """The lowest index still ready with this growth (dropping stale entries), or None."""
        heap = self.lowest[growth]
        while heap and not self._live(heap[0], growth):
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _live(self, i: int, growth: tuple[float, float]) -> bool:
        return not self.taken[i] and self.group_of[i] == growth

    def take(self, fits: Callable[[tuple[float, float]], bool], overflow: Callable[[tuple[float, float]], float]
             ) -> int:  # fmt: skip
        """Remove and return the best-ranked instruction whose growth ``fits``; if none fits, the lowest index of
        those whose growth overshoots least."""
        best: tuple[tuple[float, int], list[Any]] | None = None
        for growth, per_res in self.groups.items():
            if not fits(growth):
                continue
            for res, (now, later) in per_res.items():
                while now and not self._live(now[0], growth):
                    heapq.heappop(now)
                while later and not self._live(later[0][1], growth):
                    heapq.heappop(later)
                if now:
                    key = (self.free.get(res, 0.0), now[0])
                    if best is None or key < best[0]:
                        best = (key, now)
                if later and (best is None or later[0] < best[0]):
                    best = (later[0], later)
        if best is not None:
            heapq.heappop(best[1])
            found = best[0][1]
        else:
            found = min((overflow(g), self._lowest(g)) for g in self.lowest if self._lowest(g) is not None)[1]
        self._leave(found)
        self.taken[found] = True
        self.count -= 1
        return found


def pre_schedule(fn: bir.FunctionOp, target: Target, num_queues: int) -> bool:
    """Reorder ``fn``; False (order kept) for a function with control instructions, whose tensors may live across
    runtime loops."""
    if has_loops(fn):
        raise PassFailedException("pre-schedule needs unrolled BIR (run bir-unroll first)")
    insts, locs = body(fn)
    if not insts or any(kind_of(i).control for i in insts):
        return False
    virtual = _private_addresses(locs)
    unassigned = [i for i in insts if i.engine.data == "unassigned"]
    for inst in unassigned:
        inst.properties["engine"] = StringAttr(legal_engines(inst, locs, target)[0])
    for inst in insts:  # the edges here are this pass's own (at private addresses), never stored
        inst.properties.pop("deps", None)
    try:
        found = edges(insts, locs, virtual)
        index = {inst.inst_id: i for i, inst in enumerate(insts)}
        preds = [[index[d] for d in sorted(found[inst.inst_id])] for inst in insts]
        _reorder(fn, [insts[i] for i in _order(insts, target, num_queues, preds, locs)])
    finally:
        for inst in unassigned:
            inst.properties["engine"] = StringAttr("unassigned")
    return True


@dataclass(frozen=True)
class PreSchedulePass(ModulePass):
    """``policy`` is the allocation policy that follows (``allocate-memory``'s): if that allocator cannot place the
    reordered kernel (more live at once than the budgets foresaw), the program order is put back."""

    name = "pre-schedule"
    num_queues: int = DEFAULT_NUM_QUEUES
    policy: str = "rotate"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fns = [f for f in op.ops if isinstance(f, bir.FunctionOp)]
        before = {fn: body(fn)[0] for fn in fns}
        changed = [fn for fn in fns if pre_schedule(fn, target_of(op), self.num_queues)]
        why = _misfit(op, ctx, self.policy) if changed else None
        if why is not None:
            for fn in changed:
                _reorder(fn, before[fn])
            _explain(why)


def _explain(why: str) -> None:
    """Say that the planned order was dropped, and why (the allocator's message), at the line it names."""
    where, _, what = why.partition(": error: ")
    file, line = file_line(where) if what else ("<kernel>", 0)
    warnings.warn_explicit(f"pre-schedule's order does not fit on chip without spilling ({what or why}); allocation "
                           "follows the program order instead, with less overlap between engines", AllocationWarning,
                           file, line)  # fmt: skip


def _fits(op: ModuleOp, ctx: Context, policy: str) -> bool:
    """Whether ``allocate-memory`` places ``op`` as it is now (see ``_misfit``)."""
    return _misfit(op, ctx, policy) is None


def _misfit(op: ModuleOp, ctx: Context, policy: str) -> str | None:
    """Why ``allocate-memory`` cannot place ``op`` as it is now without spilling, or None when it can. It runs on
    ``op`` itself and its addresses are then taken off again (it only adds an ``address`` to memlocs without one):
    a clone of a 100k-instruction module cost more time, and memory at the compile's peak, than the allocation."""
    fns = [f for f in op.ops if isinstance(f, bir.FunctionOp)]
    placed = {(f, name) for f in fns for name, m in f.memlocs().items() if m.addr is not None}
    try:
        AllocateMemoryPass(policy=policy, spill=False).apply(ctx, op)
    except PassFailedException as e:
        return str(e)
    finally:
        # every memloc without an address before, including the per-block ones the allocator may have split off
        # (split-blocks) while trying: those stay split, which changes no value, but unplaced
        for f in fns:
            for name, m in f.memlocs().items():
                if (f, name) not in placed:
                    m.properties.pop("address", None)
    return None
