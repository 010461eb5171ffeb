"""``nisa.dma_compute`` read-modify-write: a dynamic (``vector_offset`` / ``scalar_offset``) operand, NKI's gather
RMW ``dst(SB) = dst(SB) + src(HBM)[indices]`` and scatter RMW ``dst(HBM)[indices] = dst(HBM)[indices] + src(SB)``,
``oob_mode``, dtypes, and the errors at the user's line. The index tensors ride in DMA_COMPUTE's spare source slots
(the RMW form has exactly two sources)."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.runtime.simulator import SimulationError  # noqa: E402

RNG = np.random.default_rng(23)


@nki.jit
def gather_add_kernel(acc_in, data, indices, oob):
    """acc = acc_in; acc += data[indices] (gather RMW, the dynamic source first)."""
    P, F = acc_in.shape
    acc = nl.ndarray((P, F), dtype=acc_in.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=acc_in)
    idx = nl.ndarray((P, 1), dtype=indices.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    gathered = data.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0)
    nisa.dma_compute(dst=acc, srcs=[gathered, acc], reduce_op=nl.add, oob_mode=oob)
    out = nl.ndarray((P, F), dtype=acc_in.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


def _add(a: np.ndarray, b: np.ndarray, dtype) -> np.ndarray:
    return (a.astype(np.float32) + b.astype(np.float32)).astype(dtype)


@pytest.mark.parametrize("acc_dtype,data_dtype,index_dtype", [
    (np.float32, np.float32, np.int32),
    (ml_dtypes.bfloat16, ml_dtypes.bfloat16, np.uint32),
    (ml_dtypes.bfloat16, np.float32, np.int16),  # dst's dtype: one cast of the fp32 sum
    (np.float16, np.float16, np.uint16),
])  # fmt: skip
def test_gather_rmw_adds_the_indexed_rows(acc_dtype, data_dtype, index_dtype) -> None:
    acc = RNG.standard_normal((16, 24)).astype(acc_dtype)
    data = RNG.standard_normal((40, 24)).astype(data_dtype)
    idx = RNG.permutation(40)[:16].astype(index_dtype).reshape(16, 1)
    got = gather_add_kernel(acc, data, idx, nisa.oob_mode.error)
    want = _add(data[idx[:, 0].astype(np.int64)], acc, acc_dtype)
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_gather_rmw_out_of_bounds_is_an_error_or_leaves_the_row() -> None:
    acc = RNG.standard_normal((4, 8)).astype(np.float32)
    data = RNG.standard_normal((16, 8)).astype(np.float32)
    idx = np.array([[3], [16], [0], [-1]], np.int32)
    with pytest.raises(SimulationError, match=r"DMA_COMPUTE.*src0 row 1: dynamic offset 16"):
        gather_add_kernel(acc, data, idx, nisa.oob_mode.error)
    got = gather_add_kernel(acc, data, idx, nisa.oob_mode.skip)
    want = acc.copy()
    want[[0, 2]] += data[[3, 0]]
    np.testing.assert_array_equal(got, want)


@nki.jit
def scatter_add_kernel(src_data, indices, table, oob):
    """table[indices] += src_data (scatter RMW: dst and its reading source the same dynamic view)."""
    P, F = src_data.shape
    src = nl.ndarray((P, F), dtype=src_data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=src_data)
    idx = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    rows = table.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0)
    nisa.dma_compute(dst=rows, srcs=[rows, src], reduce_op=nl.add, oob_mode=oob)
    return table


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_scatter_rmw_adds_into_the_indexed_rows(dtype) -> None:
    src = RNG.standard_normal((8, 16)).astype(dtype)
    idx = RNG.permutation(32)[:8].astype(np.int32).reshape(8, 1)
    table = RNG.standard_normal((32, 16)).astype(dtype)
    want = table.copy()
    want[idx[:, 0]] = _add(table[idx[:, 0]], src, dtype)
    got = scatter_add_kernel(src, idx, table, nisa.oob_mode.error)
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    idx[2, 0] = 99
    table = np.zeros((32, 16), dtype)
    got = scatter_add_kernel(src, idx, table, nisa.oob_mode.skip)
    keep = np.arange(8) != 2
    want = np.zeros((32, 16), dtype)
    want[idx[keep, 0]] = src[keep]
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_scalar_offset_source() -> None:
    """A scalar (one-element) offset: a gather RMW of one block of rows chosen at run time."""

    @nki.jit
    def kernel(acc_in, data, start):
        acc = nl.ndarray(acc_in.shape, dtype=acc_in.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=acc, src=acc_in)
        s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=start)
        block = data.ap(pattern=[[8, 4], [1, 8]], scalar_offset=s, indirect_dim=0)
        nisa.dma_compute(dst=acc, srcs=[block, acc], reduce_op=nl.add)
        out = nl.ndarray(acc_in.shape, dtype=acc_in.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=acc)
        return out

    acc = RNG.standard_normal((4, 8)).astype(np.float32)
    data = RNG.standard_normal((20, 8)).astype(np.float32)
    got = kernel(acc, data, np.array([[9]], np.int32))
    np.testing.assert_array_equal(got, data[9:13] + acc)


def _error_cases():
    def three_sources(data, idx, acc):
        g = data.ap(pattern=[[8, 4], [1, 8]], vector_offset=idx, indirect_dim=0)
        nisa.dma_compute(dst=acc, srcs=[g, acc, acc], reduce_op=nl.add)

    def not_unique(data, idx, acc):
        g = data.ap(pattern=[[8, 4], [1, 8]], vector_offset=idx, indirect_dim=0)
        nisa.dma_compute(dst=acc, srcs=[g, acc], reduce_op=nl.add, unique_indices=False)

    def no_dst_source(data, idx, acc):
        g = data.ap(pattern=[[8, 4], [1, 8]], vector_offset=idx, indirect_dim=0)
        other = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_compute(dst=acc, srcs=[g, other], reduce_op=nl.add)

    def dynamic_scatter_data(data, idx, acc):
        rows = data.ap(pattern=[[8, 4], [1, 8]], vector_offset=idx, indirect_dim=0)
        nisa.dma_compute(dst=rows, srcs=[rows, rows], reduce_op=nl.add)

    return [
        (three_sources, "exactly 2 sources, got 3"), (not_unique, "unique_indices=False is not supported"),
        (no_dst_source, "needs one source that is dst itself"),
        (dynamic_scatter_data, "reads its data .the other source. statically"),
    ]  # fmt: skip


@pytest.mark.parametrize("body,match", _error_cases(), ids=lambda c: getattr(c, "__name__", ""))
def test_errors_name_the_users_line(body, match: str) -> None:
    @nki.jit
    def kernel(data, indices):
        idx = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=indices)
        acc = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        body(data, idx, acc)
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        return out

    with pytest.raises(NkiError, match=match) as e:
        kernel.trace(np.zeros((32, 8), np.float32), np.zeros((4, 1), np.int32))
    assert e.value.file == __file__
    lines, first = inspect.getsourcelines(body)
    assert first < e.value.line < first + len(lines)
