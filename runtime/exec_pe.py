"""Executors of TensorE: matmul, its transpose mode, the MX (microscaling) matmul and quantisation, and the
PE transpose.
"""

from __future__ import annotations

import numpy as np

from nkic.runtime import semantics as sem
from nkic.runtime.errors import SimulationError
from nkic.runtime.executors import Operands, execute
from nkic.runtime.state import _Core, _View
from nkic.target.instructions import MX_GROUP_PARTITIONS, mx_scale_row, mx_scale_rows
from nkic.target.isa import Instr
from nkic.target.vocab import PACKED_DTYPES


@execute("MATMUL")
def _exec_matmul(core: _Core, ins: Instr, ops: Operands) -> None:
    dst = ops.dst
    stat, mov = ops.stationary, ops.moving
    if dst.op.memory != "psum":
        raise SimulationError("MATMUL destination must be in PSUM")
    pack = 2 if ins.flag("double_row") else 1  # [K, 2, M] x [K, 2, N]: free sizes 2M and 2N
    if stat.nparts != mov.nparts or pack * dst.nparts != stat.free or pack * dst.free != mov.free:
        raise SimulationError(f"MATMUL shapes: stationary {stat.nparts}x{stat.free}, moving {mov.nparts}x"
                              f"{mov.free}, dst {dst.nparts}x{dst.free}")  # fmt: skip
    # Tiling mode (tile_* immediates) only places the matmul on the PE array: the result is the same.
    if ins.flag("is_transpose"):
        _transpose_mode(dst, stat, mov, ins.flag("accumulate"))
        return
    s, m = stat.f32(), mov.f32()
    s, m = (sem.tf32(v) if view.op.dtype == "tfloat32" else v for v, view in ((s, stat), (m, mov)))
    if pack == 2:
        s, m = sem.double_row_operand(s), sem.double_row_operand(m)
    with np.errstate(invalid="ignore", over="ignore"):  # Inf x 0 is NaN on the PE too
        result = np.matmul(s.T, m)
    if ins.flag("accumulate"):
        result = result + dst.f32()
    dst.store(result)


def _transpose_mode(dst: _View, stat: _View, mov: _View, accumulate: bool) -> None:
    """MATMUL with is_transpose: bit-accurate when ``moving`` routes every output column from one row (an identity)
    and dst has stationary's dtype; otherwise values through fp32 (see ``sem.transpose_mode_matmul``)."""
    result, source = sem.transpose_mode_matmul(stat.f32(), mov.f32())
    if not accumulate and dst.op.dtype == stat.op.dtype and (source >= 0).all():
        dst.store_raw(stat.raw()[source, :].T)
        return
    if accumulate:
        result = result + dst.f32()
    dst.store(result)


def _mx_scale_rows(scale: _View, data: _View, role: str) -> np.ndarray:
    """The scale-tile rows (relative partitions) of data's 8-partition groups; checks the scale tile's shape."""
    if scale.free != data.free or scale.nparts < mx_scale_rows(data.nparts) or data.nparts % MX_GROUP_PARTITIONS:
        raise SimulationError(f"{role} {scale.nparts}x{scale.free} does not hold the scales of {data.nparts}x"
                              f"{data.free} MX data")  # fmt: skip
    return np.array([mx_scale_row(g) for g in range(data.nparts // MX_GROUP_PARTITIONS)], np.int64)


def _mx_values(data: _View) -> np.ndarray:
    """The (K, 4F) MX element values of packed (K, F) data."""
    packed = PACKED_DTYPES.get(data.op.dtype)
    if packed is None:
        raise SimulationError(f"MX data must have a packed dtype, got {data.op.dtype}")
    return packed.unpack(data.raw())


@execute("QUANTIZE_MX")
def _exec_quantize_mx(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, src, scale = ops.dst, ops.src, ops.dst_scale
    packed = PACKED_DTYPES.get(dst.op.dtype)
    if packed is None or packed.bits != 8:
        raise SimulationError(f"QUANTIZE_MX writes float8 x4 data, not {dst.op.dtype}")
    if (dst.nparts, 4 * dst.free) != (src.nparts, src.free):
        raise SimulationError(f"QUANTIZE_MX of {src.nparts}x{src.free} into {dst.nparts}x{dst.free} packed")
    rows = _mx_scale_rows(scale, dst, "dst_scale")
    values, scales = sem.mx_quantize(src.f32(), packed.element)
    dst.store_raw(packed.pack(values))
    # Only the groups' rows of the scale tile are written; the other partitions keep their bytes.
    tile = np.ascontiguousarray(scale.raw()).view(np.uint8).copy()
    tile[rows] = scales
    scale.store_raw(tile.view(scale.dtype))


@execute("MATMUL_MX")
def _exec_matmul_mx(core: _Core, ins: Instr, ops: Operands) -> None:
    dst = ops.dst
    stat, mov = ops.stationary, ops.moving
    if dst.op.memory != "psum":
        raise SimulationError("MATMUL_MX destination must be in PSUM")
    if stat.nparts != mov.nparts or dst.nparts != stat.free or dst.free != mov.free:
        raise SimulationError(f"MATMUL_MX shapes: stationary {stat.nparts}x{stat.free}, moving {mov.nparts}x"
                              f"{mov.free}, dst {dst.nparts}x{dst.free}")  # fmt: skip
    real = []
    for data, role in ((stat, "stationary_scale"), (mov, "moving_scale")):
        scale = getattr(ops, role)
        rows = _mx_scale_rows(scale, data, role)
        scale_bytes = np.ascontiguousarray(scale.raw()).view(np.uint8)[rows]
        real.append(sem.mx_dequantize(_mx_values(data), scale_bytes))
    result = sem.mx_matmul(*real)
    if ins.flag("accumulate"):
        result = result + dst.f32()
    dst.store(result)


@execute("TRANSPOSE")
def _exec_transpose(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, src = ops.dst, ops.src
    if (dst.nparts, dst.free) != (src.free, src.nparts):
        raise SimulationError(f"TRANSPOSE of {src.nparts}x{src.free} into {dst.nparts}x{dst.free}")
    if dst.op.dtype == src.op.dtype:
        dst.store_raw(src.raw().T)
    else:
        dst.store(src.f32().T)
