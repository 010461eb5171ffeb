"""``neuronxcc.nki.isa``: the instructions with their legacy (NKI <= 0.2) signatures.

A legacy instruction returns its result: the function here allocates the result tile and calls the dst-first
``nki.isa`` function, which validates and records the instruction; nothing here records instructions itself. The
result is an SBUF tile unless the instruction writes PSUM (``nc_matmul``, a TensorE ``nc_transpose``); its dtype is
``dtype=`` when given, else the one the legacy API documented (the input's, the promoted type of two inputs, fp32 for
PSUM, uint32 for indices). ``mask=`` is passed on to the modern function.

Dual forms. Every value-returning function here also takes ``dst=`` as a keyword: the result is then written into
that tile, which is returned, and nothing is allocated — the modern spelling, accepted without a warning. A modern
*positional* dst-first call (``nisa.tensor_copy(dst, src)``) is not recognised: under ``neuronxcc.nki.isa`` the
legacy signature binds the arguments. Instructions whose legacy form already took ``dst`` (``dma_copy``,
``tensor_copy_predicated``, ``nc_stream_shuffle``, ``select_reduce``, ``tensor_scalar_cumulative``, ...) are the
modern functions themselves, with the legacy-only differences handled where noted.

Each value-returning call warns once per kernel line (``migration.py``; ``-W nki-legacy=ignore|error``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from nkic.frontend import isa as _modern
from nkic.frontend.affine import is_symbolic
from nkic.frontend.context import nki_op
from nkic.frontend.dtypes import BUFFERS, normalize_dtype
from nkic.frontend import grid
from nkic.frontend import language as _language
from nkic.frontend.errors import NkiError
from nkic.frontend.isa import *  # noqa: F401,F403 — names whose legacy signature is the modern one
from nkic.frontend.legacy import migration
from nkic.frontend.recorders.enums import _ENGINE
from nkic.frontend.recorders.movement import _DMA_TRANSPOSE_AXES
from nkic.frontend.recorders.psum_accumulate import note_fresh_result
from nkic.frontend.recorders.record import _enum
from nkic.frontend.recorders.vector import _axes
from nkic.frontend.tensor import NkiTensor
from nkic.frontend.tiles import promote
from nkic.frontend.unsupported import missing_names
from nkic.target.instructions import GPSIMD_CORE_PARTITIONS

_SBUF, _PSUM = BUFFERS["sbuf"], BUFFERS["psum"]


# -- helpers ------------------------------------------------------------------------------------------------
def _impl(name: str) -> Any:
    return getattr(_modern, name).__nki_impl__


def _tile(op: str, role: str, value: Any) -> NkiTensor:
    if not isinstance(value, NkiTensor):
        raise NkiError(f"nisa.{op}: '{role}' must be a tile, got {type(value).__name__}")
    return value


def _result(
    ctx: Any, op: str, dst: Any, shape: Sequence[int], dtype: Any, default: str, buffer: Any = _SBUF, modern: str = ""
) -> NkiTensor:
    """The tile a legacy call writes: ``dst`` when the call passed one (the modern form), else a new tile of
    ``shape`` and ``dtype`` (``default`` when None) in ``buffer``, after the migration warning."""
    if dst is not None:
        dst = _tile(op, "dst", dst)
        if dtype is not None and normalize_dtype(dtype) != dst.dtype:
            raise NkiError(f"nisa.{op}: dtype={normalize_dtype(dtype)} disagrees with dst's {dst.dtype}",
                           "give one of them")  # fmt: skip
        return dst
    migration.legacy(f"nisa.{op}(...) returning a new tile",
                     f"nisa.{op}(dst=<tile>, {modern or '...'}) writing into a tile allocated with nl.ndarray")
    want = default if dtype is None else normalize_dtype(dtype)
    return ctx.allocate(tuple(int(d) for d in shape), want, buffer, "", None)  # type: ignore[no-any-return]


def _kw(mask: Any, kw: dict[str, Any]) -> dict[str, Any]:
    """The extra keywords for the modern call: ``mask=`` when given (the modern function honours or rejects it)."""
    if mask is None:
        return dict(kw)
    migration.legacy("mask= on an instruction", "an instruction on the sub-view the mask selects, or "
                     "nisa.affine_select / nisa.range_select on its result")  # fmt: skip
    return {**kw, "mask": mask}


def _number(value: Any) -> Any:
    """A numpy scalar (a kernel argument ``np.float32(-inf)``) as the Python number the modern checks take."""
    return value.item() if isinstance(value, (np.integer, np.floating)) else value


def _bytes_predicate(op: str, predicate: Any) -> Any:
    """A ``bool_`` predicate (numpy bool arrays, one byte per element, which the legacy API accepted) as the uint8
    it is stored as."""
    pred = _tile(op, "predicate", predicate)
    return pred.view("uint8") if pred.dtype == "bool_" else pred


def _free_shape(t: NkiTensor) -> tuple[int, ...]:
    return tuple(t.shape[1:]) if t.ndim > 1 else (1,)


# -- DMA ----------------------------------------------------------------------------------------------------
@nki_op
def dma_copy(ctx: Any, dst: Any, src: Any, mask: Any = None, dst_rmw_op: Any = None, oob_mode: Any = None,
             dge_mode: Any = None, **kw: Any) -> None:  # fmt: skip
    """The modern ``dma_copy`` (the legacy one took ``dst`` too); ``dst_rmw_op=nl.add`` (legacy: accumulate into
    dst) is the modern read-modify-write ``dma_compute(dst, srcs=[dst, src], reduce_op=nl.add)``."""
    if dst_rmw_op is None:
        _impl("dma_copy")(ctx, dst, src, oob_mode=oob_mode, dge_mode=dge_mode, **_kw(mask, kw))
        return
    migration.legacy("nisa.dma_copy(dst_rmw_op=...)", "nisa.dma_compute(dst=dst, srcs=[dst, src], reduce_op=nl.add)")
    kw.pop("name", None)
    kw.pop("priority", None)
    _impl("dma_compute")(ctx, dst, [dst, src], dst_rmw_op, oob_mode=oob_mode, **_kw(mask, kw))


# -- matmul and transposes ----------------------------------------------------------------------------------
@nki_op
def nc_matmul(
    ctx: Any,
    stationary: Any,
    moving: Any,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    mask: Any = None,
    dst: Any = None,
    **kw: Any,
) -> NkiTensor:
    """``stationary[K, M]ᵀ @ moving[K, N]`` into a new fp32 PSUM tile ``[M, N]`` (``is_transpose``: the input's
    dtype, as the PE array passes the values through)."""
    st, mv = _tile("nc_matmul", "stationary", stationary), _tile("nc_matmul", "moving", moving)
    double = kw.get("perf_mode") is not None and str(getattr(kw["perf_mode"], "name", kw["perf_mode"])) != "none"
    m, n = st.free_size // (2 if double else 1), mv.free_size // (2 if double else 1)
    out = _result(ctx, "nc_matmul", dst, (m, n), kw.pop("dtype", None), st.dtype if is_transpose else "float32",
                  _PSUM, "stationary=, moving=")  # fmt: skip
    options = dict(is_stationary_onezero=is_stationary_onezero, is_moving_onezero=is_moving_onezero, **kw)
    _impl("nc_matmul")(ctx, out, st, mv, is_transpose=is_transpose, **_kw(mask, options))
    if dst is None and mask is None and not is_transpose and "accumulate" not in kw:  # `psum += nisa.nc_matmul(...)`
        note_fresh_result(ctx, out, lambda acc: _impl("nc_matmul")(ctx, acc, st, mv, accumulate=True, **options))
    return out


@nki_op
def nc_transpose(
    ctx: Any, data: Any, mask: Any = None, dtype: Any = None, engine: Any = None, dst: Any = None, **kw: Any
) -> NkiTensor:
    """``data[P, F]ᵀ``. TensorE writes PSUM, VectorE SBUF; with no ``engine`` (the legacy "best engine for the
    shape"), a tile within VectorE's 32x32 limit goes to VectorE, a larger one to TensorE."""
    data = _tile("nc_transpose", "data", data)
    eng = _enum(engine, _ENGINE, "engine")
    if eng == "unknown":
        eng = "vector" if data.partitions <= 32 and data.free_size <= 32 else "tensor"
    buffer = _PSUM if eng == "tensor" else _SBUF
    out = _result(ctx, "nc_transpose", dst, (data.free_size, data.partitions), dtype, data.dtype, buffer, "data=")
    _impl("nc_transpose")(ctx, out, data, engine=_modern.engine[eng], **_kw(mask, kw))
    return out


@nki_op
def dma_transpose(ctx: Any, src: Any, axes: Any = None, mask: Any = None, dtype: Any = None, dst: Any = None,
                  **kw: Any) -> NkiTensor:  # fmt: skip
    """``src`` transposed (``axes``: the modern permutations) into a new SBUF tile of src's dtype."""
    src = _tile("dma_transpose", "src", src)
    default = _DMA_TRANSPOSE_AXES.get(src.ndim, tuple(range(src.ndim))[::-1])
    perm = tuple(int(a) for a in axes) if axes is not None else default
    if len(perm) != src.ndim:
        raise NkiError(f"nisa.dma_transpose: axes {perm} do not match the rank-{src.ndim} source")
    shape = tuple(src.shape[a] for a in perm)
    out = _result(ctx, "dma_transpose", dst, shape, dtype, src.dtype, _SBUF, "src=")
    _impl("dma_transpose")(ctx, out, src, axes=axes, **_kw(mask, kw))
    return out


# -- element-wise -------------------------------------------------------------------------------------------
@nki_op
def tensor_copy(ctx: Any, src: Any, mask: Any = None, dtype: Any = None, engine: Any = None, dst: Any = None,
                **kw: Any) -> NkiTensor:  # fmt: skip
    src = _tile("tensor_copy", "src", src)
    out = _result(ctx, "tensor_copy", dst, src.shape, dtype, src.dtype, _SBUF, "src=")
    _impl("tensor_copy")(ctx, out, src, engine=engine, **_kw(mask, kw))
    return out


@nki_op
def tensor_tensor(ctx: Any, data1: Any, data2: Any, op: Any, dtype: Any = None, mask: Any = None,
                  engine: Any = None, dst: Any = None, **kw: Any) -> NkiTensor:  # fmt: skip
    """``op(data1, data2)``; the result dtype defaults to the wider of the two inputs."""
    a, b = _tile("tensor_tensor", "data1", data1), _tile("tensor_tensor", "data2", data2)
    out = _result(ctx, "tensor_tensor", dst, a.shape, dtype, promote(a.dtype, b.dtype), _SBUF, "data1=, data2=, op=")
    _impl("tensor_tensor")(ctx, out, a, b, op, engine=engine, **_kw(mask, kw))
    return out


@nki_op
def tensor_scalar(ctx: Any, data: Any, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None,
                  operand1: Any = None, reverse1: bool = False, dtype: Any = None, mask: Any = None,
                  engine: Any = None, dst: Any = None, **kw: Any) -> NkiTensor:  # fmt: skip
    data = _tile("tensor_scalar", "data", data)
    out = _result(ctx, "tensor_scalar", dst, data.shape, dtype, data.dtype, _SBUF, "data=, op0=, operand0=")
    _impl("tensor_scalar")(ctx, out, data, op0, operand0, reverse0=reverse0, op1=op1, operand1=operand1,
                           reverse1=reverse1, engine=engine, **_kw(mask, kw))  # fmt: skip
    return out


@nki_op
def scalar_tensor_tensor(ctx: Any, data: Any, op0: Any, operand0: Any, op1: Any, operand1: Any,
                         reverse0: bool = False, reverse1: bool = False, dtype: Any = None, mask: Any = None,
                         dst: Any = None, **kw: Any) -> NkiTensor:  # fmt: skip
    data = _tile("scalar_tensor_tensor", "data", data)
    out = _result(ctx, "scalar_tensor_tensor", dst, data.shape, dtype, data.dtype, _SBUF, "data=, op0=, ...")
    _impl("scalar_tensor_tensor")(ctx, out, data, op0, operand0, op1, operand1, reverse0=reverse0,
                                  reverse1=reverse1, **_kw(mask, kw))  # fmt: skip
    return out


@nki_op
def reciprocal(ctx: Any, data: Any, dtype: Any = None, mask: Any = None, dst: Any = None, **kw: Any) -> NkiTensor:
    data = _tile("reciprocal", "data", data)
    out = _result(ctx, "reciprocal", dst, data.shape, dtype, data.dtype, _SBUF, "data=")
    _impl("reciprocal")(ctx, out, data, **_kw(mask, kw))
    return out


@nki_op
def activation(ctx: Any, op: Any, data: Any, bias: Any = None, scale: Any = 1.0, reduce_op: Any = None,
               reduce_res: Any = None, reduce_cmd: Any = None, mask: Any = None, dtype: Any = None,
               dst: Any = None, **kw: Any) -> NkiTensor:  # fmt: skip
    data = _tile("activation", "data", data)
    out = _result(ctx, "activation", dst, data.shape, dtype, data.dtype, _SBUF, "op=, data=")
    _impl("activation")(ctx, out, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                        reduce_cmd=reduce_cmd, **_kw(mask, kw))  # fmt: skip
    return out


@nki_op
def activation_reduce(ctx: Any, op: Any, data: Any, reduce_op: Any, reduce_res: Any, bias: Any = None,
                      scale: Any = 1.0, mask: Any = None, dtype: Any = None, dst: Any = None,
                      **kw: Any) -> NkiTensor:  # fmt: skip
    data = _tile("activation_reduce", "data", data)
    out = _result(ctx, "activation_reduce", dst, data.shape, dtype, data.dtype, _SBUF, "op=, data=, ...")
    _impl("activation_reduce")(ctx, out, op, data, reduce_op, reduce_res, bias=bias, scale=scale,
                               **_kw(mask, kw))  # fmt: skip
    return out


@nki_op
def tensor_scalar_reduce(ctx: Any, data: Any, op0: Any, operand0: Any, reduce_op: Any, reduce_res: Any,
                         reverse0: bool = False, dtype: Any = None, mask: Any = None, dst: Any = None,
                         **kw: Any) -> NkiTensor:  # fmt: skip
    data = _tile("tensor_scalar_reduce", "data", data)
    out = _result(ctx, "tensor_scalar_reduce", dst, data.shape, dtype, data.dtype, _SBUF, "data=, ...")
    _impl("tensor_scalar_reduce")(ctx, out, data, op0, operand0, reduce_op, reduce_res, reverse0=reverse0,
                                  **_kw(mask, kw))  # fmt: skip
    return out


@nki_op
def tensor_tensor_scan(ctx: Any, data0: Any, data1: Any, initial: Any, op0: Any, op1: Any, reverse0: bool = False,
                       reverse1: bool = False, dtype: Any = None, mask: Any = None, dst: Any = None,
                       **kw: Any) -> NkiTensor:  # fmt: skip
    a, b = _tile("tensor_tensor_scan", "data0", data0), _tile("tensor_tensor_scan", "data1", data1)
    out = _result(ctx, "tensor_tensor_scan", dst, a.shape, dtype, promote(a.dtype, b.dtype), _SBUF,
                  "data0=, data1=, ...")  # fmt: skip
    _impl("tensor_tensor_scan")(ctx, out, a, b, initial, op0, op1, reverse0=reverse0, reverse1=reverse1,
                                **_kw(mask, kw))  # fmt: skip
    return out


@nki_op
def dropout(ctx: Any, data: Any, prob: Any, mask: Any = None, dtype: Any = None, dst: Any = None,
            **kw: Any) -> NkiTensor:  # fmt: skip
    data = _tile("dropout", "data", data)
    out = _result(ctx, "dropout", dst, data.shape, dtype, data.dtype, _SBUF, "data=, prob=")
    _impl("dropout")(ctx, out, data, prob, **_kw(mask, kw))
    return out


# -- reductions and statistics ------------------------------------------------------------------------------
@nki_op
def tensor_reduce(ctx: Any, op: Any, data: Any, axis: Any, mask: Any = None, dtype: Any = None,
                  negate: bool = False, keepdims: bool = False, dst: Any = None, **kw: Any) -> NkiTensor:  # fmt: skip
    """The reduction of ``data``'s trailing free ``axis``; without ``keepdims`` a tile keeps at least 2 dims
    (``(P, 1)`` when every free axis is reduced)."""
    data = _tile("tensor_reduce", "data", data)
    axes = _axes(axis, data.ndim)
    if keepdims:
        shape = tuple(1 if d in axes else n for d, n in enumerate(data.shape))
    else:
        kept = tuple(n for d, n in enumerate(data.shape) if d not in axes)
        shape = kept if len(kept) >= 2 else (*kept, 1)
    out = _result(ctx, "tensor_reduce", dst, shape, dtype, data.dtype, _SBUF, "op=, data=, axis=")
    _impl("tensor_reduce")(ctx, out, op, data, axis, negate=negate, keepdims=keepdims, **_kw(mask, kw))
    return out


@nki_op
def tensor_partition_reduce(ctx: Any, op: Any, data: Any, mask: Any = None, dtype: Any = None, dst: Any = None,
                            **kw: Any) -> NkiTensor:  # fmt: skip
    """The reduction across partitions: a new ``(1, *free)`` tile."""
    data = _tile("tensor_partition_reduce", "data", data)
    out = _result(ctx, "tensor_partition_reduce", dst, (1, *_free_shape(data)), dtype, data.dtype, _SBUF,
                  "op=, data=")  # fmt: skip
    _impl("tensor_partition_reduce")(ctx, out, op, data, **_kw(mask, kw))
    return out


_BN_STATS = 6  # (count, mean, M2) for the even and the odd elements


@nki_op
def bn_stats(ctx: Any, data: Any, mask: Any = None, dtype: Any = None, dst: Any = None, **kw: Any) -> NkiTensor:
    """The 6 statistics per partition of one (at most 512-element) tile: a new ``(P, 6)`` tile."""
    data = _tile("bn_stats", "data", data)
    out = _result(ctx, "bn_stats", dst, (data.partitions, _BN_STATS), dtype, data.dtype, _SBUF, "data=")
    _impl("bn_stats")(ctx, out, data, **_kw(mask, kw))
    return out


@nki_op
def bn_aggr(ctx: Any, data: Any, mask: Any = None, dtype: Any = None, dst: Any = None, **kw: Any) -> NkiTensor:
    """Mean and variance per partition from ``bn_stats`` outputs: a new ``(P, 2)`` tile."""
    data = _tile("bn_aggr", "data", data)
    out = _result(ctx, "bn_aggr", dst, (data.partitions, 2), dtype, data.dtype, _SBUF, "data=")
    _impl("bn_aggr")(ctx, out, data, **_kw(mask, kw))
    return out


@nki_op
def max8(ctx: Any, src: Any, mask: Any = None, dtype: Any = None, dst: Any = None, **kw: Any) -> NkiTensor:
    """The 8 largest values per partition, descending: a new ``(P, 8)`` tile of src's dtype."""
    src = _tile("max8", "src", src)
    out = _result(ctx, "max8", dst, (src.partitions, 8), dtype, src.dtype, _SBUF, "src=")
    _impl("max8")(ctx, out, src, **_kw(mask, kw))
    return out


@nki_op
def nc_find_index8(ctx: Any, data: Any, vals: Any, mask: Any = None, dtype: Any = None, dst: Any = None,
                   **kw: Any) -> NkiTensor:  # fmt: skip
    """The free-dim index of each of the 8 ``vals`` in ``data``: a new ``(P, 8)`` uint32 tile."""
    data = _tile("nc_find_index8", "data", data)
    out = _result(ctx, "nc_find_index8", dst, (data.partitions, 8), dtype, "uint32", _SBUF, "data=, vals=")
    _impl("nc_find_index8")(ctx, out, data, vals, **_kw(mask, kw))
    return out


@nki_op
def nc_match_replace8(ctx: Any, data: Any, vals: Any, imm: Any, dst_idx: Any = None, mask: Any = None,
                      dtype: Any = None, dst: Any = None, **kw: Any) -> NkiTensor:  # fmt: skip
    """``data`` with the first match of each of the 8 ``vals`` replaced by ``imm``: a new tile of data's shape."""
    data = _tile("nc_match_replace8", "data", data)
    out = _result(ctx, "nc_match_replace8", dst, data.shape, dtype, data.dtype, _SBUF, "data=, vals=, imm=")
    _impl("nc_match_replace8")(ctx, out, data, vals, _number(imm), dst_idx=dst_idx, **_kw(mask, kw))
    return out


# -- generation ---------------------------------------------------------------------------------------------
@nki_op
def memset(ctx: Any, shape: Any, value: Any, dtype: Any, mask: Any = None, engine: Any = None, dst: Any = None,
           **kw: Any) -> NkiTensor:  # fmt: skip
    """A new SBUF tile of ``shape`` filled with ``value``. A block shape (dims before ``nl.par_dim``) is a new block
    tensor with every block filled, as ``nl.full`` of one does (``int`` of each dim would drop the ``par_dim`` and
    make the first block dim the partitions)."""
    if dst is None and mask is None and engine is None and not kw and grid.split_par_dim(shape):
        migration.legacy("nisa.memset(...) returning a new tile",
                         "nisa.memset(dst=<tile>, value=) writing into a tile allocated with nl.ndarray")  # fmt: skip
        return _language.full.__nki_impl__(ctx, shape, _number(value), dtype or "float32")  # type: ignore[no-any-return]
    out = _result(ctx, "memset", dst, tuple(shape), dtype, "float32", _SBUF, "value=")
    _impl("memset")(ctx, out, _number(value), engine=engine, **_kw(mask, kw))
    return out


@nki_op
def iota(ctx: Any, expr: Any, dtype: Any, mask: Any = None, dst: Any = None, **kw: Any) -> NkiTensor:
    """The values of the index expression ``expr`` (``nl.arange``/``nl.mgrid`` and affine combinations of them) in
    a new SBUF tile of its shape (GpSimd iota). A scalar expression (``nisa.iota(nl.program_id(1), ...)``, a loop
    index, an int) is an expression with no index grid in it: its one value in a (1, 1) tile."""
    if _is_scalar_index(expr):
        # iota's offset is an immediate, so a loop index needs its value here: operator.index unrolls that loop.
        shape, pattern, offset, multiplier = (1, 1), [[0, 1]], operator.index(expr), 0
    else:
        shape, pattern, offset, multiplier = grid.iota_args(expr)
    out = _result(ctx, "iota", dst, shape, dtype, "int32", _SBUF, "pattern=, offset=, channel_multiplier=")
    _impl("iota")(ctx, out, pattern, offset=offset, channel_multiplier=multiplier, **_kw(mask, kw))
    return out


def _is_scalar_index(expr: Any) -> bool:
    """An integer known at trace time, or an affine expression of loop indices (no index grid)."""
    if isinstance(expr, bool):
        return False
    return isinstance(expr, (int, np.integer)) or is_symbolic(expr)


# -- selection ----------------------------------------------------------------------------------------------
@nki_op
def affine_select(ctx: Any, pred: Any, on_true_tile: Any, on_false_value: Any, mask: Any = None, dtype: Any = None,
                  dst: Any = None, **kw: Any) -> NkiTensor:  # fmt: skip
    """``on_true_tile`` where the affine predicate over the index grids holds (``iy < ix``), else
    ``on_false_value``: the modern ``affine_select`` with the predicate's pattern. ``grid.predicate_args`` gives
    the predicate as one affine expression ``e`` meaning ``e >= 0``."""
    src = _tile("affine_select", "on_true_tile", on_true_tile)
    _, pattern, offset, multiplier = grid.predicate_args(pred)
    out = _result(ctx, "affine_select", dst, src.shape, dtype, src.dtype, _SBUF,
                  "pattern=, channel_multiplier=, on_true_tile=, on_false_value=, cmp_op=")  # fmt: skip
    _impl("affine_select")(ctx, out, pattern, multiplier, src, _number(on_false_value), cmp_op="greater_equal",
                           offset=offset, **_kw(mask, kw))  # fmt: skip
    return out


@nki_op
def range_select(ctx: Any, on_true_tile: Any, comp_op0: Any, comp_op1: Any, bound0: Any, bound1: Any,
                 reduce_cmd: Any = None, reduce_res: Any = None, reduce_op: Any = None, range_start: Any = 0,
                 on_false_value: Any = -3.4028234663852886e38, mask: Any = None, dtype: Any = None,
                 dst: Any = None, **kw: Any) -> NkiTensor:  # fmt: skip
    src = _tile("range_select", "on_true_tile", on_true_tile)
    out = _result(ctx, "range_select", dst, src.shape, dtype, src.dtype, _SBUF, "on_true_tile=, ...")
    _impl("range_select")(ctx, out, src, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd,
                          reduce_res=reduce_res, reduce_op=reduce_op, range_start=range_start,
                          on_false_value=on_false_value, **_kw(mask, kw))  # fmt: skip
    return out


@nki_op
def select_reduce(ctx: Any, dst: Any, predicate: Any, on_true: Any, on_false: Any, reduce_res: Any = None,
                  reduce_cmd: Any = None, reduce_op: Any = None, reverse_pred: bool = False, mask: Any = None,
                  **kw: Any) -> None:  # fmt: skip
    """The modern instruction (legacy select_reduce took ``dst`` too); a ``bool_`` predicate, which the legacy API
    accepted (numpy bool arrays are one byte per element), is read as the uint8 it is stored as."""
    pred = _bytes_predicate("select_reduce", predicate)
    dims = kw.pop("num_r_dim", None)  # legacy: how many trailing dims the reduction covers
    free = _tile("select_reduce", "on_true", on_true).ndim - 1
    if dims is not None and int(dims) != free:
        raise NkiError(f"nisa.select_reduce: num_r_dim={dims} is not supported, only the reduction over all {free} "
                       "free dims", "reshape the tiles so that the reduced dims are the free dims")  # fmt: skip
    _impl("select_reduce")(ctx, dst, pred, on_true, on_false, reduce_res=reduce_res, reduce_cmd=reduce_cmd,
                           reduce_op=reduce_op, reverse_pred=reverse_pred, **_kw(mask, kw))  # fmt: skip


@nki_op
def tensor_copy_predicated(ctx: Any, src: Any, dst: Any, predicate: Any, mask: Any = None, reverse_pred: bool = False,
                           **kw: Any) -> None:  # fmt: skip
    """The modern instruction (the legacy one took ``dst`` too); a ``bool_`` predicate is read as uint8."""
    _impl("tensor_copy_predicated")(ctx, dst, _number(src), _bytes_predicate("tensor_copy_predicated", predicate),
                                    reverse_pred=reverse_pred, **_kw(mask, kw))  # fmt: skip


@nki_op
def local_gather(ctx: Any, src_buffer: Any, index: Any, num_elem_per_idx: Any = 1, num_valid_indices: Any = None,
                 mask: Any = None, dtype: Any = None, dst: Any = None, **kw: Any) -> NkiTensor:  # fmt: skip
    """Per GpSimd core, ``num_valid_indices`` gathers of ``num_elem_per_idx`` elements: a new SBUF tile
    ``(P, valid, num_elem_per_idx)`` of src_buffer's dtype (``valid`` defaults to every index of a core's slice)."""
    src, idx = _tile("local_gather", "src_buffer", src_buffer), _tile("local_gather", "index", index)
    per_core = GPSIMD_CORE_PARTITIONS * idx.free_size
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    out = _result(ctx, "local_gather", dst, (src.partitions, valid, int(num_elem_per_idx)), dtype, src.dtype,
                  _SBUF, "src_buffer=, index=, ...")  # fmt: skip
    _impl("local_gather")(ctx, out, src, idx, num_elem_per_idx=num_elem_per_idx,
                          num_valid_indices=num_valid_indices, **_kw(mask, kw))  # fmt: skip
    return out


@nki_op
def nc_stream_shuffle(ctx: Any, src: Any, dst: Any, shuffle_mask: Any, dtype: Any = None, mask: Any = None,
                      **kw: Any) -> None:  # fmt: skip
    """The modern instruction with the legacy argument order ``(src, dst, shuffle_mask)``; ``dtype`` must be dst's."""
    if dtype is not None and normalize_dtype(dtype) != _tile("nc_stream_shuffle", "dst", dst).dtype:
        raise NkiError(f"nisa.nc_stream_shuffle: dtype={normalize_dtype(dtype)} disagrees with dst's {dst.dtype}")
    _impl("nc_stream_shuffle")(ctx, dst, src, shuffle_mask, **_kw(mask, kw))


@nki_op
def sequence_bounds(ctx: Any, segment_ids: Any, dtype: Any = None, dst: Any = None, **kw: Any) -> NkiTensor:
    """Start and end of each element's segment: a new ``(P, 2, F)`` tile of segment_ids' dtype."""
    ids = _tile("sequence_bounds", "segment_ids", segment_ids)
    out = _result(ctx, "sequence_bounds", dst, (ids.partitions, 2, ids.free_size), dtype, ids.dtype, _SBUF,
                  "segment_ids=")  # fmt: skip
    _impl("sequence_bounds")(ctx, out, ids, **kw)
    return out


__getattr__ = missing_names("neuronxcc.nki.isa")
