"""``stablehlo.convolution`` (1-D and 2-D, any layout, strides, padding, kernel dilation) as a matmul over patches.

The input is laid out (batch, feature, spatial...) and zero-padded in HBM; the *patches* matrix
``P[(c, kpos), (b, opos)] = x[b, c, opos * stride + kpos * dilation]`` is built with one strided DMA per kernel
position (its pattern walks c, b and the output positions); the kernel laid out (in-feature, spatial..., out-feature)
is ``W[(c, kpos), o]``. Then ``out[o, (b, opos)] = W^T @ P`` on TensorE (``common.matmul``: the contraction
c * kernel positions on the partitions, as ``nc_matmul``'s stationary operand takes it) and one permuting DMA into
the output layout. Not lowered: input (lhs) dilation (transposed convolutions), window reversal, feature or batch
groups.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from nkic.dialects import stablehlo as hlo
from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.hlo import common, tiles
from nkic.hlo.tiles import Hbm, SegmentInterpreter


def _layout_perm(layout: tuple[str, ...], first: str, last: str | None = None) -> list[int]:
    """Dims of ``layout`` ordered as (first, spatial 0.., last) or (first, last, spatial..) when last is None."""
    spatial = sorted((d for d in layout if d.isdigit()), key=int)
    order = [first, *spatial, last] if last is not None else [first, *spatial]
    return [layout.index(s) for s in order]


@common.lowering("convolution")
def convolution(interp: SegmentInterpreter, op: Any) -> None:
    dn = op.dimension_numbers
    lin, lk, lout = dn.layout(0), dn.layout(1), dn.layout(2)
    xs, ws = hlo.shape_of(op.lhs[0]), hlo.shape_of(op.lhs[1])
    ns = op.spatial_rank()
    ones = (1,) * ns
    strides = hlo.int_list(op.window_strides) or ones
    ldil, rdil = hlo.int_list(op.lhs_dilation) or ones, hlo.int_list(op.rhs_dilation) or ones
    pad = hlo.pairs_attr(op.padding, ns)
    if any(d != 1 for d in ldil) or any(hlo.int_list(op.window_reversal)):
        raise common.unsupported(op, "a convolution with input dilation or window reversal")
    if op.feature_group_count.value.data != 1 or op.batch_group_count.value.data != 1:
        raise common.unsupported(op, "a grouped convolution")
    if any(lo < 0 or hi < 0 for lo, hi in pad):
        raise common.unsupported(op, "negative convolution padding")
    # input as (b, f, spatial...), padded
    xperm = [lin.index("b"), lin.index("f"), *[lin.index(str(i)) for i in range(ns)]]
    x = interp._permuted(interp.get(op.lhs[0]), xs, xperm)
    b, c, sp = xs[xperm[0]], xs[xperm[1]], [xs[p] for p in xperm[2:]]
    xp, spp = _padded(interp, x, b, c, sp, pad)
    kernel = [ws[lk.index(str(i))] for i in range(ns)]
    o = ws[lk.index("o")]
    osz = [(s - (k - 1) * d - 1) // st + 1 for s, k, d, st in zip(spp, kernel, rdil, strides)]
    ks, nos = math.prod(kernel), math.prod(osz)
    patches = _patches(interp, xp, b, c, spp, kernel, rdil, strides, osz)
    wperm = [lk.index("i"), *[lk.index(str(i)) for i in range(ns)], lk.index("o")]
    w = interp._permuted(interp.get(op.lhs[1]), ws, wperm)  # (c * ks, o)
    dt = tiles.nki_dtype(tiles.result_dtype(op.result))
    res = common.scratch(interp, (o, b, *osz), dt)
    common.matmul(w, patches, res, c * ks, o, b * nos)
    # (f, b, spatial...) -> the output layout
    src_pos = {"f": 0, "b": 1, **{str(i): 2 + i for i in range(ns)}}
    out = interp._permuted(res, res.shape, [src_pos[d] for d in lout])
    interp.values[op.result] = Hbm(out.tensor, hlo.shape_of(op.result), out.dtype)


def _padded(interp: SegmentInterpreter, x: Hbm, b: int, c: int, sp: list[int],
            pad: list[tuple[int, int]]) -> tuple[Hbm, list[int]]:  # fmt: skip
    if all(lo == hi == 0 for lo, hi in pad):
        return x, sp
    spp = [s + lo + hi for s, (lo, hi) in zip(sp, pad)]
    xp = common.scratch(interp, (b, c, *spp), x.dtype)

    def zero(r0: int, nr: int, c0: int, nc: int) -> Any:
        t = nl.ndarray((nr, nc), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        return t

    interp._map_tiles(xp, zero)
    pst = tiles.strides(xp.shape)
    shape = (b, c, *sp)
    dst = xp.tensor.ap([[s, n] for s, n in zip(pst, shape)],
                       offset=sum(lo * s for (lo, _), s in zip(pad, pst[2:])))  # fmt: skip
    nisa.dma_copy(dst=dst, src=x.pattern([[s, n] for s, n in zip(tiles.strides(shape), shape)]))
    return xp, spp


def _patches(interp: SegmentInterpreter, xp: Hbm, b: int, c: int, spp: list[int], kernel: list[int],
             rdil: tuple[int, ...], strides: tuple[int, ...], osz: list[int]) -> Hbm:  # fmt: skip
    """P[(c, kpos), (b, opos)], one DMA per kernel position."""
    ks, nos = math.prod(kernel), math.prod(osz)
    p = common.scratch(interp, (c * ks, b * nos), xp.dtype)
    xst = tiles.strides((b, c, *spp))
    ost = tiles.strides(osz)
    for kpos, kidx in enumerate(itertools.product(*(range(k) for k in kernel))):
        dst = p.tensor.ap([[ks * b * nos, c], [nos, b], *[[s, n] for s, n in zip(ost, osz)]], offset=kpos * b * nos)
        src = xp.tensor.ap([[xst[1], c], [xst[0], b], *[[s * st, n] for s, st, n in zip(xst[2:], strides, osz)]],
                           offset=sum(i * d * s for i, d, s in zip(kidx, rdil, xst[2:])))  # fmt: skip
        nisa.dma_copy(dst=dst, src=src)
    return p
