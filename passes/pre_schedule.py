"""``pre-schedule``: list scheduling before memory allocation, on the kernel's true dependencies.

``schedule-instructions`` runs after ``allocate-memory``, so tensors that share an address (reused memory) are
already chained by anti and output edges, and it cannot interleave work the allocation serialised. This pass
schedules first: it gives every on-chip tensor without an explicit address a private virtual address (no two
overlap; explicit addresses are kept, so deliberate aliasing stays ordered), computes the dependency edges with
``dependency-analysis``'s own rules (flow/anti/output on bytes, engine state, explicit ``depends_on`` order), runs
``schedule-instructions``' list scheduler on them, and then removes the virtual addresses and the edges. Allocation
then follows the scheduled order, so the live ranges it sees are the ones the engines will have.

Interleaving keeps more tensors live at once, so the scheduler tracks what is live (a tensor from its first
instruction to its last) and starts a new tensor only while SBUF stays under 85% and PSUM under its bank count
(each tile counted as whole banks); when nothing ready fits, the earliest instruction in program order goes.
Functions with runtime loops (control instructions) keep their order. It needs engines (run ``assign-engines``
first; an ``unassigned`` instruction is planned on the first engine its operands allow).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.passes.assign_engines import legal_engines
from nkic.passes.dependency_analysis import analyse
from nkic.dialects.traits import IsControl, IsDma
from nkic.passes.schedule_instructions import _reorder, duration_ns
from nkic.target.machine import TARGETS, Target, get_target

_ALIGN = 512


def _virtual_addresses(fn: bir.FunctionOp) -> list[bir.MemLocOp]:
    """Give each unplaced on-chip memloc a private address above every explicit one; returns the memlocs set."""
    locs = [m for m in fn.memlocs().values() if m.mem in ("sbuf", "psum")]
    top = max((m.addr[1] + m.bytes_per_partition for m in locs if m.addr is not None), default=0)
    placed = []
    for m in locs:
        if m.addr is not None:
            continue
        top = -(-top // _ALIGN) * _ALIGN
        m.properties["address"] = DenseArrayBase.from_list(i64, [0, top])
        top += m.bytes_per_partition
        placed.append(m)
    return placed


SBUF_BUDGET = 0.85  # of SBUF, in bytes live at once: headroom for the allocator's alignment and fragmentation


def _budgets(target: Target) -> dict[str, float]:
    """What may be live at once: SBUF bytes, and PSUM banks (a tile takes whole banks here, to be safe)."""
    return {"sbuf": SBUF_BUDGET * target.sbuf_bytes_per_partition, "psum": float(target.psum_banks)}


def _footprint(m: bir.MemLocOp, target: Target) -> tuple[str, float]:
    if m.mem == "psum":
        return "psum", float(-(-m.bytes_per_partition // target.psum_bank_bytes))
    return "sbuf", float(m.bytes_per_partition)


class _Group:
    """The ready instructions of one resource class with one memory growth: a heap by data-ready time of those not
    yet reachable at the class's free time ``R``, and a heap by index of those whose data is ready by ``R`` (their
    start is ``R`` for all of them, so the lowest index wins). ``R`` never decreases, so an entry moves once."""

    __slots__ = ("later", "now", "size", "clock")

    def __init__(self) -> None:
        self.later: list[tuple[float, int, int]] = []  # (data ready, index, version)
        self.now: list[tuple[int, int, float]] = []  # (index, version, data ready)
        self.size = 0
        self.clock = 0.0  # the R the ``now`` heap was built for

    def best(self, r: float, version: list[int]) -> tuple[float, int] | None:
        """The (start, index) minimum of the live members when the class's resource is free at ``r``."""
        later, now = self.later, self.now
        if r < self.clock:  # the resource clock went back (durations are >= 0, so never): re-rank everything
            later.extend((t, k, v) for k, v, t in now)
            heapq.heapify(later)
            now.clear()
        self.clock = r
        while later and (later[0][2] != version[later[0][1]] or later[0][0] <= r):
            t, k, v = heapq.heappop(later)
            if v == version[k]:
                heapq.heappush(now, (k, v, t))
        while now and now[0][1] != version[now[0][0]]:
            heapq.heappop(now)
        if now:
            return r, now[0][0]
        return (later[0][0], later[0][1]) if later else None


def _order(insts: list[bir.BirInst], target: Target, num_queues: int) -> list[int]:
    """A list schedule (earliest start first, like ``schedule-instructions``) that never has more on-chip tensors
    live than the budgets allow; when nothing ready fits, the earliest instruction in program order goes.

    The choice at each step is, exactly, the minimum (start, index) over the ready instructions that fit. Those are
    kept in groups by resource class (the DMA queues, or one engine) and by how much they would grow what is live
    (SBUF bytes, PSUM banks): all members of a group fit or none does, and all start at ``max(data ready, R)`` for
    their class's free time ``R``, so each step looks at one candidate per group instead of every ready
    instruction (which made the pass quadratic: ~10^4 ready DMAs at a time in a 100k-instruction matmul chain)."""
    locs = {}
    for inst in insts:
        for name in inst.ref_names:
            locs.setdefault(name, None)
    fn_locs = insts[0].parent_op().memlocs() if insts else {}  # type: ignore[union-attr]
    index = {inst.inst_id: i for i, inst in enumerate(insts)}
    preds = [[index[d] for _, d in inst.dep_list] for inst in insts]
    succs: list[list[int]] = [[] for _ in insts]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    tracked = {n: _footprint(fn_locs[n], target) for n in locs if fn_locs[n].mem in ("sbuf", "psum")}
    uses: dict[str, int] = {}
    users: dict[str, list[int]] = {}
    names_of = [[n for n in dict.fromkeys(inst.ref_names) if n in tracked] for inst in insts]
    for i, names in enumerate(names_of):
        for n in names:
            uses[n] = uses.get(n, 0) + 1
            users.setdefault(n, []).append(i)
    budget, live = _budgets(target), {"sbuf": 0.0, "psum": 0.0}
    started: set[str] = set()
    waiting = [len(ps) for ps in preds]
    finish = [0.0] * len(insts)
    engine_free: dict[str, float] = {}
    queue_free = [0.0] * num_queues
    order: list[int] = []
    is_dma = [inst.has_trait(IsDma) for inst in insts]
    engine_of = [inst.engine.data for inst in insts]
    data_ready = [0.0] * len(insts)
    version = [0] * len(insts)
    home: list[tuple[str | None, float, float] | None] = [None] * len(insts)  # a ready instruction's group key
    groups: dict[tuple[str | None, float, float], _Group] = {}
    by_index: list[int] = []  # ready indices (lazily deleted), for the fallback

    def grow(i: int) -> tuple[float, float]:
        g = {"sbuf": 0.0, "psum": 0.0}
        for n in names_of[i]:
            if n not in started:
                mem, size = tracked[n]
                g[mem] += size
        return g["sbuf"], g["psum"]

    def resource(cls: str | None) -> float:
        return min(queue_free) if cls is None else engine_free.get(cls, 0.0)

    def enter(i: int) -> None:
        """File ready instruction ``i`` under its current group."""
        version[i] += 1
        key = (None if is_dma[i] else engine_of[i], *grow(i))
        home[i] = key
        g = groups.get(key)
        if g is None:
            g = groups[key] = _Group()
        g.size += 1
        if data_ready[i] <= g.clock:
            heapq.heappush(g.now, (i, version[i], data_ready[i]))
        else:
            heapq.heappush(g.later, (data_ready[i], i, version[i]))

    def leave(i: int) -> None:
        key = home[i]
        assert key is not None
        groups[key].size -= 1
        home[i] = None
        version[i] += 1

    for i in range(len(insts)):
        if waiting[i] == 0:
            enter(i)
            by_index.append(i)
    heapq.heapify(by_index)
    pending = len(by_index)
    while pending:
        best: tuple[float, int] | None = None
        for (cls, gs, gp), g in groups.items():
            if not g.size or live["sbuf"] + gs > budget["sbuf"] or live["psum"] + gp > budget["psum"]:
                continue
            cand = g.best(resource(cls), version)
            if cand is not None and (best is None or cand < best):
                best = cand
        if best is not None:
            i = best[1]
        else:
            while home[by_index[0]] is None:
                heapq.heappop(by_index)
            i = by_index[0]
        leave(i)
        pending -= 1
        t = max(data_ready[i], resource(None if is_dma[i] else engine_of[i]))
        finish[i] = t + duration_ns(insts[i], fn_locs, target)
        if is_dma[i]:
            queue_free[queue_free.index(min(queue_free))] = finish[i]
        else:
            engine_free[engine_of[i]] = finish[i]
        for n in names_of[i]:
            mem, size = tracked[n]
            if n not in started:
                started.add(n)
                live[mem] += size
                for u in users[n]:  # ready users now grow less: refile them
                    if home[u] is not None:
                        leave(u)
                        enter(u)
            uses[n] -= 1
            if uses[n] == 0:
                live[mem] -= size
        order.append(i)
        for s_ in succs[i]:
            waiting[s_] -= 1
            if waiting[s_] == 0:
                data_ready[s_] = max([finish[p] for p in preds[s_]], default=0.0)
                enter(s_)
                heapq.heappush(by_index, s_)
                pending += 1
    if len(order) != len(insts):
        raise PassFailedException("pre-schedule: dependency edges form a cycle")
    return order


def pre_schedule(fn: bir.FunctionOp, target: Target, num_queues: int) -> bool:
    """Reorder ``fn``; False (order kept) for a function with control instructions, whose tensors may live across
    runtime loops."""
    if any(isinstance(o, bir.LoopOp) for o in fn.body.walk()):
        raise PassFailedException("pre-schedule needs unrolled BIR (run bir-unroll first)")
    insts = list(fn.instructions())
    if not insts or any(i.has_trait(IsControl) for i in insts):
        return False
    virtual = _virtual_addresses(fn)
    unassigned = [i for i in insts if i.engine.data == "unassigned"]
    locs = fn.memlocs()
    for inst in unassigned:
        inst.properties["engine"] = StringAttr(legal_engines(inst, locs)[0])
    try:
        analyse(fn)
        new = [insts[i] for i in _order(insts, target, num_queues)]
        _reorder(fn, new)
    finally:
        for m in virtual:
            m.properties.pop("address", None)
        for inst in fn.instructions():
            inst.properties.pop("deps", None)
        for inst in unassigned:
            inst.properties["engine"] = StringAttr("unassigned")
    return True


@dataclass(frozen=True)
class PreSchedulePass(ModulePass):
    """``policy`` is the allocation policy that follows (``allocate-memory``'s): if that allocator cannot place the
    reordered kernel (more live at once than the budgets foresaw), the program order is put back."""

    name = "pre-schedule"
    target: str = "gen3"
    num_queues: int = 4
    policy: str = "rotate"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.target not in TARGETS:
            raise PassFailedException(f"unknown target '{self.target}' (expected {', '.join(TARGETS)})")
        fns = [f for f in op.ops if isinstance(f, bir.FunctionOp)]
        before = {fn: list(fn.instructions()) for fn in fns}
        changed = [fn for fn in fns if pre_schedule(fn, get_target(self.target), self.num_queues)]
        if changed and not _fits(op, ctx, self.target, self.policy):
            for fn in changed:
                _reorder(fn, before[fn])


def _fits(op: ModuleOp, ctx: Context, target: str, policy: str) -> bool:
    """Whether ``allocate-memory`` places ``op`` as it is now. It runs on ``op`` itself and its addresses are then
    taken off again (it only adds an ``address`` to memlocs without one): a clone of a 100k-instruction module
    cost more time, and memory at the compile's peak, than the allocation."""
    from nkic.passes.allocate_memory import AllocateMemoryPass

    unplaced = [m for f in op.ops if isinstance(f, bir.FunctionOp) for m in f.memlocs().values() if m.addr is None]
    try:
        AllocateMemoryPass(target=target, policy=policy).apply(ctx, op)
    except PassFailedException:
        return False
    finally:
        for m in unplaced:
            m.properties.pop("address", None)
    return True
