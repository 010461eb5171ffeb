"""Legacy index grids (``nl.arange``, ``nl.mgrid``), advanced indexing, ``nl.par_dim`` and ``mask=``.

Kernels are written against ``neuronxcc.nki`` (after ``nkic.install_nki_alias()``) and checked against numpy.
Dst-first instructions come from the modern ``nki.isa`` (every instruction takes ``mask=``).
"""

from __future__ import annotations

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkic import api  # noqa: E402
from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.frontend.grid import IndexGrid, iota_args, predicate_args  # noqa: E402

misa = api.isa  # the dst-first instructions


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random(shape, dtype=np.float32) * 100


# -- the grids themselves ------------------------------------------------------------------------------------
def test_arange_and_mgrid_values_follow_numpy() -> None:
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(2, 10, 3)[None, :]
    assert i_p.shape == (128, 1) and i_f.shape == (1, 3)
    np.testing.assert_array_equal((2 * i_p + i_f - 1).values(), 2 * np.arange(128)[:, None] + np.arange(2, 10, 3) - 1)
    g = nl.mgrid[0:4, 1:7:2, 0:5]
    want = np.mgrid[0:4, 1:7:2, 0:5]
    for axis, w in zip(g, want):
        np.testing.assert_array_equal(axis.values(), w)
    assert g.p is g[0] and g.x is g[1] and g.y is g[2]
    a, b, c = g  # unpacks like a tuple
    assert isinstance(a, IndexGrid) and c.shape == (4, 3, 5)
    np.testing.assert_array_equal(((4 * nl.arange(8)[None, :]) // 2).values(), 2 * np.arange(8)[None, :])


def test_grid_errors() -> None:
    i_p = nl.arange(8)[:, None]
    with pytest.raises(NkiError, match="control flow on an index grid"):
        bool(i_p)
    with pytest.raises(NkiError, match="not affine"):
        _ = i_p * i_p
    with pytest.raises(NkiError, match="not affine"):
        _ = (i_p + 1) // 2
    with pytest.raises(NkiError, match="do not broadcast"):
        _ = i_p + nl.arange(5)[:, None]
    with pytest.raises(NkiError, match="control flow on an index grid"):
        if i_p < 4:  # noqa: SIM102 — the point: `if` on a predicate
            pass
    with pytest.raises(NkiError, match="'|' of masks"):
        _ = (i_p < 4) | (i_p > 6)


def test_iota_and_predicate_arguments() -> None:
    expr = 5 + 2 * nl.arange(128)[:, None] - nl.arange(64)[None, :]
    assert iota_args(expr) == ((128, 64), [[-1, 64]], 5, 2)
    assert iota_args(nl.arange(0, 512)[None, :] * -1) == ((1, 512), [[-1, 512]], 0, 0)
    ix, iy = nl.mgrid[0:128, 0:128]
    assert predicate_args(iy < ix) == ((128, 128), [[-1, 128]], -1, 1)  # ix - iy - 1 >= 0


# -- indexing HBM and on-chip tensors with grids ---------------------------------------------------------------
@nki.jit(mode="simulation")
def copy_tiles(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    for n in nl.affine_range(a.shape[0] // 128):
        for m in nl.affine_range(a.shape[1] // 512):
            t = nl.load(a[n * 128 + i_p, m * 512 + i_f])
            nl.store(out[n * 128 + i_p, m * 512 + i_f], value=t[i_p, i_f])
    return out


def test_tiles_at_loop_offsets() -> None:
    a = _rand(256, 1024)
    np.testing.assert_array_equal(copy_tiles(a), a)


@nki.jit(mode="simulation")
def strided_and_transposed(a):
    even = nl.ndarray((128, 256), dtype=a.dtype, buffer=nl.shared_hbm)
    at = nl.ndarray((64, 128), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:256]
    t = nl.load(a[i_p, 2 * i_f + 1])  # odd columns
    nl.store(even[i_p, i_f], value=t)
    j_p = nl.arange(64)[:, None]
    j_f = nl.arange(128)[None, :]
    u = nl.load(a[j_f, j_p])  # a transposed view of HBM
    nl.store(at, value=u)
    return even, at


def test_strided_and_transposed_hbm_views() -> None:
    a = _rand(128, 512)
    even, at = strided_and_transposed(a)
    np.testing.assert_array_equal(even, a[:, 1::2])
    np.testing.assert_array_equal(at, a[:, :64].T)


@nki.jit(mode="simulation")
def three_d(a):
    b, p, f = a.shape
    out = nl.ndarray((p, b, f), dtype=a.dtype, buffer=nl.shared_hbm)
    g = nl.mgrid[0:p, 0:b, 0:f]
    t = nl.load(a[g.x, g.p, g.y])  # (p, b, f): the partition axis from a's dim 1
    nl.store(out[g.p, g.x, g.y], value=t[g.p, g.x, g.y])
    one = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:p, 0:f]
    nl.store(one[i_p, i_f], value=nl.load(a[2, i_p, i_f]))  # grids mixed with an int
    return out, one


def test_three_d_grids_and_ints() -> None:
    a = _rand(4, 128, 64)
    out, one = three_d(a)
    np.testing.assert_array_equal(out, a.transpose(1, 0, 2))
    np.testing.assert_array_equal(one, a[2])


@nki.jit(mode="simulation")
def set_items(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(256)[None, :]
    tile[i_p, i_f] = nl.load(a[i_p, 256 + i_f])  # left half <- right half of a
    tile[i_p, 256 + i_f] = nl.load(a[i_p, i_f])
    nl.store(out[i_p, nl.arange(512)[None, :]], value=tile)
    return out


def test_setitem_with_grids() -> None:
    a = _rand(128, 512)
    np.testing.assert_array_equal(set_items(a), np.concatenate([a[:, 256:], a[:, :256]], axis=1))


@nki.jit(mode="simulation")
def on_chip_partition_offset(a):
    out = nl.ndarray((64, 32), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(32)[None, :]
    nl.store(out, value=t[32 + i_p, 3 * i_f])  # partitions 32..95, every third column
    return out


def test_on_chip_views_with_partition_offset_and_stride() -> None:
    a = _rand(128, 96)
    np.testing.assert_array_equal(on_chip_partition_offset(a), a[32:96, ::3])


# -- run-time indices: a tile of indices on the first axis ---------------------------------------------------------
@nki.jit(mode="simulation")
def gather_rows(data, idx):
    out = nl.ndarray((64, 512), dtype=data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(512)[None, :]
    idx_tile = nl.load(idx[i_p])  # (64, 1) indices in SBUF
    rows = nl.load(data[idx_tile[i_p, 0], i_f])
    nl.store(out, value=rows)
    return out


@nki.jit(mode="simulation")
def scatter_rows(src, idx):
    out = nl.ndarray((128, 512), dtype=src.dtype, buffer=nl.shared_hbm)
    zero = nl.zeros((128, 512), dtype=src.dtype)
    nl.store(out, value=zero)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(512)[None, :]
    idx_tile = nl.load(idx[i_p])
    nl.store(out[idx_tile[i_p, 0], i_f], value=nl.load(src))
    return out


@nki.jit(mode="simulation")
def masked_gather(data, idx):
    out = nl.ndarray((64, 512), dtype=data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(512)[None, :]
    idx_tile = nl.load(idx[i_p])
    rows = nl.zeros((64, 512), dtype=data.dtype)
    misa.dma_copy(rows[i_p, i_f], data[idx_tile[i_p, 0], i_f], mask=(i_p >= 16) & (i_p < 40) & (i_f < 300))
    nl.store(out, value=rows)
    return out


@nki.jit(mode="simulation")
def gather_iota(data):
    out = nl.ndarray((64, 512), dtype=data.dtype, buffer=nl.shared_hbm)
    shape, pattern, offset, cm = iota_args(2 * nl.arange(64)[:, None] + 1)
    idx_tile = nl.ndarray(shape, dtype=nl.int32)
    misa.iota(idx_tile, pattern, offset=offset, channel_multiplier=cm)
    i_f = nl.arange(512)[None, :]
    nl.store(out, value=nl.load(data[idx_tile, i_f]))
    return out


def test_indirect_load_and_store() -> None:
    data = _rand(128, 512)
    idx = (2 * np.arange(64)).astype(np.int32)
    np.testing.assert_array_equal(gather_rows(data, idx), data[idx])
    src = _rand(64, 512, seed=1)
    want = np.zeros((128, 512), np.float32)
    want[idx] = src
    np.testing.assert_array_equal(scatter_rows(src, idx), want)
    np.testing.assert_array_equal(gather_iota(data), data[2 * np.arange(64) + 1])
    rev = idx[::-1].copy()  # a mask on run-time rows cuts the index tile: rows 16..39 use indices rev[16:40]
    want = np.zeros((64, 512), np.float32)
    want[16:40, :300] = data[rev[16:40], :300]
    np.testing.assert_array_equal(masked_gather(data, rev), want)


# -- par_dim ---------------------------------------------------------------------------------------------------
@nki.jit(mode="simulation")
def blocks(a):
    nb, n, m = a.shape
    loaded = nl.ndarray((nb, nl.par_dim(n), m), dtype=a.dtype, buffer=nl.sbuf)
    out = nl.ndarray((nb, nl.par_dim(n), m), dtype=a.dtype, buffer=nl.shared_hbm)
    plain = nl.ndarray((nl.par_dim(n), m), dtype=a.dtype, buffer=nl.sbuf)
    i_p, i_f = nl.mgrid[0:n, 0:m]
    for b in nl.affine_range(nb):
        loaded[b] = nl.load(a[b])
    for b in nl.affine_range(nb):
        plain[i_p, i_f] = nl.exp(loaded[b, i_p, i_f])
        nl.store(out[b], value=plain)
    return out


def test_par_dim_blocks() -> None:
    a = np.random.default_rng(0).random((3, 128, 64), dtype=np.float32)
    np.testing.assert_allclose(blocks(a), np.exp(a), rtol=1e-5)


@nki.jit(mode="simulation")
def block_as_operand(a):
    t = nl.ndarray((2, nl.par_dim(128), 64), dtype=a.dtype, buffer=nl.sbuf)
    nl.store(a, value=nl.exp(t))
    return a


def test_par_dim_shapes_and_errors() -> None:
    with pytest.raises(NkiError, match="block tensor"):
        block_as_operand(np.zeros((128, 64), np.float32))


# -- masks ------------------------------------------------------------------------------------------------------
@nki.jit(mode="simulation")
def masked_square(a):
    out = nl.ndarray([64, 256], dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    t = nl.load(a[i_p, i_f])
    sq = nl.square(t, mask=((i_p < 64) & (i_f < 256)))
    # out is only 64 x 256: the masked-off indices lie outside it, as the legacy API allows
    nl.store(out[i_p, i_f], value=sq[i_p, i_f], mask=((i_p < 64) & (i_f < 256)))
    return out


def test_box_mask_on_compute_and_store() -> None:
    a = _rand(128, 512)
    np.testing.assert_allclose(masked_square(a), np.square(a[:64, :256]), rtol=1e-6)


@nki.jit(mode="simulation")
def masked_leaves_rest(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:512]
    t = nl.load(a)
    dst = nl.zeros((128, 512), dtype=a.dtype)
    misa.tensor_copy(dst[i_p, i_f], t[i_p, i_f], mask=(i_p >= 32) & (i_p < 96) & (i_f > 99))
    misa.activation(dst, api.language.exp, t, mask=(i_f < 8 and i_p < 2))  # `and` joins like &
    nl.store(out, value=dst)
    return out


def test_mask_leaves_the_rest_of_dst() -> None:
    a = np.random.default_rng(0).random((128, 512), dtype=np.float32)
    want = np.zeros_like(a)
    want[32:96, 100:] = a[32:96, 100:]
    want[:2, :8] = np.exp(a[:2, :8])
    np.testing.assert_allclose(masked_leaves_rest(a), want, rtol=1e-5)


@nki.jit(mode="simulation")
def triangle(a):
    out = nl.ndarray((128, 2, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_b, i_f = nl.mgrid[0:128, 0:2, 0:64]
    t = nl.load(a)
    dst = nl.zeros((128, 2, 64), dtype=a.dtype)
    # a condition over two axes: computed into a temporary, copied into dst under an iota-built predicate
    misa.activation(dst, api.language.exp, t, mask=(i_p >= i_f + 32 * i_b) & (i_f < 60) & (i_p > 3 * i_f - 1))
    nl.store(out, value=dst)
    return out


def test_general_affine_mask_is_predicated() -> None:
    a = np.random.default_rng(0).random((128, 2, 64), dtype=np.float32)
    p, b, f = np.meshgrid(np.arange(128), np.arange(2), np.arange(64), indexing="ij")
    keep = (p >= f + 32 * b) & (f < 60) & (p > 3 * f - 1)
    np.testing.assert_allclose(triangle(a), np.where(keep, np.exp(a), 0), rtol=1e-5)


@nki.jit(mode="simulation")
def masked_fill(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nl.load(a)
    t2 = nl.ndarray((128, 64), dtype=a.dtype)
    t2[i_p, i_f] = t
    filled = nl.full((128, 64), 7.0, dtype=a.dtype, mask=(i_p < 16))  # only rows 0..15 are written
    misa.tensor_copy(t2, filled, mask=(i_p < 16))
    nl.store(out, value=t2)
    return out


def test_filling_constructors_take_the_mask() -> None:
    a = _rand(128, 64)
    want = a.copy()
    want[:16] = 7.0
    np.testing.assert_array_equal(masked_fill(a), want)
    ir = str(masked_fill.trace(api.TensorSpec((128, 64), "float32")).module)
    assert "penguin.memset dst %sbuf_2[0 : [64, 16], [1, 64]]" in ir, ir  # the fill writes the 16 rows only


@nki.jit(mode="simulation")
def empty_mask(a):
    out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    dst = nl.zeros((128, 8), dtype=a.dtype)
    misa.tensor_copy(dst, nl.load(a), mask=(i_p < 0))  # never true: nothing is copied
    nl.store(out, value=dst)
    return out


def test_empty_mask_records_nothing() -> None:
    np.testing.assert_array_equal(empty_mask(np.ones((128, 8), np.float32)), np.zeros((128, 8), np.float32))


def _kernel_error(body, *arrays: np.ndarray) -> str:
    with pytest.raises(NkiError) as info:
        nki.jit(mode="simulation")(body)(*arrays)
    return str(info.value)


def test_mask_and_index_errors() -> None:
    a = np.zeros((128, 512), np.float32)

    def general_store(a):
        i_p, i_f = nl.mgrid[0:128, 0:128]
        t = nl.load(a[i_p, i_f])
        nl.store(a[i_p, i_f], value=t, mask=(i_p >= i_f))

    assert "only on-chip writes can be predicated" in _kernel_error(general_store, a)

    def general_reduce(a):
        i_p, i_f = nl.mgrid[0:128, 0:512]
        nl.sum(nl.load(a), axis=1, mask=(i_p >= i_f))

    assert "does not span every axis of the condition" in _kernel_error(general_reduce, a)

    def unmatched(a):
        i_f = nl.arange(100)[None, :]
        t = nl.load(a)
        misa.tensor_copy(t, t, mask=(i_f < 10))

    assert "no operand has that axis" in _kernel_error(unmatched, a)

    def transposed_on_chip(a):
        t = nl.load(a[0:128, 0:128])
        i_p, i_f = nl.mgrid[0:128, 0:128]
        nl.store(a[i_p, i_f], value=t[i_f, i_p])

    assert "partition dim would not be the first" in _kernel_error(transposed_on_chip, a)

    def strided_partitions(a):
        t = nl.load(a)
        i_p, i_f = nl.mgrid[0:64, 0:512]
        nl.store(a[i_p, i_f], value=t[2 * i_p, i_f])

    assert "partition index steps by 2" in _kernel_error(strided_partitions, a)

    def out_of_bounds(a):
        i_p, i_f = nl.mgrid[0:128, 0:1024]
        nl.load(a[i_p, i_f])

    assert "the index grid on dim 1 ranges over 0..1023, outside 0..511" in _kernel_error(out_of_bounds, a)

    def matmul_mask(a):
        i_p, i_f = nl.mgrid[0:128, 0:128]
        t = nl.load(a[i_p, i_f])
        psum = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        misa.nc_matmul(psum, t, t, mask=(i_p < 64))

    assert "mask= is not supported on this instruction" in _kernel_error(matmul_mask, a)

    def runtime_index_on_chip(a):
        t = nl.load(a)
        idx = nl.load(a[nl.arange(128)[:, None], nl.arange(1)[None, :]], dtype=nl.int32)
        nl.store(a, value=t[idx, nl.arange(512)[None, :]])

    assert "needs an HBM tensor" in _kernel_error(runtime_index_on_chip, a)

    def ndarray_mask(a):
        nl.ndarray((128, 512), dtype=nl.float32, mask=(nl.arange(128)[:, None] < 3))

    assert "nl.ndarray does not take mask=" in _kernel_error(ndarray_mask, a)

    def not_a_mask(a):
        t = nl.load(a)
        nl.store(a, value=nl.exp(t, mask=True))

    assert "is not an index predicate" in _kernel_error(not_a_mask, a)


@nki.jit(mode="simulation")
def ragged_rows(a):
    n, m = a.shape
    out = nl.ndarray((n, m), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(m)[None, :]
    for t in nl.affine_range((n + 127) // 128):
        # the last tile is partial: its masked-off rows lie past the end of a and out
        tile = nl.load(a[t * 128 + i_p, i_f], mask=(t * 128 + i_p < n))
        res = nl.multiply(tile, 2.0, mask=(t * 128 + i_p < n))
        nl.store(out[t * 128 + i_p, i_f], value=res, mask=(t * 128 + i_p < n))
    return out


def test_mask_with_a_loop_variable_bound() -> None:
    a = _rand(200, 64)
    np.testing.assert_array_equal(ragged_rows(a), 2 * a)


@nki.jit(mode="simulation")
def block_equals_modern_layout(a):
    blocks = nl.ndarray((4, nl.par_dim(128), 64), dtype=a.dtype, buffer=nl.sbuf)
    modern = nl.ndarray((128, 4, 64), dtype=a.dtype, buffer=nl.sbuf)
    first = nl.ndarray((nl.par_dim(128), 64), dtype=a.dtype, buffer=nl.sbuf)
    # (B, par_dim(P), F) is stored as the modern (P, B, F) tile: block b is t[:, b, :]
    assert blocks.shape == (4, 128, 64) and blocks.storage.shape == (128, 4, 64)
    for b in range(4):
        assert blocks[b].pairs == modern[:, b, :].pairs and blocks[b].offset == modern[:, b, :].offset
    assert blocks[1:3].shape == (2, 128, 64) and blocks[1:3][1].offset == modern[:, 2, :].offset
    assert first.shape == (128, 64) and first.pairs == ((64, 128), (1, 64))  # par_dim first: a plain tile
    nl.store(a, value=nl.load(a))
    return a


def test_par_dim_block_layout_is_the_modern_tile() -> None:
    block_equals_modern_layout(np.zeros((128, 64), np.float32))


@nki.jit(mode="simulation")
def masked_mean_columns(a):
    out = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:512]
    # the sum's reduce cuts the free axis; its later ALU stage on the (128, 1) result has no free axis to cut
    s = nl.sum(nl.load(a), axis=1, mask=(i_f < 100) & (i_p < 128))
    nl.store(out, value=s)
    return out


def test_nl_function_mask_needs_one_instruction_per_axis() -> None:
    a = _rand(128, 512)
    np.testing.assert_allclose(masked_mean_columns(a)[:, 0], a[:, :100].sum(axis=1), rtol=1e-5)

    def missed(a):
        i_f = nl.arange(7)[None, :]
        nl.store(a, value=nl.exp(nl.load(a), mask=(i_f < 3)))

    assert "no operand of its instructions has that axis" in _kernel_error(missed, np.zeros((128, 512), np.float32))


def test_and_joins_conditions_across_lines_and_helpers() -> None:
    i_p, i_f = nl.mgrid[0:128, 0:512]

    def helper():
        return (i_p < 64
                and i_f < 100
                and i_p >= 3)

    m = helper()
    assert {c for c, _ in m.terms} == {(-1, 0), (0, -1), (1, 0)}
    lone = i_f < 7  # a later comparison is not joined with anything left over
    assert len(lone.terms) == 1


@nki.jit(mode="simulation")
def masked_iota(a):
    out = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    dst = nl.zeros((128, 64), dtype=nl.int32)
    # value = 5 + 3p - f where the mask holds: the values keep the uncut coordinates
    misa.iota(dst, [[-1, 64]], offset=5, channel_multiplier=3, mask=(i_p >= 10) & (i_p < 20) & (i_f >= 7))
    nl.store(out, value=dst)
    return out


def test_masked_coordinate_instructions_keep_their_coordinates() -> None:
    got = masked_iota(np.zeros((1,), np.float32))
    p, f = np.meshgrid(np.arange(128), np.arange(64), indexing="ij")
    want = np.where((p >= 10) & (p < 20) & (f >= 7), 5 + 3 * p - f, 0)
    np.testing.assert_array_equal(got, want)

    def shifted_indices(a):
        i_p, i_f = nl.mgrid[0:128, 0:512]
        t = nl.load(a)
        vals = nl.ndarray((128, 8), dtype=a.dtype)
        misa.max8(vals, t)
        idx = nl.ndarray((128, 8), dtype=nl.uint32)
        misa.nc_find_index8(idx, t, vals, mask=(i_f >= 4))

    assert "would shift the indices it writes" in _kernel_error(shifted_indices, np.zeros((128, 512), np.float32))
