"""Element-wise chains fused into one pass over SBUF.

Op by op, every element-wise op loads its operands from HBM and stores its result: a tanh-GELU of [512, 4096] bf16
is ten passes, 0.50 ms simulated, DMA-bound (each pass moves its tile in and out at the DMA cost model's bandwidth).
Fused, a *chain* — consecutive element-wise ops (``stablehlo`` element-wise math, ``convert``, ``compare``) of one
result shape, each reading the chain's earlier results, splat constants (immediates) or values already computed —
runs tile by tile (128 x 512, the interpreter's tiling): its outside operands loaded once per tile, every op applied
on SBUF with its own result dtype (the same roundings as unfused), and only the results read after the chain (or
returned) stored. Its other results are never materialised; they are marked ``Fused`` so that a later reader would
be a loud error, not a wrong answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue

from nkic.dialects import stablehlo as hlo
from nkic.frontend import language as nl
from nkic.hlo import common, tiles
from nkic.hlo.tiles import SegmentInterpreter


class Fused:
    """The value of a chain's intermediate result that nothing outside the chain reads: never stored."""

    def __repr__(self) -> str:
        return "Fused()"


def _fusible(interp: SegmentInterpreter, op: Operation) -> bool:
    kind = op.name.removeprefix("stablehlo.")
    if len(op.results) != 1 or op.regions:
        return False
    if kind in hlo.ELEMENTWISE:
        is_bool = tiles.result_dtype(op.results[0]) == np.bool_
        kind = tiles._LOGICAL[kind][0 if is_bool else 1] if kind in tiles._LOGICAL else kind
        return kind in tiles._TILE_UNARY or kind in tiles._TILE_BINARY or kind == "logical_not"
    return kind in ("convert", "compare")


def _chain(interp: SegmentInterpreter, head: Operation) -> list[Operation]:
    shape = hlo.shape_of(head.results[0])
    chain, produced = [head], set(head.results)
    cur = head.next_op
    while cur is not None and not cur.name.endswith("return"):
        if cur.results and all(r in interp.values for r in cur.results):
            cur = cur.next_op  # folded at compile time
            continue
        if not _fusible(interp, cur) or hlo.shape_of(cur.results[0]) != shape:
            break
        if not all(v in produced or _ready(interp, v, shape) for v in cur.operands):
            break
        chain.append(cur)
        produced.update(cur.results)
        cur = cur.next_op
    return chain


def _ready(interp: SegmentInterpreter, v: SSAValue, shape: tuple[int, ...]) -> bool:
    x = interp.values.get(v)
    if isinstance(x, np.ndarray):
        return tiles._splat(x) is not None or x.shape == shape
    return isinstance(x, tiles.Hbm) and x.shape == shape


@common.lowering("fuse")
def fuse(interp: SegmentInterpreter, head: Operation) -> bool:
    """Lower the chain starting at ``head`` in one pass; False when it is ``head`` alone (the op-by-op path)."""
    if not _fusible(interp, head) or not all(_ready(interp, v, hlo.shape_of(head.results[0])) for v in head.operands):
        return False
    chain = _chain(interp, head)
    if len(chain) < 2:
        return False
    members = set(chain)
    kept = [op.results[0] for op in chain if _read_outside(interp, op.results[0], members)]
    outs = {r: interp.alloc(r) for r in kept}
    inputs = {v for op in chain for v in op.operands if v not in {o.results[0] for o in chain}}
    readers = {v: _reader(interp, v) for v in inputs}
    shape = hlo.shape_of(head.results[0])
    c = shape[-1] if shape else 1
    rows = math.prod(shape) // c if c else 0
    for r0 in range(0, rows, tiles.P_TILE):
        nr = min(tiles.P_TILE, rows - r0)
        for c0 in range(0, c, tiles.F_TILE):
            nc = min(tiles.F_TILE, c - c0)
            env: dict[SSAValue, Any] = {v: read(r0, nr, c0, nc) for v, read in readers.items()}
            for op in chain:
                env[op.results[0]] = _apply(op, [env[v] for v in op.operands])
            for r, out in outs.items():
                t = env[r]
                if isinstance(t, float):  # a chain result that is a constant: fill the tile
                    t = nl.full((nr, nc), t, dtype=out.dtype)
                nl.store(out.tile(r0, nr, c0, nc), t)
    for op in chain:
        r = op.results[0]
        interp.values[r] = outs[r] if r in outs else Fused()  # type: ignore[assignment]
    return True


def _read_outside(interp: SegmentInterpreter, r: SSAValue, members: set[Operation]) -> bool:
    return r in interp.out_names or any(u.operation not in members for u in r.uses)


def _reader(interp: SegmentInterpreter, v: SSAValue) -> Callable[[int, int, int, int], Any]:
    s = tiles._splat(interp.values[v])  # type: ignore[arg-type]
    if s is not None:
        return lambda *_: s
    h = interp.hbm(interp.values[v])  # type: ignore[arg-type]
    return lambda r0, nr, c0, nc: nl.load(h.tile(r0, nr, c0, nc))


def _apply(op: Operation, args: list[Any]) -> Any:
    """One op on SBUF tiles (or immediates), as ``SegmentInterpreter`` applies it to each tile unfused."""
    kind = op.name.removeprefix("stablehlo.")
    to = tiles.result_dtype(op.results[0])
    dt = tiles.nki_dtype(to)
    if kind == "compare":
        fn = getattr(nl, tiles._COMPARE[op.comparison_direction.data])  # type: ignore[attr-defined]
        return fn(*args, dtype="uint8")
    if kind == "convert":
        return _convert(args[0], op, to, dt)
    if kind in tiles._LOGICAL:
        kind = tiles._LOGICAL[kind][0 if to == np.bool_ else 1]
    if len(args) == 1:
        return nl.logical_not(args[0], dtype=dt) if kind == "logical_not" else tiles._TILE_UNARY[kind](args[0], dt)
    return getattr(nl, kind)(*args, dtype=dt)


def _convert(t: Any, op: Operation, to: np.dtype, dt: str) -> Any:
    frm = tiles.result_dtype(op.operands[0])
    if isinstance(t, float):
        return float(np.asarray(t).astype(to))
    if t.dtype == dt and (to == np.bool_) == (frm == np.bool_):
        return t
    if to == np.bool_:
        return nl.not_equal(t, 0.0, dtype="uint8")
    if to.kind in "iu" and frm.kind not in "iub":
        t = nl.trunc(t, dtype="float32")
    return nl.copy(t, dtype=dt)
