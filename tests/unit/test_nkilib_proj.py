"""nki-library's projection kernels, unmodified, traced, compiled and simulated by nkic against numpy references.

* ``core/output_projection/output_projection_tkg.py`` (``output_projection_tkg``) and
  ``core/output_projection/output_projection_cte/output_projection_cte.py`` (``output_projection_cte``), against
  numpy translations of ``output_projection_tkg_torch.py`` / ``output_projection_cte_torch.py``.
* ``core/qkv/qkv.py``'s ``qkv`` entry point, which runs ``qkv_tkg`` for B*S <= 96 (there with PE column tiling,
  ``nc_matmul(tile_position=, tile_size=)``) and ``qkv_cte`` beyond, against a numpy translation of
  ``qkv_tkg_torch.py`` (its RMSNorm is the docstring's ``x * gamma / sqrt(mean(x^2) + eps)``).
* ``core/mlp/mlp_tkg/mlp_tkg.py`` (``mlp_tkg``) and ``core/mlp/mlp_cte/mlp_cte.py`` (``mlp_cte``). ``core/mlp/mlp.py``
  does not parse upstream, so a small kernel here builds their ``MLPParameters`` as ``mlp.py`` does and calls
  them directly. nki-library has no torch reference for the plain MLP: the reference is ``mlp.py``'s docstring,
  ``down(act(gate(x)) * up(x))``.

Inputs are bf16 (fp32/fp16 where the kernel takes them) and the kernels compute in fp32 with bf16 intermediates, so
results are compared with a tolerance of a few bf16 ulps of the output's magnitude. The corpus is loaded by path
by the ``nkilib`` fixture (``conftest.py``); every kernel test is skipped when it is absent.
"""

from __future__ import annotations

import contextlib
import io

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402

RNG = np.random.default_rng(11)
BF16 = ml_dtypes.bfloat16
EPS = 1e-6


def _close(got: np.ndarray, want: np.ndarray, dtype) -> None:
    """Within a few output-dtype ulps of the result's magnitude (bf16 intermediates round at 2^-8)."""
    rel = {np.float32: 2e-5, np.float16: 4e-3}.get(dtype, 1.2e-2)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=0, atol=rel * float(np.abs(want).max()))


def _randn(shape, dtype, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def _quiet(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):  # some kernels print their tiling decisions
        return fn(*args, **kwargs)


def _rms_norm(x: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * gamma


# -- output projection ----------------------------------------------------------------------------------------
def ref_output_projection_tkg(attn, w, bias, transpose_out: bool, lnc: int) -> np.ndarray:
    """output_projection_tkg_torch_ref (quantization NONE). The reference infers LNC from H (2 when H % 256 == 0);
    it is passed here, as the kernel's layout follows the launch's LNC."""
    d, b, n, s = attn.shape
    h = w.shape[1]
    a = attn.astype(np.float32).transpose(1, 3, 2, 0).reshape(b * s, n * d)
    out = a @ w.astype(np.float32)
    if bias is not None:
        out = out + bias.astype(np.float32)
    if transpose_out:
        out = out.reshape(b * s, lnc, 128, h // (lnc * 128)).transpose(2, 1, 3, 0)
    return out


@pytest.mark.parametrize("d,b,n,s,h,dtype,transpose_out,lnc,has_bias", [
    (128, 1, 2, 1, 512, BF16, False, 1, True),
    (64, 2, 3, 2, 512, np.float32, False, 1, True),
    (32, 4, 2, 1, 1024, np.float16, False, 2, True),
    (128, 1, 2, 1, 512, BF16, True, 1, True),  # builds patterns past the weights it never multiplies
    (128, 1, 2, 1, 512, BF16, True, 2, False),
])  # fmt: skip
def test_output_projection_tkg(nkilib, d, b, n, s, h, dtype, transpose_out, lnc, has_bias) -> None:
    kernel = nkilib("nkilib.core.output_projection.output_projection_tkg").output_projection_tkg
    attn, w = _randn((d, b, n, s), dtype), _randn((n * d, h), dtype, 1 / 16)
    bias = _randn((1, h), dtype) if has_bias else None
    got = _quiet(kernel if lnc == 1 else kernel[lnc], attn, w, bias, TRANSPOSE_OUT=transpose_out)
    _close(got, ref_output_projection_tkg(attn, w, bias, transpose_out, lnc), dtype)


def ref_output_projection_cte(attn, w, bias) -> np.ndarray:
    """output_projection_cte_torch_ref (quantization NONE): [B, N, D, S] -> [B, S, N*D] @ [N*D, H] + bias."""
    b, n, d, s = attn.shape
    out = attn.astype(np.float32).transpose(0, 3, 1, 2).reshape(b, s, n * d) @ w.astype(np.float32)
    return out if bias is None else out + bias.astype(np.float32)


@pytest.mark.parametrize("b,n,d,s,h,dtype,lnc,has_bias", [
    (1, 2, 64, 128, 256, BF16, 1, True),
    (2, 1, 128, 128, 512, np.float32, 2, False),
])  # fmt: skip
def test_output_projection_cte(nkilib, b, n, d, s, h, dtype, lnc, has_bias) -> None:
    kernel = nkilib("nkilib.core.output_projection.output_projection_cte.output_projection_cte").output_projection_cte
    attn, w = _randn((b, n, d, s), dtype), _randn((n * d, h), dtype, 1 / 16)
    bias = _randn((1, h), dtype) if has_bias else None
    got = _quiet(kernel if lnc == 1 else kernel[lnc], attn, w, bias)
    _close(got, ref_output_projection_cte(attn, w, bias), dtype)


# -- QKV ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("b,s,h,i,norm", [
    (1, 1, 512, 256, False),  # qkv_tkg, 4 column tiles of 32
    (2, 4, 1024, 384, True),  # qkv_tkg with RMSNorm
    (1, 128, 512, 256, False),  # qkv_cte
    (1, 256, 512, 384, True),  # qkv_cte with RMSNorm
])  # fmt: skip
def test_qkv(nkilib, b: int, s: int, h: int, i: int, norm: bool) -> None:
    qkv = nkilib("nkilib.core.qkv.qkv").qkv
    norm_type = nkilib("nkilib.core.utils.common_types").NormType
    x, w, gamma = _randn((b, s, h), BF16), _randn((h, i), BF16, 1 / 16), _randn((1, h), BF16)
    kw = dict(fused_norm_type=norm_type.RMS_NORM, gamma_norm_weights=gamma) if norm else {}
    got = _quiet(qkv, x, w, **kw)
    hidden = x.astype(np.float32)
    if norm:
        hidden = _rms_norm(hidden, gamma.astype(np.float32))
    _close(got, hidden @ w.astype(np.float32), BF16)


# -- MLP ------------------------------------------------------------------------------------------------------
def _mlp_kernel(nkilib):
    params_mod = nkilib("nkilib.core.mlp.mlp_parameters")
    tkg = nkilib("nkilib.core.mlp.mlp_tkg.mlp_tkg")
    cte = nkilib("nkilib.core.mlp.mlp_cte.mlp_cte")
    allocator = nkilib("nkilib.core.utils.allocator")
    logging = nkilib("nkilib.core.utils.logging")
    act = nkilib("nkilib.core.utils.common_types").ActFnType

    def mlp(hidden, gate_w, up_w, down_w, norm_w, norm_type, cte_mode: bool, column_tiling: bool):
        params = params_mod.MLPParameters(
            hidden_tensor=hidden, gate_proj_weights_tensor=gate_w, up_proj_weights_tensor=up_w,
            down_proj_weights_tensor=down_w, normalization_weights_tensor=norm_w, normalization_type=norm_type,
            activation_fn=act.SiLU, use_tkg_gate_up_proj_column_tiling=column_tiling,
            use_tkg_down_proj_column_tiling=column_tiling, force_cte_mode=cte_mode,
        )  # fmt: skip
        params_mod.validate_mlp_arguments(params)
        sbm = allocator.SbufManager(0, 200 * 1024, logging.Logger("mlp"))
        out = sbm.alloc((params.batch_size, params.sequence_len, params.hidden_size), dtype=params.output_dtype,
                        buffer=nl.shared_hbm, name="output_tensor_hbm")  # fmt: skip
        if cte_mode:
            cte.mlp_cte(params, out, None)
            return out
        return tkg.mlp_tkg(params, out, None, sbm=sbm)[0]

    return nki.jit(mlp)


@pytest.mark.parametrize("b,s,h,i,norm,cte_mode,column_tiling", [
    (1, 1, 512, 256, False, False, True),  # mlp_tkg, column-tiled gate/up and down projections
    (2, 4, 512, 512, True, False, False),  # mlp_tkg with RMSNorm, untiled
    (1, 128, 512, 256, False, True, True),  # mlp_cte
    (1, 256, 512, 384, True, True, True),  # mlp_cte with RMSNorm
])  # fmt: skip
def test_mlp(nkilib, b, s, h, i, norm: bool, cte_mode: bool, column_tiling: bool) -> None:
    norm_type = nkilib("nkilib.core.utils.common_types").NormType
    x, gamma = _randn((b, s, h), BF16), _randn((1, h), BF16)
    gate_w, up_w, down_w = _randn((h, i), BF16, 1 / 16), _randn((h, i), BF16, 1 / 16), _randn((i, h), BF16, 1 / 16)
    nt = norm_type.RMS_NORM if norm else norm_type.NO_NORM
    got = _quiet(nki.simulate(_mlp_kernel(nkilib)), x, gate_w, up_w, down_w, gamma if norm else None, nt, cte_mode,
                 column_tiling)  # fmt: skip
    hidden = x.astype(np.float32)
    if norm:
        hidden = _rms_norm(hidden, gamma.astype(np.float32))
    gate = hidden @ gate_w.astype(np.float32)
    act = gate / (1 + np.exp(-gate)) * (hidden @ up_w.astype(np.float32))
    _close(got, act @ down_w.astype(np.float32), BF16)


# -- the frontend fixes these kernels needed ------------------------------------------------------------------
def _overrun_kernel(use_it: bool):
    def kernel(x):
        s = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        past_the_end = s.ap(pattern=[[64, 128], [1, 64]], offset=32)  # the last 32 elements are not s's
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=past_the_end if use_it else s)  # OVERRUN
        return out

    return kernel


def test_an_overrunning_ap_is_an_error_only_where_an_instruction_uses_it() -> None:
    x = RNG.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(_overrun_kernel(False))(x), x)
    with pytest.raises(NkiError, match="'src': access pattern touches elements 32..8223 of") as e:
        nki.jit(_overrun_kernel(True)).trace(x)
    assert e.value.file == __file__ and "OVERRUN" in open(__file__).read().splitlines()[e.value.line - 1]


def test_a_kernel_may_return_a_reshape_of_a_whole_tensor() -> None:
    @nki.jit
    def kernel(x):
        out = nl.ndarray((8, 96), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x.reshape((8, 96)))
        return out.reshape((2, 4, 96))

    x = RNG.standard_normal((2, 4, 96)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x)

    @nki.jit
    def part(x):
        out = nl.ndarray((8, 96), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x.reshape((8, 96)))
        return out[0:4].reshape((4, 96))

    with pytest.raises(NkiError, match="must return whole tensors, not views of"):
        part.trace(x)
