"""``stablehlo.reduce_window``: running reductions (``jnp.cumsum``/``cumprod``/``cummax``, ``lax.cumsum``) and
pooling (``lax.reduce_window``: max / min / sum pooling, strides, padding, dilations).

Each result element is the body applied over its window of the padded (and base-dilated) operand, starting from
the init value. The StableHLO spec pads with the init value; XLA (what JAX runs) lets padding positions add nothing
(``reduce_window(x, 1., add, (2,), (1,), ((1, 0),))`` of [1, 2, 3] is [2, 4, 6] on JAX's CPU), and nkic matches
XLA: padding holds the combiner's identity and the init value is combined once. The combiner is probed numerically
(``common.probe``): add, multiply, maximum or minimum.

* A *scan* — one dim whose window spans it with ``size - 1`` low padding, stride and dilations 1, every other dim a
  window of 1 — is a running reduction along the free axis on VectorE: ``nisa.tensor_scalar_cumulative`` ("a running
  op1 over op0(src, imm0) along the free dim"; fp32, the ISA has no 32-bit integer mode), one instruction per row
  tile of up to 128 rows, the scan dim moved last.
* Any other window: the padded operand in HBM, then per window position one strided DMA of the elements it covers
  for every result (its pattern: the result's dims with the operand's strides times the window strides, offset by
  the position times the window dilation) combined into the result tile by tile.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from nkic.dialects import stablehlo as hlo
from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.hlo import common, tiles
from nkic.hlo.tiles import P_TILE, Hbm, SegmentInterpreter

_COMBINERS = {5.0: "add", 6.0: "multiply", 3.0: "maximum", 2.0: "minimum"}  # f(2, 3)
_IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}
MAX_SCAN = 16384  # elements per partition of one running-reduction row (fp32, within a partition's SBUF)


def _combiner(op: Any) -> str:
    out = common.probe(op.body, [2, 3])
    name = None if out is None else _COMBINERS.get(float(out[0]))
    if name is None or len(op.inputs) != 2:
        raise common.unsupported(op, "a reduce_window other than one input with add/multiply/maximum/minimum")
    return name


def _scan_dim(op: Any, shape: tuple[int, ...]) -> int | None:
    window, strides, base, wdil, pad = op.geometry()
    scan = [d for d in range(len(shape)) if window[d] != 1]
    if len(scan) != 1 or any(x != 1 for x in (*strides, *base, *wdil)):
        return None
    (d,) = scan
    if window[d] != shape[d] or tuple(pad[d]) != (shape[d] - 1, 0):
        return None
    if any(tuple(p) != (0, 0) for i, p in enumerate(pad) if i != d):
        return None
    return d


@common.lowering("reduce_window")
def reduce_window(interp: SegmentInterpreter, op: Any) -> None:
    comb = _combiner(op)
    shape = hlo.shape_of(op.inputs[0])
    init = interp.get(op.inputs[1])
    if not isinstance(init, np.ndarray):
        raise common.unsupported(op, "a run-time init value")
    init_value = float(init.reshape(-1)[0])
    d = _scan_dim(op, shape)
    if d is not None and init_value == _IDENTITY[comb] and shape[d] <= MAX_SCAN:
        _scan(interp, op, comb, shape, d)
    else:
        _windows(interp, op, comb, shape, init_value)


def _scan(interp: SegmentInterpreter, op: Any, comb: str, shape: tuple[int, ...], d: int) -> None:
    rank = len(shape)
    perm = [i for i in range(rank) if i != d] + [d]
    x = interp._permuted(interp.get(op.inputs[0]), shape, perm)
    n = shape[d]
    rows = math.prod(shape) // max(n, 1)
    dt = tiles.nki_dtype(tiles.result_dtype(op.outs[0]))
    res = common.scratch(interp, (rows, n), dt)
    for r0 in range(0, rows, P_TILE):
        nr = min(P_TILE, rows - r0)
        src = nl.copy(nl.load(x.tile(r0, nr, 0, n)), dtype="float32")
        acc = nl.ndarray((nr, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=acc, src=src, op0=nl.multiply, imm0=1.0, op1=getattr(nl, comb))
        nl.store(res.tensor.ap([[n, nr], [1, n]], offset=r0 * n), nl.copy(acc, dtype=dt))
    pshape = tuple(shape[p] for p in perm)
    out = interp._permuted(Hbm(res.tensor, pshape, dt), pshape, [perm.index(i) for i in range(rank)])
    interp.values[op.outs[0]] = Hbm(out.tensor, shape, dt)


def _windows(interp: SegmentInterpreter, op: Any, comb: str, shape: tuple[int, ...], init: float) -> None:
    window, strides, base, wdil, pad = op.geometry()
    if any(lo < 0 or hi < 0 for lo, hi in pad):
        raise common.unsupported(op, "negative (cropping) window padding")
    out = interp.alloc(op.outs[0])
    if not math.prod(out.shape):
        interp.values[op.outs[0]] = out
        return
    padded = _padded(interp, op, shape, base, pad, _IDENTITY[comb])
    pst = tiles.strides(padded.shape)
    oshape = tiles.dims(out.shape)
    dst_pairs = [[s, n] for s, n in zip(tiles.strides(oshape), oshape)]
    first = True
    for w in itertools.product(*(range(k) for k in window)):
        src = padded.tensor.ap([[p * s, n] for p, s, n in zip(pst, strides, oshape)],
                               offset=sum(i * dl * p for i, dl, p in zip(w, wdil, pst)))  # fmt: skip
        if first:
            nisa.dma_copy(dst=out.pattern(dst_pairs), src=src)
            first = False
            continue
        tmp = common.scratch(interp, out.shape, out.dtype)
        nisa.dma_copy(dst=tmp.pattern(dst_pairs), src=src)
        fn = getattr(nl, comb)
        interp._map_tiles(out, lambda r0, nr, c0, nc: fn(nl.load(out.tile(r0, nr, c0, nc)),
                                                         nl.load(tmp.tile(r0, nr, c0, nc)), dtype=out.dtype))  # fmt: skip
    if init != _IDENTITY[comb]:
        fn = getattr(nl, comb)
        interp._map_tiles(out, lambda r0, nr, c0, nc: fn(nl.load(out.tile(r0, nr, c0, nc)), init, dtype=out.dtype))
    interp.values[op.outs[0]] = out


def _padded(interp: SegmentInterpreter, op: Any, shape: tuple[int, ...], base: tuple[int, ...],
            pad: list[tuple[int, int]], init: float) -> Hbm:  # fmt: skip
    """The operand base-dilated and padded with the init value (itself when there is neither)."""
    x = interp.hbm(interp.get(op.inputs[0]))
    if all(b == 1 for b in base) and all(tuple(p) == (0, 0) for p in pad):
        return x
    pshape = tuple((n - 1) * b + 1 + lo + hi for n, b, (lo, hi) in zip(shape, base, pad))
    padded = common.scratch(interp, pshape, x.dtype)

    def fill(r0: int, nr: int, c0: int, nc: int) -> Any:
        t = nl.ndarray((nr, nc), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=init)
        return t

    interp._map_tiles(padded, fill)
    pst = tiles.strides(pshape)
    dst = padded.tensor.ap([[s * b, n] for s, b, n in zip(pst, base, shape)],
                           offset=sum(lo * s for (lo, _), s in zip(pad, pst)))  # fmt: skip
    nisa.dma_copy(dst=dst, src=x.pattern([[s, n] for s, n in zip(tiles.strides(shape), shape)]))
    return padded
