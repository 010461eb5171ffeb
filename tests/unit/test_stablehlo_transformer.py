"""A complete small transformer through the front door: token embedding (a row gather), N pre-norm decoder blocks
(RMSNorm, causal multi-head attention, a GELU MLP, residuals), a final norm and tied-embedding logits, exported by
JAX, compiled by nkic as one NEFF, simulated and compared with JAX on the CPU (fp32 within 1e-4, bf16 within 2e-2
of the logits' scale). Skipped without JAX."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from nkic.interop.framework import from_jax  # noqa: E402

VOCAB, D, HEADS, LAYERS, SEQ, FF = 64, 64, 2, 2, 32, 128


def _rms(x, g):  # type: ignore[no-untyped-def]
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g


def _block(x, p):  # type: ignore[no-untyped-def]
    h = _rms(x, p["g1"])
    heads = [(h @ p[n]).reshape(SEQ, HEADS, D // HEADS).transpose(1, 0, 2) for n in ("wq", "wk", "wv")]
    q, k, v = heads
    s = jnp.einsum("hqd,hkd->hqk", q, k) / np.sqrt(D // HEADS)
    s = jnp.where(jnp.tril(jnp.ones((SEQ, SEQ), bool)), s, -jnp.inf)
    a = jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v).transpose(1, 0, 2).reshape(SEQ, D)
    x = x + a @ p["wo"]
    return x + jax.nn.gelu(_rms(x, p["g2"]) @ p["w1"]) @ p["w2"]


def transformer(params, ids):  # type: ignore[no-untyped-def]
    x = params["emb"][ids]
    for p in params["blocks"]:
        x = _block(x, p)
    return _rms(x, params["gf"]) @ params["emb"].T


def _params(dtype: type) -> dict:
    rng = np.random.default_rng(5)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(dtype)

    def g() -> np.ndarray:
        return (1 + 0.1 * rng.standard_normal(D)).astype(dtype)

    blocks = [{"g1": g(), "g2": g(), "wq": w(D, D), "wk": w(D, D), "wv": w(D, D), "wo": w(D, D), "w1": w(D, FF),
               "w2": w(FF, D)} for _ in range(LAYERS)]  # fmt: skip
    return {"emb": w(VOCAB, D), "gf": g(), "blocks": blocks}


@pytest.mark.parametrize(("dtype", "tol"), [(np.float32, 1e-4), (ml_dtypes.bfloat16, 2e-2)], ids=["f32", "bf16"])
def test_small_transformer_matches_jax(tmp_path: Path, dtype: type, tol: float) -> None:
    params = _params(dtype)
    ids = np.random.default_rng(6).integers(0, VOCAB, SEQ).astype(np.int32)
    got = np.asarray(from_jax(transformer, dump_dir=tmp_path)(params, ids)).astype(np.float32)
    want = np.asarray(jax.jit(transformer)(params, ids)).astype(np.float32)
    assert got.shape == want.shape == (SEQ, VOCAB)
    err = np.abs(got - want).max() / max(1.0, np.abs(want).max())
    assert err <= tol, f"max error {err:.2e} of the logits' scale"
    graph = (tmp_path / "00-penguin.mlir").read_text()
    assert graph.count("penguin.graph @main") == 1, sorted(p.name for p in tmp_path.iterdir())
