"""nki-library's MX loader and block-sharded MX MoE kernel, unmodified, against numpy references.

* ``experimental/mxfp_subkernels/mxfp_load_utils.py`` (``mxfp_load_performance_wrapper``): a bf16 [128, K] tensor
  loaded as fp32 pairs, transposed with a stride-2 swizzle through PSUM and quantized to MXFP8 per 512-column block;
  bit-exact against the documented ``quantize_mx`` of the swizzled block (the kernel's docstring pseudocode).
* ``core/moe/moe_tkg/all_expert_mx_impl.py`` with ``is_all_expert_dynamic=True`` (``moe_tkg[2]``, trn3): the first
  block of tokens static, the next ones in a ``while reg:`` loop whose register ``nisa.register_alloc`` loads from
  the block decision vector; equal to the static all-expert path bit for bit, and a block without routed tokens is
  skipped at run time (its rows are never written, as the kernel leaves them). The all-expert reference of
  ``test_nkilib_mx`` does not emulate the kernel's bf16 roundings yet, so it is only a gross check here (5%).
* ``core/moe/moe_cte/bwmm_shard_on_block_mx.py`` (``bwmm_shard_on_block_mx[2]``, trn3): every block's tokens through
  its expert's MX MLP, scaled by the token's affinity and accumulated per core into a (2, T+1, H) output. The
  static path (no ``conditions``) and the dynamic one: ``conditions`` decides at run time how many blocks after the
  static ones run, in a ``while reg:`` loop over a register reloaded from the conditions vector (one NEFF for every
  count). The reference composes nki-library's MX torch references (``test_nkilib_mx``'s numpy translations) with
  the kernel's roundings: each H512 tile's ``nc_matmul_mx`` accumulates into one bf16 PSUM tile (rounded after
  every tile) and the gate/up bias is added on the copy out of PSUM. Without that emulation an H=1024 result differs
  by up to one fp8 step: a bf16 difference upstream flips the MX quantization of the intermediate.

The corpus is loaded by path by the ``nkilib`` fixture (``conftest.py``); every test is skipped when it is absent.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.language as nl  # noqa: E402

from test_nkilib_mx import (  # noqa: E402
    _bf16,
    down_proj_mx_ref,
    gate_up_proj_mx_ref,
    moe_mx_ref,
    mx_pack,
    mx_quantize,
    mx_random,
    scale_row,
)

RNG = np.random.default_rng(2026)
BF16 = ml_dtypes.bfloat16
E8 = "float8_e4m3fn_x4"


def _trn3(kernel):
    return nki.jit(getattr(kernel, "func", kernel), platform_target="trn3")


# -- mxfp_load ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [512, 1536])
def test_mxfp_load(nkilib, k: int) -> None:
    mod = nkilib("nkilib.experimental.mxfp_subkernels.mxfp_load_utils")
    x = (RNG.standard_normal((128, k)) * 3).astype(BF16)
    words, scales = nki.simulate(_trn3(mod.mxfp_load_performance_wrapper))(x)
    for b in range(k // 512):
        # partition j, column 4m + r of the swizzled block holds x[m, 512b + 4j + r]
        swizzled = x[:, 512 * b : 512 * (b + 1)].astype(np.float64).reshape(128, 128, 4).transpose(1, 0, 2)
        values, want_scales = mx_quantize(swizzled.reshape(128, 512), E8)
        cols = slice(128 * b, 128 * (b + 1))
        np.testing.assert_array_equal(words[:, cols], mx_pack(values, E8))
        np.testing.assert_array_equal(scales[[scale_row(g) for g in range(16)], cols], want_scales)


# -- bwmm_shard_on_block_mx ---------------------------------------------------------------------------------------
E, B, N, T = 2, 128, 4, 255  # experts, block size, blocks, tokens (row T of the hidden states is the padding token)


def _inputs(h: int, i: int, w_dtype: str) -> dict:
    """Top-1 routing of T tokens to E experts, N // E blocks each; empty slots hold the padding token T."""
    nh, ni, pi = h // 512, -(-i // 512), 128 if i > 512 else i // 4
    experts = RNG.integers(0, E, T)
    slots = np.full((E, N // E * B), T, np.int32)
    for x in range(E):
        mine = np.flatnonzero(experts == x)[: N // E * B]
        slots[x, : len(mine)] = mine
    hidden = RNG.standard_normal((T + 1, h)).astype(BF16)
    hidden[T] = 0
    affinities = np.zeros((T + 1, E), np.float32)
    affinities[np.arange(T), experts] = RNG.random(T)
    return {  # scales 2**-9 .. 2**-6 per 8x4 group keep every projection O(1)
        "hidden_states": hidden,
        "expert_affinities_masked": affinities.reshape(-1, 1).astype(BF16),
        "gate_up_proj_weight": mx_random((E, 128, 2, nh, i), w_dtype),
        "down_proj_weight": mx_random((E, pi, ni, h), w_dtype),
        "token_position_to_id": slots.reshape(-1),
        "block_to_expert": np.repeat(np.arange(E), N // E).astype(np.int32).reshape(-1, 1),
        "gate_and_up_proj_bias": (RNG.standard_normal((E, min(i // 4, 128), 2, ni, 4)) * 0.1).astype(BF16),
        "down_proj_bias": (RNG.standard_normal((E, h)) * 0.1).astype(BF16),
        "gate_up_proj_scale": RNG.integers(118, 122, (E, 16, 2, nh, i)).astype(np.uint8),
        "down_proj_scale": RNG.integers(118, 122, (E, pi // 8, ni, h)).astype(np.uint8),
    }


def _gate_up(h_words, h_scale, w_words, w_scale, bias, i: int, w_dtype: str) -> np.ndarray:
    """One projection as the kernel rounds it: the H512 tiles accumulate in a bf16 PSUM tile, then + bias."""
    acc = np.zeros(())
    for j in range(h_words.shape[1]):
        t = slice(j, j + 1)
        acc = _bf16(acc + gate_up_proj_mx_ref(h_words[:, t], h_scale[:, t], w_words[:, t], w_scale[:, t], None, 512,
                                              i, h_words.shape[2], w_dtype))  # fmt: skip
    return _bf16(acc + np.pad(bias.astype(np.float64), ((0, 128 - bias.shape[0]), (0, 0), (0, 0)))[:, :, None])


def _block_ref(x: np.ndarray, inputs: dict, e: int, w_dtype: str) -> np.ndarray:
    """One block's (B, H) MLP output: hidden quantized to MXFP8 in the layout h = q * H/4 + j * 128 + p at
    [p, j, t, q] (the kernel's reshape), SiLU(gate) * up, the down projection tile by tile in bf16, + bias."""
    t, h = x.shape
    i = inputs["gate_up_proj_weight"].shape[-1]
    values, scales = mx_quantize(x.reshape(t, 4, h // 512, 128).transpose(3, 2, 0, 1).reshape(128, -1), E8)
    h_words, h_scale = mx_pack(values, E8).reshape(128, h // 512, t), scales.reshape(16, h // 512, t)
    w, s, bias = (inputs[k][e] for k in ("gate_up_proj_weight", "gate_up_proj_scale", "gate_and_up_proj_bias"))
    gate = _gate_up(h_words, h_scale, w[:, 0], s[:, 0], bias[:, 0], i, w_dtype)
    up = _gate_up(h_words, h_scale, w[:, 1], s[:, 1], bias[:, 1], i, w_dtype)
    inter = _bf16(_bf16(gate / (1 + np.exp(-gate))) * up)
    down_w, down_s = inputs["down_proj_weight"][e], inputs["down_proj_scale"][e]
    out = np.zeros((t, h))
    for k in range(down_w.shape[1]):
        tile = slice(k, k + 1)
        out = _bf16(out + down_proj_mx_ref(inter[:, tile], down_w[:, tile], down_s[:, tile], None, h, t, w_dtype))
    return _bf16(out + inputs["down_proj_bias"][e].astype(np.float64))


def bwmm_ref(inputs: dict, blocks: int, w_dtype: str) -> np.ndarray:
    """The (T+1, H) sum over the first ``blocks`` blocks of each token's expert output times its affinity."""
    hidden = inputs["hidden_states"].astype(np.float64)
    affinities = inputs["expert_affinities_masked"].astype(np.float64).reshape(T + 1, E)
    want = np.zeros(hidden.shape)
    for b in range(blocks):
        e = int(inputs["block_to_expert"][b, 0])
        ids = inputs["token_position_to_id"][b * B : (b + 1) * B]
        want[ids] += _block_ref(hidden[ids], inputs, e, w_dtype) * affinities[ids, e][:, None]
    return want


def _check(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == (2, T + 1, want.shape[1]) and got.dtype == np.dtype(BF16)
    total = got.astype(np.float64).sum(axis=0)  # each core accumulates its own blocks
    # bf16 outputs scaled and accumulated in bf16: within a few bf16 steps of the largest value
    assert np.abs(total[:T] - want[:T]).max() <= 2.0**-6 * np.abs(want[:T]).max()


@pytest.fixture(scope="module")
def bwmm(nkilib_module_scope):
    mod = nkilib_module_scope("nkilib.core.moe.moe_cte.bwmm_shard_on_block_mx")
    return nki.simulate(_trn3(mod.bwmm_shard_on_block_mx)[2])


def test_bwmm_shard_on_block_mx_static_blocks(bwmm) -> None:
    """MXFP8 weights, H = 1024: two H512 tiles accumulate in PSUM."""
    inputs = _inputs(1024, 512, E8)
    with contextlib.redirect_stdout(io.StringIO()):
        got = bwmm(**inputs, block_size=B)
    _check(got, bwmm_ref(inputs, N, E8))


@pytest.mark.parametrize("ran", [N, 2])
def test_bwmm_shard_on_block_mx_dynamic_blocks(bwmm, ran: int) -> None:
    """MXFP4 weights; 2 static blocks, then the dynamic loop runs while conditions[block] is set (one pair of blocks
    per iteration, one per core): all of them, or none."""
    w_dtype = "float4_e2m1fn_x4"
    inputs = _inputs(512, 512, w_dtype)
    conditions = np.zeros((N + 2,), np.int32)  # the kernel asks for N + 2 entries
    conditions[:ran] = 1
    with contextlib.redirect_stdout(io.StringIO()):
        got = bwmm(**inputs, conditions=conditions, block_size=B, n_static_blocks=2, n_dynamic_blocks=2)
    _check(got, bwmm_ref(inputs, ran, w_dtype))


# -- moe_tkg all-expert MX, dynamic ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def all_expert_mx(nkilib_module_scope):
    moe_tkg = nkilib_module_scope("nkilib.core.moe.moe_tkg.moe_tkg").moe_tkg
    mode = nkilib_module_scope("nkilib.core.utils.common_types").ExpertAffinityScaleMode

    def kernel(x, gate_up_w, down_w, affinities, index, gate_up_s, down_s, gate_up_b, down_b, rank_id, dynamic):
        return moe_tkg(x, gate_up_w.view(nl.float8_e4m3fn_x4), down_w.view(nl.float8_e4m3fn_x4), affinities, index,
                       True, rank_id=rank_id, expert_gate_up_bias=gate_up_b, expert_down_bias=down_b,
                       expert_gate_up_weights_scale=gate_up_s, expert_down_weights_scale=down_s,
                       expert_affinities_scaling_mode=mode.POST_SCALE, is_all_expert_dynamic=dynamic,
                       block_size=32 if dynamic else None)  # fmt: skip

    return nki.simulate(nki.jit(kernel, platform_target="trn3")[2])


def test_moe_tkg_all_expert_mx_dynamic_blocks(all_expert_mx) -> None:
    """T = 64 tokens in blocks of 32, one local expert (the dynamic path's limit), I = 1024 so that LNC=2 shards
    I (with one I512 tile the kernel's dynamic block path reduces unsharded halves and doubles the result)."""
    t, h, i = 64, 512, 1024
    x = RNG.standard_normal((t, h)).astype(BF16)
    gate_up_w, down_w = mx_random((1, 128, 2, 1, i), E8), mx_random((1, 128, 2, h), E8)
    gate_up_s = RNG.integers(118, 122, (1, 16, 2, 1, i)).astype(np.uint8)
    down_s = RNG.integers(118, 122, (1, 16, 2, h)).astype(np.uint8)
    gate_up_b, down_b = RNG.standard_normal((1, 128, 2, 2, 4)).astype(BF16), RNG.standard_normal((1, h)).astype(BF16)
    index = np.zeros((t, 1), np.int32)
    affinities = (RNG.random((t, 1)) + 0.1).astype(BF16)
    weights = (gate_up_w, down_w)
    scales_bias = (gate_up_s, down_s, gate_up_b, down_b)
    rank = np.zeros((1, 1), np.int32)
    with contextlib.redirect_stdout(io.StringIO()):
        static = all_expert_mx(x, *weights, affinities, index, *scales_bias, rank, False)
        dynamic = all_expert_mx(x, *weights, affinities, index, *scales_bias, rank, True)
    np.testing.assert_array_equal(dynamic, static)
    want = moe_mx_ref(x, *weights, affinities, index, *scales_bias, E8, True, True)
    # a gross check only: the reference leaves out the kernel's bf16 roundings (1.6-3.3% off on the data tried);
    # a wrong block or a doubled LNC reduction is off by 100%
    assert np.abs(static.astype(np.float64) - want).max() <= 0.05 * np.abs(want).max()
    # tokens 32..63 routed nowhere: the decision vector stops the loop before their block
    half = affinities.copy()
    half[32:] = 0
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        skipped = all_expert_mx(x, *weights, half, index, *scales_bias, rank, True)
    np.testing.assert_array_equal(skipped[:32], static[:32])
    assert any("rows 32..63 were never written" in str(w.message) for w in caught)
