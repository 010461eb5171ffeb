"""Gathers and partition shuffles: ``local_gather``, ``nc_n_gather``, ``nc_stream_shuffle``, ``sequence_bounds``."""

from __future__ import annotations

from typing import Any

from nkic.frontend.affine import is_symbolic
from nkic.frontend.context import nki_op
from nkic.frontend.errors import NkiError
from nkic.frontend.recorders.record import _documented_rules, _mask, _on_chip, _record, _rules, _target, _tensor
from nkic.frontend.tensor import NkiTensor
from nkic.target.instructions import GPSIMD_CORE_PARTITIONS, SHUFFLE_KEEP, SHUFFLE_QUADRANT


# -- gathers and partition shuffles -------------------------------------------------------------------------
def _start_partition(t: NkiTensor) -> int | None:
    """The first partition an on-chip view reaches, when the trace knows it (a static offset into an allocation
    that nkic places; None otherwise)."""
    if not t.on_chip or t.storage.address is not None or not isinstance(t.offset, int):
        return None
    if t.dtype != t.storage.dtype:
        return None
    row = 1
    for n in t.storage.shape[1:]:
        row *= n
    return t.offset // row


def _same_dtype(op: str, dst: NkiTensor, role: str, src: NkiTensor) -> None:
    if dst.dtype != src.dtype:
        raise NkiError(f"{op}: dst is {dst.dtype} but {role} is {src.dtype}", f"{op} moves data without a cast")


@nki_op
def local_gather(
    ctx: Any,
    dst: NkiTensor,
    src_buffer: NkiTensor,
    index: NkiTensor,
    num_elem_per_idx: Any = 1,
    num_valid_indices: Any = None,
    **kw: Any,
) -> None:
    """Per GpSimd core (16 partitions): the core's ``index`` slice flattened partition-first, its first
    ``num_valid_indices`` entries used; every partition p of the core gets ``src_buffer[p, idx : idx +
    num_elem_per_idx]`` for each index in turn (indices count elements of the flattened free dims).

    The cores are the 16-partition groups of the tiles, which must start on a core boundary. Out-of-range indices
    (undefined in NKI) are a simulation error."""
    _mask(kw)
    name = "local_gather"
    t = {r: _tensor(name, r, v) for r, v in (("dst", dst), ("src_buffer", src_buffer), ("index", index))}
    _same_dtype(name, t["dst"], "src_buffer", t["src_buffer"])
    for role, v in t.items():
        start = _start_partition(v)
        if start is not None and start % GPSIMD_CORE_PARTITIONS:
            raise NkiError(f"{name}: '{role}' starts at partition {start}, not on a GpSimd core boundary "
                           f"(a multiple of {GPSIMD_CORE_PARTITIONS})")  # fmt: skip
    per_idx = int(num_elem_per_idx)
    per_core = GPSIMD_CORE_PARTITIONS * t["index"].free_size  # the indices in one core's 16-partition slice
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    attrs = {"num_elem_per_idx": per_idx, "num_valid_indices": valid}
    _documented_rules(ctx, _target(ctx), name, t, attrs)  # the fields' rules first: dst's size follows from them
    if t["dst"].free_size != valid * per_idx:
        raise NkiError(f"{name}: dst needs {valid} x {per_idx} = {valid * per_idx} elements per partition, has "
                       f"{t['dst'].free_size}")  # fmt: skip
    _record(ctx, name, t, attrs, "gpsimd")


@nki_op
def nc_n_gather(ctx: Any, dst: NkiTensor, data: NkiTensor, indices: NkiTensor, **kw: Any) -> None:
    """``dst[p, i] = data[p, indices[p, i]]`` within each partition, data's free dims flattened (GpSimd, SBUF).
    An index outside ``[0, data.size / data.shape[0])`` is a simulation error."""
    _mask(kw)
    name = "nc_n_gather"
    t = {r: _tensor(name, r, v) for r, v in (("dst", dst), ("data", data), ("indices", indices))}
    _rules(ctx, name, t, {})  # type: ignore[arg-type]
    _record(ctx, name, t, {}, "gpsimd")


def _shuffle_mask(mask: Any) -> Any:
    """The mask with its affine entries bound (a loop index unrolls); what is wrong with it is a rule's to say."""
    try:
        return tuple(int(m) if is_symbolic(m) else m for m in mask)
    except TypeError:
        return mask  # not a list: the rule names it


@nki_op
def nc_stream_shuffle(ctx: Any, dst: NkiTensor, src: NkiTensor, shuffle_mask: Any, **kw: Any) -> None:
    """Per 32-partition quadrant q: ``dst[32q + i] = src[32q + shuffle_mask[i]]`` (whole partitions, VectorE); an
    entry of 255 leaves ``dst[32q + i]`` unmodified, and entries for partitions dst does not have are unused.
    In place (dst is src) is allowed."""
    _mask(kw)
    name = "nc_stream_shuffle"
    dst, src = _tensor(name, "dst", dst), _tensor(name, "src", src)
    _on_chip(name, "dst", dst)
    _on_chip(name, "src", src)
    mask = _shuffle_mask(shuffle_mask)
    starts = {r: s for r, s in (("src", _start_partition(src)), ("dst", _start_partition(dst))) if s is not None}
    # the mask's entries and the tiles' start partitions (target/rules/vector.py)
    _rules(ctx, name, {"dst": dst, "src": src}, {"shuffle_mask": mask, "starts": starts})
    for i in range(dst.partitions):
        quadrant, lane = divmod(i, SHUFFLE_QUADRANT)
        pick = mask[lane]
        if pick != SHUFFLE_KEEP and quadrant * SHUFFLE_QUADRANT + pick >= src.partitions:
            raise NkiError(f"{name}: shuffle_mask[{lane}] = {pick} makes dst partition {i} read partition "
                           f"{quadrant * SHUFFLE_QUADRANT + pick} of src, which has {src.partitions}",
                           f"use {SHUFFLE_KEEP} for partitions to leave unchanged")  # fmt: skip
    _record(ctx, name, {"dst": dst, "src": src}, {"shuffle_mask": mask}, "vector")


@nki_op
def sequence_bounds(ctx: Any, dst: NkiTensor, segment_ids: NkiTensor, **kw: Any) -> None:
    """For each element of the one-partition ``segment_ids`` (n of them), ``dst[0, 0, i]`` / ``dst[0, 1, i]`` =
    the start / end (exclusive) of the run of equal ids holding it; id 0 is padding and gets ``(n, -1)``. Runs are
    maximal stretches of equal neighbours, as in NKI's reference. Negative or non-integral ids are a simulation
    error (NKI requires non-negative integers)."""
    _mask(kw)
    name = "sequence_bounds"
    dst, seg = _tensor(name, "dst", dst), _tensor(name, "segment_ids", segment_ids)
    _rules(ctx, name, {"dst": dst, "segment_ids": seg}, {})  # one partition, float32/int32 (target/rules/vector.py)
    if dst.free_size != 2 * seg.free_size:
        raise NkiError(f"{name}: dst must be (1, 2, {seg.free_size}) for {seg.free_size} segment ids, got shape "
                       f"{dst.shape}")  # fmt: skip
    _record(ctx, name, {"dst": dst, "segment_ids": seg}, {}, "gpsimd")
