"""Shared pieces of the per-family lowerings (``nkic.hlo.families``): the registry, whole-tensor copies, a tile
loop over a 2-D view, and numeric probing of an op's body region."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.ir import Operation, Region

from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.hlo import tiles
from nkic.hlo.tiles import Hbm, SegmentInterpreter

Lowering = Callable[..., Any]
LOWERINGS: dict[str, Lowering] = {}


def lowering(name: str) -> Callable[[Lowering], Lowering]:
    def register(fn: Lowering) -> Lowering:
        LOWERINGS[name] = fn
        return fn

    return register


def scratch(interp: SegmentInterpreter, shape: Sequence[int], dtype: str) -> Hbm:
    """A fresh internal HBM tensor of ``shape``."""
    interp.count += 1
    t = nl.ndarray(tiles.dims(shape), dtype=dtype, buffer=nl.hbm, name=f"t{interp.count}")
    return Hbm(t, tuple(shape), dtype)


def copy_all(dst: Hbm, src: Hbm) -> None:
    """``dst = src`` element for element (same element count), one DMA."""
    n = math.prod(tiles.dims(src.shape))
    nisa.dma_copy(dst=dst.pattern([[1, n]]), src=src.pattern([[1, n]]))


def rows_view(h: Hbm, cols: int) -> tuple[int, int]:
    """``h`` as (rows, cols): rows = elements / cols."""
    return math.prod(tiles.dims(h.shape)) // max(cols, 1), cols


def probe(region: Region, args: Sequence[Any]) -> list[np.ndarray] | None:
    """Evaluate a body region on scalar constants with ``tiles.fold`` (None when an op does not fold): how a
    comparator or a combiner behaves is read from what it computes, not from the ops it is spelled with."""
    block = region.block
    values: dict[Any, np.ndarray] = {a: np.asarray(v, dtype=tiles.result_dtype(a)) for a, v in zip(block.args, args)}
    for op in block.ops:
        if op.name == "stablehlo.return":
            return [values[v] for v in op.operands]
        folded = tiles.fold(op, values)
        if folded is None or len(op.results) != 1:
            return None
        values[op.results[0]] = np.asarray(folded)
    return None


def unsupported(op: Operation, why: str) -> Exception:
    return tiles._unsupported(op, why)


def matmul(lhs_t: Hbm, rhs: Hbm, out: Hbm, k: int, m: int, n: int) -> None:
    """``out[m, n] = lhs_t[k, m]^T @ rhs[k, n]`` (row-major 2-D views): ``nc_matmul`` tiles of K = 128 partitions
    (the stationary operand's contraction on the partitions, as nc_matmul takes it), M = 128, N = 512 (one fp32
    PSUM bank), K accumulated in PSUM; operands in one float dtype (fp32 when they differ)."""
    dt = lhs_t.dtype if lhs_t.dtype == rhs.dtype and lhs_t.dtype in ("float32", "bfloat16", "float16") else "float32"
    for m0 in range(0, m, tiles.P_TILE):
        nm = min(tiles.P_TILE, m - m0)
        for n0 in range(0, n, tiles.F_TILE):
            nn = min(tiles.F_TILE, n - n0)
            acc = nl.ndarray((nm, nn), dtype=nl.float32, buffer=nl.psum)
            for k0 in range(0, k, tiles.K_TILE):
                nk = min(tiles.K_TILE, k - k0)
                st = nl.load(lhs_t.tensor.ap([[m, nk], [1, nm]], offset=k0 * m + m0))
                mv = nl.load(rhs.tensor.ap([[n, nk], [1, nn]], offset=k0 * n + n0))
                st = st if st.dtype == dt else nl.copy(st, dtype=dt)
                mv = mv if mv.dtype == dt else nl.copy(mv, dtype=dt)
                nisa.nc_matmul(acc, st, mv)
            nl.store(out.tensor.ap([[n, nm], [1, nn]], offset=m0 * n + n0), nl.copy(acc, dtype=out.dtype))
