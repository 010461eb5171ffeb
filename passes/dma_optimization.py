"""``dma-optimization``: coalescing of adjacent transfers, then DMA queues assigned by load instead of round-robin.

**Coalescing** (``coalesce=true``, the default). A kernel often loads a block as one DMA per tile: ``dma_copy
dst=b[:, k, :] src=x[k*128:(k+1)*128, cols]`` for k = 0..7. Transfers that move the same pattern between the same
two tensors, each one's source and destination a fixed step further on than the previous one's, become one
transfer with an extra dimension of that step (placed after the partition/row dimension on both sides, so element
``(p, k, ...)`` still goes where the k-th transfer put it). Each transfer costs a descriptor and a fixed start
(``target/costs.py``); one transfer pays them once. A transfer joins its group only if every instruction it
depends on comes before the group's first transfer (so doing its work there cannot move it before anything it
waits for; instructions that waited for it wait for the group), it is a plain copy (no view, dynamic offset or
other option) and the cost model's time of the merged transfer is below the sum of the separate ones. Merging
also makes every consumer wait for the whole group, so the function keeps the merged form only when the replay
below finishes no later than without it.

``schedule-instructions`` plans every transfer on whichever queue is free first; ``insert-semaphores`` used to deal
them out round-robin, so a long transfer could hold up the next ones dealt to its queue while another queue sat
idle. This pass replays the final order against the shared cost model (each engine in order; a transfer ready
once its producers have finished and its issuing engine got to it) and puts each transfer on the queue where it
can start first (ties: the queue after the last one used, so equal transfers still spread). It sets ``queue``,
which ``insert-semaphores`` then keeps. Runs after the order is final (after ``schedule-instructions``).

Any queue assignment is correct: queues are FIFO, and ``insert-semaphores`` turns every edge between different
queues into a semaphore wait. Control instructions are barriers: every queue is drained there, and the replay
restarts after one.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.passes.targeting import target_of
from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr, i64_attr
from nkic.dialects.traits import CopiesData, IsControl, IsDma
from nkic.passes.lowering import cost_record
from nkic.passes.schedule_instructions import check_options, duration_ns
from nkic.passes.stretch_graph import StretchGraph, reorder
from nkic.target.costs import dma_ns, instr_ns
from nkic.target.isa import MAX_FREE_DIMS
from nkic.passes.options import DEFAULT_NUM_QUEUES
from nkic.target.machine import NUM_DMA_QUEUES, Target


def assign_queues(fn: bir.FunctionOp, target: Target, num_queues: int, costs: Costs | None = None) -> float:
    """Set every DMA's ``queue``; returns the replayed finish time (ns) of the function."""
    if fn.has_loops():
        raise PassFailedException("dma-optimization needs unrolled BIR (run bir-unroll first)")
    insts = list(fn.instructions())
    graph = StretchGraph.of(fn, insts, strict=False)  # dep-reduction's, when it ran just before
    end, queues = replay(insts, fn.memlocs(), target, num_queues, costs, graph)
    _set_queues(queues)
    return end


def _set_queues(queues: dict[bir.BirInst, int]) -> None:
    for inst, q in queues.items():
        inst.properties["queue"] = i64_attr(q)


Costs = dict[bir.BirInst, tuple[float, float]]  # instruction -> (issue ns on its engine, duration ns)


def replay_ns(
    insts: list[bir.BirInst], locs: dict[str, bir.MemLocOp], target: Target, num_queues: int,
    costs: Costs | None = None,
) -> float:
    """The replayed finish time (ns) of ``insts`` in this order (their dependency edges by id), IR unchanged.
    ``costs`` caches each instruction's figures across replays (drop an instruction whose operands change)."""
    return replay(insts, locs, target, num_queues, costs)[0]


def cost_figures(
    inst: bir.BirInst, locs: dict[str, bir.MemLocOp], target: Target, costs: Costs
) -> tuple[float, float]:
    """(issue ns on the engine, duration ns on the engine or queue) of ``inst``, through the ``costs`` cache."""
    got = costs.get(inst)
    if got is None:
        got = costs[inst] = _figures(inst, locs, target)
    return got


# Properties the cost record never reads (``lowering.cost_record``'s list less the engine, which it keys on): they
# change from pass to pass (post-schedule renumbers, dep-reduction drops edges) while the figures stay the same.
_UNCOSTED = frozenset(("id", "deps", "waits", "signal"))
_FIGURES = "_nkic_figures"


def _figures(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], target: Target) -> tuple[float, float]:
    """``inst``'s (issue, duration), memoised on the instruction across passes: post-schedule and
    dma-optimization each price every instruction (~12 us: the cost record's memo check, then the cost model). The
    memo holds while the target, every property the record can read and each operand memloc's memory and dtype are
    the very same objects (attributes are immutable: a pass that changes one puts a new object there)."""
    props = inst.properties
    keys, values = tuple(props), tuple(props.values())
    mems = []
    for r in props["refs"].data:  # type: ignore[attr-defined]
        lp = locs[r.data].properties
        mems += (lp["memory"], lp["dtype"])
    memo = inst.__dict__.get(_FIGURES)
    if memo is not None and memo[0] is target and all(map(operator.is_, mems, memo[5])):
        _, seen_keys, pick, costed_keys, costed, _, got = memo
        if seen_keys != keys:  # a property came or went (dep-reduction drops every edge of some): look again
            pick = _picker(tuple([n for n, k in enumerate(keys) if k not in _UNCOSTED]))
            if pick(keys) != costed_keys:
                pick = None
        if pick is not None and all(map(operator.is_, pick(values), costed)):
            if seen_keys != keys:
                inst.__dict__[_FIGURES] = (target, keys, pick, costed_keys, costed, mems, got)
            return got
    if inst.has_trait(IsDma):  # one cost record for both figures (``duration_ns`` is ``dma_ns`` of it)
        record = cost_record(inst, locs)
        got = (instr_ns(record, target), dma_ns(record, target))
    else:
        got = (0.0, duration_ns(inst, locs, target))
    pick = _picker(tuple([n for n, k in enumerate(keys) if k not in _UNCOSTED]))
    inst.__dict__[_FIGURES] = (target, keys, pick, pick(keys), pick(values), mems, got)
    return got


@functools.cache
def _picker(idx: tuple[int, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """The values at ``idx`` of a tuple, as a tuple (``itemgetter`` returns a bare value for one index)."""
    if len(idx) == 1:
        return lambda v: (v[idx[0]],)
    return operator.itemgetter(*idx)  # type: ignore[return-value]


def replay(
    insts: list[bir.BirInst], locs: dict[str, bir.MemLocOp], target: Target, num_queues: int,
    costs: Costs | None = None, graph: StretchGraph | None = None,
) -> tuple[float, dict[bir.BirInst, int]]:
    """Replay ``insts`` in order against the cost model; (finish time in ns, the queue each DMA goes to).
    ``graph``: the edges of ``insts`` when the caller has them (else read here, leniently)."""
    g = StretchGraph.build(insts, strict=False) if graph is None else graph
    costs = {} if costs is None else costs
    figures = [(0.0, 0.0) if c else cost_figures(inst, locs, target, costs) for inst, c in zip(insts, g.control)]
    end, queue_of = replay_graph(g, range(len(insts)), figures, num_queues)
    return end, {insts[i]: q for i, q in queue_of.items()}


def replay_graph(
    g: StretchGraph, order: Sequence[int], figures: Sequence[tuple[float, float]], num_queues: int
) -> tuple[float, dict[int, int]]:
    """The replay on plain arrays: the positions of ``g`` in ``order`` (a topological order of its edges, with its
    barriers where they are), ``figures[i]`` position i's (issue, duration); (finish ns, position -> queue).

    Each engine runs its instructions in order; an instruction is ready once its producers have finished. A DMA
    costs its issuing engine the issue time, then waits for the queue where it starts first (ties: the queue after
    the last one used). A barrier drains everything: the replay restarts from the finish time so far."""
    control, dma, engine, preds = g.control, g.dma, g.engine, g.preds
    # Every finish time of an earlier stretch is at most ``floor`` (the latest finish so far): entries left over
    # from there, and the zeros of positions not replayed yet, count as ``floor`` by the max below.
    finish = [0.0] * len(control)
    engine_free: dict[str, float] = {}
    queue_free = [0.0] * num_queues
    queue_of: dict[int, int] = {}
    floor = end = 0.0
    last = num_queues - 1
    for i in order:
        if control[i]:  # a barrier: everything drains, then all starts afresh
            floor = end
            engine_free, queue_free = {}, [floor] * num_queues
            continue
        ready = floor
        for p in preds[i]:
            if finish[p] > ready:
                ready = finish[p]
        e = engine[i]
        free = engine_free.get(e, floor)
        if free > ready:
            ready = free
        issue, duration = figures[i]
        if dma[i]:  # the issuing engine spends the issue cost, then the transfer waits for a queue
            issued = engine_free[e] = ready + issue
            best_q, best_t = 0, math.inf
            for k in range(last + 1, last + 1 + num_queues):  # first the queue after the last one used
                q = k % num_queues
                t = queue_free[q] if queue_free[q] > issued else issued
                if t < best_t:
                    best_q, best_t = q, t
            done = queue_free[best_q] = best_t + duration
            queue_of[i] = last = best_q
        else:
            done = engine_free[e] = ready + duration
        finish[i] = done
        if done > end:
            end = done
    return end, queue_of


# what a plain copy carries (a merged transfer keeps its first one's loc and call)
_PLAIN_PROPS = frozenset({"roles", "aps", "refs", "id", "engine", "deps", "queue", "loc", "call"})


def _plain_copy(inst: bir.BirInst) -> bool:
    """A DMA copy (``dma_copy``, by its traits) with nothing but its operands, id, engine, edges (and queue): static, view-less patterns."""
    if not (inst.has_trait(IsDma) and inst.has_trait(CopiesData)) or inst.role_names != ["dst", "src"] \
            or set(inst.properties) - _PLAIN_PROPS:
        return False
    return all(not ap.is_dynamic and not ap.view_dtype and not any(ap.iv_coeffs) for ap in inst.aps.data)


class _Group:
    """Transfers being coalesced: the first one (which takes the group's work), the step per side, the count."""

    def __init__(self, head: bir.BirInst, position: int) -> None:
        self.head, self.position, self.members = head, position, [head]
        self.step: tuple[int, int] | None = None

    def offsets(self, inst: bir.BirInst) -> tuple[int, int]:
        return inst.aps.data[0].offset_value, inst.aps.data[1].offset_value

    def accepts(self, inst: bir.BirInst, position_of: dict[int, int]) -> bool:
        head = self.head
        if inst.refs != head.refs or inst.engine != head.engine:
            return False
        if any(a.pair_tuple != b.pair_tuple for a, b in zip(inst.aps.data, head.aps.data)):
            return False
        (d1, s1), (d0, s0) = self.offsets(inst), self.offsets(self.members[-1])
        step = (d1 - d0, s1 - s0)
        if 0 in step or (self.step is not None and step != self.step):
            return False
        return all(position_of[d] < self.position for d in inst.dep_ids)

    def merged_aps(self) -> list[AccessPatternAttr]:
        assert self.step is not None
        out = []
        for ap, step in zip(self.head.aps.data, self.step):
            pairs = ap.pairs
            out.append(AccessPatternAttr(ap.offset_value, [pairs[0], (step, len(self.members)), *pairs[1:]]))
        return out


def _row_elems(loc: bir.MemLocOp) -> int:
    return math.prod(loc.dims[1:])


def _encodable(group: _Group) -> bool:
    """The merged transfer adds a dimension to each pattern: each must still have at most ``MAX_FREE_DIMS`` free
    dimensions, the most an ISA operand encodes."""
    return all(len(ap.pairs) <= MAX_FREE_DIMS for ap in group.head.aps.data)


def _stays_in_rows(group: _Group, locs: dict[str, bir.MemLocOp]) -> bool:
    """On chip, the new dimension must stay inside each partition's row (a step across partitions is not a free
    dimension): every member's free elements lie in the same partitions as the first one's."""
    assert group.step is not None
    for ap, ref, step in zip(group.head.aps.data, group.head.ref_names, group.step):
        loc = locs[ref]
        if loc.mem not in ("sbuf", "psum"):
            continue
        row = _row_elems(loc)
        extent = sum(s * (n - 1) for s, n in ap.pairs[1:])
        if step < 0 or any(s < 0 for s, _ in ap.pairs[1:]):
            return False
        if ap.offset_value % row + step * (len(group.members) - 1) + extent >= row:
            return False
    return True


def _cheaper(group: _Group, locs: dict[str, bir.MemLocOp], target: Target) -> bool:
    """The cost model's guard: one transfer of the group's shape takes less than the separate ones."""
    merged = group.head.clone()
    merged.properties["aps"] = ArrayAttr(group.merged_aps())
    # the members' figures through their memo: the group is priced again each time it grows
    return duration_ns(merged, locs, target) < sum(_figures(m, locs, target)[1] for m in group.members)


def coalesce(fn: bir.FunctionOp, target: Target, num_queues: int, costs: Costs | None = None) -> int:
    """Coalesce adjacent transfers in ``fn`` when the replay says so; returns the transfers removed. ``costs``:
    the replays' cache, left valid for the function as it is afterwards."""
    return _coalesce(fn, target, num_queues, costs)[0]


Replayed = tuple[float, dict[bir.BirInst, int]]  # what ``replay`` returns


def _coalesce(
    fn: bir.FunctionOp, target: Target, num_queues: int, costs: Costs | None = None
) -> tuple[int, Replayed | None]:
    """``coalesce``, and the replay of the function as it is afterwards when one was made (the queues
    ``assign_queues`` would compute again: the same order and edges, only renumbered)."""
    insts = list(fn.instructions())
    locs = fn.memlocs()
    position_of = {inst.inst_id: i for i, inst in enumerate(insts)}
    open_groups: dict[tuple[str, ...], _Group] = {}
    groups: list[_Group] = []
    for i, inst in enumerate(insts):
        if inst.has_trait(IsControl):
            open_groups.clear()
            continue
        if not inst.has_trait(IsDma) or not _plain_copy(inst):
            continue
        key = (*inst.ref_names, inst.engine.data)
        group = open_groups.get(key)
        if group is not None and group.accepts(inst, position_of):
            step = tuple(a - b for a, b in zip(group.offsets(inst), group.offsets(group.members[-1])))
            group.step = step  # type: ignore[assignment]
            group.members.append(inst)
            if _encodable(group) and _stays_in_rows(group, locs) and _cheaper(group, locs, target):
                continue
            group.members.pop()
            if len(group.members) == 1:
                group.step = None
        open_groups[key] = group = _Group(inst, i)
        groups.append(group)
    merging = [g for g in groups if len(g.members) > 1]
    if not merging:
        return 0, None
    costs = {} if costs is None else costs
    before = replay(insts, locs, target, num_queues, costs, StretchGraph.of(fn, insts, strict=False))
    saved = {inst: (inst.properties.get("deps"), inst.properties["aps"]) for inst in insts}
    gone = _apply(merging)
    for g in merging:  # their operands changed
        costs.pop(g.head, None)
    after = replay(list(fn.instructions()), locs, target, num_queues, costs)
    if after[0] > before[0]:  # undo: the removed transfers back where they were, the changed properties back
        block = fn.body.block
        dropped = set(gone)
        for k, inst in enumerate(insts):
            if inst in dropped:  # never the first: its group's first transfer comes before it
                block.insert_op_after(inst, insts[k - 1])
        for inst, (deps, aps) in saved.items():
            props = inst.properties
            if props["aps"] is not aps:
                props["aps"] = aps
            if props.get("deps") is not deps:
                if deps is None:
                    props.pop("deps", None)
                else:
                    props["deps"] = deps
        for g in merging:  # back to their own operands
            costs.pop(g.head, None)
        return 0, before
    reorder(fn, list(fn.instructions()))
    for m in gone:
        m.erase()
    return len(gone), after


def _apply(merging: list[_Group]) -> list[bir.BirInst]:
    """Give each group's first transfer the group's work and edges, point every edge on the others at it, and
    detach the others (returned)."""
    into = {m.inst_id: g.head.inst_id for g in merging for m in g.members[1:]}
    gone = [m for g in merging for m in g.members[1:]]
    for g in merging:
        deps = {d: k for m in g.members for k, d in m.dep_pairs}
        g.head.properties["aps"] = ArrayAttr(g.merged_aps())
        if deps:
            g.head.properties["deps"] = bir.deps_attr(sorted(((k, d) for d, k in deps.items()), key=lambda e: e[1]))
    block = gone[0].parent_block()
    for m in gone:
        m.detach()
    assert block is not None
    for inst in block.ops:
        if isinstance(inst, bir.BirInst) and any(d in into for d in inst.dep_ids):
            deps = {}
            for k, d in inst.dep_pairs:
                deps.setdefault(into.get(d, d), k)
            inst.properties["deps"] = bir.deps_attr(sorted(((k, d) for d, k in deps.items()), key=lambda e: e[1]))
    return gone


@dataclass(frozen=True)
class DmaOptimizationPass(ModulePass):
    name = "dma-optimization"
    num_queues: int = DEFAULT_NUM_QUEUES
    coalesce: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_options(self.num_queues, NUM_DMA_QUEUES)
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            if fn.has_loops():  # before coalescing walks the loop bodies
                raise PassFailedException("dma-optimization needs unrolled BIR (run bir-unroll first)")
            costs: Costs = {}
            replayed = _coalesce(fn, target_of(op), self.num_queues, costs)[1] if self.coalesce else None
            if replayed is None:
                assign_queues(fn, target_of(op), self.num_queues, costs)
            else:  # coalescing replayed the function as it now is: its queues are the ones to keep
                _set_queues(replayed[1])
            StretchGraph.forget(fn)  # the last pass to read it: its memory goes with it
