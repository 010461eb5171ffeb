"""Every example kernel of the official NKI documentation, unmodified, run by nkic and checked against numpy.

The examples are not part of nkic. They are read by path from the ``shared/corpus`` folder beside the repository
checkout (``aws-neuron-sdk/nki/examples``); when that folder is absent every test here is skipped.

Each example module is loaded by path with importlib after ``nkic.install_nki_alias()`` (so its ``import nki``
resolves to nkic), which does not run its ``if __name__ == "__main__":`` block. Its kernels are picked by name and
run with ``nki.simulate(kernel)(*arrays)`` on the shapes and dtypes the docs use (read from the example's own
``__main__`` block or from its ``*_torch.py`` / ``*_jax.py`` companion, which need torch_xla / jax devices and are
therefore not run; their reference computations are translated to numpy below). Where the docs' shapes are slow on
a CPU simulator a smaller shape is used that keeps the tile multiples the kernel asserts.

The two files that are meant to run as programs (``getting_started_baremetal.py``'s ``__main__`` block and
``simulate/nki_simulate_example.py``) are additionally run verbatim with ``runpy`` (``run_name="__main__"``).

One test id per (file, kernel): ``CASES`` below is the table of them; ``summary()`` formats it with the status of
each (``python tests/unit/test_docs_examples.py`` prints it). A case that nkic cannot run yet carries
``blocked=(exception type, reason)``, its precise current failure; it becomes
``pytest.mark.xfail(strict=True, raises=type, reason=reason)``. Strict: an unexpected pass fails the suite, so the
``blocked=`` has to be deleted as soon as the missing feature lands; ``raises``: a case that starts failing
differently (the next missing feature) fails too, so that its reason is updated rather than going stale.

Three listings of the docs are not kernels to run on numbers but error demonstrations, and are checked as such:
``layout-violation.py`` loads a 256-partition tile (nkic must reject it with its partition-limit error),
``layout-loop.py`` stores to an undefined index ``i_f`` (the error must name it) and ``layout-dynamic-loop.py`` is
not valid Python (an unclosed parenthesis), which the test pins so that a fixed listing is noticed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import math
import os
import re
import runpy
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

# tests/unit/<this file> -> parents[2] is the repository root; the corpus folder sits next to the checkout.
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
EXAMPLES = CORPUS / "aws-neuron-sdk" / "nki" / "examples"
# The docs' deep dives: the MX (microscaling) matmul kernels, whose helpers import each other by bare module name.
MXFP = "../deep-dives/src/mxfp-matmul"

BF16 = ml_dtypes.bfloat16
F16 = np.float16
F32 = np.float32
SEED = 20240611

# Reasons shared by several cases (the first failure each case hits today).


# ----------------------------------------------------------------------------------------------------------------
# numpy references (translated from the docs' torch / jax / numpy checks)
# ----------------------------------------------------------------------------------------------------------------


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # The sum of two float16 values is exact in fp32 and a float32 sum is rounded once: either way the kernel's
    # result is the correctly rounded a + b in the output dtype, which is what numpy computes. Compared exactly.
    return (a.astype(F32) + b.astype(F32)).astype(a.dtype)


def _transpose2d(a: np.ndarray, shape2d: tuple[int, int]) -> np.ndarray:
    # transpose2d_torch.py: torch.transpose(a.reshape(P, X, Y), 1, 2).reshape(P, X * Y)
    p = a.shape[0]
    x, y = shape2d
    return np.transpose(a.reshape(p, x, y), (0, 2, 1)).reshape(p, x * y)


def _avgpool2d(a: np.ndarray, pool: int) -> np.ndarray:
    # average_pool2d_torch.py: torch.nn.functional.avg_pool2d(a, pool, pool) on a C x H x W tensor.
    c, h, w = a.shape
    windows = a.astype(np.float64).reshape(c, h // pool, pool, w // pool, pool)
    return windows.mean(axis=(2, 4)).astype(a.dtype)


def _maxpool2d(a: np.ndarray, pool: int) -> np.ndarray:
    c, h, w = a.shape
    return a.reshape(c, h // pool, pool, w // pool, pool).max(axis=(2, 4))


def _split_even_odd(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return a[:, 0::2], a[:, 1::2]


def _exp(a: np.ndarray) -> np.ndarray:
    return np.exp(a.astype(np.float64)).astype(a.dtype)


def _matmul_t(lhs_t: np.ndarray, rhs: np.ndarray, **_: Any) -> np.ndarray:
    # matrix_multiplication_torch.py: torch.matmul(lhs, rhs) with the kernel given lhs.T; result dtype = lhsT.dtype.
    return (lhs_t.astype(np.float64).T @ rhs.astype(np.float64)).astype(lhs_t.dtype)


def _mamba(delta: np.ndarray, u: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    # mamba_torch.py mamba_layer: deltaA = exp(delta * A), deltaB_u = delta * B * u, a sequential scan
    # s[t] = deltaA[t] * s[t-1] + deltaB_u[t] over seq_len, then sum over state_size of C * s.
    d, uu, aa, bb, cc = (x.astype(np.float64) for x in (delta, u, a, b, c))
    delta_a = np.exp(d[:, :, None, :] * aa[None, :, :, None])
    delta_bu = d[:, :, None, :] * bb[:, None, :, :] * uu[:, :, None, :]
    scan = np.empty_like(delta_a)
    prev = np.zeros(delta_a.shape[:-1])
    for t in range(delta_a.shape[-1]):
        prev = delta_a[..., t] * prev + delta_bu[..., t]
        scan[..., t] = prev
    return (cc[:, None, :, :] * scan).sum(axis=-2).astype(delta.dtype)


# MX (mxfp-matmul deep dive). Facts of the docs' mx_cpu_utils.py, written anew here: packed data is uint32 holding 4
# fp8 bytes (value q in byte q) or uint8 holding 2 fp4 values (low nibble first); scales are contiguous uint8
# (K // 8, F) bytes 2**(s - 127), one per 8 partitions x 1 packed element; nc_matmul_mx contracts over K and the 4
# values of each packed element. quantize_mx's scale is the API reference's (twice the OCP sample algorithm's).
MX_ELEMENT = {
    "float8_e4m3fn_x4": ml_dtypes.float8_e4m3fn, "float8_e5m2_x4": ml_dtypes.float8_e5m2,
    "float4_e2m1fn_x4": ml_dtypes.float4_e2m1fn,
}  # fmt: skip


def _mx_unpack(data: np.ndarray, dtype: str) -> np.ndarray:
    """Packed (K, W) uint words -> (K, F, 4) float64 element values."""
    raw = np.ascontiguousarray(data).view(np.uint8)
    if dtype == "float4_e2m1fn_x4":
        raw = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(raw.shape[0], -1)
    return raw.view(MX_ELEMENT[dtype]).astype(np.float64).reshape(raw.shape[0], -1, 4)


def _mx_real(data: np.ndarray, scale: np.ndarray, dtype: str) -> np.ndarray:
    return _mx_unpack(data, dtype) * np.repeat(2.0 ** (scale.astype(np.float64) - 127), 8, axis=0)[:, :, None]


def _mx_quantize(x: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """nisa.quantize_mx per the API reference: X = 2**(floor(log2(amax)) - (E_max - 1)) per 8x4 group."""
    k, f = x.shape
    e_max = ml_dtypes.finfo(MX_ELEMENT[dtype]).maxexp - 1
    groups = np.abs(x.astype(np.float64)).reshape(k // 8, 8, f // 4, 4).max(axis=(1, 3))
    exps = np.array([math.frexp(a)[1] - 1 for a in groups.ravel()]).reshape(groups.shape)
    scale = np.where(groups == 0, 0, np.clip(exps - (e_max - 1) + 127, 0, 254)).astype(np.uint8)
    factor = np.repeat(np.repeat(2.0 ** (scale.astype(np.float64) - 127), 8, axis=0), 4, axis=1)
    q = (x.astype(np.float64) / factor).astype(MX_ELEMENT[dtype])
    return np.ascontiguousarray(q).view(np.uint32), scale


def _mx_matmul(st, st_scale, mv, mv_scale, dtypes: tuple[str, str]) -> np.ndarray:
    got = np.einsum("kiq,kjq->ij", _mx_real(st, st_scale, dtypes[0]), _mx_real(mv, mv_scale, dtypes[1]))
    return got.astype(F32).astype(BF16)


def _mx_offline(st, st_scale, mv, mv_scale, mx_dtype) -> np.ndarray:
    return _mx_matmul(st, st_scale, mv, mv_scale, (str(mx_dtype), str(mx_dtype)))


def _mx_on_device(st, st_scale, mv_bf16, st_dtype, mv_dtype) -> np.ndarray:
    mv, mv_scale = _mx_quantize(mv_bf16, str(mv_dtype))
    return _mx_matmul(st, st_scale, mv, mv_scale, (str(st_dtype), str(mv_dtype)))


def _mx_strided(st, mv, mx_dtype, use_tensor_copy=True) -> np.ndarray:
    # mx_toplevel.py's golden: the plain product of the unquantized inputs (exact here: the inputs are MX values)
    return (st.astype(np.float64).T @ mv.astype(np.float64)).astype(F32).astype(BF16)


def _mx_values(rng: np.random.Generator, shape: tuple[int, int], dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Packed MX data and contiguous scales whose dequantized values quantize back to themselves (every 8x4 group
    has one value of the element type's largest binade, as the docs' generate_stabilized_mx_data does) and scales
    that keep the values in (-1, 1), the docs' val_range."""
    element = MX_ELEMENT[dtype]
    top = 2.0 ** (ml_dtypes.finfo(element).maxexp - 1)
    highest = int(np.log2(1.0 / float(ml_dtypes.finfo(element).max))) + 127
    k, f = shape
    values = rng.uniform(-1, 1, (k, 4 * f)) * top
    values.reshape(k // 8, 8, f, 4)[:, 0, :, 0] = top * rng.uniform(1.0, 1.5, (k // 8, f))
    codes = values.astype(element).view(np.uint8)
    if dtype == "float4_e2m1fn_x4":
        data = (codes[:, 0::2] & 0xF) | (codes[:, 1::2] << 4)
    else:
        data = np.ascontiguousarray(codes).view(np.uint32)
    return data, rng.integers(highest - 10, highest + 1, (k // 8, f)).astype(np.uint8)


def _mx_offline_inputs(dtype: str) -> Inputs:
    def make(rng: np.random.Generator):
        st, st_scale = _mx_values(rng, (128, 128), dtype)
        mv, mv_scale = _mx_values(rng, (128, 512), dtype)
        return (st, st_scale, mv, mv_scale, dtype), {}

    return make


def _mx_on_device_inputs(st_dtype: str, mv_dtype: str) -> Inputs:
    def make(rng: np.random.Generator):
        st, st_scale = _mx_values(rng, (128, 128), st_dtype)
        mv, mv_scale = _mx_values(rng, (128, 512), mv_dtype)
        mv_bf16 = (_mx_real(mv, mv_scale, mv_dtype).reshape(128, 2048)).astype(BF16)
        return (st, st_scale, mv_bf16, st_dtype, mv_dtype), {}

    return make


def _mx_strided_inputs(dtype: str, use_tensor_copy: bool) -> Inputs:
    # Unquantized [K * 4 = 512, M] and [512, N] bf16 tensors made of MX values, in the layout the kernel strides
    # into the interleaved MX layout (rows 128 t + p of the input become the 4 values of partition p).
    def make(rng: np.random.Generator):
        out = []
        for f in (128, 512):
            data, scale = _mx_values(rng, (128, f), dtype)
            real = _mx_real(data, scale, dtype)  # (128, f, 4): value q of partition p -> input row 128 q + p
            out.append(np.transpose(real, (2, 0, 1)).reshape(512, f).astype(BF16))
        return (*out, dtype, use_tensor_copy), {}

    return make


# ----------------------------------------------------------------------------------------------------------------
# the cases
# ----------------------------------------------------------------------------------------------------------------

Inputs = Callable[[np.random.Generator], "tuple[tuple[Any, ...], dict[str, Any]]"]


@dataclass(frozen=True)
class Case:
    """One (file, kernel) of the docs examples.

    ``inputs(rng)`` gives the kernel's ``(args, kwargs)``; ``reference(*args, **kwargs)`` the expected output(s);
    ``more_inputs`` are further input sets run through the same (cached) kernel and reference.
    ``tol`` is ``None`` for an exact comparison, else ``(rtol, atol)``. ``error`` = ``(exception type, regex)`` when
    the listing demonstrates a compile error instead. ``blocked`` = ``(exception type, reason)``: the precise
    current failure (-> strict xfail raising exactly that type).
    ``stubs`` are extra ``sys.modules`` entries the file imports (``{name: {attribute: value}}``).
    """

    file: str
    kernel: str
    shapes: str
    inputs: Inputs | None = None
    more_inputs: tuple[Inputs, ...] = ()
    reference: Callable[..., Any] | None = None
    tol: tuple[float, float] | None = None
    error: tuple[type[BaseException], str] | None = None
    blocked: tuple[type[BaseException], str] | None = None
    stubs: dict[str, dict[str, str]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # environment variables (the compile target) for the case

    @property
    def id(self) -> str:
        return f"{self.file}::{self.kernel}"


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, lo: float = 0.0, hi: float = 1.0):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def _pair(shape: tuple[int, ...], dtype: Any) -> Inputs:
    return lambda rng: ((_uniform(rng, shape, dtype, -4, 4), _uniform(rng, shape, dtype, -4, 4)), {})


def _matmul_inputs(k: int, m: int, n: int, **meta: int) -> Inputs:
    # torch.rand: uniform [0, 1) in bfloat16.
    return lambda rng: ((_uniform(rng, (k, m), BF16), _uniform(rng, (k, n), BF16)), dict(meta))


def _mamba_inputs(batch: int, channels: int, seq_len: int, state: int) -> Inputs:
    def make(rng: np.random.Generator):
        # The docs run all-ones tensors (A = -1); random ones in the same ranges check every index. delta * A in
        # (-1, 0] keeps exp(delta * A) a decay, so the scan stays bounded as in the model.
        return (
            (
                _uniform(rng, (batch, channels, seq_len), F32),
                _uniform(rng, (batch, channels, seq_len), F32, -1, 1),
                _uniform(rng, (channels, state), F32, -1, 0),
                _uniform(rng, (batch, state, seq_len), F32, -1, 1),
                _uniform(rng, (batch, state, seq_len), F32, -1, 1),
            ),
            {},
        )

    return make


MATMUL = "matrix_multiplication/matrix_multiplication_nki_kernels.py"
MAMBA = "fused_mamba/mamba_nki_kernels.py"
# bf16 matmuls: the products accumulate in fp32 PSUM (relative noise ~K * 2^-24) and the result is rounded to the
# bf16 output dtype once (8 significant bits: relative error <= 2^-8 = 3.9e-3; measured max 3.9e-3 at K = 1024).
# The float64 reference is rounded to bf16 as well, so the two can sit one bf16 ulp apart (<= 2^-7 = 7.8e-3
# relative). The docs' torch check, allclose(atol=1e-4, rtol=1e-2), covers that and is kept.
BF16_MATMUL_TOL = (1e-2, 1e-4)
# Mamba is fp32 end to end: an fp32 exp, a 1024-step fp32 recurrence (one rounding per step, damped by the decay)
# and a sum over 16 states of C * scan whose terms of both signs cancel, so an absolute term is needed. A numpy fp32
# emulation of the kernel's own order against the float64 reference, on these inputs: max abs error 2.9e-5 (outputs
# up to 11), max relative 1.2e-4 where |out| > 0.1. Held to 1e-3 relative + 1e-4 absolute (~3x margin); the docs'
# torch check is allclose(atol=1e-2, rtol=1e-2).
MAMBA_TOL = (1e-3, 1e-4)
# exp in fp32 on the activation engine, rounded once to bf16: within half a bf16 ulp (2^-8 relative) of the
# float64 value rounded to bf16, i.e. at most one bf16 ulp (2^-7 relative) apart.
BF16_EXP_TOL = (2.0**-7, 0.0)
# MX matmuls: exact products, an fp32 sum (relative 2^-24 per add of a few hundred terms) rounded once to bf16; the
# reference rounds its exact sum the same way, so the two sit at most one bf16 ulp (2^-7 relative) apart. Sums that
# cancel to near zero carry the fp32 noise of their terms: an absolute 1e-3 covers it (results are ~0.5).
MX_TOL = (2.0**-7, 1e-3)
TRN3 = {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"}

CASES: list[Case] = [
    Case(
        "getting_started_baremetal.py",
        "nki_tensor_add_kernel",
        "a, b: float16[4, 3] (the docs' shape) and float16[128, 512] (a full partition tile)",
        inputs=_pair((4, 3), F16),
        # The kernel asserts shape[0] <= pmax and tiles nothing: a full partition tile too.
        more_inputs=(_pair((128, 512), F16),),
        reference=_add,
    ),
    Case(
        "simulate/nki_simulate_example.py",
        "add_kernel",
        "a, b: float32[128, 512] (the docs' shape); loading the file also runs its own top-level check",
        inputs=_pair((128, 512), F32),
        reference=_add,
    ),
    Case(
        "tensor_addition/tensor_addition_nki_kernels.py",
        "nki_tensor_add",
        "a, b: float16[256, 1024] (2 x 2 tiles of [128, 512]); the file sets NEURON_PLATFORM_TARGET_OVERRIDE=trn1",
        inputs=_pair((256, 1024), F16),
        reference=_add,
    ),
    Case(
        "transpose2d/transpose2d_nki_kernels.py",
        "tensor_transpose2D_kernel_",
        "int8[5, 12] = arange, shape2D (3, 4) (the docs' shapes)",
        inputs=lambda rng: ((np.arange(5 * 12, dtype=np.int8).reshape(5, 12), (3, 4)), {}),
        reference=_transpose2d,
    ),
    Case(
        "average_pool2d/average_pool2d_nki_kernels.py",
        "tensor_avgpool_kernel",
        "float16[2, 6, 6] = arange, pool 2 (the docs' shapes)",
        # arange values: the window sums (<= 4 * 71) and their quarters are exact in fp16; the docs compare exactly.
        inputs=lambda rng: ((np.arange(2 * 6 * 6, dtype=F16).reshape(2, 6, 6), 2), {}),
        reference=_avgpool2d,
    ),
    Case(
        "index-case-1.py",
        "tensor_split_kernel_",
        "bfloat16[4, 5] = arange (the docs' shape); two outputs [4, 3] and [4, 2]",
        inputs=lambda rng: ((np.arange(4 * 5).astype(BF16).reshape(4, 5),), {}),
        reference=_split_even_odd,
    ),
    Case(
        "index-case-3.py",
        "tensor_maxpool_kernel_",
        "bfloat16[2, 6, 6] = arange, pool 2 (the docs' shapes)",
        inputs=lambda rng: ((np.arange(2 * 6 * 6).astype(BF16).reshape(2, 6, 6), 2), {}),
        reference=_maxpool2d,
    ),
    Case(
        "layout-pass.py",
        "tensor_exp_kernel_",
        "bfloat16[128, 512] (the docs' shape), uniform in [-4, 4] instead of the docs' ones",
        inputs=lambda rng: ((_uniform(rng, (128, 512), BF16, -4, 4),), {}),
        reference=_exp,
        tol=BF16_EXP_TOL,
    ),
    Case(
        "layout-violation.py",
        "tensor_exp_kernel_",
        "bfloat16[256, 512] (the docs' shape): nl.load of 256 partitions must be rejected",
        inputs=lambda rng: ((np.ones((256, 512), BF16),), {}),
        error=(Exception, r"layout-violation\.py:\d+: error: Size of partition dimension 256 exceeds .* 128"),
    ),
    Case(
        "layout-loop.py",
        "tensor_exp_kernel_",
        "bfloat16[256, 512] (the docs' shape); `from torch_neuronx import nki_jit` is served by a stub = nki.jit; "
        "the listing stores to the undefined name i_f, so the error must name it",
        inputs=lambda rng: ((np.ones((256, 512), BF16),), {}),
        error=(Exception, r"\bi_f\b"),
        stubs={"torch_neuronx": {"nki_jit": "jit"}},
    ),
    Case(
        "layout-dynamic-loop.py",
        "tensor_exp_kernel_",
        "none: the listing is not valid Python (line 23, an unclosed '(' of nl.load)",
        error=(SyntaxError, r"was never closed"),
    ),
    Case(
        MATMUL,
        "nki_matmul_basic_",
        "lhsT bfloat16[128, 64], rhs bfloat16[128, 512] (the docs' shapes; the kernel asserts them)",
        inputs=_matmul_inputs(128, 64, 512),
        reference=_matmul_t,
        tol=BF16_MATMUL_TOL,
    ),
    # The docs run the tiled stages on lhs [4096, 1024] x rhs [1024, 2048] (1024 tile matmuls each). Kept: K = 1024
    # and N = 2048; M is 512 (2 blocks of the 256-row blocking of block_free_dimension): 128 tile matmuls each.
    *(
        Case(
            MATMUL,
            kernel,
            "lhsT bfloat16[1024, 512], rhs bfloat16[1024, 2048]",
            inputs=_matmul_inputs(1024, 512, 2048),
            reference=_matmul_t,
            tol=BF16_MATMUL_TOL,
        )
        for kernel in ("nki_matmul_tiled_", "nki_matmul_hoist_load_", "nki_matmul_block_free_dimension_")
    ),
    # With its default blocking (16 x 2 x 8 tiles) the kernel needs M % 2048, N % 1024 and K % 1024: the smallest
    # such problem, one block per dimension (256 tile matmuls), instead of the docs' [4096, 1024] x [1024, 2048].
    Case(
        MATMUL,
        "nki_matmul_fully_optimized_",
        "lhsT bfloat16[1024, 2048], rhs bfloat16[1024, 1024], default TILES_IN_BLOCK_M/N/K = 16/2/8",
        inputs=_matmul_inputs(1024, 2048, 1024),
        reference=_matmul_t,
        tol=BF16_MATMUL_TOL,
    ),
    # mamba_torch.py runs batch 1, channels 256, seq_len 512, state_size 16 (mamba_nki_kernels.py's __main__ seq_len
    # 2048). seq_len 1024 keeps two 512-column tiles, so mamba_v3's scan carries its state across a tile boundary.
    *(
        Case(
            MAMBA,
            kernel,
            "delta, u float32[1, 256, 1024], A float32[256, 16], B, C float32[1, 16, 1024]",
            inputs=_mamba_inputs(1, 256, 1024, 16),
            reference=_mamba,
            tol=MAMBA_TOL,
        )
        for kernel in ("mamba_v1", "mamba_v2", "mamba_v3")
    ),
    # The mxfp-matmul deep dive (trn3: nc_matmul_mx / quantize_mx are gen4 instructions). Its own check is
    # allclose(rtol=5e-2, atol=5e-2) against mx_cpu_utils' goldens; here the references are exact sums rounded
    # to fp32 PSUM and then to the bf16 result, so the kernel's output can differ from them by one bf16 rounding.
    Case(
        f"{MXFP}/mx_kernels.py",
        "kernel_offline_quantized_mx_matmul",
        "packed stationary [128, 128] and moving [128, 512] with contiguous uint8 scales (the docs' shapes), "
        "float8_e5m2_x4 and float4_e2m1fn_x4 (mx_toplevel.py's two runs) and float8_e4m3fn_x4",
        inputs=_mx_offline_inputs("float8_e5m2_x4"),
        more_inputs=(_mx_offline_inputs("float4_e2m1fn_x4"), _mx_offline_inputs("float8_e4m3fn_x4")),
        reference=_mx_offline,
        tol=MX_TOL,
        env=TRN3,
    ),
    Case(
        f"{MXFP}/mx_kernels.py",
        "kernel_on_device_quantize_matmul_mx",
        "packed stationary [128, 128] + scales, bf16 moving [128, 2048] quantized on device (the docs' shapes): "
        "fp4 x fp8_e5m2 and fp8_e5m2 x fp8_e5m2 (mx_toplevel.py's two runs)",
        inputs=_mx_on_device_inputs("float4_e2m1fn_x4", "float8_e5m2_x4"),
        more_inputs=(_mx_on_device_inputs("float8_e5m2_x4", "float8_e5m2_x4"),),
        reference=_mx_on_device,
        tol=MX_TOL,
        env=TRN3,
    ),
    *(
        Case(
            f"{MXFP}/mx_kernels.py",
            kernel,
            "bf16 stationary [512, 128] and moving [512, 512] made of MX values (the docs' shapes), float8_e5m2_x4 "
            "through tensor_copy and through DMA (mx_toplevel.py's runs), and float8_e4m3fn_x4",
            inputs=_mx_strided_inputs("float8_e5m2_x4", True),
            more_inputs=(_mx_strided_inputs("float8_e5m2_x4", False), _mx_strided_inputs("float8_e4m3fn_x4", True)),
            reference=_mx_strided,
            tol=MX_TOL,
            env=TRN3,  # the kernel asserts its inputs' buffer == nl.hbm, which kernel inputs report
        )
        for kernel in ("kernel_copy_strided_quantize_matmul_mx", "kernel_copy_strided_quantize_matmul_mx_packed_scale")
    ),
]


@dataclass(frozen=True)
class Script:
    """A docs file meant to run as a program; ``stdout(...)`` is what it must print (``None``: anything)."""

    file: str
    stdout: Callable[[], str] | None
    blocked: tuple[type[BaseException], str] | None = None

    @property
    def id(self) -> str:
        return f"{self.file}::__main__"


SCRIPTS: list[Script] = [
    # Its __main__ adds two float16[4, 3] ones and prints the result.
    Script(
        "getting_started_baremetal.py",
        stdout=lambda: f"{np.full((4, 3), 2, dtype=F16)}\n",
    ),
    # Runs add_kernel on float32[128, 512] at module level and asserts allclose(result, a + b) itself; prints nothing.
    Script(
        "simulate/nki_simulate_example.py",
        stdout=lambda: "",
    ),
]

# Files of the examples folder that are not run: they need a framework (torch_xla / jax devices). Their shapes,
# dtypes and reference computations are used above.
FRAMEWORK_FILES = re.compile(r"(_torch|_jax)\.py$|^getting_started_(torch|jax)\.py$")


def summary() -> str:
    """The table of cases: file::kernel, status (``pass`` or ``xfail:`` the current failure) and shapes."""
    rows = [(c.id, c.blocked, c.shapes) for c in CASES] + [(s.id, s.blocked, "the file's own") for s in SCRIPTS]
    passing = sum(blocked is None for _, blocked, _ in rows)
    lines = [f"{passing} of {len(rows)} docs example cases pass"]
    for name, blocked, shapes in rows:
        status = "pass" if blocked is None else f"xfail ({blocked[0].__name__}): {blocked[1]}"
        lines += [f"  {name}", f"      {status}", f"      shapes: {shapes}"]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------
# running them
# ----------------------------------------------------------------------------------------------------------------

pytestmark = pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"{EXAMPLES} (the NKI docs examples) does not exist")


def _param(item: Case | Script) -> Any:
    marks = []
    if item.blocked is not None:
        raises, reason = item.blocked
        marks.append(pytest.mark.xfail(strict=True, raises=raises, reason=reason))
    return pytest.param(item, id=item.id, marks=marks)


@pytest.fixture(autouse=True)
def _isolated_process_state():
    """The examples change process state: tensor_addition sets NEURON_PLATFORM_TARGET_OVERRIDE (kept for its own
    test, then restored) and ``import nki`` needs the alias; ``sys.modules`` stubs are removed afterwards."""
    import nkic

    nkic.install_nki_alias()
    environ = dict(os.environ)
    modules = set(sys.modules)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)
        for name in set(sys.modules) - modules:
            if name.startswith("nki_docs_example_") or name in ("torch_neuronx", *DEEP_DIVE_HELPERS):
                del sys.modules[name]


def _install_stubs(stubs: dict[str, dict[str, str]]) -> None:
    import nki

    for name, attributes in stubs.items():
        stub = types.ModuleType(name)
        for attribute, nki_name in attributes.items():
            setattr(stub, attribute, getattr(nki, nki_name))
        sys.modules[name] = stub


def load_example(file: str) -> types.ModuleType:
    """Import ``EXAMPLES/file`` by path under a private module name (its ``__main__`` block does not run). Its
    folder is on ``sys.path`` while it loads, for the deep dives' ``from mx_kernel_utils import ...``."""
    path = (EXAMPLES / file).resolve()
    name = "nki_docs_example_" + re.sub(r"\W", "_", file.removesuffix(".py"))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def _compare(case: Case, got: Any, expected: Any) -> None:
    got, expected = _as_tuple(got), _as_tuple(expected)
    assert len(got) == len(expected), f"{len(got)} outputs, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        g = np.asarray(g)
        got_desc, want_desc = f"{g.dtype}{list(g.shape)}", f"{e.dtype}{list(e.shape)}"
        assert got_desc == want_desc, f"output {i}: {got_desc}, expected {want_desc}"
        # Compare in float64 (bfloat16 arrays do not take part in numpy's testing helpers directly).
        g64, e64 = g.astype(np.float64), e.astype(np.float64)
        if case.tol is None:
            np.testing.assert_array_equal(g64, e64, err_msg=f"output {i}")
        else:
            rtol, atol = case.tol
            np.testing.assert_allclose(g64, e64, rtol=rtol, atol=atol, err_msg=f"output {i}")


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_docs_example_kernel(case: Case) -> None:
    import nki

    _install_stubs(case.stubs)
    os.environ.update(case.env)
    if case.error is not None:
        # Not pytest.raises(match=...): an exception of the wrong message must propagate as itself (the xfail's
        # ``raises`` type), not as pytest's AssertionError.
        exc, pattern = case.error
        try:
            module = load_example(case.file)
            args, kwargs = case.inputs(np.random.default_rng(SEED)) if case.inputs else ((), {})
            nki.simulate(getattr(module, case.kernel))(*args, **kwargs)
        except exc as e:
            if not re.search(pattern, str(e)):
                raise
            return
        pytest.fail(f"{case.id}: expected {exc.__name__} matching {pattern!r}, nothing was raised")

    module = load_example(case.file)
    kernel = getattr(module, case.kernel)
    assert case.inputs is not None and case.reference is not None
    for seed, make_inputs in enumerate((case.inputs, *case.more_inputs), start=SEED):
        args, kwargs = make_inputs(np.random.default_rng(seed))
        _compare(case, nki.simulate(kernel)(*args, **kwargs), case.reference(*args, **kwargs))


@pytest.mark.parametrize("script", [_param(s) for s in SCRIPTS])
def test_docs_example_script(script: Script) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(EXAMPLES / script.file), run_name="__main__")
    if script.stdout is not None:
        assert out.getvalue() == script.stdout()


# Deep-dive modules that are not kernels: helpers the kernel files import (mx_kernel_utils, run through the cases)
# or host-side golden code (mx_cpu_utils; its facts are in the references above), and mx_toplevel.py, the torch_xla
# driver whose shapes and dtypes the cases use.
DEEP_DIVE_HELPERS = ("mx_kernel_utils", "mx_cpu_utils", "mx_toplevel")


def test_every_docs_example_is_covered() -> None:
    """Each .py of the examples folder is a case, a script or a framework file, and each case names a real file;
    each module of the MX deep dive is a case or a named helper."""
    deep = {f"{MXFP}/{p.name}" for p in (EXAMPLES / MXFP).glob("*.py")}
    assert {f"{MXFP}/{h}.py" for h in DEEP_DIVE_HELPERS} | {c.file for c in CASES if c.file.startswith(MXFP)} == deep
    files = {p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*.py")} | deep
    covered = {c.file for c in CASES} | {s.file for s in SCRIPTS} | {f"{MXFP}/{h}.py" for h in DEEP_DIVE_HELPERS}
    framework = {f for f in files if FRAMEWORK_FILES.search(Path(f).name)}
    assert covered <= files, sorted(covered - files)
    assert files - framework == covered, sorted(files - framework - covered)


if __name__ == "__main__":
    print(summary())
