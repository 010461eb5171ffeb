"""Element-wise chains fused into one pass over SBUF.

Op by op, every element-wise op loads its operands from HBM and stores its result: a tanh-GELU of [512, 4096] bf16
is ten passes, 0.50 ms simulated, DMA-bound (each pass moves its tile in and out at the DMA cost model's bandwidth).
Fused, a *chain* — consecutive element-wise ops (``stablehlo`` element-wise math, ``convert``, ``compare``,
``select`` on a tensor predicate) of one result shape, each reading the chain's earlier results, splat constants (immediates) or values already computed —
runs tile by tile (128 x 512, the interpreter's tiling): its outside operands loaded once per tile, every op applied
on SBUF with its own result dtype (the same roundings as unfused), and only the results read after the chain (or
returned) stored. Its other results are never materialised; they are marked ``Fused`` so that a later reader would
be a loud error, not a wrong answer. Each instruction of a chain is at its own op's location (an input's load at
the first op reading it, a result's store at the op producing it), so the profile names every fused op. A
``reduce`` along the last dim of a chain result is computed from the chain's tiles as they pass (a softmax's row
max, a norm's mean of squares), so that result is not read back from HBM (nor stored, when nothing else reads it);
when a whole row fits in one tile the chain goes on past the reduce with the per-row ops computed from it
([rows, 1] columns) and the full-width ops reading them: a softmax is one pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue

from nkic.dialects import stablehlo as hlo
from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.hlo import common, tiles, views
from nkic.hlo.locations import located
from nkic.hlo.tiles import SegmentInterpreter


class Fused:
    """The value of a chain's intermediate result that nothing outside the chain reads: never stored."""

    def __repr__(self) -> str:
        return "Fused()"


@dataclass(frozen=True)
class ColumnBroadcast:
    """A broadcast that only fused chains read: never stored. A chain's tile loads it from ``src`` directly
    (``strides``: the result's dims' strides into it, 0 for broadcast dims): a broadcast along the last dim as the
    [rows, 1] column, which the engines broadcast across the free dim (NKI's free-dim broadcast of a size-1 dim); a
    broadcast over leading dims (a bias or a norm's gain) as [rows, cols] with a step-0 row pair, contiguous runs."""

    src: tiles.Hbm
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    def tile(self, r0: int, nr: int, c0: int, nc: int) -> Any:
        """Rows [r0, r0 + nr) x cols [c0, c0 + nc) of the (rows, last dim) view (one column when the last dim is
        broadcast): one DMA per run of rows inside one block of the second-to-last dim (a run's offsets are one
        [stride, count] pair)."""
        lead = self.shape[:-1]
        block = lead[-1] if lead else 1
        step = self.strides[-2] if lead else 0
        last = self.strides[-1]
        width, inner = (1, [1, 1]) if last == 0 else (nc, [last, nc])
        runs, r = [], r0
        while r < r0 + nr:
            n = min(block - r % block, r0 + nr - r)
            runs.append((r, n, self._offset(r) + c0 * last))
            r += n
        if len(runs) == 1:
            return nl.load(self.src.tensor.ap([[step, nr], inner], offset=runs[0][2]))
        t = nl.ndarray((nr, width), dtype=self.src.dtype, buffer=nl.sbuf)
        for r, n, off in runs:
            nisa.dma_copy(dst=t[r - r0 : r - r0 + n, 0:width], src=self.src.tensor.ap([[step, n], inner], offset=off))
        return t

    def _offset(self, row: int) -> int:
        off = 0
        for n, s in zip(reversed(self.shape[:-1]), reversed(self.strides[:-1])):
            off += (row % n) * s
            row //= n
        return off


def all_uses_fuse(interp: SegmentInterpreter, value: SSAValue) -> bool:
    """Whether every reader of ``value`` is an element-wise op of its shape (so a fused chain reads it)."""
    shape = hlo.shape_of(value)
    uses = list(value.uses)
    return bool(uses) and value not in interp.out_names and all(
        _fusible(interp, u.operation) and hlo.shape_of(u.operation.results[0]) == shape for u in uses)


def _fusible(interp: SegmentInterpreter, op: Operation) -> bool:
    kind = op.name.removeprefix("stablehlo.")
    if len(op.results) != 1 or op.regions:
        return False
    if kind in hlo.ELEMENTWISE:
        is_bool = tiles.result_dtype(op.results[0]) == np.bool_
        kind = tiles._LOGICAL[kind][0 if is_bool else 1] if kind in tiles._LOGICAL else kind
        return kind in tiles._TILE_UNARY or kind in tiles._TILE_BINARY or kind == "logical_not"
    if kind == "select":  # a tensor predicate (a constant all-true/all-false one picks a side instead: op_select)
        pred = interp.values.get(op.operands[0])
        constant = isinstance(pred, np.ndarray) and pred.size and (pred.all() or not pred.any())
        return hlo.shape_of(op.operands[0]) == hlo.shape_of(op.results[0]) and not constant
    return kind in ("convert", "compare")


def _chain(interp: SegmentInterpreter, head: Operation) -> list[Operation]:
    """``head`` and the ops after it that one pass over its tiles can compute: element-wise ops of its shape and,
    when a whole row fits in one tile, last-dim reductions and what is computed from them per row (``_row_op``)."""
    shape = hlo.shape_of(head.results[0])
    chain, produced, rows = [head], set(head.results), set[SSAValue]()
    by_rows = bool(shape) and shape[-1] <= tiles.F_TILE  # one tile holds each row whole: a softmax in one pass
    cur = head.next_op
    while cur is not None and not cur.name.endswith("return"):
        if cur.results and all(r in interp.values for r in cur.results):
            cur = cur.next_op  # folded at compile time
            continue
        if _fusible(interp, cur) and hlo.shape_of(cur.results[0]) == shape and all(
                v in produced and v not in rows or _ready(interp, v, shape) for v in cur.operands):  # fmt: skip
            produced.add(cur.results[0])
        elif by_rows and _row_op(interp, cur, shape, produced, rows):
            produced.add(cur.results[0])
        else:
            break
        chain.append(cur)
        cur = cur.next_op
    return chain


def _row_op(interp: SegmentInterpreter, op: Operation, shape: tuple[int, ...], produced: set[SSAValue],
            rows: set[SSAValue]) -> bool:  # fmt: skip
    """Whether ``op`` is computed per row of the chain's tiles ([rows, 1] columns, added to ``rows``): a last-dim
    ``reduce`` of a chain value, an element-wise op or a reshape on such columns, or a broadcast of one along the
    last dim (back to the chain's shape: the engines broadcast a [rows, 1] operand across the free dim)."""
    row_shapes = (shape[:-1], (*shape[:-1], 1))
    out = hlo.shape_of(op.results[0]) if op.results else None
    columns = [v in rows or tiles._splat(interp.values.get(v)) is not None for v in op.operands]  # type: ignore[arg-type]
    if isinstance(op, hlo.ReduceOp):
        ok = _reduces_last(interp, op) and op.inputs[0] in produced and op.inputs[0] not in rows
    elif isinstance(op, (hlo.BroadcastInDimOp, hlo.ReshapeOp)):
        leading = not isinstance(op, hlo.BroadcastInDimOp) or list(hlo.int_list(op.broadcast_dimensions)) == list(
            range(len(hlo.shape_of(op.operand[0]))))  # fmt: skip
        ok = op.operand[0] in rows and leading and (out in row_shapes or out == shape)
        if ok and out == shape:
            rows.discard(op.results[0])
            return True  # a column standing for the full tile
    else:
        ok = _fusible(interp, op) and out in row_shapes and all(columns)
    if ok:
        rows.add(op.results[0])
    return ok


def _reduces_last(interp: SegmentInterpreter, red: hlo.ReduceOp) -> bool:
    """A single-input add/max/min ``reduce`` along the last dim only, with a constant init value."""
    rank = len(hlo.shape_of(red.inputs[0])) if red.inputs else 0
    return len(red.inputs) == 2 and rank >= 1 and tuple(hlo.int_list(red.dimensions)) == (rank - 1,) \
        and red.combiner() in tiles._REDUCE and isinstance(interp.values.get(red.inputs[1]), np.ndarray)  # fmt: skip


def _ready(interp: SegmentInterpreter, v: SSAValue, shape: tuple[int, ...]) -> bool:
    x = interp.values.get(v)
    if isinstance(x, ColumnBroadcast):
        return x.shape == shape
    if isinstance(x, np.ndarray):
        return tiles._splat(x) is not None or x.shape == shape
    return isinstance(x, tiles.Hbm) and x.shape == shape


@common.lowering("fuse")
def fuse(interp: SegmentInterpreter, head: Operation) -> bool:
    """Lower the chain starting at ``head`` in one pass; False when it is ``head`` alone (the op-by-op path)."""
    if not _fusible(interp, head) or not all(_ready(interp, v, hlo.shape_of(head.results[0])) for v in head.operands):
        return False
    chain = _chain(interp, head)
    lazy = any(isinstance(interp.values.get(v), ColumnBroadcast) for op in chain for v in op.operands)
    sums = [_RowReduce(interp, op) for op in _row_reductions(interp, chain)]
    if len(chain) < 2 and not lazy and not sums:
        return False
    members = set(chain) | {s.op for s in sums}
    shape = hlo.shape_of(head.results[0])
    columns = {op.results[0] for op in chain if hlo.shape_of(op.results[0]) != shape}  # per-row [rows, 1] values
    kept = [op.results[0] for op in chain if _read_outside(interp, op.results[0], members)]
    flipped = {r for r in kept if r not in columns and views.wants_transposed(interp, r)}  # as the matmuls want
    flips = {r: _TransposedStore(interp, r) for r in flipped}
    outs = {r: flips[r].out if r in flipped else interp.alloc(r) for r in kept}
    inputs = {v for op in chain for v in op.operands if v not in {o.results[0] for o in chain}}
    readers = {v: _reader(interp, v) for v in inputs}
    first_reader = {v: next(op for op in chain if v in op.operands) for v in inputs}
    width = _width(chain)
    c = shape[-1] if shape else 1
    rows = math.prod(shape) // c if c else 0
    for r0 in range(0, rows, tiles.P_TILE):
        nr = min(tiles.P_TILE, rows - r0)
        for c0 in range(0, c, width):
            nc = min(width, c - c0)
            env: dict[SSAValue, Any] = {}
            for v, read in readers.items():
                with located(first_reader[v]):  # each instruction at the op it is for, not the chain's head
                    env[v] = read(r0, nr, c0, nc)
            for op in chain:
                with located(op):
                    env[op.results[0]] = _tile_op(interp, op, env, nr, nc, op.results[0] in columns)
            for r, out in outs.items():
                with located(r.owner):  # type: ignore[arg-type]
                    store = flips[r].put if r in flipped else partial(_store_rows if r in columns else _store, out)
                    store(env[r], r0, nr, c0, nc)
            for red in sums:
                red.add(env[red.op.inputs[0]], nr, nc)
        for red in sums:
            red.finish(r0, nr)
    for op in chain:
        r = op.results[0]
        value = views.transposed(outs[r], shape) if r in flipped else outs.get(r, Fused())
        interp.values[r] = value  # type: ignore[assignment]
    for red in sums:
        interp.values[red.op.outs[0]] = red.out
    return True


def _row_reductions(interp: SegmentInterpreter, chain: list[Operation]) -> list[hlo.ReduceOp]:
    """The last-dim reductions of chain results that are not in the chain (rows wider than one tile): computed
    from the chain's SBUF tiles as they pass, instead of reading the result back from HBM."""
    members = set(chain)
    return [use.operation for op in chain for use in op.results[0].uses
            if isinstance(use.operation, hlo.ReduceOp) and use.operation not in members
            and use.operation.inputs[0] == op.results[0] and _reduces_last(interp, use.operation)]  # type: ignore[misc]  # fmt: skip


class _RowReduce:
    """One fused last-dim reduction: per 128-row tile, the partial results of its column tiles combined in fp32
    (as ``SegmentInterpreter.op_reduce``), then the init value, then one [rows, 1] store."""

    def __init__(self, interp: SegmentInterpreter, op: hlo.ReduceOp):
        self.op = op
        self.reduce_fn, self.combine_fn, identity = tiles._REDUCE[op.combiner()]
        init = float(np.asarray(interp.values[op.inputs[1]]).reshape(-1)[0])
        self.init = None if init == identity else init
        self.out = interp.alloc(op.outs[0])
        self.acc: Any = None

    def add(self, t: Any, nr: int, nc: int) -> None:
        with located(self.op):
            t = nl.full((nr, nc), t, dtype="float32") if isinstance(t, float) else _full(t, (nr, nc))
            part = self.reduce_fn(t, axis=1, keepdims=True, dtype="float32")
            self.acc = part if self.acc is None else self.combine_fn(self.acc, part, dtype="float32")

    def finish(self, r0: int, nr: int) -> None:
        with located(self.op):
            acc = self.acc if self.init is None else self.combine_fn(self.acc, self.init, dtype="float32")
            nl.store(self.out.tensor.ap([[1, nr], [1, 1]], offset=r0), nl.copy(acc, dtype=self.out.dtype))
        self.acc = None


def _tile_op(interp: SegmentInterpreter, op: Operation, env: dict[SSAValue, Any], nr: int, nc: int,
             column: bool) -> Any:  # fmt: skip
    """``op`` on this tile's values: a last-dim reduce of a whole-row tile (fp32, then the init value and the result
    dtype, as ``SegmentInterpreter.op_reduce``), a broadcast or reshape of a [rows, 1] column (the same column),
    else the element-wise op (``_apply``)."""
    if isinstance(op, hlo.ReduceOp):
        reduce_fn, combine_fn, identity = tiles._REDUCE[op.combiner()]
        t = env[op.inputs[0]]  # the whole row: a column or a constant standing for it is broadcast first
        t = nl.full((nr, nc), t, dtype="float32") if isinstance(t, float) else _full(t, (nr, nc))
        acc = reduce_fn(t, axis=1, keepdims=True, dtype="float32")
        init = float(np.asarray(interp.values[op.inputs[1]]).reshape(-1)[0])
        if init != identity:
            acc = combine_fn(acc, init, dtype="float32")
        dt = tiles.nki_dtype(tiles.result_dtype(op.outs[0]))
        return acc if dt == "float32" else nl.copy(acc, dtype=dt)
    if isinstance(op, (hlo.BroadcastInDimOp, hlo.ReshapeOp)):
        return env[op.operand[0]]
    return _apply(op, [env[v] for v in op.operands], (nr, 1 if column else nc))


def _store_rows(out: tiles.Hbm, t: Any, r0: int, nr: int, c0: int, nc: int) -> None:
    """A per-row value ([rows] or [rows, 1]): one [nr, 1] store."""
    t = nl.full((nr, 1), t, dtype=out.dtype) if isinstance(t, float) else t
    nl.store(out.tensor.ap([[1, nr], [1, 1]], offset=r0), t if t.dtype == out.dtype else nl.copy(t, dtype=out.dtype))


TRANSPOSED_BUFFER = 32 * 1024  # SBUF bytes per partition a transposed store gathers its strips in


class _TransposedStore:
    """A chain result stored transposed, as (last dim, the other dims flattened): each 128-column slice of a tile
    transposed on TensorE (PSUM, same dtype) and gathered into an SBUF strip of up to 512 rows, stored once full.
    This replaces the TensorE copy a matmul reading the value would make (``views.copy_view``): one pass over HBM
    less. The strips make the stores' contiguous runs longer than one tile's 128 rows (``dma_efficiency``: c / (c +
    1 KiB), 33% for 128 fp32, 67% for 512), within ``TRANSPOSED_BUFFER`` bytes per partition for all slices."""

    def __init__(self, interp: SegmentInterpreter, r: SSAValue):
        shape = hlo.shape_of(r)
        self.rows, cols = math.prod(shape[:-1]), shape[-1]
        dt = tiles.nki_dtype(tiles.result_dtype(r))
        self.out = common.scratch(interp, (cols, self.rows), dt)
        per_row = -(-cols // tiles.P_TILE) * np.dtype(tiles.result_dtype(r)).itemsize  # bytes per strip column
        fit = TRANSPOSED_BUFFER // per_row // tiles.P_TILE * tiles.P_TILE
        self.block = max(tiles.P_TILE, min(4 * tiles.P_TILE, fit))
        self.strips: dict[int, Any] = {}

    def put(self, t: Any, r0: int, nr: int, c0: int, nc: int) -> None:
        out = self.out
        t = nl.full((nr, nc), t, dtype=out.dtype) if isinstance(t, float) else _full(t, (nr, nc))
        start = r0 - r0 % self.block
        size = min(self.block, self.rows - start)
        for j in range(0, nc, tiles.P_TILE):
            nj = min(tiles.P_TILE, nc - j)
            acc = nl.ndarray((nj, nr), dtype=t.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=acc, data=t[:, j : j + nj])
            strip = self.strips.get(c0 + j)
            if strip is None:
                strip = self.strips[c0 + j] = nl.ndarray((nj, size), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=strip[:, r0 - start : r0 - start + nr], src=acc)
            if r0 + nr == start + size:  # the strip is full: one store of [nj, size]
                nl.store(out.tensor.ap([[self.rows, nj], [1, size]], offset=(c0 + j) * self.rows + start), strip)
                del self.strips[c0 + j]


def _store(out: tiles.Hbm, t: Any, r0: int, nr: int, c0: int, nc: int) -> None:
    if isinstance(t, float):  # a chain result that is a constant: fill the tile
        t = nl.full((nr, nc), t, dtype=out.dtype)
    elif t.shape[-1] != nc:  # computed from columns only: broadcast across the free dim
        t = nl.broadcast_to(t, shape=(nr, nc))
    nl.store(out.tile(r0, nr, c0, nc), t)


RUN_BYTES = 4096  # contiguous bytes per partition a fused tile moves: dma_efficiency 80% (c / (c + 1 KiB))


def _width(chain: list[Operation]) -> int:
    """Columns per fused tile: 4 KiB runs of the widest dtype the chain moves (a [128, 512] bf16 tile moves 1 KiB
    per partition, 50% of the DMA bandwidth in the cost model), never fewer than the interpreter's 512."""
    widest = max(np.dtype(tiles.result_dtype(v)).itemsize if tiles.result_dtype(v) != np.bool_ else 1
                 for op in chain for v in (*op.operands, *op.results))  # fmt: skip
    return max(tiles.F_TILE, RUN_BYTES // max(widest, 1))


def _read_outside(interp: SegmentInterpreter, r: SSAValue, members: set[Operation]) -> bool:
    return r in interp.out_names or any(u.operation not in members for u in r.uses)


def _reader(interp: SegmentInterpreter, v: SSAValue) -> Callable[[int, int, int, int], Any]:
    lazy = interp.values[v]
    if isinstance(lazy, ColumnBroadcast):
        return lazy.tile
    s = tiles._splat(interp.values[v])  # type: ignore[arg-type]
    if s is not None:
        return lambda *_: s
    h = interp.hbm(interp.values[v])  # type: ignore[arg-type]
    return lambda r0, nr, c0, nc: nl.load(h.tile(r0, nr, c0, nc))


def _apply(op: Operation, args: list[Any], shape: tuple[int, int]) -> Any:
    """One op on SBUF tiles (or immediates), as ``SegmentInterpreter`` applies it to each tile unfused."""
    kind = op.name.removeprefix("stablehlo.")
    to = tiles.result_dtype(op.results[0])
    dt = tiles.nki_dtype(to)
    if kind == "select":
        return _select(args, shape, dt)
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


def _select(args: list[Any], shape: tuple[int, int], dt: str) -> Any:
    """``pred ? on_true : on_false`` exactly: on_false written, on_true copied over it where pred holds
    (``tensor_copy_predicated``, as ``SegmentInterpreter.op_select``)."""
    pred, on_true, on_false = (_full(a, shape) for a in args)
    dst = nl.ndarray(shape, dtype=dt, buffer=nl.sbuf)
    if isinstance(on_false, float):
        nisa.memset(dst=dst, value=on_false)
    else:
        nisa.tensor_copy(dst=dst, src=on_false)
    if isinstance(on_true, float):
        on_true = nl.full(shape, on_true, dtype=dt)
    elif on_true.dtype != dt:
        on_true = nl.copy(on_true, dtype=dt)
    nisa.tensor_copy_predicated(dst=dst, src=on_true, predicate=pred)
    return dst


def _full(t: Any, shape: tuple[int, int]) -> Any:
    """A column tile (from a ``ColumnBroadcast``) broadcast to the tile's shape; anything else as it is."""
    if isinstance(t, float) or tuple(t.shape) == shape:
        return t
    return nl.broadcast_to(t, shape=shape)
