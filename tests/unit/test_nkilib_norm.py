"""nki-library's normalisation kernels, unmodified, traced, compiled and simulated by nkic.

* ``core/subkernels/rmsnorm_tkg.py`` and ``layernorm_tkg.py``: subkernels writing a caller-allocated output of layout
  ``[128, B*S, H/128]`` (the LNC2 layout interleaves the two halves of H; ``hidden_dim_tp`` transposes H as
  ``(H/128, 128)``). A small ``@nki.jit`` wrapper allocates that output in HBM and calls the subkernel, as a caller
  in nki-library does. References: ``rmsnorm_torch.py`` / ``layernorm_torch.py`` (``*_torch_ref_lnc1`` and the LNC2
  ``*_torch_ref``), translated to numpy.
* ``core/rmsnorm/rmsnorm_quant.py`` (``rmsnorm_quant_kernel``): optional RMSNorm then fp8 (float8_e4m3, range 240)
  row or static quantization; row quantization appends each row's fp32 dequantization scale as 4 fp8 bytes
  (``.ap(dtype=nl.float8_e4m3)`` on an fp32 tile). nki-library ships no torch reference for it; the reference here
  follows the kernel's docstring and its steps, with the kernel's bf16 compute tiles.

Numerics. fp32 inputs are checked against float64 math at fp32 accuracy. For 16-bit inputs each kernel rounds to
the input dtype where its tiles have that dtype: rmsnorm_tkg once (fp32 ``x * gamma`` times the fp32 ``rsqrt``),
layernorm_tkg after each of its four steps (centre, gamma, rsqrt, beta), so the emulations round there too and
allow one unit in the last place of the rounded values (the statistics' fp32 summation order differs).
rmsnorm_quant's row and static quantization are bit-exact against the emulation (every fp8 byte and scale byte).

``shard_on_h=True`` (LNC2) of both tkg kernels: each core normalises one half of H, the partial statistics
exchanged between the two cores with ``nisa.sendrecv``; the output has the LNC2 layout.
"""

from __future__ import annotations

import contextlib
import io
import logging

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.language as nl  # noqa: E402

RNG = np.random.default_rng(7)
BF16 = ml_dtypes.bfloat16
F32 = np.float32


@pytest.fixture(autouse=True)
def _quiet() -> None:
    """The kernels' SbufManager logs every allocation at INFO; keep test output readable."""
    logging.disable(logging.INFO)
    yield
    logging.disable(logging.NOTSET)


def _round(a: np.ndarray, dtype: type) -> np.ndarray:
    """fp32 ``a`` as stored in a tile of ``dtype`` and read back as fp32."""
    return np.asarray(a, F32).astype(dtype).astype(F32)


def tkg_layout(r: np.ndarray, lnc: int, hidden_dim_tp: bool) -> np.ndarray:
    """[B, S, H] -> the kernels' [128, B*S, H/128] output layout (``*_torch_ref_lnc1`` / ``*_torch_ref``)."""
    b, s, h = r.shape
    r = r.reshape(b * s, h)
    if hidden_dim_tp:
        return r.reshape(b * s, h // 128, 128).transpose(2, 0, 1)
    if lnc == 1:
        return r.reshape(b * s, 128, h // 128).transpose(1, 0, 2)
    halves = [t.reshape(b * s, 128, h // 256).transpose(1, 0, 2) for t in (r[:, : h // 2], r[:, h // 2 :])]
    return np.concatenate(halves, axis=2)


def _check_rounded(got: np.ndarray, emulated: np.ndarray, exact: np.ndarray, dtype: type, magnitude=None) -> None:
    """fp32 outputs at fp32 accuracy; 16-bit ones within one ulp of the emulation (``magnitude``: the largest
    rounded intermediate, when that exceeds the output)."""
    got = got.astype(np.float64)
    if dtype is F32:
        np.testing.assert_allclose(got, exact, rtol=2e-5, atol=2e-5 * np.abs(exact).max())
        return
    ulp = 2.0 ** -(7 if dtype is BF16 else 10)
    scale = np.abs(emulated) if magnitude is None else np.maximum(np.abs(emulated), np.abs(magnitude))
    assert np.all(np.abs(got - emulated) <= ulp * scale + 1e-6), np.abs(got - emulated).max()


# -- rmsnorm_tkg ----------------------------------------------------------------------------------------------------
def rms_norm_ref(x: np.ndarray, gamma: np.ndarray, eps: float, hidden_actual: int | None) -> np.ndarray:
    """``rms_norm_torch_ref`` in float64: ``x / sqrt(sum(x^2) / n + eps) * gamma``."""
    x = x.astype(np.float64)
    n = hidden_actual or x.shape[-1]
    return x / np.sqrt((x * x).sum(-1, keepdims=True) / n + eps) * gamma.astype(np.float64)


@pytest.fixture(scope="module")
def rmsnorm_kernel(nkilib_module_scope):
    rms = nkilib_module_scope("nkilib.core.subkernels.rmsnorm_tkg")

    @nki.jit
    def rmsnorm(x, gamma, eps, hidden_actual, hidden_dim_tp, single_core_forced, use_heap_memory, shard_on_h=False):
        b, s, h = x.shape
        out = nl.ndarray((128, b * s, h // 128), dtype=x.dtype, buffer=nl.shared_hbm)
        rms.rmsnorm_tkg(x, gamma, out, eps=eps, hidden_actual=hidden_actual, hidden_dim_tp=hidden_dim_tp,
                        single_core_forced=single_core_forced, shard_on_h=shard_on_h,
                        use_heap_memory=use_heap_memory)  # fmt: skip
        return out

    return rmsnorm


@pytest.mark.parametrize("shape,dtype,lnc,tp,single,hidden_actual,heap", [
    ((1, 4, 256), F32, 1, False, False, None, False),  # H <= 2048: contiguous load + PE transposes
    ((1, 4, 256), BF16, 1, False, False, None, False),
    ((2, 3, 4096), F32, 1, False, False, None, False),  # H > 2048: one strided DMA
    ((1, 4, 256), F32, 1, True, False, None, False),  # hidden_dim_tp: dma_transpose loads
    ((1, 4, 256), F32, 1, False, False, 200, True),  # padded H (mean over 200), heap allocation
    ((1, 4, 512), F32, 2, False, False, None, False),  # LNC2, BxS <= 18: not sharded, the LNC2 layout
    ((4, 5, 512), BF16, 2, False, False, None, False),  # LNC2, BxS = 20 > 18: each core one half of BxS
    ((1, 4, 256), F32, 2, True, False, None, False),
    ((4, 5, 256), F32, 2, False, True, None, False),  # single_core_forced: the LNC1 layout on one core
])  # fmt: skip
def test_rmsnorm_tkg(rmsnorm_kernel, shape, dtype, lnc, tp, single, hidden_actual, heap) -> None:
    h = shape[-1]
    x = RNG.standard_normal(shape).astype(dtype)
    gamma = RNG.standard_normal((1, h)).astype(dtype)
    eps = 1e-6
    kernel = rmsnorm_kernel if lnc == 1 else rmsnorm_kernel[lnc]
    got = kernel(x, gamma, eps, hidden_actual, tp, single, heap)
    assert got.shape == (128, shape[0] * shape[1], h // 128) and got.dtype == np.dtype(dtype)
    layout_lnc = 1 if single else lnc
    exact = tkg_layout(rms_norm_ref(x, gamma, eps, hidden_actual), layout_lnc, tp)
    # The kernel: bf16(fp32(x * gamma) * fp32 rsqrt(sum / n + eps)), one rounding.
    emulated = tkg_layout(_round(rms_norm_ref(x, gamma, eps, hidden_actual), dtype), layout_lnc, tp)
    _check_rounded(got, emulated, exact, dtype)


@pytest.mark.parametrize("shape,dtype,hidden_actual,heap", [
    ((1, 4, 256), F32, None, False),  # each core one 128-wide half of H
    ((2, 3, 512), BF16, None, True),
    ((1, 4, 512), F32, 400, False),  # padded H: the mean over 400
])  # fmt: skip
def test_rmsnorm_tkg_shard_on_h(rmsnorm_kernel, shape, dtype, hidden_actual, heap) -> None:
    h = shape[-1]
    x = RNG.standard_normal(shape).astype(dtype)
    gamma = RNG.standard_normal((1, h)).astype(dtype)
    eps = 1e-6
    got = rmsnorm_kernel[2](x, gamma, eps, hidden_actual, False, False, heap, True)
    assert got.shape == (128, shape[0] * shape[1], h // 128) and got.dtype == np.dtype(dtype)
    exact = tkg_layout(rms_norm_ref(x, gamma, eps, hidden_actual), 2, False)
    emulated = tkg_layout(_round(rms_norm_ref(x, gamma, eps, hidden_actual), dtype), 2, False)
    _check_rounded(got, emulated, exact, dtype)


# -- layernorm_tkg --------------------------------------------------------------------------------------------------
def layer_norm_steps(x, gamma, beta, eps, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``layer_norm_torch_ref`` with the kernel's tile roundings (none for fp32): (x - mean) * gamma * rsqrt(var +
    eps) + beta, var = E[x^2] - E[x]^2 in fp32. Returns (output, the value before beta is added)."""
    xf = x.astype(F32)
    mean = xf.astype(np.float64).mean(-1, keepdims=True).astype(F32)
    var = ((xf.astype(np.float64) ** 2).mean(-1, keepdims=True) - mean.astype(np.float64) ** 2).astype(F32)
    rs = (1 / np.sqrt(var.astype(np.float64) + eps)).astype(F32)
    o = _round(_round(_round(xf - mean, dtype) * gamma.astype(F32), dtype) * rs, dtype)
    return (o if beta is None else _round(o + beta.astype(F32), dtype)), o


def layer_norm_ref(x, gamma, beta, eps) -> np.ndarray:
    x = x.astype(np.float64)
    norm = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * gamma.astype(np.float64)
    return norm if beta is None else norm + beta.astype(np.float64)


@pytest.fixture(scope="module")
def layernorm_kernel(nkilib_module_scope):
    ln = nkilib_module_scope("nkilib.core.subkernels.layernorm_tkg")

    @nki.jit
    def layernorm(x, gamma, beta, eps, use_heap_memory, shard_on_h=False):
        b, s, h = x.shape
        out = nl.ndarray((128, b * s, h // 128), dtype=x.dtype, buffer=nl.shared_hbm)
        ln.layernorm_tkg(x, gamma, out, beta=beta, eps=eps, shard_on_h=shard_on_h, use_heap_memory=use_heap_memory)
        return out

    return layernorm


@pytest.mark.parametrize("shape,dtype,lnc,with_beta,heap", [
    ((1, 4, 256), F32, 1, True, False),
    ((1, 4, 256), BF16, 1, True, False),
    ((1, 4, 256), F32, 1, False, True),  # no beta; heap allocation
    ((2, 3, 4096), F32, 1, True, False),  # H > 2048: one strided DMA
    ((1, 4, 512), F32, 2, True, False),  # LNC2, BxS <= 10: not sharded
    ((4, 3, 512), BF16, 2, True, False),  # LNC2, BxS = 12 > 10: sharded on BxS
])  # fmt: skip
def test_layernorm_tkg(layernorm_kernel, shape, dtype, lnc, with_beta, heap) -> None:
    h = shape[-1]
    x = (RNG.standard_normal(shape) + 0.5).astype(dtype)  # a non-zero mean, so centring matters
    gamma = RNG.standard_normal((1, h)).astype(dtype)
    beta = RNG.standard_normal((1, h)).astype(dtype) if with_beta else None
    eps = 1e-6
    kernel = layernorm_kernel if lnc == 1 else layernorm_kernel[lnc]
    got = kernel(x, gamma, beta, eps, heap)
    assert got.shape == (128, shape[0] * shape[1], h // 128) and got.dtype == np.dtype(dtype)
    emulated, before_beta = layer_norm_steps(x, gamma, beta, eps, dtype)
    exact = tkg_layout(layer_norm_ref(x, gamma, beta, eps), lnc, False)
    _check_rounded(got, tkg_layout(emulated, lnc, False), exact, dtype, tkg_layout(before_beta, lnc, False))


@pytest.mark.parametrize("shape,dtype,with_beta", [
    ((1, 4, 256), F32, True),
    ((2, 3, 512), BF16, True),
    ((1, 4, 256), F32, False),
])  # fmt: skip
def test_layernorm_tkg_shard_on_h(layernorm_kernel, shape, dtype, with_beta) -> None:
    h = shape[-1]
    x = (RNG.standard_normal(shape) + 0.5).astype(dtype)
    gamma = RNG.standard_normal((1, h)).astype(dtype)
    beta = RNG.standard_normal((1, h)).astype(dtype) if with_beta else None
    eps = 1e-6
    got = layernorm_kernel[2](x, gamma, beta, eps, False, True)
    assert got.shape == (128, shape[0] * shape[1], h // 128) and got.dtype == np.dtype(dtype)
    emulated, before_beta = layer_norm_steps(x, gamma, beta, eps, dtype)
    exact = tkg_layout(layer_norm_ref(x, gamma, beta, eps), 2, False)
    _check_rounded(got, tkg_layout(emulated, 2, False), exact, dtype, tkg_layout(before_beta, 2, False))


# -- rmsnorm_quant --------------------------------------------------------------------------------------------------
FP8 = ml_dtypes.float8_e4m3  # nl.float8_e4m3: the legacy e4m3 of range 240 (equal to e4m3fn below 240)


def rmsnorm_quant_ref(x, gamma, rms: bool, row: bool, lower_bound: float, eps: float, static_scale: float):
    """The kernel's steps on its bf16 compute tile: load as bf16; RMSNorm (fp32 sum of squares, rsqrt with eps as a
    bf16 bias, bf16(x * rsqrt * gamma)); row quantization (absmax -> clipped to lower_bound -> /240 -> >= 1e-6 ->
    reciprocal -> fp8(x * q)) or static (bf16(x / dequant_scale) clipped to +-240 -> fp8). Returns the output bytes."""
    h = x.shape[-1]
    t = _round(x.reshape(-1, h), BF16)
    if rms:
        ss = (t.astype(np.float64) ** 2).sum(-1, keepdims=True)
        inv = (1 / np.sqrt(ss * F32(1 / h) + float(BF16(eps)))).astype(F32)
        t = _round(t * inv * gamma.reshape(1, h).astype(F32), BF16)
    if row:
        amax = np.abs(t).max(-1, keepdims=True)
        if lower_bound > 0:
            amax = np.minimum(amax, F32(lower_bound))
            t = np.clip(t, -F32(lower_bound), F32(lower_bound))
        dequant = np.maximum((amax * F32(1 / 240)).astype(F32), F32(1e-6))
        q = (t * (F32(1) / dequant)).astype(FP8)
        out = np.concatenate([q.view(np.uint8), dequant.view(np.uint8)], axis=-1)
        return out.reshape(*x.shape[:-1], h + 4)
    q = np.clip(_round(t * (F32(1) / F32(static_scale)), BF16), -240, 240).astype(FP8)
    return q.view(np.uint8).reshape(x.shape)


@pytest.mark.parametrize("shape,gamma_shape,dtype,kind,lower_bound,lnc", [
    ((1, 4, 256), (256,), BF16, "row", 0.0, 1),
    ((2, 130, 512), (1, 512), BF16, "row", 0.0, 1),  # two outer tiles (128 + 132)
    ((1, 4, 256), (256,), F32, "row", 0.0, 1),  # fp32 input cast to bf16 by the load
    ((1, 4, 256), (256,), BF16, "row", 1.0, 1),  # lower_bound clips the scale and the data
    ((1, 4, 1000), (1000,), BF16, "static", 0.0, 1),  # H not a multiple of 512: a partial gamma tile
    ((1, 4, 256), (256,), BF16, "no_norm", 0.0, 1),
    ((1, 64, 256), (256,), BF16, "row", 0.0, 2),  # 1-D SPMD grid: each program a share of the rows
    ((2, 11, 256), (256,), BF16, "row", 0.0, 4),  # 22 rows on 4 programs: 5, 5, 5 and the remaining 7
])  # fmt: skip
def test_rmsnorm_quant(nkilib, shape, gamma_shape, dtype, kind: str, lower_bound: float, lnc: int) -> None:
    mod = nkilib("nkilib.core.rmsnorm.rmsnorm_quant")
    types = nkilib("nkilib.core.utils.common_types")
    kw: dict = {"lower_bound": lower_bound}
    if kind == "static":
        kw["quantization_type"] = types.QuantizationType.STATIC
    if kind == "no_norm":
        kw["norm_type"] = types.NormType.NO_NORM
    x = (RNG.standard_normal(shape) * 3).astype(dtype)
    gamma = RNG.standard_normal(gamma_shape).astype(BF16)
    static_scale = 0.02
    scale = np.full((128, 1), static_scale, F32) if kind == "static" else None
    kernel = mod.rmsnorm_quant_kernel if lnc == 1 else mod.rmsnorm_quant_kernel[lnc]
    with contextlib.redirect_stdout(io.StringIO()):
        got = kernel(x, gamma, mod.RmsNormQuantKernelArgs(**kw), scale)
    h = shape[-1]
    want_shape = shape if kind == "static" else (*shape[:-1], h + 4)
    assert got.shape == want_shape and got.dtype.itemsize == 1
    want = rmsnorm_quant_ref(x, gamma, kind != "no_norm", kind != "static", lower_bound, 1e-6, static_scale)
    np.testing.assert_array_equal(got.view(np.uint8), want)
    # Sanity against plain float64 math: dequantized values within fp8's precision (4 significant bits).
    values = got.view(np.uint8)[..., :h].view(FP8).astype(np.float64)
    ref = x.astype(np.float64)
    if kind != "no_norm":
        ref = rms_norm_ref(x, gamma.reshape(1, h), 1e-6, None)
    if kind == "static":
        np.testing.assert_allclose(values * static_scale, np.clip(ref / static_scale, -240, 240) * static_scale,
                                   rtol=2**-3, atol=static_scale * 2**-6)  # fmt: skip
    elif lower_bound == 0:
        dequant = got.view(np.uint8)[..., h:].copy().view(F32).astype(np.float64)
        np.testing.assert_allclose(values * dequant, ref, rtol=2**-3, atol=2**-6 * np.abs(ref).max())
