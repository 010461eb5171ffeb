"""StableHLO data-movement ops from common JAX programs, lowered op by op and checked against JAX's CPU result:
``jnp.concatenate`` (concatenate), ``jnp.pad``/``lax.pad`` (pad, interior padding too), ``table[ids]`` and
``jnp.take`` (the row gather, out-of-range indices clamped or filled as JAX says), ``lax.dynamic_slice`` with a
run-time start (clamped), and an embedding lookup feeding an MLP. Skipped without JAX."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.interop.framework import compile_stablehlo, from_jax  # noqa: E402

RNG = np.random.default_rng(7)


def _same(fn, *args, exact: bool = True) -> None:  # type: ignore[no-untyped-def]
    got, want = from_jax(fn)(*args), jax.jit(fn)(*args)
    g, w = np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32)
    assert g.shape == w.shape
    if exact:
        np.testing.assert_array_equal(g, w)
    else:
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_concatenate_along_each_axis() -> None:
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    y = RNG.standard_normal((4, 3)).astype(np.float32)
    _same(lambda a, b: jnp.concatenate([a, b * 2, a], axis=1), x, y)
    _same(lambda a: jnp.concatenate([a, a + 1], axis=0), x)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
def test_pad_edges_and_interior(dtype: type) -> None:
    x = RNG.standard_normal((4, 8)).astype(dtype)
    _same(lambda a: jnp.pad(a, ((1, 2), (0, 3)), constant_values=1.5), x)
    _same(lambda a: jax.lax.pad(a, jnp.array(-2.0, a.dtype), ((1, 0, 1), (2, 1, 2))), x)


def test_row_gather_clamps_out_of_range_indices() -> None:
    """``table[ids]`` is a gather with StableHLO's clamping (JAX's default for indexing): -3 reads row 0, 500 the
    last row. 200 indices: two 128-row indirect DMAs."""
    table = RNG.standard_normal((300, 24)).astype(np.float32)
    ids = RNG.integers(0, 300, 200).astype(np.int32)
    ids[3], ids[4] = 500, -3
    _same(lambda t, i: t[i] * 2, table, ids)


def test_take_fills_out_of_range_rows_with_nan() -> None:
    """``jnp.take`` (mode="fill"): a negative index counts from the end, the gather, then a select of NaN for rows
    whose index was out of range (an ``and`` reduction over i1)."""
    table = RNG.standard_normal((40, 16)).astype(np.float32)
    ids = np.array([3, 39, 500, 0, -1, 7], np.int32)
    got = np.asarray(from_jax(lambda t, i: jnp.take(t, i, axis=0))(table, ids))
    np.testing.assert_array_equal(got, np.asarray(jnp.take(table, ids, axis=0)))
    assert np.isnan(got[2]).all() and not np.isnan(got[[0, 1, 3, 4, 5]]).any()


@pytest.mark.parametrize("start", [1, 7, -2])
def test_dynamic_slice_with_a_run_time_start(start: int) -> None:
    """The start is a program input (a register offset at run time); out-of-range starts are clamped."""
    x = RNG.standard_normal((6, 8)).astype(np.float32)
    _same(lambda a, i: jax.lax.dynamic_slice(a, (i, 0), (2, 8)), x, np.int32(start))
    _same(lambda a, i: jax.lax.dynamic_slice(a, (1, i), (3, 4)), x, np.int32(start))


def test_embedding_lookup_feeding_an_mlp() -> None:
    """Embedding lookup + two-layer MLP + a concatenated residual, all in one segment."""

    def model(table, ids, w1, w2):  # type: ignore[no-untyped-def]
        e = table[ids]
        h = jax.nn.relu(e @ w1)
        return jnp.concatenate([h @ w2, e], axis=-1)

    table = RNG.standard_normal((100, 32)).astype(np.float32)
    ids = RNG.integers(0, 100, 64).astype(np.int32)
    w1 = (RNG.standard_normal((32, 64)) * 0.1).astype(np.float32)
    w2 = (RNG.standard_normal((64, 16)) * 0.1).astype(np.float32)
    _same(model, table, ids, w1, w2, exact=False)


def test_forms_not_lowered_are_errors_naming_the_op() -> None:
    """A dynamic_slice with two run-time starts is an error naming it; a gather of another form (columns of the
    operand) is lowered as element runs (``nkic.hlo.gathers``)."""
    gather_cols = """func.func @main(%t: tensor<4x8xf32>, %i: tensor<3x1xi32>) -> tensor<4x3xf32> {
      %g = "stablehlo.gather"(%t, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [0],
            collapsed_slice_dims = [1], start_index_map = [1], index_vector_dim = 1>,
            slice_sizes = array<i64: 4, 1>}> : (tensor<4x8xf32>, tensor<3x1xi32>) -> tensor<4x3xf32>
      func.return %g : tensor<4x3xf32>
    }"""
    t, i = RNG.standard_normal((4, 8)).astype(np.float32), np.array([[7], [0], [3]], np.int32)
    (got,) = compile_stablehlo(gather_cols).run(t, i)
    np.testing.assert_array_equal(got, t[:, [7, 0, 3]])
    two_starts = """func.func @main(%x: tensor<6x8xf32>, %i: tensor<i32>, %j: tensor<i32>) -> tensor<2x2xf32> {
      %s = "stablehlo.dynamic_slice"(%x, %i, %j) <{slice_sizes = array<i64: 2, 2>}>
           : (tensor<6x8xf32>, tensor<i32>, tensor<i32>) -> tensor<2x2xf32>
      func.return %s : tensor<2x2xf32>
    }"""
    with pytest.raises(NkiError, match=r"stablehlo\.dynamic_slice: more than one run-time start index"):
        compile_stablehlo(two_starts)


def test_fori_loop_with_a_static_trip_count_is_unrolled() -> None:
    """``lax.fori_loop(0, 3, ...)``: a while loop whose counter folds at compile time, unrolled (the counter is an
    immediate in each copy of the body). A run-time condition, or more than 64 trips, is a device loop
    (``tests/unit/test_stablehlo_lowerings.py``)."""
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    _same(lambda a: jax.lax.fori_loop(0, 3, lambda i, c: c * 2 + i, a), x)
