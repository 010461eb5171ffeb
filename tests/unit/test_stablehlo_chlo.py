"""The chlo ops JAX emits by default, parsed from ``as_text()`` and decomposed by ``chlo-legalize`` as StableHLO's
``chlo-legalize-to-stablehlo`` does, and the StableHLO ops ``decompose-hlo`` rewrites (clamp, case): the simulated
results match JAX on the CPU (which runs XLA's decomposition of the same ops). Skipped without JAX."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from nkic.dialects import stablehlo as hlo  # noqa: E402
from nkic.interop.framework import compile_stablehlo  # noqa: E402
from nkic.hlo.chlo_legalize import legalize_chlo  # noqa: E402

# Every branch of the approximations: |x| < 1, [1, 2), >= 2, past erf's clamp at 4, erfc's underflow (x^2 > maxlog at
# |x| > 9.42) and negative x (erfc's reflection 2 - erfc(-x)).
X = np.concatenate([np.linspace(-12.0, 12.0, 97), [-4.5, -3.99, -1.0, -0.5, 0.0, 1e-3, 0.999, 1.0, 1.999, 2.0, 9.5]])
X = X.astype(np.float32).reshape(2, -1)


def _program(*fns):  # type: ignore[no-untyped-def]
    def f(x):  # type: ignore[no-untyped-def]
        return tuple(fn(x) for fn in fns)

    return f


def test_as_text_emits_chlo_and_it_parses() -> None:
    """The pretty form JAX prints holds chlo.square/erf/erfc/top_k; after chlo-legalize none is left."""
    f = _program(jnp.square, jax.scipy.special.erf, jax.scipy.special.erfc, lambda x: jax.lax.top_k(x, 3))
    text = jax.jit(f).lower(X).as_text()
    for name in ("chlo.square", "chlo.erf ", "chlo.erfc", "chlo.top_k"):
        assert name in text
    module = hlo.parse_stablehlo(text)
    module.verify()
    legalize_chlo(module)
    module.verify()
    assert not [op.name for op in module.walk() if op.name.startswith("chlo.")]
    assert any(isinstance(op, hlo.SortOp) for op in module.walk())


def test_erf_erfc_square_match_xla_f32() -> None:
    f = _program(jnp.square, jax.scipy.special.erf, jax.scipy.special.erfc)
    got = compile_stablehlo(jax.jit(f).lower(X).as_text()).run(X)
    want = [np.asarray(w) for w in jax.jit(f)(X)]
    np.testing.assert_array_equal(got[0], want[0])
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)
    assert got[2][0, 0] == 2.0 and got[2][1, -1] == 0.0  # erfc(-12) = 2, erfc(9.5) underflows to 0


def test_gelu_exact_bf16() -> None:
    """``gelu(approximate=False)`` emits chlo.erfc; bf16 is computed in f32 and rounded back, as XLA does."""
    x = X.astype(ml_dtypes.bfloat16)
    f = lambda a: jax.nn.gelu(a, approximate=False)  # noqa: E731
    (got,) = compile_stablehlo(jax.jit(f).lower(x).as_text()).run(x)
    want = np.asarray(jax.jit(f)(x))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2)


def test_layernorm_through_jnp_var() -> None:
    """``jnp.var`` emits chlo.square and a select on ``N - ddof > 0``, a 0-d predicate folded at compile time (numpy
    folds it to a scalar, kept an array so the select sees a constant)."""
    from nkic.interop.framework import from_jax

    x = X.reshape(4, -1)

    def layernorm(a):  # type: ignore[no-untyped-def]
        return (a - a.mean(-1, keepdims=True)) / jnp.sqrt(a.var(-1, keepdims=True) + 1e-5)

    np.testing.assert_allclose(from_jax(layernorm)(x), np.asarray(jax.jit(layernorm)(x)), rtol=1e-4, atol=1e-4)


def test_erf_inv_matches_xla() -> None:
    """``jax.scipy.special.erfinv`` emits chlo.erf_inv: both branches (w < 5 and beyond, |x| near 1) and ±inf at ±1."""
    from nkic.interop.framework import from_jax

    x = np.concatenate([np.linspace(-0.999999, 0.999999, 200), [-1.0, 1.0, 0.0, 0.5, -0.9999, 0.99999]])
    x = x.astype(np.float32).reshape(2, -1)
    got, want = from_jax(jax.scipy.special.erfinv)(x), np.asarray(jax.jit(jax.scipy.special.erfinv)(x))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    assert got[1, -6] == -np.inf and got[1, -5] == np.inf


def test_cond_switch_and_clamp() -> None:
    """``lax.switch`` (clamp + case, an index out of range clamped by JAX and again by case's rule), ``lax.cond`` on a
    run-time predicate with a tensor and a 0-d result, ``lax.clamp`` with a scalar bound: decompose-hlo."""
    from nkic.interop.framework import from_jax

    lax = jax.lax
    x = X.reshape(4, -1)
    switch = from_jax(lambda a, i: lax.switch(i, [lambda b: b * 2, lambda b: b - 1, jnp.tanh], a))
    for i in (-3, 1, 2, 7):
        want = lax.switch(np.int32(i), [lambda b: b * 2, lambda b: b - 1, jnp.tanh], x)
        np.testing.assert_allclose(switch(x, np.int32(i)), np.asarray(want), rtol=1e-6, atol=1e-6)

    def cond(a):  # type: ignore[no-untyped-def]
        return lax.cond(a.sum() > 0, lambda b: (b * 2, b.sum()), lambda b: (b - 1, b.max()), a)

    for sign in (1.0, -1.0):
        got, want = from_jax(cond)(x * sign), cond(x * sign)
        assert np.shape(got[1]) == ()
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-5)
    clamp = lambda a, lo: lax.clamp(lo, a, np.float32(0.5))  # noqa: E731
    np.testing.assert_array_equal(from_jax(clamp)(x, np.float32(-0.3)), np.asarray(clamp(x, np.float32(-0.3))))
