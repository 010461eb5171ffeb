"""nki-library's mixture-of-experts kernels, unmodified, traced, compiled and simulated by nkic.

* ``core/moe/moe_tkg/moe_tkg.py`` (``moe_tkg``): all-expert mode (bf16 and fp16, with and without biases, every
  activation function and the clamps, and POST_SCALE affinity scaling) and selective-expert mode (the experts'
  weights selected per token with ``.ap(scalar_offset=)``). Checked against a numpy translation of
  ``moe_tkg_torch.py``'s non-MX path (``moe_tkg_torch_ref`` / ``_compute_expert_mlp``).
* ``core/router_topk/router_topk.py`` (``router_topk``, ``nc_matmul`` with ``tile_position``, ``core_barrier``)
  against a numpy translation of ``router_topk_torch.py``.
* ``core/moe/moe_cte/moe_cte.py`` (``moe_cte[2]``, shard_on_block and shard_on_I: tokens gathered per block with
  ``.ap(vector_offset=)``) against a numpy translation of ``moe_cte_torch.py``'s non-quantised top-1 path.

The corpus is loaded by path by the ``nkilib`` fixture (``conftest.py``); every test is skipped when it is absent.
"""

from __future__ import annotations

import contextlib
import io
import math

import ml_dtypes
import numpy as np
import pytest

from nkic.api.execute import simulate

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(11)


# -- moe_tkg --------------------------------------------------------------------------------------------------
def _act(x: np.ndarray, fn: int) -> np.ndarray:
    """``_compute_expert_mlp``'s activations, by ``ActFnType`` value (SiLU, GELU, GELU_Tanh_Approx, Swish)."""
    if fn == 0:
        return x / (1 + np.exp(-x))
    if fn == 1:
        return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    if fn == 2:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return x / (1 + np.exp(-1.702 * x))


def _expert_mlp(x, gate_up_w, down_w, gate_up_b, down_b, fn: int, clamps: dict) -> np.ndarray:
    """``_compute_expert_mlp`` (non-quantized): fp32 math, the result cast to the input dtype."""
    dtype, x = x.dtype, x.astype(np.float32)
    gate = x @ gate_up_w[:, 0, :].astype(np.float32)
    up = x @ gate_up_w[:, 1, :].astype(np.float32)
    if gate_up_b is not None:
        gate, up = gate + gate_up_b[0].astype(np.float32), up + gate_up_b[1].astype(np.float32)
    if clamps.get("gate_clamp_upper_limit") is not None:
        gate = np.minimum(gate, clamps["gate_clamp_upper_limit"])
    up = np.clip(up, clamps.get("up_clamp_lower_limit", -np.inf), clamps.get("up_clamp_upper_limit", np.inf))
    out = (_act(gate, fn) * up) @ down_w.astype(np.float32)
    if down_b is not None:
        out = out + down_b.astype(np.float32)
    return out.astype(dtype)


def moe_tkg_ref(x, gate_up_w, down_w, affinities, expert_index, is_all_expert: bool, gate_up_b=None, down_b=None,
                fn: int = 0, post_scale: bool = False, **clamps) -> np.ndarray:  # fmt: skip
    """``moe_tkg_torch_ref``'s non-MX path: every expert on every token (all-expert) or each token's top-k experts
    (selective), optionally scaled by the token's affinity, summed into an output of the input dtype."""
    out = np.zeros(x.shape, x.dtype)
    experts = range(gate_up_w.shape[0])
    bias = lambda b, e: None if b is None else b[e]  # noqa: E731
    if is_all_expert:
        for e in experts:
            y = _expert_mlp(x, gate_up_w[e], down_w[e], bias(gate_up_b, e), bias(down_b, e), fn, clamps)
            if post_scale:
                y = (affinities[:, e : e + 1].astype(np.float32) * y).astype(x.dtype)
            out = (out.astype(np.float32) + y.astype(np.float32)).astype(x.dtype)
        return out
    for t in range(x.shape[0]):
        for e in expert_index[t]:
            y = _expert_mlp(x[t : t + 1], gate_up_w[e], down_w[e], bias(gate_up_b, e), bias(down_b, e), fn, clamps)
            if post_scale:
                y = (affinities[t, e].astype(np.float32) * y).astype(x.dtype)
            out[t] = (out[t].astype(np.float32) + y[0].astype(np.float32)).astype(x.dtype)
    return out


def _moe_inputs(t: int, h: int, i: int, e: int, k: int, dtype, bias: bool) -> dict:
    return {
        "hidden_input": RNG.standard_normal((t, h)).astype(dtype),
        "expert_gate_up_weights": (RNG.standard_normal((e, h, 2, i)) * 0.05).astype(dtype),
        "expert_down_weights": (RNG.standard_normal((e, i, h)) * 0.05).astype(dtype),
        "expert_affinities": RNG.random((t, e)).astype(dtype),
        "expert_index": np.stack([RNG.permutation(e)[:k] for _ in range(t)]).astype(np.int32),
        "expert_gate_up_bias": (RNG.standard_normal((e, 2, i)) * 0.5).astype(dtype) if bias else None,
        "expert_down_bias": (RNG.standard_normal((e, h)) * 0.5).astype(dtype) if bias else None,
    }


def _run_moe_tkg(nkilib, inputs: dict, **kw) -> np.ndarray:
    mod = nkilib("nkilib.core.moe.moe_tkg.moe_tkg")
    act = nkilib("nkilib.core.utils.common_types").ActFnType
    kw = dict(kw, activation_fn=act(kw.pop("fn", 0)))
    with contextlib.redirect_stdout(io.StringIO()):  # the SBUF manager logs its statistics
        return simulate(mod.moe_tkg)(**inputs, **kw)


def _rel_err(got: np.ndarray, want: np.ndarray) -> float:
    got, want = got.astype(np.float64), want.astype(np.float64)
    return float(np.abs(got - want).max() / np.abs(want).max())


# T, H, I, E, dtype, bias, activation (ActFnType value), clamps
TKG_CASES = [
    (4, 512, 128, 2, BF16, False, 0, {}),
    (4, 256, 96, 2, BF16, False, 0, {}),  # I not a multiple of 128, one H tile pair
    (4, 512, 128, 2, BF16, True, 1, {"gate_clamp_upper_limit": 0.5, "up_clamp_upper_limit": 0.4,
                                     "up_clamp_lower_limit": -0.3}),  # fmt: skip
    (16, 1024, 256, 3, np.float16, False, 3, {}),
    (128, 512, 384, 2, BF16, True, 2, {}),  # T = pmax, three I tiles
]


@pytest.mark.parametrize("t,h,i,e,dtype,bias,fn,clamps", TKG_CASES)
def test_moe_tkg_all_expert(nkilib, t, h, i, e, dtype, bias: bool, fn: int, clamps: dict) -> None:
    inputs = _moe_inputs(t, h, i, e, 1, dtype, bias)
    got = _run_moe_tkg(nkilib, inputs, is_all_expert=True, fn=fn, **clamps)
    assert got.dtype == dtype and got.shape == (t, h)
    ins = list(inputs.values())
    want = moe_tkg_ref(*ins[:5], True, *ins[5:], fn=fn, **clamps)
    # bf16 keeps 8 significant bits (fp16 11): the kernel's bf16 intermediates (the gate/up results feed the down
    # matmul in the input dtype) round differently from the reference's fp32 ones.
    tol = 1.5e-2 if dtype == BF16 else 2e-3
    assert _rel_err(got, want) < tol
    if clamps:  # the clamps change the result by far more than the tolerance: they are really applied
        assert _rel_err(moe_tkg_ref(*ins[:5], True, *ins[5:], fn=fn), want) > 10 * tol


def test_moe_tkg_selective_expert(nkilib) -> None:
    inputs = _moe_inputs(4, 512, 128, 4, 2, BF16, False)
    got = _run_moe_tkg(nkilib, inputs, is_all_expert=False)
    ins = list(inputs.values())
    np.testing.assert_allclose(got.astype(np.float32), moe_tkg_ref(*ins[:5], False).astype(np.float32), atol=3e-2)


def test_moe_tkg_all_expert_post_scale(nkilib) -> None:
    inputs = _moe_inputs(4, 512, 128, 2, 1, BF16, False)
    mode = nkilib("nkilib.core.utils.common_types").ExpertAffinityScaleMode.POST_SCALE
    got = _run_moe_tkg(nkilib, inputs, is_all_expert=True, rank_id=np.zeros((1, 1), np.int32),
                       expert_affinities_scaling_mode=mode)  # fmt: skip
    ins = list(inputs.values())
    assert _rel_err(got, moe_tkg_ref(*ins[:5], True, post_scale=True)) < 1.5e-2


# -- router_topk ----------------------------------------------------------------------------------------------
def router_topk_ref(x, w, w_bias, act: str, k: int, x_hbm_layout: int, router_pre_norm: bool = True,
                    norm_topk_prob: bool = False) -> dict:  # fmt: skip
    """``router_topk_torch_ref``: logits = xᵀ·w (+ bias); the top-k expert indices of each token; the affinities
    either activated over all experts (pre-norm; optionally only the top-k kept and L1-normalised) or activated over
    the top-k logits and scattered back (post-norm)."""
    xf = x.astype(np.float32)
    logits = (xf if x_hbm_layout == 1 else xf.T) @ w.astype(np.float32)
    if w_bias is not None:
        logits = logits + w_bias.astype(np.float32).reshape(1, -1)
    index = np.argsort(-logits, axis=-1, kind="stable")[:, :k]
    rows = np.arange(logits.shape[0])[:, None]

    def activate(v: np.ndarray) -> np.ndarray:
        if act == "sigmoid":
            return 1 / (1 + np.exp(-v))
        e = np.exp(v - v.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    if router_pre_norm:
        affinities = activate(logits)
        if norm_topk_prob:
            kept = np.zeros_like(affinities)
            kept[rows, index] = affinities[rows, index]
            affinities = kept / kept.sum(axis=1, keepdims=True)
    else:
        affinities = np.zeros_like(logits)
        affinities[rows, index] = activate(logits[rows, index])
    return {"router_logits": logits, "expert_index": index, "expert_affinities": affinities}


@pytest.mark.parametrize("x_hbm_layout,pre_norm,norm", [(1, True, False), (0, True, True), (1, False, False)])
def test_router_topk(nkilib, x_hbm_layout: int, pre_norm: bool, norm: bool) -> None:
    mod = nkilib("nkilib.core.router_topk.router_topk")
    softmax = nkilib("nkilib.core.utils.common_types").RouterActFnType.SOFTMAX
    t, h, e, k = 16, 256, 64, 4
    x = RNG.standard_normal((t, h) if x_hbm_layout == 1 else (h, t)).astype(np.float32)
    w = (RNG.standard_normal((h, e)) * 0.1).astype(np.float32)
    bias = RNG.standard_normal((1, e)).astype(np.float32)
    logits, affinities = np.zeros((t, e), np.float32), np.zeros((t, e), np.float32)
    index = np.zeros((t, k), np.uint32)
    simulate(mod.router_topk)(x, w, bias, logits, affinities, index, softmax, k, x_hbm_layout, 0,
                              router_pre_norm=pre_norm, norm_topk_prob=norm)  # fmt: skip
    want = router_topk_ref(x, w, bias, "softmax", k, x_hbm_layout, pre_norm, norm)
    np.testing.assert_allclose(logits, want["router_logits"], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(index, want["expert_index"])
    np.testing.assert_allclose(affinities, want["expert_affinities"], rtol=1e-5, atol=1e-6)


# -- moe_cte --------------------------------------------------------------------------------------------------
def moe_cte_ref(hidden, affinities, gate_up_w, down_w, token_position_to_id, block_to_expert, block_size: int,
                fn: int = 0) -> np.ndarray:  # fmt: skip
    """``moe_cte_torch_ref`` without quantization, biases, clamps or checkpoints, POST_SCALE, top-1: every block's
    tokens through its expert's MLP (fp32), scaled by the token's affinity (in the input dtype), rounded to bf16
    and written to the token's output row; (T+1, H) in fp32 (row T is the padding token's)."""
    n_experts, h = gate_up_w.shape[0], hidden.shape[-1]
    out = np.zeros(hidden.shape, np.float32)
    per_token = affinities.astype(np.float32).reshape(-1, n_experts)
    for b, e in enumerate(block_to_expert.reshape(-1)):
        ids = token_position_to_id[b * block_size : (b + 1) * block_size]
        x = hidden[ids].astype(np.float32)
        gate_up = (x @ gate_up_w[e].astype(np.float32).reshape(h, -1)).reshape(block_size, 2, -1)
        down = (_act(gate_up[:, 0], fn) * gate_up[:, 1]) @ down_w[e].astype(np.float32)
        scale = per_token[ids, e][:, None].astype(hidden.dtype).astype(np.float32)
        out[ids] += (down * scale).astype(BF16).astype(np.float32)
    return out


def _moe_cte_inputs(t: int, h: int, i: int, e: int, block: int, n_blocks: int) -> dict:
    """Top-1 routing of tokens 0..t-1 to ``e`` experts with n_blocks / e blocks each; empty slots hold the padding
    token t (a zero row of hidden_states)."""
    experts = RNG.integers(0, e, t)
    per_expert = n_blocks // e
    slots = np.full((e, per_expert * block), t, np.int32)
    for x in range(e):
        mine = np.flatnonzero(experts == x)[: per_expert * block]
        slots[x, : len(mine)] = mine
    hidden = RNG.standard_normal((t + 1, h)).astype(BF16)
    hidden[t] = 0
    affinities = np.zeros((t + 1, e), np.float32)
    affinities[np.arange(t), experts] = RNG.random(t)
    return {
        "hidden_states": hidden,
        "expert_affinities_masked": affinities.reshape(-1, 1).astype(BF16),
        "gate_up_proj_weight": (RNG.standard_normal((e, h, 2, i)) * 0.05).astype(BF16),
        "down_proj_weight": (RNG.standard_normal((e, i, h)) * 0.05).astype(BF16),
        "token_position_to_id": slots.reshape(-1),
        "block_to_expert": np.repeat(np.arange(e), per_expert).astype(np.int32).reshape(-1, 1),
    }


@pytest.mark.parametrize("impl,block", [("shard_on_block", 128), ("shard_on_i", 256)])
def test_moe_cte(nkilib, impl: str, block: int) -> None:
    mod = nkilib("nkilib.core.moe.moe_cte.moe_cte")
    inputs = _moe_cte_inputs(255, 512, 256, 2, block, 4)
    spec = mod.MoECTESpec(implementation=getattr(mod.MoECTEImplementation, impl))
    with contextlib.redirect_stdout(io.StringIO()):
        got = simulate(mod.moe_cte[2])(*inputs.values(), block, spec)
    got = got.astype(np.float32)
    if got.ndim == 3:  # shard_on_block accumulates each core's blocks in a (T+1, 2, H) output
        got = got.sum(axis=1)
    want = moe_cte_ref(*inputs.values(), block)
    assert _rel_err(got[:-1], want[:-1]) < 1.5e-2
