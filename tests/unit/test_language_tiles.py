"""The value-returning ``nki.language`` tile functions (``frontend/tiles.py``) end to end against numpy."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.frontend.tiles import promote  # noqa: E402

RNG = np.random.default_rng(11)


def run(body, *arrays, **consts):
    """Load every array, apply ``body`` to the tiles, store its result and simulate."""

    def traced(*args):
        r = body(*[nl.load(a) for a in args], **consts)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    # fixed arities: the kernel's parameters name its inputs
    kernels = {1: lambda a: traced(a), 2: lambda a, b: traced(a, b), 3: lambda a, b, c: traced(a, b, c)}
    return nki.simulate(nki.jit(kernels[len(arrays)]))(*arrays)


def rand(*shape, lo=-2.0, hi=2.0, dtype=np.float32):
    return RNG.uniform(lo, hi, shape).astype(dtype)


# -- the quick start ---------------------------------------------------------------------------------------
def test_quick_start():
    @nki.jit
    def nki_tensor_add_kernel(a_input, b_input):
        a_tile = nl.load(a_input)
        b_tile = nl.load(b_input)
        c_tile = nl.add(a_tile, b_tile)
        c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
        nl.store(c_output, value=c_tile)
        return c_output

    a, b = rand(128, 512), rand(128, 512)
    np.testing.assert_array_equal(nki.simulate(nki_tensor_add_kernel)(a, b), a + b)


# -- memory ----------------------------------------------------------------------------------------------
def test_load_casts_and_store_casts():
    @nki.jit
    def kernel(a):
        t = nl.load(a, dtype=nl.bfloat16)
        assert t.dtype == "bfloat16" and t.buffer == nl.sbuf
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    a = rand(64, 32)
    np.testing.assert_array_equal(nki.simulate(kernel)(a), a.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_load_store_views_in_a_loop():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(a.shape[0] // 128):
            t = nl.load(a[i * 128 : (i + 1) * 128, :])
            nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.multiply(t, 2.0))
        return out

    a = rand(384, 16)
    np.testing.assert_array_equal(nki.simulate(kernel)(a), a * 2)


def test_load_transpose2d_and_copy():
    a = rand(32, 96)
    np.testing.assert_array_equal(run(lambda t: t, a), a)

    @nki.jit
    def kernel(a):
        t = nl.load_transpose2d(a, dtype=nl.float16)
        c = nl.copy(t, dtype=nl.float32)
        out = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=c)
        return out

    np.testing.assert_array_equal(nki.simulate(kernel)(a), a.T.astype(np.float16).astype(np.float32))


def test_store_from_psum_and_identity():
    @nki.jit
    def kernel(a):
        ident = nl.shared_identity_matrix(n=64, dtype=nl.float32)
        x = nl.load(a)
        p = nl.matmul(ident, x, transpose_x=True)  # I.T @ x, in PSUM
        assert p.buffer == nl.psum and p.dtype == "float32"
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=p)
        return out

    a = rand(64, 48)
    np.testing.assert_array_equal(nki.simulate(kernel)(a), a)


def test_creation_functions():
    @nki.jit
    def kernel(a):
        x = nl.load(a)
        z = nl.zeros_like(x)
        e = nl.empty_like(x)
        assert e.buffer == nl.sbuf and e.shape == x.shape
        h = nl.empty_like(a)
        assert h.buffer == a.buffer
        f = nl.full(x.shape, 3.0, dtype=nl.float32)
        o = nl.ones(x.shape, dtype=nl.float32)
        r = nl.add(nl.add(z, f), nl.multiply(o, x))
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    a = rand(16, 8)
    np.testing.assert_array_equal(nki.simulate(kernel)(a), a + 3)


# -- element-wise -----------------------------------------------------------------------------------------
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum,
    "equal": lambda a, b: np.equal(a, b).astype(np.float32),
    "not_equal": lambda a, b: np.not_equal(a, b).astype(np.float32),
    "greater": lambda a, b: np.greater(a, b).astype(np.float32),
    "greater_equal": lambda a, b: np.greater_equal(a, b).astype(np.float32),
    "less": lambda a, b: np.less(a, b).astype(np.float32),
    "less_equal": lambda a, b: np.less_equal(a, b).astype(np.float32),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_tile_tile(name):
    a, b = rand(32, 64), rand(32, 64)
    b[:, :4] = a[:, :4]  # some ties for the comparisons
    got = run(lambda x, y: getattr(nl, name)(x, y), a, b)
    np.testing.assert_allclose(got, BINARY[name](a, b), rtol=1e-6)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum", "greater", "less_equal"])
@pytest.mark.parametrize("scalar_first", [False, True])
def test_binary_tile_scalar(name, scalar_first):
    a = rand(16, 32)
    if scalar_first:
        got = run(lambda x: getattr(nl, name)(1.5, x), a)
        want = BINARY[name](np.float32(1.5), a)
    else:
        got = run(lambda x: getattr(nl, name)(x, 1.5), a)
        want = BINARY[name](a, np.float32(1.5))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_power_and_mod():
    a, b = rand(8, 16, lo=0.5, hi=2.0), rand(8, 16, lo=-2.0, hi=2.0)
    np.testing.assert_allclose(run(lambda x, y: nl.power(x, y), a, b), np.power(a, b), rtol=1e-5)
    np.testing.assert_allclose(run(lambda x: nl.mod(x, 0.75), b), np.mod(b, np.float32(0.75)), rtol=1e-5, atol=1e-6)


# -- fmod, average, prelu ------------------------------------------------------------------------------------
@settings(max_examples=8, deadline=None)
@given(
    p=st.integers(1, 128), f=st.integers(1, 40), y_kind=st.sampled_from(["tile", "column", "row", "number"]),
    dtype=st.sampled_from([np.float32, ml_dtypes.bfloat16, np.int32]),
)  # fmt: skip
def test_fmod_keeps_the_sign_of_x(p, f, y_kind, dtype):
    g = np.random.default_rng(p * 100 + f)  # not the module RNG: the examples hypothesis runs must not shift it
    a = g.uniform(-9, 9, (p, f)).astype(np.float32).astype(dtype)
    shapes = {"tile": (p, f), "column": (p, 1), "row": (1, f)}
    b = (g.uniform(1, 3.5, shapes.get(y_kind, (1, 1))) * g.choice([-1, 1])).astype(np.float32).astype(dtype)
    if y_kind == "number":
        got = run(lambda x: nl.fmod(x, -2.5), a)
        want = np.fmod(a.astype(np.float32), np.float32(-2.5))
        want_dtype = np.float32 if dtype == np.int32 else dtype  # a non-integral number makes an int result float
    else:
        got = run(lambda x, y: nl.fmod(x, y), a, b)
        want, want_dtype = np.fmod(a.astype(np.float32), b.astype(np.float32)), dtype
    assert got.dtype == want_dtype
    np.testing.assert_array_equal(got, want.astype(want_dtype))  # |x| mod |y| is exact in fp32


def test_fmod_number_x_and_dtype():
    b = rand(16, 24, lo=-3, hi=3)
    np.testing.assert_array_equal(run(lambda y: nl.fmod(-7.25, y), b), np.fmod(np.float32(-7.25), b))
    np.testing.assert_array_equal(run(lambda y: nl.fmod(7.25, y), b), np.fmod(np.float32(7.25), b))
    a = rand(16, 24, lo=-9, hi=9)
    got = run(lambda x, y: nl.fmod(x, y, dtype=nl.bfloat16), a, b)
    np.testing.assert_array_equal(got, np.fmod(a, b).astype(ml_dtypes.bfloat16))
    assert not np.array_equal(np.fmod(a, b), np.mod(a, b))  # the test tells fmod from the floored nl.mod
    with pytest.raises(NkiError, match="nl.fmod: at least one of x, y must be a tile"):
        run(lambda x: nl.fmod(1.0, 2.0), a)


@pytest.mark.parametrize(("xs", "ys"), [((32, 64), (32, 64)), ((32, 64), (32, 1)), ((1, 64), (32, 64))])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int16])
def test_average(xs, ys, dtype):
    a, b = (rand(*xs, lo=-50, hi=50)).astype(dtype), (rand(*ys, lo=-50, hi=50)).astype(dtype)
    got = run(lambda x, y: nl.average(x, y), a, b)
    want = (a.astype(np.float32) + b.astype(np.float32)) / 2
    np.testing.assert_array_equal(got, want.astype(dtype) if dtype != np.int16 else np.rint(want).astype(dtype))
    got = run(lambda x: nl.average(x, 3.0, dtype=nl.float32), a)
    np.testing.assert_array_equal(got, (a.astype(np.float32) + 3) / 2)


def test_average_as_a_reduction_op():
    """nl.average as op= of nisa.tensor_partition_reduce (its documented use) and tensor_reduce: the mean."""

    @nki.jit
    def kernel(a):
        x = nl.load(a)
        across = nl.ndarray((1, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(dst=across, op=nl.average, data=x)
        along = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=along, op=nl.average, data=x, axis=1)
        o1 = nl.ndarray(across.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray(along.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o1, value=across)
        nl.store(o2, value=along)
        return o1, o2

    a = rand(96, 40)
    across, along = nki.simulate(kernel)(a)
    np.testing.assert_allclose(across, a.mean(axis=0, keepdims=True), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(along, a.mean(axis=1, keepdims=True), rtol=1e-6, atol=1e-7)


def _prelu_kernel(slope_kind, target, dtype=None):
    @nki.jit(platform_target=target)
    def kernel(a, s):
        x = nl.load(a)
        slope = {"number": 0.25, "column": nl.load(s[:, 0:1]), "tile": nl.load(s), "row": nl.load(s[0:1, :]),
                 "default": None}[slope_kind]  # fmt: skip
        r = nl.prelu(x, dtype=dtype) if slope is None else nl.prelu(x, slope, dtype=dtype)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    return kernel


@pytest.mark.parametrize("slope_kind", ["number", "column", "tile", "row", "default"])
@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_prelu(slope_kind, target):
    a, s = rand(32, 48), rand(32, 48, lo=0.05, hi=0.5)
    slope = {"number": np.float32(0.25), "column": s[:, 0:1], "tile": s, "row": s[0:1, :], "default": 0}[slope_kind]
    got = nki.simulate(_prelu_kernel(slope_kind, target))(a, s)
    np.testing.assert_array_equal(got, np.where(a >= 0, a, slope * a))  # one fp32 multiply: exact on both paths


def test_prelu_engines_and_dtype():
    """gen4: one ScalarE activate2 with op=nl.prelu; before gen4 VectorE stages (no activate2 to use)."""
    a, s = rand(32, 48), rand(32, 48, lo=0.05, hi=0.5)
    for target, want in (("trn3", {"activate2"}), ("trn2", {"tensor_scalar", "scalar_tensor_tensor"})):
        traced = _prelu_kernel("column", target, nl.bfloat16).trace(a, s)
        names = {op.name.split(".")[1] for op in traced.module.walk() if op.name.startswith("penguin.")}
        assert want <= names and ("activate2" in names) == (target == "trn3")
    got = nki.simulate(_prelu_kernel("number", "trn3", nl.bfloat16))(a, s)
    np.testing.assert_array_equal(got, np.where(a >= 0, a, np.float32(0.25) * a).astype(ml_dtypes.bfloat16))
    with pytest.raises(NkiError, match=r"nl.prelu: shapes \(32, 48\) and \(32, 8\) cannot be broadcast"):
        run(lambda x, y: nl.prelu(x, y), a, rand(32, 8))


@pytest.mark.parametrize(
    ("xs", "ys"),
    [((32, 64), (32, 1)), ((32, 1), (32, 64)), ((32, 4, 8), (32, 1, 8)), ((32, 4, 8), (32, 4, 1)),
     ((1, 64), (32, 64)), ((32, 64), (1, 64)), ((1, 8), (32, 1))],
)  # fmt: skip
def test_broadcasting(xs, ys):
    a, b = rand(*xs), rand(*ys)
    np.testing.assert_allclose(run(lambda x, y: nl.subtract(x, y), a, b), a - b, rtol=1e-6)


def test_broadcast_rules_errors():
    with pytest.raises(NkiError, match=r"test_language_tiles.py:\d+: error: nl.add: shapes \(32, 64\) and \(32, 8\)"):
        run(lambda x, y: nl.add(x, y), rand(32, 64), rand(32, 8))
    with pytest.raises(NkiError, match="different ranks"):
        run(lambda x, y: nl.add(x, y), rand(32, 64), rand(32, 8, 8))
    with pytest.raises(NkiError, match=r"dim 0: 32 vs 4"):
        run(lambda x, y: nl.add(x, y), rand(32, 64), rand(4, 64))
    with pytest.raises(NkiError, match="at least one of x, y must be a tile"):
        run(lambda x: nl.add(1.0, 2.0), rand(4, 4))


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [("float32", "float32", "float32"), ("float16", "float32", "float32"), ("bfloat16", "float16", "float32"),
     ("float8_e4m3", "float8_e5m2", "bfloat16"), ("float8_e4m3", "bfloat16", "bfloat16"),
     ("int32", "float16", "float16"), ("int8", "int32", "int32"), ("int8", "uint8", "int16"),
     ("int8", "uint16", "int32"), ("int16", "uint8", "int16"), ("int32", "uint32", "float32"),
     ("uint8", "uint16", "uint16")],
)  # fmt: skip
def test_promotion(a, b, want):
    assert promote(a, b) == want == promote(b, a)


def test_result_dtypes():
    @nki.jit
    def kernel(a, i):
        x, n = nl.load(a, dtype=nl.bfloat16), nl.load(i)
        assert nl.add(x, nl.load(a)).dtype == "float32"
        assert nl.add(x, 2.0).dtype == "bfloat16"  # a Python number never widens a float tile
        assert nl.multiply(n, 3).dtype == "int32"
        assert nl.multiply(n, 0.5).dtype == "float32"  # a non-integral number makes an int result float
        assert nl.greater(x, 0.0).dtype == "bfloat16"  # comparisons default to the input dtype
        assert nl.greater(x, 0.0, dtype=nl.uint8).dtype == "uint8"
        assert nl.exp(x).dtype == "bfloat16" and nl.exp(x, dtype=nl.float32).dtype == "float32"
        r = nl.multiply(n, 0.5)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    i = RNG.integers(-50, 50, (8, 8)).astype(np.int32)
    np.testing.assert_array_equal(nki.simulate(kernel)(rand(8, 8), i), i * np.float32(0.5))


def test_integer_math_is_exact():
    a = RNG.integers(-(2**30), 2**30, (8, 32)).astype(np.int32)
    b = RNG.integers(-(2**30), 2**30, (8, 32)).astype(np.int32)
    np.testing.assert_array_equal(run(lambda x, y: nl.add(x, y), a, b), a + b)
    np.testing.assert_array_equal(run(lambda x, y: nl.bitwise_and(x, y), a, b), a & b)
    np.testing.assert_array_equal(run(lambda x, y: nl.bitwise_or(x, y), a, b), a | b)
    np.testing.assert_array_equal(run(lambda x, y: nl.bitwise_xor(x, y), a, b), a ^ b)
    np.testing.assert_array_equal(run(lambda x: nl.invert(x), a), ~a)
    u = RNG.integers(0, 2**16, (8, 32)).astype(np.uint32)
    s = RNG.integers(0, 16, (8, 32)).astype(np.uint32)
    np.testing.assert_array_equal(run(lambda x, y: nl.left_shift(x, y), u, s), (u << s) & 0xFFFFFFFF)
    np.testing.assert_array_equal(run(lambda x, y: nl.right_shift(x, y), u, s), u >> s)
    np.testing.assert_array_equal(run(lambda x: nl.right_shift(x, 3), u), u >> 3)


def test_logical():
    a = RNG.integers(0, 2, (8, 16)).astype(np.float32)
    b = RNG.integers(0, 2, (8, 16)).astype(np.float32)
    for name, fn in (("logical_and", np.logical_and), ("logical_or", np.logical_or),
                     ("logical_xor", np.logical_xor)):  # fmt: skip
        np.testing.assert_array_equal(run(lambda x, y, f=name: getattr(nl, f)(x, y), a, b), fn(a, b))
    np.testing.assert_array_equal(run(lambda x: nl.logical_not(x), a), 1 - a)


def _np_gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


UNARY = {
    "exp": (np.exp, -3, 3), "log": (np.log, 0.1, 10), "tanh": (np.tanh, -3, 3), "sigmoid": (_sigmoid, -5, 5),
    "relu": (lambda x: np.maximum(x, 0), -2, 2), "gelu": (_np_gelu, -3, 3),
    "gelu_apprx_tanh": (lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), -3, 3),
    "gelu_apprx_sigmoid": (lambda x: x * _sigmoid(1.702 * x), -3, 3), "silu": (lambda x: x * _sigmoid(x), -4, 4),
    "square": (np.square, -3, 3), "sqrt": (np.sqrt, 0.01, 9), "rsqrt": (lambda x: 1 / np.sqrt(x), 0.01, 9),
    "reciprocal": (np.reciprocal, 0.5, 4), "abs": (np.abs, -3, 3), "sign": (np.sign, -3, 3),
    "softplus": (lambda x: np.log1p(np.exp(x)), -4, 4), "erf": (np.vectorize(math.erf), -2, 2),
    "arctan": (np.arctan, -1.5, 1.5), "mish": (lambda x: x * np.tanh(np.log1p(np.exp(x))), -3, 3),
    "negative": (np.negative, -3, 3), "sin": (np.sin, -20, 20), "cos": (np.cos, -20, 20),
    "tan": (np.tan, -1.2, 1.2), "floor": (np.floor, -9, 9), "ceil": (np.ceil, -9, 9),
    "trunc": (np.trunc, -9, 9),
    "gelu_dx": (lambda x: 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) + x * np.exp(-x * x / 2)
                / math.sqrt(2 * math.pi), -4, 4),
    "gelu_apprx_sigmoid_dx": (lambda x: _sigmoid(1.702 * x) * (1 + 1.702 * x * (1 - _sigmoid(1.702 * x))), -4, 4),
    "silu_dx": (lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))), -6, 6),
    "erf_dx": (lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x), -3, 3),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    fn, lo, hi = UNARY[name]
    a = rand(16, 64, lo=lo, hi=hi)
    got = run(lambda x: getattr(nl, name)(x), a)
    np.testing.assert_allclose(got, fn(a.astype(np.float64)), rtol=2e-5, atol=2e-5)


def test_unary_dtype_argument():
    a = rand(8, 32)
    got = run(lambda x: nl.exp(x, dtype=nl.bfloat16), a)
    np.testing.assert_array_equal(got, np.exp(a).astype(ml_dtypes.bfloat16))


DERIVATIVES = ["silu_dx", "gelu_dx", "gelu_apprx_sigmoid_dx", "erf_dx"]


@pytest.mark.parametrize("name", DERIVATIVES)
@pytest.mark.parametrize("dtype", [None, nl.bfloat16])
def test_derivative_activations_are_functions_and_op_tokens(name, dtype):
    """nl.silu_dx is one ScalarE activation when called, and the same function as nisa.activation's op=."""

    @nki.jit
    def kernel(a):
        x = nl.load(a)
        called = getattr(nl, name)(x, dtype=dtype)
        assert called.dtype == (dtype or x.dtype)
        direct = nl.ndarray(x.shape, dtype=called.dtype, buffer=nl.sbuf)
        nisa.activation(dst=direct, op=getattr(nl, name), data=x)  # nki-library's `op=nl.silu_dx`
        r = nl.subtract(called, direct, dtype=nl.float32)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    np.testing.assert_array_equal(nki.simulate(kernel)(rand(16, 32, lo=-4, hi=4)), 0)


def test_abs_max_abs_min_on_gen4_only():
    with pytest.raises(NkiError, match="nl.abs_max is not available on gen3"):
        run(lambda x, y: nl.abs_max(x, y), rand(4, 4), rand(4, 4))

    @nki.jit(platform_target="trn3")
    def kernel(a, b):
        x, y = nl.load(a), nl.load(b)
        r = nl.abs_min(nl.abs_max(x, y), y)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    a, b = rand(8, 8), rand(8, 8)
    b[0] = -a[0]  # ties pick y
    m = np.where(np.abs(a) > np.abs(b), a, b)
    np.testing.assert_array_equal(nki.simulate(kernel)(a, b), np.where(np.abs(m) < np.abs(b), m, b))


def test_bad_call_names_the_nl_function():
    with pytest.raises(NkiError, match=r"bad call of language.add: missing a required argument: 'y'"):
        run(lambda x: nl.add(x), rand(4, 4))


# -- reductions ---------------------------------------------------------------------------------------------
REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean, "prod": np.prod}


@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_2d(name, keepdims):
    a = rand(32, 24, lo=0.5, hi=1.5)
    got = run(lambda x: getattr(nl, name)(x, axis=1, keepdims=keepdims), a)
    want = REDUCE[name](a.astype(np.float64), axis=1, keepdims=True)  # on-chip results stay 2-D
    assert got.shape == (32, 1)
    np.testing.assert_allclose(got, want, rtol=2e-5)


@settings(max_examples=12, deadline=None)
@given(
    p=st.integers(1, 128), dims=st.lists(st.integers(1, 6), min_size=2, max_size=3), k=st.integers(1, 2),
    name=st.sampled_from(sorted(REDUCE)), keepdims=st.booleans(),
)  # fmt: skip
def test_reductions_nd(p, dims, k, name, keepdims):
    a = rand(p, *dims, lo=0.5, hi=1.5)
    axes = list(range(1 + len(dims) - k, 1 + len(dims)))
    got = run(lambda x: getattr(nl, name)(x, axis=axes, keepdims=keepdims), a)
    want = REDUCE[name](a.astype(np.float64), axis=tuple(axes), keepdims=keepdims)
    if want.ndim < 2:
        want = want[:, None]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-5)


def test_var_all_and_pool_view():
    a = rand(16, 40)
    got = run(lambda x: nl.var(x, axis=1), a)
    np.testing.assert_allclose(got, a.astype(np.float64).var(axis=1, keepdims=True), rtol=1e-4, atol=1e-6)
    m = RNG.integers(0, 2, (16, 8)).astype(np.float32)
    m[0] = 1
    np.testing.assert_array_equal(run(lambda x: nl.all(x, axis=1), m), m.all(axis=1, keepdims=True))

    @nki.jit
    def maxpool(x):  # the docs' index-case-3 idiom: a 5-D .ap() view reduced over its last two dims
        c, h, w = x.shape
        out = nl.ndarray((c, h // 2, w // 2), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        view = t.ap([[h * w, c], [2 * w, h // 2], [2, w // 2], [w, 2], [1, 2]])
        nl.store(out, value=nl.max(view, axis=[3, 4]))
        return out

    x = rand(4, 6, 8)
    np.testing.assert_array_equal(nki.simulate(maxpool)(x), x.reshape(4, 3, 2, 4, 2).max(axis=(2, 4)))


def test_reduction_errors():
    with pytest.raises(NkiError, match=r"nl.sum: cannot reduce along the partition axis 0"):
        run(lambda x: nl.sum(x, axis=0), rand(4, 4))
    # not an error: a free axis that is not trailing is reduced through a permuted view (test_real_kernel_gaps.py)
    x = rand(4, 3, 5)
    np.testing.assert_array_equal(run(lambda t: nl.max(t, axis=1), x), x.max(axis=1))


# -- matmul, transpose -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("transpose_x", [False, True])
def test_matmul(transpose_x):
    x = rand(96, 64) if transpose_x else rand(64, 96)
    y = rand(96, 200)
    got = run(lambda a, b: nl.matmul(a, b, transpose_x=transpose_x), x, y)
    want = (x.T if transpose_x else x).astype(np.float64) @ y
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_matmul_errors():
    with pytest.raises(NkiError, match=r"nl.matmul: x @ y needs y with 64 rows"):
        run(lambda a, b: nl.matmul(a, b), rand(32, 64), rand(32, 16))


def test_transpose():
    a = rand(48, 100)
    np.testing.assert_array_equal(run(lambda x: nl.transpose(x), a), a.T)


# -- shape and selection ---------------------------------------------------------------------------------------
def test_broadcast_to_and_expand_dims():
    b = rand(1, 40)
    np.testing.assert_array_equal(run(lambda x: nl.broadcast_to(x, (128, 40)), b), np.broadcast_to(b, (128, 40)))
    c = rand(16, 1)
    np.testing.assert_array_equal(run(lambda x: nl.broadcast_to(x, (16, 24)), c), np.broadcast_to(c, (16, 24)))
    d = rand(16, 12)
    got = run(lambda x: nl.broadcast_to(nl.expand_dims(x, 1), (16, 3, 12)), d)
    np.testing.assert_array_equal(got, np.broadcast_to(d[:, None, :], (16, 3, 12)))
    wide = rand(1, 700)  # more than one PSUM bank of columns
    np.testing.assert_array_equal(run(lambda x: nl.broadcast_to(x, (8, 700)), wide), np.broadcast_to(wide, (8, 700)))


def test_where():
    c = RNG.integers(0, 2, (16, 32)).astype(np.float32)
    a, b = rand(16, 32), rand(16, 32)
    np.testing.assert_array_equal(run(lambda k, x, y: nl.where(k, x, y), c, a, b), np.where(c == 1, a, b))
    np.testing.assert_array_equal(run(lambda k, x: nl.where(k, x, -1.0), c, a), np.where(c == 1, a, -1))


# -- composites ------------------------------------------------------------------------------------------------
def test_softmax():
    a = rand(64, 100, lo=-5, hi=5)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(run(lambda x: nl.softmax(x, axis=1), a), e / e.sum(1, keepdims=True), rtol=1e-5)
    b = rand(8, 3, 10)
    e = np.exp(b - b.max(axis=2, keepdims=True))
    np.testing.assert_allclose(run(lambda x: nl.softmax(x, axis=-1), b), e / e.sum(2, keepdims=True), rtol=1e-5)


def test_rms_norm():
    x, w = rand(32, 64), rand(1, 64)
    want = x / np.sqrt((x.astype(np.float64) ** 2).sum(1, keepdims=True) / 64 + 1e-6) * w
    np.testing.assert_allclose(run(lambda a, b: nl.rms_norm(a, b, axis=1, n=64), x, w), want, rtol=1e-5)


# -- operator tokens stay operators -----------------------------------------------------------------------------
def test_tokens_still_work_as_op_arguments():
    @nki.jit
    def kernel(a):
        x = nl.load(a)
        y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y, data1=x, data2=x, op=nl.add)
        z = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=z, op=nl.max, data=y, axis=1)
        w = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=w, op=nl.exp, data=x)
        r = nl.add(nl.subtract(w, nl.exp(x)), z)  # the same tokens, called
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    a = rand(8, 16)
    np.testing.assert_allclose(nki.simulate(kernel)(a), np.broadcast_to((2 * a).max(1, keepdims=True), a.shape))
    assert repr(nl.max) == "nl.max" and str(nl.max) == "maximum"


def test_outside_a_kernel():
    with pytest.raises(NkiError, match="nki API called outside of an NKI kernel"):
        nl.add(1, 2)
    with pytest.raises(NkiError, match="nki API called outside of an NKI kernel"):
        nl.load(None)


def test_load_errors():
    with pytest.raises(NkiError, match="Size of partition dimension 256 exceeds"):
        run(lambda x: x, rand(256, 4))

    @nki.jit
    def kernel(a):
        t = nl.load(a)
        nl.exp(a)
        return t

    with pytest.raises(NkiError, match=r"nl.exp: 'x' is in hbm; nl.exp works on SBUF/PSUM tiles"):
        kernel.trace(nki.TensorSpec((4, 4), "float32"))


def test_tensor_operators_point_at_the_nl_functions():
    with pytest.raises(NkiError, match=r"test_language_tiles.py:\d+: error: arithmetic operators .* nl.add\(a, b\)"):
        run(lambda x: x + x, rand(4, 4))


@settings(max_examples=15, deadline=None)
@given(
    p=st.integers(1, 128), free=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data(),
    name=st.sampled_from(["add", "subtract", "multiply", "maximum", "less"]),
)  # fmt: skip
def test_binary_broadcasting_shapes(p, free, data, name):
    full = (p, *free)
    ones = data.draw(st.lists(st.booleans(), min_size=len(full), max_size=len(full)))
    small = tuple(1 if o else n for o, n in zip(ones, full))
    a, b = rand(*full), rand(*small)
    if data.draw(st.booleans()):
        a, b = b, a
    got = run(lambda x, y: getattr(nl, name)(x, y), a, b)
    np.testing.assert_allclose(got, BINARY[name](a, b), rtol=1e-6)


def test_psum_operands():
    @nki.jit
    def kernel(x, y):
        a, b = nl.load(x), nl.load(y)
        p1 = nl.matmul(a, b, transpose_x=True)
        p2 = nl.matmul(b, b, transpose_x=True)
        r = nl.softmax(nl.add(nl.exp(nl.multiply(p1, 0.1)), p2), axis=1)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    x, y = rand(32, 32), rand(32, 32)
    t = np.exp(0.1 * (x.T.astype(np.float64) @ y)) + y.T.astype(np.float64) @ y
    e = np.exp(t - t.max(1, keepdims=True))
    np.testing.assert_allclose(nki.simulate(kernel)(x, y), e / e.sum(1, keepdims=True), rtol=1e-4)


def test_strided_views_as_operands():
    a = rand(64, 96)
    np.testing.assert_array_equal(run(lambda x: nl.transpose(x[0:48, 8:72:2]), a), a[0:48, 8:72:2].T)
    np.testing.assert_array_equal(run(lambda x: nl.broadcast_to(x[3:4, 0:96:3], (16, 32)), a),
                                  np.broadcast_to(a[3:4, 0:96:3], (16, 32)))  # fmt: skip
    got = run(lambda x: nl.matmul(x[0:32, 0:64], x[0:64, 32:96]), a)
    np.testing.assert_allclose(got, a[0:32, 0:64].astype(np.float64) @ a[0:64, 32:96], rtol=1e-4, atol=1e-4)


def test_buffer_predicates_and_directives():
    assert nl.is_psum(nl.psum) and nl.is_sbuf(nl.sbuf) and not nl.is_sbuf(nl.psum)
    assert nl.is_on_chip(nl.sbuf) and nl.is_on_chip(nl.psum) and not nl.is_on_chip(nl.shared_hbm)
    assert nl.is_hbm(nl.hbm) and nl.is_hbm(nl.shared_hbm) and not nl.is_hbm(nl.sbuf)

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.sequential_range(2, directives=nl.no_reorder()):  # a scheduling directive: same numbers
            t = nl.load(a[i * 4 : (i + 1) * 4, :])
            nl.store(out[i * 4 : (i + 1) * 4, :], nl.add(t, 1.0))
        return out

    x = rand(8, 16)
    np.testing.assert_array_equal(nki.simulate(k)(x), x + np.float32(1.0))
