"""Realistic JAX programs through the front door (issue 27): each written the way ML code is written, lowered by
JAX's default ``jax.jit(f).lower(...)`` (pretty form, chlo included, with debug info), compiled by nkic, simulated and
compared with JAX on the CPU. Prints one line per program (ok / WRONG / ERROR with the error's one line) and the
totals. Not a test (about a minute): ``.venv/bin/python bench/front_door_programs.py [name ...]``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from nkic.interop.framework import from_jax

RNG = np.random.default_rng(0)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _layernorm(x):  # type: ignore[no-untyped-def]
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)


def _rmsnorm(x):  # type: ignore[no-untyped-def]
    return x * lax.rsqrt(jnp.mean(jnp.square(x), -1, keepdims=True) + 1e-6)


def _attention(q, k, v, mask):  # type: ignore[no-untyped-def]
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
    s = jnp.where(mask[:, None, :], s, -1e9)
    return jax.nn.softmax(s, -1) @ v


def _decoder(x, wq, wk, wv, w1, w2):  # type: ignore[no-untyped-def]
    h = _rmsnorm(x)
    q, k, v = h @ wq, h @ wk, h @ wv
    s = q @ k.T / np.sqrt(q.shape[-1])
    s = jnp.where(jnp.tril(jnp.ones(s.shape, bool)), s, -jnp.inf)
    x = x + jax.nn.softmax(s, -1) @ v
    return x + jax.nn.gelu(_rmsnorm(x) @ w1) @ w2


def _rope(x):  # type: ignore[no-untyped-def]
    half = x.shape[-1] // 2
    pos = jnp.arange(x.shape[0], dtype=jnp.float32)[:, None]
    freq = 1.0 / (10000 ** (jnp.arange(half, dtype=jnp.float32) / half))
    ang = pos * freq
    x1, x2 = x[:, :half], x[:, half:]
    return jnp.concatenate([x1 * jnp.cos(ang) - x2 * jnp.sin(ang), x1 * jnp.sin(ang) + x2 * jnp.cos(ang)], -1)


def _kv_step(cache, new, pos):  # type: ignore[no-untyped-def]
    return lax.dynamic_update_slice(cache, new, (pos, 0))


PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[Any, ...], float]] = {
    "layernorm": (_layernorm, (_f32(64, 256),), 1e-4),
    "rmsnorm": (_rmsnorm, (_f32(64, 256),), 1e-4),
    "batchnorm": (lambda x: (x - x.mean(0)) / jnp.sqrt(x.var(0) + 1e-5), (_f32(64, 32),), 1e-4),
    "gelu_mlp": (lambda x, a, b: jax.nn.gelu(x @ a, approximate=False) @ b, (_f32(64, 128), _f32(128, 256),
                                                                            _f32(256, 128)), 1e-3),
    "swiglu": (lambda x, a, b, c: (jax.nn.silu(x @ a) * (x @ b)) @ c,
               (_f32(64, 128), _f32(128, 256), _f32(128, 256), _f32(256, 128)), 1e-3),
    "logsumexp": (lambda x: jax.nn.logsumexp(x, -1), (_f32(64, 300),), 1e-5),
    "log_softmax": (lambda x: jax.nn.log_softmax(x, -1), (_f32(64, 300),), 1e-5),
    "rope": (_rope, (_f32(128, 64),), 1e-4),
    "decoder_block": (_decoder, (_f32(128, 64), *(_f32(64, 64) * 0.1 for _ in range(3)), _f32(64, 256) * 0.1,
                                 _f32(256, 64) * 0.1), 1e-3),
    "masked_attention": (_attention, (_f32(2, 128, 64), _f32(2, 128, 64), _f32(2, 128, 64),
                                      RNG.random((2, 128)) > 0.2), 1e-4),
    "embedding": (lambda t, i: t[i], (_f32(1000, 64), RNG.integers(0, 1000, 96).astype(np.int32)), 0.0),
    "top_k": (lambda x: lax.top_k(x, 8), (_f32(64, 200),), 0.0),
    "argsort": (lambda x: jnp.argsort(x, -1), (_f32(16, 64),), 0.0),
    "cumsum": (lambda x: jnp.cumsum(x, -1), (_f32(64, 100),), 1e-4),
    "scatter_add": (lambda x, i: jax.ops.segment_sum(x, i, 16), (_f32(200, 32), RNG.integers(0, 16, 200).astype(
        np.int32)), 1e-4),
    "fori_loop": (lambda x: lax.fori_loop(0, 5, lambda i, c: jnp.tanh(c) * 1.5, x), (_f32(64, 64),), 1e-5),
    "conv1d": (lambda x, w: lax.conv_general_dilated(x, w, (1,), "SAME"), (_f32(2, 16, 64), _f32(32, 16, 3)), 1e-4),
    "conv2d": (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
               (_f32(1, 16, 16, 8), _f32(3, 3, 8, 16)), 1e-4),
    "kv_cache_step": (_kv_step, (_f32(256, 64), _f32(1, 64), np.int32(17)), 0.0),
    "cond_switch": (lambda x, i: lax.switch(i, [jnp.tanh, jax.nn.relu, lambda b: lax.cond(b.sum() > 0, jnp.exp,
                                                                                         jnp.negative, b)], x),
                    (_f32(64, 64), np.int32(2)), 1e-5),
    "cross_entropy": (lambda x, y: -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(x), y[:, None], 1)),
                      (_f32(64, 100), RNG.integers(0, 100, 64).astype(np.int32)), 1e-5),
}


def run(name: str) -> tuple[str, str]:
    fn, args, tol = PROGRAMS[name]
    try:
        got = from_jax(fn)(*args)
    except Exception as e:  # noqa: BLE001 — every failure is a result here
        return "ERROR", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    want = jax.jit(fn)(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or not np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol):
            err = np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))) if g.shape == w.shape else "shape"
            return "WRONG", f"shape {g.shape} vs {w.shape}, max error {err}"
    return "ok", ""


def main(names: list[str]) -> None:
    counts: dict[str, int] = {}
    for name in names or list(PROGRAMS):
        t0 = time.perf_counter()
        verdict, detail = run(name)
        counts[verdict] = counts.get(verdict, 0) + 1
        print(f"{name:<18} {verdict:<6} {time.perf_counter() - t0:6.1f} s  {detail}", flush=True)
    total = sum(counts.values())
    print(f"{counts.get('ok', 0)} of {total} pass, {counts.get('WRONG', 0)} wrong, {counts.get('ERROR', 0)} errors")


if __name__ == "__main__":
    main(sys.argv[1:])
