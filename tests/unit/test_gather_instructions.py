"""``nisa.local_gather``, ``nc_n_gather``, ``nc_stream_shuffle``, ``sequence_bounds``, ``dma_compute`` and
``nl.gather_flattened`` end to end (trace, compile, simulate) against numpy references, plus their errors."""

from __future__ import annotations

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
from kernel_harness import load as _sbuf_copy, store as _out  # noqa: E402

RNG = np.random.default_rng(7)


def _values(shape, dtype) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return RNG.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)
    return (RNG.standard_normal(shape) * 100).astype(dtype)


# -- local_gather -------------------------------------------------------------------------------------------
def _local_gather_reference(src, index, per_idx, valid):
    """NKI's numpy reference (test_nki_isa_local_gather.py), indices in elements of the flattened free dims."""
    parts = src.shape[0]
    flat = src.reshape(parts, -1)
    out = np.empty((parts, valid * per_idx), src.dtype)
    for core in range(parts // 16):
        rows = slice(16 * core, 16 * core + 16)
        idx = index[rows].flatten(order="F")[:valid].astype(np.int64)
        cols = (idx[:, None] + np.arange(per_idx)).reshape(-1)
        out[rows] = flat[rows][:, cols]
    return out


def _local_gather_kernel(per_idx, valid, out_shape):
    @nki.jit
    def kernel(src, index):
        s, i = _sbuf_copy(src), _sbuf_copy(index)
        r = nl.ndarray(out_shape, dtype=src.dtype, buffer=nl.sbuf)
        nisa.local_gather(dst=r, src_buffer=s, index=i, num_elem_per_idx=per_idx, num_valid_indices=valid)
        return _out(r)

    return kernel


def test_local_gather_docs_example() -> None:
    """The API reference's example: the same 64 indices on all eight cores, four contiguous elements each."""
    src = (RNG.random((128, 512, 4)) * 100).astype(np.float32)
    index = np.tile(RNG.integers(0, 512, (16, 4)).astype(np.uint16), (8, 1)) * 4
    got = nki.simulate(_local_gather_kernel(4, 64, (128, 4, 16, 4)))(src, index)
    assert got.shape == (128, 4, 16, 4)
    np.testing.assert_array_equal(got.reshape(128, -1), _local_gather_reference(src, index, 4, 64))


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32, np.uint8, ml_dtypes.float8_e4m3fn])
@pytest.mark.parametrize("per_idx,valid", [(1, None), (2, 37), (8, 16), (32, 3)])
def test_local_gather_options_and_dtypes(dtype, per_idx: int, valid: int | None) -> None:
    """Every core with its own indices (any element offset, not only multiples of num_elem_per_idx), the default
    and explicit num_valid_indices, bit-exact in every dtype."""
    parts, k, free = 48, 3, 96
    src = _values((parts, free), dtype)
    index = RNG.integers(0, free - per_idx + 1, (parts, k)).astype(np.uint16)
    n = 16 * k if valid is None else valid
    got = nki.simulate(_local_gather_kernel(per_idx, valid, (parts, n * per_idx)))(src, index)
    np.testing.assert_array_equal(got.view(np.uint8), _local_gather_reference(src, index, per_idx, n).view(np.uint8))


def test_local_gather_out_of_range_index_is_a_simulation_error() -> None:
    src = _values((16, 64), np.float32)
    index = np.zeros((16, 2), np.uint16)
    index[5, 1] = 63  # with 2 elements per index it reaches element 64 of a 64-element partition
    with pytest.raises(SimulationError, match=r"LOCAL_GATHER.*index \(core, position\) \(0, 21\) = 63 reaches "
                                              r"element 63\.\.64, outside \[0, 64\)"):  # fmt: skip
        nki.simulate(_local_gather_kernel(2, None, (16, 64)))(src, index)


@pytest.mark.parametrize(
    "change,message",
    [({"index_dtype": np.int32}, "index must be uint16"), ({"per_idx": 3}, r"num_elem_per_idx must be one of"),
     ({"valid": 33}, r"num_valid_indices must be 1\.\.32"), ({"out": (16, 31)}, "dst needs 32 x 1 = 32 elements"),
     ({"parts": 24}, "multiple of 16"), ({"dst_dtype": nl.bfloat16}, "dst is bfloat16 but src_buffer is float32")],
)  # fmt: skip
def test_local_gather_rejects_bad_calls(change: dict, message: str) -> None:
    o = {"index_dtype": np.uint16, "per_idx": 1, "valid": None, "out": (16, 32), "parts": 16, "dst_dtype": None,
         **change}  # fmt: skip
    parts = o["parts"]
    out_shape = (parts, *o["out"][1:])

    @nki.jit
    def kernel(src, index):
        s, i = _sbuf_copy(src), _sbuf_copy(index)
        r = nl.ndarray(out_shape, dtype=o["dst_dtype"] or src.dtype, buffer=nl.sbuf)
        nisa.local_gather(dst=r, src_buffer=s, index=i, num_elem_per_idx=o["per_idx"], num_valid_indices=o["valid"])
        return _out(r)

    with pytest.raises(NkiError, match=message) as e:
        kernel.trace(np.zeros((parts, 64), np.float32), np.zeros((parts, 2), o["index_dtype"]))
    assert "test_gather_instructions.py" in str(e.value)


def test_local_gather_tiles_start_on_a_core_boundary() -> None:
    @nki.jit
    def kernel(src, index):
        s, i = _sbuf_copy(src), _sbuf_copy(index)
        r = nl.ndarray((32, 32), dtype=src.dtype, buffer=nl.sbuf)
        nisa.local_gather(dst=r[8:24], src_buffer=s[8:24], index=i[8:24])
        return _out(r)

    with pytest.raises(NkiError, match="'dst' starts at partition 8, not on a GpSimd core boundary"):
        kernel.trace(np.zeros((32, 64), np.float32), np.zeros((32, 2), np.uint16))


# -- nc_n_gather --------------------------------------------------------------------------------------------
def _n_gather_kernel():
    @nki.jit
    def kernel(data, indices):
        d, i = _sbuf_copy(data), _sbuf_copy(indices)
        r = nl.ndarray(indices.shape, dtype=data.dtype, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=r, data=d, indices=i)
        return _out(r)

    return kernel


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16, np.int32, np.uint8,
                                   ml_dtypes.float8_e5m2])  # fmt: skip
@pytest.mark.parametrize("data_shape,idx_shape", [((128, 700), (128, 600)), ((7, 4, 16), (7, 3, 5))])
def test_nc_n_gather(dtype, data_shape, idx_shape) -> None:
    """Within each partition, indices into data's flattened free dims (more than 512 of them, and a 3-D data
    tile), including the first and last element, bit-exact in every dtype."""
    data = _values(data_shape, dtype)
    free = int(np.prod(data_shape[1:]))
    indices = RNG.integers(0, free, idx_shape).astype(np.uint32)
    indices.reshape(idx_shape[0], -1)[:, :2] = [0, free - 1]
    got = nki.simulate(_n_gather_kernel())(data, indices)
    want = np.take_along_axis(data.reshape(data.shape[0], -1), indices.reshape(idx_shape[0], -1).astype(np.int64), 1)
    np.testing.assert_array_equal(got.view(np.uint8), want.reshape(idx_shape).view(np.uint8))


def test_nc_n_gather_out_of_range_index_is_a_simulation_error() -> None:
    data = _values((4, 32), np.float32)
    indices = np.zeros((4, 6), np.uint32)
    indices[2, 3] = 32
    with pytest.raises(SimulationError, match=r"NC_N_GATHER.*indices \(partition, position\) \(2, 3\) = 32 "
                                              r"reaches element 32, outside \[0, 32\)"):  # fmt: skip
        nki.simulate(_n_gather_kernel())(data, indices)


@pytest.mark.parametrize(
    "idx_dtype,dst_dtype,dst_free,message",
    [(np.int32, None, 6, "indices must be uint32, got int32"), (np.uint32, nl.int32, 6, "dst is int32 but data is"),
     (np.uint32, None, 5, "'dst' has 5 elements per partition but 'indices' has 6")],
)  # fmt: skip
def test_nc_n_gather_rejects_bad_calls(idx_dtype, dst_dtype, dst_free: int, message: str) -> None:
    @nki.jit
    def kernel(data, indices):
        d, i = _sbuf_copy(data), _sbuf_copy(indices)
        r = nl.ndarray((4, dst_free), dtype=dst_dtype or data.dtype, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=r, data=d, indices=i)
        return _out(r)

    with pytest.raises(NkiError, match=message):
        kernel.trace(np.zeros((4, 32), np.float32), np.zeros((4, 6), idx_dtype))


def test_nc_n_gather_is_gpsimd_only_so_no_psum() -> None:
    @nki.jit
    def kernel(data, indices):
        d, i = _sbuf_copy(data), _sbuf_copy(indices)
        p = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=d)
        r = nl.ndarray(indices.shape, dtype=data.dtype, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=r, data=p, indices=i)
        return _out(r)

    with pytest.raises(NkiError, match="'data' must be in SBUF, not psum"):
        kernel.trace(np.zeros((4, 32), np.float32), np.zeros((4, 6), np.uint32))


# -- nc_stream_shuffle --------------------------------------------------------------------------------------
def _shuffle_reference(src, dst, mask):
    out = dst.copy()
    for i in range(dst.shape[0]):
        q, lane = divmod(i, 32)
        if mask[lane] != 255:
            out[i] = src[32 * q + mask[lane]]
    return out


def test_nc_stream_shuffle_in_place_docs_example() -> None:
    """Example 1 of the NKI tests: partition i takes partition (i - 1) % 32, in place."""
    mask = [(i - 1) % 32 for i in range(32)]

    @nki.jit
    def kernel(x):
        a = _sbuf_copy(x)
        nisa.nc_stream_shuffle(src=a, dst=a, shuffle_mask=mask)
        return _out(a)

    x = _values((32, 128), np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x[mask])


def test_nc_stream_shuffle_broadcasts_one_partition() -> None:
    """Example 2: one source partition to 32; and nki-library's stream_shuffle_broadcast pattern, a dst of fewer
    than 32 partitions starting on the second quadrant (mask entries past dst are unused)."""

    @nki.jit
    def kernel(x):
        a = _sbuf_copy(x)
        b = nl.ndarray((64, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(src=a[0:1, :], dst=b[0:32, :], shuffle_mask=[0] * 32)
        nisa.nc_stream_shuffle(src=a[0:1, :], dst=b[32:40, :], shuffle_mask=[0] * 32)
        return _out(b[0:40, :])

    x = _values((1, 96), np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), np.repeat(x, 40, axis=0))


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32, np.uint16])
@pytest.mark.parametrize("parts", [32, 64, 128])
def test_nc_stream_shuffle_per_quadrant_with_kept_partitions(dtype, parts: int) -> None:
    """Example 3 (the same mask in every quadrant) with some entries 255: those dst partitions keep their bits."""
    mask = [int(m) for m in RNG.integers(0, 32, 32)]
    for lane in (0, 5, 31):
        mask[lane] = 255

    @nki.jit
    def kernel(x, d):
        a, b = _sbuf_copy(x), _sbuf_copy(d)
        nisa.nc_stream_shuffle(src=a, dst=b, shuffle_mask=mask)
        return _out(b)

    x, d = _values((parts, 40), dtype), _values((parts, 40), dtype)
    got = nki.simulate(kernel)(x, d)
    np.testing.assert_array_equal(got.view(np.uint8), _shuffle_reference(x, d, mask).view(np.uint8))


def test_nc_stream_shuffle_reads_and_writes_psum() -> None:
    mask = list(range(31, -1, -1))

    @nki.jit
    def kernel(x):
        a = _sbuf_copy(x)
        p = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.psum)
        nisa.nc_stream_shuffle(src=a, dst=p, shuffle_mask=mask)
        r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(src=p, dst=r, shuffle_mask=mask)
        return _out(r)

    x = _values((64, 32), np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x)  # reversed twice


@pytest.mark.parametrize(
    "mask,src_parts,dst_slice,message",
    [([0] * 31, 32, (0, 32), "shuffle_mask must have 32 entries, got 31"),
     ([40] + [0] * 31, 32, (0, 32), r"entries must be 0\.\.31 \(a partition of the quadrant\) or 255 \(keep\), got \[40\]"),
     ([3] + [0] * 31, 2, (0, 32), r"shuffle_mask\[0\] = 3 makes dst partition 0 read partition 3 of src, which has 2"),
     ([0] * 32, 64, (32, 96), "with 64 active partitions 'dst' must start at partition 0 or 64, not 32"),
     ([0] * 32, 32, (16, 48), "with 32 active partitions 'dst' must start at partition 0 or 32 or 64 or 96, not 16")],
)  # fmt: skip
def test_nc_stream_shuffle_rejects_bad_masks_and_starts(mask, src_parts: int, dst_slice, message: str) -> None:
    @nki.jit
    def kernel(x):
        a = _sbuf_copy(x)
        b = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(src=a, dst=b[dst_slice[0] : dst_slice[1], :], shuffle_mask=mask)
        return _out(b)

    with pytest.raises(NkiError, match=message):
        kernel.trace(np.zeros((src_parts, 8), np.float32))


def test_nc_stream_shuffle_needs_one_dtype() -> None:
    @nki.jit
    def kernel(x):
        a = _sbuf_copy(x)
        b = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(src=a, dst=b, shuffle_mask=list(range(32)))
        return _out(b)

    with pytest.raises(NkiError, match="dst is bfloat16 but src is float32"):
        kernel.trace(np.zeros((32, 8), np.float32))


# -- sequence_bounds ----------------------------------------------------------------------------------------
def _sequence_bounds_reference(sequence):
    """NKI's numpy reference (test_nki_isa_sequence_bounds.py), written out."""
    n = len(sequence)
    lo, hi = np.zeros(n, np.int64), np.zeros(n, np.int64)
    lo[0] = 0 if sequence[0] != 0 else n
    for i in range(1, n):
        lo[i] = n if sequence[i] == 0 else lo[i - 1] if sequence[i] == sequence[i - 1] else i
    hi[-1] = n if sequence[-1] != 0 else -1
    for i in range(n - 2, -1, -1):
        hi[i] = -1 if sequence[i] == 0 else hi[i + 1] if sequence[i] == sequence[i + 1] else i + 1
    return np.vstack((lo, hi))[None]


def _bounds_kernel(out_dtype=None):
    @nki.jit
    def kernel(ids):
        s = _sbuf_copy(ids)
        r = nl.ndarray((1, 2, ids.shape[1]), dtype=out_dtype or ids.dtype, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=r, segment_ids=s)
        return _out(r)

    return kernel


def test_sequence_bounds_docs_example() -> None:
    ids = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]], np.int32)
    want = [[[9, 1, 1, 3, 3, 3, 9, 7, 7], [-1, 3, 3, 6, 6, 6, -1, 9, 9]]]
    np.testing.assert_array_equal(nki.simulate(_bounds_kernel())(ids), want)


@pytest.mark.parametrize("in_dtype,out_dtype", [(np.float32, None), (np.int32, None), (np.int32, nl.float32),
                                                (np.float32, nl.int32)])  # fmt: skip
@pytest.mark.parametrize("n", [1, 32, 512])
def test_sequence_bounds(in_dtype, out_dtype, n: int) -> None:
    """Sorted ids with padding runs, plus an id that comes back after another (a new run, as in the reference)."""
    ids = np.sort(RNG.integers(0, max(2, n // 4), n))
    if n > 4:
        ids[n // 2] = ids[0]
    ids = ids.reshape(1, n).astype(in_dtype)
    got = nki.simulate(_bounds_kernel(out_dtype))(ids)
    np.testing.assert_array_equal(got, _sequence_bounds_reference(ids[0]))


def test_sequence_bounds_of_only_padding() -> None:
    ids = np.zeros((1, 6), np.float32)
    np.testing.assert_array_equal(nki.simulate(_bounds_kernel())(ids), [[[6] * 6, [-1] * 6]])


@pytest.mark.parametrize("bad", [-1.0, 2.5])
def test_sequence_bounds_rejects_negative_and_fractional_ids(bad: float) -> None:
    ids = np.array([[1, 1, bad, 3]], np.float32)
    with pytest.raises(SimulationError, match=rf"SEQUENCE_BOUNDS.*segment id 2 is {bad}; segment ids must be "
                                              "non-negative integers"):  # fmt: skip
        nki.simulate(_bounds_kernel())(ids)


@pytest.mark.parametrize(
    "ids_shape,ids_dtype,dst_shape,message",
    [((2, 8), np.int32, (2, 2, 8), "'dst' must have one partition"),
     ((1, 8), np.int32, (1, 2, 7), r"dst must be \(1, 2, 8\) for 8 segment ids"),
     ((1, 8), ml_dtypes.bfloat16, (1, 2, 8), "'segment_ids' must be float32 or int32, got bfloat16")],
)  # fmt: skip
def test_sequence_bounds_rejects_bad_calls(ids_shape, ids_dtype, dst_shape, message: str) -> None:
    @nki.jit
    def kernel(ids):
        s = _sbuf_copy(ids)
        r = nl.ndarray(dst_shape, dtype=nl.float32 if ids.dtype == "bfloat16" else ids.dtype, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=r, segment_ids=s)
        return _out(r)

    with pytest.raises(NkiError, match=message):
        kernel.trace(np.zeros(ids_shape, ids_dtype))


# -- dma_compute --------------------------------------------------------------------------------------------
def test_dma_compute_hbm_sum_like_qkv_tkg() -> None:
    """qkv_tkg's fused residual add: three HBM tensors summed into a new HBM tensor (as keywords-free call with a
    tuple of sources and scales, exactly as the kernel spells it)."""

    @nki.jit
    def kernel(a, b, c):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_compute(out, (a, b, c), scales=(1.0, 1.0, 1.0), reduce_op=nl.add)
        return out

    a, b, c = (_values((64, 256), np.float32) for _ in range(3))
    want = ((a + b).astype(np.float32) + c).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(a, b, c), want)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16, np.int32, np.int8])
@pytest.mark.parametrize("count", [1, 2, 5])
def test_dma_compute_dtypes_and_source_counts(dtype, count: int) -> None:
    """fp32 accumulation of every source left to right, one cast to dst's dtype at the end: sources mix HBM and
    SBUF, a reshaped HBM view and a bfloat16 source; dst in SBUF."""

    @nki.jit
    def kernel(*xs):
        srcs = [x if k % 2 == 0 else _sbuf_copy(x) for k, x in enumerate(xs)]
        srcs[0] = xs[0].reshape((xs[0].shape[0] * 2, xs[0].shape[1] // 2))  # an HBM view of another shape
        r = nl.ndarray(xs[0].shape, dtype=xs[0].dtype, buffer=nl.sbuf)
        nisa.dma_compute(dst=r, srcs=srcs, reduce_op=nl.add)
        return _out(r)

    xs = [_values((32, 64), dtype) for _ in range(count)]
    if count > 1:
        xs[1] = _values((32, 64), ml_dtypes.bfloat16)
    total = xs[0].astype(np.float32)
    for x in xs[1:]:
        total = (total + x.astype(np.float32)).astype(np.float32)
    got = nki.simulate(kernel)(*xs)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        want = np.clip(np.rint(total), info.min, info.max).astype(dtype)
    else:
        want = total.astype(dtype)
    np.testing.assert_array_equal(got, want)


def test_dma_compute_accumulates_into_its_own_destination() -> None:
    """The read-modify-write shape of topk_reduce (dst also a source), without indirect indexing."""

    @nki.jit
    def kernel(x, y):
        acc = _sbuf_copy(x)
        ys = _sbuf_copy(y)
        for _ in range(3):
            nisa.dma_compute(dst=acc, srcs=[ys, acc], reduce_op=nl.add, unique_indices=True)
        return _out(acc)

    x, y = _values((16, 32), np.float32), _values((16, 32), np.float32)
    want = x
    for _ in range(3):
        want = (y + want).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(x, y), want)


@pytest.mark.parametrize(
    "call,message",
    [(lambda d, xs: nisa.dma_compute(d, xs[:1] * 17, nl.add), "17 sources, at most 16"),
     (lambda d, xs: nisa.dma_compute(d, xs[:2], nl.multiply), "reduce_op must be nl.add, got multiply"),
     (lambda d, xs: nisa.dma_compute(d, xs[:2], nl.add, scales=[1.0, 2.0]), r"every scale must be 1\.0"),
     (lambda d, xs: nisa.dma_compute(d, xs[:2], nl.add, scales=[1.0]), "1 scales for 2 sources"),
     (lambda d, xs: nisa.dma_compute(d, xs[0], nl.add), "srcs must be a list of tensors"),
     (lambda d, xs: nisa.dma_compute(d, [xs[0], xs[0][0:8, :]], nl.add),
      "element count mismatch: dst has 512 elements, srcs\\[1\\] has 256"),
     (lambda d, xs: nisa.dma_compute(d, xs[:2], nl.add, oob_mode="wrap"), "invalid oob_mode 'wrap'")],
)  # fmt: skip
def test_dma_compute_rejects_bad_calls(call, message: str) -> None:
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        call(out, [x] * 6)
        return out

    with pytest.raises(NkiError, match=message):
        kernel.trace(np.zeros((16, 32), np.float32))


def test_dma_compute_cannot_touch_psum() -> None:
    @nki.jit
    def kernel(x):
        p = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.psum)
        nisa.memset(dst=p, value=0.0)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_compute(dst=out, srcs=[x, p], reduce_op=nl.add)
        return out

    with pytest.raises(NkiError, match=r"'srcs\[1\]' cannot be in PSUM"):
        kernel.trace(np.zeros((16, 32), np.float32))


# -- nl.gather_flattened ------------------------------------------------------------------------------------
def test_gather_flattened_docs_example_shape() -> None:
    """The shape of the NKI example (every 5th element of each 64-element row), indices uint32 in SBUF."""

    @nki.jit
    def kernel(d, i):
        return _store(nl.gather_flattened(data=nl.load(d), indices=nl.load(i)))

    d = _values((32, 64), np.float32)
    i = np.tile(np.arange(10, dtype=np.uint32) * 5, (32, 1))
    got = nki.simulate(kernel)(d, i)
    assert got.shape == (32, 10)
    np.testing.assert_array_equal(got, np.take_along_axis(d, i.astype(np.int64), axis=-1))


def _store(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


@pytest.mark.parametrize("idx_dtype", [np.uint32, np.int32, np.uint16])
@pytest.mark.parametrize("out_dtype", [None, nl.bfloat16])
def test_gather_flattened(idx_dtype, out_dtype) -> None:
    """3-D data (free dims flattened), integer indices of any width (converted to uint32), a dtype= cast, and data
    coming from PSUM (copied to SBUF for GpSimd)."""

    @nki.jit
    def kernel(d, i):
        x = nl.load(d)
        p = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=x)
        return _store(nl.gather_flattened(p, nl.load(i), dtype=out_dtype))

    d = _values((16, 4, 8), np.float32)
    i = RNG.integers(0, 32, (16, 3, 4)).astype(idx_dtype)
    got = nki.simulate(kernel)(d, i)
    want = np.take_along_axis(d.reshape(16, -1), i.reshape(16, -1).astype(np.int64), 1).reshape(i.shape)
    np.testing.assert_array_equal(got, want.astype(ml_dtypes.bfloat16) if out_dtype else want)


def test_gather_flattened_negative_index_is_out_of_range() -> None:
    @nki.jit
    def kernel(d, i):
        return _store(nl.gather_flattened(nl.load(d), nl.load(i)))

    i = np.zeros((4, 3), np.int32)
    i[1, 2] = -1  # wraps to 4294967295 as uint32
    with pytest.raises(SimulationError, match=r"NC_N_GATHER.*\(1, 2\) = 4294967295"):
        nki.simulate(kernel)(_values((4, 8), np.float32), i)


@pytest.mark.parametrize(
    "idx_shape,idx_dtype,axis,message",
    [((4, 3), np.float32, 0, "indices must have an integer dtype"),
     ((2, 3), np.uint32, 0, "indices have 2 partitions, data has 4"),
     ((4, 3), np.uint32, 2, "axis 2 is out of range for a rank-2 tile")],
)  # fmt: skip
def test_gather_flattened_rejects_bad_calls(idx_shape, idx_dtype, axis: int, message: str) -> None:
    @nki.jit
    def kernel(d, i):
        return _store(nl.gather_flattened(nl.load(d), nl.load(i), axis=axis))

    with pytest.raises(NkiError, match=message):
        kernel.trace(np.zeros((4, 8), np.float32), np.zeros(idx_shape, idx_dtype))
