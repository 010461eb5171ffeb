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
from nkic.interop.framework import from_jax  # noqa: E402

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


# -- sort / top-k -------------------------------------------------------------------------------------------------
def test_sort_argsort_and_top_k() -> None:
    """Ascending and descending sorts along either axis, a stable argsort over 200 rows with many ties, a two-operand
    sort (the second follows the key), and top-k (chlo.top_k -> sort + slice: only ceil(k/8) max8 rounds)."""
    x = RNG.standard_normal((6, 20)).astype(np.float32)
    _same(lambda a: (jnp.sort(a, axis=-1), jnp.sort(a, axis=0, descending=True)), x)
    ties = RNG.integers(0, 4, (200, 12)).astype(np.float32)
    _same(lambda a: jnp.argsort(a, axis=-1, stable=True), ties)
    _same(lambda a, b: jax.lax.sort((a, b), num_keys=1), x, x * 2 + 1)
    _same(lambda a: jax.lax.top_k(a, 3), x)
    _same(lambda a: jnp.sort(a[:, :5], axis=-1), x)  # fewer than max8's 8 elements


# -- movement -------------------------------------------------------------------------------------------------------
def test_reverse_and_dynamic_update_slice() -> None:
    x = RNG.standard_normal((5, 16)).astype(np.float32)
    _same(lambda a: (a[:, ::-1], a[::-1, ::-1] * 2), x)
    dus = jax.lax.dynamic_update_slice
    _same(lambda a, u, i: dus(a, u, (i, 0)), x, x[:1] * 3, np.int32(2))
    _same(lambda a, u, i, j: dus(a, u, (i, j)), x, x[:2, :5] * 3, np.int32(9), np.int32(-3))  # both clamped
    _same(lambda a, u: dus(a, u, (1, 3)), x, x[:2, :5] * 3)


def test_kv_cache_step_in_a_loop() -> None:
    """A KV-cache write at a run-time position inside a run-time loop (dynamic_update_slice + while)."""
    cache = np.zeros((8, 16), np.float32)
    rows = RNG.standard_normal((8, 16)).astype(np.float32)

    def fill(c, r, n):  # type: ignore[no-untyped-def]
        body = lambda i, c: jax.lax.dynamic_update_slice(c, jax.lax.dynamic_slice(r, (i, 0), (1, 16)), (i, 0))
        return jax.lax.fori_loop(0, n, body, c)

    _same(fill, cache, rows, np.int32(5))


# -- reduce_window ---------------------------------------------------------------------------------------------------
def test_cumulative_reductions_and_pooling() -> None:
    x = RNG.standard_normal((4, 24)).astype(np.float32)
    _same(lambda a: (jnp.cumsum(a, axis=-1), jnp.cumsum(a, axis=0), jax.lax.cummax(a, axis=1)), x, tol=1e-5)
    _same(lambda a: jnp.cumsum(a.astype(jnp.int32), axis=1), x * 10)
    img = RNG.standard_normal((2, 8, 8, 3)).astype(np.float32)
    rw = jax.lax.reduce_window
    _same(lambda a: rw(a, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"), img)
    _same(lambda a: rw(a, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME"), img, tol=1e-5)
    # a non-identity init, strides, padding and window dilation: padding adds nothing, the init once (XLA)
    _same(lambda a: rw(a, 1.0, jax.lax.add, (1, 3, 2, 1), (1, 2, 1, 1), ((0, 0), (1, 1), (0, 1), (0, 0)),
                       window_dilation=(1, 1, 2, 1)), img, tol=1e-5)  # fmt: skip


# -- scatter --------------------------------------------------------------------------------------------------------
def test_scatter_add_and_overwrite() -> None:
    """segment_sum with duplicate ids (summed on TensorE), .at[].set/.add with out-of-range indices skipped,
    a 2-index element scatter, a column scatter, and 300 updates into 140 rows (two row tiles, three update tiles)."""
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    _same(lambda d, s: jax.ops.segment_sum(d, s, num_segments=5), x, np.array([0, 3, 3, 1], np.int32))
    _same(lambda a, i: a.at[i].set(7.0), x, np.array([2, 0, 9], np.int32))
    _same(lambda a, i: a.at[i].add(a[:3]), x, np.array([2, 2, -1], np.int32), tol=1e-6)
    _same(lambda a, i, j: a.at[i, j].add(1.0), x, np.array([1, 1, 3, 7], np.int32), np.array([0, 0, 15, 2], np.int32))
    _same(lambda a, i: a.at[:, i].set(-1.0), x, np.array([3, 5], np.int32))
    big = RNG.standard_normal((300, 24)).astype(np.float32)
    ids = RNG.integers(0, 140, 300).astype(np.int32)
    _same(lambda d, s: jax.ops.segment_sum(d, s, num_segments=140), big, ids, tol=1e-5)


# -- convolution ----------------------------------------------------------------------------------------------------
def test_convolutions_as_matmuls_over_patches() -> None:
    conv = jax.lax.conv_general_dilated
    x1, w1 = RNG.standard_normal((2, 16, 4)).astype(np.float32), RNG.standard_normal((3, 4, 8)).astype(np.float32)
    _same(lambda a, w: conv(a, w, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC")), x1, w1, tol=1e-5)
    x2, w2 = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32), RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    _same(lambda a, w: conv(a, w, (1, 1), "VALID"), x2, w2, tol=1e-5)
    x3, w3 = RNG.standard_normal((2, 9, 8, 3)).astype(np.float32), RNG.standard_normal((3, 2, 3, 5)).astype(np.float32)
    _same(lambda a, w: conv(a, w, (2, 1), ((1, 1), (0, 2)), rhs_dilation=(1, 2),
                            dimension_numbers=("NHWC", "HWIO", "NHWC")), x3, w3, tol=1e-5)  # fmt: skip


def test_forms_not_lowered_name_the_op() -> None:
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    with pytest.raises(NkiError, match=r"stablehlo\.scatter: a scatter other than .* add or overwrite"):
        from_jax(lambda a, i: a.at[i].multiply(2.0))(x, np.array([1], np.int32))
    w = RNG.standard_normal((3, 4, 4)).astype(np.float32)
    with pytest.raises(NkiError, match=r"stablehlo\.convolution: a grouped convolution"):
        from_jax(lambda a, k: jax.lax.conv_general_dilated(a[None], k, (1,), "SAME", feature_group_count=2,
                                                           dimension_numbers=("NWC", "WIO", "NWC")))(x, w)  # fmt: skip


# -- layout ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
def test_transposes_on_tensor_engine(dtype: type) -> None:
    """Transposes of the last two dims (explicit, batched, and the lhs of a dot) go through TensorE in 512 x 512
    blocks, ragged edges included; exact."""
    x = RNG.standard_normal((200, 700)).astype(dtype)
    _same(lambda a: a.T * 2, x)
    _same(lambda a: jnp.swapaxes(a, 1, 2) * 2, RNG.standard_normal((3, 40, 130)).astype(dtype))
    tol = 1e-4 if dtype == np.float32 else 2e-2  # bf16: an accumulation order apart is one bf16 ulp
    _same(lambda a, b: a @ b, x, RNG.standard_normal((700, 96)).astype(dtype), tol=tol)


# -- fusion ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
def test_elementwise_chains_fuse_into_one_pass(tmp_path: object, dtype: type) -> None:
    """tanh-GELU (ten element-wise ops) on a [128, 512] tile is one load and one store, each op at its own result
    dtype as op by op; a chain result read later (the residual ``h``) is stored as well; compares and converts fuse."""
    x = RNG.standard_normal((128, 512)).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 2e-2
    got = np.asarray(from_jax(jax.nn.gelu, dump_dir=tmp_path)(x)).astype(np.float32)
    np.testing.assert_allclose(got, np.asarray(jax.jit(jax.nn.gelu)(x)).astype(np.float32), rtol=tol, atol=tol)
    kernel = (tmp_path / "00-penguin.mlir").read_text()  # type: ignore[operator]
    assert kernel.count("penguin.dma_copy") == 2, kernel.count("penguin.dma_copy")

    def chain(a, b):  # type: ignore[no-untyped-def]
        h = jnp.tanh(a * 2.0 + b)
        return h, (jnp.where(h > 0.5, h, 0.0) + a).astype(jnp.int32)

    _same(chain, x, x[::-1] * 3, tol=tol)


def test_column_broadcasts_on_chip() -> None:
    """A broadcast along the last dim (a row statistic applied to its row) is a column load, an on-chip broadcast
    and contiguous stores, in row chunks that stay inside one block of the second-to-last dim; exact."""
    x = RNG.standard_normal((300, 700)).astype(np.float32)
    _same(lambda a: a * jnp.mean(a, axis=-1, keepdims=True), x, tol=1e-6)
    y = RNG.standard_normal((3, 50, 64)).astype(np.float32)
    _same(lambda a: a * jnp.max(a, axis=1, keepdims=True), y)
    _same(lambda a, b: a + b[:, :, None], y, RNG.standard_normal((3, 50)).astype(np.float32))
    # broadcasts over leading dims read by fused chains: step-0 row pairs, runs split at block edges
    _same(lambda a, g: jnp.tanh(a * g[:, None, :]), y, RNG.standard_normal((3, 64)).astype(np.float32), tol=1e-6)
    _same(lambda a, g: a + g[None, :, None], y, RNG.standard_normal((50,)).astype(np.float32))
    _same(lambda a, g: a * g + 1, x, RNG.standard_normal((700,)).astype(np.float32), tol=1e-6)


def test_softmax_reads_its_row_statistics_as_columns(tmp_path: object) -> None:
    """A masked softmax on one [128, 512] tile: the max and the sum, broadcast back along the row, are never stored
    as [128, 512] tensors (each fused chain loads the [128, 1] column); the mask's select fuses. 9 tile-wide DMAs:
    scores and mask in, the select out, read back by the max and by the exp chain, exp out, read back by the sum
    and by the divide, the result out."""
    x = RNG.standard_normal((128, 512)).astype(np.float32)
    mask = RNG.random((128, 512)) < 0.8

    def softmax(a, m):  # type: ignore[no-untyped-def]
        return jax.nn.softmax(jnp.where(m, a, -jnp.inf), axis=-1)

    got = np.asarray(from_jax(softmax, dump_dir=tmp_path)(x, mask))
    np.testing.assert_allclose(got, np.asarray(jax.jit(softmax)(x, mask)), rtol=1e-5, atol=1e-6)
    kernel = (tmp_path / "00-penguin.mlir").read_text()  # type: ignore[operator]
    wide = [ln for ln in kernel.splitlines() if "penguin.dma_copy" in ln and "[1, 512]]" in ln]
    assert len(wide) <= 9, "\n".join(wide)
