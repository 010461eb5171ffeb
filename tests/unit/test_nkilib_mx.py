"""nki-library's MX (microscaling) kernels, unmodified, traced, compiled and simulated by nkic.

* ``core/subkernels/rmsnorm_mx_quantize_tkg.py`` (``rmsnorm_mx_quantize_tkg``, LNC=2: each core one half of the
  tokens, the halves exchanged with ``nisa.sendrecv``), with and without the fused residual add.

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
