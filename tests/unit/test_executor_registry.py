"""The executor registry applies what the declarations say: every opcode's same-shape slots are checked against dst
before its executor runs (no executor compares shapes by hand), and an ``@elementwise`` function is an opcode's
whole effect."""

from __future__ import annotations

import numpy as np
import pytest

from nkic.runtime.errors import SimulationError
from nkic.runtime.executors import EXECUTORS
from nkic.runtime.simulator import _Core  # noqa: F401  (loads every exec_* module, so EXECUTORS is complete)
from nkic.target.isa import OPCODES, Instr, Operand, OpSpec
from nkic.target.machine import DEFAULT_TARGET, TARGETS
from nkic.target.vocab import ALU_OPS

PARTS, FREE = 4, 8


def _tile(free: int, offset: int = 0) -> Operand:
    return Operand("sbuf", "float32", ((1, PARTS), (1, free)), address=offset)


def _with(spec: OpSpec, tiles: dict[str, Operand]) -> Instr:
    return Instr(spec.mnemonic, spec.engines[0], tuple(tiles.get(s) for s in spec.slots))


def _tile_slots(spec: OpSpec) -> list[str]:
    """The same-shape slots that hold tiles (a ``pattern`` operand generates its values)."""
    return [s for s in spec.same_shape if s != "pattern"]


SHAPED = sorted(m for m, s in OPCODES.items() if _tile_slots(s) and "dst" in s.slots)


def test_some_opcodes_declare_same_shape_slots() -> None:
    assert {"TENSOR_TENSOR", "TENSOR_SCALAR", "ACTIVATE"} <= set(SHAPED)


@pytest.mark.parametrize("mnemonic", SHAPED)
def test_a_same_shape_slot_of_another_shape_is_refused_before_the_executor_runs(mnemonic: str) -> None:
    spec = OPCODES[mnemonic]
    for bad in _tile_slots(spec):
        tiles = {"dst": _tile(FREE)}
        tiles.update({s: _tile(FREE - 1 if s == bad else FREE, 64 * (i + 1)) for i, s in enumerate(_tile_slots(spec))})
        core = _Core(0, TARGETS[DEFAULT_TARGET], {})
        with pytest.raises(SimulationError, match="operand shapes disagree"):
            EXECUTORS[mnemonic](core, _with(spec, tiles))


def test_elementwise_function_is_the_whole_effect() -> None:
    """TENSOR_TENSOR is one ``@elementwise`` function: dst = op(in0, in1), the operands opened by the registry."""
    spec = OPCODES["TENSOR_TENSOR"]
    core = _Core(0, TARGETS[DEFAULT_TARGET], {})
    a, b = (np.arange(PARTS * FREE, dtype=np.float32).reshape(PARTS, FREE) + k for k in (1.0, 3.0))
    for values, offset in ((a, 0), (b, 64)):
        core.sbuf[:PARTS, offset : offset + 4 * FREE] = values.view(np.uint8)
    tiles = {"dst": _tile(FREE, 128), "in0": _tile(FREE, 0), "in1": _tile(FREE, 64)}
    ins = Instr(spec.mnemonic, "dve", tuple(tiles.get(s) for s in spec.slots), imms=(ALU_OPS.code("subtract"),))
    EXECUTORS["TENSOR_TENSOR"](core, ins)
    got = core.sbuf[:PARTS, 128 : 128 + 4 * FREE].copy().view(np.float32)
    np.testing.assert_array_equal(got, a - b)
