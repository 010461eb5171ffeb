"""nki-library's rotary position embedding kernels, unmodified, traced, compiled and simulated by nkic.

* ``core/embeddings/rope_hf.py`` (``rope_hf``): the HuggingFace layout ``[batch, heads, seq, head_dim]``, cos/sin
  separate or packed in one ``rope_cache``, with or without a batch dim, forward and backward. It writes its results
  into the caller's ``q_out``/``k_out`` inputs and returns them — under LNC2 too, where each core writes its half
  of the sequence. Reference: ``rope_hf_torch.py``.
* ``core/embeddings/rope.py`` (``RoPE``): the layout ``[d_head, B, n_heads, S]``, contiguous halves or interleaved
  pairs (relaid by strided DMAs, or in SBUF by permutation matmuls), optionally sharded over the sequence on LNC2.
  Reference: ``rope_torch.py``.

Both references are translated to numpy in float64. The kernels compute in tiles of the input dtype: every product
and every sum is one fp32 operation rounded to that dtype, which the emulations repeat, so all outputs (fp32 and
bf16) match them bit for bit; the float64 references are then met to within those roundings.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

RNG = np.random.default_rng(3)
BF16 = ml_dtypes.bfloat16
F32 = np.float32


def _r(a: np.ndarray, dtype: type) -> np.ndarray:
    """One fp32 operation's result stored in a ``dtype`` tile, read back as fp32."""
    return np.asarray(a, F32).astype(dtype).astype(F32)


def _angles(shape: tuple[int, ...], dtype: type) -> tuple[np.ndarray, np.ndarray]:
    ang = RNG.random(shape) * 2 * np.pi
    return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)


# -- rope_hf ----------------------------------------------------------------------------------------------------------
def rope_hf_ref(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, backward: bool) -> np.ndarray:
    """``rope_hf_torch_ref`` for one tensor, float64: x*cos + rotate_half(x)*sin (backward: x*cos +
    rotate_half_backward(x*sin)); cos/sin [seq, d] or [batch, seq, d] broadcast over heads."""
    x, c, s = (a.astype(np.float64) for a in (x, cos, sin))
    c, s = (a[None, None] if a.ndim == 2 else a[:, None] for a in (c, s))
    c, s = c[..., : x.shape[2], :], s[..., : x.shape[2], :]
    h = x.shape[-1] // 2
    if backward:
        xs = x * s
        return x * c + np.concatenate([xs[..., h:], -xs[..., :h]], axis=-1)
    return x * c + np.concatenate([-x[..., h:], x[..., :h]], axis=-1) * s


def rope_hf_emulated(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, backward: bool) -> np.ndarray:
    """The kernel's five tensor_tensor steps, each rounded to x.dtype."""
    dt = x.dtype.type
    xf = x.astype(F32)
    c, s = (a.astype(F32) for a in (cos, sin))
    c, s = (a[None, None] if a.ndim == 2 else a[:, None] for a in (c, s))
    c, s = c[..., : x.shape[2], :], s[..., : x.shape[2], :]
    h = x.shape[-1] // 2
    out = _r(xf * c, dt)
    x1, x2, s1, s2 = xf[..., :h], xf[..., h:], s[..., :h], s[..., h:]
    if backward:
        out[..., :h] = _r(out[..., :h] + _r(x2 * s2, dt), dt)
        out[..., h:] = _r(out[..., h:] - _r(x1 * s1, dt), dt)
    else:
        out[..., :h] = _r(out[..., :h] - _r(x2 * s1, dt), dt)
        out[..., h:] = _r(out[..., h:] + _r(x1 * s2, dt), dt)
    return out


@pytest.mark.parametrize("b,q_heads,k_heads,seq,rope_seq,d,dtype,packed,batched,backward,lnc", [
    (1, 2, 1, 128, 128, 64, F32, False, False, False, 1),  # the smallest: one 128-row sequence tile
    (2, 2, 1, 256, 256, 128, BF16, True, True, False, 1),  # packed [batch, seq, 2d] rope_cache
    (1, 1, 1, 128, 256, 64, F32, False, True, True, 1),  # backward; cos/sin longer than the sequence
    (1, 1, 2, 1280, 1280, 32, F32, True, False, False, 1),  # 10 sequence tiles: a group of 8 and one of 2
    (1, 1, 1, 256, 256, 64, F32, False, True, True, 2),  # LNC2: each core one half of the sequence
    (2, 2, 2, 512, 512, 64, BF16, True, False, False, 2),
])  # fmt: skip
def test_rope_hf(nkilib, b, q_heads, k_heads, seq, rope_seq, d, dtype, packed, batched, backward, lnc) -> None:
    rope_hf = nkilib("nkilib.core.embeddings.rope_hf").rope_hf
    q = RNG.standard_normal((b, q_heads, seq, d)).astype(dtype)
    k = RNG.standard_normal((b, k_heads, seq, d)).astype(dtype)
    cos, sin = _angles((b, rope_seq, d) if batched else (rope_seq, d), dtype)
    q_out, k_out = np.zeros_like(q), np.zeros_like(k)
    kernel = rope_hf if lnc == 1 else rope_hf[lnc]
    if packed:
        got_q, got_k = kernel(q, k, q_out, k_out, rope_cache=np.concatenate([cos, sin], axis=-1), backward=backward)
    else:
        got_q, got_k = kernel(q, k, q_out, k_out, cos, sin, backward=backward)
    for x, got, written in ((q, got_q, q_out), (k, got_k, k_out)):
        want = rope_hf_emulated(x, cos, sin, backward)
        np.testing.assert_array_equal(got.astype(F32), want)
        np.testing.assert_array_equal(written, got)  # the caller's q_out / k_out hold the results
        exact = rope_hf_ref(x, cos, sin, backward)
        tol = 1e-6 if dtype is F32 else 3 * 2.0**-8  # three roundings of values up to ~2 in magnitude
        np.testing.assert_allclose(got.astype(np.float64), exact, atol=tol * 2, rtol=0)


def test_rope_hf_rejects_a_sequence_not_divisible_by_the_cores(nkilib) -> None:
    rope_hf = nkilib("nkilib.core.embeddings.rope_hf").rope_hf
    q = np.zeros((1, 1, 128, 64), F32)
    cos = np.zeros((128, 64), F32)
    with pytest.raises(AssertionError, match="seq len must be multiple of 128 \\* LNC=2"):
        rope_hf[2](q, q, q.copy(), q.copy(), cos, cos)


# -- RoPE ---------------------------------------------------------------------------------------------------------------
def rope_ref(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, contiguous: bool) -> np.ndarray:
    """``rope_torch_ref`` in float64: pairs (x_r, x_i) rotated by (cos, sin); the pairs are the two halves of d_head
    (contiguous) or its even/odd elements (interleaved)."""
    d = x.shape[0]
    x, c, s = (a.astype(np.float64) for a in (x, cos, sin))
    re, im = (x[: d // 2], x[d // 2 :]) if contiguous else (x[0::2], x[1::2])
    c, s = c[:, :, None, :], s[:, :, None, :]  # [d/2, B, S] over heads
    out_re, out_im = re * c - im * s, re * s + im * c
    out = np.empty_like(x)
    if contiguous:
        out[: d // 2], out[d // 2 :] = out_re, out_im
    else:
        out[0::2], out[1::2] = out_re, out_im
    return out


def rope_emulated(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, contiguous: bool) -> np.ndarray:
    """RoPE_sbuf's steps in x.dtype tiles: four products, then a difference and a sum, each rounded."""
    dt, d = x.dtype.type, x.shape[0]
    xf = x.astype(F32)
    re, im = (xf[: d // 2], xf[d // 2 :]) if contiguous else (xf[0::2], xf[1::2])
    c, s = (a.astype(F32)[:, :, None, :] for a in (cos, sin))
    out_re = _r(_r(re * c, dt) - _r(im * s, dt), dt)
    out_im = _r(_r(im * c, dt) + _r(re * s, dt), dt)
    out = np.empty_like(xf)
    if contiguous:
        out[: d // 2], out[d // 2 :] = out_re, out_im
    else:
        out[0::2], out[1::2] = out_re, out_im
    return out


@pytest.mark.parametrize("d,b,heads,s,dtype,lnc,contiguous,in_sbuf", [
    (64, 1, 1, 128, F32, 1, True, False),
    (128, 2, 2, 64, BF16, 1, True, False),
    (64, 1, 2, 128, F32, 1, False, False),  # interleaved: strided DMA relayout
    (64, 1, 2, 128, F32, 1, False, True),  # interleaved: permutation matmuls in SBUF (B*heads*S <= 512)
    (64, 2, 4, 128, BF16, 1, False, True),  # B*heads*S > 512: falls back to the strided DMAs
    (128, 2, 2, 64, F32, 2, True, False),  # lnc_shard: each core one half of S
    (64, 1, 2, 128, BF16, 2, False, True),
])  # fmt: skip
def test_rope(nkilib, d, b, heads, s, dtype, lnc, contiguous, in_sbuf) -> None:
    rope = nkilib("nkilib.core.embeddings.rope").RoPE
    x = RNG.standard_normal((d, b, heads, s)).astype(dtype)
    cos, sin = _angles((d // 2, b, s), dtype)
    kernel = rope if lnc == 1 else rope[lnc]
    got = kernel(x, cos, sin, lnc_shard=lnc > 1, contiguous_layout=contiguous, relayout_in_sbuf=in_sbuf)
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(got.astype(F32), rope_emulated(x, cos, sin, contiguous))
    tol = 1e-6 if dtype is F32 else 3 * 2.0**-8
    np.testing.assert_allclose(got.astype(np.float64), rope_ref(x, cos, sin, contiguous), atol=tol * 4, rtol=0)


def test_rope_rejects_an_unsupported_head_dim(nkilib) -> None:
    rope = nkilib("nkilib.core.embeddings.rope").RoPE
    x = np.zeros((32, 1, 1, 16), F32)
    cos = np.zeros((16, 1, 16), F32)
    with pytest.raises(AssertionError, match="d_head must be 64 or 128, got 32"):
        rope(x, cos, cos)
