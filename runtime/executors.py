"""The registry of instruction semantics: one executor per opcode, registered with ``@execute`` like xDSL's
``@impl(Op)``, and the operand helpers the executors share.

An executor is ``fn(core, ins, ops)``: ``ops`` opens the instruction's operands by slot name (``ops.dst``), and the
registry has already checked what the declaration says of their shapes (``OpSpec.same_shape``, from the
instruction's elementwise roles), so no executor restates either. An elementwise instruction whose numerics are a
function of its input tiles alone registers that function with ``@elementwise`` and needs no executor at all.

The executors live in the ``exec_*`` modules, one per instruction family; ``runtime/simulator.py`` imports them all,
so ``EXECUTORS`` is complete once it is loaded.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nkic.runtime.errors import SimulationError
from nkic.runtime.semantics import is_int_dtype
from nkic.runtime.state import _Core, _View, _resolve
from nkic.target.isa import Instr, bits_f32, per_opcode


class Operands:
    """The operands of one instruction, opened (resolved to views of the core's memories) by slot name on first use:
    ``ops.dst`` is the view of slot ``dst`` (a SimulationError when it is absent), ``ops.get("src")`` None when it
    is absent."""

    def __init__(self, core: _Core, ins: Instr) -> None:
        self._core, self._ins = core, ins
        self._open: dict[str, _View] = {}

    def __getattr__(self, slot: str) -> _View:
        if slot.startswith("_"):
            raise AttributeError(slot)
        view = self._open.get(slot)
        if view is None:
            view = self._open[slot] = _resolve(self._core, self._ins.operand(slot), slot)
        return view

    def get(self, slot: str) -> _View | None:
        return None if self._ins.operand(slot) is None else getattr(self, slot)


# An executor returns None, or (a branch) whether the branch is taken.
Executor = Callable[["_Core", Instr, Operands], "bool | None"]
# What the scheduler calls: the declared shape checks, then the opcode's executor.
Run = Callable[["_Core", Instr], "bool | None"]


EXECUTORS: dict[str, Run] = {}


def execute(*opcodes: str) -> Callable[[Executor], Executor]:
    """Register the numerical effect of ``opcodes``: ``fn(core, instr, ops)``, called after the declared shape
    checks (:func:`check_same_shape`)."""

    def register(fn: Executor) -> Executor:
        def run(core: _Core, ins: Instr) -> bool | None:
            ops = Operands(core, ins)
            check_same_shape(ins, ops)
            return fn(core, ins, ops)

        per_opcode(EXECUTORS, "executor", *opcodes)(run)
        return fn

    return register


def check_same_shape(ins: Instr, ops: Operands) -> None:
    """The slots the opcode declares of dst's shape (``OpSpec.same_shape``) have dst's (partitions, elements per
    partition). A pattern operand (memory ``none``) is no tile: its shape is the values it generates, which the
    executor checks against dst."""
    slots = [s for s in ins.spec.same_shape if (op := ins.operand(s)) is not None and op.memory != "none"]
    if slots:
        _same_shape(ops.dst, *(getattr(ops, s) for s in slots))


Numerics = Callable[..., np.ndarray]


def elementwise(*opcodes: str, exact_int: bool = True) -> Callable[[Numerics], Numerics]:
    """Register ``fn(ins, *tiles) -> values`` as the whole effect of ``opcodes``: dst = fn of the opcode's
    same-shape slots (``OpSpec.same_shape``, in slot order), each loaded as fp32, or as exact integers when every
    operand has an integer dtype and ``exact_int`` (the engines' integer path, as TENSOR_TENSOR computes)."""

    def register(fn: Numerics) -> Numerics:
        def run(core: _Core, ins: Instr, ops: Operands) -> None:
            srcs = [getattr(ops, s) for s in ins.spec.same_shape if ins.operand(s) is not None]
            integer = exact_int and all(is_int_dtype(v.op.dtype) for v in (ops.dst, *srcs))
            ops.dst.store(fn(ins, *(v.load(integer) for v in srcs)))

        execute(*opcodes)(run)
        return fn

    return register


def _value(ins: Instr, prop: str) -> str | int | float:
    """A decoded immediate; a corrupt enum code is a SimulationError."""
    try:
        return ins.value(prop)
    except ValueError as e:
        raise SimulationError(f"bad {prop}: {e}") from None


def _alu_op(ins: Instr, prop: str) -> str:
    return str(_value(ins, prop))


def _view(core: _Core, ins: Instr, slot: str) -> _View:
    """One operand of an instruction outside its executor (a collective's members, a sendrecv's outbox)."""
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
