"""nki-library kernels of several small families, unmodified, traced, compiled and simulated by nkic, each against a
numpy translation of its ``*_torch.py`` reference.

* ``experimental/collectives/topk_reduce.py``: the MoE top-K reduction of a sparse all_to_all_v buffer. It gathers
  rows by a ``vector_offset`` index (``nc_find_index8`` of the packed token ids) and adds the K rows with
  ``dma_compute``'s gather read-modify-write.
* ``core/subkernels/find_nonzero_indices.py`` (LNC2): columns spread to the GpSimd cores' partitions, transposed on
  the PE, ``nonzero_with_count``, odd cores' rows moved by ``nc_stream_shuffle``, and each column's indices written at
  a running ``scalar_offset``; chunked T, and a run-time first column (``col_start_id``, a ``scalar_offset``).

The corpus is loaded by path by the ``nkilib`` fixture (``conftest.py``); every test is skipped when it is absent.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

RNG = np.random.default_rng(11)


# -- topk_reduce ----------------------------------------------------------------------------------------------
def ref_topk_reduce(x: np.ndarray, T: int) -> np.ndarray:
    """``topk_reduce_torch_ref``: the int32 token index packed in the last two 16-bit columns, the rows of each
    token summed (torch sums bf16/fp16 in fp32 and rounds once)."""
    H = x.shape[1] - 2
    idx = np.ascontiguousarray(x[:, H:]).view(np.int32)[:, 0]
    out = np.zeros((T, H), np.float32)
    for t in range(T):
        out[t] = x[idx == t, :H].astype(np.float32).sum(axis=0)
    return out.astype(x.dtype)


def topk_reduce_input(T: int, K: int, H: int, n_src: int, dtype) -> np.ndarray:
    """A (n_src * T, H + 2) buffer holding each token's K rows at random places, the rest padding (index -1)."""
    rows = n_src * T
    x = RNG.standard_normal((rows, H + 2)).astype(dtype)
    idx = np.full(rows, -1, np.int32)
    idx[RNG.permutation(rows)[: T * K]] = np.repeat(np.arange(T), K)
    x[:, H:] = idx.view(dtype).reshape(rows, 2)
    return x


@pytest.mark.parametrize("T,K,H,n_src,lnc,dtype", [
    (4, 2, 64, 2, 1, ml_dtypes.bfloat16),  # two rows: one dma_copy + one add, exact
    (8, 4, 128, 4, 2, np.float16),  # LNC2: each core reduces its half of H
    (16, 8, 32, 8, 1, ml_dtypes.bfloat16),  # K = 8, the most nc_find_index8 finds
])  # fmt: skip
def test_topk_reduce(nkilib, T: int, K: int, H: int, n_src: int, lnc: int, dtype) -> None:
    kernel = nkilib("nkilib.experimental.collectives.topk_reduce").topk_reduce
    x = topk_reduce_input(T, K, H, n_src, dtype)
    got = kernel[lnc](x, T, K) if lnc > 1 else kernel(x, T, K)
    want = ref_topk_reduce(x, T)
    assert got.dtype == x.dtype and got.shape == (T, H)
    if K <= 2:  # one add in fp32, one rounding: the reference's result exactly
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    else:  # the kernel rounds after each of its K - 1 adds, the reference once
        eps = float(np.finfo(dtype).eps)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=K * eps, atol=K * eps * 4)


# -- find_nonzero_indices -------------------------------------------------------------------------------------
def ref_find_nonzero_indices(x: np.ndarray, col_start: int | None = None, n_cols: int | None = None):
    """``find_nonzero_indices_torch_ref``: per column the T indices of its nonzeros, -1 after, and the counts."""
    T, C = x.shape
    start, c_out = (0, C) if col_start is None else (col_start, n_cols)
    indices = np.full((c_out, T), -1, np.int32)
    counts = np.zeros(c_out, np.int32)
    for c in range(c_out):
        nz = np.flatnonzero(x[:, start + c])
        counts[c] = len(nz)
        indices[c, : len(nz)] = nz
    return indices, counts


@pytest.mark.parametrize("T,C,chunk,col_start,n_cols,dtype", [
    (128, 4, None, None, None, np.float32),  # one chunk, two columns per core
    (256, 16, 128, None, None, np.int32),  # two chunks (indices pre-filled with -1), 8 columns per core
    (256, 16, None, 3, 6, np.float32),  # col_start_id: columns 3..8 from a run-time offset
])  # fmt: skip
def test_find_nonzero_indices(nkilib, T: int, C: int, chunk, col_start, n_cols, dtype) -> None:
    """float32 and int32 inputs only: nonzero_with_count reads nothing else (a bf16 input is an error at its line)."""
    kernel = nkilib("nkilib.core.subkernels.find_nonzero_indices").find_nonzero_indices
    x = ((RNG.random((T, C)) < 0.3) * RNG.integers(1, 9, (T, C))).astype(dtype)
    x[:, 0] = 0  # a column with no nonzero at all
    if col_start is None:
        indices, counts = kernel[2](x, chunk_size=chunk)
    else:
        indices, counts = kernel[2](x, np.array([col_start], np.int32), n_cols, chunk_size=chunk)
    want_indices, want_counts = ref_find_nonzero_indices(x, col_start, n_cols)
    np.testing.assert_array_equal(indices, want_indices)
    np.testing.assert_array_equal(counts, want_counts)
