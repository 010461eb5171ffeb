"""``post-schedule``: a critical-path refinement of the final order, on the real dependency edges.

``schedule-instructions`` emits, among the ready instructions, the one that can start earliest. When an engine
has several instructions ready at once, that rule takes them in program order, whatever they lead to: a PE
matmul that feeds a long ACT/DVE chain may wait behind one whose result nobody needs soon. This pass runs after
``dependency-analysis``, ``allocate-memory`` and ``schedule-instructions`` (so the edges include the anti and
output edges of the allocation) and list-schedules again, per resource: whenever an engine (or the DMA queue
pool) is free, it takes, among its instructions whose producers have finished, the one with the longest path to
the end of the program (the bottom level: its own duration plus the longest chain of successors, each
instruction's duration and its engine's dependent latency from the calibrated cost model, ``target/costs.py``);
if none has its data yet, the one whose data arrives first.

The new order is kept only when a replay of it (``dma-optimization``'s: engines in order, the issue cost of each
transfer on its engine, FIFO queues) finishes earlier than the replay of the order it came from, so the pass never
makes the modelled time worse. Any topological order of the edges is correct; ids are renumbered as
``schedule-instructions`` does. Control instructions are barriers: each stretch between two of them is refined on
its own. Runs before ``dep-reduction{engine_order=true}``, which needs the final order.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.passes.targeting import target_of
from nkic.dialects import bir
from nkic.passes.dma_optimization import Costs, cost_figures, replay_graph
from nkic.passes.schedule_instructions import check_options
from nkic.passes.stretch_graph import StretchGraph, reorder
from nkic.target.costs import dependent_latency_ns
from nkic.passes.options import DEFAULT_NUM_QUEUES
from nkic.target.machine import Target

_DMA = "dma"  # the resource key of the DMA queue pool


def bottom_levels(durations: list[float], latency: list[float], succs: list[list[int]]) -> list[float]:
    """Longest path from each instruction to the end: its duration, then its latency and the longest successor.
    Instructions are in a topological order (every edge points forward)."""
    level = [0.0] * len(durations)
    for i in range(len(durations) - 1, -1, -1):
        ss = succs[i]
        level[i] = durations[i] + (latency[i] + max([level[s] for s in ss]) if ss else 0.0)
    return level


def refine(
    preds: list[tuple[int, ...]], dur: list[float], res: list[str], lat: list[float], num_queues: int
) -> list[int]:
    """The critical-path list order of one barrier-free stretch (positions in it): ``preds`` its edges (positions
    of earlier instructions), ``dur``/``res``/``lat`` each instruction's duration, resource (engine, or ``_DMA``
    for the queue pool) and the dependent latency after it."""
    succs: list[list[int]] = [[] for _ in preds]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    level = bottom_levels(dur, lat, succs)
    free: dict[str, list[float]] = {r: [0.0] * (num_queues if r == _DMA else 1) for r in set(res)}
    pending: dict[str, list[tuple[float, int]]] = {r: [] for r in free}  # (data ready, i)
    available: dict[str, list[tuple[float, int]]] = {r: [] for r in free}  # (-bottom level, i)
    waiting = [len(p) for p in preds]
    ready_at = [0.0] * len(preds)
    for i, w in enumerate(waiting):
        if w == 0:
            heapq.heappush(pending[res[i]], (0.0, i))
    earliest = {r: 0.0 for r in free}  # min(free[r]), kept up to date
    resources = sorted(free)  # in name order: a tie on time goes to the first, as (t, r) compares
    order: list[int] = []
    while len(order) < len(preds):
        best_t, r = math.inf, ""
        for q in resources:  # the resource that decides next: free first, then data first
            av = available[q]
            if av:
                t = earliest[q]
            elif pending[q]:
                t = earliest[q]
                if pending[q][0][0] > t:
                    t = pending[q][0][0]
            else:
                continue
            if t < best_t:
                best_t, r = t, q
        if not r:
            raise PassFailedException("post-schedule: dependency edges form a cycle")
        t = best_t
        while pending[r] and pending[r][0][0] <= t:
            _, i = heapq.heappop(pending[r])
            heapq.heappush(available[r], (-level[i], i))
        _, i = heapq.heappop(available[r])
        slots = free[r]
        slot = slots.index(earliest[r])
        end = t + dur[i]
        slots[slot] = end
        earliest[r] = min(slots)
        order.append(i)
        for s in succs[i]:
            ready_at[s] = max(ready_at[s], end + lat[i])
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(pending[res[s]], (ready_at[s], s))
    return order


def post_schedule(fn: bir.FunctionOp, target: Target, num_queues: int) -> bool:
    """Refine ``fn``'s order; True when the refined order replays faster and was kept."""
    if fn.has_loops():
        raise PassFailedException("post-schedule needs unrolled BIR (run bir-unroll first)")
    locs = fn.memlocs()
    costs: Costs = {}
    before = list(fn.instructions())
    # the edges, engines and cost figures read once, for the refinement and both replays
    g = StretchGraph.of(fn, before)
    figures = [(0.0, 0.0) if c else cost_figures(inst, locs, target, costs) for inst, c in zip(before, g.control)]
    res = [_DMA if d else e for d, e in zip(g.dma, g.engine)]
    latency = {r: 0.0 if r == _DMA else dependent_latency_ns(r, target) for r in set(res)}
    new: list[int] = []
    done = 0  # positions before ``done`` are placed; the barriers between stretches stay where they are
    for span in g.stretches:
        new += range(done, span.start)
        dur = [figures[i][1] for i in span]
        local = refine(g.local_preds(span), dur, res[span.start : span.stop],
                       [latency[res[i]] for i in span], num_queues)  # fmt: skip
        new += [span.start + k for k in local]
        done = span.stop
    new += range(done, len(before))
    if new == list(range(len(before))):
        return False
    if replay_graph(g, new, figures, num_queues)[0] >= replay_graph(g, range(len(before)), figures, num_queues)[0]:
        return False
    reorder(fn, [before[i] for i in new])
    g.renumbered(new).keep(fn)  # for dep-reduction and dma-optimization, which read the same edges next
    return True


@dataclass(frozen=True)
class PostSchedulePass(ModulePass):
    name = "post-schedule"
    num_queues: int = DEFAULT_NUM_QUEUES

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_options(self.num_queues)
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            post_schedule(fn, target_of(op), self.num_queues)
