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
from nkic.hlo.matmul import blocked_matmul
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
    """``out[m, n] = lhs_t[k, m]^T @ rhs[k, n]`` (row-major 2-D views), blocked (``nkic.hlo.matmul``)."""
    blocked_matmul(lhs_t, rhs, out, 1, k, m, n)
