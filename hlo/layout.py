"""Layout changes that pay: TensorE instead of an element-strided DMA (transposes: ``hlo/views.py`` ``copy_view``;
columns broadcast on chip here).

Why: the DMA cost model (``target/costs.py``, ``dma_run_efficiency``: a fixed overhead per contiguous run, c / (c +
c½) of the raw rate with c½ = 4/3 KiB, the table rate from 8 KiB runs) gives an element-strided transpose 2-4 bytes per
run, well under 1% of the bandwidth: a [512, 1024] bf16 transpose simulated in 1.43 ms. On TensorE it is contiguous
DMAs plus ``nc_transpose`` ("dst[F, P] = data[P, F]", TensorE up to 128x128, SBUF -> PSUM, same dtype): per block of
512 x 512, four loads of [128, 512] (1 KiB runs in bf16), sixteen 128 x 128 transposes into four PSUM tiles, four
copies to SBUF and four stores of [128, 512]. Used for 2-byte and 4-byte floats when both dims are at least
``MIN_DIM``; smaller transposes keep the single strided DMA (one descriptor, no engine work).
"""

from __future__ import annotations

import math

from nkic.dialects import stablehlo as hlo
from nkic.frontend import language as nl
from nkic.hlo import common, fusion
from nkic.hlo.tiles import P_TILE, Hbm, SegmentInterpreter

MIN_DIM = 32  # below 32 x 32 elements the strided DMA's single descriptor is cheaper than four engine instructions
BLOCK = 512  # a block's columns: one [128, 512] fp32 PSUM bank per 128 output rows
FLOATS = ("float32", "bfloat16", "float16")
MIN_BROADCAST = 32  # a last dim of fewer elements: the strided DMA's few descriptors cost less than engine work


@common.lowering("broadcast.columns")
def broadcast_columns(interp: SegmentInterpreter, op: hlo.BroadcastInDimOp, x: Hbm, out_strides: list[int]) -> bool:
    """A broadcast along the last dim (``rsqrt(mean(x*x))[:, None] * x``'s column): element-strided as one DMA (2-4
    contiguous bytes per run, like a transpose), so instead each 128-row column is loaded once ([nr, 1]), broadcast
    across the free dim on chip (``nl.broadcast_to``: a stride-0 tensor_copy) and stored as contiguous [nr, 512]
    tiles. Rows are taken in chunks that stay inside one block of the second-to-last dim, so a chunk's source
    offsets are one [stride, count] pair. A broadcast that only adds size-1 dims (``keepdims``) is a reshape: a
    view, no DMA. False (the DMA) when the last dim is not broadcast or is short."""
    shape = hlo.shape_of(op.result)
    bdims = hlo.int_list(op.broadcast_dimensions)
    if math.prod(shape) == math.prod(x.shape) and list(bdims) == sorted(bdims):
        interp.values[op.result] = Hbm(x.tensor, shape, x.dtype)  # only size-1 dims added: a reshape, free
        return True
    if shape and out_strides[-1] in (0, 1) and fusion.all_uses_fuse(interp, op.result):
        # never materialised: each fused tile reads its rows / column from the source (hlo/fusion.py)
        interp.values[op.result] = fusion.ColumnBroadcast(x, shape, tuple(out_strides))  # type: ignore[assignment]
        return True
    if not shape or out_strides[-1] != 0 or shape[-1] < MIN_BROADCAST:
        return False
    out = interp.alloc(op.result)
    c = shape[-1]
    lead = shape[:-1]
    rows = math.prod(lead)
    block = lead[-1] if lead else 1
    r0 = 0
    while r0 < rows:
        nr = min(P_TILE, block - r0 % block, rows - r0)
        idx, rest = [], r0
        for n in reversed(lead):
            idx.append(rest % n)
            rest //= n
        offset = sum(i * s for i, s in zip(reversed(idx), out_strides[:-1]))
        step = out_strides[-2] if lead else 0
        col = nl.load(x.tensor.ap([[step, nr], [1, 1]], offset=offset))
        wide = nl.broadcast_to(col, shape=(nr, min(BLOCK, c)))
        for c0 in range(0, c, BLOCK):
            nc = min(BLOCK, c - c0)
            nl.store(out.tile(r0, nr, c0, nc), wide[:, 0:nc])
        r0 += nr
    interp.values[op.result] = out
    return True


def rows_first(dst: list[list[int]], src: list[list[int]]) -> tuple[list[list[int]], list[list[int]]]:
    """The same HBM-to-HBM copy with its largest dim first (both sides' pairs reordered alike; the innermost pair
    stays last for its contiguous run). The DMA cost model gives a transfer ``min(16, ceil(rows / 8))`` engines,
    rows being the first pair's count of an HBM destination (``target/costs.py`` ``_dma_shape``): a [8, 512, 128]
    permute written head-first ran on one engine (228 us simulated), row-first on sixteen."""
    if len(dst) < 3:
        return dst, src
    outer = sorted(range(len(dst) - 1), key=lambda i: -dst[i][1])
    first = outer[0]
    order = [first, *[i for i in range(len(dst) - 1) if i != first], len(dst) - 1]
    return [dst[i] for i in order], [src[i] for i in order]
