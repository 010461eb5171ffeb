"""``insert-semaphores``: engine scheduling with semaphores.

Each engine runs its instructions in program order; DMAs are issued from SP onto queues (the ``queue`` that
``dma-optimization`` chose, else round-robin over ``num_queues``), FIFO per queue. Every instruction signals its engine's semaphore (a DMA: its queue's) when it
completes, so "instruction k of engine E is done" is "S[E] >= k+1". A dependency on another engine or queue
becomes a wait on that semaphore; same-engine and same-queue edges are implied by in-order execution, and a wait
already satisfied by an earlier wait on the same engine is dropped. Semaphore ids: engines pe 0, act 1, dve 2,
pool 3, sp 4; DMA queue q is 8+q.

A control instruction (``IsControl``: registers, runtime loops) is a barrier every engine and queue reaches with all
work done, and it resets every semaphore to zero: it gets no semaphore of its own, and counting starts afresh after
it (which is what lets a loop body's waits hold in every iteration).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.common import i64_attr
from nkic.dialects.traits import IsControl, IsDma
from nkic.passes.options import DEFAULT_NUM_QUEUES
from nkic.target.machine import ENGINE_NAMES, NUM_DMA_QUEUES, engine_sem, queue_sem

ENGINE_SEM = {e: engine_sem(e) for e in ENGINE_NAMES}
MAX_QUEUES = NUM_DMA_QUEUES


def schedule(fn: bir.FunctionOp, num_queues: int) -> None:
    sem_of: dict[int, int] = {}
    count_of: dict[int, int] = {}
    counts: dict[int, int] = {}
    known: dict[str, dict[int, int]] = {e: {} for e in ENGINE_SEM}
    dmas = 0
    for inst in fn.instructions():
        if inst.has_trait(IsControl):
            sem_of, count_of, counts = {}, {}, {}
            known = {e: {} for e in ENGINE_SEM}
            for prop in ("signal", "waits", "queue"):
                inst.properties.pop(prop, None)
            continue
        engine = inst.engine.data
        if engine not in ENGINE_SEM:
            raise PassFailedException(f"instruction {inst.inst_id} has no engine (run assign-engines first)")
        if inst.has_trait(IsDma):  # a queue already chosen (dma-optimization) is kept
            queue = inst.queue.value.data if inst.queue is not None else dmas % num_queues
            if queue >= num_queues:
                raise PassFailedException(f"instruction {inst.inst_id} is on DMA queue {queue}, beyond num_queues")
            dmas += 1
            sem = queue_sem(queue)
            inst.properties["queue"] = i64_attr(queue)
        else:
            sem = ENGINE_SEM[engine]
        waits: dict[int, int] = {}
        for dep in inst.dep_ids:
            if dep not in sem_of:
                raise PassFailedException(f"instruction {inst.inst_id} depends on {dep}, which is not before it in "
                                          "the same barrier-free stretch")  # fmt: skip
            dsem = sem_of[dep]
            if dsem == sem:
                continue
            waits[dsem] = max(waits.get(dsem, 0), count_of[dep])
        needed = {s: v for s, v in sorted(waits.items()) if known[engine].get(s, 0) < v}
        known[engine].update(needed)
        counts[sem] = counts.get(sem, 0) + 1
        sem_of[inst.inst_id], count_of[inst.inst_id] = sem, counts[sem]
        inst.properties["signal"] = i64_attr(sem)
        if needed:
            inst.properties["waits"] = bir.waits_attr([x for pair in needed.items() for x in pair])
        else:
            inst.properties.pop("waits", None)


@dataclass(frozen=True)
class InsertSemaphoresPass(ModulePass):
    name = "insert-semaphores"
    num_queues: int = DEFAULT_NUM_QUEUES

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not 1 <= self.num_queues <= MAX_QUEUES:
            raise PassFailedException(f"num_queues must be 1..{MAX_QUEUES}")
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            schedule(fn, self.num_queues)
