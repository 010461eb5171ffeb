"""``schedule-instructions``: list scheduling of the flat instruction stream onto the engines.

Engines execute in order, so the order instructions are emitted in *is* the schedule. Program order serialises
independent work (e.g. one attention Q group's softmax blocks the next group's QK^T on PE). This pass replays the
dependency graph of ``dependency-analysis`` against the shared cost model (``nkic.target.costs``, the simulator's): repeatedly emit, among the instructions
whose dependencies are all emitted, the one that can start earliest (its engine free and its producers finished),
ties broken by program order. Any topological order of the edges is correct; instructions are then renumbered in
the new order (dependency edges follow). Control instructions (``IsControl``: registers, runtime loops) are
barriers: each stretch between two of them is scheduled on its own, and they keep their places.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.passes.targeting import target_of
from nkic.dialects import bir
from nkic.dialects.common import i64_attr
from nkic.passes.dependency_analysis import body, has_loops, kind_of
from nkic.passes.lowering import cost_ns, cost_record
from nkic.target.costs import occupancy_ns
from nkic.target.isa import Instr
from nkic.passes.options import DEFAULT_NUM_QUEUES
from nkic.target.machine import Target


def duration_ns(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], target: Target, engine: str | None = None) -> float:
    """How long ``inst`` holds its resource (engine, or DMA queue) under the shared cost model: the planning model.

    An engine instruction is priced as the simulator's timeline runs it, ``occupancy_ns`` (the MIN_II floor and
    VectorE's performance modes, which make 2-byte copies up to 4x shorter than the per-instruction formula [A3]):
    planning with the formula alone mis-balanced VectorE against ScalarE. A transfer keeps ``dma_ns`` (fixed cost +
    bytes over its engines' rate alone), the figure the DMA passes' replays compare. ``engine`` prices it on another
    engine than its own (assign-engines)."""
    if kind_of(inst).dma:
        return cost_ns(inst, locs, target, True)
    return occupancy_planned_ns(cost_record(inst, locs, engine), target)


# record -> its occupancy per target; records are shared by equal instructions (passes/lowering.py), so a kernel
# prices a few hundred of them; the entry holds the record and target, so their ids are not reused while it lives
_OCCUPANCY: dict[tuple[int, int], tuple[Instr, Target, float]] = {}


def occupancy_planned_ns(record: Instr, target: Target) -> float:
    """``occupancy_ns(record, target)``, memoised."""
    hit = _OCCUPANCY.get((id(record), id(target)))
    if hit is not None and hit[0] is record and hit[1] is target:
        return hit[2]
    ns = occupancy_ns(record, target)
    _OCCUPANCY[(id(record), id(target))] = (record, target, ns)
    return ns


def schedule(fn: bir.FunctionOp, target: Target, num_queues: int) -> None:
    if has_loops(fn):
        raise PassFailedException("schedule-instructions needs unrolled BIR (run bir-unroll first)")
    insts, locs = body(fn)
    order: list[bir.BirInst] = []
    segment: list[bir.BirInst] = []
    for inst in insts:
        if kind_of(inst).control:
            order += _schedule_segment(fn, segment, locs, target, num_queues) + [inst]
            segment = []
        else:
            segment.append(inst)
    order += _schedule_segment(fn, segment, locs, target, num_queues)
    _reorder(fn, order)


def _schedule_segment(fn: bir.FunctionOp, insts: list[bir.BirInst], locs: dict[str, bir.MemLocOp], target: Target,
                      num_queues: int) -> list[bir.BirInst]:  # fmt: skip
    """A list-scheduled order of ``insts``, whose dependency edges stay among them."""
    index = {inst.properties["id"].value.data: i for i, inst in enumerate(insts)}  # type: ignore[attr-defined]
    decoded: dict[int, tuple[bir.DepAttr, int]] = {}
    try:
        preds: list[list[int]] = [[index[d] for d in _dep_ids(inst, decoded)] for inst in insts]
    except KeyError as e:
        raise PassFailedException(f"@{fn.sym_name.data}: a dependency on instruction {e.args[0]}, which is not "
                                  "before it in the same barrier-free stretch") from None  # fmt: skip
    succs: list[list[int]] = [[] for _ in insts]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    waiting = [len(ps) for ps in preds]
    finish = [0.0] * len(insts)
    engine_free: dict[str, float] = {}
    queue_free = [0.0] * num_queues
    ready: list[tuple[float, int]] = []

    # per instruction, looked up once (the loop below re-ranks up to 16 candidates per step)
    is_dma = [kind_of(inst).dma for inst in insts]
    engine = [inst.engine.data for inst in insts]

    def push(i: int) -> None:
        earliest = max([finish[p] for p in preds[i]], default=0.0)
        heapq.heappush(ready, (earliest, i))

    for i in range(len(insts)):
        if waiting[i] == 0:
            push(i)
    order: list[int] = []
    while ready:
        # the heap key is the data-ready time; re-rank the few best by when their resource (engine, or the
        # earliest free DMA queue) is free: start = max(data ready, resource free), ties to program order
        cands = [heapq.heappop(ready) for _ in range(min(len(ready), 16))]
        queues = min(queue_free)
        best, key = cands[0], (0.0, 0)
        for n, c in enumerate(cands):
            t, i = c
            free = queues if is_dma[i] else engine_free.get(engine[i], 0.0)
            k = (max(t, free), i)
            if n == 0 or k < key:
                best, key = c, k
        for c in cands:
            if c is not best:
                heapq.heappush(ready, c)
        start, i = key
        finish[i] = start + duration_ns(insts[i], locs, target)
        if is_dma[i]:
            q = queue_free.index(queues)
            queue_free[q] = finish[i]
        else:
            engine_free[engine[i]] = finish[i]
        order.append(i)
        for s in succs[i]:
            waiting[s] -= 1
            if waiting[s] == 0:
                push(s)
    if len(order) != len(insts):
        raise PassFailedException(f"@{fn.sym_name.data}: dependency edges form a cycle")
    return [insts[i] for i in order]


def _dep_ids(inst: bir.BirInst, decoded: dict[int, tuple[bir.DepAttr, int]]) -> list[int]:
    """The ids ``inst`` depends on (``dep_list``'s), each distinct shared edge attribute decoded once (the entry
    holds the attribute, so its id is not reused while ``decoded`` lives)."""
    deps = inst.properties.get("deps")
    if deps is None:
        return []
    out = []
    for d in deps.data:  # type: ignore[attr-defined]
        hit = decoded.get(id(d))
        if hit is None:
            hit = decoded[id(d)] = (d, d.on.data)
        out.append(hit[1])
    return out


def _reorder(fn: bir.FunctionOp, new_order: list[bir.BirInst]) -> None:
    """Put ``new_order``'s instructions at the end of ``fn``'s block in that order and renumber them 0.. in it,
    their dependency edges following (sorted by the new ids)."""
    renumber = {inst.properties["id"].value.data: n for n, inst in enumerate(new_order)}  # type: ignore[attr-defined]
    block = fn.body.block
    for inst in new_order:
        inst.detach()
    block.add_ops(new_order)
    # the edge attributes are shared (``bir.deps_attr``): each distinct one is decoded once; the entry holds the
    # attribute, so its id is not reused while the table lives
    decoded: dict[int, tuple[bir.DepAttr, str, int]] = {}
    for inst in new_order:
        props = inst.properties
        props["id"] = i64_attr(renumber[props["id"].value.data])  # type: ignore[attr-defined]
        deps = props.get("deps")
        if deps is not None:
            edges = []
            for d in deps.data:  # type: ignore[attr-defined]
                hit = decoded.get(id(d))
                if hit is None:
                    hit = decoded[id(d)] = (d, d.kind.data, d.on.data)
                edges.append((hit[1], renumber[hit[2]]))
            edges.sort(key=_second)
            props["deps"] = bir.deps_attr(edges)


def _second(edge: tuple[str, int]) -> int:
    return edge[1]


def check_options(num_queues: int, max_queues: int | None = None) -> None:
    """The options of a pass that plans with ``num_queues`` DMA queues (at most ``max_queues``)."""
    if num_queues < 1:
        raise PassFailedException("num_queues must be at least 1")
    if max_queues is not None and num_queues > max_queues:
        raise PassFailedException(f"num_queues must be 1..{max_queues}")


@dataclass(frozen=True)
class ScheduleInstructionsPass(ModulePass):
    name = "schedule-instructions"
    num_queues: int = DEFAULT_NUM_QUEUES  # the DMA queues insert-semaphores will spread transfers over

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_options(self.num_queues)
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            schedule(fn, target_of(op), self.num_queues)
