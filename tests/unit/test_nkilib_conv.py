"""nki-library 1-D convolution kernels (``experimental/conv``), unmodified, traced, compiled and simulated by nkic.

Both are checked against a numpy translation of ``conv1d_torch.py`` (``nn.Conv1d`` with filters [K, C_in, C_out]
permuted to torch's [C_out, C_in, K], asymmetric padding applied to the input first, optional bias, then the fused
activation), computed in float64:

* ``conv1d.conv1d``: stride, asymmetric padding, dilation, bias, the four ``ActFnType`` activations, C_in/C_out
  above one partition tile, LNC2 sharding of C_out (``lnc_shard=True``).
* ``depthwise_conv1d.depthwise_conv1d_implicit_gemm``: the grouped case of the same reference
  (``feature_group_count == C``: each channel convolved with its own filter), on [N, C, 1, W] inputs; it shards
  channels over the programs of an LNC2 launch and also runs as a single program.

fp32 kernels run fp32 matmuls and are held to 1e-5 of the largest output; bf16 kernels multiply bf16 operands
(8 significant bits) and are held to 2e-2.

``ActFnType.Swish``: the kernel maps it to ``nl.gelu_apprx_sigmoid`` (x·σ(1.702x), ``get_nl_act_fn_from_type`` in
``core/utils/kernel_helpers.py``) while ``conv1d_torch.py`` maps it to ``F.silu`` (x·σ(x)). The two differ by up to
~4% of the output, so the reference follows the kernel for Swish; the discrepancy is upstream's.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

BF16 = ml_dtypes.bfloat16


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


_ACTIVATIONS = {
    "SiLU": lambda y: y * _sigmoid(y),
    "GELU": lambda y: 0.5 * y * (1.0 + np.vectorize(math.erf)(y / math.sqrt(2.0))),
    "GELU_Tanh_Approx": lambda y: 0.5 * y * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * y**3))),
    "Swish": lambda y: y * _sigmoid(1.702 * y),  # what the kernel computes (module docstring)
}


def conv1d_reference(x, filters, bias=None, stride=1, padding=(0, 0), dilation=1, activation=None) -> np.ndarray:
    """``conv1d_torch_ref`` in float64: x [B, C_in, L], filters [K, C_in, C_out] -> [B, C_out, L_out]."""
    x = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), tuple(padding)))
    k_size = filters.shape[0]
    l_out = (x.shape[2] - dilation * (k_size - 1) - 1) // stride + 1
    out = np.zeros((x.shape[0], filters.shape[2], l_out))
    for k in range(k_size):  # tap k reads x[l * stride + k * dilation]
        taps = x[:, :, k * dilation : k * dilation + stride * (l_out - 1) + 1 : stride]
        out += np.einsum("bcl,co->bol", taps, np.asarray(filters[k], np.float64))
    if bias is not None:
        out += np.asarray(bias, np.float64)[None, :, None]
    return _ACTIVATIONS[activation](out) if activation else out


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want)) / np.max(np.abs(want)))


CONV1D_CASES = [
    # (lnc, B, C_in, C_out, L, K, dtype, options)
    pytest.param(1, 1, 4, 8, 16, 3, np.float32, {}, id="smallest"),
    pytest.param(1, 2, 130, 200, 100, 5, np.float32,
                 {"bias": True, "stride": 2, "padding": (1, 2), "dilation": 2}, id="tiles-bias-stride-pad-dilation"),
    pytest.param(1, 1, 64, 64, 64, 3, BF16, {"bias": True}, id="bf16"),
    pytest.param(1, 1, 8, 16, 32, 3, np.float32, {"bias": True, "activation": "SiLU"}, id="silu"),
    pytest.param(1, 1, 8, 16, 32, 3, np.float32, {"bias": True, "activation": "GELU"}, id="gelu"),
    pytest.param(1, 1, 8, 16, 32, 3, np.float32, {"bias": True, "activation": "GELU_Tanh_Approx"}, id="gelu-tanh"),
    pytest.param(1, 1, 8, 16, 32, 3, np.float32, {"bias": True, "activation": "Swish"}, id="swish"),
    pytest.param(2, 1, 8, 256, 32, 3, np.float32, {"bias": True}, id="lnc2-shard-c_out"),
]  # fmt: skip


@pytest.mark.parametrize("lnc,b,c_in,c_out,length,k,dtype,options", CONV1D_CASES)
def test_conv1d(nkilib, lnc: int, b: int, c_in: int, c_out: int, length: int, k: int, dtype, options: dict) -> None:
    from nkic.api.execute import simulate

    conv1d = nkilib("nkilib.experimental.conv.conv1d").conv1d
    act_types = nkilib("nkilib.core.utils.common_types").ActFnType
    rng = np.random.default_rng(2)
    x = rng.standard_normal((b, c_in, length)).astype(dtype)
    filters = (rng.standard_normal((k, c_in, c_out)) / math.sqrt(k * c_in)).astype(dtype)
    bias = rng.standard_normal(c_out).astype(dtype) if options.get("bias") else None
    kwargs = {name: options[name] for name in ("stride", "padding", "dilation") if name in options}
    activation = options.get("activation")
    if activation:
        kwargs["activation_fn"] = getattr(act_types, activation)
    got = simulate(conv1d[lnc] if lnc > 1 else conv1d)(x, filters, bias, lnc_shard=lnc > 1, **kwargs)
    want = conv1d_reference(x, filters, bias, activation=activation, **{n: options[n] for n in kwargs if n in options})
    assert got.shape == want.shape and got.dtype == np.dtype(dtype)
    assert rel_err(got, want) < (1e-5 if dtype == np.float32 else 2e-2)


DEPTHWISE_CASES = [
    # (lnc, N, C, W, S, dtype, padding (left, right), stride)
    pytest.param(2, 1, 2, 16, 3, np.float32, (0, 0), 1, id="smallest"),
    pytest.param(2, 2, 4, 300, 130, np.float32, (2, 1), 2, id="s-tiles-pad-stride2"),
    pytest.param(1, 1, 130, 16, 3, np.float32, (0, 0), 1, id="c-tiles-one-program"),
    pytest.param(1, 1, 4, 64, 8, BF16, (1, 1), 3, id="bf16-one-program-stride3"),
]


@pytest.mark.parametrize("lnc,n,c,w,s,dtype,padding,stride", DEPTHWISE_CASES)
def test_depthwise_conv1d(nkilib, lnc: int, n: int, c: int, w: int, s: int, dtype, padding, stride: int) -> None:
    from nkic.api.execute import simulate

    kernel = nkilib("nkilib.experimental.conv.depthwise_conv1d").depthwise_conv1d_implicit_gemm
    rng = np.random.default_rng(4)
    x = rng.standard_normal((n, c, 1, w)).astype(dtype)
    filters = rng.standard_normal((c, 1, 1, s)).astype(dtype)
    got = simulate(kernel[lnc] if lnc > 1 else kernel)(
        x, filters, padding=((0, 0), padding), stride=(1, stride), feature_group_count=c
    )
    # The grouped conv1d: channel i convolved with filter i alone, i.e. a [K, 1, 1] filter per channel.
    want = np.concatenate(
        [conv1d_reference(x[:, i], filters[i, 0, 0][:, None, None], stride=stride, padding=padding) for i in range(c)],
        axis=1,
    )[:, :, None, :]
    assert got.shape == want.shape and got.dtype == np.dtype(dtype)
    assert rel_err(got, want) < (1e-5 if dtype == np.float32 else 2e-2)
