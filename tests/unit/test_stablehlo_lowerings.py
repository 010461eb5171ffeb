"""The op-by-op lowerings of the per-family modules (``nkic.hlo.families``), each checked against JAX on the CPU:
argmax/argmin (multi-result reduce), general gathers (``take_along_axis``, batched, multi-index), a ``while`` with a
run-time condition, sort / top-k, reverse, reduce_window (cumsum, pooling), scatter (add, overwrite),
dynamic_update_slice and convolutions. Skipped without JAX."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.framework import from_jax  # noqa: E402

RNG = np.random.default_rng(11)


def _same(fn, *args, tol: float = 0.0) -> None:  # type: ignore[no-untyped-def]
    got, want = from_jax(fn)(*args), jax.jit(fn)(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol)


# -- multi-result reduce -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
def test_argmax_argmin_first_occurrence(dtype: type) -> None:
    """200 rows (two partition tiles), ties resolved to the first index as JAX does; a 5-wide row is padded to
    max8's 8."""
    x = RNG.integers(-4, 5, (200, 40)).astype(dtype)  # many ties
    _same(lambda a: (jnp.argmax(a, axis=-1), jnp.argmin(a, axis=-1)), x)
    _same(lambda a: (jnp.argmax(a, axis=0), jnp.max(a, axis=0)), x[:5])


# -- gathers ------------------------------------------------------------------------------------------------------
def test_take_along_axis_and_batched_gathers() -> None:
    x = RNG.standard_normal((6, 40)).astype(np.float32)
    i = RNG.integers(0, 40, (6, 7)).astype(np.int32)
    _same(lambda a, j: jnp.take_along_axis(a, j, axis=1), x, i)
    _same(lambda a, j: jnp.take_along_axis(a, j, axis=0), x, RNG.integers(0, 6, (2, 40)).astype(np.int32))
    rows, cols = RNG.integers(0, 6, 150).astype(np.int32), RNG.integers(0, 40, 150).astype(np.int32)
    _same(lambda a, r, c: a[r, c], x, rows, cols)  # a multi-index element gather, 150 indices: two DMAs
    t = RNG.standard_normal((3, 10, 8)).astype(np.float32)
    k = RNG.integers(0, 10, (3, 4)).astype(np.int32)
    _same(jax.vmap(lambda a, j: a[j]), t, k)  # batched row gather: runs of 8 contiguous elements


def test_gather_clamps_start_indices() -> None:
    """``lax.gather`` with mode=clip: a slice starting past the end is moved back inside (StableHLO's clamp)."""
    x = RNG.standard_normal((10, 12)).astype(np.float32)
    starts = np.array([[0, 0], [9, 11], [-5, 3], [4, 20]], np.int32)
    dn = jax.lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1))
    _same(lambda a, s: jax.lax.gather(a, s, dn, (3, 4), mode="clip"), x, starts)


# -- loops ----------------------------------------------------------------------------------------------------------
def test_while_with_a_run_time_condition() -> None:
    """The trip count comes from an input (a register loop); a data-dependent loop (double until the sum passes a
    threshold); a fori_loop longer than the unroll limit continues as a device loop."""
    x = RNG.standard_normal((4, 16)).astype(np.float32)

    def count(a, n):  # type: ignore[no-untyped-def]
        return jax.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2 + 1), (0, a))

    for n in (0, 1, 5):
        _same(count, x, np.int32(n))
    _same(lambda a: jax.lax.while_loop(lambda c: jnp.sum(c) < 1000.0, lambda c: c * 2, a), np.abs(x) + 0.1)
    _same(lambda a: jax.lax.fori_loop(0, 70, lambda i, c: c + i, a), x)
    _same(lambda a, b: jax.lax.fori_loop(0, 3, lambda i, c: (c[1], c[0] + 1), (a, b)), x, x * 3)  # a rotation
