"""Reductions along the last dim of a fused chain's result computed from the chain's SBUF tiles (hlo/fusion.py), not
read back from HBM: checked against JAX, with rows wider than one fused tile and an init value that is not the
combiner's identity."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from nkic.hlo import fusion  # noqa: E402
from nkic.interop.framework import from_jax  # noqa: E402

RNG = np.random.default_rng(5)


def _close(fn, *args) -> list[int]:  # type: ignore[no-untyped-def]
    """Run ``fn`` through nkic and JAX (within 1e-5); how many reductions each fused chain took."""
    taken: list[int] = []
    real = fusion._row_reductions

    def spy(interp, chain):  # type: ignore[no-untyped-def]
        found = real(interp, chain)
        taken.append(len(found))
        return found

    fusion._row_reductions = spy
    try:
        got, want = from_jax(fn)(*args), jax.jit(fn)(*args)
    finally:
        fusion._row_reductions = real
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    return taken


def test_softmax_row_max_and_sum_in_the_chains() -> None:
    x = RNG.standard_normal((4, 256, 256)).astype(np.float32)
    assert sum(_close(lambda a: jax.nn.softmax(a * 2.0, axis=-1), x)) == 2  # max after the scale, sum after exp


def test_rows_wider_than_a_tile_and_a_non_identity_init() -> None:
    """2048 f32 columns: two 1024-column tiles per row, combined; the sum starts at 3 and the max at 0.5."""
    x = RNG.standard_normal((200, 2048)).astype(np.float32)

    def f(a):  # type: ignore[no-untyped-def]
        e = jnp.exp(a) - 1.0
        s = jax.lax.reduce(e, np.float32(3.0), jax.lax.add, (1,))
        m = jax.lax.reduce(e, np.float32(0.5), jax.lax.max, (1,))
        return s, m

    assert sum(_close(f, x)) == 2


def test_rms_norm_square_never_stored() -> None:
    x = RNG.standard_normal((128, 512)).astype(np.float32)
    assert sum(_close(lambda a: a * jax.lax.rsqrt(jnp.mean(a * a, axis=-1, keepdims=True) + 1e-6), x)) == 1
