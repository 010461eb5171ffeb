"""Executors of the search, index and gather instructions: top-8 search and replace, nonzero and top-k per
GpSimd group, local and N gathers, the stream shuffle and sequence bounds.
"""

from __future__ import annotations

import numpy as np

from nkic.runtime import semantics as sem
from nkic.runtime.errors import SimulationError
from nkic.runtime.executors import Operands, _value, execute
from nkic.runtime.state import _Core, _View
from nkic.target.instructions import (
    GPSIMD_CORE_PARTITIONS,
    GPSIMD_GROUP,
    LOCAL_GATHER_ELEMS,
    LOCAL_GATHER_MAX_INDICES,
    SHUFFLE_KEEP,
    SHUFFLE_MASK_WORDS,
    SHUFFLE_QUADRANT,
    shuffle_start_problem,
    unpack_shuffle_mask,
)
from nkic.target.isa import Instr


def _all_ones(dtype: np.dtype) -> int:
    """The not-found sentinel of an index dtype: every bit set."""
    return int(np.iinfo(dtype).max) if dtype.kind == "u" else -1


@execute("MAX8")
def _exec_max8(core: _Core, ins: Instr, ops: Operands) -> None:
    """The 8 largest fp32 values of each partition, descending (``descending_order``: NaN first, ties kept)."""
    dst, src = ops.dst, ops.src
    if (dst.nparts, dst.free) != (src.nparts, 8) or src.free < 8:
        raise SimulationError(f"MAX8 of {src.nparts}x{src.free} into {dst.nparts}x{dst.free}")
    values = src.f32()
    dst.store(np.take_along_axis(values, sem.descending_order(values)[:, :8], axis=1))


def _index8(ins: Instr, ops: Operands, data: _View, slot: str, reverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """Match the 8 values of ``vals`` in ``data`` and write their indices (all-ones where absent) to ``slot``."""
    vals = ops.vals
    if vals.nparts != data.nparts or vals.free != 8:
        raise SimulationError(f"vals must be {data.nparts}x8, got {vals.nparts}x{vals.free}")
    index, found = sem.claimed_matches(data.f32(), vals.f32(), reverse)
    if ins.operand(slot) is not None:
        out = getattr(ops, slot)
        if (out.nparts, out.free) != (data.nparts, 8):
            raise SimulationError(f"{slot} must be {data.nparts}x8, got {out.nparts}x{out.free}")
        out.store(np.where(found, index, _all_ones(out.dtype)))
    return index, found


@execute("FIND_INDEX8")
def _exec_find_index8(core: _Core, ins: Instr, ops: Operands) -> None:
    _index8(ins, ops, ops.src, "dst", reverse=False)


@execute("MATCH_REPLACE8")
def _exec_match_replace8(core: _Core, ins: Instr, ops: Operands) -> None:
    """``vals`` served from slot 7 down to 0; the matched elements become ``imm``, the rest pass through fp32."""
    dst, src = ops.dst, ops.src
    values = src.f32()  # read before dst is written: dst may be src itself
    index, found = _index8(ins, ops, src, "dst_idx", reverse=True)
    rows = np.broadcast_to(np.arange(src.nparts)[:, None], index.shape)
    values[rows[found], index[found]] = np.float32(_value(ins, "imm"))
    dst.store(values)


def _group_rows(view: _View, what: str) -> None:
    """GpSimd core c owns partitions 16c .. 16c + 15: an operand worked on per core starts at a core boundary."""
    if view.op.start_partition % GPSIMD_GROUP:
        raise SimulationError(f"{what} starts at partition {view.op.start_partition}, not on a GpSimd core boundary")


@execute("NONZERO_WITH_COUNT")
def _exec_nonzero_with_count(core: _Core, ins: Instr, ops: Operands) -> None:
    """Only the first partition of each 16-partition GpSimd core is read and written; other rows keep their bits."""
    dst, src = ops.dst, ops.src
    if (dst.nparts, dst.free) != (src.nparts, src.free + 1):
        raise SimulationError(f"NONZERO_WITH_COUNT of {src.nparts}x{src.free} into {dst.nparts}x{dst.free}")
    offset, padding = int(_value(ins, "index_offset")), int(_value(ins, "padding_val"))
    values, out = src.raw(), dst.raw().copy()
    for row in range(-src.op.start_partition % GPSIMD_GROUP, src.nparts, GPSIMD_GROUP):
        hits = np.flatnonzero(values[row] != 0)
        line = np.full(dst.free, padding, np.int64)
        line[: len(hits)] = hits + offset
        line[-1] = len(hits)
        out[row] = line.astype(np.int32)  # int32 arithmetic wraps like the hardware's
    dst.store_raw(out)


@execute("TOPK")
def _exec_topk(core: _Core, ins: Instr, ops: Operands) -> None:
    """Per 16-partition group: the k largest of its n-element snake, ascending, written back as a snake."""
    vals, idx, src = ops.dst, ops.idx_dst, ops.src
    n, k = int(_value(ins, "n")), vals.free
    if (idx.nparts, idx.free) != (vals.nparts, k) or src.nparts != vals.nparts or src.nparts % GPSIMD_GROUP:
        raise SimulationError(f"TOPK of {src.nparts}x{src.free} into {vals.nparts}x{k} and {idx.nparts}x{idx.free}")
    if not 1 <= k <= n or src.free * GPSIMD_GROUP < n:
        raise SimulationError(f"TOPK: n = {n} elements, k = {k}, src {src.nparts}x{src.free}")
    for view, what in ((vals, "val_dst"), (idx, "idx_dst"), (src, "src")):
        _group_rows(view, what)
    data, out_vals, out_idx = src.f32(), vals.raw().copy(), idx.raw().copy()
    j = np.arange(k)
    for g in range(0, src.nparts, GPSIMD_GROUP):
        snake = data[g : g + GPSIMD_GROUP].T.reshape(-1)[:n]  # element j at partition j % 16, column j // 16
        chosen = sem.descending_order(snake)[:k][::-1]  # the k largest, ascending
        out_vals[g + j % GPSIMD_GROUP, j // GPSIMD_GROUP] = sem.cast(snake[chosen], vals.op.dtype)
        out_idx[g + j % GPSIMD_GROUP, j // GPSIMD_GROUP] = chosen
    vals.store_raw(out_vals)
    idx.store_raw(out_idx)


def _index_values(view: _View, what: str) -> np.ndarray:
    """An index operand's values as int64 (integer dtypes only: a float index has no defined meaning)."""
    if not sem.is_int_dtype(view.op.dtype):
        raise SimulationError(f"{what} must have an integer dtype, got {view.op.dtype}")
    return view.raw().astype(np.int64)


def _out_of_range(values: np.ndarray, limit: int, what: str, span: int = 1) -> None:
    """SimulationError naming the first index whose ``span`` elements are not all inside ``[0, limit)``."""
    bad = (values < 0) | (values + span > limit)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        value = int(values[where])
        reach = f"{value}..{value + span - 1}" if span > 1 else f"{value}"
        raise SimulationError(f"{what} {where} = {value} reaches element {reach}, outside [0, {limit})")


@execute("LOCAL_GATHER")
def _exec_local_gather(core: _Core, ins: Instr, ops: Operands) -> None:
    """Per GpSimd core (16 partitions): its index slice flattened partition-first, the first num_valid_indices used;
    each of its partitions gathers num_elem_per_idx elements at every index from its own free elements."""
    dst, src, index = ops.dst, ops.src, ops.index
    per_idx, valid = int(_value(ins, "num_elem_per_idx")), int(_value(ins, "num_valid_indices"))
    parts, group = src.nparts, GPSIMD_CORE_PARTITIONS
    if index.nparts != parts or dst.nparts != parts or parts % group:
        raise SimulationError(f"src {parts}, index {index.nparts} and dst {dst.nparts} partitions must agree and be "
                              f"a multiple of {group}")  # fmt: skip
    for name, v in (("src", src), ("index", index), ("dst", dst)):
        if v.op.start_partition % group:
            raise SimulationError(f"{name} starts at partition {v.op.start_partition}, not on a GpSimd core boundary")
    if dst.op.dtype != src.op.dtype:
        raise SimulationError(f"dst {dst.op.dtype} and src {src.op.dtype} differ (a gather cannot cast)")
    if per_idx not in LOCAL_GATHER_ELEMS or not 1 <= valid <= min(group * index.free, LOCAL_GATHER_MAX_INDICES):
        raise SimulationError(f"num_elem_per_idx {per_idx} / num_valid_indices {valid} out of range")
    if dst.free != valid * per_idx:
        raise SimulationError(f"dst has {dst.free} elements per partition, the gather writes {valid} x {per_idx}")
    cores = parts // group
    # (cores, 16, k) -> per core, partition-first: entry j of core c is index[16c + j % 16, j // 16]
    idx = _index_values(index, "index").reshape(cores, group, index.free).transpose(0, 2, 1).reshape(cores, -1)
    idx = idx[:, :valid]
    _out_of_range(idx, src.free, "index (core, position)", per_idx)  # before reading src
    cols = (idx[:, :, None] + np.arange(per_idx)).reshape(cores, 1, -1)
    data = src.raw().reshape(cores, group, src.free)
    dst.store_raw(np.take_along_axis(data, np.broadcast_to(cols, (cores, group, cols.shape[-1])), axis=2))


@execute("NC_N_GATHER")
def _exec_nc_n_gather(core: _Core, ins: Instr, ops: Operands) -> None:
    """``dst[p, i] = src[p, indices[p, i]]`` over src's flattened free elements."""
    dst, src, indices = ops.dst, ops.src, ops.indices
    if not dst.nparts == src.nparts == indices.nparts or dst.free != indices.free:
        raise SimulationError(f"dst {dst.nparts}x{dst.free}, src {src.nparts}x{src.free} and indices "
                              f"{indices.nparts}x{indices.free} do not fit")  # fmt: skip
    if dst.op.dtype != src.op.dtype:
        raise SimulationError(f"dst {dst.op.dtype} and src {src.op.dtype} differ (a gather cannot cast)")
    idx = _index_values(indices, "indices")
    _out_of_range(idx, src.free, "indices (partition, position)")  # before reading src
    dst.store_raw(np.take_along_axis(src.raw(), idx, axis=1))


@execute("NC_STREAM_SHUFFLE")
def _exec_nc_stream_shuffle(core: _Core, ins: Instr, ops: Operands) -> None:
    """Per quadrant q: ``dst[32q + i] = src[32q + mask[i]]``; mask 255 keeps dst[32q + i]. src is read whole before
    dst is written, so in-place shuffles see the old values."""
    dst, src = ops.dst, ops.src
    if dst.free != src.free or dst.op.dtype != src.op.dtype:
        raise SimulationError(f"dst {dst.nparts}x{dst.free} {dst.op.dtype} and src {src.nparts}x{src.free} "
                              f"{src.op.dtype} need equal free sizes and dtypes")  # fmt: skip
    problem = shuffle_start_problem(src.nparts, dst.nparts, {"src": src.op.start_partition,
                                                           "dst": dst.op.start_partition})
    if problem is not None:
        raise SimulationError(problem)
    mask = unpack_shuffle_mask(tuple(int(_value(ins, f"mask{w}")) for w in range(SHUFFLE_MASK_WORDS)))
    lanes = np.arange(dst.nparts)
    picks = np.asarray(mask, np.int64)[lanes % SHUFFLE_QUADRANT]
    moved = picks != SHUFFLE_KEEP
    rows = lanes - lanes % SHUFFLE_QUADRANT + picks
    bad = moved & ((picks >= SHUFFLE_QUADRANT) | (rows >= src.nparts))
    if bad.any():
        i = int(np.argmax(bad))
        raise SimulationError(f"mask entry {i % SHUFFLE_QUADRANT} = {int(picks[i])} makes dst partition {i} read "
                              f"src partition {int(rows[i])}, src has {src.nparts}")  # fmt: skip
    out = dst.raw().copy()
    out[moved] = src.raw()[rows[moved]]
    dst.store_raw(out)


@execute("SEQUENCE_BOUNDS")
def _exec_sequence_bounds(core: _Core, ins: Instr, ops: Operands) -> None:
    """NKI's reference: a run is a maximal stretch of equal neighbouring ids; each element gets its run's
    ``[start, end)``, id 0 (padding) gets ``(n, -1)``."""
    dst, seg = ops.dst, ops.src
    if seg.nparts != 1 or (dst.nparts, dst.free) != (1, 2 * seg.free):
        raise SimulationError(f"segment ids {seg.nparts}x{seg.free} need one partition and dst 1x{2 * seg.free}, "
                              f"got {dst.nparts}x{dst.free}")  # fmt: skip
    ids = seg.raw().reshape(-1).astype(np.float64)
    bad = ~np.isfinite(ids) | (ids < 0) | (ids != np.floor(ids))
    if bad.any():
        i = int(np.argmax(bad))
        raise SimulationError(f"segment id {i} is {ids[i]}; segment ids must be non-negative integers")
    n = len(ids)
    begins = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    run = np.cumsum(np.r_[True, ids[1:] != ids[:-1]]) - 1
    start, end = begins[run], np.r_[begins[1:], n][run]
    pad = ids == 0
    start, end = np.where(pad, n, start), np.where(pad, -1, end)
    dst.store(np.concatenate([start, end]).astype(np.int64)[None, :])
