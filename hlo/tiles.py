"""Op-by-op lowering of StableHLO to penguin tiles, by driving nkic's own NKI frontend.

A run of StableHLO ops (a *segment*, see ``nkic.hlo.lower``) becomes one traced NKI kernel: ``SegmentInterpreter``
runs as the kernel body under the tracer and calls the same ``nl.*``/``nisa.*`` functions a hand-written kernel
would, so the penguin it produces is exactly what the frontend emits and verifies (tile shapes, memories, engines),
and the rest of the pipeline is unchanged. (Emitting penguin ops directly would re-implement the tracer's
allocation, naming and access-pattern bookkeeping.)

Every value is either a compile-time constant (``np.ndarray``: ``stablehlo.constant``, ``iota`` and any op whose
operands are all constants, folded with numpy at the result's dtype — a constant is embedded as NEFF data with
``nl.shared_constant`` only when a kernel reads it as a tensor; a splat is an immediate) or a row-major HBM tensor
of the value's shape (``Hbm``). Each op reads its operands tile by tile: a value of shape (..., C) is viewed as
(R, C), R tiled by 128 partitions and C by 512 columns; ``dot_general`` tiles M by 128, N by 512 and K by 128
(accumulated in one PSUM bank; ``hlo/views.py`` chooses its operands' and result's layouts); ``broadcast_in_dim``
is one strided DMA, ``transpose`` a view or a copy (``hlo/views.py``); ``reshape`` is free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.ir import Operation, SSAValue

from nkic.dialects import stablehlo as hlo
from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.frontend.errors import NkiError
from nkic.hlo.locations import located

P_TILE = 128  # partitions
F_TILE = 512  # free elements per tile (one fp32 PSUM bank for matmul results)
K_TILE = 128  # matmul contraction rows
MAX_UNROLL = 64  # while loops are unrolled up to this many iterations


def nki_dtype(dtype: np.dtype) -> str:
    """The NKI dtype holding a StableHLO element type (i1 as uint8 0/1)."""
    if dtype == np.bool_:
        return "uint8"
    if dtype == np.dtype(ml_dtypes.bfloat16):
        return "bfloat16"
    return str(dtype)


def dims(shape: Sequence[int]) -> tuple[int, ...]:
    """The HBM shape of a value: a scalar is one element."""
    return tuple(shape) if len(shape) else (1,)


def strides(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


@dataclass
class Hbm:
    """A value in HBM: ``tensor``'s storage, row-major, holding ``shape`` (a reshape is a new Hbm on one storage)."""

    tensor: Any
    shape: tuple[int, ...]
    dtype: str

    def tile(self, r0: int, nr: int, c0: int, nc: int) -> Any:
        """Rows [r0, r0+nr) x cols [c0, c0+nc) of the (R, C) view, C = the last dimension."""
        c = self.shape[-1] if self.shape else 1
        return self.tensor.ap([[c, nr], [1, nc]], offset=r0 * c + c0)

    def pattern(self, pairs: list[list[int]]) -> Any:
        return self.tensor.ap(pairs, offset=0)


Value = np.ndarray | Hbm
_FOLD_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exponential": np.exp, "log": np.log, "tanh": np.tanh, "sqrt": np.sqrt, "negate": np.negative, "abs": np.abs,
    "logistic": lambda x: 1 / (1 + np.exp(-x)), "rsqrt": lambda x: 1 / np.sqrt(x), "sine": np.sin,
    "cosine": np.cos, "floor": np.floor, "ceil": np.ceil, "sign": np.sign, "not": np.logical_not,
    "exponential_minus_one": np.expm1, "log_plus_one": np.log1p,
}  # fmt: skip
_FOLD_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide, "maximum": np.maximum,
    "minimum": np.minimum, "power": np.power, "remainder": np.fmod, "and": np.logical_and, "or": np.logical_or,
    "xor": np.logical_xor,
}  # fmt: skip
_COMPARE = {"EQ": "equal", "NE": "not_equal", "GE": "greater_equal", "GT": "greater", "LE": "less_equal",
            "LT": "less"}  # fmt: skip
_FOLD_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "GE": np.greater_equal, "GT": np.greater,
                 "LE": np.less_equal, "LT": np.less}  # fmt: skip
_TILE_UNARY: dict[str, Callable[[Any, str], Any]] = {
    "exponential": lambda x, dt: nl.exp(x, dtype=dt),
    "log": lambda x, dt: nl.log(x, dtype=dt),
    "tanh": lambda x, dt: nl.tanh(x, dtype=dt),
    "logistic": lambda x, dt: nl.sigmoid(x, dtype=dt),
    "sqrt": lambda x, dt: nl.sqrt(x, dtype=dt),
    "rsqrt": lambda x, dt: nl.rsqrt(x, dtype=dt),
    "negate": lambda x, dt: nl.multiply(x, -1.0, dtype=dt),
    "abs": lambda x, dt: nl.abs(x, dtype=dt),
    "sign": lambda x, dt: nl.sign(x, dtype=dt),
    "sine": lambda x, dt: nl.sin(x, dtype=dt),
    "cosine": lambda x, dt: nl.cos(x, dtype=dt),
    "floor": lambda x, dt: nl.floor(x, dtype=dt),
    "ceil": lambda x, dt: nl.ceil(x, dtype=dt),
    "exponential_minus_one": lambda x, dt: nl.subtract(nl.exp(x, dtype="float32"), 1.0, dtype=dt),
    "log_plus_one": lambda x, dt: nl.log(nl.add(x, 1.0, dtype="float32"), dtype=dt),
    "invert": lambda x, dt: nl.invert(x, dtype=dt),
}
_TILE_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "logical_and", "logical_or",
                "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor")  # fmt: skip
_LOGICAL = {"and": ("logical_and", "bitwise_and"), "or": ("logical_or", "bitwise_or"),
            "xor": ("logical_xor", "bitwise_xor"), "not": ("logical_not", "invert")}  # fmt: skip
_REDUCE = {"add": (nl.sum, nl.add, 0.0), "maximum": (nl.max, nl.maximum, -np.inf),
           "minimum": (nl.min, nl.minimum, np.inf),
           "and": (nl.min, nl.minimum, 1.0), "or": (nl.max, nl.maximum, 0.0)}  # fmt: skip  # on i1 (0/1)


def _unsupported(op: Operation, why: str) -> NkiError:
    """The error for an op nkic does not lower: its name, why, and where (the op as printed, results named)."""
    text = str(op).splitlines()[0].strip() if op.parent is not None else op.name
    where = text if len(text) <= 160 else text[:157] + "..."
    return NkiError(f"{op.name}: {why}, at {where}", "the README's table of StableHLO and chlo ops says what nkic lowers")


def _family_lowering(name: str) -> Callable[[SegmentInterpreter, Operation], None] | None:
    """The lowering of ``name`` from the per-family modules (``nkic.hlo.families``: sort, scatter, loops, ...)."""
    # Deferred: a cycle; every family module builds on this interpreter (SegmentInterpreter, Hbm, the tile sizes).
    from nkic.hlo.families import LOWERINGS

    return LOWERINGS.get(name)


def result_dtype(value: SSAValue) -> np.dtype:
    return hlo.numpy_dtype(hlo.ttype(value).element_type)


def _splat(v: Value) -> float | None:
    if isinstance(v, np.ndarray) and v.size and np.all(v == v.flat[0]) | np.all(np.isnan(v)):
        return float(v.flat[0])
    return None


class SegmentInterpreter:
    """Runs a segment's ops under the tracer. ``constants`` holds every folded value of the function."""

    def __init__(self, constants: dict[SSAValue, np.ndarray], out_names: dict[SSAValue, str]):
        self.values: dict[SSAValue, Value] = dict(constants)
        self.out_names = out_names
        self.count = 0

    # -- storage --------------------------------------------------------------------------------------------
    def alloc(self, value: SSAValue) -> Hbm:
        shape = hlo.shape_of(value)
        dt = nki_dtype(result_dtype(value))
        name = self.out_names.get(value)
        if name is None:
            self.count += 1
            t = nl.ndarray(dims(shape), dtype=dt, buffer=nl.hbm, name=f"t{self.count}")
        else:
            t = nl.ndarray(dims(shape), dtype=dt, buffer=nl.shared_hbm, name=name)
        return Hbm(t, tuple(shape), dt)

    def hbm(self, v: Value) -> Hbm:
        if isinstance(v, Hbm):
            return v
        arr = np.ascontiguousarray(v.astype(np.uint8) if v.dtype == np.bool_ else v)
        return Hbm(nl.shared_constant(arr.reshape(dims(arr.shape))), tuple(v.shape), nki_dtype(v.dtype))

    def get(self, value: SSAValue) -> Value:
        return self.values[value]

    # -- running ----------------------------------------------------------------------------------------------
    def run(self, ops: Sequence[Operation]) -> None:
        for op in ops:
            if all(r in self.values for r in op.results):
                continue  # folded
            with located(op):  # its instructions and errors are at the op's JAX / MLIR line (hlo/locations.py)
                self._lower(op)

    def _lower(self, op: Operation) -> None:
        handler = getattr(self, "op_" + op.name.removeprefix("stablehlo."), None)
        if op.name.removeprefix("stablehlo.") in hlo.ELEMENTWISE:
            handler = self.elementwise
        if handler is None:
            family = _family_lowering(op.name.removeprefix("stablehlo."))
            if family is None:
                raise _unsupported(op, "no op-by-op lowering")
            family(self, op)
            return
        handler(op)

    def finish(self, outputs: Sequence[tuple[SSAValue, str]]) -> list[Any]:
        """The segment's outputs as shared_hbm tensors named as asked (a copy when a value lives elsewhere)."""
        result = []
        for value, name in outputs:
            v = self.values[value]
            if isinstance(v, Hbm) and v.tensor.name == name and v.tensor.buffer == "shared_hbm":
                result.append(v.tensor)
                continue
            src = self.hbm(v)
            dst = nl.ndarray(dims(hlo.shape_of(value)), dtype=src.dtype, buffer=nl.shared_hbm, name=name)
            n = math.prod(dims(src.shape))
            nisa.dma_copy(dst=dst.ap([[1, n]], offset=0), src=src.pattern([[1, n]]))
            result.append(dst)
        return result

    # -- element-wise -----------------------------------------------------------------------------------------
    def _map_tiles(self, out: Hbm, body: Callable[[int, int, int, int], Any]) -> None:
        c = out.shape[-1] if out.shape else 1
        r = math.prod(out.shape) // c if c else 0
        for r0 in range(0, r, P_TILE):
            nr = min(P_TILE, r - r0)
            for c0 in range(0, c, F_TILE):
                nc = min(F_TILE, c - c0)
                nl.store(out.tile(r0, nr, c0, nc), body(r0, nr, c0, nc))

    def elementwise(self, op: Operation) -> None:
        if _family_lowering("fuse")(self, op):  # type: ignore[misc]  # an element-wise chain (hlo/fusion.py)
            return
        kind = op.name.removeprefix("stablehlo.")
        args = [self.get(v) for v in op.operands]
        dt = nki_dtype(result_dtype(op.results[0]))
        out = self.alloc(op.results[0])
        is_bool = result_dtype(op.results[0]) == np.bool_
        if kind in _LOGICAL:  # and/or/xor/not: logical on i1, bitwise on integers
            kind = _LOGICAL[kind][0 if is_bool else 1]
        if len(args) == 1:
            (x,) = args
            if kind == "logical_not":
                self._map_tiles(out, lambda r0, nr, c0, nc: nl.logical_not(nl.load(x.tile(r0, nr, c0, nc)), dtype=dt))
                self.values[op.results[0]] = out
                return
            if kind not in _TILE_UNARY:
                raise _unsupported(op, "no tile lowering")
            fn = _TILE_UNARY[kind]
            self._map_tiles(out, lambda r0, nr, c0, nc: fn(nl.load(x.tile(r0, nr, c0, nc)), dt))
        else:
            if kind not in _TILE_BINARY:
                raise _unsupported(op, "no tile lowering")
            fn2 = getattr(nl, kind)
            a, b = (self._operand(v) for v in args)
            self._map_tiles(out, lambda r0, nr, c0, nc: fn2(a(r0, nr, c0, nc), b(r0, nr, c0, nc), dtype=dt))
        self.values[op.results[0]] = out

    def _operand(self, v: Value) -> Callable[[int, int, int, int], Any]:
        """A tile reader: an immediate for a splat constant, else a load."""
        s = _splat(v)
        if s is not None:
            return lambda *_: s
        h = self.hbm(v)
        return lambda r0, nr, c0, nc: nl.load(h.tile(r0, nr, c0, nc))

    def op_convert(self, op: Operation) -> None:
        """StableHLO's convert: to i1 is ``x != 0``, float to integer rounds toward zero (as XLA does), the rest is
        the engines' cast."""
        if _family_lowering("convert.view")(self, op):  # type: ignore[misc]  # read only by matmuls (hlo/views.py)
            return
        if _family_lowering("fuse")(self, op):  # type: ignore[misc]  # an element-wise chain (hlo/fusion.py)
            return
        x = self.hbm(self.get(op.operands[0]))
        out = self.alloc(op.results[0])
        to, frm = result_dtype(op.results[0]), result_dtype(op.operands[0])
        if x.dtype == out.dtype and (to == np.bool_) == (frm == np.bool_):
            self.values[op.results[0]] = x
            return

        def tile(r0: int, nr: int, c0: int, nc: int) -> Any:
            t = nl.load(x.tile(r0, nr, c0, nc))
            if to == np.bool_:
                return nl.not_equal(t, 0.0, dtype="uint8")
            if to.kind in "iu" and frm.kind not in "iub":
                t = nl.trunc(t, dtype="float32")
            return nl.copy(t, dtype=out.dtype)

        self._map_tiles(out, tile)
        self.values[op.results[0]] = out

    def op_is_finite(self, op: hlo.IsFiniteOp) -> None:
        """``|x| <= the largest finite value`` of x's type: false for ±inf and for NaN (every comparison with NaN is
        false, IEEE 754 5.11), as StableHLO's is_finite ("x is neither +Inf, -Inf, nor NaN")."""
        x = self.hbm(self.get(op.operand[0]))
        top = float(ml_dtypes.finfo(result_dtype(op.operand[0])).max)
        out = self.alloc(op.result)
        self._map_tiles(out, lambda r0, nr, c0, nc: nl.less_equal(
            nl.abs(nl.load(x.tile(r0, nr, c0, nc)), dtype="float32"), top, dtype="uint8"))  # fmt: skip
        self.values[op.result] = out

    def op_compare(self, op: hlo.CompareOp) -> None:
        if _family_lowering("fuse")(self, op):  # type: ignore[misc]  # an element-wise chain (hlo/fusion.py)
            return
        fn = getattr(nl, _COMPARE[op.comparison_direction.data])
        a, b = (self._operand(self.get(v)) for v in op.operand)
        out = self.alloc(op.result)
        self._map_tiles(out, lambda r0, nr, c0, nc: fn(a(r0, nr, c0, nc), b(r0, nr, c0, nc), dtype="uint8"))
        self.values[op.result] = out

    def op_select(self, op: hlo.SelectOp) -> None:
        pred, on_true, on_false = (self.get(v) for v in op.operand)
        if isinstance(pred, np.ndarray) and pred.size and (pred.all() or not pred.any()):
            self.values[op.result] = on_true if pred.all() else on_false  # a constant predicate picks a side
            return
        if not hlo.shape_of(op.operand[0]) and hlo.shape_of(op.result):
            raise _unsupported(op, "a run-time scalar predicate choosing between tensors")
        if _family_lowering("fuse")(self, op):  # type: ignore[misc]  # an element-wise chain (hlo/fusion.py)
            return
        p, t, f = self.hbm(pred), self._operand(on_true), self._operand(on_false)
        out = self.alloc(op.result)

        def tile(r0: int, nr: int, c0: int, nc: int) -> Any:
            dst = nl.ndarray((nr, nc), dtype=out.dtype, buffer=nl.sbuf)
            other = f(r0, nr, c0, nc)
            if isinstance(other, float):
                nisa.memset(dst=dst, value=other)
            else:
                nisa.tensor_copy(dst=dst, src=other)
            chosen = t(r0, nr, c0, nc)
            if not isinstance(chosen, float) and chosen.dtype != out.dtype:
                chosen = nl.copy(chosen, dtype=out.dtype)
            nisa.tensor_copy_predicated(dst=dst, src=chosen, predicate=nl.load(p.tile(r0, nr, c0, nc)))
            return dst

        self._map_tiles(out, tile)
        self.values[op.result] = out

    # -- data movement --------------------------------------------------------------------------------------------
    def _strided_copy(self, op: Operation, src: Hbm, src_strides: Sequence[int]) -> None:
        """out[i...] = src[sum(i_k * src_strides[k])]: one DMA whose source pattern has a pair per output dim."""
        out = self.alloc(op.results[0])
        shape = dims(out.shape)
        dst_pairs = [[s, n] for s, n in zip(strides(shape), shape)]
        src_pairs = [[s, n] for s, n in zip(src_strides, shape)]
        if len(out.shape) == 0:
            src_pairs = [[0, 1]]
        # the largest dim first: more DMA engines (deferred: layout builds on this interpreter, a cycle)
        from nkic.hlo.layout import rows_first

        dst_pairs, src_pairs = rows_first(dst_pairs, src_pairs)
        nisa.dma_copy(dst=out.pattern(dst_pairs), src=src.pattern(src_pairs))
        self.values[op.results[0]] = out

    def op_broadcast_in_dim(self, op: hlo.BroadcastInDimOp) -> None:
        x = self.get(op.operand[0])
        src_shape, bdims = hlo.shape_of(op.operand[0]), hlo.int_list(op.broadcast_dimensions)
        out_shape = hlo.shape_of(op.result)
        if isinstance(x, np.ndarray):
            expanded = x.reshape([src_shape[bdims.index(d)] if d in bdims else 1 for d in range(len(out_shape))])
            self.values[op.result] = np.broadcast_to(expanded, out_shape).copy()
            return
        st = strides(src_shape)
        out_strides = [0] * len(out_shape)
        for i, d in enumerate(bdims):
            out_strides[d] = st[i] if src_shape[i] == out_shape[d] else 0
        if _family_lowering("broadcast.columns")(self, op, x, out_strides):  # type: ignore[misc, call-arg]
            return  # on chip when the last dim is broadcast (hlo/layout.py)
        self._strided_copy(op, x, out_strides)

    def op_transpose(self, op: hlo.TransposeOp) -> None:
        x = self.get(op.operand[0])
        if isinstance(x, np.ndarray):
            self.values[op.result] = np.ascontiguousarray(x.transpose(hlo.int_list(op.permutation)))
            return
        _family_lowering("transpose")(self, op)  # read in place, or one copy with TensorE transposes (hlo/views.py)

    def op_slice(self, op: hlo.SliceOp) -> None:
        x = self.hbm(self.get(op.operand[0]))
        start, step = hlo.int_list(op.start_indices), hlo.int_list(op.strides)
        st = strides(hlo.shape_of(op.operand[0]))
        out = self.alloc(op.result)
        shape = dims(out.shape)
        src = x.tensor.ap([[st[i] * step[i], n] for i, n in enumerate(shape)],
                          offset=sum(a * s for a, s in zip(start, st)))  # fmt: skip
        nisa.dma_copy(dst=out.pattern([[s, n] for s, n in zip(strides(shape), shape)]), src=src)
        self.values[op.result] = out

    def op_concatenate(self, op: hlo.ConcatenateOp) -> None:
        """One DMA per operand into its block of the result (the result's strides, an offset along the axis)."""
        d = op.dimension.value.data
        out = self.alloc(op.result)
        ost = strides(out.shape)
        at = 0
        for v in op.inputs:
            shape = hlo.shape_of(v)
            if math.prod(shape):
                x = self.hbm(self.get(v))
                dst = out.tensor.ap([[s, n] for s, n in zip(ost, shape)], offset=at * ost[d])
                nisa.dma_copy(dst=dst, src=x.pattern([[s, n] for s, n in zip(strides(shape), shape)]))
            at += shape[d]
        self.values[op.result] = out

    def op_pad(self, op: hlo.PadOp) -> None:
        """The result filled with the (compile-time) padding value tile by tile, then the operand DMA'd in at the
        low edge with the result's strides times (interior + 1). Negative (cropping) edges are not lowered."""
        x, value = self.get(op.operand[0]), _splat(self.get(op.operand[1]))
        low, interior = hlo.int_list(op.edge_padding_low), hlo.int_list(op.interior_padding)
        if value is None:
            raise _unsupported(op, "a run-time padding value")
        if any(p < 0 for p in (*low, *hlo.int_list(op.edge_padding_high))):
            raise _unsupported(op, "negative (cropping) edge padding")
        out = self.alloc(op.result)

        def fill(r0: int, nr: int, c0: int, nc: int) -> Any:
            t = nl.ndarray((nr, nc), dtype=out.dtype, buffer=nl.sbuf)
            nisa.memset(dst=t, value=value)
            return t

        self._map_tiles(out, fill)
        shape, ost = hlo.shape_of(op.operand[0]), strides(out.shape)
        if math.prod(shape):
            dst = out.tensor.ap([[s * (i + 1), n] for s, i, n in zip(ost, interior, shape)],
                                offset=sum(lo * s for lo, s in zip(low, ost)))  # fmt: skip
            nisa.dma_copy(dst=dst, src=self.hbm(x).pattern([[s, n] for s, n in zip(strides(shape), shape)]))
        self.values[op.result] = out

    def op_gather(self, op: hlo.GatherOp) -> None:
        """The row gather (``table[ids]``, ``jnp.take(table, ids, axis=0)``): whole rows of the operand's first
        dimension at run-time indices, 128 rows per indirect DMA. Each index is clamped into [0, rows - 1], as
        StableHLO clamps a start index."""
        table_shape, idx_shape = hlo.shape_of(op.operand[0]), hlo.shape_of(op.operand[1])
        batch = _row_gather_batch(op, table_shape, idx_shape)
        if batch is None:  # any other form: element runs at computed offsets (nkic.hlo.gathers)
            return _family_lowering("gather")(self, op)  # type: ignore[misc]
        table, ids = self.hbm(self.get(op.operand[0])), self.hbm(self.get(op.operand[1]))
        rows, width = table_shape[0], math.prod(table_shape[1:])
        n = math.prod(batch)
        out = self.alloc(op.result)
        for r0 in range(0, n, P_TILE):
            nr = min(P_TILE, n - r0)
            idx = nl.load(ids.tensor.ap([[1, nr], [1, 1]], offset=r0))
            idx = nl.minimum(nl.maximum(idx, 0, dtype="int32"), rows - 1, dtype="int32")
            src = table.tensor.ap([[width, nr], [1, width]], offset=0, vector_offset=idx, indirect_dim=0)
            nisa.dma_copy(dst=out.tensor.ap([[width, nr], [1, width]], offset=r0 * width), src=src)
        self.values[op.result] = out

    def op_dynamic_slice(self, op: hlo.DynamicSliceOp) -> None:
        """A block at start indices clamped into [0, size - slice size]: a static slice when every index is a
        compile-time constant, else one DMA whose offset along the one run-time index's dimension is read from a
        register (``scalar_offset``); more than one run-time index is not lowered."""
        src_shape, sizes = hlo.shape_of(op.operand[0]), hlo.int_list(op.slice_sizes)
        starts = [self.get(v) for v in op.operand[1:]]
        runtime = [d for d, s in enumerate(starts) if not isinstance(s, np.ndarray)]
        if len(runtime) > 1:
            raise _unsupported(op, "more than one run-time start index")
        fixed = [0 if d in runtime else int(np.clip(int(s.reshape(-1)[0]), 0, n - k))  # type: ignore[union-attr]
                 for d, (s, n, k) in enumerate(zip(starts, src_shape, sizes))]  # fmt: skip
        x = self.hbm(self.get(op.operand[0]))
        st = strides(src_shape)
        out = self.alloc(op.result)
        shape = dims(out.shape)
        pattern = [[s, n] for s, n in zip(st, shape)]
        offset = sum(a * s for a, s in zip(fixed, st))
        if not runtime:
            src = x.tensor.ap(pattern, offset=offset)
        else:
            (d,) = runtime
            start = self.hbm(starts[d])
            s = nl.load(start.tensor.ap([[1, 1], [1, 1]], offset=0))
            s = nl.minimum(nl.maximum(s, 0, dtype="int32"), src_shape[d] - sizes[d], dtype="int32")
            src = x.tensor.ap(pattern, offset=offset, scalar_offset=s, indirect_dim=d)
        nisa.dma_copy(dst=out.pattern([[s_, n] for s_, n in zip(strides(shape), shape)]), src=src)
        self.values[op.result] = out

    def op_reshape(self, op: Operation) -> None:
        x = self.get(op.operands[0])
        shape = hlo.shape_of(op.results[0])
        self.values[op.results[0]] = x.reshape(shape) if isinstance(x, np.ndarray) else Hbm(x.tensor, shape, x.dtype)

    def op_while(self, op: hlo.WhileOp) -> None:
        """A loop with a compile-time trip count is unrolled while the condition folds to a constant (a counter
        from a constant start, as ``lax.fori_loop`` writes), at most ``MAX_UNROLL`` times; from the first trip
        whose condition is computed at run time (or after ``MAX_UNROLL`` trips) the rest is a device loop on a
        register condition (``nkic.hlo.loops``)."""
        values = [self.get(v) for v in op.operand]
        for trip in range(MAX_UNROLL + 1):
            (pred,) = self._run_region(op.cond, values)
            if not isinstance(pred, np.ndarray) or trip == MAX_UNROLL:
                values = _family_lowering("while.runtime")(self, op, values)  # type: ignore[misc, call-arg]
                break
            if not bool(pred.reshape(-1)[0]):
                break
            values = self._run_region(op.body, values)
        for r, v in zip(op.result, values):
            self.values[r] = v

    def _run_region(self, region: Any, args: Sequence[Value]) -> list[Value]:
        """Run a single-block region on ``args`` (its earlier run's values forgotten): the returned values."""
        block = region.block
        for inner in block.ops:
            for r in inner.results:
                self.values.pop(r, None)
        self.values.update(zip(block.args, args))
        for inner in block.ops:
            if isinstance(inner, hlo.ReturnOp):
                return [self.get(v) for v in inner.operands]
            consts = {v: x for v in inner.operands if isinstance(x := self.values.get(v), np.ndarray)}
            folded = fold(inner, consts)
            if folded is not None:
                self.values[inner.results[0]] = np.asarray(folded)  # numpy folds a 0-d op to a scalar
            else:
                self.run([inner])
        raise _unsupported(region.parent_op() or block, "a region without stablehlo.return")

    def op_optimization_barrier(self, op: Operation) -> None:
        for a, r in zip(op.operands, op.results):
            self.values[r] = self.get(a)

    def _permuted(self, v: Value, shape: tuple[int, ...], perm: Sequence[int]) -> Hbm:
        """``v`` (of ``shape``) transposed by ``perm`` into a fresh HBM tensor (itself when perm is the identity):
        contiguous DMAs and TensorE transposes where they pay (``hlo/views.py`` ``copy_view``)."""
        return _family_lowering("permute")(self, v, shape, perm)  # type: ignore[misc, call-arg, return-value]

    # -- reduce -------------------------------------------------------------------------------------------------
    def op_reduce(self, op: hlo.ReduceOp) -> None:
        combiner = op.combiner()
        if len(op.inputs) == 4:  # (values, indices) -> argmax / argmin: nkic.hlo.reductions
            return _family_lowering("reduce.arg")(self, op)  # type: ignore[misc]
        if len(op.inputs) != 2 or combiner not in _REDUCE:
            raise _unsupported(op, "only single-input add/maximum/minimum reductions")
        reduce_fn, combine_fn, identity = _REDUCE[combiner]
        shape, rdims = hlo.shape_of(op.inputs[0]), hlo.int_list(op.dimensions)
        init = self.get(op.inputs[1])
        if not isinstance(init, np.ndarray):
            raise _unsupported(op, "a run-time init value")
        init_value = float(init.reshape(-1)[0])
        kept = [i for i in range(len(shape)) if i not in rdims]
        x = self._permuted(self.get(op.inputs[0]), shape, [*kept, *rdims])
        rows, cols = math.prod(shape[i] for i in kept), math.prod(shape[i] for i in rdims)
        out = self.alloc(op.outs[0])
        for r0 in range(0, rows, P_TILE):
            nr = min(P_TILE, rows - r0)
            acc = None
            for c0 in range(0, cols, F_TILE):
                nc = min(F_TILE, cols - c0)
                tile = nl.load(x.tensor.ap([[cols, nr], [1, nc]], offset=r0 * cols + c0))
                part = reduce_fn(tile, axis=1, keepdims=True, dtype="float32")
                acc = part if acc is None else combine_fn(acc, part, dtype="float32")
            assert acc is not None
            if init_value != identity:
                acc = combine_fn(acc, init_value, dtype="float32")
            nl.store(out.tensor.ap([[1, nr], [1, 1]], offset=r0), nl.copy(acc, dtype=out.dtype))
        self.values[op.outs[0]] = out


def _row_gather_batch(op: hlo.GatherOp, table: tuple[int, ...], idx: tuple[int, ...]) -> tuple[int, ...] | None:
    """The batch (index) shape of a row gather ``table[ids]``, or None for another form: one start index into
    dimension 0 (collapsed), whole slices of every other dimension, the offset dims trailing the result."""
    dn = op.dimension_numbers
    vector_dim = dn.index_vector_dim.data
    batch = tuple(n for i, n in enumerate(idx) if i != vector_dim)
    if vector_dim < len(idx) and idx[vector_dim] != 1:
        return None
    if dn.dims("start_index_map") != (0,) or dn.dims("collapsed_slice_dims") != (0,):
        return None
    if dn.dims("operand_batching_dims") or dn.dims("start_indices_batching_dims"):
        return None
    if hlo.int_list(op.slice_sizes) != (1, *table[1:]):
        return None
    if dn.dims("offset_dims") != tuple(range(len(batch), len(batch) + len(table) - 1)):
        return None
    return batch


# -- constant folding ---------------------------------------------------------------------------------------------
def fold(op: Operation, consts: dict[SSAValue, np.ndarray]) -> np.ndarray | None:
    """The value of ``op`` when it is a compile-time constant, computed with numpy at the result's dtype."""
    kind = op.name.removeprefix("stablehlo.")
    if isinstance(op, hlo.ConstantOp):
        return op.numpy()
    if isinstance(op, hlo.IotaOp):
        shape, d = hlo.shape_of(op.output), op.iota_dimension.value.data
        idx = np.arange(shape[d]).reshape([shape[d] if i == d else 1 for i in range(len(shape))])
        return np.broadcast_to(idx, shape).astype(result_dtype(op.output))
    if not op.results or len(op.results) != 1 or not all(v in consts for v in op.operands):
        return None
    args = [consts[v] for v in op.operands]
    if isinstance(op, hlo.BroadcastInDimOp):
        src, bdims, out = hlo.shape_of(op.operand[0]), hlo.int_list(op.broadcast_dimensions), hlo.shape_of(op.result)
        expanded = args[0].reshape([src[bdims.index(d)] if d in bdims else 1 for d in range(len(out))])
        return np.broadcast_to(expanded, out).copy()
    if isinstance(op, hlo.TransposeOp):
        return np.ascontiguousarray(args[0].transpose(hlo.int_list(op.permutation)))
    if isinstance(op, hlo.ReshapeOp):
        return args[0].reshape(hlo.shape_of(op.result))
    if isinstance(op, hlo.SliceOp):
        start, limit, step = (hlo.int_list(a) for a in (op.start_indices, op.limit_indices, op.strides))
        return args[0][tuple(slice(a, b, s) for a, b, s in zip(start, limit, step))].copy()
    if isinstance(op, hlo.ConcatenateOp):
        return np.concatenate(args, axis=op.dimension.value.data)
    if isinstance(op, hlo.PadOp):
        return _fold_pad(op, args[0], args[1])
    if isinstance(op, hlo.GatherOp):
        batch = _row_gather_batch(op, args[0].shape, args[1].shape)
        if batch is None:
            return None
        rows = np.clip(args[1].reshape(-1).astype(np.int64), 0, args[0].shape[0] - 1)
        return args[0][rows].reshape(hlo.shape_of(op.result))
    if isinstance(op, hlo.DynamicSliceOp):
        sizes = hlo.int_list(op.slice_sizes)
        starts = [int(np.clip(int(s.reshape(-1)[0]), 0, n - k)) for s, n, k in zip(args[1:], args[0].shape, sizes)]
        return args[0][tuple(slice(a, a + k) for a, k in zip(starts, sizes))].copy()
    dt = result_dtype(op.results[0])
    with np.errstate(all="ignore"):
        if kind in _FOLD_UNARY:
            return _FOLD_UNARY[kind](args[0].astype(np.float64 if dt.kind == "f" or dt.kind == "V" else dt)).astype(dt)
        if kind in _FOLD_BINARY:
            wide = np.float64 if args[0].dtype.kind in "fV" or str(args[0].dtype) == "bfloat16" else args[0].dtype
            return np.asarray(_FOLD_BINARY[kind](args[0].astype(wide), args[1].astype(wide))).astype(dt)
        if isinstance(op, hlo.CompareOp):
            return _FOLD_COMPARE[op.comparison_direction.data](args[0], args[1])
        if isinstance(op, hlo.SelectOp):
            return np.where(args[0], args[1], args[2]).astype(dt)
        if isinstance(op, hlo.IsFiniteOp):
            return np.isfinite(args[0].astype(np.float32))
        if isinstance(op, hlo.ConvertOp):
            return args[0].astype(dt)
    return None


def _fold_pad(op: hlo.PadOp, x: np.ndarray, value: np.ndarray) -> np.ndarray | None:
    low, high, interior = (hlo.int_list(a) for a in (op.edge_padding_low, op.edge_padding_high, op.interior_padding))
    if any(p < 0 for p in (*low, *high)):
        return None
    out = np.full(hlo.shape_of(op.result), value.reshape(-1)[0], dtype=x.dtype)
    out[tuple(slice(lo, lo + (n - 1) * (i + 1) + 1 if n else lo, i + 1) for lo, n, i in zip(low, x.shape, interior))] = x
    return out
