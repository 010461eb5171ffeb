"""``stablehlo.scatter`` with an add (``.at[].add``, ``segment_sum``) or overwrite (``.at[].set``) body.

StableHLO: each update window is combined into the operand at the window its index vector selects; an index whose
window does not fit inside the operand is skipped (no clamping, unlike gather). nkic views the operand as *rows*:
its longest trailing block of dims the update window covers whole (``run`` elements; the window's outer positions
are compile-time row offsets). Per update, the row index ``sum_k indices[u, k] * row_stride[k] + offset`` is
computed on VectorE, set to ``rows`` (past the end) when any index puts the window outside the operand.

* overwrite: the operand is copied, then each 128 updates' rows are one indirect DMA into it
  (``.ap(vector_offset=)`` on the destination, ``oob_mode=skip``: "leaves out the rows whose run-time address falls
  outside their tensor"), so skipped updates write nothing. Of duplicate indices one update wins, as StableHLO
  leaves the order unspecified.
* add: duplicate indices must all be summed, which an indirect DMA cannot (NKI's read-modify-write needs unique
  indices). It is a matmul on TensorE: ``out = x + onehot^T @ updates`` with ``onehot[u, r] = (row[u] == r)``
  built by ``nisa.iota`` and one compare per tile, 128 updates (K) x 128 rows (M) x 512 columns (N) per
  ``nc_matmul``, accumulated in PSUM; a skipped update matches no row.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nkic.dialects import stablehlo as hlo
from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.hlo import common, tiles
from nkic.hlo.tiles import F_TILE, P_TILE, Hbm, SegmentInterpreter


def _kind(op: Any) -> str:
    out = common.probe(op.update_computation, [2, 3])
    kind = None if out is None else {5.0: "add", 3.0: "set"}.get(float(out[0]))
    if kind is None or len(op.inputs) != 3:
        raise common.unsupported(op, "a scatter other than one input with an add or overwrite body")
    return kind


def _geometry(op: Any) -> dict[str, Any]:
    """The row view: run, rows, the update's (batch, window-outer, run) layout and the index's row strides."""
    dn = op.scatter_dimension_numbers
    if dn.dims("input_batching_dims"):
        raise common.unsupported(op, "a scatter with batching dims")
    shape, ushape = hlo.shape_of(op.inputs[0]), hlo.shape_of(op.inputs[2])
    if not shape:
        raise common.unsupported(op, "a scatter into a 0-d operand")
    uwin, inserted = dn.dims("update_window_dims"), dn.dims("inserted_window_dims")
    wdims = [d for d in range(len(shape)) if d not in inserted]  # operand dims of the window, in order
    wsize = {d: ushape[u] for d, u in zip(wdims, uwin)}
    t = len(shape)
    while t > 1 and t - 1 in wsize and wsize[t - 1] == shape[t - 1]:
        t -= 1
    t = max(t, 1)
    st = tiles.strides(shape)
    run = st[t - 1]
    outer = [d for d in wdims if d < t]
    return {"shape": shape, "ushape": ushape, "run": run, "rows": math.prod(shape) // run, "t": t,
            "outer": outer, "wsize": wsize, "rstride": [s // run for s in st], "uwin": uwin,
            "ubatch": [i for i in range(len(ushape)) if i not in uwin], "map": dn.dims("scatter_dims_to_operand_dims"),
            "vdim": dn.index_vector_dim.data}  # fmt: skip


@common.lowering("scatter")
def scatter(interp: SegmentInterpreter, op: Any) -> None:
    kind = _kind(op)
    g = _geometry(op)
    nu = math.prod(g["ushape"][i] for i in g["ubatch"])
    nouter = math.prod(g["wsize"][d] for d in g["outer"])
    # updates as (batch..., outer window..., run): the window dims are already in operand order
    upd = interp._permuted(interp.get(op.inputs[2]), g["ushape"], [*g["ubatch"], *g["uwin"]])
    rows = _row_indices(interp, op, g, nu, nouter)  # (nu, nouter) int32
    x = interp.hbm(interp.get(op.inputs[0]))
    out = interp.alloc(op.outs[0])
    if kind == "set":
        common.copy_all(out, x)
        _overwrite(out, upd, rows, g, nu, nouter)
    else:
        _add(out, x, upd, rows, g, nu, nouter)
    interp.values[op.outs[0]] = out


def _row_indices(interp: SegmentInterpreter, op: Any, g: dict[str, Any], nu: int, nouter: int) -> Hbm:
    """row[u, o] = sum_k idx[u, k] * row_stride + outer offset o, or ``rows`` when u's window leaves the operand."""
    ishape, vdim, smap = hlo.shape_of(op.inputs[1]), g["vdim"], g["map"]
    k = len(smap)
    perm = [i for i in range(len(ishape)) if i != vdim] + ([vdim] if vdim < len(ishape) else [])
    ind = interp._permuted(interp.get(op.inputs[1]), ishape, perm)
    sizes = [g["wsize"][d] for d in g["outer"]]
    opos = np.indices(sizes).reshape(len(sizes), -1) if sizes else np.zeros((0, 1), np.int64)
    oconst = sum((opos[j] * g["rstride"][d] for j, d in enumerate(g["outer"])), np.zeros(opos.shape[1], np.int64))
    cst = interp.hbm(np.broadcast_to(oconst.astype(np.int32), (nu, nouter)).copy())
    out = common.scratch(interp, (nu, nouter), "int32")
    past = g["rows"]
    for r0 in range(0, nu, P_TILE):
        nr = min(P_TILE, nu - r0)
        t = nl.load(ind.tensor.ap([[k, nr], [1, k]], offset=r0 * k))
        base, ok = None, None
        for j, d in enumerate(smap):
            hi = g["shape"][d] - g["wsize"].get(d, 1)
            i = t[:, j : j + 1]
            good = nl.multiply(nl.greater_equal(i, 0, dtype="int32"), nl.less_equal(i, hi, dtype="int32"),
                               dtype="int32")  # fmt: skip
            term = nl.multiply(i, g["rstride"][d], dtype="int32")
            base = term if base is None else nl.add(base, term, dtype="int32")
            ok = good if ok is None else nl.multiply(ok, good, dtype="int32")
        if base is None:
            base = nl.ndarray((nr, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.memset(dst=base, value=0)
        row = nl.add(nl.load(cst.tile(r0, nr, 0, nouter)), base, dtype="int32")
        if ok is not None:  # row = (row - past) * ok + past: past the end when the window does not fit
            row = nl.add(nl.multiply(nl.subtract(row, past, dtype="int32"), ok, dtype="int32"), past, dtype="int32")
        nl.store(out.tile(r0, nr, 0, nouter), row)
    return out


def _overwrite(out: Hbm, upd: Hbm, rows: Hbm, g: dict[str, Any], nu: int, nouter: int) -> None:
    run, t = g["run"], g["t"]
    for o in range(nouter):
        for u0 in range(0, nu, P_TILE):
            nr = min(P_TILE, nu - u0)
            ix = nl.load(rows.tensor.ap([[nouter, nr], [1, 1]], offset=u0 * nouter + o))
            dst = out.tensor.ap([[run, nr], [1, run]], offset=0, vector_offset=ix, indirect_dim=t - 1)
            src = upd.tensor.ap([[nouter * run, nr], [1, run]], offset=(u0 * nouter + o) * run)
            nisa.dma_copy(dst=dst, src=src, oob_mode=nisa.oob_mode.skip)


def _add(out: Hbm, x: Hbm, upd: Hbm, rows: Hbm, g: dict[str, Any], nu: int, nouter: int) -> None:
    run, nrows = g["run"], g["rows"]
    mm = "float32" if upd.dtype not in ("bfloat16", "float16", "float32") else upd.dtype
    for n0 in range(0, nrows, P_TILE):
        nn = min(P_TILE, nrows - n0)
        for c0 in range(0, run, F_TILE):
            nc = min(F_TILE, run - c0)
            acc = nl.ndarray((nn, nc), dtype=nl.float32, buffer=nl.psum)
            for o in range(nouter):
                for u0 in range(0, nu, P_TILE):
                    nr = min(P_TILE, nu - u0)
                    nisa.nc_matmul(acc, _onehot(rows, u0, nr, o, nouter, n0, nn, mm),
                                   _moving(upd, u0, nr, o, nouter, run, c0, nc, mm))  # fmt: skip
            base = nl.load(x.tensor.ap([[run, nn], [1, nc]], offset=n0 * run + c0))
            nl.store(out.tensor.ap([[run, nn], [1, nc]], offset=n0 * run + c0),
                     nl.add(base, acc, dtype=out.dtype))  # fmt: skip


def _onehot(rows: Hbm, u0: int, nr: int, o: int, nouter: int, n0: int, nn: int, dtype: str) -> Any:
    """onehot[u, r] = (row[u0 + u, o] == n0 + r): the stationary [K = updates, M = rows] operand."""
    ix = nl.load(rows.tensor.ap([[nouter, nr], [1, 1]], offset=u0 * nouter + o))
    ramp = nl.ndarray((nr, nn), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=ramp, pattern=[[1, nn]], offset=n0)
    return nl.equal(ramp, ix, dtype=dtype)


def _moving(upd: Hbm, u0: int, nr: int, o: int, nouter: int, run: int, c0: int, nc: int, dtype: str) -> Any:
    t = nl.load(upd.tensor.ap([[nouter * run, nr], [1, nc]], offset=(u0 * nouter + o) * run + c0))
    return t if t.dtype == dtype else nl.copy(t, dtype=dtype)
