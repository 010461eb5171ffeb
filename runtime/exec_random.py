"""Executors of the random number instructions: each engine's XORWOW generator (``runtime/rng.py``) and its
state.
"""

from __future__ import annotations

import numpy as np

from nkic.runtime import rng
from nkic.runtime.errors import SimulationError
from nkic.runtime.executors import Operands, _scalar_operand, execute
from nkic.runtime.state import _Core, _View
from nkic.target.isa import Instr
from nkic.target.machine import XORWOW_WORDS


def _rng_lanes(core: _Core, ins: Instr) -> np.ndarray:
    """The executing engine's PRNG state (lanes x words), a SimulationError on an engine without one."""
    state = core.rng_state.get(ins.engine)
    if state is None:
        raise SimulationError(f"{ins.opcode} on {ins.engine}: the engine has no random number generator")
    return state


def _draw(core: _Core, ins: Instr, view: _View) -> np.ndarray:
    """One 32-bit XORWOW output per element of ``view``, from the lanes of its partitions (which advance)."""
    state, parts = _rng_lanes(core, ins), view.partitions
    lanes = state[parts]
    bits = rng.draw(lanes, view.free)
    state[parts] = lanes
    return bits


@execute("RNG")
def _exec_rng(core: _Core, ins: Instr, ops: Operands) -> None:
    dst = ops.dst
    dst.store_raw(rng.truncate(_draw(core, ins, dst), dst.dtype))


@execute("RAND2")
def _exec_rand2(core: _Core, ins: Instr, ops: Operands) -> None:
    dst = ops.dst
    low = _scalar_operand(core, ins, "min", dst.nparts, False)
    high = _scalar_operand(core, ins, "max", dst.nparts, False)
    dst.store(rng.uniform(_draw(core, ins, dst), low, high))


@execute("DROPOUT")
def _exec_dropout(core: _Core, ins: Instr, ops: Operands) -> None:
    """Kept elements are copied bit for bit (dst and src share a dtype); dropped ones become 0."""
    dst, src = ops.dst, ops.src
    prob = _scalar_operand(core, ins, "prob", dst.nparts, False)
    keep = rng.dropout_keep(_draw(core, ins, dst), prob)
    if dst.dtype != src.dtype:
        raise SimulationError(f"DROPOUT copies {src.op.dtype} into {dst.op.dtype}: the dtypes must match")
    values = src.raw()
    dst.store_raw(np.where(keep, values, np.zeros((), values.dtype)))


@execute("SET_RNG_SEED")
def _exec_set_rng_seed(core: _Core, ins: Instr, ops: Operands) -> None:
    src = ops.src
    if src.dtype.itemsize != 4 or src.nparts * src.free != 1:
        raise SimulationError(f"SET_RNG_SEED reads one 32-bit value, got {src.op.dtype} {src.op.shape}")
    seed = int(src.raw().view(np.uint32).reshape(-1)[0])
    state = _rng_lanes(core, ins)
    state[...] = rng.seed_states(seed, state.shape[0], state.shape[1] // XORWOW_WORDS)


def _state_view(core: _Core, ins: Instr, view: _View) -> tuple[_View, np.ndarray]:
    state = _rng_lanes(core, ins)
    if view.op.dtype != "uint32" or view.free != state.shape[1]:
        raise SimulationError(f"{ins.opcode} on {ins.engine} moves {state.shape[1]} uint32 words per partition, "
                              f"got {view.free} {view.op.dtype}")  # fmt: skip
    return view, state


@execute("RAND_SET_STATE")
def _exec_rand_set_state(core: _Core, ins: Instr, ops: Operands) -> None:
    src, state = _state_view(core, ins, ops.src)
    state[src.partitions] = src.raw()


@execute("RAND_GET_STATE")
def _exec_rand_get_state(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, state = _state_view(core, ins, ops.dst)
    dst.store_raw(state[dst.partitions])
