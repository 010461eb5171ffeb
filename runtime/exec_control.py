"""Executors of the control instructions: registers, branches and loops, semaphore waits (executed once per
core, when every engine has reached the barrier), and the LNC=2 pair's per-core effects (the scheduler makes the
cores meet: ``_Scheduler._meet``), plus device printing.
"""

from __future__ import annotations

import numpy as np

from nkic.runtime import semantics as sem
from nkic.runtime.errors import SimulationError
from nkic.runtime.executors import Operands, _alu_op, _value, execute
from nkic.runtime.state import _Core
from nkic.target.instructions import NUM_REGISTERS, mask_cores
from nkic.target.isa import Instr, bits_i32


def _reg(core: _Core, ins: Instr, prop: str) -> int:
    n = ins.imm(prop)
    if not 0 <= n < NUM_REGISTERS:
        raise SimulationError(f"{prop} {n} is not a register (0..{NUM_REGISTERS - 1})")
    return n


def _reg_source(core: _Core, ins: Instr, reg: str, imm: str) -> int:
    return core.regs[_reg(core, ins, reg)] + bits_i32(ins.imm(imm))


def _wrap_i32(value: int) -> int:
    return bits_i32(int(value) & 0xFFFFFFFF)


def _set_reg(core: _Core, ins: Instr, prop: str, value: int) -> None:
    n = _reg(core, ins, prop)
    if n:  # writes to register 0 are dropped: it reads as zero
        core.regs[n] = _wrap_i32(value)


@execute("REG_ALU")
def _exec_reg_alu(core: _Core, ins: Instr, ops: Operands) -> None:
    a = np.int64(_reg_source(core, ins, "src0_reg", "imm0"))
    b = np.int64(_reg_source(core, ins, "src1_reg", "imm1"))
    _set_reg(core, ins, "dst_reg", int(sem.alu(_alu_op(ins, "op"), a, b)))


@execute("REG_LOAD")
def _exec_reg_load(core: _Core, ins: Instr, ops: Operands) -> None:
    src = ops.src
    if src.nparts * src.free != 1:
        raise SimulationError(f"a register loads one element, not {src.op.shape}")
    value = src.raw().reshape(-1)[0]
    if not np.isfinite(value):
        raise SimulationError(f"register load of the non-finite value {value}")
    _set_reg(core, ins, "dst_reg", int(value))


@execute("REG_STORE")
def _exec_reg_store(core: _Core, ins: Instr, ops: Operands) -> None:
    dst = ops.dst
    if dst.nparts * dst.free != 1:
        raise SimulationError(f"a register stores one element, not {dst.op.shape}")
    dst.store(np.asarray([core.regs[_reg(core, ins, "src_reg")]], np.int64))


@execute("LOOP_BEGIN")
def _exec_loop_begin(core: _Core, ins: Instr, ops: Operands) -> bool:
    """Taken (skip the body) when the condition register is zero."""
    return core.regs[_reg(core, ins, "cond_reg")] == 0


@execute("LOOP_END")
def _exec_loop_end(core: _Core, ins: Instr, ops: Operands) -> bool:
    """Taken (back to the body's start) while the condition register is non-zero."""
    return core.regs[_reg(core, ins, "cond_reg")] != 0


@execute("COUNTED_LOOP_BEGIN")
def _exec_counted_loop_begin(core: _Core, ins: Instr, ops: Operands) -> bool:
    """r[iv_reg] = 0; taken (skip the body) when the bound allows no iteration."""
    _set_reg(core, ins, "iv_reg", 0)
    return bits_i32(ins.imm("bound")) <= 0


@execute("COUNTED_LOOP_END")
def _exec_counted_loop_end(core: _Core, ins: Instr, ops: Operands) -> bool:
    """r[iv_reg] += step; taken (back to the body's start) while r[iv_reg] < bound."""
    _set_reg(core, ins, "iv_reg", core.regs[_reg(core, ins, "iv_reg")] + bits_i32(ins.imm("step")))
    return core.regs[_reg(core, ins, "iv_reg")] < bits_i32(ins.imm("bound"))


@execute("SEM_WAIT")
def _exec_sem_wait(core: _Core, ins: Instr, ops: Operands) -> None:
    """No data effect: the wait itself is the scheduler's."""


@execute("SENDRECV")
def _exec_sendrecv(core: _Core, ins: Instr, ops: Operands) -> None:
    """The receiving half of an exchange: ``dst`` = the tile core ``recv_from_rank`` sent on this pipe (the
    scheduler has put every member's ``src`` into its outbox first, so an exchange in place swaps)."""
    peer, pipe = int(_value(ins, "recv_from_rank")), int(_value(ins, "pipe_id"))
    if peer >= len(core.pair):
        raise SimulationError(f"recv_from_rank {peer} names no core (the run has {len(core.pair)})")
    sent = core.pair[peer].outbox.get(pipe)
    if sent is None:
        raise SimulationError(f"core {peer} sent nothing on pipe {pipe} to core {core.index}")
    dst = ops.dst
    if sent.dtype != dst.dtype or sent.shape != (dst.nparts, dst.free):
        raise SimulationError(f"core {peer} sent a {sent.shape} {sent.dtype} tile (partitions, elements) on pipe "
                              f"{pipe}; dst is ({dst.nparts}, {dst.free}) {dst.dtype}")  # fmt: skip
    dst.store_raw(sent)


@execute("DEBUG_PRINT")
def _exec_debug_print(core: _Core, ins: Instr, ops: Operands) -> None:
    """``nl.device_print``: one line, ``<prefix> <value>``, what ``print(prefix, value)`` writes for the tile as a
    numpy array of its own shape and dtype (numpy's ``str``, under the caller's print options). It runs when the
    instruction executes, so it shows the value at that point of the run: after the writes it depends on, before
    the later ones (which wait for it); once per execution, so once per iteration of a loop."""
    index = ins.imm("prefix")
    if index >= len(core.strings):
        raise SimulationError(f"prefix string {index} is not in the NEFF's string table ({len(core.strings)} strings)")
    src = ops.src
    value = src.raw().reshape(src.op.shape)
    core.on_print(f"{core.strings[index]} {value}")


@execute("CORE_BARRIER")
def _exec_core_barrier(core: _Core, ins: Instr, ops: Operands) -> None:
    """No data effect: the cores' meeting is the scheduler's; a barrier must name its own core."""
    cores = mask_cores(int(_value(ins, "core_mask")))
    if core.index not in cores:
        raise SimulationError(f"core {core.index} is not one of the barrier's cores {cores}")
