"""Numerics of the simulated engines: ALU ops, reductions, activation functions and dtype casts.

Float math is float32 (activation functions are evaluated in float64 and rounded to float32, standing in for the
ScalarE polynomials); "integer mode" arrays are int64 holding exact integer values.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np

from nkic.runtime.errors import SimulationError
from nkic.target.vocab import ALU_RECORDS, DTYPES

Array = np.ndarray

# The ALU ops' flags, from their records (target/vocab.py ALU_RECORDS).
BITVEC_OPS = frozenset(r.name for r in ALU_RECORDS if r.bitvec)
UNARY_OPS = frozenset(r.name for r in ALU_RECORDS if r.unary)
# Ops whose integer-mode result is still an exact integer; anything else is evaluated in float32.
INT_EXACT_OPS = frozenset(r.name for r in ALU_RECORDS if r.int_exact)


def is_int_dtype(dtype: str) -> bool:
    return DTYPES[dtype].kind in "iu"


def as_int(x: Array) -> Array:
    """Integer image used by bit-vector ops: floats are truncated (NaN -> 0, saturating), ints kept exactly."""
    x = np.asarray(x)
    if x.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            v = np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0.0, posinf=2.0**62, neginf=-(2.0**62))
        return np.clip(v, -(2.0**62), 2.0**62).astype(np.int64)
    return x.astype(np.int64)


def cast(values: Array, dtype: str) -> Array:
    """Convert engine results to a storage dtype.

    Float -> int rounds half-to-even and saturates (NaN -> 0) (a guess: the hardware rule is unpublished);
    int -> int wraps like two's-complement hardware; float -> float rounds to nearest even (ml_dtypes for bf16/fp8).
    """
    dt = DTYPES[dtype]
    values = np.asarray(values)
    if dt.kind in "iu":
        if values.dtype.kind == "f":
            info = np.iinfo(dt)
            with np.errstate(invalid="ignore"):
                v = np.nan_to_num(np.rint(values.astype(np.float64)), nan=0.0)
            return np.clip(v, info.min, info.max).astype(dt)
        return values.astype(np.int64).astype(dt)
    return values.astype(dt)


# The ALU ops' arithmetic is their records' (target/vocab.py ALU_RECORDS), as their flags are.
ALU_FUNCS: dict[str, Callable[[Array, Array], Array]] = {r.name: r.fn for r in ALU_RECORDS}


def alu(op: str, a: Array, b: Array) -> Array:
    """``a op b``. Both operands are float32, or both int64 ("integer mode"); bit-vector ops always use integers."""
    if op not in ALU_FUNCS:
        raise SimulationError(f"unsupported ALU op '{op}'")
    a, b = np.asarray(a), np.asarray(b)
    if op in BITVEC_OPS:
        a, b = as_int(a), as_int(b)
    elif a.dtype.kind in "iu" and b.dtype.kind in "iu" and op not in INT_EXACT_OPS:
        a, b = a.astype(np.float32), b.astype(np.float32)
    elif a.dtype.kind != b.dtype.kind:
        a, b = a.astype(np.float32), b.astype(np.float32)
    with np.errstate(all="ignore"):
        return np.asarray(ALU_FUNCS[op](a, b))


def scalar_step(op: str, data: Array, scalar: Array, reverse: bool) -> Array:
    """One tensor_scalar stage; ``reverse`` puts the scalar on the left. Bypass and unary ops ignore the scalar."""
    if reverse and op != "bypass" and op not in UNARY_OPS:
        return alu(op, scalar, data)
    return alu(op, data, scalar)


_UFUNC_REDUCERS: dict[str, np.ufunc] = {
    "add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
}  # fmt: skip
_LOGICAL_REDUCERS: dict[str, np.ufunc] = {
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}  # fmt: skip
REDUCE_IDENTITY: dict[str, float] = {"add": 0.0, "multiply": 1.0, "maximum": -math.inf, "minimum": math.inf,
                                     "abs_max": 0.0, "abs_min": math.inf}


def reduce_last(op: str, x: Array) -> Array:
    """Reduce the last axis of ``x`` with ALU op ``op``."""
    if op in BITVEC_OPS:
        x = as_int(x)
    if op in _UFUNC_REDUCERS:
        return _UFUNC_REDUCERS[op].reduce(x, axis=-1)
    if op in _LOGICAL_REDUCERS:
        return _LOGICAL_REDUCERS[op].reduce(x != 0, axis=-1).astype(x.dtype)
    if op == "average":  # the mean: an exact sum (int64 in integer mode, fp32 otherwise) over the count
        total = np.add.reduce(x, axis=-1)
        return total / x.shape[-1] if x.dtype.kind == "f" else total.astype(np.float64) / x.shape[-1]
    if op in ("abs_max", "abs_min"):
        pick = np.argmax if op == "abs_max" else np.argmin
        idx = pick(np.abs(x), axis=-1)[..., None]
        return np.take_along_axis(x, idx, axis=-1)[..., 0]
    raise SimulationError(f"ALU op '{op}' cannot be used as a reduction")


def reduce_identity(op: str) -> float:
    if op not in REDUCE_IDENTITY:
        raise SimulationError(f"reduce op '{op}' has no identity for a register reset")
    return REDUCE_IDENTITY[op]


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x: Array) -> Array:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # tanh form does not overflow for large |x|


# Odd Taylor polynomial through x^17: |error| < 3e-8 on [-pi, pi]. Evaluated without range reduction, so inputs
# outside [-pi, pi] give garbage as on ScalarE (the NKI docs' example: sin(9.0) ≈ 27.65); the exact garbage is unknown (a guess).
_SIN_COEFFS = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(9))


def _sin_poly(x: Array) -> Array:
    x2 = x * x
    acc = np.zeros_like(x)
    for c in reversed(_SIN_COEFFS):
        acc = acc * x2 + c
    return acc * x


def _softplus(x: Array) -> Array:
    return np.logaddexp(0.0, x)


_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_SIGMOID_K = 1.702  # gelu_apprx_sigmoid(x) = x * sigmoid(1.702 x)


def _gelu_dx(x: Array) -> Array:
    """d/dx [x Φ(x)] = Φ(x) + x φ(x), Φ/φ the standard normal CDF/PDF (the derivative of the erf ``gelu``)."""
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * _INV_SQRT_2PI * np.exp(-0.5 * x * x)


def _sigmoid_product_dx(x: Array, k: float) -> Array:
    """d/dx [x σ(kx)] = σ(kx) + k x σ(kx)(1 - σ(kx)) (silu_dx for k = 1, gelu_apprx_sigmoid_dx for k = 1.702)."""
    s = _sigmoid(k * x)
    return s + k * x * s * (1.0 - s)


def _prelu(x: Array, alpha: Array | float = 0.0) -> Array:
    """x for x >= 0, alpha * x below (alpha = the instruction's relu_param; 0 gives relu)."""
    return np.where(x >= 0, x, alpha * x)


ACT_FUNCS_IMPL: dict[str, Callable[[Array], Array]] = {
    "copy": lambda x: x,
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "silu": lambda x: x * _sigmoid(x),
    "square": lambda x: x * x,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x,
    "sin": _sin_poly,
    "abs": np.abs,
    "sign": np.sign,
    "softplus": _softplus,
    "erf": _erf,
    "arctan": np.arctan,
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "gelu_apprx_sigmoid": lambda x: x * _sigmoid(_GELU_SIGMOID_K * x),
    "gelu_dx": _gelu_dx,
    "gelu_apprx_sigmoid_dx": lambda x: _sigmoid_product_dx(x, _GELU_SIGMOID_K),
    "silu_dx": lambda x: _sigmoid_product_dx(x, 1.0),
    "erf_dx": lambda x: 2.0 / math.sqrt(math.pi) * np.exp(-x * x),
    "prelu": _prelu,
}
# Functions that read the instruction's relu_param (ACTIVATE has none: 0.0; ACTIVATE2 passes its relu_param).
PARAMETRIC_ACT_FUNCS = frozenset({"prelu"})


def activation(func: str, x: Array, relu_param: Array | float = 0.0) -> Array:
    """``func(x)`` for a float32 array, evaluated in float64 and rounded to float32; ``relu_param`` (a number or a
    (P, 1) column) is the parameter of the parametric functions (prelu's negative slope)."""
    if func not in ACT_FUNCS_IMPL:
        raise SimulationError(f"unsupported activation function '{func}'")
    x64 = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        if func in PARAMETRIC_ACT_FUNCS:
            return ACT_FUNCS_IMPL[func](x64, np.asarray(relu_param, np.float64)).astype(np.float32)  # type: ignore[call-arg]
        return ACT_FUNCS_IMPL[func](x64).astype(np.float32)


# -- ranking and matching (max8, nc_find_index8, nc_match_replace8, topk) -----------------------------------------
def descending_order(values: Array) -> Array:
    """Indices that order ``values`` along the last axis from largest to smallest.

    NaN ranks above every number (a choice: the hardware rule is unpublished) and equal values keep their index
    order, so among ties the lowest index comes first."""
    v = np.asarray(values, np.float64)
    nan = np.isnan(v)
    return np.lexsort((np.where(nan, 0.0, -v), ~nan))


def claimed_matches(data: Array, vals: Array, reverse: bool) -> tuple[Array, Array]:
    """Where each of the 8 ``vals[p, i]`` is matched in ``data[p]`` (fp32 equality).

    Slots are served in order ``i = 0 .. 7`` (``reverse``: ``7 .. 0``) and each takes the first match not taken by an
    earlier-served slot of the same value, so the k-th duplicate of a value gets its k-th match. Returns the free
    indices (int64) and a found mask; NaN matches nothing."""
    same = vals[:, :, None] == vals[:, None, :]
    slot = np.arange(vals.shape[1])
    earlier = slot[None, :] > slot[:, None] if reverse else slot[None, :] < slot[:, None]
    rank = (same & earlier[None]).sum(axis=2)  # duplicates served before this slot
    index = np.zeros(vals.shape, np.int64)
    found = np.zeros(vals.shape, bool)
    for i in range(vals.shape[1]):
        eq = data == vals[:, i : i + 1]
        hit = eq & (np.cumsum(eq, axis=1, dtype=np.int32) == rank[:, i : i + 1] + 1)
        found[:, i] = hit.any(axis=1)
        index[:, i] = hit.argmax(axis=1)
    return index, found


# ---------------------------------------------------------------------------------------------------------------
# MX (OCP microscaling): groups of 8 partitions x 4 values share one float8_e8m0fnu scale 2**(byte - 127)

MX_GROUP = (8, 4)  # (partitions, values per partition) of one scaling group
_E8M0_BIAS = 127
_E8M0_NAN = 0xFF


def mx_scales(values: Array, element: np.dtype) -> Array:
    """The e8m0 scale bytes of (P, F) ``values``, one per 8x4 group: (P // 8, F // 4) uint8.

    ``nisa.quantize_mx``: ``X = 2**(floor(log2(amax)) - (E_max - 1))`` with ``E_max`` the largest unbiased exponent
    of ``element`` (8 for float8_e4m3fn, 15 for float8_e5m2) — twice the OCP sample algorithm's scale, so the
    largest values round without saturating; an all-zero group gets ``2**-127`` (byte 0). Where the docs are
    silent: an exponent below -127 (a group of tiny fp16/bf16 subnormals) clamps to byte 0, and a group holding Inf
    or NaN gets the e8m0 NaN (0xFF), which makes every product with the group NaN downstream.
    """
    p, f = values.shape
    gp, gf = MX_GROUP
    amax = np.abs(values.astype(np.float32)).reshape(p // gp, gp, f // gf, gf).max(axis=(1, 3))
    e_max = ml_dtypes.finfo(element).maxexp - 1
    with np.errstate(invalid="ignore"):
        _, exp = np.frexp(amax)  # amax = m * 2**exp with m in [0.5, 1): floor(log2(amax)) = exp - 1
    biased = np.clip(exp.astype(np.int64) - 1 - (e_max - 1) + _E8M0_BIAS, 0, 2 * _E8M0_BIAS)
    biased = np.where(amax == 0, 0, biased)
    return np.where(np.isfinite(amax), biased, _E8M0_NAN).astype(np.uint8)


def mx_scale_values(scale_bytes: Array) -> Array:
    """e8m0 scale bytes -> their values ``2**(byte - 127)`` (NaN for 0xFF), in float64 (2**-127 is exact there)."""
    return np.ascontiguousarray(scale_bytes, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float64)


def _expand_groups(per_group: Array) -> Array:
    gp, gf = MX_GROUP
    return np.repeat(np.repeat(per_group, gp, axis=0), gf, axis=1)


def mx_quantize(values: Array, element: np.dtype) -> tuple[Array, Array]:
    """(P, F) ``values`` -> (their MX values of ``element``, (P // 8, F // 4) scale bytes).

    Each value is divided by its group's scale (exact: a power of two) and rounded to nearest even by the cast to
    ``element``; the quotient is clamped to ``±max`` of ``element`` first, which for finite inputs never acts (the
    doubled scale keeps every quotient below ``2**E_max``) but pins down the saturating behaviour.
    """
    scales = mx_scales(values, element)
    factor = _expand_groups(mx_scale_values(scales))
    big = float(ml_dtypes.finfo(element).max)
    with np.errstate(invalid="ignore", over="ignore"):
        q = np.clip(values.astype(np.float64) / factor, -big, big)
    return q.astype(element), scales


def mx_dequantize(values: Array, scale_bytes: Array) -> Array:
    """(K, F * 4) MX values and their (K // 8, F) scale bytes -> the real values in float64 (exact)."""
    return values.astype(np.float64) * _expand_groups(mx_scale_values(scale_bytes))


def mx_matmul(stationary: Array, moving: Array) -> Array:
    """``dst[i, j] = Σ_k Σ_q stationary[k, 4i + q] · moving[k, 4j + q]`` over dequantized (K, 4M) / (K, 4N) values.

    The products of MX values are exact in float64 and summed there, then rounded once to float32 (the PSUM
    accumulator): the PE's internal accumulation width is unpublished, this is its exact-sum idealisation.
    """
    k = stationary.shape[0]
    a = stationary.reshape(k, -1, 4).transpose(1, 0, 2).reshape(-1, 4 * k)  # (M, K*4)
    b = moving.reshape(k, -1, 4).transpose(0, 2, 1).reshape(4 * k, -1)  # (K*4, N)
    with np.errstate(invalid="ignore", over="ignore"):
        return (a @ b).astype(np.float32)


def tf32(values: Array) -> Array:
    """A tfloat32 operand as the PE reads it: float32 with the low 13 of its 23 mantissa bits dropped (1 sign, 8
    exponent, 10 mantissa bits)."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32)


def double_row_operand(values: Array) -> Array:
    """A double_row matmul operand ``[K, 2, X]`` (read as (K, 2X)) as the (2K, X) matrix it contracts over: the
    contraction runs over the partitions and the dim of 2 together, so row ``2k + j`` is ``values[k, j, :]``."""
    k = values.shape[0]
    return values.reshape(2 * k, -1)


def transpose_mode_matmul(stationary: Array, moving: Array) -> tuple[Array, Array]:
    """TensorE transpose mode (``is_transpose``): the PE routes stationary values to the columns where ``moving``
    is nonzero instead of multiplying through every row, so NaN/Inf reach only the outputs they are routed to.

    Returns ``(result, source)``: ``result[m, n] = Σ_{k: moving[k, n] != 0} stationary[k, m] · moving[k, n]`` in
    float32, and ``source[n]`` the row k when column n of ``moving`` holds exactly one nonzero and it is 1.0 (there
    ``result[:, n]`` is ``stationary[k, :]`` exactly, -0.0 and NaN included), else -1. The docs promise a
    bit-accurate transpose with an identity ``moving``; other 0/1 matrices follow the sum (nkic's choice).
    """
    nonzero = moving != 0
    with np.errstate(invalid="ignore", over="ignore"):
        products = np.where(nonzero[:, None, :], stationary[:, :, None] * moving[:, None, :], np.float32(0))
        result = products.sum(axis=0, dtype=np.float32)
    single = (nonzero.sum(axis=0) == 1) & (np.where(nonzero, moving, 0).sum(axis=0) == 1)
    source = np.where(single, nonzero.argmax(axis=0), -1)
    cols = np.flatnonzero(single)
    result[:, cols] = stationary[source[cols], :].T
    return result, source
