"""``nisa.nc_matmul``'s options beyond plain matmul: PE tiling mode (``tile_position`` / ``tile_size``), transpose
mode (``is_transpose``), FP8 double-row mode (``perf_mode``) and the ``is_*_onezero`` hints, end to end against
numpy references, plus their rules and costs.
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
from nkic.target.costs import instr_cycles  # noqa: E402
from nkic.target.isa import OPCODES, Instr, Operand  # noqa: E402

RNG = np.random.default_rng(7)
BF16 = ml_dtypes.bfloat16


def _ref(st: np.ndarray, mv: np.ndarray) -> np.ndarray:
    return st.astype(np.float64).T @ mv.astype(np.float64)


# -- tiling mode ----------------------------------------------------------------------------------------------
def tiled_kernel(st, mv, tiles, dtype):
    """Matmul i writes rows [start_col_i, start_col_i + M) of one PSUM tile, as nki-library's column-tiled kernels
    do (the PE column tile's results land on its PSUM partitions)."""
    n_tiles, k, m = st.shape
    n = mv.shape[2]
    res = nl.ndarray((128, n), dtype=nl.float32, buffer=nl.psum)
    out = nl.ndarray((n_tiles, m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in range(n_tiles):
        pos, size = tiles[i]
        st_sb = nl.ndarray((k, m), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=st_sb, src=st[i])
        mv_sb = nl.ndarray((k, n), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mv_sb, src=mv[i])
        dst = res[pos[1] : pos[1] + m, :]
        nisa.nc_matmul(dst=dst, stationary=st_sb, moving=mv_sb, tile_position=pos, tile_size=size,
                       accumulate=False)  # row tiles may share PSUM rows: each overwrites
        o = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=dst)
        nisa.dma_copy(dst=out[i], src=o)
    return out


@pytest.mark.parametrize("target,tiles,k,m", [
    ("trn2", [((0, 0), (128, 32)), ((0, 32), (128, 32)), ((0, 64), (128, 32)), ((0, 96), (128, 32))], 128, 32),
    ("trn2", [((0, 0), (32, 32)), ((32, 32), (32, 32)), ((64, 64), (32, 32)), ((96, 96), (32, 32))], 32, 20),
    ("trn1", [((0, 0), (64, 64)), ((64, 64), (64, 64))], 64, 64),
    ("trn1", [((0, 0), (128, 64)), ((0, 64), (128, 64))], 100, 7),
    ("trn3", [((64, 0), (64, 128)), ((0, 0), (64, 128))], 64, 128),
])  # fmt: skip
@pytest.mark.parametrize("dtype", [nl.bfloat16, nl.float32])
def test_tiled_matmuls_match_numpy(target: str, tiles, k: int, m: int, dtype) -> None:
    n = 96
    npdt = BF16 if dtype == nl.bfloat16 else np.float32
    st = RNG.standard_normal((len(tiles), k, m)).astype(npdt)
    mv = RNG.standard_normal((len(tiles), k, n)).astype(npdt)
    got = nki.simulate(nki.jit(tiled_kernel, platform_target=target))(st, mv, tiles, dtype)
    for i in range(len(tiles)):
        np.testing.assert_allclose(got[i], _ref(st[i], mv[i]), rtol=1e-5, atol=1e-4)


def test_tile_position_may_be_an_affine_expression() -> None:
    """The NKI docs' example 3: batched 64x64 matmuls on the four quadrants, positions from loop variables."""

    @nki.jit(platform_target="trn2")
    def kernel(g, h):
        out = nl.ndarray((16, 64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            for j in nl.affine_range(4):
                gs = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=gs, src=g[i * 4 + j])
                hs = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=hs, src=h[i * 4 + j])
                ps = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(ps, gs, hs, tile_position=((i % 2) * 64, (j % 2) * 64), tile_size=(64, 64))
                o = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=o, src=ps)
                nisa.dma_copy(dst=out[i * 4 + j], src=o)
        return out

    g = RNG.random((16, 64, 64), np.float32)
    h = RNG.random((16, 64, 512), np.float32)
    np.testing.assert_allclose(nki.simulate(kernel)(g, h), np.matmul(g.transpose(0, 2, 1), h), rtol=1e-5)


# -- transpose mode -------------------------------------------------------------------------------------------
def transpose_kernel(x, dst_dtype, accumulate):
    p, f = x.shape
    xs = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    ident = nl.ndarray((p, p), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=ident, value=1.0)
    nisa.affine_select(dst=ident, pattern=[[1, p]], channel_multiplier=-1, cmp_op=nl.equal, on_true_tile=ident,
                       on_false_value=0.0)  # fmt: skip
    ps = nl.ndarray((f, p), dtype=dst_dtype, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=xs, moving=ident, is_transpose=True)
    if accumulate:
        nisa.nc_matmul(dst=ps, stationary=xs, moving=ident, is_transpose=True, accumulate=True)
    o = nl.ndarray((f, p), dtype=dst_dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=ps)
    out = nl.ndarray((f, p), dtype=dst_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=o)
    return out


def _specials(shape, dtype) -> np.ndarray:
    x = RNG.standard_normal(shape).astype(dtype)
    x.flat[:5] = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32).astype(dtype)
    return x


@pytest.mark.parametrize("dtype,dst_dtype", [
    (BF16, nl.bfloat16), (np.float16, nl.float16), (np.float32, nl.float32), (BF16, nl.float32),
])  # fmt: skip
def test_transpose_mode_is_bit_accurate(dtype, dst_dtype) -> None:
    x = _specials((96, 40), dtype)
    got = nki.simulate(nki.jit(transpose_kernel, platform_target="trn2"))(x, dst_dtype, False)
    want = np.ascontiguousarray(x.T.astype(got.dtype))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))  # NaN, Inf and -0.0 included


def test_plain_matmul_transpose_spreads_nan_and_loses_negative_zero() -> None:
    """Without transpose mode (and on gen2, where is_transpose only labels the instruction) a NaN or Inf times
    the identity's zeros makes its whole output row NaN: the difference transpose mode exists for."""
    x = _specials((32, 8), np.float32)  # x[0, :5] = NaN, Inf, -Inf, -0.0, 0.0
    got = nki.simulate(nki.jit(transpose_kernel, platform_target="trn1"))(x, nl.float32, True)
    assert np.isnan(got[0]).all()
    assert got[1, 0] == np.inf and np.isnan(got[1, 1:]).all() and got[2, 0] == -np.inf and np.isnan(got[2, 1:]).all()
    assert not np.signbit(got[3, 0]), "-0.0 * 1 + 0.0 * 0 + ... is +0.0"
    np.testing.assert_array_equal(got[3:, 1:], 2 * x.T[3:, 1:])  # is_transpose labels, accumulate still adds


def test_transpose_mode_accumulates() -> None:
    x = RNG.standard_normal((64, 32)).astype(np.float32)
    got = nki.simulate(nki.jit(transpose_kernel, platform_target="trn3"))(x, nl.float32, True)
    np.testing.assert_array_equal(got, 2 * x.T)


def test_transpose_mode_with_a_general_moving_tile() -> None:
    """A moving tile other than a permutation: products where moving is nonzero are summed (a NaN where moving is
    zero stays out); a column with a single 1 passes its value through."""

    @nki.jit(platform_target="trn2")
    def kernel(a, b):
        a_s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_s, src=a)
        b_s = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b_s, src=b)
        ps = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=a_s, moving=b_s, is_transpose=True)
        o = nl.ndarray(ps.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=ps)
        out = nl.ndarray(ps.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=o)
        return out

    a = RNG.standard_normal((4, 3)).astype(np.float32)
    a[3, 0] = np.nan
    b = np.array([[1, 2, 0], [1, 0, 0], [0, 0, 1], [0, 0, 0]], np.float32)
    want = np.stack([a[0] + a[1], 2 * a[0], a[2]], axis=1)
    np.testing.assert_array_equal(nki.simulate(kernel)(a, b), want)


# -- double_row performance mode ----------------------------------------------------------------------------
def double_row_kernel(a, b, perf_mode):
    k, two, m = a.shape
    n = b.shape[2]
    a_s = nl.ndarray((k, 2, m), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_s, src=a)
    b_s = nl.ndarray((k, 2, n), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_s, src=b)
    ps = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=a_s, moving=b_s, perf_mode=perf_mode)
    o = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=ps)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=o)
    return out


@pytest.mark.parametrize("a_dt,b_dt,target", [
    (ml_dtypes.float8_e4m3, ml_dtypes.float8_e5m2, "trn2"), (ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2, "trn2"),
    (ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3, "trn3"),
])  # fmt: skip
@pytest.mark.parametrize("perf_mode", [nisa.matmul_perf_mode.double_row, "double_row", "double_row_gen3"])
def test_double_row_matches_numpy(a_dt, b_dt, target: str, perf_mode) -> None:
    a = RNG.standard_normal((128, 2, 16)).astype(a_dt)
    b = RNG.standard_normal((128, 2, 512)).astype(b_dt)
    got = nki.simulate(nki.jit(double_row_kernel, platform_target=target))(a, b, perf_mode)
    want = np.einsum("kli,klj->ij", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_double_row_docs_example() -> None:
    a = np.ones((128, 2, 1), ml_dtypes.float8_e5m2)
    b = np.ones((128, 2, 512), ml_dtypes.float8_e5m2)
    got = nki.simulate(nki.jit(double_row_kernel, platform_target="trn2"))(a, b, "double_row")
    np.testing.assert_array_equal(got, np.full((1, 512), 256.0, np.float32))


# -- rules ----------------------------------------------------------------------------------------------------
def _call(k=128, m=128, n=512, dtype=nl.bfloat16, st_shape=None, mv_shape=None, dst_shape=None, **kw):
    def kernel(x):
        st = nl.ndarray(st_shape or (k, m), dtype=dtype, buffer=nl.sbuf)
        mv = nl.ndarray(mv_shape or (k, n), dtype=dtype, buffer=nl.sbuf)
        dst = nl.ndarray(dst_shape or (m, n), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=dst, stationary=st, moving=mv, **kw)
        return x

    return kernel


def _trace(fn, target: str = "trn2") -> None:
    nki.jit(fn, platform_target=target).trace(np.zeros((1, 1), np.float32))


FP8 = nl.float8_e4m3
RULES = [
    (dict(tile_position=(0, 0)), "trn2", "tile_position and tile_size must both be set"),
    (dict(tile_size=(64, 64)), "trn2", "tile_position and tile_size must both be set"),
    (dict(k=32, m=32, tile_position=(0, 0), tile_size=(32, 32)), "trn1", "must be in (64, 128) on gen2"),
    (dict(k=32, m=32, tile_position=(0, 0), tile_size=(48, 32)), "trn2", "must be in (32, 64, 128) on gen3"),
    (dict(k=32, m=32, tile_position=(16, 0), tile_size=(32, 32)), "trn2", "start_row must be a multiple of 32"),
    (dict(k=32, m=32, tile_position=(0, 128), tile_size=(32, 32)), "trn2", "start_column must be a multiple of 32 "
                                                                           "below 128"),
    (dict(k=128, m=32, tile_position=(0, 0), tile_size=(64, 128)), "trn2", "K=128 (max 64)"),
    (dict(k=64, m=128, tile_position=(0, 0), tile_size=(64, 64)), "trn2", "M=128 (max 64)"),
    (dict(tile_position="ab", tile_size=(64, 64)), "trn2", "tile_position must be a pair of integers"),
    (dict(perf_mode="double_row", st_shape=(128, 2, 8), mv_shape=(128, 2, 16), dst_shape=(8, 16)), "trn1",
     "double_row is not available on gen2"),
    (dict(perf_mode="double_row"), "trn2", "needs float8 'stationary', got bfloat16"),
    (dict(dtype=FP8, perf_mode="double_row"), "trn2", "needs 'stationary' shaped [K, 2, ...]"),
    (dict(dtype=FP8, perf_mode="fast"), "trn2", "perf_mode must be matmul_perf_mode.none or"),
    (dict(dtype=FP8, perf_mode="double_row", st_shape=(128, 2, 8), mv_shape=(128, 2, 16), dst_shape=(8, 16),
          tile_position=(0, 0), tile_size=(128, 64)), "trn2", "cannot be combined with column tiling"),
    (dict(dtype=FP8, perf_mode="double_row", st_shape=(128, 2, 8), mv_shape=(128, 2, 16), dst_shape=(16, 16)),
     "trn2", "does not match the [M=8, N=16] result"),
]  # fmt: skip


@pytest.mark.parametrize("kw,target,message", RULES)
def test_rules(kw, target: str, message: str) -> None:
    with pytest.raises(NkiError) as e:
        _trace(_call(**kw), target)
    assert message in str(e.value)
    assert e.value.file == __file__, "the error names the kernel's line"


@pytest.mark.parametrize("kw,target", [
    (dict(k=64, m=64, tile_position=(64, 64), tile_size=(64, 64)), "trn1"),
    (dict(k=32, m=32, tile_position=(96, 0), tile_size=(32, 128)), "trn2"),
    (dict(tile_position=(0, 0), tile_size=(128, 128)), "trn2"),
    (dict(dtype=FP8, perf_mode="double_row", st_shape=(64, 2, 8), mv_shape=(64, 2, 16), dst_shape=(8, 16),
          tile_position=(64, 0), tile_size=(64, 128)), "trn2"),  # row tiling is allowed with double_row
    (dict(is_transpose=True, is_stationary_onezero=True, is_moving_onezero=True), "trn1"),
])  # fmt: skip
def test_accepts(kw, target: str) -> None:
    _trace(_call(**kw), target)


# -- costs ----------------------------------------------------------------------------------------------------
def _tile(p: int, f: int, dtype: str = "bfloat16", memory: str = "sbuf") -> Operand:
    return Operand(memory, dtype, ((1, p), (1, f)))


def _matmul(k, m, n, dtype="bfloat16", tiles=(0, 0, 0, 0), **flags) -> Instr:
    spec = OPCODES["MATMUL"]
    bits = sum(1 << i for i, name in enumerate(spec.flags) if flags.get(name))
    return Instr("MATMUL", "pe", (_tile(m, n, "float32", "psum"), _tile(k, m, dtype), _tile(k, n, dtype)), tiles,
                 bits)  # fmt: skip


def test_costs() -> None:
    assert instr_cycles(_matmul(128, 128, 512)) == 512
    # a quarter of the array (4 independent tiles share it): a quarter of the time, amortised
    assert instr_cycles(_matmul(128, 32, 512, tiles=(0, 32, 128, 32))) == 128
    assert instr_cycles(_matmul(32, 32, 512, tiles=(32, 32, 32, 32))) == 32
    assert instr_cycles(_matmul(64, 64, 512, tiles=(64, 0, 64, 128))) == 256
    # fp32: ×4, ×2 in transpose mode or with onezero hints on every fp32 input
    assert instr_cycles(_matmul(128, 128, 128, "float32")) == 512
    assert instr_cycles(_matmul(128, 128, 128, "float32", is_transpose=True)) == 256
    assert instr_cycles(_matmul(128, 128, 128, "float32", is_moving_onezero=True)) == 512
    hinted = _matmul(128, 128, 128, "float32", is_moving_onezero=True, is_stationary_onezero=True)
    assert instr_cycles(hinted) == 256
    # double_row: [128, 2, M] x [128, 2, N] in the time of one [128, M] x [128, N]
    assert instr_cycles(_matmul(128, 2 * 64, 2 * 512, "float8_e4m3", double_row=True)) == 512


def _pe_busy_ns(tiles) -> float:
    from nkic.compiler.driver import compile_traced, run_neff  # noqa: PLC0415

    st = RNG.standard_normal((len(tiles), 128, 32)).astype(BF16)
    mv = RNG.standard_normal((len(tiles), 128, 512)).astype(BF16)
    kernel = nki.jit(tiled_kernel, platform_target="trn2")
    traced = kernel.trace(st, mv, tiles, nl.bfloat16)
    arrays = kernel.array_arguments(st, mv, tiles, nl.bfloat16)
    return run_neff(compile_traced(traced).neff, arrays, target="gen3").profile.busy_ns["pe"]


def test_tiled_matmuls_take_a_quarter_of_the_pe_time() -> None:
    """Four column-tiled matmuls occupy the PE about as long as one full-array matmul of the same N."""
    tiled = _pe_busy_ns([((0, 32 * i), (128, 32)) for i in range(4)])
    full = _pe_busy_ns([((0, 0), (128, 128))] * 4)
    assert tiled == pytest.approx(full / 4, rel=0.02)  # + a few 1-cycle semaphore waits
