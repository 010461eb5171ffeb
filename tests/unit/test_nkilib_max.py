"""nki-library's ``core/max/cascaded_max.py``, unmodified: the global max of each row and its index.

Reference: ``cascaded_max_torch.py`` (``torch.max(x, dim=-1, keepdim=True)``, indices as int32), translated to
numpy. The inputs have no ties (the kernel's masked max over stages would pick the last tied stage; torch the first).
For bfloat16 inputs the kernel carries indices in the input dtype (``ind_buf_float``, ``ind_shifted``), exact only
up to 256, so the bf16 case uses a 256-wide vocabulary.

The kernel transposes its per-partition results with ``nc_matmul(..., is_transpose=True)`` (cascaded_max.py:277).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest


RNG = np.random.default_rng(17)


@pytest.mark.parametrize("shape,dtype,lnc", [
    ((1, 1, 4096), np.float32, 1),  # BxS = 1: one core, 32 stages of 128
    ((2, 3, 8192), np.float32, 2),  # LNC2: 3 rows per core, 42 stages
    ((4, 1000), np.float32, 2),  # a vocabulary not a multiple of the stage count (padded fold)
    ((1, 256), ml_dtypes.bfloat16, 1),
])  # fmt: skip
def test_cascaded_max(nkilib, shape, dtype, lnc: int) -> None:
    cascaded_max = nkilib("nkilib.core.max.cascaded_max").cascaded_max
    x = RNG.standard_normal(shape).astype(dtype)
    kernel = cascaded_max if lnc == 1 else cascaded_max[lnc]
    values, indices = kernel(x)
    assert values.shape == (*shape[:-1], 1) and indices.shape == (*shape[:-1], 1)
    xf = x.astype(np.float32)
    np.testing.assert_array_equal(values.astype(np.float32)[..., 0], xf.max(axis=-1))
    np.testing.assert_array_equal(indices[..., 0].astype(np.int64), xf.argmax(axis=-1))
