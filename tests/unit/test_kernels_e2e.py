"""Every bundled kernel end to end (trace -> penguin -> bir -> ISA -> NEFF -> simulator) against numpy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nkic.api.execute import simulate
from nkic.kernels.matmul import matmul
from nkic.kernels.rmsnorm import rmsnorm
from nkic.kernels.softmax import softmax
from nkic.kernels.tensor_add import tensor_add, tensor_add_spmd

RNG = np.random.default_rng(1234)


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def softmax_ref(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def rmsnorm_ref(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * w.astype(np.float64)


@pytest.mark.parametrize("shape", [(128, 512), (256, 1024)])
def test_tensor_add(shape: tuple[int, int]) -> None:
    a = RNG.standard_normal(shape, dtype=np.float32)
    b = RNG.standard_normal(shape, dtype=np.float32)
    out = simulate(tensor_add)(a, b)
    assert out.dtype == np.float32 and out.shape == shape
    np.testing.assert_array_equal(out, a + b)  # one fp32 add per element: exact


def test_tensor_add_grid_of_two_programs() -> None:
    a = RNG.standard_normal((256, 512), dtype=np.float32)
    b = RNG.standard_normal((256, 512), dtype=np.float32)
    out = simulate(tensor_add_spmd[2])(a, b)
    # each program wrote half of the one shared_hbm output
    np.testing.assert_array_equal(out, a + b)


@pytest.mark.parametrize("k,m,n", [(256, 128, 512), (384, 256, 1024)])
def test_matmul_accumulates_over_k_in_psum(k: int, m: int, n: int) -> None:
    lhsT = RNG.standard_normal((k, m), dtype=np.float32)
    rhs = RNG.standard_normal((k, n), dtype=np.float32)
    out = simulate(matmul)(lhsT, rhs)
    assert rel_err(out, lhsT.astype(np.float64).T @ rhs) < 1e-5


@pytest.mark.parametrize("k,m,n", [(256, 1024, 2048), (384, 384, 1536)])
def test_blocked_matmul_bf16_several_blocks(k: int, m: int, n: int) -> None:
    """Two N blocks and two M blocks (operands kept in SBUF across them), and blocks that shrink to divide M and N."""
    lhsT = RNG.standard_normal((k, m)).astype(ml_dtypes.bfloat16)
    rhs = RNG.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    out = simulate(matmul)(lhsT, rhs)
    # exact bf16 inputs, fp32 PSUM accumulation, one final rounding to bf16 (2^-8 relative)
    assert rel_err(out, lhsT.astype(np.float64).T @ rhs.astype(np.float64)) < 2**-7


def test_matmul_bf16_inputs() -> None:
    lhsT = RNG.standard_normal((256, 128)).astype(ml_dtypes.bfloat16)
    rhs = RNG.standard_normal((256, 512)).astype(ml_dtypes.bfloat16)
    out = simulate(matmul)(lhsT, rhs)
    assert out.dtype == ml_dtypes.bfloat16
    # inputs are exact in bf16 and PSUM accumulates in fp32; only the final cast to bf16 rounds (2^-8 relative)
    assert rel_err(out, lhsT.astype(np.float64).T @ rhs.astype(np.float64)) < 2**-7


@pytest.mark.parametrize("rows,cols", [(128, 512), (256, 1000)])
def test_softmax(rows: int, cols: int) -> None:
    x = RNG.standard_normal((rows, cols), dtype=np.float32) * 4
    out = simulate(softmax)(x)
    assert rel_err(out, softmax_ref(x)) < 1e-5
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)


def test_rmsnorm_bf16() -> None:
    x = RNG.standard_normal((256, 512)).astype(ml_dtypes.bfloat16)
    w = RNG.standard_normal((512,)).astype(ml_dtypes.bfloat16)
    out = simulate(rmsnorm)(x, w)
    assert out.dtype == ml_dtypes.bfloat16
    # fp32 statistics, then two roundings to bf16 (x*rstd, then *w): each at most 2^-9 relative.
    assert rel_err(out, rmsnorm_ref(x, w)) < 2**-7


def test_compile_time_constant_changes_the_result() -> None:
    x = RNG.standard_normal((128, 256)).astype(ml_dtypes.bfloat16)
    w = np.ones((256,), dtype=ml_dtypes.bfloat16)
    small = simulate(rmsnorm)(x, w, eps=1e-6)
    large = simulate(rmsnorm)(x, w, eps=100.0)
    assert rel_err(large, rmsnorm_ref(x, w, eps=100.0)) < 2**-7
    assert rel_err(small, large) > 0.5
