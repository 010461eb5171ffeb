"""The top-k family: ``max8``, ``nc_find_index8``, ``nc_match_replace8``, ``nonzero_with_count``, ``topk``."""

from __future__ import annotations

from typing import Any

from nkic.frontend.affine import is_symbolic
from nkic.frontend.context import nki_op
from nkic.frontend.errors import NkiError
from nkic.frontend.recorders.record import (
    _dtype_in,
    _elementwise,
    _in,
    _int_param,
    _mask,
    _on_chip,
    _partitions_agree,
    _record,
    _rules,
    _tensor,
)
from nkic.frontend.tensor import NkiTensor
from nkic.target.instructions import GPSIMD_GROUP, TOPK_MAX_N


# -- the top-k family ---------------------------------------------------------------------------------------
_INDEX_DTYPES = ("uint16", "uint32")


def _rank_at_most(op: str, role: str, t: NkiTensor, ndim: int) -> None:
    if t.ndim > ndim:
        raise NkiError(f"{op}: '{role}' can be at most {ndim}-dimensional, got shape {t.shape}")


def _eight_per_partition(op: str, role: str, t: NkiTensor, data: NkiTensor) -> None:
    """Eight elements on each of ``data``'s partitions (a ``[par_dim, 8]`` tile or a view of that size)."""
    if t.partitions != data.partitions or t.free_size != 8:
        raise NkiError(f"{op}: '{role}' must hold 8 elements on each of {data.partitions} partitions, got {t.shape}")


@nki_op
def max8(ctx: Any, dst: NkiTensor, src: NkiTensor, **kw: Any) -> None:
    """``dst[p, :]`` = the 8 largest values of ``src[p]`` (8..16384 elements, up to 3-D) in descending order, on
    VectorE: compared in fp32, converted to ``dst.dtype``; equal values each take a slot."""
    _mask(kw)
    name = "max8"
    dst, src = _tensor(name, "dst", dst), _tensor(name, "src", src)
    _on_chip(name, "dst", dst)
    _on_chip(name, "src", src)
    # the ranks, dst's (src partitions, 8) and src's 8..16384 elements (target/rules/vector.py)
    _rules(ctx, name, {"dst": dst, "src": src}, {"shapes": {"src": src.shape, "dst": dst.shape}})
    _record(ctx, name, {"dst": dst, "src": src}, {}, "vector")


@nki_op
def nc_find_index8(ctx: Any, dst: NkiTensor, data: NkiTensor, vals: NkiTensor, **kw: Any) -> None:
    """``dst[p, i]`` = the free index (flattened, from 0) of ``vals[p, i]`` in ``data[p]`` on VectorE; the k-th
    duplicate of a value in ``vals`` takes its k-th match, and a value not found reads all-ones (``0xFFFF`` /
    ``0xFFFFFFFF``). Compared in fp32; ``dst`` is uint16 or uint32."""
    _mask(kw)
    name = "nc_find_index8"
    t = {role: _tensor(name, role, v) for role, v in (("dst", dst), ("data", data), ("vals", vals))}
    for role, x in t.items():
        _on_chip(name, role, x)
    # the ranks, vals' 8 per partition, data's 8..16384 (target/rules/vector.py)
    _rules(ctx, "find_index8", t, {"shapes": {"data": t["data"].shape, "vals": t["vals"].shape}})
    if t["dst"].ndim != 2:
        raise NkiError(f"{name}: dst must be a 2-D [{t['data'].partitions}, 8] tile, got shape {t['dst'].shape}")
    _eight_per_partition(name, "dst", t["dst"], t["data"])
    _dtype_in(name, "dst", t["dst"], *_INDEX_DTYPES)
    _record(ctx, "find_index8", t, {}, "vector")


@nki_op
def nc_match_replace8(
    ctx: Any, dst: NkiTensor, data: NkiTensor, vals: NkiTensor, imm: Any, dst_idx: NkiTensor | None = None, **kw: Any
) -> None:
    """``dst`` = ``data`` with one match of each ``vals[p, i]`` replaced by ``imm``, on VectorE. ``vals`` is taken
    in reverse order (i = 7 .. 0), each claiming the first match no later slot claimed, so duplicates pair with
    their matches in descending slot order; ``dst_idx`` (uint16/uint32, optional) receives the free indices, all-ones
    for a value not found (then nothing is replaced). ``dst`` may be ``data`` itself."""
    _mask(kw)
    name = "nc_match_replace8"
    t = {role: _tensor(name, role, v) for role, v in (("dst", dst), ("data", data), ("vals", vals))}
    _elementwise(name, {"dst": t["dst"], "data": t["data"]})
    _on_chip(name, "vals", t["vals"])
    _rank_at_most(name, "vals", t["vals"], 3)
    _eight_per_partition(name, "vals", t["vals"], t["data"])
    if dst_idx is not None:
        t["dst_idx"] = idx = _tensor(name, "dst_idx", dst_idx)
        _on_chip(name, "dst_idx", idx)
        _eight_per_partition(name, "dst_idx", idx, t["data"])
        _dtype_in(name, "dst_idx", idx, *_INDEX_DTYPES)
    if isinstance(imm, bool) or not (isinstance(imm, (int, float)) or is_symbolic(imm)):
        raise NkiError(f"{name}: imm must be a number, got {type(imm).__name__}")
    _record(ctx, "match_replace8", t, {"imm": float(imm)}, "vector")


@nki_op
def nonzero_with_count(
    ctx: Any, dst: NkiTensor, src: NkiTensor, index_offset: Any = 0, padding_val: Any = -1, **kw: Any
) -> None:
    """On partitions 0, 16, ..., 112 (the first of each GpSimd core's 16): ``dst[p]`` = the indices of the nonzero
    elements of ``src[p]`` plus ``index_offset``, then ``padding_val`` up to ``src``'s free size, then their count.
    The other partitions of ``dst`` are left untouched. GpSimd, gen3+."""
    _mask(kw)
    name = "nonzero_with_count"
    dst, src = _tensor(name, "dst", dst), _tensor(name, "src", src)
    _in(name, "dst", dst, "sbuf")
    _in(name, "src", src, "sbuf")
    _dtype_in(name, "src", src, "float32", "int32")
    _dtype_in(name, "dst", dst, "int32")
    _partitions_agree(name, {"dst": dst, "src": src})
    if dst.free_size != src.free_size + 1:
        raise NkiError(f"{name}: dst needs {src.free_size + 1} elements per partition (src's plus the count), "
                       f"got shape {dst.shape}")  # fmt: skip
    attrs = {"index_offset": _int_param(name, "index_offset", index_offset),
             "padding_val": _int_param(name, "padding_val", padding_val)}  # fmt: skip
    _record(ctx, name, {"dst": dst, "src": src}, attrs, "gpsimd")


@nki_op
def topk(ctx: Any, val_dst: NkiTensor, idx_dst: NkiTensor, src: NkiTensor, n: Any, **kw: Any) -> None:
    """Per group of 16 partitions, the k largest of the ``n`` BF16 elements of its snake (element j at partition
    ``j % 16``, column ``j // 16``), k = ``val_dst``'s free size, on GpSimd: ``val_dst`` gets them in ascending order
    and ``idx_dst`` (uint32) their snake indices, both written in the same snake layout (result j at partition
    ``j % 16``, column ``j // 16``; columns from ``ceil(k / 16)`` on are not written)."""
    _mask(kw)
    name = "topk"
    t = {role: _tensor(name, role, v) for role, v in (("val_dst", val_dst), ("idx_dst", idx_dst), ("src", src))}
    _rules(ctx, name, t, {})  # SBUF tiles, partitions a multiple of 16, dtypes (target/rules/vector.py)
    for role, x in t.items():
        if x.ndim != 2:
            raise NkiError(f"{name}: '{role}' must be a 2-D tile, got shape {x.shape}")
    count, k = _int_param(name, "n", n), t["val_dst"].free_size
    if not 8 <= count < TOPK_MAX_N:
        raise NkiError(f"{name}: n must satisfy 8 <= n < {TOPK_MAX_N}, got {count}")
    if k > count:
        raise NkiError(f"{name}: k = {k} (val_dst's free size) exceeds n = {count}")
    if t["src"].free_size * GPSIMD_GROUP < count:
        raise NkiError(f"{name}: a {GPSIMD_GROUP}-partition snake of n = {count} needs src free size >= "
                       f"{-(-count // GPSIMD_GROUP)}, got {t['src'].free_size}")  # fmt: skip
    _record(ctx, name, t, {"n": count}, "gpsimd")
