"""nki-library's MX (microscaling) kernels, unmodified, traced, compiled and simulated by nkic.

* ``core/subkernels/rmsnorm_mx_quantize_tkg.py`` (``rmsnorm_mx_quantize_tkg``, LNC=2: each core one half of the
  tokens, the halves exchanged with ``nisa.sendrecv``), with and without the fused residual add.
* ``core/mlp/mlp_tkg/mlp_tkg_mx.py`` (``mlp_tkg_mx``, with ``gate_up_projection_mx_shard_H`` and
  ``down_projection_mx_shard_H``): MXFP4 and MXFP8 weights, biases, RMSNorm, LNC1 and LNC2 (H sharded), against
  ``mlp_proj_mxfp4_torch.py``'s gate/up and down references composed as the kernel does, bit-exact once the
  kernel's bf16 PSUM and SBUF roundings are emulated.
* ``core/qkv/qkv.py``'s ``qkv`` with ``quantization_type=MX`` (``qkv_tkg`` -> ``_qkv_tkg_mx_impl``): MXFP8 weights,
  RMSNorm, bias, LNC1 and LNC2, against ``qkv_tkg_torch.py``'s ``x (@ norm) @ W + bias`` on the kernel's MX data
  (it has no MX path of its own), bit-exact with the fp32 PSUM accumulation emulated.
* ``core/moe/moe_tkg/moe_tkg.py``'s selective-expert MX path (``selective_expert_mx_impl``): MXFP8 and MXFP4
  weights, top-2 of 4 experts, gate/up and down biases, POST_SCALE, against ``_moe_tkg_mx_ref``'s per-token sum
  composed from the mlp_tkg_mx reference, bit-exact with the kernel's bf16 roundings emulated. The affinities are
  a router's (zero outside each token's top-k): the kernel adds the down bias as ``aff[T, E] @ down_b[E, H]`` over
  all experts, the torch reference only over the selected ones. The all-expert MX path runs but is not asserted.

The references are numpy translations of nki-library's torch references with an MX layer of their own (the
library's ``core/utils/mx_torch_common.py`` imports a ``neuron_dtypes`` package that is not public): values are
unpacked with ml_dtypes, scales are ``2 ** (byte - 127)``, and the MX matmul is an einsum over 8x4 groups in
float64. Quantization follows the ISA documentation of ``nisa.quantize_mx`` (a block scale twice the OCP sample
algorithm's, so nothing saturates). nki-library's own ``quantize_to_mx`` golden uses the OCP scale and clips to the
format's maximum instead; the two agree on every group whose largest value keeps below the top binade, and where they
differ the documented instruction is what the simulator must model.

The corpus is loaded by path by the ``nkilib`` fixture (``conftest.py``); every test is skipped when it is absent.
"""

from __future__ import annotations

import contextlib
import io
import math

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402

RNG = np.random.default_rng(7)
BF16 = ml_dtypes.bfloat16
ELEMENT = {
    "float8_e4m3fn_x4": ml_dtypes.float8_e4m3fn,
    "float8_e5m2_x4": ml_dtypes.float8_e5m2,
    "float4_e2m1fn_x4": ml_dtypes.float4_e2m1fn,
}
E_MAX = {"float8_e4m3fn_x4": 8, "float8_e5m2_x4": 15, "float4_e2m1fn_x4": 2}
BITS = {"float8_e4m3fn_x4": 8, "float8_e5m2_x4": 8, "float4_e2m1fn_x4": 4}


def _quiet(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):  # some kernels print their tiling decisions
        return fn(*args, **kwargs)


# -- the MX reference -----------------------------------------------------------------------------------------
def scale_row(g: int) -> int:
    """Scale row g of a tile lives on partition g // 4 * 32 + g % 4 (4 rows at the top of each 32-row quadrant)."""
    return g // 4 * 32 + g % 4


def mx_quantize(x: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(P, 4F) -> (element values (P, 4F) of ``dtype``'s element type, scale bytes (P // 8, F)).

    The documented ``nisa.quantize_mx`` rule: ``X = 2 ** (floor(log2(amax)) - (E_max - 1))`` per 8x4 group, byte 0
    for an all-zero group, then x / X rounded to nearest even."""
    p, f = x.shape
    x = x.astype(np.float64)
    amax = np.abs(x).reshape(p // 8, 8, f // 4, 4).max(axis=(1, 3))
    safe = np.where(amax == 0, 1.0, amax)
    scales = np.where(amax == 0, 0, np.clip(np.floor(np.log2(safe)) - (E_MAX[dtype] - 1) + 127, 0, 254))
    factor = np.repeat(np.repeat(2.0 ** (scales - 127), 8, axis=0), 4, axis=1)
    return (x / factor).astype(ELEMENT[dtype]), scales.astype(np.uint8)


def mx_pack(values: np.ndarray, dtype: str) -> np.ndarray:
    """(..., 4F) element values -> (..., F) uint32 words, value q in bits [q * bits, (q + 1) * bits)."""
    bits = BITS[dtype]
    codes = values.astype(ELEMENT[dtype]).view(np.uint8).astype(np.uint64) & ((1 << bits) - 1)
    codes = codes.reshape(*values.shape[:-1], -1, 4)
    return sum(codes[..., q] << (bits * q) for q in range(4)).astype(np.uint32)


def mx_unpack(words: np.ndarray, dtype: str) -> np.ndarray:
    """(..., F) packed words (uint16 or uint32) -> (..., 4F) float64 values."""
    bits = BITS[dtype]
    w = words.astype(np.uint64)
    codes = np.stack([(w >> (bits * q)) & ((1 << bits) - 1) for q in range(4)], axis=-1).astype(np.uint8)
    return codes.view(ELEMENT[dtype]).astype(np.float64).reshape(*words.shape[:-1], -1)


def mx_matmul(st: np.ndarray, mv: np.ndarray, st_scale: np.ndarray, mv_scale: np.ndarray) -> np.ndarray:
    """``mx_matmul`` of mx_torch_common: (K, 4M) and (K, 4N) unpacked values, (K // 8, M) / (K // 8, N) scale bytes
    -> (M, N) = sum over k and q of st[k, 4i + q] * mv[k, 4j + q], each scaled by its 8x4 group's scale."""
    def real(v: np.ndarray, s: np.ndarray) -> np.ndarray:
        k = v.shape[0]
        v = v.reshape(k, -1, 4)
        return v * np.repeat(2.0 ** (s.astype(np.float64) - 127), 8, axis=0)[:k, : v.shape[1], None]

    return np.einsum("kiq,kjq->ij", real(st, st_scale), real(mv, mv_scale))


def mx_random(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Random packed words of ``dtype`` (finite element values: no NaN codes) with ``shape[-1]`` words per row."""
    if dtype == "float4_e2m1fn_x4":
        return RNG.integers(0, 1 << 16, shape, dtype=np.uint64).astype(np.uint16)
    values = RNG.standard_normal((*shape[:-1], shape[-1] * 4)) * 4.0
    return mx_pack(values.astype(ELEMENT[dtype]), dtype)


# -- the frontend fixes these kernels needed ------------------------------------------------------------------
def _packed_moves(fill: float):
    @nki.jit(platform_target="trn3")
    def kernel(words):
        rank = nl.program_id(0)
        tile = nl.ndarray((32, 8), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.memset(dst=tile, value=fill)  # FILL
        nisa.dma_copy(dst=tile[:, 0:4], src=words[rank].view(nl.float8_e4m3fn_x4))
        got = nl.ndarray((32, 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.sendrecv(src=tile[:, 0:4], dst=got, send_to_rank=1 - rank, recv_from_rank=1 - rank, pipe_id=0)
        out = nl.ndarray((2, 32, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[rank, :, 0:4], src=got.view(nl.uint32))
        nisa.dma_copy(dst=out[rank, :, 4:8], src=tile[:, 4:8].view(nl.uint32))
        return out

    return kernel


def test_packed_mx_tiles_are_zero_filled_and_exchanged_by_sendrecv() -> None:
    words = RNG.integers(0, 1 << 32, (2, 32, 4), dtype=np.uint64).astype(np.uint32)
    out = nki.simulate(_packed_moves(0.0)[2])(words)
    np.testing.assert_array_equal(out[:, :, 0:4], words[::-1])  # each core got the other's words, bit for bit
    assert (out[:, :, 4:8] == 0).all()  # memset 0: all-zero words


def test_a_packed_mx_tile_is_filled_only_with_zero() -> None:
    words = np.zeros((2, 32, 4), np.uint32)
    with pytest.raises(NkiError, match=r"memset: a packed MX tile \(float8_e4m3fn_x4\) can only be filled with 0") as e:
        _packed_moves(1.0)[2].trace(words)
    assert "FILL" in open(__file__).read().splitlines()[e.value.line - 1]


def test_base_tensor_is_the_whole_storage_in_its_own_dtype() -> None:
    @nki.jit
    def kernel(x):
        half = x.view(nl.bfloat16)[:, 4:8]  # a view of another dtype: its base is x itself
        base = half.base_tensor
        assert base.shape == (8, 8) and base.dtype == x.dtype
        tile = nl.ndarray(base.shape, dtype=base.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=base)
        out = nl.ndarray(base.shape, dtype=base.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=tile)
        return out

    x = RNG.standard_normal((8, 8)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x)


def test_tensor_scalar_op0_none_is_a_bypass_stage() -> None:
    @nki.jit
    def kernel(x):
        tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x)
        copy = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=copy, data=tile, op0=None, operand0=None)  # both stages off: a copy
        clamp = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=clamp, data=tile, op0=None, operand0=None, op1=nl.maximum, operand1=0.5)
        out = nl.ndarray((2, *x.shape), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[0], src=copy)
        nisa.dma_copy(dst=out[1], src=clamp)
        return out

    x = RNG.standard_normal((4, 16)).astype(np.float32)
    out = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(out[0], x)
    np.testing.assert_array_equal(out[1], np.maximum(x, np.float32(0.5)))


# -- rmsnorm_mx_quantize_tkg ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rmsnorm_mx_kernel(nkilib_module_scope):
    mod = nkilib_module_scope("nkilib.core.subkernels.rmsnorm_mx_quantize_tkg")

    def kernel(x, gamma, residual, eps):
        b, s, h = x.shape
        t = b * s
        out = nl.ndarray((128, t, h // 128), dtype=x.dtype, buffer=nl.sbuf)
        quant = nl.ndarray((128, h // 512, t), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        scale = nl.ndarray((128, h // 512, t), dtype=nl.uint8, buffer=nl.sbuf)
        res_out = nl.ndarray((t, h), dtype=x.dtype, buffer=nl.shared_hbm) if residual is not None else None
        mod.rmsnorm_mx_quantize_tkg(x, gamma, out, quant, scale, residual=residual, output_residual=res_out, eps=eps)
        out_hbm = nl.ndarray((128, t, h // 128), dtype=x.dtype, buffer=nl.shared_hbm)
        quant_hbm = nl.ndarray((128, h // 512, t), dtype=nl.uint32, buffer=nl.shared_hbm)
        scale_hbm = nl.ndarray((128, h // 512, t), dtype=nl.uint8, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out_hbm, src=out)
        nisa.dma_copy(dst=quant_hbm, src=quant.view(nl.uint32))
        nisa.dma_copy(dst=scale_hbm, src=scale)
        if residual is None:
            return out_hbm, quant_hbm, scale_hbm
        return out_hbm, quant_hbm, scale_hbm, res_out

    return nki.jit(kernel, platform_target="trn3")


def rmsnorm_mx_ref(out: np.ndarray, n512: int) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's quantization of its own [128, T, H1] output: tile j packs h1 = q * n512 + j (q = 0..3) of each
    token, quantized over (128 partitions, T * 4) -> words [128, n512, T] and scale bytes [128 // 8, n512, T]."""
    h0, t, _ = out.shape
    words = np.zeros((h0, n512, t), np.uint32)
    scales = np.zeros((h0 // 8, n512, t), np.uint8)
    for j in range(n512):
        swizzled = np.stack([out[:, :, q * n512 + j] for q in range(4)], axis=-1).reshape(h0, t * 4)
        values, scales[:, j, :] = mx_quantize(swizzled, "float8_e4m3fn_x4")
        words[:, j, :] = mx_pack(values, "float8_e4m3fn_x4")
    return words, scales


@pytest.mark.parametrize("b,s,h,residual", [
    (1, 4, 512, False),  # 2 tokens per core
    (2, 8, 1024, False),  # 2 H512 tiles
    (1, 256, 1024, True),  # residual add: BxS >= 256, H1 % 8 == 0; the sum spilled to HBM after PE transposes
])  # fmt: skip
def test_rmsnorm_mx_quantize_tkg(rmsnorm_mx_kernel, b: int, s: int, h: int, residual: bool) -> None:
    x = RNG.standard_normal((b, s, h)).astype(BF16)
    gamma = RNG.standard_normal((1, h)).astype(BF16)
    res = RNG.standard_normal((b, s, h)).astype(BF16) if residual else None
    eps = 1e-6
    got = nki.simulate(rmsnorm_mx_kernel[2])(x, gamma, res, eps)
    out, words, scales = got[:3]
    t, n512 = b * s, h // 512
    # rms_norm_torch_ref on the (bf16) sum; the kernel rounds x * gamma and the result to bf16
    hidden = x.astype(np.float32)
    if residual:
        hidden = (hidden + res.astype(np.float32)).astype(BF16).astype(np.float32)
        np.testing.assert_array_equal(got[3], hidden.reshape(t, h).astype(BF16))
    hidden = hidden.reshape(t, h).astype(np.float64)
    rms = np.sqrt((hidden * hidden).mean(-1, keepdims=True) + eps)
    xg = (hidden * gamma.astype(np.float64)).astype(BF16).astype(np.float64)
    want = (xg / rms).reshape(t, h // 128, 128).transpose(2, 0, 1)
    assert out.shape == (128, t, h // 128) and out.dtype == np.dtype(BF16)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2.0**-8, atol=1e-6)
    # the quantized output, bit for bit against the documented quantize_mx of the kernel's own bf16 output
    want_words, want_scales = rmsnorm_mx_ref(out.astype(np.float64), n512)
    np.testing.assert_array_equal(words, want_words)
    np.testing.assert_array_equal(scales[[scale_row(g) for g in range(16)]], want_scales)
    # and dequantized, within fp8 (3 mantissa bits) of the exact normalisation
    values = mx_unpack(words, "float8_e4m3fn_x4").reshape(128, n512, t, 4)
    factor = 2.0 ** (np.repeat(want_scales.astype(np.float64), 8, axis=0) - 127)
    deq = values * factor[..., None]
    exact = np.stack([want[:, :, q * n512 : (q + 1) * n512].transpose(0, 2, 1) for q in range(4)], axis=-1)
    assert np.all(np.abs(deq - exact) <= 2.0**-4 * np.abs(exact) + factor[..., None] * 2.0**-9 + 1e-6)


# -- mlp_tkg_mx: MXFP4 / MXFP8 MLP -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mlp_mx_kernel(nkilib_module_scope):
    params_mod = nkilib_module_scope("nkilib.core.mlp.mlp_parameters")
    mlp_mx = nkilib_module_scope("nkilib.core.mlp.mlp_tkg.mlp_tkg_mx")
    types = nkilib_module_scope("nkilib.core.utils.common_types")

    def kernel(x, gate_w, gate_s, up_w, up_s, down_w, down_s, gate_b, up_b, down_b, gamma, weight_dtype):
        # what core/mlp/mlp.py (which does not parse upstream) does for an MX TKG call; the packed weights come in as
        # their storage words and are viewed as the MX dtype (numpy has no x4 dtypes)
        dt = getattr(nl, weight_dtype)
        params = params_mod.MLPParameters(
            hidden_tensor=x, gate_proj_weights_tensor=gate_w.view(dt), up_proj_weights_tensor=up_w.view(dt),
            down_proj_weights_tensor=down_w.view(dt), normalization_weights_tensor=gamma,
            normalization_type=types.NormType.RMS_NORM if gamma is not None else types.NormType.NO_NORM,
            gate_proj_bias_tensor=gate_b, up_proj_bias_tensor=up_b, down_proj_bias_tensor=down_b,
            quantization_type=types.QuantizationType.MX, gate_w_scale=gate_s, up_w_scale=up_s, down_w_scale=down_s,
            activation_fn=types.ActFnType.SiLU,
        )  # fmt: skip
        params_mod.validate_mlp_arguments(params)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        return mlp_mx.mlp_tkg_mx(params, out, None)[0]

    return nki.jit(kernel, platform_target="trn3")


def _bf16(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float32).astype(BF16).astype(np.float64)


def gate_up_proj_mx_ref(h_words, h_scale, w_words, w_scale, bias, h: int, i: int, t: int, w_dtype: str):
    """``gate_up_proj_mxfp4_torch_ref``: hidden [128, H/512, T] (MXFP8 e4m3) and weight [128, H/512, I] packed,
    scales [16, H/512, *]; [I, T] = weight^T @ hidden, reshuffled to [128, ceil(I/512), T, 4] (+ bias)."""
    w_flat = mx_unpack(w_words.transpose(1, 0, 2).reshape(h // 4, i), w_dtype)
    h_flat = mx_unpack(h_words.transpose(1, 0, 2).reshape(h // 4, t), "float8_e4m3fn_x4")
    w_sc = w_scale.transpose(1, 0, 2).reshape(h // 32, i)
    h_sc = h_scale.transpose(1, 0, 2).reshape(h // 32, t)
    result = mx_matmul(w_flat, h_flat, w_sc, h_sc)
    n_i512 = math.ceil(i / 512)
    out = np.zeros((128, n_i512, t, 4))
    for k in range(n_i512):
        rows = min(512, i - 512 * k)
        out[: rows // 4, k] = result[512 * k : 512 * k + rows].reshape(4, rows // 4, t).transpose(1, 2, 0)
    if bias is not None:
        out[: bias.shape[0]] += bias.astype(np.float64)[:, :, None, :]
    return out


def down_proj_mx_ref(inter, w_words, w_scale, bias, h: int, t: int, w_dtype: str) -> np.ndarray:
    """``down_proj_mxfp4_torch_ref``: the intermediate [128, ceil(I/512), T, 4] quantized to MXFP8 (e4m3), times
    the packed weight [128, ceil(I/512), H] -> [T, H] (+ bias)."""
    inter_flat = inter.transpose(1, 0, 2, 3).reshape(-1, t * 4)
    values, scales = mx_quantize(inter_flat, "float8_e4m3fn_x4")
    w = mx_unpack(w_words.transpose(1, 0, 2).reshape(-1, h), w_dtype)
    w_sc = w_scale.transpose(1, 0, 2).reshape(-1, h)
    out = mx_matmul(values.astype(np.float64), w, scales, w_sc)
    return out if bias is None else out + bias.astype(np.float64).reshape(1, h)


def _gate_up_as_the_kernel(h_words, h_scale, w_words, w_scale, bias, h, i, t, w_dtype, lnc: int) -> np.ndarray:
    """The gate/up projection with the kernel's roundings: each core contracts its H/lnc slice into a bf16 PSUM
    tile, core 0 adds the bias (a bf16 result), and the cores' bf16 partial results are summed in bf16."""
    n = h // 512 // lnc
    parts = []
    for core in range(lnc):
        js = slice(core * n, (core + 1) * n)
        part = _bf16(gate_up_proj_mx_ref(h_words[:, js], h_scale[:, js], w_words[:, js], w_scale[:, js], None,
                                         h // lnc, i, t, w_dtype))  # fmt: skip
        if bias is not None and core == 0:
            part = _bf16(part + np.pad(bias.astype(np.float64), ((0, 128 - bias.shape[0]), (0, 0), (0, 0)))[:, :, None])
        parts.append(part)
    return _bf16(sum(parts))


def mlp_mx_ref(x, gate_w, gate_s, up_w, up_s, down_w, down_s, gate_b, up_b, down_b, gamma, w_dtype,
               lnc: int = 1) -> np.ndarray:  # fmt: skip
    """mlp_tkg_mx as composed from the torch references: (RMSNorm,) the hidden in the kernel's quantizable layout
    (h = q * H/4 + j * 128 + p at [p, j, t, q]) quantized to MXFP8, SiLU(gate) * up, the down projection; with the
    kernel's bf16 roundings (PSUM tiles and SBUF intermediates are bf16)."""
    b, s, h = x.shape
    t, i = b * s, gate_w.shape[-1]
    hidden = x.reshape(t, h).astype(np.float64)
    if gamma is not None:
        # rmsnorm_tkg: bf16(x * gamma * rsqrt(mean(x^2) + eps)), one rounding
        hidden = _bf16(hidden * gamma.astype(np.float64) / np.sqrt((hidden * hidden).mean(-1, keepdims=True) + 1e-6))
    shuffled = hidden.reshape(t, 4, h // 512, 128).transpose(3, 2, 0, 1)  # [128, H/512, T, 4]
    values, scales = mx_quantize(shuffled.reshape(128, -1), "float8_e4m3fn_x4")
    h_words = mx_pack(values, "float8_e4m3fn_x4").reshape(128, h // 512, t)
    h_scale = scales.reshape(16, h // 512, t)
    shape = (h, i, t, w_dtype, lnc)
    gate = _gate_up_as_the_kernel(h_words, h_scale, gate_w, gate_s, gate_b, *shape)
    up = _gate_up_as_the_kernel(h_words, h_scale, up_w, up_s, up_b, *shape)
    inter = _bf16(_bf16(gate / (1 + np.exp(-gate))) * up)
    # the down projection accumulates its I512 tiles in a bf16 PSUM tile (each tile's 8x4 groups are its own, so
    # quantizing a tile alone is quantizing its part of the whole)
    out = np.zeros((t, h))
    for k in range(down_w.shape[1]):
        tile = slice(k, k + 1)
        out = _bf16(out + down_proj_mx_ref(inter[:, tile], down_w[:, tile], down_s[:, tile], None, h, t, w_dtype))
    if down_b is not None:
        out = _bf16(out + down_b.astype(np.float64))
    return out.reshape(b, s, h)


@pytest.mark.parametrize("b,s,h,i,lnc,w_dtype,bias,norm", [
    (1, 4, 512, 512, 1, "float4_e2m1fn_x4", False, False),  # MXFP4 weights
    (1, 4, 512, 512, 1, "float8_e4m3fn_x4", True, False),  # MXFP8 weights, gate/up/down biases
    (2, 2, 1024, 1024, 2, "float4_e2m1fn_x4", True, False),  # LNC2 (H sharded, partial sums exchanged)
    (1, 4, 512, 512, 1, "float4_e2m1fn_x4", False, True),  # RMSNorm
    (2, 2, 1024, 1024, 2, "float4_e2m1fn_x4", True, True),  # LNC2 (H sharded, partial sums exchanged), RMSNorm
])  # fmt: skip
def test_mlp_tkg_mx(mlp_mx_kernel, b, s, h, i, lnc, w_dtype, bias: bool, norm: bool) -> None:
    n_h512, n_i512 = h // 512, math.ceil(i / 512)
    i_p = i // 4 if i <= 512 else 128
    x = RNG.standard_normal((b, s, h)).astype(BF16)
    gate_w, up_w = mx_random((128, n_h512, i), w_dtype), mx_random((128, n_h512, i), w_dtype)
    down_w = mx_random((i_p, n_i512, h), w_dtype)
    # scales so that each projection keeps values O(1): 2**-6 .. 2**-4 per group
    gate_s, up_s = (RNG.integers(118, 122, (16, n_h512, i)).astype(np.uint8) for _ in range(2))
    down_s = RNG.integers(118, 122, (i_p // 8, n_i512, h)).astype(np.uint8)
    gate_b = RNG.standard_normal((i_p, n_i512, 4)).astype(BF16) if bias else None
    up_b = RNG.standard_normal((i_p, n_i512, 4)).astype(BF16) if bias else None
    down_b = RNG.standard_normal((1, h)).astype(BF16) if bias else None
    gamma = RNG.standard_normal((1, h)).astype(BF16) if norm else None
    args = (x, gate_w, gate_s, up_w, up_s, down_w, down_s, gate_b, up_b, down_b, gamma)
    kernel = mlp_mx_kernel if lnc == 1 else mlp_mx_kernel[lnc]
    got = _quiet(nki.simulate(kernel), *args, w_dtype)
    want = mlp_mx_ref(*args, w_dtype, lnc)
    assert got.shape == want.shape and got.dtype == np.dtype(BF16)
    np.testing.assert_array_equal(got.astype(np.float64), want)  # bit-exact, the kernel's roundings emulated


@pytest.mark.xfail(strict=True, reason="I < 512: the kernel multiplies SBUF it never wrote by zero weights "
                   "(down_projection_mx_shard_H.py:66-70, 'the final I512 tile of inter_sb will contain garbage'); "
                   "nkic's fresh memory is NaN, and NaN * 0 is NaN")  # fmt: skip
def test_mlp_tkg_mx_partial_i512_tile_reads_unwritten_sbuf(mlp_mx_kernel) -> None:
    test_mlp_tkg_mx(mlp_mx_kernel, 1, 4, 512, 256, 1, "float4_e2m1fn_x4", False, False)


# -- qkv (MX path: qkv_tkg -> _qkv_tkg_mx_impl) ---------------------------------------------------------------
@pytest.fixture(scope="module")
def qkv_mx_kernel(nkilib_module_scope):
    qkv = nkilib_module_scope("nkilib.core.qkv.qkv").qkv
    types = nkilib_module_scope("nkilib.core.utils.common_types")

    def kernel(x, w, w_scale, gamma, bias):
        norm = types.NormType.RMS_NORM if gamma is not None else types.NormType.NO_NORM
        return qkv(x, w.view(nl.float8_e4m3fn_x4), bias=bias, quantization_type=types.QuantizationType.MX,
                   qkv_w_scale=w_scale, fused_norm_type=norm, gamma_norm_weights=gamma, is_h_dim_4h_transposed=True)

    return nki.jit(kernel, platform_target="trn3")


def qkv_mx_ref(x, w, w_scale, gamma, bias, lnc: int) -> np.ndarray:
    """qkv_tkg_torch's ``x (@ RMSNorm) @ W + bias`` with the kernel's MX data: H pre-shuffled ([4_H, H/512, 128_H]
    order, h = q * H/4 + j * 128 + p), the hidden quantized to MXFP8 as [128, H/512, T, 4], weight row r = j * 128 + p
    of [H/4, I] packed over q, weight scale row r // 8. fp32 PSUM accumulation; with LNC2 each core's fp32 partial
    result (core 0 adding the bias) is rounded to the output dtype and the two are summed in that dtype."""
    b, s, h = x.shape
    t, i = b * s, w.shape[1]
    hidden = x.reshape(t, h).astype(np.float64)
    if gamma is not None:
        hidden = _bf16(hidden * gamma.astype(np.float64) / np.sqrt((hidden * hidden).mean(-1, keepdims=True) + 1e-6))
    shuffled = hidden.reshape(t, 4, h // 512, 128).transpose(3, 2, 0, 1)  # [128, H/512, T, 4]
    values, scales = mx_quantize(shuffled.reshape(128, -1), "float8_e4m3fn_x4")
    h_flat = values.astype(np.float64).reshape(128, h // 512, t * 4).transpose(1, 0, 2).reshape(h // 4, t * 4)
    h_sc = scales.reshape(16, h // 512, t).transpose(1, 0, 2).reshape(h // 32, t)
    w_flat = mx_unpack(w, "float8_e4m3fn_x4")
    parts = []
    tiles = h // 512 // lnc  # 128-row matmuls per core, each rounded to fp32 and accumulated in fp32 PSUM
    for core in range(lnc):
        part = np.zeros((t, i), np.float32)
        for j in range(core * tiles, (core + 1) * tiles):
            rows, groups = slice(128 * j, 128 * (j + 1)), slice(16 * j, 16 * (j + 1))
            part = part + mx_matmul(h_flat[rows], w_flat[rows], h_sc[groups], w_scale[groups]).astype(np.float32)
        if bias is not None and core == 0:
            part = part.astype(np.float64) + bias.astype(np.float64)
        parts.append(_bf16(part))
    return _bf16(sum(parts)).reshape(b, s, i)


@pytest.mark.parametrize("b,s,h,i,lnc,norm,bias", [
    (1, 4, 512, 384, 1, False, False),
    (2, 2, 1024, 640, 1, True, True),  # RMSNorm (gamma pre-shuffled like the hidden), bias, 2 PSUM tiles
    (1, 8, 1024, 256, 2, False, True),  # LNC2: each core half of H, partial results exchanged
])  # fmt: skip
def test_qkv_mx(qkv_mx_kernel, b, s, h, i, lnc, norm: bool, bias: bool) -> None:
    x = RNG.standard_normal((b, s, h)).astype(BF16)
    w = mx_random((h // 4, i), "float8_e4m3fn_x4")
    w_scale = RNG.integers(118, 122, (h // 32, i)).astype(np.uint8)
    gamma = RNG.standard_normal((1, h)).astype(BF16) if norm else None
    qkv_bias = RNG.standard_normal((1, i)).astype(BF16) if bias else None
    kernel = qkv_mx_kernel if lnc == 1 else qkv_mx_kernel[lnc]
    got = _quiet(nki.simulate(kernel), x, w, w_scale, gamma, qkv_bias)
    want = qkv_mx_ref(x, w, w_scale, gamma, qkv_bias, lnc)
    assert got.shape == want.shape and got.dtype == np.dtype(BF16)
    np.testing.assert_array_equal(got.astype(np.float64), want)  # bit-exact, the kernel's roundings emulated


# -- moe_tkg MX paths (all_expert_mx_impl, selective_expert_mx_impl) ------------------------------------------
@pytest.fixture(scope="module")
def moe_mx_kernel(nkilib_module_scope):
    moe_tkg = nkilib_module_scope("nkilib.core.moe.moe_tkg.moe_tkg").moe_tkg

    mode = nkilib_module_scope("nkilib.core.utils.common_types").ExpertAffinityScaleMode

    def kernel(x, gate_up_w, down_w, affinities, index, gate_up_s, down_s, gate_up_b, down_b, rank_id, w_dtype,
               is_all_expert, post_scale):  # fmt: skip
        dt = getattr(nl, w_dtype)
        return moe_tkg(x, gate_up_w.view(dt), down_w.view(dt), affinities, index, is_all_expert, rank_id=rank_id,
                       expert_gate_up_bias=gate_up_b, expert_down_bias=down_b,
                       expert_gate_up_weights_scale=gate_up_s, expert_down_weights_scale=down_s,
                       expert_affinities_scaling_mode=mode.POST_SCALE if post_scale else mode.NO_SCALE)  # fmt: skip

    return nki.jit(kernel, platform_target="trn3")


def moe_mx_ref(x, gate_up_w, down_w, affinities, index, gate_up_s, down_s, gate_up_b, down_b, w_dtype,
               is_all_expert: bool, post_scale: bool) -> np.ndarray:  # fmt: skip
    """``_moe_tkg_mx_ref`` of moe_tkg_torch.py: per expert (POST_SCALE: times the token's affinity), the hidden
    quantized to MXFP8 in the [128, H/512, T, 4] layout, SiLU(gate) * up from the gate/up reference, the down
    reference; summed in fp32. Selective-expert mode is composed as the kernel does, with its roundings (see
    ``_moe_selective_mx_ref``)."""
    if not is_all_expert:
        assert post_scale, "the selective MX kernel always scales by the affinity"
        return _moe_selective_mx_ref(x, gate_up_w, down_w, affinities, index, gate_up_s, down_s, gate_up_b, down_b,
                                     w_dtype)  # fmt: skip
    t, h = x.shape
    i = gate_up_w.shape[-1]

    def one_expert(active: np.ndarray, e: int) -> np.ndarray:
        bxs = active.shape[0]
        shuffled = active.astype(np.float64).reshape(bxs, 4, h // 512, 128).transpose(3, 2, 0, 1).reshape(128, -1)
        values, scales = mx_quantize(shuffled, "float8_e4m3fn_x4")
        h_words = mx_pack(values, "float8_e4m3fn_x4").reshape(128, h // 512, bxs)
        h_scale = scales.reshape(16, h // 512, bxs)
        proj = [gate_up_proj_mx_ref(h_words, h_scale, gate_up_w[e][:, k], gate_up_s[e][:, k],
                                    None if gate_up_b is None else gate_up_b[e][:, k], h, i, bxs, w_dtype)
                for k in (0, 1)]  # fmt: skip
        inter = proj[0] / (1 + np.exp(-proj[0])) * proj[1]
        return down_proj_mx_ref(inter, down_w[e], down_s[e], None if down_b is None else down_b[e], h, bxs, w_dtype)

    out = np.zeros((t, h))
    for e in range(gate_up_w.shape[0]):
        out += one_expert(x, e) * (affinities[:, e : e + 1].astype(np.float64) if post_scale else 1.0)
    return out


def _moe_selective_mx_ref(x, gate_up_w, down_w, affinities, index, gate_up_s, down_s, gate_up_b, down_b,
                          w_dtype: str) -> np.ndarray:  # fmt: skip
    """moe_tkg_torch's selective path, ``out[t] = sum over the token's k experts e of aff[t, e] * (mlp_e(x[t]) +
    down_b[e])``, composed as selective_expert_mx_impl does it, with its roundings: each (token, expert) pair is
    mlp_tkg_mx on one token without the down bias (``mlp_mx_ref``, bf16 intermediates), scaled by the affinity
    and accumulated over k in the bf16 SBUF output; the down bias is added once at the end as ``aff[T, E] @
    down_b[E, H]`` (an fp32 PSUM matmul over ALL experts, rounded into the bf16 output). The two agree only when
    each token's affinities are zero outside its top-k, as a router's are: the test's inputs are such."""
    t, h = x.shape
    aff = affinities.astype(np.float64)
    out = np.zeros((t, h))
    for tok in range(t):
        for j, e in enumerate(int(e) for e in index[tok]):
            gu_w, gu_s, gu_b = gate_up_w[e], gate_up_s[e], gate_up_b[e]
            y = mlp_mx_ref(x[tok : tok + 1].reshape(1, 1, h), gu_w[:, 0], gu_s[:, 0], gu_w[:, 1], gu_s[:, 1],
                           down_w[e], down_s[e], gu_b[:, 0], gu_b[:, 1], None, None, w_dtype).reshape(h)  # fmt: skip
            out[tok] = _bf16(y * aff[tok, e] + (out[tok] if j else 0.0))
    if down_b is not None:
        out = _bf16(out + (aff.astype(np.float32) @ down_b.astype(np.float32)).astype(np.float64))
    return out


@pytest.mark.parametrize("t,h,i,e,k,w_dtype,is_all_expert,bias,post_scale", [
    # Selective-expert (needs the gate/up bias and POST_SCALE), top-2, MXFP8 and MXFP4 weights. The all-expert MX
    # path (T % 32 == 0, POST_SCALE) runs but is not asserted yet: its reference does not emulate the kernel's bf16
    # roundings (2.1-2.4 % off, above a 1.5 % tolerance), and a test that cannot fail is not kept.
    (4, 512, 512, 4, 2, "float8_e4m3fn_x4", False, True, True),
    (3, 512, 512, 4, 2, "float4_e2m1fn_x4", False, True, True),
])  # fmt: skip
def test_moe_tkg_mx(moe_mx_kernel, t, h, i, e, k, w_dtype, is_all_expert: bool, bias: bool, post_scale) -> None:
    n_h512, n_i512 = h // 512, math.ceil(i / 512)
    i_p = i // 4 if i <= 512 else 128
    x = RNG.standard_normal((t, h)).astype(BF16)
    gate_up_w = mx_random((e, 128, 2, n_h512, i), w_dtype)
    down_w = mx_random((e, i_p, n_i512, h), w_dtype)
    gate_up_s = RNG.integers(118, 122, (e, 16, 2, n_h512, i)).astype(np.uint8)
    down_s = RNG.integers(118, 122, (e, i_p // 8, n_i512, h)).astype(np.uint8)
    gate_up_b = RNG.standard_normal((e, i_p, 2, n_i512, 4)).astype(BF16) if bias else None
    down_b = RNG.standard_normal((e, h)).astype(BF16) if bias else None
    index = np.stack([RNG.permutation(e)[:k] for _ in range(t)]).astype(np.int32)
    # a router's affinities: zero outside each token's top-k (the kernel adds the down bias as aff[T, E] @ b[E, H])
    affinities = np.zeros((t, e))
    affinities[np.arange(t)[:, None], index] = RNG.random((t, k)) + 0.1
    affinities = affinities.astype(BF16)
    rank_id = np.zeros((1, 1), np.int32)
    args = (x, gate_up_w, down_w, affinities, index, gate_up_s, down_s, gate_up_b, down_b)
    got = _quiet(nki.simulate(moe_mx_kernel), *args, rank_id, w_dtype, is_all_expert, post_scale)
    want = moe_mx_ref(*args, w_dtype, is_all_expert, post_scale)
    assert got.shape == want.shape and got.dtype == np.dtype(BF16)
    np.testing.assert_array_equal(got.astype(np.float64), want)  # bit-exact, the kernel's roundings emulated
