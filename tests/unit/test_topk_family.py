"""The top-k family end to end against numpy: ``nisa.max8``, ``nc_find_index8`` and ``nc_match_replace8`` (VectorE),
``nonzero_with_count`` and ``topk`` (GpSimd).

Every reference below is a plain loop over the documented rule, written independently of the simulator's
vectorised code: the duplicate pairing of the two matchers, the all-ones not-found sentinel of each index dtype,
the partitions nonzero_with_count touches and the 16-partition snake layout of topk.
"""

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
from kernel_harness import load as _sbuf_copy, store as _out  # noqa: E402

RNG = np.random.default_rng(23)
BF16 = ml_dtypes.bfloat16


def _distinct(shape, dtype=np.float32) -> np.ndarray:
    """Values distinct within each partition (a permutation of a scaled range), so the top 8 are unambiguous."""
    p, f = shape[0], int(np.prod(shape[1:]))
    perm = np.argsort(RNG.random((p, f)), axis=1)
    return ((perm - f / 2) / 4).astype(dtype).reshape(shape)


# -- numpy references -----------------------------------------------------------------------------------------------
def ref_max8(x: np.ndarray) -> np.ndarray:
    rows = x.reshape(x.shape[0], -1).astype(np.float32)
    return -np.sort(-rows, axis=1)[:, :8]


def ref_match(data: np.ndarray, vals: np.ndarray, slots: range) -> list[list[int | None]]:
    """Per partition: serve the slots in ``slots`` order, each taking the first unclaimed position equal to it."""
    rows, out = data.reshape(data.shape[0], -1).astype(np.float32), []
    for row, v in zip(rows, vals.reshape(vals.shape[0], -1).astype(np.float32), strict=True):
        taken: set[int] = set()
        found: list[int | None] = [None] * 8
        for i in slots:
            for j, x in enumerate(row):
                if x == v[i] and j not in taken:
                    taken.add(j)
                    found[i] = j
                    break
        out.append(found)
    return out


def ref_find_index8(data, vals, dtype) -> np.ndarray:
    sentinel = np.iinfo(dtype).max
    return np.array([[sentinel if j is None else j for j in r] for r in ref_match(data, vals, range(8))], dtype)


def ref_match_replace8(data, vals, imm, idx_dtype=np.uint32) -> tuple[np.ndarray, np.ndarray]:
    matches = ref_match(data, vals, range(7, -1, -1))
    out = data.reshape(data.shape[0], -1).copy()
    for p, r in enumerate(matches):
        for j in r:
            if j is not None:
                out[p, j] = imm
    sentinel = np.iinfo(idx_dtype).max
    idx = np.array([[sentinel if j is None else j for j in r] for r in matches], idx_dtype)
    return out.reshape(data.shape), idx


def ref_nonzero(x, offset, pad) -> np.ndarray:
    rows = []
    for row in x:
        hits = [i + offset for i, v in enumerate(row) if v != 0]
        rows.append(hits + [pad] * (len(row) - len(hits)) + [len(hits)])
    return np.array(rows, np.int64).astype(np.int32)


# -- max8 -------------------------------------------------------------------------------------------------------------
def _max8_kernel(dst_dtype=None):
    @nki.jit
    def kernel(x):
        xs = _sbuf_copy(x)
        m = nl.ndarray((x.shape[0], 8), dtype=dst_dtype or x.dtype, buffer=nl.sbuf)
        nisa.max8(dst=m, src=xs)
        return _out(m)

    return kernel


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float16, np.int32, np.uint16])
def test_max8_dtypes(dtype) -> None:
    if np.dtype(dtype).kind in "iu":
        x = RNG.integers(0, 1 << 14, (128, 96)).astype(dtype)
    else:
        x = (RNG.standard_normal((128, 96)) * 8).astype(dtype)
    got = nki.simulate(_max8_kernel())(x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, ref_max8(x).astype(dtype))


@pytest.mark.parametrize("shape", [(128, 8), (32, 16384), (64, 4, 24)])
def test_max8_sizes_and_3d_source(shape) -> None:
    x = _distinct(shape)
    np.testing.assert_array_equal(nki.simulate(_max8_kernel())(x), ref_max8(x))


def test_max8_keeps_duplicates_and_converts_to_dst_dtype() -> None:
    x = _distinct((16, 40))
    x[:, 3] = x[:, 7] = x[:, 20] = 100.0  # three-way tie at the top: three slots
    x[:5, 30] = np.float32(1 / 3)
    got = nki.simulate(_max8_kernel(nl.bfloat16))(x)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got[:, :3], np.full((16, 3), 100, BF16))
    np.testing.assert_array_equal(got, ref_max8(x).astype(BF16))


@pytest.mark.parametrize("shape,dst,message", [
    ((128, 7), (128, 8), "max8's src has 7 elements per partition, not between 8 and 16384"),
    ((4, 16385), (4, 8), "max8's src has 16385 elements per partition, not between 8 and 16384"),
    ((128, 64), (128, 4), r"max8: dst must be a 2-D \[128, 8\] tile, got shape \(128, 4\)"),
    ((128, 64), (128, 2, 4), r"max8: dst must be a 2-D \[128, 8\] tile"),
    ((8, 2, 2, 4), (8, 8), "max8: 'src' can be at most 3-dimensional"),
])  # fmt: skip
def test_max8_rejects_bad_shapes(shape, dst, message) -> None:
    @nki.jit
    def kernel(x):
        m = nl.ndarray(dst, dtype=x.dtype, buffer=nl.sbuf)
        nisa.max8(dst=m, src=_sbuf_copy(x))
        return _out(m)

    with pytest.raises(NkiError, match=message):
        kernel.trace(np.zeros(shape, np.float32))


# -- nc_find_index8 ---------------------------------------------------------------------------------------------------
def _find_kernel(idx_dtype):
    @nki.jit
    def kernel(data, vals):
        d, v = _sbuf_copy(data), _sbuf_copy(vals)
        idx = nl.ndarray((data.shape[0], 8), dtype=idx_dtype, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=idx, data=d, vals=v)
        return _out(idx)

    return kernel


@pytest.mark.parametrize("idx_dtype", [np.uint32, np.uint16])
def test_find_index8_of_max8(idx_dtype) -> None:
    @nki.jit
    def kernel(x):
        xs = _sbuf_copy(x)
        m = nl.ndarray((x.shape[0], 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.max8(dst=m, src=xs)
        idx = nl.ndarray((x.shape[0], 8), dtype=idx_dtype, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=idx, data=xs, vals=m)
        return _out(idx)

    x = _distinct((128, 512))
    got = nki.simulate(kernel)(x)
    assert got.dtype == np.dtype(idx_dtype)
    np.testing.assert_array_equal(got, np.argsort(-x, axis=1)[:, :8].astype(idx_dtype))


def test_find_index8_pairs_duplicate_vals_with_matches_in_ascending_order() -> None:
    # The docs' example: duplicate vals take successive matches, left to right.
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    got = nki.simulate(_find_kernel(np.uint32))(data, vals)
    np.testing.assert_array_equal(got, [[2, 4, 5, 6, 7, 8, 9, 10]])
    np.testing.assert_array_equal(got, ref_find_index8(data, vals, np.uint32))


@pytest.mark.parametrize("idx_dtype,sentinel", [(np.uint32, 0xFFFFFFFF), (np.uint16, 0xFFFF)])
def test_find_index8_not_found_is_all_ones(idx_dtype, sentinel) -> None:
    data = np.tile(np.arange(16, dtype=np.float32), (32, 1))
    vals = np.tile(np.array([3, 99, 5, 5, 5, -1, np.nan, 0], np.float32), (32, 1))
    got = nki.simulate(_find_kernel(idx_dtype))(data, vals)
    # the third 5 finds no third match; 99, -1 and NaN match nothing
    np.testing.assert_array_equal(got[0], np.array([3, sentinel, 5, sentinel, sentinel, sentinel, sentinel, 0],
                                                   idx_dtype))  # fmt: skip
    np.testing.assert_array_equal(got, ref_find_index8(data, vals, idx_dtype))


def test_find_index8_random_ties_3d_data_and_vals() -> None:
    data = RNG.integers(0, 6, (64, 4, 8)).astype(np.float32)  # many repeats per partition
    vals = RNG.integers(0, 8, (64, 2, 4)).astype(np.float32)  # some absent, some repeated
    got = nki.simulate(_find_kernel(np.uint32))(data, vals)
    np.testing.assert_array_equal(got, ref_find_index8(data, vals, np.uint32))


def test_find_index8_compares_in_fp32_across_dtypes() -> None:
    data = (RNG.standard_normal((128, 16384)) * 4).astype(BF16)
    vals = data[:, RNG.integers(0, 16384, 8)].astype(np.float32)  # bf16 values, given as fp32
    got = nki.simulate(_find_kernel(np.uint16))(data, vals)
    np.testing.assert_array_equal(got, ref_find_index8(data, vals, np.uint16))


@pytest.mark.parametrize("idx_dtype,vals_shape,message", [
    (np.int32, (16, 8), "nc_find_index8: 'dst' must be uint16 or uint32, got int32"),
    (np.uint32, (16, 7), "nc_find_index8: 'vals' must hold 8 elements on each of 16 partitions"),
])  # fmt: skip
def test_find_index8_rejects(idx_dtype, vals_shape, message) -> None:
    with pytest.raises(NkiError, match=message):
        _find_kernel(idx_dtype).trace(np.zeros((16, 64), np.float32), np.zeros(vals_shape, np.float32))


# -- nc_match_replace8 ------------------------------------------------------------------------------------------------
def _replace_kernel(imm, with_idx=True, idx_dtype=np.uint32, in_place=False):
    @nki.jit
    def kernel(data, vals):
        d, v = _sbuf_copy(data), _sbuf_copy(vals)
        out = d if in_place else nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
        idx = nl.ndarray((data.shape[0], 8), dtype=idx_dtype, buffer=nl.sbuf) if with_idx else None
        nisa.nc_match_replace8(dst=out, data=d, vals=v, imm=imm, dst_idx=idx)
        return (_out(out), _out(idx)) if with_idx else _out(out)

    return kernel


def test_match_replace8_docs_example_pairs_duplicates_in_descending_slot_order() -> None:
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    out, idx = nki.simulate(_replace_kernel(0.0))(data, vals)
    np.testing.assert_array_equal(idx, [[2, 10, 9, 8, 7, 6, 5, 4]])
    np.testing.assert_array_equal(out, [[1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0]])


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_match_replace8_of_max8_like_the_docs(dtype, in_place: bool) -> None:
    # The docs' test: replace the 8 largest of each row by -inf and report where they were.
    @nki.jit
    def kernel(a):
        t = _sbuf_copy(a)
        m = nl.ndarray((a.shape[0], 8), dtype=a.dtype, buffer=nl.sbuf)
        nisa.max8(dst=m, src=t)
        idx = nl.ndarray((a.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
        out = t if in_place else nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.nc_match_replace8(dst=out, data=t, vals=m, imm=float("-inf"), dst_idx=idx)
        return _out(out), _out(idx)

    a = RNG.random((128, 512)).astype(dtype)
    out, idx = nki.simulate(kernel)(a)
    want_out, want_idx = ref_match_replace8(a, ref_max8(a), -np.inf)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(idx, want_idx)
    assert (np.isneginf(out.astype(np.float32)).sum(axis=1) == 8).all()


@pytest.mark.parametrize("idx_dtype", [np.uint32, np.uint16])
def test_match_replace8_random_ties_3d_and_absent_values(idx_dtype) -> None:
    data = RNG.integers(0, 5, (32, 4, 6)).astype(np.float32)
    vals = RNG.integers(0, 7, (32, 8)).astype(np.float32)  # 5 and 6 are absent; repeats exceed some matches
    out, idx = nki.simulate(_replace_kernel(-7.5, idx_dtype=idx_dtype))(data, vals)
    want_out, want_idx = ref_match_replace8(data, vals, -7.5, idx_dtype)
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_array_equal(out, want_out)
    assert (idx == np.iinfo(idx_dtype).max).any()  # the sentinel did occur


def test_match_replace8_without_dst_idx() -> None:
    data = _distinct((64, 100))
    vals = np.concatenate([data[:, [5, 50, 99]], np.full((64, 5), 1e9, np.float32)], axis=1)
    got = nki.simulate(_replace_kernel(42.0, with_idx=False))(data, vals)
    want = data.copy()
    want[:, [5, 50, 99]] = 42.0
    np.testing.assert_array_equal(got, want)


def test_match_replace8_rejects_a_signed_index_tile() -> None:
    with pytest.raises(NkiError, match="nc_match_replace8: 'dst_idx' must be uint16 or uint32, got int32"):
        _replace_kernel(0.0, idx_dtype=np.int32).trace(np.zeros((8, 16), np.float32), np.zeros((8, 8), np.float32))


# -- nonzero_with_count -----------------------------------------------------------------------------------------------
def _nonzero_kernel(offset=0, pad=-1, fill=777):
    @nki.jit(platform_target="trn2")
    def kernel(x):
        xs = _sbuf_copy(x)
        out = nl.ndarray((x.shape[0], x.shape[1] + 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=out, value=fill)  # rows the instruction does not write keep this
        nisa.nonzero_with_count(dst=out, src=xs, index_offset=offset, padding_val=pad)
        return _out(out)

    return kernel


def test_nonzero_with_count_docs_example() -> None:
    x = np.zeros((1, 8), np.float32)
    x[0] = [0, 1, 1, 0, 0, 1, 0, 0]
    got = nki.simulate(_nonzero_kernel(offset=16))(x)
    np.testing.assert_array_equal(got, [[17, 18, 21, -1, -1, -1, -1, -1, 3]])


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_nonzero_with_count_touches_only_every_16th_partition(dtype) -> None:
    x = (RNG.random((128, 64)) < 0.3).astype(dtype) * RNG.integers(1, 9, (128, 64)).astype(dtype)
    x[0] = 0  # count 0: all padding
    x[16] = 5  # count 64: no padding
    if dtype == np.float32:
        x[32, :4] = [-0.0, np.nan, -2.5, 0.0]  # -0.0 is zero, NaN is not
    got = nki.simulate(_nonzero_kernel(offset=-3, pad=12345))(x)
    rows = np.arange(0, 128, 16)
    np.testing.assert_array_equal(got[rows], ref_nonzero(x[rows], -3, 12345))
    others = np.setdiff1d(np.arange(128), rows)
    assert (got[others] == 777).all()
    assert got[0, -1] == 0 and got[16, -1] == 64


def test_nonzero_with_count_needs_gen3_and_checks_its_operands() -> None:
    kernel = _nonzero_kernel()
    with pytest.raises(NkiError, match="nonzero_with_count is not available on gen2"):
        nki.jit(kernel.func, platform_target="trn1").trace(np.zeros((128, 8), np.float32))

    @nki.jit(platform_target="trn2")
    def bad(x, width, dtype):
        out = nl.ndarray((x.shape[0], width), dtype=dtype, buffer=nl.sbuf)
        nisa.nonzero_with_count(dst=out, src=_sbuf_copy(x))
        return _out(out)

    x = np.zeros((128, 8), np.float32)
    with pytest.raises(NkiError, match="needs 9 elements per partition"):
        bad.trace(x, 8, nl.int32)
    with pytest.raises(NkiError, match="'dst' must be int32, got float32"):
        bad.trace(x, 9, nl.float32)
    with pytest.raises(NkiError, match="'src' must be float32 or int32, got bfloat16"):
        bad.trace(x.astype(BF16), 9, nl.int32)


# -- topk -------------------------------------------------------------------------------------------------------------
def ref_topk(src: np.ndarray, n: int, k: int, fill) -> tuple[np.ndarray, np.ndarray]:
    """Per 16-partition group: de-snake, rank (value descending, snake index ascending), keep k, ascending, re-snake."""
    vals = np.full((src.shape[0], k), fill[0], BF16)
    idx = np.full((src.shape[0], k), fill[1], np.uint32)
    for g in range(0, src.shape[0], 16):
        snake = [float(src[g + j % 16, j // 16]) for j in range(n)]
        ranked = sorted(range(n), key=lambda j: (-snake[j], j))[:k][::-1]
        for r, j in enumerate(ranked):
            vals[g + r % 16, r // 16] = snake[j]
            idx[g + r % 16, r // 16] = j
    return vals, idx


def _topk_kernel(n: int, k: int, fill=(-5.0, 77)):
    @nki.jit
    def kernel(src):
        s = _sbuf_copy(src)
        v = nl.ndarray((src.shape[0], k), dtype=nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((src.shape[0], k), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.memset(dst=v, value=fill[0])  # snake positions >= k are not written
        nisa.memset(dst=i, value=fill[1])
        nisa.topk(val_dst=v, idx_dst=i, src=s, n=n)
        return _out(v), _out(i)

    return kernel


@pytest.mark.parametrize("parts,n,src_x,k", [
    (128, 42, 3, 8),  # the docs' example: 8 groups, a partial last snake column
    (16, 8, 1, 1),  # the smallest n and k
    (32, 8, 1, 8),  # k = n
    (64, 100, 7, 17),  # k spills into a second snake column, which is partly unwritten
    (48, 512, 40, 64),  # src wider than the snake needs
    (16, 65535, 4096, 300),  # the largest n
])  # fmt: skip
def test_topk_snake_layout(parts: int, n: int, src_x: int, k: int) -> None:
    src = (RNG.standard_normal((parts, src_x)) * 100).astype(BF16)
    vals, idx = nki.simulate(_topk_kernel(n, k))(src)
    want_vals, want_idx = ref_topk(src, n, k, (-5.0, 77))
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_array_equal(vals, want_vals)


def test_topk_ties_rank_the_lower_snake_index_higher() -> None:
    src = RNG.integers(-3, 4, (32, 8)).astype(BF16)  # 7 distinct values over 120 elements: many ties
    vals, idx = nki.simulate(_topk_kernel(120, 20))(src)
    want_vals, want_idx = ref_topk(src, 120, 20, (-5.0, 77))
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_array_equal(vals, want_vals)
    top = [idx[r % 16, r // 16] for r in range(20)]  # group 0, ascending: the last result is the best
    assert top[-1] == min(j for j in range(120) if src[j % 16, j // 16] == src.max())


@pytest.mark.parametrize("change,message", [
    ({"parts": 24}, "topk works on groups of 16 partitions, src has 24"),
    ({"n": 7}, r"topk: n must satisfy 8 <= n < 65536, got 7"),
    ({"n": 65536, "src_x": 4096}, r"topk: n must satisfy 8 <= n < 65536, got 65536"),
    ({"n": 49}, r"topk: a 16-partition snake of n = 49 needs src free size >= 4, got 3"),
    ({"k": 50}, r"topk: k = 50 \(val_dst's free size\) exceeds n = 42"),
    ({"src_dtype": np.float32}, "topk: 'src' must be bfloat16, got float32"),
    ({"idx_dtype": nl.uint16}, "topk: 'idx_dst' must be uint32, got uint16"),
])  # fmt: skip
def test_topk_rejects(change: dict, message: str) -> None:
    cfg = {"parts": 32, "n": 42, "src_x": 3, "k": 8, "src_dtype": BF16, "idx_dtype": nl.uint32, **change}

    @nki.jit
    def kernel(src):
        v = nl.ndarray((src.shape[0], cfg["k"]), dtype=nl.bfloat16, buffer=nl.sbuf)
        i = nl.ndarray((src.shape[0], cfg["k"]), dtype=cfg["idx_dtype"], buffer=nl.sbuf)
        nisa.topk(val_dst=v, idx_dst=i, src=_sbuf_copy(src), n=cfg["n"])
        return _out(v)

    with pytest.raises(NkiError, match=message):
        kernel.trace(np.zeros((cfg["parts"], cfg["src_x"]), cfg["src_dtype"]))


def test_topk_cost_is_the_published_4n_plus_k() -> None:
    from nkic.target.costs import instr_cycles
    from nkic.target.isa import Instr, Operand

    def sb(dtype: str, free: int) -> Operand:
        return Operand("sbuf", dtype, ((1, 128), (1, free)))

    ins = Instr("TOPK", "pool", (sb("bfloat16", 64), sb("uint32", 64), sb("bfloat16", 256)), imms=(4000,))
    assert instr_cycles(ins) == 4 * 4000 + 64
