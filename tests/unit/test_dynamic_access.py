"""Dynamic access patterns (``.ap(scalar_offset=, vector_offset=, indirect_dim=)``) and indirect DMA end to end
(trace, compile, simulate) against numpy: register, SBUF and HBM scalar offsets, vector gathers and scatters,
``oob_mode`` error and skip, ``dma_transpose`` gathers, ``nl.load``/``nl.store``, the encoding, and the errors."""

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
from nkic.runtime.encoding import decode_stream, encode_stream  # noqa: E402
from nkic.runtime.simulator import SimulationError  # noqa: E402
from nkic.target.isa import Instr, Operand  # noqa: E402

RNG = np.random.default_rng(11)


# -- vector offsets: gather and scatter ----------------------------------------------------------------------------
@nki.jit
def gather_kernel(data, indices, oob):
    P, F = indices.shape[0], data.shape[1]
    output = nl.ndarray((P, F), dtype=data.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((P, 1), dtype=indices.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    dst = nl.ndarray((P, F), dtype=data.dtype, buffer=nl.sbuf)
    nisa.memset(dst=dst, value=-7.0)
    nisa.dma_copy(dst=dst, src=data.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0),
                  oob_mode=oob)  # fmt: skip
    nisa.dma_copy(dst=output, src=dst)
    return output


@pytest.mark.parametrize("index_dtype", [np.uint32, np.int32, np.int16])
def test_vector_gather_reads_the_indexed_rows(index_dtype) -> None:
    data = RNG.standard_normal((64, 24)).astype(np.float32)
    idx = RNG.integers(0, 64, (32, 1)).astype(index_dtype)
    out = gather_kernel(data, idx, nisa.oob_mode.error)
    np.testing.assert_array_equal(out, data[idx[:, 0].astype(np.int64)])


def test_vector_gather_out_of_bounds_is_an_error_or_skipped() -> None:
    data = RNG.standard_normal((16, 8)).astype(np.float32)
    idx = np.array([[0], [15], [16], [3]], np.int32)  # row 2 reads past the 16 rows
    with pytest.raises(SimulationError, match=r"DMA_COPY.*src row 2: dynamic offset 16 \(x 8 elements\) reaches "
                       r"outside HBM variable"):  # fmt: skip
        gather_kernel(data, idx, nisa.oob_mode.error)
    out = gather_kernel(data, idx, nisa.oob_mode.skip)
    want = data[[0, 15, 0, 3]]
    want[2] = -7.0  # skipped: the row keeps what was there
    np.testing.assert_array_equal(out, want)
    negative = np.array([[-1], [1], [2], [3]], np.int32)
    out = gather_kernel(data, negative, nisa.oob_mode.skip)
    np.testing.assert_array_equal(out[1:], data[1:4])
    np.testing.assert_array_equal(out[0], np.full(8, -7.0, np.float32))


@nki.jit
def scatter_kernel(src_data, indices, output, oob):
    P, F = src_data.shape
    src = nl.ndarray((P, F), dtype=src_data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=src_data)
    idx = nl.ndarray((P, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    nisa.dma_copy(dst=output.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0), src=src, oob_mode=oob)
    return output


def test_vector_scatter_writes_the_indexed_rows_and_skips_out_of_bounds() -> None:
    src = RNG.standard_normal((8, 16)).astype(np.float32)
    idx = RNG.permutation(32)[:8].astype(np.uint32).reshape(8, 1)
    out = np.zeros((32, 16), np.float32)
    scatter_kernel(src, idx, out, nisa.oob_mode.error)
    want = np.zeros((32, 16), np.float32)
    want[idx[:, 0]] = src
    np.testing.assert_array_equal(out, want)
    idx[5, 0] = 40
    out = np.zeros((32, 16), np.float32)
    scatter_kernel(src, idx, out, nisa.oob_mode.skip)
    want = np.zeros((32, 16), np.float32)
    keep = np.arange(8) != 5
    want[idx[keep, 0]] = src[keep]
    np.testing.assert_array_equal(out, want)
    with pytest.raises(SimulationError, match="dst row 5: dynamic offset 40"):
        scatter_kernel(src, idx, np.zeros((32, 16), np.float32), nisa.oob_mode.error)


def test_vector_gather_with_a_cast_through_nl_load() -> None:
    @nki.jit
    def kernel(data, indices):
        idx = nl.load(indices)
        tile = nl.load(data.ap(pattern=[[data.shape[1], 16], [1, data.shape[1]]], vector_offset=idx), dtype=nl.float32)
        out = nl.ndarray(tile.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, tile)
        return out

    data = RNG.standard_normal((40, 12)).astype(ml_dtypes.bfloat16)
    idx = RNG.integers(0, 40, (16, 1)).astype(np.int32)
    np.testing.assert_array_equal(kernel(data, idx), data[idx[:, 0]].astype(np.float32))


def test_dma_transpose_gathers_then_transposes() -> None:
    @nki.jit
    def kernel(src_hbm, idx_hbm):
        P = idx_hbm.shape[0]
        F = src_hbm.shape[1]
        idx_sb = nl.load(idx_hbm)
        dst_sb = nl.ndarray((F, P), dtype=src_hbm.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=dst_sb, src=src_hbm.ap(pattern=[[F, P], [1, F]], vector_offset=idx_sb, indirect_dim=0),
                           axes=(1, 0))  # fmt: skip
        out = nl.ndarray((F, P), dtype=src_hbm.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst_sb)
        return out

    data = RNG.standard_normal((50, 32)).astype(ml_dtypes.bfloat16)  # "src.dtype is 2 bytes"
    idx = RNG.integers(0, 50, (16, 1)).astype(np.uint32)
    np.testing.assert_array_equal(kernel(data, idx), data[idx[:, 0]].T)


# -- scalar offsets: a register, an SBUF element, an HBM element ------------------------------------------------
def test_scalar_offset_register_in_a_runtime_loop() -> None:
    """The fori_loop example of the API reference: element i of data to element i of output, for i < ub."""

    @nki.jit
    def kernel(data, ub_input):
        N = data.shape[1]
        output = nl.ndarray((1, N), dtype=nl.float32, buffer=nl.shared_hbm)
        ub_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ub_sb, src=ub_input)
        ub_reg = nisa.register_alloc()
        nisa.register_load(ub_reg, ub_sb)
        zeros = nl.zeros((1, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=output, src=zeros)
        temp = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)

        def body(i):
            nisa.dma_copy(dst=temp, src=data.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1))
            nisa.dma_copy(dst=output.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1), src=temp)

        nl.fori_loop(0, ub_reg, body)
        return output

    data = RNG.standard_normal((1, 10)).astype(np.float32)
    for ub in (0, 3, 10):
        out = kernel(data, np.array([[ub]], np.int32))
        want = np.where(np.arange(10) < ub, data[0], 0.0)
        np.testing.assert_array_equal(out[0], want)
    with pytest.raises(SimulationError, match=r"src row 0: dynamic offset 10 \(x 1 elements\)"):
        kernel(data, np.array([[11]], np.int32))  # iteration 10 reads past the 10 elements


@pytest.mark.parametrize("where", ["sbuf", "hbm"])
def test_scalar_offset_from_a_tensor_element(where: str) -> None:
    @nki.jit
    def kernel(table, row):
        R, F = table.shape
        if where == "sbuf":
            offset = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.dma_copy(dst=offset, src=row)
        else:
            offset = row
        tile = nl.ndarray((4, F), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=table.ap(pattern=[[F, 4], [1, F]], offset=1, scalar_offset=offset, indirect_dim=0))
        out = nl.ndarray((4, F), dtype=table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=tile)
        return out

    table = RNG.standard_normal((20, 6)).astype(np.float32)
    flat = table.reshape(-1)
    for r in (0, 7, 15):
        got = kernel(table, np.array([[r]], np.int32))
        np.testing.assert_array_equal(got, flat[r * 6 + 1 : r * 6 + 1 + 24].reshape(4, 6))


def test_scalar_offset_on_an_sbuf_free_dim() -> None:
    """``sb.ap(..., scalar_offset=idx, indirect_dim=1)`` on chip: the column window moves at run time."""

    @nki.jit
    def kernel(x, col):
        P, F = x.shape
        xs = nl.load(x)
        c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=c, src=col)
        out = nl.ndarray((P, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=xs.ap(pattern=[[F, P], [1, 4]], offset=0, scalar_offset=c, indirect_dim=1))
        return out

    x = RNG.standard_normal((8, 32)).astype(np.float32)
    for c in (0, 5, 28):
        np.testing.assert_array_equal(kernel(x, np.array([[c]], np.int32)), x[:, c : c + 4])


def test_scalar_offset_scatter_skips_the_rows_out_of_bounds() -> None:
    """indexed_flatten's core loop: each row's blocks land at a run-time block offset; blocks past the end and rows
    with an invalid (negative) offset are skipped with oob_mode.skip."""

    @nki.jit
    def kernel(x, offsets, f_len, n_blocks):
        E, T = x.shape
        parts = T // f_len
        out = nl.ndarray((n_blocks, f_len), dtype=x.dtype, buffer=nl.shared_hbm)
        init = nl.ndarray((n_blocks, f_len), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=init, value=-1)
        nisa.dma_copy(dst=out, src=init)
        xr = x.reshape((E, parts, f_len))
        offs = nl.ndarray((1, E), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=offs, src=offsets.reshape((1, E)))
        for r in nl.sequential_range(E):
            off = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.dma_copy(dst=off, src=offs[0:1, r : r + 1])
            tile = nl.ndarray((parts, f_len), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=xr[r, 0:parts, 0:f_len])
            nisa.dma_copy(dst=out.ap(pattern=[[f_len, parts], [1, f_len]], offset=0, scalar_offset=off,
                                     indirect_dim=0), src=tile, oob_mode=nisa.oob_mode.skip)  # fmt: skip
        return out

    x = np.arange(3 * 16, dtype=np.int32).reshape(3, 16)
    offsets = np.array([2, 14, -1000000], np.int32)
    got = kernel(x, offsets, 4, 16)
    want = np.full((16, 4), -1, np.int32)
    want[2:6] = x[0].reshape(4, 4)
    want[14:16] = x[1].reshape(4, 4)[:2]  # blocks 16 and 17 are past the end
    np.testing.assert_array_equal(got, want)


# -- the binary form -------------------------------------------------------------------------------------------
def test_dynamic_operands_round_trip_through_the_encoding() -> None:
    index = Operand("sbuf", "int32", ((1, 16), (1, 1)), 0, 0x40)
    vector = Operand("hbm", "float32", ((8, 16), (1, 8)), address=0, var_id=1, dyn="vector", dyn_ref=3, dyn_scale=8)
    reg = Operand("hbm", "float32", ((8, 1), (1, 8)), address=4, var_id=2, dyn="reg", dyn_ref=5, dyn_scale=-8)
    dst = Operand("sbuf", "float32", ((1, 16), (1, 8)), 0, 0x80)
    instrs = [Instr("DMA_COPY", "sp", (dst, vector, None, index), flags=2),
              Instr("DMA_COPY", "sp", (dst, reg), flags=0)]  # fmt: skip
    assert decode_stream(encode_stream("sp", instrs))[1] == instrs


# -- errors at the user's line -----------------------------------------------------------------------------------
def _hbm(shape, dtype=np.float32):
    return np.zeros(shape, dtype)


def _error_cases():
    def both(data, idx):
        i = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
        data.ap([[8, 4], [1, 8]], scalar_offset=i, vector_offset=i)

    def float_index(data, idx):
        i = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        data.ap([[8, 4], [1, 8]], vector_offset=i)

    def vector_on_chip(data, idx):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        i = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
        t.ap([[8, 4], [1, 8]], vector_offset=i, indirect_dim=1)

    def vector_count(data, idx):
        i = nl.ndarray((3, 1), dtype=nl.int32, buffer=nl.sbuf)
        data.ap([[8, 4], [1, 8]], vector_offset=i)

    def partition_dim(data, idx):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        i = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        t.ap([[8, 4], [1, 8]], scalar_offset=i, indirect_dim=0)

    def bad_dim(data, idx):
        i = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        data.ap([[8, 4], [1, 8]], scalar_offset=i, indirect_dim=2)

    def scalar_size(data, idx):
        i = nl.ndarray((2, 1), dtype=nl.int32, buffer=nl.sbuf)
        data.ap([[8, 4], [1, 8]], scalar_offset=i)

    def reslice(data, idx):
        i = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        data.ap([[8, 4], [1, 8]], scalar_offset=i)[0:2]

    def not_dma(data, idx):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        i = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=t.ap([[8, 4], [1, 8]], scalar_offset=i, indirect_dim=1))

    def static_part(data, idx):  # checked where an instruction uses the view (a kernel may build and not use it)
        i = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        t = nl.ndarray((4, 8), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data.ap([[8, 4], [1, 8]], offset=8 * 30, scalar_offset=i))

    def bad_oob(data, idx):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data[0:4], oob_mode="wrap")

    def bad_engine(data, idx):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data[0:4], engine=nisa.engine.sync)

    def bad_hwdge_engine(data, idx):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data[0:4], dge_mode=nisa.dge_mode.hwdge, engine=nisa.engine.vector)

    def bad_dge(data, idx):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data[0:4], dge_mode=7)

    return [
        (both, "mutually exclusive"), (float_index, "must have an integer dtype"),
        (vector_on_chip, "vector_offset indexes an HBM tensor"), (vector_count, "holds 3 indices for the 4 rows"),
        (partition_dim, "cannot move the partition dim"), (bad_dim, "indirect_dim 2 is not a dim"),
        (scalar_size, "exactly one element"), (reslice, "cannot be indexed, reshaped or viewed again"),
        (not_dma, "'src' cannot be a dynamic access pattern"), (static_part, "touches elements 240..271"),
        (bad_oob, "invalid oob_mode"), (bad_engine, "only valid with dge_mode=hwdge"),
        (bad_hwdge_engine, "nisa.engine.sync or nisa.engine.scalar"), (bad_dge, "invalid dge_mode"),
    ]  # fmt: skip


@pytest.mark.parametrize("body,match", _error_cases(), ids=lambda c: getattr(c, "__name__", ""))
def test_errors_name_the_users_line(body, match: str) -> None:
    @nki.jit
    def kernel(data, idx):
        body(data, idx)
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        return out

    with pytest.raises(NkiError, match=match) as e:
        kernel.trace(_hbm((32, 8)), _hbm((4, 1), np.int32))
    assert e.value.file == __file__
    lines, first = inspect.getsourcelines(body)
    assert first < e.value.line < first + len(lines)


def test_dge_modes_are_accepted() -> None:
    @nki.jit
    def kernel(data):
        t = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data, dge_mode=nisa.dge_mode.swdge)
        nisa.dma_copy(dst=t, src=data, dge_mode=nisa.dge_mode.none)
        nisa.dma_copy(dst=t, src=data, dge_mode=3)  # an int-valued enum's value, as nki-library passes it
        nisa.dma_copy(dst=t, src=data, dge_mode=nisa.dge_mode.hwdge, engine=nisa.engine.scalar)
        out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t, dge_mode=nisa.dge_mode.unknown)
        return out

    x = RNG.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_array_equal(kernel(x), x)

    @nki.jit
    def bad(data):
        t = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data, dge_mode=7)
        return t

    with pytest.raises(nki.NkiError, match=r"test_dynamic_access.py:\d+: error: invalid dge_mode 7"):
        bad.trace(x)


def test_vector_gather_of_more_rows_than_the_table_has() -> None:
    """128 indices into a 16-row table: only the per-row part of the pattern is bounded statically."""
    data = RNG.standard_normal((16, 8)).astype(np.float32)
    idx = RNG.integers(0, 16, (128, 1)).astype(np.uint32)
    np.testing.assert_array_equal(gather_kernel(data, idx, nisa.oob_mode.error), data[idx[:, 0]])
