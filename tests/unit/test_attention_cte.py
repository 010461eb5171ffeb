"""The public nki-library ``attention_cte`` kernel, unmodified, traced, compiled and simulated by nkic.

The nki-library source is not part of nkic. Like every public corpus, it is read by path from the ``shared/corpus``
folder beside the repository checkout (``../shared/corpus/nki-library/src/nkilib_src`` from the repository root,
the directory that contains its ``nkilib/`` package); ``NKILIB_SRC`` overrides that directory. When the directory
is absent every test here is skipped.

The kernel module is imported by path under synthetic ``nkilib.*`` packages (``conftest.py``).

Besides the default path: batches and GQA, layouts and LNC2, cache_softmax, sliding windows, prefix caching
(``k_prior``/``v_prior`` with a run-time ``prior_used_len``) and context parallelism (a run-time ``cp_offset``,
contiguous or strided Q slices, with and without a window), the last two against a translation of
``attention_cte_torch_ref``'s masks (``masked_reference``).

Numerics. The kernel computes in a documented mixed precision: Q, K and V are cast to bfloat16 by the loading
DMAs, QKᵀ accumulates in fp32 PSUM, the softmax (scale, mask, max, exp, row sum) is fp32, the exponentials are cast
to bfloat16 for the PV matmul (fp32 PSUM), and the fp32 result is cast to q.dtype by the final DMA. Two references:

* ``exact``: float64 ``softmax(scale·QKᵀ + causal mask)·V`` on the inputs as given. Against it the bf16 roundings
  of the kernel dominate (up to 2^-8 relative per rounded value: bf16 keeps 8 significant bits), for fp32 inputs
  too — the kernel never runs its matmuls in fp32 — so both dtypes are held to the nkilib tests' rtol of 2e-2.
* ``emulated``: the same math with the kernel's roundings applied: inputs rounded to bf16, the scores as fp32
  products of the kernel's (128 × d)·(d × 512) tiles (so the fp32 summation order matches and the bf16 rounding of
  every exponential lands on the same side), scale/max/exp in fp32, exp rounded to bf16 for PV, PV and the
  normalisation in float64. For fp32 inputs what remains is fp32 accumulation noise (measured 1e-7 to 4e-7 of the
  largest output), checked at 1e-5. For bf16 inputs the output itself is rounded to bf16, so every element must be
  within half a bf16 ulp (2^-8 of its magnitude) of the emulated value, plus fp32 noise.
"""

from __future__ import annotations

import contextlib
import io
import math
import time

import ml_dtypes
import numpy as np
import pytest

# tests/unit/<this file> -> parents[2] is the repository root; the corpus folder sits next to the checkout.
BF16 = ml_dtypes.bfloat16


@pytest.fixture(scope="module")
def attention_cte(nkilib_module_scope):
    """``attention_cte`` loaded from the corpus by path (``conftest.py``)."""
    return nkilib_module_scope("nkilib.core.attention.attention_cte").attention_cte


def _inputs(bs: int, s: int, d: int, dtype: type, tp_q: bool, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((bs, s, d) if tp_q else (bs, d, s)).astype(dtype)
    k = rng.standard_normal((bs, d, s)).astype(dtype)  # tp_k=False (default): k is (bs, d, seqlen)
    v = rng.standard_normal((bs, s, d)).astype(dtype)
    return q, k, v


def reference(q, k, v, scale: float, causal: bool, tp_q: bool, emulate: bool) -> np.ndarray:
    """(bs, seqlen_q, d) float64; ``emulate`` applies the kernel's roundings (module docstring)."""
    if emulate:
        qf, kf, vf = (x.astype(BF16).astype(np.float32) for x in (q, k, v))
    else:
        qf, kf, vf = (x.astype(np.float64) for x in (q, k, v))
    if not tp_q:
        qf = qf.transpose(0, 2, 1)
    s = _tiled_scores(qf, kf) if emulate else np.matmul(qf, kf)
    if emulate:
        s = s * np.float32(scale)  # fp32 PSUM scores, scaled in fp32 by tensor_scalar_reduce
    else:
        s = s * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[1:], bool)), s, -np.inf)
    x = s - s.max(axis=-1, keepdims=True)
    if emulate:
        e = np.exp(x.astype(np.float64)).astype(np.float32)  # ScalarE exp: float64 math rounded to fp32
        p = e.astype(BF16).astype(np.float64)  # exp tiles are bf16 for the PV matmul
        return (p @ vf.astype(np.float64)) / e.astype(np.float64).sum(axis=-1, keepdims=True)
    e = np.exp(x)
    return (e @ vf) / e.sum(axis=-1, keepdims=True)


def _tiled_scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """fp32 QKᵀ computed like the kernel's matmuls: one (128 × d)·(d × 512) product per tile, with the operand
    layouts the simulator uses, so that fp32 summation order (and hence the bf16 rounding of exp) matches."""
    bs, sq, _ = q.shape
    sk = k.shape[2]
    out = np.empty((bs, sq, sk), np.float32)
    for b in range(bs):
        qt = np.ascontiguousarray(q[b].T)  # (d, seqlen_q): the stationary operand, partition dim d
        for i in range(0, sq, 128):
            stationary = np.ascontiguousarray(qt[:, i : i + 128])
            for j in range(0, sk, 512):
                moving = np.ascontiguousarray(k[b][:, j : j + 512])
                out[b, i : i + 128, j : j + 512] = np.matmul(stationary.T, moving)
    return out


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def check_emulated(out: np.ndarray, want: np.ndarray) -> None:
    """fp32 outputs: 1e-5 of the largest value; bf16 outputs: each element within half a bf16 ulp (+ noise)."""
    if out.dtype == np.float32:
        assert rel_err(out, want) < 1e-5
        return
    diff = np.abs(out.astype(np.float64) - want)
    bound = 2.0**-8 * np.abs(want) * (1 + 1e-3) + 1e-5 * np.max(np.abs(want))
    assert (diff <= bound).all(), f"{int((diff > bound).sum())} elements off by more than half a bf16 ulp"


CASES = [
    # (seqlen, d, dtype, causal, scale, tp_q); scale None = 1/sqrt(d), "default" = not passed (1.0)
    pytest.param(256, 64, "bfloat16", True, None, True, id="bf16-s256-d64-causal"),
    pytest.param(512, 128, "bfloat16", True, None, True, id="bf16-s512-d128-causal"),
    pytest.param(512, 64, "bfloat16", False, None, True, id="bf16-s512-d64-noncausal"),
    pytest.param(512, 64, "bfloat16", True, None, False, id="bf16-s512-d64-causal-tp_q=False"),
    pytest.param(128, 64, "bfloat16", True, None, True, id="bf16-s128-d64-causal"),  # one group: nc_transpose Q
    pytest.param(256, 128, "float32", True, None, True, id="fp32-s256-d128-causal"),
    pytest.param(512, 64, "float32", True, "default", True, id="fp32-s512-d64-causal-default-scale"),
    pytest.param(512, 128, "float32", False, None, True, id="fp32-s512-d128-noncausal"),
    pytest.param(2048, 128, "bfloat16", True, None, True, id="bf16-s2048-d128-causal"),
    pytest.param(2048, 64, "float32", False, None, True, id="fp32-s2048-d64-noncausal"),
]


@pytest.mark.parametrize("seqlen,d,dtype,causal,scale,tp_q", CASES)
def test_attention_cte_matches_numpy(attention_cte, seqlen, d, dtype, causal, scale, tp_q) -> None:
    from nkic.api.execute import simulate

    np_dtype = BF16 if dtype == "bfloat16" else np.float32
    q, k, v = _inputs(1, seqlen, d, np_dtype, tp_q)
    kwargs = {"causal_mask": causal, "tp_q": tp_q}
    if scale == "default":  # the kernel's scale=1.0, with q pre-scaled so that the scores stay O(1)
        q, scale = (q.astype(np.float64) / math.sqrt(d)).astype(np_dtype), 1.0
    else:
        scale = kwargs["scale"] = 1.0 / math.sqrt(d)
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the kernel prints a [WARN] line on every call
        out = simulate(attention_cte)(q, k, v, **kwargs)
    elapsed = time.perf_counter() - start
    assert out.shape == (1, seqlen, d) and out.dtype == np.dtype(np_dtype)
    assert np.isfinite(out.astype(np.float32)).all()
    exact = rel_err(out, reference(q, k, v, scale, causal, tp_q, emulate=False))
    want = reference(q, k, v, scale, causal, tp_q, emulate=True)
    emulated = rel_err(out, want)
    print(f"{dtype} s{seqlen} d{d} causal={causal}: exact {exact:.2e} emulated {emulated:.2e} ({elapsed:.2f} s)")
    assert exact < 2e-2
    check_emulated(out, want)


def test_attention_cte_batches_and_gqa(attention_cte) -> None:
    """bs=4 query batches over bs_kv=2 K/V batches (GQA: q batch b uses kv batch b // 2)."""
    from nkic.api.execute import simulate

    rng = np.random.default_rng(7)
    q = rng.standard_normal((4, 256, 64)).astype(BF16)
    k = rng.standard_normal((2, 64, 256)).astype(BF16)
    v = rng.standard_normal((2, 256, 64)).astype(BF16)
    with contextlib.redirect_stdout(io.StringIO()):
        out = simulate(attention_cte)(q, k, v, scale=0.125)
    kk, vv = np.repeat(k, 2, axis=0), np.repeat(v, 2, axis=0)
    assert rel_err(out, reference(q, kk, vv, 0.125, True, True, emulate=False)) < 2e-2
    check_emulated(out, reference(q, kk, vv, 0.125, True, True, emulate=True))


def test_attention_cte_trace_uses_the_default_path(attention_cte) -> None:
    """The causal default path: DMA transposes of Q and of the exp tiles, masks on the diagonal tiles only."""
    from nkic.frontend.tracer import TensorSpec

    q, k, v = (TensorSpec(shape, "bfloat16") for shape in ((1, 512, 64), (1, 64, 512), (1, 512, 64)))
    with contextlib.redirect_stdout(io.StringIO()):
        text = str(attention_cte.trace(q, k, v, scale=0.125).module)
    counts = {op: text.count(f"penguin.{op} ") for op in ("dma_transpose", "affine_select", "matmul", "activation")}
    assert counts["dma_transpose"] == 5  # one 4-D Q transpose + one per kept exp tile (4 diagonal groups)
    assert counts["affine_select"] == 4  # one diagonal 128x512 tile per Q group
    assert counts["matmul"] == 14  # 4 QK (one 512 K tile) + 1+2+3+4 PV tiles of 128


def test_attention_cte_layout_and_launch_variants(attention_cte) -> None:
    """tp_k (K given as (bs, seqlen, d)), tp_out (output (bs, d, seqlen)), an LNC2 launch sharding two batches
    over two programs, fp16 inputs and seqlen_q < seqlen_k all agree with the float64 reference."""
    from nkic.api.execute import simulate

    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(shape).astype(BF16) for shape in ((2, 512, 64), (2, 64, 512), (2, 512, 64)))
    want = reference(q, k, v, 0.125, True, True, emulate=False)
    with contextlib.redirect_stdout(io.StringIO()):
        tp_k = simulate(attention_cte)(q[:1], np.ascontiguousarray(k[:1].transpose(0, 2, 1)), v[:1], scale=0.125,
                                       tp_k=True)  # fmt: skip
        tp_out = simulate(attention_cte)(q[:1], k[:1], v[:1], scale=0.125, tp_out=True)
        lnc2 = simulate(attention_cte[2])(q, k, v, scale=0.125)
        fp16 = simulate(attention_cte)(*(x[:1].astype(np.float16) for x in (q, k, v)), scale=0.125)
        short_q = simulate(attention_cte)(q[:1, :256], k[:1], v[:1], scale=0.125)
    assert tp_out.shape == (1, 64, 512) and fp16.dtype == np.float16
    for got, ref in ((tp_k, want[:1]), (tp_out.transpose(0, 2, 1), want[:1]), (lnc2, want), (fp16, want[:1])):
        assert rel_err(got, ref) < 2e-2
    short_want = reference(q[:1, :256], k[:1], v[:1], 0.125, True, True, emulate=False)
    assert rel_err(short_q, short_want) < 2e-2


def test_attention_cte_cache_softmax(attention_cte) -> None:
    """cache_softmax also returns −max and 1/sum of every query row, laid out (bs, 128, seqlen_q / 128)."""
    from nkic.api.execute import simulate

    q, k, v = _inputs(1, 256, 64, np.float32, True, seed=11)
    with contextlib.redirect_stdout(io.StringIO()):
        out, neg_max, sum_recip = simulate(attention_cte)(q, k, v, scale=0.125, cache_softmax=True)
    qb, kb = (x.astype(BF16).astype(np.float64) for x in (q, k))
    s = np.where(np.tril(np.ones((256, 256), bool)), 0.125 * qb[0] @ kb[0], -np.inf)
    m = s.max(axis=1)
    total = np.exp(s - m[:, None]).sum(axis=1)
    assert neg_max.shape == sum_recip.shape == (1, 128, 2)
    np.testing.assert_allclose(neg_max[0], -m.reshape(2, 128).T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sum_recip[0], (1.0 / total).reshape(2, 128).T, rtol=1e-5)
    check_emulated(out, reference(q, k, v, 0.125, True, True, emulate=True))


def _windowed_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, window: int) -> np.ndarray:
    """float64 causal sliding-window attention on the bf16-rounded inputs: key j is seen by query i when
    i - window < j <= i."""
    qb, kb, vb = (x.astype(BF16).astype(np.float64) for x in (q, k, v))
    s = qb[0] @ kb[0]
    i, j = np.arange(s.shape[0])[:, None], np.arange(s.shape[1])[None, :]
    s = np.where((j <= i) & (j > i - window), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return ((p / p.sum(axis=1, keepdims=True)) @ vb[0])[None]


@pytest.mark.parametrize(
    "seqlen,window,masking",
    [(1024, 100, "range_select"), (2048, 64, "range_select"), (1024, 300, "affine_select")],
)  # fmt: skip
def test_attention_cte_sliding_window(attention_cte, seqlen: int, window: int, masking: str) -> None:
    """The sliding-window path: windows up to the kernel's threshold (128) mask with nisa.range_select on per-row
    bounds, wider ones with affine_select; both agree with the windowed float64 reference. The kernel supports SWA
    only with scale=1.0, so Q is pre-scaled."""
    from nkic.api.execute import simulate

    q, k, v = _inputs(1, seqlen, 128, np.float32, True, seed=window)
    q = (q / math.sqrt(128)).astype(np.float32)
    with contextlib.redirect_stdout(io.StringIO()):
        text = str(attention_cte.trace(q, k, v, causal_mask=True, sliding_window=window).module)
        out = simulate(attention_cte)(q, k, v, causal_mask=True, sliding_window=window)
    assert f"penguin.{masking} " in text
    assert rel_err(out, _windowed_reference(q, k, v, window)) < 2e-2


# -- prefix caching and context parallelism ----------------------------------------------------------------------
def masked_reference(q, k, v, causal=True, k_prior=None, v_prior=None, used=0, cp_offset=None, cp_deg=None,
                     strided=False, window=0) -> np.ndarray:  # fmt: skip
    """``attention_cte_torch_ref`` (scale 1.0, tp_q, K as (bs, d, seqlen)) in float64 on the bf16-rounded inputs
    (the kernel's loads): K/V = the first ``used`` prior positions then the active ones, key positions counted from
    the first active one (prior keys are negative), query positions ``cp_offset + i`` (or ``cp_offset + i·cp_deg``
    when strided); the causal mask hides keys after the query, the window keys at or beyond ``window`` before it."""
    r = lambda x: x.astype(BF16).astype(np.float64)  # noqa: E731
    q, k, v = r(q), r(k), r(v)
    if k_prior is not None:
        k = np.concatenate([r(k_prior)[:, :, :used], k], axis=2)
        v = np.concatenate([r(v_prior)[:, :used], v], axis=1)
    seqlen_q = q.shape[1]
    q_pos = (cp_offset or 0) + np.arange(seqlen_q) * (cp_deg if strided else 1)
    diff = (np.arange(k.shape[2]) - used)[None, :] - q_pos[:, None]
    mask = np.zeros(diff.shape)
    if causal:
        mask[diff > 0] = -np.inf
    if window:
        mask[diff <= -window] = -np.inf
    s = q @ k + mask
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("used,seqlen_prior,causal,window,dtype", [
    (300, 384, True, 0, np.float32),  # prior keys past prior_used_len masked at run time
    (0, 256, True, 0, BF16),  # nothing of the prior used
    (200, 256, True, 100, BF16),  # the window reaches into the prior
    (256, 256, False, 0, BF16),
])  # fmt: skip
def test_attention_cte_prefix_caching(attention_cte, used, seqlen_prior, causal, window, dtype) -> None:
    """Prefix caching: k_prior / v_prior with a run-time prior_used_len (scale must be 1.0: Q pre-scaled)."""
    from nkic.api.execute import simulate

    rng = np.random.default_rng(used + window)
    d, seqlen = 64, 256
    q = (rng.standard_normal((1, seqlen, d)) / 8).astype(dtype)
    k, kp = (rng.standard_normal((1, d, n)).astype(dtype) for n in (seqlen, seqlen_prior))
    v, vp = (rng.standard_normal((1, n, d)).astype(dtype) for n in (seqlen, seqlen_prior))
    with contextlib.redirect_stdout(io.StringIO()):
        out = simulate(attention_cte)(q, k, v, causal_mask=causal, k_prior=kp, v_prior=vp,
                                      prior_used_len=np.array([used], np.int32), sliding_window=window)  # fmt: skip
    assert out.shape == (1, seqlen, d) and out.dtype == np.dtype(dtype)
    want = masked_reference(q, k, v, causal, kp, vp, used, window=window)
    assert rel_err(out, want) < 1e-2


@pytest.mark.parametrize("cp_offset,strided,window", [
    (256, False, 0),  # rank 1 of 2: queries 256..511 against all 512 keys
    (1, True, 0),  # strided slicing: queries 1, 3, 5, ...
    (256, False, 100),  # with a window: only the needed K slice is loaded (a scalar_offset DMA)
    (0, False, 64),
])  # fmt: skip
def test_attention_cte_context_parallel(attention_cte, cp_offset: int, strided: bool, window: int) -> None:
    """Context parallelism (global_cp_deg=2): one rank's slice of Q, the full K/V, a run-time cp_offset."""
    from nkic.api.execute import simulate

    rng = np.random.default_rng(cp_offset + window)
    d, seqlen_q, seqlen_kv = 64, 256, 512
    q = (rng.standard_normal((1, seqlen_q, d)) / 8).astype(BF16)
    k = rng.standard_normal((1, d, seqlen_kv)).astype(BF16)
    v = rng.standard_normal((1, seqlen_kv, d)).astype(BF16)
    with contextlib.redirect_stdout(io.StringIO()):
        out = simulate(attention_cte)(q, k, v, cp_offset=np.array([[cp_offset]], np.int32), global_cp_deg=2,
                                      cp_strided_q_slicing=strided, sliding_window=window)  # fmt: skip
    want = masked_reference(q, k, v, cp_offset=cp_offset, cp_deg=2, strided=strided, window=window)
    assert rel_err(out, want) < 1e-2
