"""Layouts chosen across ops for ``dot_general``: its operands read where they are, its result written where its
reader wants it (issue 27 item 3).

Op by op, every ``transpose`` and ``convert`` was a pass over HBM and every ``dot_general`` then permuted its operands
into ``[batch, contracting, free]`` again, so an attention head's Q went through two layout changes between the
projection and the scores (the heads' ``(1, 0, 2)`` permute moving 256-byte runs, then a TensorE transpose of each
head). Here:

* a ``transpose`` or widening float ``convert`` (bf16/f16 to f32, exact) whose every reader is a ``dot_general``
  (or another such op) is not run: its result is a ``View`` of its operand's storage (strides, and the type tiles
  are read as);
* ``dot_general`` groups each operand's dims as ``[batch, rows, cols]``. When each group is one stride and the
  columns are contiguous, ``nc_matmul``'s K-tiles are loaded straight from the view (a bf16 weight upcast to f32 is
  loaded as bf16, half the bytes, and widened on chip); otherwise the view is copied once into that layout
  (``copy_view``: one DMA when the source's rows are contiguous, else TensorE transposes of 128 x 128 tiles read
  with contiguous runs, as ``hlo/layout.py`` argues from the DMA cost model);
* a ``dot_general`` whose only reader is a ``transpose`` writes its tiles straight into the transpose's result when
  the batch dims, M and N stay one stride each there (the attention output's ``[heads, tokens, d] -> [tokens,
  heads, d]``); when that makes M the contiguous one, it computes the transposed product ``b^T a`` instead
  (JAX's ``einsum("bhqk,bkhd->bqhd")`` is ``dot_general(v, p)`` then a transpose putting d last).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue

from nkic.dialects import stablehlo as hlo
from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.hlo import common, layout, tiles
from nkic.hlo.matmul import Operand, blocked_matmul
from nkic.hlo.tiles import P_TILE, Hbm, SegmentInterpreter

WIDENING = {("bfloat16", "float32"), ("float16", "float32")}  # exact: every bf16/f16 value is an f32 value


@dataclass(frozen=True)
class View:
    """A value read in place: element ``i`` of ``shape`` is at ``offset + sum(i_k * strides[k])`` of ``tensor``,
    stored as ``dtype`` and read as ``as_dtype``. Only ``dot_general`` (and further views) read one."""

    tensor: Any
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    dtype: str
    as_dtype: str


def view_of(interp: SegmentInterpreter, value: Any) -> View:
    if isinstance(value, View):
        return value
    h = interp.hbm(value)
    return View(h.tensor, tuple(h.shape), tuple(tiles.strides(h.shape)), 0, h.dtype, h.dtype)


def read_in_place(interp: SegmentInterpreter, value: SSAValue) -> bool:
    """Whether every reader of ``value`` takes a view: a ``dot_general``, or a transpose/convert that is a view too."""
    uses = [u.operation for u in value.uses]
    return bool(uses) and value not in interp.out_names and all(_takes_view(interp, o) for o in uses)


def _takes_view(interp: SegmentInterpreter, op: Operation) -> bool:
    if isinstance(op, hlo.DotGeneralOp):
        return True
    if isinstance(op, hlo.TransposeOp) or (isinstance(op, hlo.ConvertOp) and _widening(op)):
        return read_in_place(interp, op.results[0])
    return False


def _widening(op: hlo.ConvertOp) -> bool:
    frm, to = (tiles.nki_dtype(tiles.result_dtype(v)) for v in (op.operand[0], op.result))
    return (frm, to) in WIDENING


@common.lowering("transpose")
def transpose(interp: SegmentInterpreter, op: hlo.TransposeOp) -> None:
    """A view of the operand when only views are read from the result, else one ``copy_view``."""
    v = view_of(interp, interp.get(op.operand[0]))
    perm = hlo.int_list(op.permutation)
    moved = View(v.tensor, tuple(v.shape[p] for p in perm), tuple(v.strides[p] for p in perm), v.offset, v.dtype,
                 v.as_dtype)  # fmt: skip
    if read_in_place(interp, op.result):
        interp.values[op.result] = moved  # type: ignore[assignment]
        return
    out = interp.alloc(op.result)
    copy_view(moved, out)
    interp.values[op.result] = out


@common.lowering("permute")
def permute(interp: SegmentInterpreter, value: Any, shape: Sequence[int], perm: Sequence[int]) -> Hbm:
    """``value`` (of ``shape``) transposed by ``perm`` into a fresh row-major tensor (itself for the identity)."""
    h = interp.hbm(value)
    if list(perm) == sorted(perm):
        return h
    st = tiles.strides(shape)
    new_shape = tuple(shape[p] for p in perm)
    out = common.scratch(interp, new_shape, h.dtype)
    copy_view(View(h.tensor, new_shape, tuple(st[p] for p in perm), 0, h.dtype, h.dtype), out)
    return out


@common.lowering("convert.view")
def convert_view(interp: SegmentInterpreter, op: hlo.ConvertOp) -> bool:
    """A widening float convert read only by matmuls: the operand's storage read as the wider type."""
    x = interp.get(op.operand[0])
    if isinstance(x, View) and op.operand[0].type == op.result.type:  # a no-op convert of a view: the same view
        interp.values[op.result] = x  # type: ignore[assignment]
        return True
    if isinstance(x, np.ndarray) or not _widening(op) or not read_in_place(interp, op.result):
        return False
    v = view_of(interp, x)
    to = tiles.nki_dtype(tiles.result_dtype(op.result))
    interp.values[op.result] = View(v.tensor, v.shape, v.strides, v.offset, v.dtype, to)  # type: ignore[assignment]
    return True


def wants_transposed(interp: SegmentInterpreter, value: SSAValue) -> bool:
    """Whether every reader of ``value`` is a ``dot_general`` contracting its last dim alone (so each would copy it
    transposed before its matmul: K must be on the partitions): then its producer stores it transposed instead."""
    shape = hlo.shape_of(value)
    uses = [u.operation for u in value.uses]
    if len(shape) < 2 or not uses or value in interp.out_names:
        return False
    if tiles.nki_dtype(tiles.result_dtype(value)) not in layout.FLOATS:
        return False
    if min(shape[-1], math.prod(shape[:-1])) < layout.MIN_DIM:
        return False
    return all(_contracts_last(interp, op, value, len(shape)) for op in uses)


def _contracts_last(interp: SegmentInterpreter, op: Operation, value: SSAValue, rank: int) -> bool:
    if isinstance(op, hlo.ConvertOp) and op.operand[0].type == op.result.type:  # a no-op convert passes the view on
        return wants_transposed(interp, op.result)
    if not isinstance(op, hlo.DotGeneralOp):
        return False
    dn = op.dot_dimension_numbers
    sides = [("lhs_contracting_dimensions", v) for v in op.lhs[:1]] + [("rhs_contracting_dimensions", v)
                                                                       for v in op.lhs[1:2]]  # fmt: skip
    return all(tuple(dn.dims(key)) == (rank - 1,) for key, v in sides if v == value)


def transposed(storage: Hbm, shape: Sequence[int]) -> View:
    """The value of ``shape`` held transposed as (last dim, the other dims flattened) in ``storage``."""
    rows = math.prod(shape[:-1])
    strides = (*tiles.strides(shape[:-1]), rows)
    return View(storage.tensor, tuple(shape), strides, 0, storage.dtype, storage.dtype)


def group_stride(shape: Sequence[int], strides: Sequence[int]) -> int | None:
    """The one stride of ``shape``'s dims read as a single row-major dim (None when they are not one); 1 for none."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    if any(s0 != n1 * s1 for (_, s0), (n1, s1) in zip(dims, dims[1:])):
        return None
    return dims[-1][1] if dims else 1


def _grouped(v: View, groups: Sequence[Sequence[int]]) -> Operand | None:
    """``v`` as [batch..., rows, cols] (batch dims anywhere, each kept with its stride; the rows and the cols each
    one stride, cols contiguous), or None."""
    batch, rows, cols = groups
    gr = group_stride([v.shape[i] for i in rows], [v.strides[i] for i in rows])
    gc = group_stride([v.shape[i] for i in cols], [v.strides[i] for i in cols])
    if gr is None or gc != 1:
        return None
    pairs = tuple((v.shape[i], v.strides[i]) for i in batch) or ((1, 0),)
    return Operand(v.tensor, v.dtype, v.offset, pairs, gr, v.as_dtype)


def matmul_operand(interp: SegmentInterpreter, value: Any, groups: Sequence[Sequence[int]]) -> Operand:
    """``value`` as nc_matmul's [batch, K, free] operand: in place when its layout allows, else copied once."""
    v = view_of(interp, value)
    direct = _grouped(v, groups)
    if direct is not None:
        return direct
    perm = [d for g in groups for d in g]
    shape = tuple(v.shape[p] for p in perm)
    out = common.scratch(interp, shape, v.dtype)
    copy_view(View(v.tensor, shape, tuple(v.strides[p] for p in perm), v.offset, v.dtype, v.dtype), out)
    b, r, c = (math.prod(v.shape[i] for i in g) for g in groups)
    return replace(Operand.dense(out, b, r, c), compute=v.as_dtype)


def copy_view(v: View, out: Hbm) -> None:
    """``out`` (row-major, ``v``'s shape) = the view: one DMA when the view's last dim is contiguous (or the
    source's contiguous dim is short), else TensorE transposes (``hlo/layout.py``: an element-strided DMA moves 2-4
    bytes per descriptor run)."""
    n = len(v.shape)
    contiguous = [d for d in range(n) if v.strides[d] == 1 and v.shape[d] > 1]
    j = contiguous[0] if contiguous else None
    last = v.shape[-1] if n else 1
    if v.strides[-1:] == (1,) or j is None or j == n - 1 or last == 1 or v.dtype not in layout.FLOATS \
            or min(v.shape[j], last) < layout.MIN_DIM:  # fmt: skip
        _dma(v, out)
        return
    ost = tiles.strides(v.shape)
    outer = [d for d in range(n - 1) if d != j]
    for idx in np.ndindex(*[v.shape[d] for d in outer]):
        src = v.offset + sum(i * v.strides[d] for i, d in zip(idx, outer))
        dst = sum(i * ost[d] for i, d in zip(idx, outer))
        _transpose_2d(v, out, src, dst, v.shape[j], ost[j], last, v.strides[-1])


def _dma(v: View, out: Hbm) -> None:
    shape = tiles.dims(v.shape)
    dst = [[s, n] for s, n in zip(tiles.strides(shape), shape)]
    src = [[s, n] for s, n in zip(v.strides, shape)] if v.shape else [[0, 1]]
    dst, src = layout.rows_first(dst, src)
    nisa.dma_copy(dst=out.tensor.ap(dst, offset=0), src=v.tensor.ap(src, offset=v.offset))


def _transpose_2d(v: View, out: Hbm, src: int, dst: int, cols: int, col_step: int, rows: int, row_step: int) -> None:
    """out[c * col_step + r] = source[r * row_step + c] for c < cols (contiguous in the source), r < rows
    (contiguous in ``out``): 128-row loads with contiguous runs, transposed on TensorE in 512-column blocks."""
    for r0 in range(0, rows, layout.BLOCK):
        nr = min(layout.BLOCK, rows - r0)
        for c0 in range(0, cols, layout.BLOCK):
            nc = min(layout.BLOCK, cols - c0)
            loads = [nl.load(v.tensor.ap([[row_step, min(P_TILE, nr - i)], [1, nc]],
                                         offset=src + (r0 + i) * row_step + c0)) for i in range(0, nr, P_TILE)]  # fmt: skip
            for c in range(0, nc, P_TILE):
                ncc = min(P_TILE, nc - c)
                acc = nl.ndarray((ncc, nr), dtype=v.dtype, buffer=nl.psum)
                for i, tile in zip(range(0, nr, P_TILE), loads):
                    nisa.nc_transpose(dst=acc[:, i : i + min(P_TILE, nr - i)], data=tile[:, c : c + ncc])
                nl.store(out.tensor.ap([[col_step, ncc], [1, nr]], offset=dst + (c0 + c) * col_step + r0),
                         nl.copy(acc, dtype=out.dtype))  # fmt: skip


def _result(interp: SegmentInterpreter, op: hlo.DotGeneralOp, groups: Sequence[Sequence[int]], m: int,
            n: int) -> tuple[Operand, bool]:
    """Where the result's [batch, M, N] tiles go, and whether M and N swap roles: its only reader's storage when
    that is a transpose in which the batch dims, M and N each stay one stride and N (or, swapped, M) is contiguous
    (the product is then computed as its transpose, ``b^T a``); else a fresh row-major tensor."""
    users = [u.operation for u in op.result.uses]
    if len(users) == 1 and isinstance(users[0], hlo.TransposeOp):
        user = users[0]
        perm = hlo.int_list(user.permutation)
        t_strides = tiles.strides(hlo.shape_of(user.result))
        strides = [0] * len(perm)
        for pos, d in enumerate(perm):
            strides[d] = t_strides[pos]
        shape = hlo.shape_of(op.result)
        batch, rows, cols = groups
        for swapped, order in ((False, groups), (True, (batch, cols, rows))):
            grouped = _grouped(View(None, shape, tuple(strides), 0, "", ""), order)
            if grouped is None:
                continue
            out = interp.alloc(user.result)
            interp.values[user.result] = out
            interp.values[op.result] = View(out.tensor, shape, tuple(strides), 0, out.dtype, out.dtype)  # type: ignore[assignment]
            return Operand(out.tensor, out.dtype, 0, grouped.batch, grouped.row_stride, out.dtype), swapped
    out = interp.alloc(op.result)
    interp.values[op.result] = out
    return Operand.dense(out, math.prod(hlo.shape_of(op.result)) // max(m * n, 1), m, n), False


@common.lowering("dot_general")
def dot_general(interp: SegmentInterpreter, op: hlo.DotGeneralOp) -> None:
    """``nc_matmul`` tiles over [batch, K, M] x [batch, K, N] operands (``matmul_operand``), blocked with the
    operands resident in SBUF (``hlo/matmul.py``)."""
    dn = op.dot_dimension_numbers
    a_shape, b_shape = hlo.shape_of(op.lhs[0]), hlo.shape_of(op.lhs[1])
    lb, rb = dn.dims("lhs_batching_dimensions"), dn.dims("rhs_batching_dimensions")
    lc, rc = dn.dims("lhs_contracting_dimensions"), dn.dims("rhs_contracting_dimensions")
    lf = [i for i in range(len(a_shape)) if i not in (*lb, *lc)]
    rf = [i for i in range(len(b_shape)) if i not in (*rb, *rc)]
    bsz, k = math.prod(a_shape[i] for i in lb), math.prod(a_shape[i] for i in lc)
    m, n = math.prod(a_shape[i] for i in lf), math.prod(b_shape[i] for i in rf)
    a = matmul_operand(interp, interp.get(op.lhs[0]), (lb, lc, lf))
    b = matmul_operand(interp, interp.get(op.lhs[1]), (rb, rc, rf))
    nb, nm = len(lb), len(lf)
    rank = len(hlo.shape_of(op.result))
    out, swapped = _result(interp, op, (range(nb), range(nb, nb + nm), range(nb + nm, rank)), m, n)
    if swapped:  # the result's transpose [batch, N, M] = b^T a
        blocked_matmul(b, a, out, bsz, k, n, m)
    else:
        blocked_matmul(a, b, out, bsz, k, m, n)
