"""The value-returning ``nki.language`` tile functions (``nl.load``, ``nl.add``, ``nl.matmul``, ``nl.sum`` …).

Each function allocates its result tile(s) through the trace context and records the same ``nisa`` instructions a
hand-written kernel would (``frontend/isa.py``, called through ``__nki_impl__`` so that operand checks and errors
name the user's line): nothing here reaches the IR any other way.

Lowering, in short (``README.md`` lists every name):

* memory: ``load``/``store`` are ``dma_copy``; ``load_transpose2d`` is ``dma_transpose``; ``copy`` is a ScalarE
  ``tensor_copy``.
* unary math is one ScalarE ``activation`` when the activation table has the function; ``negative``, ``invert``,
  ``logical_not``, ``floor``, ``ceil`` are ``tensor_scalar``/``scalar_tensor_tensor`` ALU stages; ``sin``/``cos``/
  ``tan`` add a range reduction to [-pi, pi) before the ScalarE ``sin`` (which has none).
* binary math: two tiles -> ``tensor_tensor``; a tile and a number or a (P, 1) tile -> ``tensor_scalar``. Free dims
  of size 1 broadcast through a stride-0 view; a partition dim of 1 broadcasts through a TensorE matmul with a ones
  row (``[1, P]^T @ x[1, F]``, exact for floats; integers pass through fp32).
* reductions: ``tensor_reduce`` over any free axes (never the partition axis; axes that are not the trailing ones
  are moved last by a permuted view), plus ALU stages for ``mean``/``var``.
* ``gather_flattened`` is a GpSimd ``nc_n_gather`` (indices copied to uint32 first when they are another integer
  dtype or not in SBUF).
* ``matmul`` is ``nc_matmul`` into a fresh PSUM tile (with an ``nc_transpose`` of x unless ``transpose_x``);
  ``transpose`` is a TensorE ``nc_transpose`` into PSUM.
* random numbers: ``random_seed`` is ``set_rng_seed``; ``rand`` is a VectorE ``rng`` into uint32, a ``right_shift``
  and a ``multiply`` (``k / 2^b``, exact and below 1 in the dtype); ``dropout`` is ``nisa.dropout``.

Result dtypes: ``dtype=`` wins; otherwise a unary function keeps its input's dtype and a binary one promotes the two
tile dtypes (float beats int, the wider float wins, float16 with bfloat16 gives float32, mixed-sign integers widen),
a Python number never changing it except that a non-integral number turns an integer tile's result into float32.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from nkic.frontend import isa
from nkic.frontend.recorders.record import _mask, language_rules
from nkic.frontend.affine import is_symbolic
from nkic.frontend.context import nki_op
from nkic.frontend.dtypes import BUFFERS, itemsize, normalize_dtype
from nkic.frontend.errors import NkiError
from nkic.frontend.recorders.masks import with_mask
from nkic.frontend.recorders.psum_accumulate import note_fresh_result
from nkic.frontend.ops import TILE_FUNCTIONS
from nkic.frontend import tensor as _tensor
from nkic.frontend.tensor import NkiTensor
from nkic.frontend.unsupported import close_names
from nkic.target.instructions import INSTRUCTIONS
from nkic.target.machine import get_target
from nkic.target.vocab import ACT_FUNCS, ALU_RECORDS, DTYPES, FLOAT_DTYPES

__all__: list[str] = []  # filled by _export; language.py re-exports the names that are not operator tokens

_SBUF, _PSUM = BUFFERS["sbuf"], BUFFERS["psum"]
_PI = math.pi


def _export(name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Make ``impl(ctx, ...)`` an nki op called ``nl.<name>`` and register it for operator-token calls."""

    def wrap(impl: Callable[..., Any]) -> Callable[..., Any]:
        public = name or impl.__name__.lstrip("_")
        impl.__name__ = impl.__qualname__ = public
        impl.__module__ = "nkic.frontend.language"  # a bad call reads "bad call of language.<name>", like nl's own
        op = nki_op(with_mask(_misspelt_keywords(public, impl)))  # mask= applies to every instruction it records
        TILE_FUNCTIONS[public] = op
        __all__.append(public)
        return op

    return wrap


def _misspelt_keywords(public: str, impl: Callable[..., Any]) -> Callable[..., Any]:
    """``impl`` refusing a keyword that its ``**kw`` would swallow but that is a near-miss of one of its parameters
    (``nl.exp(x, dtyp=nl.float32)``): the function accepts and ignores options it does not use, so without this the
    misspelt ``dtype`` would be silently dropped. A keyword resembling no parameter is still accepted."""
    params = [p.name for p in inspect.signature(impl).parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)][1:]  # fmt: skip  (without ctx)
    known = frozenset(params) | {"mask"}

    def run(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        for key in kwargs:
            if key not in known:
                near = close_names(key, params, n=1)
                if near:
                    raise NkiError(f"nl.{public}: unknown keyword {key}=", f"did you mean {near[0]}=?")
        return impl(ctx, *args, **kwargs)

    functools.update_wrapper(run, impl)  # the signature a call is checked against stays impl's
    return run


# -- helpers ------------------------------------------------------------------------------------------------
def _new(ctx: Any, shape: Sequence[int], dtype: str, buffer: Any = _SBUF) -> NkiTensor:
    return ctx.allocate(tuple(shape), dtype, buffer, "", None)


def _impl(name: str) -> Callable[..., Any]:
    return getattr(isa, name).__nki_impl__  # type: ignore[no-any-return]


def _is_number(x: Any) -> bool:
    if is_symbolic(x):
        return True
    return isinstance(x, (int, float)) or type(x).__module__ == "numpy" and hasattr(x, "item") and x.ndim == 0


def _number(x: Any) -> float:
    return float(x)


def _tile(fn: str, role: str, x: Any) -> NkiTensor:
    """``x`` as an on-chip tile operand of ``nl.<fn>``."""
    if not isinstance(x, NkiTensor):
        raise NkiError(f"nl.{fn}: '{role}' must be a tile, got {type(x).__name__}")
    if not x.on_chip:
        raise NkiError(
            f"nl.{fn}: '{role}' is in {x.buffer}; nl.{fn} works on SBUF/PSUM tiles",
            f"load it first: nl.load({x.label}[...])",
        )
    return x


def _dtype(dtype: Any, default: str) -> str:
    return default if dtype is None else normalize_dtype(dtype)


def _is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def promote(a: str, b: str) -> str:
    """The result dtype of a binary function on tiles of dtypes ``a`` and ``b`` (see the module docstring)."""
    if a == b:
        return a
    fa, fb = _is_float(a), _is_float(b)
    if fa != fb:
        return a if fa else b
    sa, sb = itemsize(a), itemsize(b)
    if fa:
        if sa != sb:
            return a if sa > sb else b
        return "bfloat16" if sa == 1 else "float32"  # fp8 e4m3 + e5m2; float16 + bfloat16
    signed_a, signed_b = not a.startswith(("uint", "bool")), not b.startswith(("uint", "bool"))
    if signed_a == signed_b:
        return a if sa >= sb else b
    signed, unsigned = (a, b) if signed_a else (b, a)
    if itemsize(signed) > itemsize(unsigned):
        return signed
    wider = {1: "int16", 2: "int32"}.get(itemsize(unsigned))
    return wider or "float32"  # int32 with uint32 has no exact integer type


def _scalar_result(tile_dtype: str, value: Any) -> str:
    if not _is_float(tile_dtype) and not is_symbolic(value) and float(value) != int(float(value)):
        return "float32"
    return tile_dtype


def _flat(ctx: Any, t: NkiTensor) -> NkiTensor:
    """``t`` as a (P, F) tile: itself when 2-D, a view when its free dims are dense, else a copy."""
    if t.ndim == 2:
        return t
    if t.ndim > 2 and _free_dense(t):
        return t.reshape(t.partitions, t.free_size)
    dense = _new(ctx, t.shape if t.ndim >= 2 else (t.partitions, 1), t.dtype, _SBUF)
    _impl("tensor_copy")(ctx, dense, t)
    return dense.reshape(dense.partitions, dense.free_size)


def _free_dense(t: NkiTensor) -> bool:
    expected = 1
    for step, num in reversed(t.pairs[1:]):
        if num != 1 and step != expected:
            return False
        expected *= num
    return True


def _in_sbuf(ctx: Any, t: NkiTensor) -> NkiTensor:
    """TensorE reads SBUF only: PSUM tiles are copied out first."""
    if t.buffer == "sbuf":
        return t
    copy = _new(ctx, t.shape, t.dtype, _SBUF)
    _impl("tensor_copy")(ctx, copy, t)
    return copy


def _stride0(t: NkiTensor, shape: Sequence[int]) -> NkiTensor:
    """A view of ``t`` with its size-1 free dims repeated to ``shape`` (stride 0): no data moves."""
    pairs = [t.pairs[0]] + [(0, n) if num == 1 and n != 1 else (step, num)
                            for (step, num), n in zip(t.pairs[1:], shape[1:])]  # fmt: skip
    return NkiTensor(t.storage, t.offset, tuple(pairs), t.dtype)


def _broadcast_partitions(ctx: Any, fn: str, t: NkiTensor, parts: int) -> NkiTensor:
    """A new SBUF tile (parts, *t.free) whose every partition holds t's single partition.

    Compute engines address partitions one to one, so this goes through TensorE: ``ones[1, parts]^T @ t[1, F]``
    into PSUM, 512 fp32 columns (one bank) at a time, then back to SBUF in t's dtype.
    """
    if t.partitions != 1:
        raise NkiError(f"nl.{fn}: cannot broadcast a partition dim of {t.partitions} to {parts}")
    src = _flat(ctx, _in_sbuf(ctx, t))
    ones = _new(ctx, (1, parts), src.dtype if _is_float(src.dtype) else "float32", _SBUF)
    _impl("memset")(ctx, ones, 1.0)
    if not _is_float(src.dtype):
        as_float = _new(ctx, src.shape, "float32", _SBUF)
        _impl("tensor_copy")(ctx, as_float, src)
        src = as_float
    out = _new(ctx, (parts, src.free_size), t.dtype, _SBUF)
    bank = get_target(ctx.options.target).psum_bank_bytes // 4
    for lo in range(0, src.free_size, bank):
        hi = builtins.min(lo + bank, src.free_size)
        acc = _new(ctx, (parts, hi - lo), "float32", _PSUM)
        _impl("nc_matmul")(ctx, acc, ones, src[:, lo:hi], accumulate=False)
        _impl("tensor_copy")(ctx, out[:, lo:hi], acc)
    return out.reshape(parts, *t.shape[1:])


def _broadcast_shape(fn: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if len(a) != len(b):
        raise NkiError(
            f"nl.{fn}: operands of shapes {a} and {b} have different ranks",
            "NKI broadcasts tiles of the same rank along dims of size 1; reshape or nl.expand_dims one of them",
        )
    out = []
    for d, (m, n) in enumerate(zip(a, b)):
        if m != n and 1 not in (m, n):
            raise NkiError(f"nl.{fn}: shapes {a} and {b} cannot be broadcast (dim {d}: {m} vs {n})")
        out.append(builtins.max(m, n))
    return tuple(out)


def _to_shape(ctx: Any, fn: str, t: NkiTensor, shape: tuple[int, ...]) -> NkiTensor:
    """``t`` as an operand of ``shape``: partition broadcast by TensorE, free broadcast by a stride-0 view."""
    if t.partitions != shape[0]:
        t = _broadcast_partitions(ctx, fn, t, shape[0])
    return _stride0(t, shape) if t.shape != shape else t


def _is_column(t: NkiTensor, parts: int) -> bool:
    """A (P, 1, ...) tile: a per-partition scalar operand of tensor_scalar."""
    return t.partitions == parts and t.free_size == 1


def _binary(ctx: Any, fn: str, op: str, x: Any, y: Any, dtype: Any, result: str | None = None) -> NkiTensor:
    """``x op y`` element-wise with NKI broadcasting (see the module docstring)."""
    x_num, y_num = _is_number(x), _is_number(y)
    if x_num and y_num:
        raise NkiError(f"nl.{fn}: at least one of x, y must be a tile, got two numbers")
    if x_num or y_num:
        tile = _tile(fn, "y" if x_num else "x", y if x_num else x)
        value = x if x_num else y
        out = _new(ctx, tile.shape, _dtype(dtype, result or _scalar_result(tile.dtype, value)))
        _impl("tensor_scalar")(ctx, out, tile, op, _number(value), reverse0=x_num)
        return out
    x, y = _tile(fn, "x", x), _tile(fn, "y", y)
    shape = _broadcast_shape(fn, x.shape, y.shape)
    out = _new(ctx, shape, _dtype(dtype, result or promote(x.dtype, y.dtype)))
    if y.shape != shape and x.shape == shape and _is_column(y, shape[0]):
        _impl("tensor_scalar")(ctx, out, x, op, y)
    elif x.shape != shape and y.shape == shape and _is_column(x, shape[0]):
        _impl("tensor_scalar")(ctx, out, y, op, x, reverse0=True)
    else:
        _impl("tensor_tensor")(ctx, out, _to_shape(ctx, fn, x, shape), _to_shape(ctx, fn, y, shape), op)
    return out


def _activation(ctx: Any, fn: str, func: str, x: Any, dtype: Any, bias: float | None = None) -> NkiTensor:
    x = _tile(fn, "x", x)
    out = _new(ctx, x.shape, _dtype(dtype, x.dtype))
    _impl("activation")(ctx, out, func, x, bias=bias)
    return out


def _scalar_op(ctx: Any, fn: str, x: Any, dtype: Any, op0: str, v0: float, op1: str | None = None,
               v1: float | None = None, out_dtype: str | None = None) -> NkiTensor:  # fmt: skip
    x = _tile(fn, "x", x)
    out = _new(ctx, x.shape, _dtype(dtype, out_dtype or x.dtype))
    _impl("tensor_scalar")(ctx, out, x, op0, v0, op1=op1, operand1=v1)
    return out


def _unsupported(fn: str, why: str, hint: str = "") -> None:
    raise NkiError(f"nl.{fn} is not supported by nkic: {why}", hint)


# -- memory -------------------------------------------------------------------------------------------------
@_export()
def load(ctx: Any, src: NkiTensor, dtype: Any = None, **kw: Any) -> NkiTensor:
    """A new SBUF tile holding ``src`` (an HBM view), cast to ``dtype`` if given (DMA)."""
    _mask(kw)
    if not isinstance(src, NkiTensor):
        raise NkiError(f"nl.load: 'src' must be an HBM tensor, got {type(src).__name__}")
    if src.on_chip:
        raise NkiError(f"nl.load: 'src' is already on chip ({src.buffer})", "use nl.copy for on-chip copies")
    if src.ndim < 2:
        # A rank-1 HBM view (``bias[0:128]``) is a partition vector, as NKI's load reads it: its dim is the partition
        # dim, one element per partition, i.e. a (N, 1) tile (an on-chip tile is never below 2-D); rank 0 is (1, 1).
        pairs = src.pairs if src.ndim == 1 else ((1, 1),)
        src = NkiTensor(src.storage, src.offset, (*pairs, (1, 1)), src.dtype, src.dyn)
    tile = _new(ctx, src.shape, _dtype(dtype, src.dtype))
    _impl("dma_copy")(ctx, tile, src)
    return tile


@_export()
def store(ctx: Any, dst: NkiTensor, value: NkiTensor, **kw: Any) -> None:
    """``dst`` (an HBM view) = ``value`` (an on-chip tile), cast to dst's dtype (DMA; PSUM goes through SBUF)."""
    _mask(kw)
    if not isinstance(dst, NkiTensor) or dst.on_chip:
        where = dst.buffer if isinstance(dst, NkiTensor) else type(dst).__name__
        raise NkiError(f"nl.store: 'dst' must be an HBM tensor, got {where}", "assign on-chip tiles with nl.copy")
    value = _tile("store", "value", value)
    if value.size != dst.size:
        raise NkiError(f"nl.store: value has shape {value.shape} ({value.size} elements), dst {dst.shape} "
                       f"({dst.size} elements)")  # fmt: skip
    _impl("dma_copy")(ctx, dst, _in_sbuf(ctx, value))


def _cast(ctx: Any, tile: NkiTensor, dtype: Any) -> NkiTensor:
    """``tile`` itself, or (another ``dtype`` given) a tensor_copy of it into a new tile of that dtype."""
    want = _dtype(dtype, tile.dtype)
    if want == tile.dtype:
        return tile
    cast = _new(ctx, tile.shape, want)
    _impl("tensor_copy")(ctx, cast, tile)
    return cast


@_export()
def load_transpose2d(ctx: Any, src: NkiTensor, dtype: Any = None, **kw: Any) -> NkiTensor:
    """A new SBUF tile ``src.T`` of a 2-D HBM view (DMA transpose; a cast is a tensor_copy after it)."""
    _mask(kw)
    if not isinstance(src, NkiTensor) or src.on_chip:
        raise NkiError("nl.load_transpose2d: 'src' must be an HBM tensor")
    if src.ndim != 2:
        raise NkiError(f"nl.load_transpose2d: 'src' must be 2-D, got shape {src.shape}")
    tile = _new(ctx, (src.shape[1], src.shape[0]), src.dtype)
    _impl("dma_transpose")(ctx, tile, src)
    return _cast(ctx, tile, dtype)


@_export()
def copy(ctx: Any, x: NkiTensor, dtype: Any = None, **kw: Any) -> NkiTensor:
    """A new SBUF tile with x's values (from SBUF or PSUM), cast to ``dtype`` (ScalarE tensor_copy)."""
    _mask(kw)
    language_rules(ctx, "copy", {"x": x})
    x = _tile("copy", "x", x)
    out = _new(ctx, x.shape, _dtype(dtype, x.dtype))
    if "act" in INSTRUCTIONS["tensor_copy"].engines_on(get_target(ctx.options.target).nc_version):
        _impl("tensor_copy")(ctx, out, x, engine="scalar")
    else:  # "On NeuronCore v2, tensor_copy is not supported on the Scalar Engine. Instead, use nisa.activation"
        _impl("activation")(ctx, out, "copy", x)
    return out


@_export()
def shared_identity_matrix(ctx: Any, n: int, dtype: Any = "uint8", dst: NkiTensor | None = None) -> NkiTensor:
    """An (n, n) identity tile in SBUF: ``iota(j - p) == 0`` (GpSimd iota, then a tensor_scalar compare)."""
    n = int(n)
    want = _dtype(dtype, "uint8")
    if dst is None:
        dst = _new(ctx, (n, n), want)
    elif not isinstance(dst, NkiTensor) or dst.shape != (n, n):
        raise NkiError(f"nl.shared_identity_matrix: dst must be an ({n}, {n}) tile")
    diff = _new(ctx, (n, n), "int32")
    _impl("iota")(ctx, diff, [[1, n]], offset=0, channel_multiplier=-1)
    _impl("tensor_scalar")(ctx, dst, diff, "equal", 0.0)
    return dst


@_export()
def shared_constant(ctx: Any, constant: Any, **_: Any) -> NkiTensor:
    """A shared_hbm tensor holding ``constant`` (a numpy array, or the path of a ``.npy`` file), embedded in the
    NEFF and loaded into HBM before the kernel runs."""
    if isinstance(constant, (str, os.PathLike)):
        try:
            constant = np.load(constant, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise NkiError(f"nl.shared_constant: cannot read {str(constant)!r} as a .npy file ({e})") from None
    if isinstance(constant, NkiTensor) or not isinstance(constant, np.ndarray):
        raise NkiError(f"nl.shared_constant needs a numpy array or a .npy path, got {type(constant).__name__}")
    if constant.ndim == 0 or constant.size == 0:
        raise NkiError(f"nl.shared_constant needs a non-empty array with at least one dimension, got {constant.shape}")
    return ctx.constant(constant)


# -- math: binary -------------------------------------------------------------------------------------------
def _binary_function(name: str, op: str, result: str | None = None, since: int = 2) -> None:
    def impl(ctx: Any, x: Any, y: Any, dtype: Any = None, **kw: Any) -> NkiTensor:
        _mask(kw)
        language_rules(ctx, name, {"x": x, "y": y}, x=x, y=y)  # abs_max/abs_min: gen4 (target/rules/language.py)
        return _binary(ctx, name, op, x, y, dtype, result)

    impl.__doc__ = f"``x {op} y`` element-wise (tensor_tensor, or tensor_scalar for a number / (P, 1) tile)."
    impl.__name__ = name
    globals()[name] = _export(name)(impl)


# Every ALU op whose record says it is a binary tile function (target/vocab.py ALU_RECORDS): nl.add(x, y), ...
for _alu in ALU_RECORDS:
    if _alu.tile_function:
        _binary_function(_alu.name, _alu.name)


@_export()
def fmod(ctx: Any, x: Any, y: Any, dtype: Any = None, **kw: Any) -> NkiTensor:
    """``x - trunc(x / y) * y`` (the sign of x), as ``sign(x) * (|x| mod |y|)``: the ALU's mod is floored, and on
    magnitudes floored and truncated agree. VectorE ``abs``/``mod`` stages (tensor_scalar or scalar_tensor_tensor,
    with ``|y|`` from a tensor_scalar when y is a tile), the ScalarE ``sign`` of x and a tensor_tensor multiply;
    fp32 throughout, cast to the result dtype at the end."""
    _mask(kw)
    x_num, y_num = _is_number(x), _is_number(y)
    if x_num and y_num:
        raise NkiError("nl.fmod: at least one of x, y must be a tile, got two numbers")
    if x_num:  # a number x broadcasts to y's shape: sign(x) * (|x| mod |y|), one tensor_scalar
        t = _tile("fmod", "y", y)
        value = _number(x)
        out = _new(ctx, t.shape, _dtype(dtype, _scalar_result(t.dtype, value)))
        sign_ = math.copysign(1.0, value)
        _impl("tensor_scalar")(ctx, out, t, "abs", 0.0, op1="mod", operand1=builtins.abs(value), reverse1=True)
        if sign_ < 0:
            _impl("tensor_scalar")(ctx, out, out, "multiply", -1.0)
        return out
    t = _tile("fmod", "x", x)
    if y_num:
        shape, want = t.shape, _scalar_result(t.dtype, y)
        magnitude = _new(ctx, shape, "float32")
        _impl("tensor_scalar")(ctx, magnitude, t, "abs", 0.0, op1="mod", operand1=builtins.abs(_number(y)))
    else:
        u = _tile("fmod", "y", y)
        shape, want = _broadcast_shape("fmod", t.shape, u.shape), promote(t.dtype, u.dtype)
        t, u = _to_shape(ctx, "fmod", t, shape), _to_shape(ctx, "fmod", u, shape)
        abs_y = _new(ctx, shape, "float32")
        _impl("tensor_scalar")(ctx, abs_y, u, "abs", 0.0)
        magnitude = _new(ctx, shape, "float32")
        _impl("scalar_tensor_tensor")(ctx, magnitude, t, "abs", 0.0, "mod", abs_y)
    sign_ = _new(ctx, shape, "float32")
    _impl("activation")(ctx, sign_, "sign", t)
    out = _new(ctx, shape, _dtype(dtype, want))
    _impl("tensor_tensor")(ctx, out, magnitude, sign_, "multiply")
    return out


# -- math: unary --------------------------------------------------------------------------------------------
def _activation_function(name: str) -> None:
    def impl(ctx: Any, x: Any, dtype: Any = None, **kw: Any) -> NkiTensor:
        _mask(kw)
        return _activation(ctx, name, name, x, dtype)

    impl.__doc__ = f"``{name}(x)`` element-wise (one ScalarE activation)."
    impl.__name__ = name
    globals()[name] = _export(name)(impl)


for _name in ("exp", "log", "tanh", "sigmoid", "relu", "gelu", "gelu_apprx_tanh", "gelu_apprx_sigmoid", "silu",
              "square", "sqrt", "rsqrt", "reciprocal", "abs", "sign", "softplus", "erf", "arctan", "mish", "gelu_dx",
              "gelu_apprx_sigmoid_dx", "silu_dx", "erf_dx"):  # fmt: skip
    assert _name in ACT_FUNCS, _name
    _activation_function(_name)


@_export()
def prelu(ctx: Any, x: Any, relu_param: Any = 0.0, dtype: Any = None, **kw: Any) -> NkiTensor:
    """``x`` where ``x >= 0``, else ``relu_param * x``; ``relu_param`` (alias ``alpha``) is a number, a (P, 1) tile or
    a tile broadcastable to x (0 gives relu).

    On gen4 a number or (P, 1) slope is one ScalarE ``activate2`` with ``op=nl.prelu`` (the only instruction with a
    relu_param); otherwise VectorE computes ``max(x, 0) + relu_param * min(x, 0)`` — the same fp32 values — with a
    tensor_scalar (or a tensor_scalar and a tensor_tensor for a full slope tile) and a scalar_tensor_tensor."""
    _mask(kw)
    alpha = kw.get("alpha", relu_param)
    t = _tile("prelu", "x", x)
    out = _new(ctx, t.shape, _dtype(dtype, t.dtype))
    column = isinstance(alpha, NkiTensor) and _is_column(alpha, t.partitions)
    if not (_is_number(alpha) or isinstance(alpha, NkiTensor)):
        raise NkiError(f"nl.prelu: relu_param must be a number or a tile, got {type(alpha).__name__}")
    if get_target(ctx.options.target).nc_version >= 4 and (_is_number(alpha) or column):
        slope = _number(alpha) if _is_number(alpha) else _flat(ctx, _tile("prelu", "relu_param", alpha))
        _impl("activate2")(ctx, out, "prelu", t, 0.0, 0.0, "bypass", "bypass", relu_param=slope)
        return out
    negative = _new(ctx, t.shape, "float32")
    if _is_number(alpha) or column:
        slope = _number(alpha) if _is_number(alpha) else _flat(ctx, alpha)
        _impl("tensor_scalar")(ctx, negative, t, "minimum", 0.0, op1="multiply", operand1=slope)
    else:
        a = _tile("prelu", "relu_param", alpha)
        if _broadcast_shape("prelu", t.shape, a.shape) != t.shape:
            raise NkiError(f"nl.prelu: relu_param of shape {a.shape} does not broadcast to x's {t.shape}")
        below = _new(ctx, t.shape, "float32")
        _impl("tensor_scalar")(ctx, below, t, "minimum", 0.0)
        _impl("tensor_tensor")(ctx, negative, below, _to_shape(ctx, "prelu", a, t.shape), "multiply")
    _impl("scalar_tensor_tensor")(ctx, out, t, "maximum", 0.0, "add", negative)
    return out


@_export()
def negative(ctx: Any, x: Any, dtype: Any = None, **_: Any) -> NkiTensor:
    """``-x`` (tensor_scalar multiply by -1)."""
    return _scalar_op(ctx, "negative", x, dtype, "multiply", -1.0)


@_export()
def logical_not(ctx: Any, x: Any, dtype: Any = None, **_: Any) -> NkiTensor:
    """``x == 0`` for 0/1 inputs, as NKI defines it: XOR with 1 (tensor_scalar logical_xor)."""
    return _scalar_op(ctx, "logical_not", x, dtype, "logical_xor", 1.0)


@_export()
def invert(ctx: Any, x: Any, dtype: Any = None, **_: Any) -> NkiTensor:
    """``~x`` for integer tiles: XOR with all ones (tensor_scalar bitwise_xor)."""
    language_rules(ctx, "invert", {"x": _tile("invert", "x", x)})
    return _scalar_op(ctx, "invert", x, dtype, "bitwise_xor", -1.0)


def _floor_into(ctx: Any, out: NkiTensor, x: NkiTensor) -> None:
    # floor(x) = x - mod(x, 1): the ALU mod is floored (result in [0, 1)), the subtraction is exact.
    _impl("scalar_tensor_tensor")(ctx, out, x, "mod", 1.0, "subtract", x, reverse1=True)


@_export()
def floor(ctx: Any, x: Any, dtype: Any = None, **_: Any) -> NkiTensor:
    """``floor(x)`` = ``x - mod(x, 1)`` (one scalar_tensor_tensor)."""
    x = _tile("floor", "x", x)
    out = _new(ctx, x.shape, _dtype(dtype, x.dtype))
    _floor_into(ctx, out, x)
    return out


@_export()
def ceil(ctx: Any, x: Any, dtype: Any = None, **_: Any) -> NkiTensor:
    """``ceil(x)`` = ``x + mod(-x, 1)`` (tensor_scalar, then tensor_tensor)."""
    x = _tile("ceil", "x", x)
    frac = _new(ctx, x.shape, "float32")
    _impl("tensor_scalar")(ctx, frac, x, "multiply", -1.0, op1="mod", operand1=1.0)
    out = _new(ctx, x.shape, _dtype(dtype, x.dtype))
    _impl("tensor_tensor")(ctx, out, x, frac, "add")
    return out


@_export()
def trunc(ctx: Any, x: Any, dtype: Any = None, **_: Any) -> NkiTensor:
    """``trunc(x)`` = ``sign(x) * floor(|x|)`` (ScalarE abs and sign, a floor, a tensor_tensor multiply)."""
    x = _tile("trunc", "x", x)
    magnitude = _activation(ctx, "trunc", "abs", x, "float32")
    whole = _new(ctx, x.shape, "float32")
    _floor_into(ctx, whole, magnitude)
    sign_ = _activation(ctx, "trunc", "sign", x, "float32")
    return _binary(ctx, "trunc", "multiply", whole, sign_, _dtype(dtype, x.dtype))


def _sin_shifted(ctx: Any, fn: str, x: Any, shift: float, dtype: Any) -> NkiTensor:
    """``sin(x + shift)``: ScalarE's sin is only valid on [-pi, pi], so reduce ``x + shift + pi`` modulo 2pi into
    [0, 2pi) first (tensor_scalar add, mod) and take the sin with a bias of -pi."""
    x = _tile(fn, "x", x)
    reduced = _new(ctx, x.shape, "float32")
    _impl("tensor_scalar")(ctx, reduced, x, "add", shift + _PI, op1="mod", operand1=2 * _PI)
    return _activation(ctx, fn, "sin", reduced, _dtype(dtype, x.dtype), bias=-_PI)


@_export()
def sin(ctx: Any, x: Any, dtype: Any = None, **_: Any) -> NkiTensor:
    """``sin(x)`` for any x (range reduction, then the ScalarE sin)."""
    return _sin_shifted(ctx, "sin", x, 0.0, dtype)


@_export()
def cos(ctx: Any, x: Any, dtype: Any = None, **_: Any) -> NkiTensor:
    """``cos(x) = sin(x + pi/2)`` (range reduction, then the ScalarE sin)."""
    return _sin_shifted(ctx, "cos", x, _PI / 2, dtype)


@_export()
def tan(ctx: Any, x: Any, dtype: Any = None, **_: Any) -> NkiTensor:
    """``sin(x) / cos(x)`` (two range-reduced sines and a tensor_tensor divide)."""
    t = _tile("tan", "x", x)
    s = _sin_shifted(ctx, "tan", t, 0.0, "float32")
    c = _sin_shifted(ctx, "tan", t, _PI / 2, "float32")
    return _binary(ctx, "tan", "divide", s, c, _dtype(dtype, t.dtype))


# -- reductions ---------------------------------------------------------------------------------------------
def _reduce_axes(fn: str, x: NkiTensor, axis: Any) -> tuple[int, ...]:
    raw = [axis] if isinstance(axis, int) else list(axis) if isinstance(axis, (tuple, list)) else None
    if not raw:
        raise NkiError(f"nl.{fn}: axis must be an int or a non-empty list of ints, got {axis!r}")
    axes = []
    for a in raw:
        a = int(a)
        if not -x.ndim <= a < x.ndim:
            raise NkiError(f"nl.{fn}: axis {a} is out of range for a tile of shape {x.shape}")
        axes.append(a % x.ndim)
    axes = sorted(set(axes))
    language_rules(None, fn, {"x": x}, axes=tuple(axes))
    if 0 in axes:
        raise NkiError(f"nl.{fn}: cannot reduce along the partition axis 0", "reduce free axes only")
    return tuple(axes)


def _reduced_last(x: NkiTensor, axes: tuple[int, ...]) -> tuple[NkiTensor, list[int]]:
    """``x`` viewed with the ``axes`` to reduce moved behind the kept free dims, and their positions there.

    ``nisa.tensor_reduce`` reduces trailing free axes only; the language-level reductions take any free axes
    (pooling kernels reduce ``axis=(2, 4)`` of a rank-5 tile), as the device compiler does by permuting. A free dim's
    order is only its place in the access pattern, so the permutation is a view: no data moves, and the kept dims
    keep their relative order, which is the result's layout."""
    trailing = list(range(x.ndim - len(axes), x.ndim))
    if list(axes) == trailing:
        return x, trailing
    kept = [d for d in range(1, x.ndim) if d not in axes]
    order = [0, *kept, *axes]
    view = NkiTensor(x.storage, x.offset, tuple(x.pairs[d] for d in order), x.dtype, x.dyn)
    return view, trailing


def _reduced_shape(x: NkiTensor, axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    kept = tuple(n for d, n in enumerate(x.shape) if d not in axes)
    return kept if len(kept) >= 2 else (*kept, 1)  # an on-chip tile never goes below 2-D


def _reduce(ctx: Any, fn: str, op: str, x: Any, axis: Any, dtype: Any, keepdims: bool,
            out_dtype: str | None = None) -> NkiTensor:  # fmt: skip
    x = _tile(fn, "x", x)
    axes = _reduce_axes(fn, x, axis)
    out = _new(ctx, _reduced_shape(x, axes, bool(keepdims)), _dtype(dtype, out_dtype or x.dtype))
    data, last = _reduced_last(x, axes)
    _impl("tensor_reduce")(ctx, out, op, data, last, keepdims=bool(keepdims))
    return out


def _reduce_function(name: str, op: str) -> None:
    def impl(ctx: Any, x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **kw: Any) -> NkiTensor:
        _mask(kw)
        return _reduce(ctx, name, op, x, axis, dtype, keepdims)

    impl.__doc__ = f"Reduce ``x`` with {op} over any free axes (one tensor_reduce of a permuted view)."
    impl.__name__ = name
    globals()[name] = _export(name)(impl)


for _name, _op in (("sum", "add"), ("max", "maximum"), ("min", "minimum"), ("prod", "multiply")):
    _reduce_function(_name, _op)


@_export()
def all(ctx: Any, x: Any, axis: Any, dtype: Any = None, **_: Any) -> NkiTensor:  # noqa: A001
    """Logical AND over free axes (tensor_reduce logical_and; 1/0 in the input dtype)."""
    return _reduce(ctx, "all", "logical_and", x, axis, dtype, False)


def _mean_into(ctx: Any, fn: str, x: NkiTensor, axis: Any, dtype: str, keepdims: bool) -> NkiTensor:
    total = _reduce(ctx, fn, "add", x, axis, "float32", keepdims)
    count = x.size // total.size
    out = _new(ctx, total.shape, dtype)
    _impl("tensor_scalar")(ctx, out, total, "multiply", 1.0 / count)
    return out


@_export()
def mean(ctx: Any, x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **_: Any) -> NkiTensor:
    """Sum in float32 (tensor_reduce), then multiply by 1/n (tensor_scalar)."""
    x = _tile("mean", "x", x)
    return _mean_into(ctx, "mean", x, axis, _dtype(dtype, x.dtype), bool(keepdims))


@_export()
def var(ctx: Any, x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **_: Any) -> NkiTensor:
    """Population variance ``mean((x - mean(x))^2)`` in float32; like NKI the result always keeps the reduced dims."""
    x = _tile("var", "x", x)
    mu = _mean_into(ctx, "var", x, axis, "float32", True)
    centred = _binary(ctx, "var", "subtract", x, mu, "float32")
    sq = _binary(ctx, "var", "multiply", centred, centred, "float32")
    return _mean_into(ctx, "var", sq, axis, _dtype(dtype, x.dtype), True)


# -- matmul and transpose -----------------------------------------------------------------------------------
def _transpose_to_psum(ctx: Any, fn: str, x: NkiTensor, dtype: str) -> NkiTensor:
    src = _flat(ctx, _in_sbuf(ctx, x))
    if src.partitions > 128 or src.free_size > 128:
        raise NkiError(f"nl.{fn}: a TensorE transpose takes at most 128x128, got {x.shape}")
    out = _new(ctx, (src.free_size, src.partitions), dtype, _PSUM)
    _impl("nc_transpose")(ctx, out, src, engine="tensor")
    return out


@_export()
def transpose(ctx: Any, x: Any, dtype: Any = None, **kw: Any) -> NkiTensor:
    """``x.T`` of a 2-D tile, in PSUM (TensorE nc_transpose)."""
    _mask(kw)
    x = _tile("transpose", "x", x)
    if x.ndim != 2:
        raise NkiError(f"nl.transpose: expected a 2-D tile, got shape {x.shape}")
    return _transpose_to_psum(ctx, "transpose", x, _dtype(dtype, x.dtype))


@_export()
def matmul(ctx: Any, x: Any, y: Any, transpose_x: bool = False, **kw: Any) -> NkiTensor:
    """``x @ y`` (``x.T @ y`` with ``transpose_x``) into a new float32 PSUM tile (TensorE nc_matmul; without
    ``transpose_x`` x is first transposed on TensorE so that the contraction dim is its partition dim)."""
    _mask(kw)
    x, y = _tile("matmul", "x", x), _tile("matmul", "y", y)
    if x.ndim != 2 or y.ndim != 2:
        raise NkiError(f"nl.matmul: expected 2-D tiles, got shapes {x.shape} and {y.shape}")
    language_rules(ctx, "matmul", {"x": x, "y": y}, transpose_x=bool(transpose_x))
    stationary = x if transpose_x else _transpose_to_psum(ctx, "matmul", x, x.dtype)
    k, m = stationary.shape
    if y.shape[0] != k:
        spelled = "x.T @ y" if transpose_x else "x @ y"
        raise NkiError(f"nl.matmul: {spelled} needs y with {k} rows (the contraction dim), got shape {y.shape}")
    out = _new(ctx, (m, y.shape[1]), "float32", _PSUM)
    st, mv = _in_sbuf(ctx, stationary), _in_sbuf(ctx, y)
    # nc_matmul: "if one of the input tiles is tfloat32/float32, the other tile must also be tfloat32/float32": the
    # other is widened (exactly) rather than the float32 one narrowed
    fp32 = ("float32", "tfloat32")
    if (st.dtype in fp32) != (mv.dtype in fp32):
        st, mv = (_widened(ctx, st), mv) if mv.dtype in fp32 else (st, _widened(ctx, mv))
    _impl("nc_matmul")(ctx, out, st, mv)
    note_fresh_result(ctx, out, lambda acc: _impl("nc_matmul")(ctx, acc, st, mv, accumulate=True))  # `psum += ...`
    return out


def _widened(ctx: Any, t: NkiTensor) -> NkiTensor:
    """A float32 SBUF copy of ``t``."""
    wide = _new(ctx, t.shape, "float32")
    _impl("tensor_copy")(ctx, wide, t)
    return wide


# -- shape and selection ------------------------------------------------------------------------------------
@_export()
def broadcast_to(ctx: Any, x: Any = None, shape: Sequence[int] | None = None, dtype: Any = None, src: Any = None,
                 **_: Any) -> NkiTensor:  # fmt: skip
    """A new SBUF tile of ``shape`` repeating x's size-1 dims (same rank): free dims by a tensor_copy of a
    stride-0 view, the partition dim through TensorE (see ``_broadcast_partitions``). ``src=`` is the legacy name
    of ``x`` (``nl.broadcast_to(src, *, shape)``)."""
    if (x is None) == (src is None):
        raise NkiError("nl.broadcast_to: give the tile to broadcast once, as x (or the legacy src=)")
    if shape is None:
        raise NkiError("nl.broadcast_to: missing the target shape=")
    x = _tile("broadcast_to", "x", x if src is None else src)
    target = tuple(int(d) for d in shape)
    language_rules(ctx, "broadcast_to", {"x": x}, x_shape=x.shape, shape=target)
    want = _dtype(dtype, x.dtype)
    if _broadcast_shape("broadcast_to", x.shape, target) != target:
        raise NkiError(f"nl.broadcast_to: cannot broadcast shape {x.shape} to {target}")
    if x.shape == target and want == x.dtype:
        return x
    src = _to_shape(ctx, "broadcast_to", x, target)
    if src.storage is not x.storage and src.shape == target and src.dtype == want and src.is_contiguous():
        return src  # the partition broadcast already made a fresh tile of the right shape
    out = _new(ctx, target, want)
    _impl("tensor_copy")(ctx, out, src)
    return out


@_export()
def expand_dims(ctx: Any, x: Any, axis: Any, **_: Any) -> NkiTensor:
    """A view of x with a new size-1 dim at ``axis`` (no data moves; on-chip tiles keep dim 0 as partitions)."""
    if not isinstance(x, NkiTensor):
        raise NkiError(f"nl.expand_dims: 'x' must be a tensor, got {type(x).__name__}")
    axes = [axis] if isinstance(axis, int) else list(axis)
    pairs = list(x.pairs)
    ndim = x.ndim + len(axes)
    for a in sorted(int(a) % ndim for a in axes):
        if a == 0 and x.on_chip:
            raise NkiError("nl.expand_dims: cannot insert a dim before the partition dim of an on-chip tile")
        pairs.insert(a, (1, 1))
    return NkiTensor(x.storage, x.offset, tuple(pairs), x.dtype)


@_export()
def where(ctx: Any, condition: Any, x: Any, y: Any, dtype: Any = None, **_: Any) -> NkiTensor:
    """``condition ? x : y`` for a 1.0/0.0 condition tile, as ``c*x + (1-c)*y``: exact for finite values (an inf or
    NaN in the unselected operand turns into NaN; nkic has no select instruction to avoid that)."""
    c = _tile("where", "condition", condition)
    picked = _binary(ctx, "where", "multiply", c, x, "float32")
    if _is_number(y):
        other = _scalar_op(ctx, "where", c, "float32", "subtract", 1.0, "multiply", -_number(y))
    else:
        other = _binary(ctx, "where", "multiply", _binary(ctx, "where", "subtract", 1.0, c, "float32"), y, "float32")
    default = x.dtype if isinstance(x, NkiTensor) else y.dtype if isinstance(y, NkiTensor) else c.dtype
    return _binary(ctx, "where", "add", picked, other, _dtype(dtype, default))


@_export()
def gather_flattened(ctx: Any, data: Any, indices: Any, axis: int = 0, dtype: Any = None, **_: Any) -> NkiTensor:
    """``out[p, i...] = data[p, flat(indices[p, i...])]``: per partition, the element of data's flattened free dims
    at each index (``np.take_along_axis`` over the flattened free dims), shaped like ``indices``. One GpSimd
    ``nc_n_gather``, after copies that bring PSUM operands to SBUF and integer indices to uint32 (a negative index
    wraps, so it is out of range); a ``dtype`` other than data's is a ``tensor_copy`` of the result.

    ``axis`` is checked to be an axis of ``data`` but does not change the result: NKI's own example gathers along
    the free dim with the default ``axis=0``."""
    data, indices = _tile("gather_flattened", "data", data), _tile("gather_flattened", "indices", indices)
    if not -data.ndim <= int(axis) < data.ndim:
        raise NkiError(f"nl.gather_flattened: axis {axis} is out of range for a rank-{data.ndim} tile")
    if _is_float(indices.dtype):
        raise NkiError(f"nl.gather_flattened: indices must have an integer dtype, got {indices.dtype}")
    if indices.partitions != data.partitions:
        raise NkiError(f"nl.gather_flattened: indices have {indices.partitions} partitions, data has "
                       f"{data.partitions}", "the gather works within each partition")  # fmt: skip
    src = _in_sbuf(ctx, data)
    idx = indices
    if idx.dtype != "uint32" or idx.buffer != "sbuf":
        idx = _new(ctx, indices.shape, "uint32")
        _impl("tensor_copy")(ctx, idx, indices)
    out = _new(ctx, indices.shape, data.dtype)
    _impl("nc_n_gather")(ctx, out, src, idx)
    return _cast(ctx, out, dtype)


# -- composites ---------------------------------------------------------------------------------------------
@_export()
def softmax(ctx: Any, x: Any, axis: Any = -1, dtype: Any = None, **_: Any) -> NkiTensor:
    """``exp(x - max) / sum(exp(x - max))`` over free axes, in float32: a negated tensor_reduce max, one
    ScalarE exp with that bias and a sum reduction, VectorE reciprocal, tensor_scalar multiply (over only some
    free dims: reduce, subtract, exp, reduce, reciprocal, multiply with broadcasting)."""
    x = _tile("softmax", "x", x)
    axes = _reduce_axes("softmax", x, axis)
    if len(axes) == x.ndim - 1:
        # Every free dim is reduced, so max and sum are (P, 1) columns: the hand-written form — a negated max
        # as the exp's bias, the sum accumulated by the same ScalarE activation.
        neg_max = _new(ctx, _reduced_shape(x, axes, True), "float32")
        _impl("tensor_reduce")(ctx, neg_max, "maximum", x, list(axes), negate=True, keepdims=True)
        e = _new(ctx, x.shape, "float32")
        s = _new(ctx, neg_max.shape, "float32")
        _impl("activation_reduce")(ctx, e, "exp", x, "add", s, bias=neg_max)
    else:
        m = _reduce(ctx, "softmax", "maximum", x, axis, "float32", True)
        e = _activation(ctx, "softmax", "exp", _binary(ctx, "softmax", "subtract", x, m, "float32"), "float32")
        s = _reduce(ctx, "softmax", "add", e, axis, "float32", True)
    r = _new(ctx, s.shape, "float32")
    _impl("reciprocal")(ctx, r, s)
    return _binary(ctx, "softmax", "multiply", e, r, _dtype(dtype, x.dtype))


@_export()
def rms_norm(ctx: Any, x: Any, w: Any, axis: Any, n: Any, epsilon: float = 1e-6, dtype: Any = None,
             compute_dtype: Any = None, **_: Any) -> NkiTensor:  # fmt: skip
    """``x / sqrt(sum(x^2) / n + epsilon) * w``: ScalarE square, tensor_reduce add, tensor_scalar (1/n, +eps),
    ScalarE rsqrt, then two broadcasting multiplies."""
    x = _tile("rms_norm", "x", x)
    work = _dtype(compute_dtype, "float32")
    sq = _activation(ctx, "rms_norm", "square", x, work)
    ss = _reduce(ctx, "rms_norm", "add", sq, axis, work, True)
    ms = _scalar_op(ctx, "rms_norm", ss, work, "multiply", 1.0 / float(n), "add", float(epsilon))
    inv = _activation(ctx, "rms_norm", "rsqrt", ms, work)
    normed = _binary(ctx, "rms_norm", "multiply", x, inv, work)
    return _binary(ctx, "rms_norm", "multiply", normed, w, _dtype(dtype, x.dtype))


@_export()
def dropout(ctx: Any, x: Any, rate: Any, dtype: Any = None, **_: Any) -> NkiTensor:
    """``x`` with each element zeroed with probability ``rate`` (a number or a (P, 1) tile): ``nisa.dropout`` on
    VectorE's PRNG. The kept elements are not rescaled (the docs name no scaling); another ``dtype`` is a
    ``tensor_copy`` after it."""
    x = _tile("dropout", "x", x)
    out = _new(ctx, x.shape, x.dtype)
    _impl("dropout")(ctx, out, x, rate)
    return _cast(ctx, out, dtype)


@_export()
def rand(ctx: Any, shape: Any, dtype: Any, buffer: Any = _SBUF, name: str = "", **_: Any) -> NkiTensor:
    """A new tile uniform in [0, 1), from VectorE's PRNG (seeded by ``nl.random_seed``): ``nisa.rng`` into uint32,
    a shift keeping the top ``b`` bits (``b`` = the dtype's significand digits, so that every ``k / 2^b`` is exact
    and below 1 in the dtype: 24 for float32, 8 for bfloat16, 11 for float16, 4/3 for fp8), then ``* 2^-b``."""
    want = normalize_dtype(dtype)
    if want not in FLOAT_DTYPES:
        raise NkiError(f"nl.rand: dtype must be a float type (values in [0, 1)), got {want}",
                       "nisa.rng writes random integer bits")  # fmt: skip
    out = ctx.allocate(tuple(shape), want, buffer, name, None)
    if not out.on_chip:
        raise NkiError("initial values on HBM tensors are not supported", "fill an SBUF tile and dma_copy it")
    digits = int(ml_dtypes.finfo(DTYPES[want]).nmant) + 1
    bits = _new(ctx, out.shape, "uint32")
    _impl("rng")(ctx, bits)
    _impl("tensor_scalar")(ctx, bits, bits, "right_shift", float(32 - digits))
    _impl("tensor_scalar")(ctx, out, bits, "multiply", 2.0**-digits)
    return out


@_export()
def random_seed(ctx: Any, seed: Any) -> None:
    """Seed VectorE's PRNG (``nl.rand``, ``nl.dropout``) from a [1, 1] 32-bit tensor (``nisa.set_rng_seed``); an HBM
    seed is loaded into SBUF first."""
    if isinstance(seed, NkiTensor) and not seed.on_chip:
        tile = _new(ctx, seed.shape, seed.dtype)
        _impl("dma_copy")(ctx, tile, seed)
        seed = tile
    _impl("set_rng_seed")(ctx, seed)


def _broadcast_method(t: NkiTensor, shape: Any) -> NkiTensor:
    """``t.broadcast_to(shape)``, lent to the tensor model (``tensor.BROADCAST_TO``): ``nl.broadcast_to``, traced as a
    call of it."""
    return broadcast_to(t, shape=shape)  # type: ignore[no-any-return]


_tensor.BROADCAST_TO = _broadcast_method
