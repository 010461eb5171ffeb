"""dot_general reads transposed / widened operands in place and writes into its reader's transpose (hlo/views.py):
checked against JAX on shapes where each path is taken (TensorE transposes need dims of at least 32)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from nkic.hlo import views  # noqa: E402
from nkic.interop.framework import from_jax  # noqa: E402

RNG = np.random.default_rng(11)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _close(fn, *args, tol: float = 1e-4) -> None:  # type: ignore[no-untyped-def]
    got, want = from_jax(fn, routing=False)(*args), jax.jit(fn)(*args)  # op by op: no matmul routed to the kernel
    g, w = np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32)
    assert g.shape == w.shape
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _masked(q, k, v, mask):  # type: ignore[no-untyped-def]
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k)
    s = jnp.where(mask[:, None, None, :], s, -1e9)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)


def _spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[object]:
    """What ``views.<name>`` returns, call by call."""
    seen: list[object] = []
    real = getattr(views, name)

    def spy(*args: object) -> object:
        seen.append(real(*args))
        return seen[-1]

    monkeypatch.setattr(views, name, spy)
    return seen


def test_einsums_with_batch_dims_not_leading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch dims (b, h) at 0 and 2; the second einsum is dot_general(v, p) then a transpose putting d last, so
    its product is computed transposed, straight into the transpose's result."""
    results = _spy(monkeypatch, "_result")
    q, k, v = (_f32(2, 64, 4, 32) for _ in range(3))
    _close(_masked, q, k, v, RNG.random((2, 64)) > 0.2)
    assert [swapped for _, swapped in results] == [False, True]  # type: ignore[misc]


def test_heads_split_by_reshape_and_transpose(monkeypatch: pytest.MonkeyPatch) -> None:
    """Q, K, V projected, split into heads by reshape + transpose (read in place by the score matmuls), the
    attention output transposed back and merged (written in place by its matmul)."""

    def heads(x, wq, wk, wv, wo):  # type: ignore[no-untyped-def]
        t, d = x.shape
        q, k, v = ((x @ w).reshape(t, 4, d // 4).transpose(1, 0, 2) for w in (wq, wk, wv))
        a = jax.nn.softmax(jnp.einsum("hqd,hkd->hqk", q, k), axis=-1)
        return jnp.einsum("hqk,hkd->hqd", a, v).transpose(1, 0, 2).reshape(t, d) @ wo

    in_place = _spy(monkeypatch, "read_in_place")
    _close(heads, _f32(64, 128), *(_f32(128, 128) / 8 for _ in range(4)))
    assert in_place.count(True) >= 3  # the heads of Q, K and V


def test_bf16_weights_widened_by_the_matmul() -> None:
    """convert(bf16 -> f32) read only by a matmul: loaded as bf16 and widened on chip, the same numbers as a
    converted copy (every bf16 value is an f32 value)."""

    def mlp(x, w1, w2):  # type: ignore[no-untyped-def]
        h = jax.nn.gelu(x @ w1.astype(jnp.float32))
        return h @ w2.astype(jnp.float32).T

    w1, w2 = (_f32(128, 256) / 11).astype(ml_dtypes.bfloat16), (_f32(64, 256) / 16).astype(ml_dtypes.bfloat16)
    _close(mlp, _f32(96, 128), w1, w2)


def test_chain_results_stored_as_the_matmuls_reading_them_want(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fused chain's result that only matmuls contracting its last dim read (the softmax before ``@ v``, batched
    over heads; the GELU before the down projection) is stored transposed, so no copy transposes it again."""
    flipped = _spy(monkeypatch, "wants_transposed")

    def f(x, w1, w2, v):  # type: ignore[no-untyped-def]
        p = jax.nn.softmax(jnp.einsum("hqd,hkd->hqk", x, x), axis=-1)
        y = jnp.einsum("hqk,hkd->hqd", p, v).reshape(-1, 64)
        return jax.nn.gelu(y @ w1) @ w2

    _close(f, _f32(2, 64, 64) / 4, _f32(64, 128) / 8, _f32(128, 64) / 11, _f32(2, 64, 64))
    assert flipped.count(True) == 2  # the softmax and the GELU


def test_transposed_store_over_several_strips(monkeypatch: pytest.MonkeyPatch) -> None:
    """640 rows: the transposed GELU is gathered in strips of 512 rows and one of 128 (rows not a multiple of the
    strip), each 128-column slice its own strip."""
    flipped = _spy(monkeypatch, "wants_transposed")

    def f(x, w1, w2):  # type: ignore[no-untyped-def]
        return jnp.tanh(x @ w1) * 0.5 @ w2

    _close(f, _f32(640, 64) / 4, _f32(64, 256) / 8, _f32(256, 32) / 16)
    assert flipped.count(True) == 1
