"""Reductions along the last dim of a fused chain's result computed from the chain's SBUF tiles (hlo/fusion.py), not
read back from HBM, and, when a row fits in one tile, what is computed from them in the same pass: checked against
JAX, with rows wider than one tile, an init value that is not the combiner's identity, and a reduce of a broadcast."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from nkic.dialects import stablehlo as hlo  # noqa: E402
from nkic.hlo import fusion  # noqa: E402
from nkic.interop.framework import from_jax  # noqa: E402

RNG = np.random.default_rng(5)


def _close(fn, *args) -> int:  # type: ignore[no-untyped-def]
    """Run ``fn`` through nkic and JAX (within 1e-5); how many reductions fused chains computed (inside a chain,
    when a row fits in one tile, or from its tiles as they pass)."""
    taken: list[int] = []
    real_chain, real_rows = fusion._chain, fusion._row_reductions

    def chain(interp, head):  # type: ignore[no-untyped-def]
        found = real_chain(interp, head)
        taken.append(sum(isinstance(op, hlo.ReduceOp) for op in found))
        return found

    def rows(interp, ops):  # type: ignore[no-untyped-def]
        found = real_rows(interp, ops)
        taken.append(len(found))
        return found

    fusion._chain, fusion._row_reductions = chain, rows
    try:
        got, want = from_jax(fn)(*args), jax.jit(fn)(*args)
    finally:
        fusion._chain, fusion._row_reductions = real_chain, real_rows
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
    return sum(taken)


def test_softmax_row_max_and_sum_in_the_chains() -> None:
    """Rows of 256: the whole softmax (scale, max, subtract, exp, sum, divide) is one pass over the tiles."""
    x = RNG.standard_normal((4, 256, 256)).astype(np.float32)
    assert _close(lambda a: jax.nn.softmax(a * 2.0, axis=-1), x) == 2  # max after the scale, sum after exp


def test_rows_wider_than_a_tile_and_a_non_identity_init() -> None:
    """2048 f32 columns: two 1024-column tiles per row, combined; the sum starts at 3 and the max at 0.5."""
    x = RNG.standard_normal((200, 2048)).astype(np.float32)

    def f(a):  # type: ignore[no-untyped-def]
        e = jnp.exp(a) - 1.0
        s = jax.lax.reduce(e, np.float32(3.0), jax.lax.add, (1,))
        m = jax.lax.reduce(e, np.float32(0.5), jax.lax.max, (1,))
        return s, m

    assert _close(f, x) == 2


def test_rms_norm_square_never_stored() -> None:
    x = RNG.standard_normal((128, 512)).astype(np.float32)
    assert _close(lambda a: a * jax.lax.rsqrt(jnp.mean(a * a, axis=-1, keepdims=True) + 1e-6), x) == 1


def test_a_sum_over_a_broadcast_column_counts_every_column() -> None:
    """sum(broadcast(rowmax)) inside one pass: the [rows, 1] column stands for the whole row, so the sum is
    columns x the value, not the value."""
    x = RNG.standard_normal((64, 96)).astype(np.float32)

    def f(a):  # type: ignore[no-untyped-def]
        m = jnp.max(jnp.exp(a), axis=-1, keepdims=True)
        return jnp.sum(jnp.broadcast_to(m, a.shape) * 1.5, axis=-1)

    assert _close(f, x) >= 2
