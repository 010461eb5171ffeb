"""MX (OCP microscaling): ``nisa.quantize_mx`` and ``nisa.nc_matmul_mx`` end to end against numpy references.

The references here are written independently of ``runtime/semantics.py``: scales from ``math.frexp`` per group,
packing and unpacking with explicit byte and nibble arithmetic, the matmul as an einsum in float64.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402

RNG = np.random.default_rng(2025)
BF16 = ml_dtypes.bfloat16
ELEMENT = {
    "float8_e4m3fn_x4": ml_dtypes.float8_e4m3fn,
    "float8_e5m2_x4": ml_dtypes.float8_e5m2,
    "float4_e2m1fn_x4": ml_dtypes.float4_e2m1fn,
}
E_MAX = {"float8_e4m3fn_x4": 8, "float8_e5m2_x4": 15}
STORAGE = {"float8_e4m3fn_x4": np.uint32, "float8_e5m2_x4": np.uint32, "float4_e2m1fn_x4": np.uint16}
FILL = 0x55  # what the scale tile holds before quantize_mx: rows without scales must keep it


# -- references ---------------------------------------------------------------------------------------------
def scale_row(g: int) -> int:
    # the docs' mx_cpu_utils.get_p_contiguous_scale: hw row of contiguous scale row i is i // 4 * 32 + i % 4
    return g // 4 * 32 + g % 4


def ref_scale_byte(group: np.ndarray, e_max: int) -> int:
    amax = float(np.max(np.abs(group.astype(np.float64))))
    if not math.isfinite(amax):
        return 0xFF
    if amax == 0.0:
        return 0
    _, e = math.frexp(amax)
    return min(max(e - 1 - (e_max - 1) + 127, 0), 254)


def ref_quantize(x: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(P, F) -> (packed words (P, F // 4), scale bytes (P // 8, F // 4))."""
    p, f = x.shape
    scales = np.zeros((p // 8, f // 4), np.uint8)
    q = np.zeros((p, f), ELEMENT[dtype])
    for g in range(p // 8):
        for j in range(f // 4):
            block = x[8 * g : 8 * g + 8, 4 * j : 4 * j + 4]
            s = ref_scale_byte(block, E_MAX[dtype])
            scales[g, j] = s
            factor = 2.0 ** (s - 127) if s != 0xFF else np.nan
            q[8 * g : 8 * g + 8, 4 * j : 4 * j + 4] = (block.astype(np.float64) / factor).astype(ELEMENT[dtype])
    raw = q.view(np.uint8).astype(np.uint32).reshape(p, f // 4, 4)
    words = raw[..., 0] | raw[..., 1] << 8 | raw[..., 2] << 16 | raw[..., 3] << 24
    return words.astype(np.uint32), scales


def unpack(words: np.ndarray, dtype: str) -> np.ndarray:
    """Packed words -> (K, 4F) float64 values, value q of a word in bits [q * bits, (q + 1) * bits)."""
    bits = 4 if dtype == "float4_e2m1fn_x4" else 8
    w = words.astype(np.uint64)
    codes = np.stack([(w >> (bits * q)) & ((1 << bits) - 1) for q in range(4)], axis=-1).astype(np.uint8)
    return codes.reshape(words.shape[0], -1).view(ELEMENT[dtype]).astype(np.float64)


def pack_codes(values: np.ndarray, dtype: str) -> np.ndarray:
    """(K, 4F) values of the element type -> packed words (the inverse of ``unpack``)."""
    bits = 4 if dtype == "float4_e2m1fn_x4" else 8
    codes = values.astype(ELEMENT[dtype]).view(np.uint8).astype(np.uint64) & ((1 << bits) - 1)
    codes = codes.reshape(values.shape[0], -1, 4)
    return sum(codes[..., q] << (bits * q) for q in range(4)).astype(STORAGE[dtype])


def ref_matmul_mx(st, mv, st_scale, mv_scale, st_dtype, mv_dtype) -> np.ndarray:
    def real(words, scales, dtype):
        v = unpack(words, dtype).reshape(words.shape[0], words.shape[1], 4)
        return v * np.repeat(2.0 ** (scales.astype(np.float64) - 127), 8, axis=0)[:, :, None]

    return np.einsum("kiq,kjq->ij", real(st, st_scale, st_dtype), real(mv, mv_scale, mv_dtype))


# -- kernels ------------------------------------------------------------------------------------------------
def _load_scales(scale_hbm, rows: int, dtype, start: int = 0):
    """Spread contiguous (K // 8, F) scales over a (start + rows, F) SBUF tile, 4 rows per 32-partition quadrant."""
    groups, f = scale_hbm.shape
    tile = nl.ndarray((start + rows, f), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=tile, value=0)
    for g in range(groups):
        r = start + scale_row(g)
        nisa.dma_copy(dst=tile[r : r + 1, :], src=scale_hbm[g : g + 1, :])
    return tile[start:, :].view(dtype)  # the same bytes, read as float8_e8m0fnu (a DMA would convert values)


@nki.jit(platform_target="trn3")
def quantize_kernel(x, dtype, scale_dtype):
    p, f = x.shape
    xs = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    q = nl.ndarray((p, f // 4), dtype=dtype, buffer=nl.sbuf)
    s = nl.ndarray((p, f // 4), dtype=scale_dtype, buffer=nl.sbuf)
    nisa.memset(dst=s.view(nl.uint8), value=FILL)
    nisa.quantize_mx(dst=q, src=xs, dst_scale=s)
    q_out = nl.ndarray((p, f // 4), dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=q_out, src=q.view(nl.uint32))
    s_out = nl.ndarray((p, f // 4), dtype=nl.uint8, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=s_out, src=s.view(nl.uint8))
    return q_out, s_out


@nki.jit(platform_target="trn3")
def matmul_kernel(st, st_scale, mv, mv_scale, st_dtype, mv_dtype, out_dtype, scale_dtype, scale_start, twice):
    k, m = st.shape
    n = mv.shape[1]
    st_sb = nl.ndarray((k, m), dtype=st_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=st_sb, src=st.view(st_dtype))
    mv_sb = nl.ndarray((k, n), dtype=mv_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv_sb, src=mv.view(mv_dtype))
    rows = (k // 32 - 1) * 32 + 4
    st_s = _load_scales(st_scale, rows, scale_dtype, scale_start)
    mv_s = _load_scales(mv_scale, rows, scale_dtype)
    res = nl.ndarray((m, n), dtype=out_dtype, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=res, stationary=st_sb, moving=mv_sb, stationary_scale=st_s, moving_scale=mv_s)
    if twice:  # the second one accumulates (NKI's implicit rule: PSUM already written)
        nisa.nc_matmul_mx(dst=res, stationary=st_sb, moving=mv_sb, stationary_scale=st_s, moving_scale=mv_s)
    out_sb = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out_sb, src=res)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=out_sb)
    return out


# -- quantize_mx --------------------------------------------------------------------------------------------
def _check_quantize(x: np.ndarray, dtype: str, scale_dtype: str = "float8_e8m0fnu") -> tuple[np.ndarray, np.ndarray]:
    words, scales = nki.simulate(quantize_kernel)(x, getattr(nl, dtype), getattr(nl, scale_dtype))
    want_words, want_scales = ref_quantize(x, dtype)
    p = x.shape[0]
    rows = [scale_row(g) for g in range(p // 8)]
    np.testing.assert_array_equal(scales[rows], want_scales)
    others = np.setdiff1d(np.arange(p), rows)
    assert (scales[others] == FILL).all(), "rows without scales must be left as they were"
    np.testing.assert_array_equal(words, want_words)
    return words, scales[rows]


@pytest.mark.parametrize("scale_dtype", ["float8_e8m0fnu", "uint8"])
@pytest.mark.parametrize("src_dtype", [BF16, np.float16])
@pytest.mark.parametrize("dtype", ["float8_e4m3fn_x4", "float8_e5m2_x4"])
@pytest.mark.parametrize("p", [32, 64, 128])
def test_quantize_mx_matches_numpy(p: int, dtype: str, src_dtype, scale_dtype: str) -> None:
    # magnitudes spread over 2**-12 .. 2**12 so groups get different scales
    x = RNG.standard_normal((p, 64)) * 2.0 ** RNG.integers(-12, 12, (p, 1))
    _check_quantize(x.astype(src_dtype), dtype, scale_dtype)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn_x4", "float8_e5m2_x4"])
def test_quantize_mx_scale_selection_and_edge_groups(dtype: str) -> None:
    x = np.zeros((32, 20), np.float32)
    e_max = E_MAX[dtype]
    x[0:8, 0:4] = 1.0  # amax a power of two: scale 2**(0 - (E_max - 1))
    x[8:16, 0:4] = 0.5
    x[8, 3] = 1.9921875  # amax just below a power of two: floor(log2) = 0, same scale as 1.0
    x[16:24, 0:4] = 0.5  # amax 2**-1: half that scale
    # group (0, 1) stays all-zero: scale byte 0 (2**-127)
    x[0:8, 8:12] = -3.0e-39  # fp32 subnormal-range values (bf16 subnormals): the exponent clamps to byte 0
    x[16:24, 12:16] = 65280.0  # 1.9921875 * 2**15, the largest bf16 below 2**16
    x[24:32, 16:20] = -2.0**-24
    x = x.astype(BF16)
    _, scales = _check_quantize(x, dtype)
    assert scales[0, 0] == 127 - (e_max - 1)
    assert scales[1, 0] == 127 - (e_max - 1)
    assert scales[2, 0] == 127 - 1 - (e_max - 1)
    assert scales[0, 1] == 0 and scales[0, 2] == 0
    assert scales[2, 3] == 127 + 15 - (e_max - 1)
    assert scales[3, 4] == 127 - 24 - (e_max - 1)


def test_quantize_mx_largest_values_do_not_saturate() -> None:
    # The doubled block scale keeps amax / X below 2**E_max: 1.9921875 * 2**7 = 255 rounds to 256 in float8_e4m3fn
    # (a representable value, not the 448 maximum and not NaN); with the OCP scale it would be 510 -> saturated.
    x = np.full((32, 4), 0.25, np.float32)
    x[5, 2] = 1.9921875
    words, scales = _check_quantize(x.astype(BF16), "float8_e4m3fn_x4")
    values = unpack(words, "float8_e4m3fn_x4") * 2.0 ** (scales[0, 0].astype(np.float64) - 127)
    assert values[5, 2] == 2.0 and np.isfinite(values).all()


@pytest.mark.parametrize("dtype", ["float8_e4m3fn_x4", "float8_e5m2_x4"])
def test_quantize_mx_rounds_to_nearest_even(dtype: str) -> None:
    # Scale 1 (byte 127) for amax in [2**(E_max - 1), 2**E_max); ties between two fp8 neighbours go to the even one.
    x = np.zeros((32, 4), np.float32)
    x[0:8, 0:4] = 2.0 ** (E_MAX[dtype] - 1)
    if dtype == "float8_e4m3fn_x4":  # 3 mantissa bits: 1.0625 is halfway 1 .. 1.125, 1.1875 halfway 1.125 .. 1.25
        x[1, 1], x[2, 2], want = 1.0625, 1.1875, (1.0, 1.25)
    else:  # 2 mantissa bits: 1.125 is halfway 1 .. 1.25, 1.375 halfway 1.25 .. 1.5
        x[1, 1], x[2, 2], want = 1.125, 1.375, (1.0, 1.5)
    words, scales = _check_quantize(x.astype(BF16), dtype)
    assert scales[0, 0] == 127
    got = unpack(words, dtype)
    assert (got[1, 1], got[2, 2]) == want


def test_quantize_mx_nan_group_gets_the_nan_scale() -> None:
    x = np.ones((32, 8), np.float32)
    x[3, 5] = np.inf
    _, scales = _check_quantize(x.astype(BF16), "float8_e5m2_x4")
    assert scales[0, 1] == 0xFF and scales[0, 0] != 0xFF


# -- nc_matmul_mx -------------------------------------------------------------------------------------------
def _mx_operand(k: int, f: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Random packed (K, F) data (finite element values) and (K // 8, F) scale bytes near 2**0."""
    big = float(ml_dtypes.finfo(ELEMENT[dtype]).max)
    values = np.clip(RNG.standard_normal((k, 4 * f)) * big / 4, -big, big)
    return pack_codes(values, dtype), RNG.integers(120, 134, (k // 8, f)).astype(np.uint8)


@pytest.mark.parametrize(
    "st_dtype,mv_dtype",
    [("float8_e4m3fn_x4", "float8_e4m3fn_x4"), ("float8_e5m2_x4", "float8_e5m2_x4"),
     ("float4_e2m1fn_x4", "float4_e2m1fn_x4"), ("float4_e2m1fn_x4", "float8_e5m2_x4"),
     ("float8_e4m3fn_x4", "float4_e2m1fn_x4")],
)  # fmt: skip
@pytest.mark.parametrize("k", [32, 64, 128])
def test_nc_matmul_mx_matches_numpy(k: int, st_dtype: str, mv_dtype: str) -> None:
    m, n = 64, 96
    st, st_scale = _mx_operand(k, m, st_dtype)
    mv, mv_scale = _mx_operand(k, n, mv_dtype)
    got = nki.simulate(matmul_kernel)(
        st, st_scale, mv, mv_scale, getattr(nl, st_dtype), getattr(nl, mv_dtype), nl.float32, nl.float8_e8m0fnu, 0,
        False,
    )
    want = ref_matmul_mx(st, mv, st_scale, mv_scale, st_dtype, mv_dtype)
    # exact products summed in float64, rounded once to fp32
    np.testing.assert_allclose(got, want, rtol=2.0**-23, atol=0)


@pytest.mark.parametrize("out_dtype,scale_dtype,scale_start,twice", [
    ("bfloat16", "uint8", 0, False), ("float32", "float8_e8m0fnu", 4, False), ("float32", "uint8", 0, True),
])  # fmt: skip
def test_nc_matmul_mx_output_dtype_scale_offset_and_accumulation(out_dtype, scale_dtype, scale_start, twice) -> None:
    k, m, n = 128, 128, 512
    st, st_scale = _mx_operand(k, m, "float8_e5m2_x4")
    mv, mv_scale = _mx_operand(k, n, "float8_e4m3fn_x4")
    got = nki.simulate(matmul_kernel)(
        st, st_scale, mv, mv_scale, nl.float8_e5m2_x4, nl.float8_e4m3fn_x4, getattr(nl, out_dtype),
        getattr(nl, scale_dtype), scale_start, twice,
    )
    want = ref_matmul_mx(st, mv, st_scale, mv_scale, "float8_e5m2_x4", "float8_e4m3fn_x4") * (2 if twice else 1)
    if out_dtype == "bfloat16":
        want = want.astype(np.float32).astype(BF16).astype(np.float64)  # PSUM holds bf16: one rounding
    np.testing.assert_allclose(got, want, rtol=2.0**-22, atol=0)


@nki.jit(platform_target="trn3")
def matmul_scatter_kernel(st, st_scale, mv, mv_scale, index, width):
    """nc_matmul_mx with dst a tensor indirection view: result column i goes to PSUM column o_i (trn3)."""
    k, m = st.shape
    st_sb = nl.ndarray((k, m), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=st_sb, src=st.view(nl.float8_e4m3fn_x4))
    mv_sb = nl.ndarray((k, mv.shape[1]), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv_sb, src=mv.view(nl.float8_e4m3fn_x4))
    rows = (k // 32 - 1) * 32 + 4
    st_s, mv_s = _load_scales(st_scale, rows, nl.uint8), _load_scales(mv_scale, rows, nl.uint8)
    idx = nl.ndarray(index.shape, dtype=index.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=index)
    res = nl.ndarray((m, width), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=res, value=0.0)
    nisa.nc_matmul_mx(dst=res.indirect(idx, num_elem=mv.shape[1]), stationary=st_sb, moving=mv_sb,
                      stationary_scale=st_s, moving_scale=mv_s)  # fmt: skip
    out_sb = nl.ndarray((m, width), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out_sb, src=res)
    out = nl.ndarray((m, width), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=out_sb)
    return out


def test_nc_matmul_mx_scatters_its_result_through_an_indirect_dst() -> None:
    k, m, n, width = 64, 64, 96, 200
    st, st_scale = _mx_operand(k, m, "float8_e4m3fn_x4")
    mv, mv_scale = _mx_operand(k, n, "float8_e4m3fn_x4")
    offsets = RNG.permutation(width)[: 2 * m].astype(np.int32)
    index = offsets.reshape(2, m).T.copy()  # (m, 2); TensorE's snake: 32 partitions of column 0, then column 1, ...
    got = nki.simulate(matmul_scatter_kernel)(st, st_scale, mv, mv_scale, index, width)
    order = np.concatenate([index[g : g + 32].T.reshape(-1) for g in range(0, m, 32)])[:n]
    want = np.zeros((m, width))
    want[:, order] = ref_matmul_mx(st, mv, st_scale, mv_scale, "float8_e4m3fn_x4", "float8_e4m3fn_x4")
    np.testing.assert_allclose(got, want, rtol=2.0**-23, atol=0)


# -- rules --------------------------------------------------------------------------------------------------
def _trace_error(fn, *arrays) -> NkiError:
    with pytest.raises(NkiError) as e:
        nki.jit(fn, platform_target="trn3").trace(*arrays)
    assert e.value.file == __file__, "the error names the kernel's line"
    return e.value


def _quantize_call(src_dtype, p: int, f: int, dst_dtype, scale_rows: int, scale_free: int | None = None):
    def kernel(x):
        xs = nl.ndarray((p, f), dtype=src_dtype, buffer=nl.sbuf)
        q = nl.ndarray((p, f // 4), dtype=dst_dtype, buffer=nl.sbuf)
        s = nl.ndarray((scale_rows, scale_free or f // 4), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=xs, dst_scale=s)
        return x

    return kernel


@pytest.mark.parametrize("args,message", [
    ((nl.float32, 32, 16, nl.float8_e4m3fn_x4, 4), "'src' must be float16 or bfloat16, got float32"),
    ((nl.bfloat16, 32, 16, nl.float4_e2m1fn_x4, 4), "'dst' must be float8_e4m3fn_x4 or float8_e5m2_x4"),
    ((nl.bfloat16, 48, 16, nl.float8_e4m3fn_x4, 36), "partition dimension size of src must be a multiple of 32"),
    ((nl.bfloat16, 32, 18, nl.float8_e4m3fn_x4, 4), "free dimension size of src must be a multiple of 4"),
    ((nl.bfloat16, 64, 16, nl.float8_e4m3fn_x4, 8), "span at least 36 partitions for 64 data partitions"),
    ((nl.bfloat16, 32, 16, nl.float8_e4m3fn_x4, 4, 8), "must have 4 elements per partition"),
])  # fmt: skip
def test_quantize_mx_rules(args, message: str) -> None:
    assert message in str(_trace_error(_quantize_call(*args), np.zeros((1, 1), np.float32)))


def _matmul_call(k=128, m=128, n=512, st_dtype=nl.float8_e4m3fn_x4, dst_dtype=nl.float32, dst_buf=nl.psum,
                 index_at=None, **kw):  # fmt: skip
    def kernel(x):
        st = nl.ndarray((k, m), dtype=st_dtype, buffer=nl.sbuf)
        mv = nl.ndarray((k, n), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        sst = nl.ndarray((k, m), dtype=nl.uint8, buffer=nl.sbuf)
        smv = nl.ndarray((k, n), dtype=nl.uint8, buffer=nl.sbuf)
        dst = nl.ndarray((m, n), dtype=dst_dtype, buffer=dst_buf)
        if index_at is not None:  # dst scattered through an index tile starting on partition index_at
            index = nl.ndarray((index_at + m, n // m), dtype=nl.int32, buffer=nl.sbuf)
            dst = dst.indirect(index[index_at:])
        nisa.nc_matmul_mx(dst=dst, stationary=st, moving=mv, stationary_scale=sst, moving_scale=smv, **kw)
        return x

    return kernel


@pytest.mark.parametrize("kw,message", [
    (dict(st_dtype=nl.bfloat16), "'stationary' must be float8_e4m3fn_x4 or float8_e5m2_x4 or float4_e2m1fn_x4"),
    (dict(dst_dtype=nl.float16), "'dst' must be float32 or bfloat16"),
    (dict(dst_buf=nl.sbuf), "'dst' must be in PSUM"),
    (dict(m=127), "free dimension size of stationary must be even"),
    (dict(k=96, m=32, n=64, tile_position=(0, 0), tile_size=(64, 128)), "exceeds the row tile size 64"),
    (dict(tile_position=(0, 0)), "tile_position and tile_size must both be set"),
    (dict(tile_position=(32, 0), tile_size=(64, 128)), "start_row must be a multiple of 64 below 128"),
    (dict(k=64, m=64, n=128, tile_position=(64, 0), tile_size=(64, 128), index_at=0),
     "with tensor indirection tile_position must be (0, 0) or unset, got (64, 0)"),
    (dict(m=64, n=128, index_at=16), "the index of 'dst'.indirect() starts on partition 16, not on a quadrant"),
])  # fmt: skip
def test_nc_matmul_mx_rules(kw, message: str) -> None:
    assert message in str(_trace_error(_matmul_call(**kw), np.zeros((1, 1), np.float32)))


@pytest.mark.parametrize("kw", [
    dict(k=64, m=64, n=128, tile_position=(64, 0), tile_size=(64, 128)),  # the bottom half of the PE array
    dict(n=4096),  # fp32 N up to 4096: the entire PSUM (8 banks)
    dict(n=8192, dst_dtype=nl.bfloat16),
    dict(m=64, n=128, index_at=0, tile_position=(0, 0), tile_size=(128, 128)),  # an indirect dst, untiled
])  # fmt: skip
def test_nc_matmul_mx_accepts(kw) -> None:
    nki.jit(_matmul_call(**kw), platform_target="trn3").trace(np.zeros((1, 1), np.float32))


def test_mx_instructions_need_gen4() -> None:
    with pytest.raises(NkiError, match="nisa.nc_matmul_mx is not available on gen3.*gen4 or newer"):
        nki.jit(_matmul_call(), platform_target="trn2").trace(np.zeros((1, 1), np.float32))


def test_packed_data_is_not_computed_with_or_cast() -> None:
    def add(x):
        t = nl.ndarray((32, 8), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
        return x

    def cast(x):
        t = nl.ndarray((32, 8), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        return x

    assert "has the packed MX dtype float8_e4m3fn_x4" in str(_trace_error(add, np.zeros((32, 8), np.float32)))
    assert "cannot convert packed MX data" in str(_trace_error(cast, np.zeros((32, 8), np.float32)))


# -- view(dtype) / ap(dtype=): the same bytes as another dtype ----------------------------------------------
def test_view_of_another_itemsize_reads_the_same_bytes() -> None:
    @nki.jit
    def kernel(x):
        t = nl.ndarray((64, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        o = nl.ndarray((64, 16), dtype=nl.uint8, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o, src=t.view(nl.uint8)[:, 8:24])  # (64, 32) bytes per partition, a slice of them
        h = nl.ndarray((64, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=h, src=x.ap(pattern=[[8, 64], [2, 4]], offset=1, dtype=nl.float32))
        return o, h

    x = RNG.integers(0, 2**32, (64, 8), dtype=np.uint64).astype(np.uint32) & 0x3FFFFFFF
    o, h = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(o, x.view(np.uint8)[:, 8:24])
    np.testing.assert_array_equal(h.view(np.uint32), x[:, 1::2])
