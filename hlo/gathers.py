"""The general ``stablehlo.gather`` (``take_along_axis``, batched and multi-index gathers): every form the row
gather (``tiles.op_gather``) does not cover.

StableHLO's gather, per result element: its *batch* position b (the index tensor's dims but ``index_vector_dim``)
picks start indices ``start[start_index_map[k]] = clamp(indices[b, k], 0, operand_dim - slice_size)`` (StableHLO
clamps start indices), an operand batching dim takes b's coordinate on its paired indices dim, and the *offset*
position o (the result's ``offset_dims``) walks the slice. So its flat operand index is
``base[b] + const[b, o]``, with ``base`` computed at run time from the indices and ``const`` (the offsets and the
batching coordinates) at compile time. nkic computes ``base`` on VectorE, expands it over the slice by a stride-0
DMA, adds the constant part, and gathers ``run`` contiguous elements per index with indirect DMAs, 128 indices per
DMA (``.ap(vector_offset=)``: "row i starts at index[i] times that stride"). The gathered data, laid out
(batch..., offset...), is permuted into the result's dim order when ``offset_dims`` are not trailing.
"""

from __future__ import annotations

import math

import numpy as np

from nkic.dialects import stablehlo as hlo
from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.hlo import common, tiles
from nkic.hlo.tiles import P_TILE, Hbm, SegmentInterpreter


def _layout(op: hlo.GatherOp) -> dict[str, object]:
    dn = op.dimension_numbers
    src, idx = hlo.shape_of(op.operand[0]), hlo.shape_of(op.operand[1])
    vdim = dn.index_vector_dim.data
    sizes = hlo.int_list(op.slice_sizes)
    collapsed, obatch = dn.dims("collapsed_slice_dims"), dn.dims("operand_batching_dims")
    kept = [d for d in range(len(src)) if d not in (*collapsed, *obatch)]  # operand dims of the offset dims
    bdims = [i for i in range(len(idx)) if i != vdim]
    return {"src": src, "idx": idx, "vdim": vdim, "sizes": sizes, "kept": kept, "bdims": bdims,
            "map": dn.dims("start_index_map"), "obatch": obatch, "ibatch": dn.dims("start_indices_batching_dims"),
            "offset_dims": dn.dims("offset_dims")}  # fmt: skip


@common.lowering("gather")
def general_gather(interp: SegmentInterpreter, op: hlo.GatherOp) -> None:
    lay = _layout(op)
    src, idx, sizes, kept = lay["src"], lay["idx"], lay["sizes"], lay["kept"]
    assert isinstance(src, tuple) and isinstance(idx, tuple) and isinstance(sizes, tuple) and isinstance(kept, list)
    st = tiles.strides(src)
    bshape = tuple(idx[i] for i in lay["bdims"])  # type: ignore[attr-defined]
    oshape = tuple(sizes[d] for d in kept)
    # the innermost offset dim is gathered as a contiguous run when it is the operand's last dim
    contiguous = bool(kept) and kept[-1] == len(src) - 1
    run, outer = (oshape[-1], oshape[:-1]) if contiguous else (1, oshape)
    nb, no = math.prod(bshape), math.prod(outer)
    base = _run_time_base(interp, op, lay, st, nb)
    const = _compile_time_part(lay, st, bshape, outer, kept)
    flat = common.scratch(interp, (nb, no), "int32")
    nisa.dma_copy(dst=flat.pattern([[no, nb], [1, no]]), src=base.pattern([[1, nb], [0, no]]))
    cst = interp.hbm(const.astype(np.int32))
    interp._map_tiles(flat, lambda r0, nr, c0, nc: nl.add(nl.load(flat.tile(r0, nr, c0, nc)),
                                                          nl.load(cst.tile(r0, nr, c0, nc)), dtype="int32"))  # fmt: skip
    table = interp.hbm(interp.get(op.operand[0]))
    gathered = _gather_runs(interp, table, flat, nb * no, run, tiles.nki_dtype(tiles.result_dtype(op.result)))
    _to_result(interp, op, gathered, bshape, oshape, lay["offset_dims"])  # type: ignore[arg-type]


def _run_time_base(interp: SegmentInterpreter, op: hlo.GatherOp, lay: dict, st: list[int], nb: int) -> Hbm:
    """base[b] = sum_k clamp(indices[b, k], 0, dim - size) * stride (int32, shape (nb,))."""
    idx, vdim, smap = lay["idx"], lay["vdim"], lay["map"]
    k = len(smap)
    perm = [*lay["bdims"], *([vdim] if vdim < len(idx) else [])]
    ind = interp._permuted(interp.get(op.operand[1]), idx, perm)  # (batch..., k)
    base = common.scratch(interp, (nb,), "int32")
    for r0 in range(0, nb, P_TILE):
        nr = min(P_TILE, nb - r0)
        t = nl.load(ind.tensor.ap([[k, nr], [1, k]], offset=r0 * k))
        acc = None
        for j, d in enumerate(smap):
            hi = lay["src"][d] - lay["sizes"][d]
            c = nl.minimum(nl.maximum(t[:, j : j + 1], 0, dtype="int32"), hi, dtype="int32")
            term = nl.multiply(c, st[d], dtype="int32")
            acc = term if acc is None else nl.add(acc, term, dtype="int32")
        if acc is None:
            acc = nl.ndarray((nr, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.memset(dst=acc, value=0)
        nl.store(base.tensor.ap([[1, nr], [1, 1]], offset=r0), acc)
    return base


def _compile_time_part(lay: dict, st: list[int], bshape: tuple[int, ...], outer: tuple[int, ...],
                       kept: list[int]) -> np.ndarray:  # fmt: skip
    """const[b, o]: the offset position's and the batching coordinates' share of the flat index."""
    bdims = list(lay["bdims"])
    bpos = np.indices(bshape).reshape(len(bshape), -1) if bshape else np.zeros((0, 1), np.int64)
    bconst = np.zeros(bpos.shape[1], np.int64)
    for od, idim in zip(lay["obatch"], lay["ibatch"]):
        bconst += bpos[bdims.index(idim)] * st[od]
    opos = np.indices(outer).reshape(len(outer), -1) if outer else np.zeros((0, 1), np.int64)
    oconst = np.zeros(opos.shape[1], np.int64)
    for j in range(len(outer)):
        oconst += opos[j] * st[kept[j]]
    return bconst[:, None] + oconst[None, :]


def _gather_runs(interp: SegmentInterpreter, table: Hbm, flat: Hbm, n: int, run: int, dtype: str) -> Hbm:
    """out[i, :run] = table_flat[flat[i] : flat[i] + run], 128 indices per indirect DMA."""
    out = common.scratch(interp, (n, run), dtype)
    last = len(table.tensor.shape) - 1  # the storage's stride-1 dim: an index counts elements
    for r0 in range(0, n, P_TILE):
        nr = min(P_TILE, n - r0)
        ix = nl.load(flat.tensor.ap([[1, nr], [1, 1]], offset=r0))
        src = table.tensor.ap([[run, nr], [1, run]], offset=0, vector_offset=ix, indirect_dim=last)
        nisa.dma_copy(dst=out.tensor.ap([[run, nr], [1, run]], offset=r0 * run), src=src)
    return out


def _to_result(interp: SegmentInterpreter, op: hlo.GatherOp, data: Hbm, bshape: tuple[int, ...],
               oshape: tuple[int, ...], offset_dims: tuple[int, ...]) -> None:  # fmt: skip
    """The gathered (batch..., offset...) data in the result's dim order."""
    rank = len(bshape) + len(oshape)
    order = [d for d in range(rank) if d not in offset_dims]  # result dims of the batch dims, in order
    src_dim = {r: i for i, r in enumerate(order)} | {r: len(bshape) + j for j, r in enumerate(offset_dims)}
    perm = [src_dim[r] for r in range(rank)]
    h = Hbm(data.tensor, (*bshape, *oshape), data.dtype)
    out = interp._permuted(h, h.shape, perm)
    interp.values[op.result] = Hbm(out.tensor, hlo.shape_of(op.result), out.dtype)
