"""Data movement: ``stablehlo.reverse`` and ``stablehlo.dynamic_update_slice``.

``reverse`` is one DMA whose source pattern walks each reversed dim backwards (a negative step from the dim's last
element): a DMA access pattern is a list of [step, num] pairs over the tensor's storage, and the step is signed.

``dynamic_update_slice`` copies the operand into the result and the update over it at start indices clamped into
``[0, dim - update dim]`` (StableHLO: "start_indices are clamped"). A compile-time start is a static offset; run-time
starts are combined on VectorE into one flat element offset, read by the DMA as its ``scalar_offset``.
"""

from __future__ import annotations

import math

import numpy as np

from nkic.dialects import stablehlo as hlo
from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.hlo import common, tiles
from nkic.hlo.tiles import SegmentInterpreter


@common.lowering("reverse")
def reverse(interp: SegmentInterpreter, op: hlo.ReverseOp) -> None:
    x = interp.get(op.operand[0])
    rdims = hlo.int_list(op.dimensions)
    shape = hlo.shape_of(op.operand[0])
    if isinstance(x, np.ndarray):
        interp.values[op.result] = np.ascontiguousarray(np.flip(x, axis=rdims))
        return
    st = tiles.strides(shape)
    out = interp.alloc(op.result)
    if not math.prod(shape):
        interp.values[op.result] = out
        return
    pairs = [[-s if d in rdims else s, n] for d, (s, n) in enumerate(zip(st, shape))]
    start = sum((n - 1) * s for d, (s, n) in enumerate(zip(st, shape)) if d in rdims)
    dims = tiles.dims(shape)
    nisa.dma_copy(dst=out.pattern([[s, n] for s, n in zip(tiles.strides(dims), dims)]),
                  src=x.tensor.ap(pairs or [[1, 1]], offset=start))  # fmt: skip
    interp.values[op.result] = out


@common.lowering("dynamic_update_slice")
def dynamic_update_slice(interp: SegmentInterpreter, op: hlo.DynamicUpdateSliceOp) -> None:
    src_v, upd_v, *start_vs = op.operand
    shape, ushape = hlo.shape_of(src_v), hlo.shape_of(upd_v)
    st = tiles.strides(shape)
    out = interp.alloc(op.result)
    common.copy_all(out, interp.hbm(interp.get(src_v)))
    if math.prod(ushape):
        starts = [interp.get(v) for v in start_vs]
        fixed = sum(int(np.clip(int(s.reshape(-1)[0]), 0, n - u)) * k
                    for s, n, u, k in zip(starts, shape, ushape, st) if isinstance(s, np.ndarray))  # fmt: skip
        runtime = [d for d, s in enumerate(starts) if not isinstance(s, np.ndarray)]
        pattern = [[k, u] for k, u in zip(st, ushape)] or [[1, 1]]
        if runtime:
            off = _flat_offset(interp, [(interp.hbm(starts[d]), shape[d] - ushape[d], st[d]) for d in runtime])
            last = len(tiles.dims(shape)) - 1  # the stride-1 dim: the offset counts elements
            dst = out.tensor.ap(pattern, offset=fixed, scalar_offset=off, indirect_dim=last)
        else:
            dst = out.tensor.ap(pattern, offset=fixed)
        ud = tiles.dims(ushape)
        nisa.dma_copy(dst=dst, src=interp.hbm(interp.get(upd_v)).pattern([[s, n] for s, n in
                                                                           zip(tiles.strides(ud), ud)]))  # fmt: skip
    interp.values[op.result] = out


def _flat_offset(interp: SegmentInterpreter, terms: list[tuple[tiles.Hbm, int, int]]) -> object:
    """sum clamp(start, 0, hi) * stride over the run-time starts, as a [1, 1] int32 SBUF tile."""
    acc = None
    for start, hi, stride in terms:
        s = nl.load(start.tensor.ap([[1, 1], [1, 1]], offset=0))
        s = nl.minimum(nl.maximum(s, 0, dtype="int32"), hi, dtype="int32")
        s = nl.multiply(s, stride, dtype="int32") if stride != 1 else s
        acc = s if acc is None else nl.add(acc, s, dtype="int32")
    return acc
