"""``isa-verify``: whole-program checks on the ISA streams that single-op verifiers cannot make.

The semaphore protocol is played out abstractly (no timing): an engine may advance while its next instruction's
wait is met; DMA completions are credited to their queue semaphores in issue order. If no engine can advance
before every stream is done, the schedule would deadlock on hardware, and the pass reports who waits for what.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException


def check_core(core: object) -> None:
    from nkic.dialects.isa import core_streams

    streams = {e: list(s) for e, s in core_streams(core).items()}  # type: ignore[arg-type]
    pos = dict.fromkeys(streams, 0)
    sems: dict[int, int] = {}
    progressed = True
    while progressed:
        progressed = False
        for engine, insts in streams.items():
            while pos[engine] < len(insts):
                inst = insts[pos[engine]]
                w = inst.wait_sem
                if w is not None and sems.get(w.value.data, 0) < inst.wait_value.value.data:  # type: ignore[union-attr]
                    break
                if inst.signal_sem is not None:
                    s = inst.signal_sem.value.data
                    sems[s] = sems.get(s, 0) + 1
                pos[engine] += 1
                progressed = True
    stuck = [
        f"{e}: instruction {insts[pos[e]].inst_id} waits for semaphore {insts[pos[e]].wait_sem.value.data} >= "  # type: ignore[union-attr]
        f"{insts[pos[e]].wait_value.value.data} (it reaches {sems.get(insts[pos[e]].wait_sem.value.data, 0)})"  # type: ignore[union-attr]
        for e, insts in streams.items()
        if pos[e] < len(insts)
    ]
    if stuck:
        raise PassFailedException(f"@{core.sym_name.data}: the semaphore schedule deadlocks: " + "; ".join(stuck))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class IsaVerifyPass(ModulePass):
    name = "isa-verify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from nkic.dialects.isa import CoreOp

        cores = [c for c in op.ops if isinstance(c, CoreOp)]
        if not cores:
            raise PassFailedException("isa-verify expects isa.core ops (run bir-to-isa first)")
        for core in cores:
            check_core(core)
