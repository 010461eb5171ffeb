"""nki-library kernels of several small families, unmodified, traced, compiled and simulated by nkic, each against a
numpy translation of its ``*_torch.py`` reference.

* ``experimental/collectives/topk_reduce.py``: the MoE top-K reduction of a sparse all_to_all_v buffer. It gathers
  rows by a ``vector_offset`` index (``nc_find_index8`` of the packed token ids) and adds the K rows with
  ``dma_compute``'s gather read-modify-write.
* ``core/subkernels/find_nonzero_indices.py`` (LNC2): columns spread to the GpSimd cores' partitions, transposed on
  the PE, ``nonzero_with_count``, odd cores' rows moved by ``nc_stream_shuffle``, and each column's indices written at
  a running ``scalar_offset``; chunked T, and a run-time first column (``col_start_id``, a ``scalar_offset``).
* ``experimental/moe/forward/bwmm_shard_on_H.py`` (``blockwise_mm_baseline_shard_hidden[2]``): the blockwise MoE
  MLP with H split over the two cores (gate/up partial sums exchanged by ``sendrecv``, ``core_barrier`` between
  blocks). It has no torch reference of its own; its docstring's pseudocode is ``core/moe/moe_cte/moe_cte_torch.py``'s
  blockwise path, which is translated here (top-1, no quantization, POST_SCALE and PRE_SCALE).
* ``experimental/moe/bwd/blockwise_mm_backward.py`` (``blockwise_mm_bwd``, dropless, SiLU, affinity on H): no torch
  reference ships; the reference is the analytic backward of that same blockwise forward (the four gradients:
  hidden states, affinities, gate/up and down weights), in float64. Under LNC2 each core takes half of a block's
  128-token tiles, so a block of 128 tokens leaves one core idle and the other nothing to do: LNC2 runs use
  block_size 256, as the kernel requires in practice.

The corpus is loaded by path by the ``nkilib`` fixture (``conftest.py``); every test is skipped when it is absent.
"""

from __future__ import annotations

import contextlib
import io

import ml_dtypes
import numpy as np
import pytest

RNG = np.random.default_rng(11)


# -- topk_reduce ----------------------------------------------------------------------------------------------
def ref_topk_reduce(x: np.ndarray, T: int) -> np.ndarray:
    """``topk_reduce_torch_ref``: the int32 token index packed in the last two 16-bit columns, the rows of each
    token summed (torch sums bf16/fp16 in fp32 and rounds once)."""
    H = x.shape[1] - 2
    idx = np.ascontiguousarray(x[:, H:]).view(np.int32)[:, 0]
    out = np.zeros((T, H), np.float32)
    for t in range(T):
        out[t] = x[idx == t, :H].astype(np.float32).sum(axis=0)
    return out.astype(x.dtype)


def topk_reduce_input(T: int, K: int, H: int, n_src: int, dtype) -> np.ndarray:
    """A (n_src * T, H + 2) buffer holding each token's K rows at random places, the rest padding (index -1)."""
    rows = n_src * T
    x = RNG.standard_normal((rows, H + 2)).astype(dtype)
    idx = np.full(rows, -1, np.int32)
    idx[RNG.permutation(rows)[: T * K]] = np.repeat(np.arange(T), K)
    x[:, H:] = idx.view(dtype).reshape(rows, 2)
    return x


@pytest.mark.parametrize("T,K,H,n_src,lnc,dtype", [
    (4, 2, 64, 2, 1, ml_dtypes.bfloat16),  # two rows: one dma_copy + one add, exact
    (8, 4, 128, 4, 2, np.float16),  # LNC2: each core reduces its half of H
    (16, 8, 32, 8, 1, ml_dtypes.bfloat16),  # K = 8, the most nc_find_index8 finds
])  # fmt: skip
def test_topk_reduce(nkilib, T: int, K: int, H: int, n_src: int, lnc: int, dtype) -> None:
    kernel = nkilib("nkilib.experimental.collectives.topk_reduce").topk_reduce
    x = topk_reduce_input(T, K, H, n_src, dtype)
    got = kernel[lnc](x, T, K) if lnc > 1 else kernel(x, T, K)
    want = ref_topk_reduce(x, T)
    assert got.dtype == x.dtype and got.shape == (T, H)
    if K <= 2:  # one add in fp32, one rounding: the reference's result exactly
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    else:  # the kernel rounds after each of its K - 1 adds, the reference once
        eps = float(np.finfo(dtype).eps)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=K * eps, atol=K * eps * 4)


# -- find_nonzero_indices -------------------------------------------------------------------------------------
def ref_find_nonzero_indices(x: np.ndarray, col_start: int | None = None, n_cols: int | None = None):
    """``find_nonzero_indices_torch_ref``: per column the T indices of its nonzeros, -1 after, and the counts."""
    T, C = x.shape
    start, c_out = (0, C) if col_start is None else (col_start, n_cols)
    indices = np.full((c_out, T), -1, np.int32)
    counts = np.zeros(c_out, np.int32)
    for c in range(c_out):
        nz = np.flatnonzero(x[:, start + c])
        counts[c] = len(nz)
        indices[c, : len(nz)] = nz
    return indices, counts


@pytest.mark.parametrize("T,C,chunk,col_start,n_cols,dtype", [
    (128, 4, None, None, None, np.float32),  # one chunk, two columns per core
    (256, 16, 128, None, None, np.int32),  # two chunks (indices pre-filled with -1), 8 columns per core
    (256, 16, None, 3, 6, np.float32),  # col_start_id: columns 3..8 from a run-time offset
])  # fmt: skip
def test_find_nonzero_indices(nkilib, T: int, C: int, chunk, col_start, n_cols, dtype) -> None:
    """float32 and int32 inputs only: nonzero_with_count reads nothing else (a bf16 input is an error at its line)."""
    kernel = nkilib("nkilib.core.subkernels.find_nonzero_indices").find_nonzero_indices
    x = ((RNG.random((T, C)) < 0.3) * RNG.integers(1, 9, (T, C))).astype(dtype)
    x[:, 0] = 0  # a column with no nonzero at all
    if col_start is None:
        indices, counts = kernel[2](x, chunk_size=chunk)
    else:
        indices, counts = kernel[2](x, np.array([col_start], np.int32), n_cols, chunk_size=chunk)
    want_indices, want_counts = ref_find_nonzero_indices(x, col_start, n_cols)
    np.testing.assert_array_equal(indices, want_indices)
    np.testing.assert_array_equal(counts, want_counts)


# -- bwmm_shard_on_H ------------------------------------------------------------------------------------------
def ref_blockwise_mm(hidden, affinities, gate_up_w, down_w, token_position_to_id, block_to_expert, block: int,
                     pre_scale: bool) -> np.ndarray:  # fmt: skip
    """``moe_cte_torch_ref``'s blockwise path (no quantization, biases, clamps; SiLU): each block's tokens through
    its expert's gate/up projection, ``silu(gate) * up``, the down projection, scaled by the token's affinity (in
    the input dtype) before (PRE_SCALE) or after (POST_SCALE), rounded to bf16 and added to the token's row."""
    n_exp, h = gate_up_w.shape[0], hidden.shape[1]
    out = np.zeros(hidden.shape, np.float32)
    aff = affinities.astype(np.float32).reshape(-1, n_exp)
    for b, e in enumerate(block_to_expert.reshape(-1)):
        ids = token_position_to_id[b * block : (b + 1) * block]
        scale = aff[ids, e][:, None].astype(hidden.dtype).astype(np.float32)
        x = hidden[ids].astype(np.float32) * (scale if pre_scale else 1)
        gate_up = (x @ gate_up_w[e].astype(np.float32).reshape(h, -1)).reshape(block, 2, -1)
        down = (gate_up[:, 0] / (1 + np.exp(-gate_up[:, 0])) * gate_up[:, 1]) @ down_w[e].astype(np.float32)
        out[ids] += (down * (1 if pre_scale else scale)).astype(ml_dtypes.bfloat16).astype(np.float32)
    return out


def blockwise_inputs(t: int, h: int, i: int, e: int, block: int, n_blocks: int) -> dict:
    """Top-1 routing of tokens 0..t-1 over ``e`` experts, n_blocks / e blocks each; empty slots hold the padding
    token t (a zero row of hidden_states, affinity 0)."""
    experts = RNG.integers(0, e, t)
    per_expert = n_blocks // e
    slots = np.full((e, per_expert * block), t, np.int32)
    for x in range(e):
        mine = np.flatnonzero(experts == x)[: per_expert * block]
        slots[x, : len(mine)] = mine
    hidden = RNG.standard_normal((t + 1, h)).astype(ml_dtypes.bfloat16)
    hidden[t] = 0
    affinities = np.zeros((t + 1, e), np.float32)
    affinities[np.arange(t), experts] = RNG.random(t)
    return {
        "hidden_states": hidden,
        "expert_affinities_masked": affinities.reshape(-1, 1).astype(ml_dtypes.bfloat16),
        "gate_up_proj_weight": (RNG.standard_normal((e, h, 2, i)) * 0.05).astype(ml_dtypes.bfloat16),
        "down_proj_weight": (RNG.standard_normal((e, i, h)) * 0.05).astype(ml_dtypes.bfloat16),
        "token_position_to_id": slots.reshape(-1),
        "block_to_expert": np.repeat(np.arange(e), per_expert).astype(np.int32).reshape(-1, 1),
    }


@pytest.mark.parametrize("scaling", ["POST_SCALE", "PRE_SCALE"])
def test_bwmm_shard_on_h(nkilib, scaling: str) -> None:
    from nkic.api.execute import simulate

    mod = nkilib("nkilib.experimental.moe.forward.bwmm_shard_on_H")
    mode = getattr(nkilib("nkilib.core.utils.common_types").ExpertAffinityScaleMode, scaling)
    block = 128
    inputs = blockwise_inputs(200, 256, 128, 2, block, 2)
    got = simulate(mod.blockwise_mm_baseline_shard_hidden[2])(**inputs, block_size=block,
                                                             expert_affinities_scaling_mode=mode)  # fmt: skip
    want = ref_blockwise_mm(*inputs.values(), block, scaling == "PRE_SCALE")
    got = got.astype(np.float32)[:-1]
    rel = np.abs(got - want[:-1]).max() / np.abs(want[:-1]).max()
    assert rel < 1.5e-2, rel


# -- blockwise_mm_backward ------------------------------------------------------------------------------------
def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.exp(-x))


def ref_blockwise_mm_bwd(hidden, affinities, gate_up_w, down_w, token_position_to_id, block_to_expert, out_grad,
                         block: int) -> tuple[np.ndarray, ...]:  # fmt: skip
    """The backward of ``out[ids] += aff[ids, e] * (silu(x Wg) * (x Wu)) Wd`` per block (float64): returns the
    gradients of hidden_states, expert_affinities_masked ((T*E, 1), token-major), gate_up and down weights."""
    f = lambda a: a.astype(np.float64)  # noqa: E731
    t, h = hidden.shape
    n_exp, _, _, i = gate_up_w.shape
    d_x, d_aff = np.zeros((t, h)), np.zeros((t, n_exp))
    d_gu, d_down = np.zeros(gate_up_w.shape), np.zeros(down_w.shape)
    aff = f(affinities).reshape(t, n_exp)
    for b, e in enumerate(block_to_expert.reshape(-1)):
        ids = token_position_to_id[b * block : (b + 1) * block]
        x, dy, wg, wu, wd = f(hidden[ids]), f(out_grad[ids]), f(gate_up_w[e][:, 0]), f(gate_up_w[e][:, 1]), f(down_w[e])
        g, u = x @ wg, x @ wu
        act = _silu(g) * u
        d_aff[ids, e] += (dy * (act @ wd)).sum(axis=1)
        dd = dy * aff[ids, e][:, None]
        d_down[e] += act.T @ dd
        da = dd @ wd.T
        sig = 1 / (1 + np.exp(-g))
        dg, du = da * u * (sig + g * sig * (1 - sig)), da * _silu(g)
        d_gu[e][:, 0] += x.T @ dg
        d_gu[e][:, 1] += x.T @ du
        d_x[ids] += dg @ wg.T + du @ wu.T
    return d_x, d_aff.reshape(-1, 1), d_gu, d_down


@pytest.mark.parametrize("lnc,block", [(1, 128), (2, 256)])
def test_blockwise_mm_bwd(nkilib, lnc: int, block: int) -> None:
    from nkic.api.execute import simulate

    mod = nkilib("nkilib.experimental.moe.bwd.blockwise_mm_backward")
    bf16 = ml_dtypes.bfloat16
    h, i, n_exp, n_blocks = 256, 128, 2, 2
    t = n_blocks * block
    hidden = RNG.standard_normal((t, h)).astype(bf16)
    token_position_to_id = RNG.permutation(t).astype(np.int32)  # every token in exactly one block
    block_to_expert = (np.arange(n_blocks) % n_exp).astype(np.int32).reshape(-1, 1)
    aff = np.zeros((t, n_exp), np.float32)
    for b in range(n_blocks):
        aff[token_position_to_id[b * block : (b + 1) * block], block_to_expert[b, 0]] = RNG.random(block)
    gate_up_w = (RNG.standard_normal((n_exp, h, 2, i)) * 0.05).astype(bf16)
    down_w = (RNG.standard_normal((n_exp, i, h)) * 0.05).astype(bf16)
    # The forward's checkpoints: gate/up pre-activations (N, 2, I, B) and the down projection (N, B, H), in bf16.
    ckpt_gu, ckpt_down = np.zeros((n_blocks, 2, i, block), np.float32), np.zeros((n_blocks, block, h), np.float32)
    for b in range(n_blocks):
        e, ids = block_to_expert[b, 0], token_position_to_id[b * block : (b + 1) * block]
        gu = (hidden[ids].astype(np.float32) @ gate_up_w[e].astype(np.float32).reshape(h, 2 * i)).reshape(block, 2, i)
        ckpt_gu[b] = gu.transpose(1, 2, 0)
        ckpt_down[b] = (_silu(gu[:, 0]) * gu[:, 1]) @ down_w[e].astype(np.float32)
    out_grad = RNG.standard_normal((t, h)).astype(bf16)
    args = {"hidden_states": hidden, "expert_affinities_masked": aff.reshape(-1, 1).astype(bf16),
            "gate_up_proj_weight": gate_up_w, "down_proj_weight": down_w,
            "gate_up_proj_act_checkpoint_T": ckpt_gu.astype(bf16), "down_proj_act_checkpoint": ckpt_down.astype(bf16),
            "token_position_to_id": token_position_to_id, "block_to_expert": block_to_expert,
            "output_hidden_states_grad": out_grad}  # fmt: skip
    kernel = mod.blockwise_mm_bwd[lnc] if lnc > 1 else mod.blockwise_mm_bwd
    with contextlib.redirect_stdout(io.StringIO()):
        got = simulate(kernel)(**args, block_size=block)
    want = ref_blockwise_mm_bwd(hidden, args["expert_affinities_masked"], gate_up_w, down_w, token_position_to_id,
                                block_to_expert, out_grad, block)  # fmt: skip
    for name, g, w in zip(("hidden", "affinities", "gate_up", "down"), got, want):
        assert g.shape == w.shape, name
        rel = np.abs(g.astype(np.float64) - w).max() / np.abs(w).max()
        assert rel < 1.5e-2, (name, rel)
