"""``dma-optimization``: DMA queues assigned by load instead of round-robin.

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

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.traits import IsControl, IsDma
from nkic.passes.lowering import cost_record
from nkic.passes.schedule_instructions import duration_ns
from nkic.target.costs import instr_ns
from nkic.target.machine import NUM_DMA_QUEUES, TARGETS, Target, get_target


def assign_queues(fn: bir.FunctionOp, target: Target, num_queues: int) -> float:
    """Set every DMA's ``queue``; returns the replayed finish time (ns) of the function."""
    if any(isinstance(o, bir.LoopOp) for o in fn.body.walk()):
        raise PassFailedException("dma-optimization needs unrolled BIR (run bir-unroll first)")
    end, queues = replay(list(fn.instructions()), fn.memlocs(), target, num_queues)
    for inst, q in queues.items():
        inst.properties["queue"] = IntegerAttr(q, i64)
    return end


def replay_ns(insts: list[bir.BirInst], locs: dict[str, bir.MemLocOp], target: Target, num_queues: int) -> float:
    """The replayed finish time (ns) of ``insts`` in this order (their dependency edges by id), IR unchanged."""
    return replay(insts, locs, target, num_queues)[0]


def replay(
    insts: list[bir.BirInst], locs: dict[str, bir.MemLocOp], target: Target, num_queues: int
) -> tuple[float, dict[bir.BirInst, int]]:
    """Replay ``insts`` in order against the cost model; (finish time in ns, the queue each DMA goes to)."""
    finish: dict[int, float] = {}
    engine_free: dict[str, float] = {}
    queue_free = [0.0] * num_queues
    queues: dict[bir.BirInst, int] = {}
    floor = end = 0.0
    last = num_queues - 1
    for inst in insts:
        if inst.has_trait(IsControl):  # a barrier: everything drains, then all starts afresh
            floor = end
            finish, engine_free, queue_free = {}, {}, [floor] * num_queues
            continue
        ready = max([finish.get(d, floor) for _, d in inst.dep_list], default=floor)
        engine = inst.engine.data
        ready = max(ready, engine_free.get(engine, floor))
        if inst.has_trait(IsDma):  # the issuing engine spends the issue cost, then the transfer waits for a queue
            issued = ready + instr_ns(cost_record(inst, locs), target)
            engine_free[engine] = issued
            order = [(last + 1 + k) % num_queues for k in range(num_queues)]
            q = min(order, key=lambda k: max(issued, queue_free[k]))
            queue_free[q] = finish[inst.inst_id] = max(issued, queue_free[q]) + duration_ns(inst, locs, target)
            queues[inst] = last = q
        else:
            finish[inst.inst_id] = engine_free[engine] = ready + duration_ns(inst, locs, target)
        end = max(end, finish[inst.inst_id])
    return end, queues


@dataclass(frozen=True)
class DmaOptimizationPass(ModulePass):
    name = "dma-optimization"
    target: str = "gen3"
    num_queues: int = 4

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.target not in TARGETS:
            raise PassFailedException(f"unknown target '{self.target}' (expected {', '.join(TARGETS)})")
        if not 1 <= self.num_queues <= NUM_DMA_QUEUES:
            raise PassFailedException(f"num_queues must be 1..{NUM_DMA_QUEUES}")
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            assign_queues(fn, get_target(self.target), self.num_queues)
