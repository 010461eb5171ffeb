"""nki-library attention kernels (``core/attention``), unmodified, traced, compiled and simulated by nkic.

Each kernel is checked against a numpy translation of its ``*_torch.py`` reference:

* ``attention_bwd.attention_bwd`` (flash-attention backward) against ``attention_bwd_torch.py``: the forward pass
  (``compute_o_lse``: scaled QKᵀ, causal / sliding-window / sequence-packing mask, attention sinks, softmax, and the
  log-sum-exp the kernel takes as input), then ``softmax_dx`` and the dQ / dK / dV / dsinks products, GQA heads
  expanded and their K/V gradients summed. The translation runs in float64, so it is the exact value: fp32 kernels
  (fp32 matmuls, fp32 softmax) are held to 1e-5 of the largest gradient; bf16 kernels run their matmuls on bf16
  operands (8 significant bits) and are held to the 2e-2 the nkilib tests use for bf16.
* ``attention_tkg.attention_tkg`` (token-generation attention, a sub-kernel called with an SbufManager the way
  ``attention_block_tkg`` calls it) against ``attention_tkg_torch.py``: fused RoPE on Q and K (Q scaled by
  1/sqrt(d)), the active K/V written over the cache tail, a pre-generated mask or one generated from position ids
  (with a sliding window), attention sinks, softmax over the prior, P·V; block KV (K/V gathered by a
  ``vector_offset`` access pattern) and both LNC2 shardings (batch; s_prior, whose partial max / sum / P·V cross
  the pair by ``nisa.sendrecv``).
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
    from nkic.api.execute import simulate

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
    from nkic.api.execute import simulate

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


# ------------------------------------------------------------------------------------------------------------
# attention_tkg
# ------------------------------------------------------------------------------------------------------------
def _rope(x: np.ndarray, inv_freqs: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``_gen_rope_coeff`` + ``_apply_rope`` of the torch reference on x [B, N, d, S] (float64)."""
    freqs = inv_freqs.astype(np.float64)[:, None, :] * pos.astype(np.float64)[None]  # [d/2, B, S]
    emb = np.concatenate([freqs, freqs], 0)
    x = x.transpose(2, 0, 1, 3)  # dBNS
    half = x.shape[0] // 2
    rotated = np.concatenate([-x[half:], x[:half]], 0)
    return (x * np.cos(emb)[:, :, None] + rotated * np.sin(emb)[:, :, None]).transpose(1, 2, 0, 3)


def tkg_reference(q, k_active, v_active, k_prior, v_prior, mask, cfg: dict, pos=None, inv_freqs=None, start=None,
                  sink=None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``attention_tkg_torch_ref`` (``_attention_tkg_fwd_ref``) in float64: (out [B, H, d, S], k_out [B, 1, d, S]).

    ``q``/``k_active`` are [B, H, S, d] / [B, 1, S, d] in HBM (fuse_rope) or [d, B*H*S] / [d, B*S] (qk_in_sb);
    ``k_prior`` is [B, 1, d, s_prior] ([B, 1, s_prior, d] with tp_k_prior), already gathered for block KV."""
    b, h, s, d, s_prior = cfg["bs"], cfg["q_head"], cfg["s_active"], cfg["d_head"], cfg["curr_sprior"]
    f = lambda x: np.asarray(x, np.float64)  # noqa: E731
    if cfg.get("qk_in_sb"):
        q = f(q).reshape(d, b, h, s).transpose(1, 2, 0, 3)
        k_active = f(k_active).reshape(d, 1, b, s).transpose(2, 1, 0, 3)
    else:
        q, k_active = f(q).transpose(0, 1, 3, 2), f(k_active).transpose(0, 1, 3, 2)
    if cfg.get("fuse_rope"):
        q = _rope(q, inv_freqs, pos) / np.sqrt(d)
        k_active = _rope(k_active, inv_freqs, pos)
    k_prior = f(k_prior)[:b].transpose(0, 1, 3, 2) if cfg.get("tp_k_prior") else f(k_prior)[:b]
    k_prior, v_prior = k_prior[..., :s_prior].copy(), f(v_prior)[:b, :, :s_prior].copy()
    k_prior[..., -s:] = k_active
    v_prior[..., -s:, :] = f(v_active)
    if cfg.get("use_pos_id"):  # prior mask from the positions, a causal active mask at the tail
        prior = _prior_mask(pos.reshape(1, -1), b, h, s, s_prior, None if start is None else start.reshape(1, -1))
        prior = prior.copy()
        prior[..., s_prior - s :] = np.tril(np.ones((s, s)))
        keep = prior.transpose(0, 1, 3, 2)  # [b, h, s_prior, s]
    else:
        keep = mask.transpose(1, 2, 0, 3)
    score = np.where(keep == 0, -np.inf, k_prior.transpose(0, 1, 3, 2) @ q)  # [b, h, s_prior, s]
    if sink is not None:
        score = np.concatenate([score, np.broadcast_to(f(sink).reshape(1, h, 1, 1), (b, h, 1, s))], 2)
    e = np.exp(score - score.max(2, keepdims=True))
    p = (e / e.sum(2, keepdims=True))[:, :, :s_prior]
    return (p.transpose(0, 1, 3, 2) @ v_prior).transpose(0, 1, 3, 2), k_active


def _tkg_kernel(attention_tkg, utils, allocator, cfg: dict):
    """A ``@nki.jit`` caller of the ``attention_tkg`` sub-kernel (it takes an SbufManager and its output), the way
    ``attention_block_tkg`` calls it: with ``qk_in_sb`` it first loads Q [d, B*H*S] and K [d, B*S] into SBUF."""
    import nki
    import nki.isa as nisa
    import nki.language as nl

    def caller(q, k_active, v_active, k_prior, v_prior, mask, inv_freqs, pos, start, sink, table):
        config = utils.AttnTKGConfig(full_sprior=cfg["curr_sprior"], **cfg)
        sbm = allocator.SbufManager(0, 180 * 1024, use_auto_alloc=True)
        sbm.open_scope()
        if cfg.get("qk_in_sb"):
            q_sb = sbm.alloc_stack(q.shape, dtype=q.dtype, buffer=nl.sbuf)
            k_sb = sbm.alloc_stack(k_active.shape, dtype=k_active.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=q_sb, src=q)
            nisa.dma_copy(dst=k_sb, src=k_active)
            q, k_active = q_sb, k_sb
        b, h, d, s = cfg["bs"], cfg["q_head"], cfg["d_head"], cfg["s_active"]
        out = nl.ndarray((b, h, d, s), dtype=q.dtype, buffer=nl.shared_hbm)
        k_out = nl.ndarray((b, 1, d, s), dtype=q.dtype, buffer=nl.shared_hbm) if cfg.get("fuse_rope") else None
        attention_tkg(q, k_active, v_active, k_prior, v_prior, mask, out, config, sbm, inv_freqs=inv_freqs,
                      rope_pos_ids=pos, start_pos_ids=start, sink=sink, active_blocks_table=table, k_out=k_out)  # fmt: skip
        sbm.close_scope()
        return (out, k_out) if k_out is not None else out

    return nki.jit(caller)


TKG_CASES = [
    # (lnc, dtype, cfg, extras); cfg holds AttnTKGConfig fields, extras the optional inputs
    pytest.param(1, np.float32, dict(bs=1, q_head=1, s_active=1, curr_sprior=128, d_head=64, fuse_rope=True), {},
                 id="smallest-fused-rope"),
    pytest.param(1, BF16, dict(bs=1, q_head=1, s_active=1, curr_sprior=128, d_head=64, fuse_rope=True), {},
                 id="bf16"),
    pytest.param(1, np.float32, dict(bs=1, q_head=1, s_active=1, curr_sprior=128, d_head=64, fuse_rope=True,
                                     tp_k_prior=True, strided_mm1=False), {}, id="tp_k_prior-not-strided"),
    pytest.param(1, np.float32, dict(bs=2, q_head=4, s_active=3, curr_sprior=512, d_head=128, fuse_rope=True), {},
                 id="bs2-h4-s3-d128"),
    pytest.param(1, np.float32, dict(bs=1, q_head=2, s_active=2, curr_sprior=256, d_head=64, fuse_rope=True,
                                     use_pos_id=True), {"sink": True}, id="pos-id-mask-sink"),
    pytest.param(1, np.float32, dict(bs=2, q_head=1, s_active=2, curr_sprior=256, d_head=64, fuse_rope=True,
                                     use_pos_id=True), {"swa": True}, id="pos-id-sliding-window"),
    pytest.param(1, np.float32, dict(bs=2, q_head=2, s_active=2, curr_sprior=256, d_head=64, qk_in_sb=True), {},
                 id="qk-in-sbuf"),
    # Block KV (block_len > 0 with an active_blocks_table) loads K by a vector_offset access pattern
    # (attention_tkg.py:1677, k_prior_reshaped.ap(..., vector_offset=...)): blocked on dynamic access patterns.
    pytest.param(1, np.float32, dict(bs=2, q_head=2, s_active=1, curr_sprior=256, d_head=64, qk_in_sb=True,
                                     block_len=16, tp_k_prior=True, strided_mm1=False, use_pos_id=True),
                 {"blocks": True}, id="block-kv"),
    pytest.param(2, np.float32, dict(bs=2, q_head=2, s_active=2, curr_sprior=128, d_head=64, qk_in_sb=True), {},
                 id="lnc2-batch-sharded"),
    # An odd batch (or a small one with s_prior >= 256) shards s_prior over the pair: each core's partial max,
    # exp sum and P·V are exchanged by nisa.sendrecv (attention_tkg.py sendrecv_and_reduce / sendrecv_and_add).
    pytest.param(2, np.float32, dict(bs=1, q_head=2, s_active=2, curr_sprior=256, d_head=64, fuse_rope=True),
                 {"s_prior_sharded": True}, id="lnc2-sprior-sharded"),
    pytest.param(2, np.float32, dict(bs=1, q_head=2, s_active=2, curr_sprior=256, d_head=64, fuse_rope=True,
                                     use_pos_id=True), {"sink": True, "s_prior_sharded": True},
                 id="lnc2-sprior-sharded-pos-id-sink"),
]  # fmt: skip


@pytest.mark.parametrize("lnc,dtype,cfg,extras", TKG_CASES)
def test_attention_tkg(nkilib, lnc: int, dtype, cfg: dict, extras: dict) -> None:
    from nkic.api.execute import simulate

    attention_tkg = nkilib("nkilib.core.attention.attention_tkg").attention_tkg
    utils = nkilib("nkilib.core.attention.attention_tkg_utils")
    allocator = nkilib("nkilib.core.utils.allocator")
    b, h, s, d, s_prior = (cfg[k] for k in ("bs", "q_head", "s_active", "d_head", "curr_sprior"))
    if lnc > 1:  # the case exercises the sharding its id names (the kernel picks it from the shapes)
        assert utils.is_s_prior_sharded(b, h, s, s_prior, P_MAX) == bool(extras.get("s_prior_sharded"))
    rng = np.random.default_rng(11)
    rand = lambda *shape: rng.standard_normal(shape).astype(dtype)  # noqa: E731
    if cfg.get("qk_in_sb"):
        q, k_active = rand(d, b * h * s), rand(d, b * s)
    else:
        q, k_active = rand(b, h, s, d), rand(b, 1, s, d)
    v_active, v_prior = rand(b, 1, s, d), rand(b, 1, s_prior, d)
    k_prior = rand(b, 1, s_prior, d) if cfg.get("tp_k_prior") else rand(b, 1, d, s_prior)
    pos = rng.integers(s, s_prior - s, (b, s)).astype(np.float32)
    inv_freqs = (1.0 / 10000 ** (np.arange(0, d, 2) / d)).astype(np.float32)[:, None]
    if cfg.get("use_pos_id"):  # the causal active mask [s_active (key), B, H, s_active (query)] the reference assumes
        mask = np.broadcast_to(np.tril(np.ones((s, s), np.uint8)).T[:, None, None, :], (s, b, h, s)).copy()
    else:
        mask = (rng.random((s_prior, b, h, s)) < 0.7).astype(np.uint8)
        mask[-1] = 1  # every query sees at least its own key
    start = sink = table = None
    if extras.get("swa"):  # windows ending at pos, some wrapping around the cache start
        start = ((pos - rng.integers(1, s_prior // 2, (b, s))) % s_prior).astype(np.float32)
    if extras.get("sink"):
        sink = rng.standard_normal((h, 1)).astype(np.float32)
    ref_k_prior = k_prior
    if extras.get("blocks"):  # the cache as shuffled blocks [B * n_blocks, block_len, d] and each batch's table
        block_len = cfg["block_len"]
        n_blocks = s_prior // block_len
        table = rng.permutation(b * n_blocks).reshape(b, n_blocks).astype(np.uint32)
        to_blocks = lambda flat: np.empty_like(flat.reshape(b * n_blocks, block_len, d))  # noqa: E731
        k_blocks, v_blocks = to_blocks(k_prior), to_blocks(v_prior)
        k_blocks[table] = k_prior.reshape(b, n_blocks, block_len, d)  # _gather_block_kv_to_flat inverted
        v_blocks[table] = v_prior.reshape(b, n_blocks, block_len, d)
        k_prior, v_prior = k_blocks, v_blocks
    with contextlib.redirect_stdout(io.StringIO()):  # block-KV resizing prints a note
        kernel = _tkg_kernel(attention_tkg, utils, allocator, cfg)
        got = simulate(kernel[lnc] if lnc > 1 else kernel)(
            q, k_active, v_active, k_prior, v_prior, mask, inv_freqs, pos, start, sink, table
        )
    out, k_out = got if cfg.get("fuse_rope") else (got, None)
    want, want_k = tkg_reference(q, k_active, v_active, ref_k_prior, v_prior if table is None else
                                 v_prior[table].reshape(b, 1, s_prior, d), mask, cfg, pos, inv_freqs, start, sink)  # fmt: skip
    # The RoPE angle pos * inv_freq (up to s_prior radians) is formed and range-reduced to [-pi, pi] in fp32 by the
    # kernel (_rope, _modulo): an absolute angle error of a few ulps of s_prior, i.e. ~s_prior * 2^-22.
    tol = 1e-5 + (s_prior * 2.0**-22 if cfg.get("fuse_rope") else 0.0) if dtype == np.float32 else 2e-2
    assert out.shape == (b, h, d, s) and out.dtype == np.dtype(dtype)
    err = np.max(np.abs(out.astype(np.float64) - want)) / np.max(np.abs(want))
    assert err < tol, f"out: relative error {err:.2e}"
    if k_out is not None:  # k_active after RoPE
        err = np.max(np.abs(k_out.astype(np.float64) - want_k)) / np.max(np.abs(want_k))
        assert err < tol, f"k_out: relative error {err:.2e}"
