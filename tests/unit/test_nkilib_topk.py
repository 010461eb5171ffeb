"""nki-library kernels built on the top-k family, unmodified, traced, compiled and simulated by nkic.

* ``experimental/benchmark/find_nonzero_indices_with_count.py`` (``nisa.nonzero_with_count``), checked against the
  output format its docstring gives (nonzero indices, ``-1`` padding, count last).
* ``core/topk/rotational_topk.py``'s ``topk`` entry point; for k <= 8 it runs one stage: the scanning path
  of ``max8`` + ``nc_match_replace8`` (k = 8) or ``max8`` + ``nc_find_index8`` (k < 8). Checked against a numpy
  translation of ``core/topk/torch_ref.py`` (``torch.topk`` values, descending) and, as that reference notes indices
  may differ on ties, by gathering the input at the returned indices. For k > 8 it runs rotation stages whose
  rotation matrices are ``nl.shared_constant`` tensors.

The corpus is loaded by path by the ``nkilib`` fixture (``conftest.py``); every test is skipped when it is absent.
"""

from __future__ import annotations

import contextlib
import io

import ml_dtypes
import numpy as np
import pytest

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("length,density", [(300, 0.2), (64, 0.0), (512, 1.0)])
def test_find_nonzero_indices_with_count(nkilib, dtype, length: int, density: float) -> None:
    kernel = nkilib("nkilib.experimental.benchmark.find_nonzero_indices_with_count").find_nonzero_indices_with_count
    x = (RNG.random((1, length)) < density).astype(dtype) * RNG.integers(1, 50, (1, length)).astype(dtype)
    got = kernel(x)
    hits = np.flatnonzero(x[0])
    want = np.concatenate([hits, np.full(length - len(hits), -1), [len(hits)]]).astype(np.int32)[None, :]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def ref_topk(x: np.ndarray, k: int) -> np.ndarray:
    """``torch.topk(x, k, dim=-1, largest=True, sorted=True).values`` (core/topk/torch_ref.py), in fp32."""
    return -np.sort(-x.astype(np.float32), axis=-1)[..., :k]


@pytest.mark.parametrize("shape,k,lnc,sort,dtype", [
    ((1, 16, 2048), 8, 1, True, np.float32),  # max8 + nc_match_replace8 (in place, with dst_idx)
    ((1, 16, 2048), 5, 1, True, np.float32),  # max8 + nc_find_index8 for the remainder
    ((1, 16, 2048), 8, 1, False, ml_dtypes.bfloat16),
    ((2, 64, 4096), 8, 1, True, np.float32),
    ((1, 8, 2048), 6, 2, True, np.float32),  # two programs (LNC2)
    ((1, 128, 1000), 3, 1, True, ml_dtypes.bfloat16),
])  # fmt: skip
def test_rotational_topk_single_stage(nkilib, shape, k: int, lnc: int, sort: bool, dtype) -> None:
    topk = nkilib("nkilib.core.topk.rotational_topk").topk
    x = RNG.standard_normal(shape).astype(dtype)
    with contextlib.redirect_stdout(io.StringIO()):  # the kernel prints its strategy table
        values, indices = topk[lnc](x, k, sorted_flag=sort)
    got = values.astype(np.float32)
    if not sort:
        got = -np.sort(-got, axis=-1)
    np.testing.assert_array_equal(got, ref_topk(x, k))
    gathered = np.take_along_axis(x, indices.astype(np.int64), axis=-1)
    np.testing.assert_array_equal(gathered.astype(np.float32), values.astype(np.float32))


@pytest.mark.parametrize("shape,k,lnc,sort,dtype", [
    ((2, 64, 4096), 32, 1, False, np.float32),  # one stage, four rounds of max8 + nc_match_replace8
    ((1, 128, 1000), 16, 1, True, ml_dtypes.bfloat16),
    ((1, 128, 1000), 12, 1, True, np.float32),  # k padded to 16, the output cut back to 12
    ((1, 128, 2048), 20, 1, True, np.float32),  # k padded to 24
])  # fmt: skip
def test_rotational_topk_k_above_8_in_one_stage(nkilib, shape, k: int, lnc: int, sort: bool, dtype) -> None:
    """k > 8 where the strategy keeps one stage: max8 rounds, each replacing the 8 found values before the next."""
    test_rotational_topk_single_stage(nkilib, shape, k, lnc, sort, dtype)


@pytest.mark.parametrize("shape,k,lnc", [((1, 16, 2048), 16, 1), ((1, 16, 4096), 32, 1), ((2, 8, 2048), 12, 2)])
def test_rotational_topk_multi_stage(nkilib, shape, k: int, lnc: int) -> None:
    """k > 8: the rotation stages, whose rotation matrices come from ``nl.shared_constant`` (NEFF constants)."""
    topk = nkilib("nkilib.core.topk.rotational_topk").topk
    x = RNG.standard_normal(shape).astype(np.float32)
    with contextlib.redirect_stdout(io.StringIO()):
        values, indices = topk[lnc](x, k, sorted_flag=True)
    np.testing.assert_array_equal(values, ref_topk(x, k))
    np.testing.assert_array_equal(np.take_along_axis(x, indices.astype(np.int64), axis=-1), values)
