"""nki-library attention kernels (``core/attention``), unmodified, traced, compiled and simulated by nkic.

Each kernel is checked against a numpy translation of its ``*_torch.py`` reference:

* ``attention_bwd.attention_bwd`` (flash-attention backward) against ``attention_bwd_torch.py``: the forward pass
  (``compute_o_lse``: scaled QKᵀ, causal / sliding-window / sequence-packing mask, attention sinks, softmax, and the
  log-sum-exp the kernel takes as input), then ``softmax_dx`` and the dQ / dK / dV / dsinks products, GQA heads
  expanded and their K/V gradients summed. The translation runs in float64, so it is the exact value: fp32 kernels
  (fp32 matmuls, fp32 softmax) are held to 1e-5 of the largest gradient; bf16 kernels run their matmuls on bf16
  operands (8 significant bits) and are held to the 2e-2 the nkilib tests use for bf16.
* ``gen_mask_tkg.gen_mask_tkg_hbm`` (token-generation attention mask) against ``gen_mask_tkg_torch.py``'s
  ``gen_mask_tkg_hbm_torch_ref``: prior mask ``k < cache_len`` or the per-query sliding window (with wrap-around),
  the optional active mask at the tail, the strided / block-KV layouts and the LNC2 batch sharding. A mask is
  exact (0.0 / 1.0), so it must match bit for bit.

The corpus is loaded by path by the ``nkilib`` fixture (``conftest.py``); every test is skipped when it is absent.
"""

from __future__ import annotations

import contextlib
import io

import ml_dtypes
import numpy as np
import pytest

BF16 = ml_dtypes.bfloat16
P_MAX = 128


# ------------------------------------------------------------------------------------------------------------
# attention_bwd
# ------------------------------------------------------------------------------------------------------------
def _bwd_mask(s: int, causal: bool, window: int, bounds: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """``compute_o_lse``'s combined mask: True where a score is masked out."""
    q_pos, k_pos = np.arange(s)[:, None], np.arange(s)[None, :]
    mask = np.zeros((s, s), bool)
    if causal:
        mask |= k_pos > q_pos
    if window > 0:
        mask |= k_pos < q_pos - window + 1
    if bounds is not None:
        lo, hi = bounds
        mask |= (k_pos < lo[:, None]) | (k_pos >= hi[:, None])
    return mask


def bwd_reference(q, k, v, dy, scale, causal=False, window=0, bounds=None, sinks=None):
    """``attention_bwd_torch_ref`` in float64: (o, lse) of the forward pass and the gradients (dq, dk, dv[, dsinks])."""
    f = lambda x: np.asarray(x, np.float64)  # noqa: E731
    b, hq, d, s = q.shape
    groups = hq // k.shape[1]
    ke, ve = np.repeat(f(k), groups, 1), np.repeat(f(v), groups, 1)  # expand_kv_heads
    raw = np.einsum("bhds,bhdt->bhst", f(q) * scale, ke)
    raw = np.where(_bwd_mask(s, causal, min(window, s), bounds), -np.inf, raw)
    n_sinks = 0
    if sinks is not None:
        n_sinks = sinks.shape[-1] if sinks.ndim == 3 else 1
        raw = np.concatenate([raw, np.broadcast_to(f(sinks).reshape(b, hq, 1, n_sinks), (b, hq, s, n_sinks))], -1)
    top = raw.max(-1, keepdims=True)
    e = np.exp(raw - top)
    total = e.sum(-1, keepdims=True)
    p = e / total  # softmax, with the sink columns last
    o = np.einsum("bhst,bhdt->bhds", p[..., :s], ve)
    lse = (top + np.log(total))[..., 0].reshape(b, hq, s // P_MAX, P_MAX).transpose(0, 1, 3, 2)
    dp = np.einsum("bhds,bhdt->bhst", f(dy), ve)
    dp = np.concatenate([dp, np.zeros((b, hq, s, n_sinks))], -1)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))  # softmax_dx
    dsinks = ds[..., s:].sum(2).reshape(sinks.shape) if sinks is not None else None
    ds, p = ds[..., :s], p[..., :s]
    reduce_kv = lambda x: x.reshape(b, -1, groups, d, s).sum(2)  # noqa: E731
    dv = reduce_kv(np.einsum("bhds,bhst->bhdt", f(dy), p))
    dq = np.einsum("bhdt,bhst->bhds", ke, ds) * scale
    dk = reduce_kv(np.einsum("bhds,bhst->bhdt", f(q) * scale, ds))
    grads = (dq, dk, dv) + ((dsinks,) if sinks is not None else ())
    return o, lse, grads


def _packing_bounds(lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """bound_min / bound_max of packed sequences of these lengths (the kernel docstring's cu_seqlens example)."""
    cu = np.cumsum([0, *lengths])
    lo = np.concatenate([np.full(n, cu[i]) for i, n in enumerate(lengths)]).astype(np.float32)
    hi = np.concatenate([np.full(n, cu[i + 1]) for i, n in enumerate(lengths)]).astype(np.float32)
    return lo, hi


BWD_CASES = [
    # (bs, nheads, nheads_kv, d, seqlen, dtype, options)
    pytest.param(1, 1, 1, 64, 128, np.float32, {}, id="fp32-smallest"),
    pytest.param(1, 1, 1, 64, 128, np.float32, {"use_causal_mask": True}, id="fp32-causal"),
    pytest.param(1, 1, 1, 64, 128, BF16, {}, id="bf16"),
    pytest.param(1, 1, 1, 64, 128, BF16, {"mixed_precision": True}, id="bf16-mixed-precision"),
    pytest.param(2, 4, 2, 64, 256, np.float32, {"use_causal_mask": True}, id="fp32-gqa-batch2-causal"),
    pytest.param(1, 1, 1, 128, 512, np.float32, {"use_causal_mask": True, "sliding_window": 100}, id="fp32-swa"),
    pytest.param(1, 2, 1, 64, 256, np.float32, {"sinks": 1}, id="fp32-mqa-sink"),
    pytest.param(1, 1, 1, 64, 256, np.float32, {"use_causal_mask": True, "pack": [40, 100, 116]}, id="fp32-packed"),
    pytest.param(1, 1, 1, 256, 128, np.float32, {}, id="fp32-d256"),
]


@pytest.mark.parametrize("bs,hq,hkv,d,s,dtype,options", BWD_CASES)
def test_attention_bwd(nkilib, bs: int, hq: int, hkv: int, d: int, s: int, dtype, options: dict) -> None:
    from nkic.execute import simulate

    kernel = nkilib("nkilib.core.attention.attention_bwd").attention_bwd
    rng = np.random.default_rng(0)
    q, dy = (rng.standard_normal((bs, hq, d, s)).astype(dtype) for _ in range(2))
    k, v = (rng.standard_normal((bs, hkv, d, s)).astype(dtype) for _ in range(2))
    options = dict(options)
    sinks = None
    if "sinks" in options:
        sinks = options["sinks_ref"] = rng.standard_normal((bs, hq, options.pop("sinks"))).astype(dtype)
    bounds = None
    if "pack" in options:
        bounds = _packing_bounds(options.pop("pack"))
        options["bound_min"], options["bound_max"] = bounds
    causal, window = options.get("use_causal_mask", False), options.get("sliding_window") or 0
    o, lse, want = bwd_reference(q, k, v, dy, 1 / np.sqrt(d), causal, window, bounds, sinks)
    got = simulate(kernel)(q, k, v, o.astype(dtype), dy, lse.astype(np.float32), **options)
    assert len(got) == len(want)
    tol = 1e-5 if dtype == np.float32 else 2e-2
    for name, g, w in zip(("dq", "dk", "dv", "dsinks"), got, want, strict=False):
        assert g.shape == w.shape and g.dtype == np.dtype(dtype), name
        err = np.max(np.abs(g.astype(np.float64) - w)) / np.max(np.abs(w))
        assert err < tol, f"{name}: relative error {err:.2e}"


# ------------------------------------------------------------------------------------------------------------
# gen_mask_tkg
# ------------------------------------------------------------------------------------------------------------
def _prior_mask(pos, bs, q_head, s_active, s_ctx, start=None) -> np.ndarray:
    """``build_attention_mask`` / ``build_swa_attention_mask`` without the active mask: [bs, q_head, s_active, s_ctx]."""
    k = np.arange(s_ctx, dtype=np.float32)
    if start is None:
        cache_lens = pos[0, ::s_active][:bs].astype(np.float32)
        mask = np.broadcast_to(k[None, None, :] < cache_lens[:, None, None], (bs, s_active, s_ctx))
    else:
        lo = start[0, : bs * s_active].astype(np.float32).reshape(bs, s_active, 1)
        hi = pos[0, : bs * s_active].astype(np.float32).reshape(bs, s_active, 1)
        mask = np.where(lo <= hi, (k >= lo) & (k < hi), (k >= lo) | (k < hi))  # a window may wrap around
    return np.broadcast_to(mask[:, None], (bs, q_head, s_active, s_ctx)).astype(np.float32)


def _kernel_layout(mask, bs, q_head, s_active, n_tile, block_len) -> np.ndarray:
    """``_reshape_to_kernel_format``: [bs, q_head, s_active, n_tile * P_MAX] -> [P_MAX, n_tile, bs, q_head, s_active]."""
    if block_len > 0:  # position fold * block_len * P_MAX + p * block_len + offset -> (p, fold * block_len + offset)
        folds = n_tile // block_len
        return mask.reshape(bs, q_head, s_active, folds, P_MAX, block_len).transpose(4, 3, 5, 0, 1, 2).reshape(
            P_MAX, n_tile, bs, q_head, s_active
        )
    return mask.reshape(bs, q_head, s_active, P_MAX, n_tile).transpose(3, 4, 0, 1, 2)  # strided: k -> (k // n, k % n)


def gen_mask_reference(utils, lnc, pos, bs, q_head, s_active, s_prior, start=None, block_len=0, active=None):
    """``gen_mask_tkg_hbm_torch_ref[lnc]``: [s_prior, bs, q_head, s_active].

    Under LNC2 batch sharding each of the two shards writes its own half of the batches, so together they write
    the whole mask: the reference's per-shard combination is the identity for lnc = 2 and is left out."""
    if block_len > 0:
        block_len, _ = utils.resize_cache_block_len_for_attention_tkg_kernel(
            s_prior // block_len, block_len, lnc, P_MAX, bs, q_head, s_active
        )
    mask = _prior_mask(pos, bs, q_head, s_active, s_prior, start).copy()
    if active is not None:
        mask[..., s_prior - s_active :] = active[:, :bs].transpose(1, 2, 3, 0)
    mask = _kernel_layout(mask, bs, q_head, s_active, s_prior // P_MAX, block_len)
    return mask.transpose(1, 0, 2, 3, 4).reshape(s_prior, bs, q_head, s_active)


GEN_MASK_CASES = [
    # (lnc, bs, q_head, s_active, s_prior, options)
    pytest.param(1, 1, 1, 1, 128, {}, id="smallest"),
    pytest.param(1, 2, 2, 4, 256, {}, id="bs2-qh2-sa4"),
    pytest.param(1, 2, 2, 4, 256, {"swa": True}, id="swa"),
    pytest.param(1, 2, 2, 4, 256, {"active": True}, id="active-mask"),
    pytest.param(1, 2, 1, 2, 1024, {"block_len": 4}, id="block-kv"),
    pytest.param(1, 1, 2, 3, 512, {"block_len": 2, "active": True}, id="block-kv-active-mask"),
    pytest.param(2, 2, 1, 2, 128, {}, id="lnc2-batch-sharded"),
    pytest.param(2, 1, 2, 2, 512, {"active": True}, id="lnc2-sprior-sharded-active-mask"),
    pytest.param(2, 1, 1, 2, 512, {"swa": True}, id="lnc2-sprior-sharded-swa"),
]


@pytest.mark.parametrize("lnc,bs,q_head,s_active,s_prior,options", GEN_MASK_CASES)
def test_gen_mask_tkg_hbm(nkilib, lnc: int, bs: int, q_head: int, s_active: int, s_prior: int, options: dict) -> None:
    import nki
    from nkic.execute import simulate

    module = nkilib("nkilib.core.attention.gen_mask_tkg")
    utils = nkilib("nkilib.core.attention.attention_tkg_utils")
    rng = np.random.default_rng(3)
    # Each batch's s_active queries sit at positions cache_len .. cache_len + s_active - 1; the torch reference
    # reads one cache length per batch (pos_ids[0, ::s_active]).
    cache_lens = rng.integers(1, s_prior - s_active, bs)
    pos = (np.repeat(cache_lens, s_active) + np.tile(np.arange(s_active), bs)).astype(np.float32)[None, :]
    kwargs: dict = {}
    start = active = None
    if options.get("swa"):  # windows [start, end) per query, some of them wrapping around (start > end)
        pos = rng.integers(1, s_prior, (1, bs * s_active)).astype(np.float32)
        start = kwargs["start_pos_hbm"] = rng.integers(0, s_prior, (1, bs * s_active)).astype(np.float32)
        assert (start > pos).any() and (start <= pos).any()
    if options.get("active"):
        active = kwargs["active_mask"] = (rng.random((s_active, bs, q_head, s_active)) < 0.5).astype(np.float32)
    block_len = kwargs["block_len"] = options.get("block_len", 0)
    kernel = nki.jit(module.gen_mask_tkg_hbm)
    with contextlib.redirect_stdout(io.StringIO()):  # its SbufManager logs every allocation
        got = simulate(kernel[lnc] if lnc > 1 else kernel)(pos, bs, q_head, s_active, s_prior, **kwargs)
    want = gen_mask_reference(utils, lnc, pos, bs, q_head, s_active, s_prior, start, block_len, active)
    assert got.shape == (s_prior, bs, q_head, s_active) and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
