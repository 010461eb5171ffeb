"""Executors of the DMA instructions: DMA_COPY and DMA_COMPUTE, with static or dynamic operands
(runtime/ISA_FORMAT.md, "Dynamic operands"). Their timing is the scheduler's (``runtime/timeline.py`` queues).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nkic.runtime import semantics as sem
from nkic.runtime.errors import SimulationError
from nkic.runtime.executors import Operands, _alu_op, execute
from nkic.runtime.state import _Core, _MAX_PATTERN_ELEMENTS, _element_offsets, _pattern_count, _resolve
from nkic.target.instructions import NUM_REGISTERS
from nkic.target.isa import Instr, Operand
from nkic.target.machine import NUM_PARTITIONS
from nkic.target.vocab import DTYPES


@execute("DMA_COPY")
def _exec_dma(core: _Core, ins: Instr, ops: Operands) -> None:
    if any(op is not None and op.dyn for op in ins.operands):
        _exec_dma_dynamic(core, ins)
        return
    dst, src = ops.dst, ops.src
    if dst.op.num_elements != src.op.num_elements:
        raise SimulationError(f"DMA element counts differ: dst {dst.op.shape} vs src {src.op.shape}")
    values = src.raw()
    if ins.flag("transpose"):  # swap the outermost and innermost dims of src's pattern, keep the middle ones
        shape = src.op.shape
        if len(shape) < 2:
            raise SimulationError(f"transposing DMA needs a source of rank >= 2, got {shape}")
        values = np.swapaxes(values.reshape(shape), 0, -1)
    if dst.op.dtype == src.op.dtype:
        dst.store_raw(values.reshape(-1))
    else:
        dst.store(values.astype(np.float32).reshape(-1))  # casting transfers go through fp32


@dataclass
class _Elements:
    """Every element of an operand as (row of ``mem``, first byte), row-major in its pattern; ``valid`` marks the
    elements of rows whose run-time address lies inside their memory (static operands: all)."""

    op: Operand
    mem: np.ndarray  # 2-D: (partitions, bytes) on chip, (1, bytes) for an HBM variable
    rows: np.ndarray
    bytes: np.ndarray
    valid: np.ndarray
    written: np.ndarray | None = None  # an output variable's written-flags, shaped as ``mem`` (_Core.written)

    def read(self, keep: np.ndarray) -> np.ndarray:
        cols = self.bytes[keep][:, None] + np.arange(self.op.itemsize)
        return np.ascontiguousarray(self.mem[self.rows[keep][:, None], cols]).view(DTYPES[self.op.dtype]).reshape(-1)

    def write(self, keep: np.ndarray, values: np.ndarray) -> None:
        cols = self.bytes[keep][:, None] + np.arange(self.op.itemsize)
        raw = np.ascontiguousarray(values, DTYPES[self.op.dtype]).view(np.uint8).reshape(-1, self.op.itemsize)
        self.mem[self.rows[keep][:, None], cols] = raw
        if self.written is not None:
            self.written[self.rows[keep][:, None], cols] = 1


def _dynamic_values(core: _Core, ins: Instr, op: Operand, slot: str) -> np.ndarray:
    """The run-time value(s) of a dynamic operand: one (reg, scalar) or one per row of pair 0 (vector)."""
    if op.dyn == "reg":
        if not 0 <= op.dyn_ref < NUM_REGISTERS:
            raise SimulationError(f"{slot}: dynamic offset register {op.dyn_ref} is not a register")
        return np.asarray([core.regs[op.dyn_ref]], np.int64)
    if op.dyn_ref >= len(ins.spec.slots):
        raise SimulationError(f"{slot}: dynamic index slot {op.dyn_ref} does not exist")
    index_slot = ins.spec.slots[op.dyn_ref]
    index = _resolve(core, ins.operand(index_slot), index_slot)
    if DTYPES[index.op.dtype].kind not in "iu":
        raise SimulationError(f"{slot}: the dynamic index '{index_slot}' must be an integer dtype, not {index.op.dtype}")
    values = index.raw().astype(np.int64).reshape(-1)
    want = op.pattern[0][1] if op.dyn == "vector" else 1
    if len(values) != want:
        raise SimulationError(f"{slot}: a {op.dyn} dynamic offset needs {want} indices in '{index_slot}', "
                              f"got {len(values)}")  # fmt: skip
    return values


def _elements(core: _Core, ins: Instr, slot: str) -> _Elements:
    """Resolve ``slot`` element by element, its dynamic term added, and mark the rows that are in bounds."""
    op = ins.operand(slot)
    if op is None:
        raise SimulationError(f"missing {slot} operand")
    (step0, n0), inner = op.pattern[0], _element_offsets(op.pattern[1:])
    if op.memory == "hbm":  # on chip, the first pair is partitions (at most 128; checked below)
        _pattern_count(op.pattern, max(len(core.hbm.get(op.var_id, ())), _MAX_PATTERN_ELEMENTS))
    value = _dynamic_values(core, ins, op, slot) if op.dyn else np.zeros(1, np.int64)
    if op.memory == "hbm":
        buf = core.hbm.get(op.var_id)
        if buf is None:
            raise SimulationError(f"{slot}: HBM operand references unknown variable id {op.var_id}")
        mem, limit = buf[None, :], len(buf)
        base = value * op.dyn_scale + (0 if op.dyn == "vector" else step0 * np.arange(n0, dtype=np.int64))
        first = op.address + op.itemsize * (np.broadcast_to(base, (n0,))[:, None] + inner[None, :])
        rows = np.zeros_like(first)
    elif op.memory in ("sbuf", "psum"):
        if op.dyn == "vector":
            raise SimulationError(f"{slot}: a vector dynamic offset needs an HBM operand")
        mem = core.sbuf if op.memory == "sbuf" else core.psum
        limit = mem.shape[1]
        if op.start_partition + n0 > NUM_PARTITIONS:
            raise SimulationError(f"{slot}: partitions {op.start_partition}..{op.start_partition + n0 - 1} out of range")
        offsets = op.address + op.itemsize * (int(value[0]) * op.dyn_scale + inner)
        first = np.broadcast_to(offsets, (n0, len(inner)))
        rows = np.broadcast_to((op.start_partition + np.arange(n0, dtype=np.int64))[:, None], first.shape)
    else:
        raise SimulationError(f"{slot} operand cannot be a pattern-only (memory 'none') operand")
    row_ok = np.all((first >= 0) & (first + op.itemsize <= limit), axis=1)
    if not op.dyn and not row_ok.all():
        raise SimulationError(f"{slot} access outside its {op.memory} memory ({limit} bytes)")
    valid = np.repeat(row_ok, first.shape[1])
    written = core.written.get(op.var_id) if op.memory == "hbm" else None
    return _Elements(op, mem, rows.reshape(-1), np.where(valid, first.reshape(-1), 0), valid,
                     written[None, :] if written is not None else None)  # fmt: skip


def _out_of_bounds_report(e: _Elements, slot: str, values: np.ndarray) -> str:
    bad = int(np.argmin(e.valid.reshape(e.op.pattern[0][1], -1)[:, 0]))
    where = f"HBM variable {e.op.var_id}" if e.op.memory == "hbm" else f"the {e.op.memory} partition"
    value = int(values[bad if len(values) > 1 else 0])
    return (f"{slot} row {bad}: dynamic offset {value} (x {e.op.dyn_scale} elements) reaches outside {where}; "
            "oob_mode=error")  # fmt: skip


def _exec_dma_dynamic(core: _Core, ins: Instr) -> None:
    """DMA_COPY with a dynamic operand: every run-time row is bounds-checked before anything moves; with
    ``oob_skip`` the out-of-bounds rows (of either side) are left out, else they are a SimulationError."""
    dst, src = _elements(core, ins, "dst"), _elements(core, ins, "src")
    n = len(dst.valid)
    if n != len(src.valid):
        raise SimulationError(f"DMA element counts differ: dst {dst.op.shape} vs src {src.op.shape}")
    order = np.arange(n)
    if ins.flag("transpose"):
        shape = src.op.shape
        if len(shape) < 2:
            raise SimulationError(f"transposing DMA needs a source of rank >= 2, got {shape}")
        order = np.swapaxes(order.reshape(shape), 0, -1).reshape(-1)  # dst element k comes from src order[k]
    if not ins.flag("oob_skip"):
        for slot, e in (("dst", dst), ("src", src)):
            if not e.valid.all():
                raise SimulationError(_out_of_bounds_report(e, slot, _dynamic_values(core, ins, e.op, slot)))
    keep = dst.valid & src.valid[order]
    values = src.read(order[keep])
    if dst.op.dtype == src.op.dtype:
        dst.write(keep, values)
    else:  # casting transfers go through fp32
        dst.write(keep, sem.cast(values.astype(np.float32), dst.op.dtype))


@execute("DMA_COMPUTE")
def _exec_dma_compute(core: _Core, ins: Instr, ops: Operands) -> None:
    """``dst = src0 + src1 + ...`` element-wise (row-major order of each pattern), summed left to right in fp32,
    then cast to dst's dtype. With a dynamic operand (read-modify-write) every operand is resolved row by row, its
    index tensor in a spare source slot."""
    if any(op is not None and op.dyn for op in ins.operands):
        _exec_dma_compute_dynamic(core, ins)
        return
    dst = ops.dst
    srcs = [v for slot in ins.spec.slots[1:] if (v := ops.get(slot)) is not None]
    for s in srcs:
        if s.op.num_elements != dst.op.num_elements:
            raise SimulationError(f"element counts differ: dst {dst.op.shape} vs a source {s.op.shape}")
    op = _alu_op(ins, "reduce_op")
    if op != "add":
        raise SimulationError(f"reduce_op must be add, got {op}")
    total = srcs[0].f32().reshape(-1)
    for s in srcs[1:]:
        total = (total + s.f32().reshape(-1)).astype(np.float32)
    dst.store(total)


def _exec_dma_compute_dynamic(core: _Core, ins: Instr) -> None:
    """DMA_COMPUTE with dynamic operands: the slots that hold index tensors are not sources; every source is read
    (all of them before dst is written, so a scatter RMW reads the old dst), summed in fp32, and written through
    dst's run-time addresses. Out-of-bounds rows are an error, or with ``oob_skip`` left out on every side."""
    index_slots = {op.dyn_ref for op in ins.operands if op is not None and op.dyn in ("scalar", "vector")}
    slots = [s for i, (s, op) in enumerate(zip(ins.spec.slots, ins.operands))
             if op is not None and i not in index_slots]  # fmt: skip
    if _alu_op(ins, "reduce_op") != "add":
        raise SimulationError(f"reduce_op must be add, got {_alu_op(ins, 'reduce_op')}")
    parts = {slot: _elements(core, ins, slot) for slot in slots}
    n = len(parts["dst"].valid)
    for slot, e in parts.items():
        if len(e.valid) != n:
            raise SimulationError(f"element counts differ: dst {parts['dst'].op.shape} vs {slot} {e.op.shape}")
        if not ins.flag("oob_skip") and not e.valid.all():
            raise SimulationError(_out_of_bounds_report(e, slot, _dynamic_values(core, ins, e.op, slot)))
    keep = np.logical_and.reduce([e.valid for e in parts.values()])
    total: np.ndarray | None = None
    for slot in slots[1:]:
        values = parts[slot].read(keep).astype(np.float32)
        total = values if total is None else (total + values).astype(np.float32)
    assert total is not None
    parts["dst"].write(keep, sem.cast(total, parts["dst"].op.dtype))
