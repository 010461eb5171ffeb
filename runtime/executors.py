"""The registry of instruction semantics: one executor per opcode, registered with ``@execute`` like xDSL's
``@impl(Op)``, and the operand helpers the executors share.

The executors live in the ``exec_*`` modules, one per instruction family; ``runtime/simulator.py`` imports them all,
so ``EXECUTORS`` is complete once it is loaded.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nkic.runtime.errors import SimulationError
from nkic.runtime.state import _Core, _View, _resolve
from nkic.target.isa import Instr, bits_f32, per_opcode


# An executor returns None, or (a branch) whether the branch is taken.
Executor = Callable[["_Core", Instr], "bool | None"]


EXECUTORS: dict[str, Executor] = {}


def execute(*opcodes: str) -> Callable[[Executor], Executor]:
    """Register the numerical effect of ``opcodes``: ``fn(core, instr)``."""
    return per_opcode(EXECUTORS, "executor", *opcodes)


def _value(ins: Instr, prop: str) -> str | int | float:
    """A decoded immediate; a corrupt enum code is a SimulationError."""
    try:
        return ins.value(prop)
    except ValueError as e:
        raise SimulationError(f"bad {prop}: {e}") from None


def _alu_op(ins: Instr, prop: str) -> str:
    return str(_value(ins, prop))


def _view(core: _Core, ins: Instr, slot: str) -> _View:
    return _resolve(core, ins.operand(slot), slot)


def _same_shape(dst: _View, *srcs: _View) -> None:
    for src in srcs:
        if (src.nparts, src.free) != (dst.nparts, dst.free):
            raise SimulationError(
                f"operand shapes disagree: {src.nparts}x{src.free} vs destination {dst.nparts}x{dst.free}"
            )


def _scalar_operand(core: _Core, ins: Instr, slot: str, nparts: int, integer: bool) -> np.ndarray:
    """A (P, 1) tile from ``slot`` when present, else the f32 immediate of the same name (integral if ``integer``)."""
    op = ins.operand(slot)
    if op is None:
        value = bits_f32(ins.imm(slot))
        return np.asarray(int(value) if integer else value, np.int64 if integer else np.float32)
    view = _resolve(core, op, slot)
    if view.free != 1 or view.nparts != nparts:
        raise SimulationError(f"scalar operand must be ({nparts}, 1), got {view.op.shape}")
    return view.load(integer)
