"""nki-library's ``core/cumsum/cumsum.py``, unmodified, traced, compiled and simulated by nkic.

The kernel scans each row with ``tensor_tensor_scan`` (``result[i] = 1 * result[i - 1] + x[i]``) over free-dim
tiles of 2048, carrying the last column of one tile into the next as the scan's initial value; partition tiles of 128
rows. Reference: ``core/cumsum/cumsum_torch.py`` (``torch.cumsum(x, dim=-1)``), translated to numpy.

Numerics. The scan accumulates in fp32 and rounds each output to the input dtype. For fp32 inputs that is exactly
numpy's sequential fp32 ``cumsum``. For 16-bit inputs the carry into the next 2048-column tile is the *rounded* last
output (the kernel copies it back out of the bf16 result tile), so the emulation rounds there too; every element then
matches bit for bit, and the plain float64 cumsum is within the dtype's rounding of the running sum.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

RNG = np.random.default_rng(11)
F_TILE = 2048  # the kernel's free-dim tile


def emulated_cumsum(x: np.ndarray) -> np.ndarray:
    """The kernel's arithmetic: per 2048-column tile an fp32 running sum from the carried value, each output rounded
    to x.dtype, the carry being the rounded last output."""
    rows = x.reshape(-1, x.shape[-1]).astype(np.float32)
    out = np.empty(rows.shape, x.dtype)
    carry = np.zeros(len(rows), np.float32)
    for start in range(0, rows.shape[1], F_TILE):
        acc = carry.copy()
        for j in range(start, min(start + F_TILE, rows.shape[1])):
            acc = (acc + rows[:, j]).astype(np.float32)
            out[:, j] = acc.astype(x.dtype)
        carry = out[:, j].astype(np.float32)
    return out.reshape(x.shape)


@pytest.mark.parametrize("shape,dtype", [
    ((4, 64), np.float32),  # the smallest: one partition tile, one free tile
    ((130, 2100), np.float32),  # two partition tiles (128 + 2), two free tiles (2048 + 52): the carry
    ((3, 5, 100), np.float32),  # 3-D [B, S, H]
    ((2, 3, 2100), ml_dtypes.bfloat16),  # 16-bit: the carry is the rounded last output
    ((6, 300), np.float16),
])  # fmt: skip
def test_cumsum(nkilib, shape: tuple[int, ...], dtype: type) -> None:
    cumsum = nkilib("nkilib.core.cumsum.cumsum").cumsum
    x = RNG.standard_normal(shape).astype(dtype)
    got = cumsum(x)
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(got, emulated_cumsum(x))
    exact = np.cumsum(x.astype(np.float64), axis=-1)
    if dtype is np.float32:
        np.testing.assert_array_equal(got, np.cumsum(x, axis=-1))  # numpy's fp32 cumsum is the same sequential sum
    else:
        ulp = 2.0 ** -(8 if dtype is ml_dtypes.bfloat16 else 11)  # half an ulp, relative, per rounding
        bound = ulp * np.cumsum(np.abs(x.astype(np.float64)), axis=-1) * 2 + 1e-6  # a rounding per carried tile
        assert np.all(np.abs(got.astype(np.float64) - exact) <= bound)


def test_cumsum_axis(nkilib) -> None:
    """``axis=1`` of a 2-D input is its last dim; any other axis is the kernel's own assertion."""
    cumsum = nkilib("nkilib.core.cumsum.cumsum").cumsum
    x = RNG.standard_normal((4, 32)).astype(np.float32)
    np.testing.assert_array_equal(cumsum(x, axis=1), np.cumsum(x, axis=1))
    with pytest.raises(Exception, match="Only support cumsum over last dim"):
        cumsum(x, axis=0)
