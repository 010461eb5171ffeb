"""``nisa.tensor_copy_predicated``, ``bn_stats``/``bn_aggr`` and ``exponential`` end to end against numpy."""

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

RNG = np.random.default_rng(11)


def _sbuf_copy(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def _out(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


# -- tensor_copy_predicated ---------------------------------------------------------------------------------
@pytest.mark.parametrize("scalar,reverse", [(False, False), (False, True), (True, False)])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32])
def test_tensor_copy_predicated(scalar: bool, reverse: bool, dtype) -> None:
    @nki.jit
    def kernel(d, s, p):
        dst, pred = _sbuf_copy(d), _sbuf_copy(p)
        src = 7 if scalar else _sbuf_copy(s)
        nisa.tensor_copy_predicated(dst=dst, src=src, predicate=pred, reverse_pred=reverse)
        return _out(dst)

    d = (RNG.standard_normal((128, 40)) * 10).astype(dtype)
    s = (RNG.standard_normal((128, 40)) * 10).astype(dtype)
    p = RNG.integers(0, 3, (128, 40)).astype(np.uint8)
    got = nki.simulate(kernel)(d, s, p)
    keep = (p == 0) if reverse else (p != 0)
    want = np.where(keep, np.asarray(7, dtype) if scalar else s, d)
    np.testing.assert_array_equal(got, want)  # a bit copy where the predicate holds, untouched elsewhere


def test_tensor_copy_predicated_checks_the_predicate_dtype() -> None:
    @nki.jit
    def bad(d):
        t = _sbuf_copy(d)
        nisa.tensor_copy_predicated(dst=t, src=t, predicate=t)
        return _out(t)

    with pytest.raises(NkiError, match="predicate must be uint8, uint16 or uint32") as e:
        bad.trace(np.zeros((128, 4), np.float32))
    assert e.value.file == __file__


# -- bn_stats / bn_aggr -------------------------------------------------------------------------------------
@pytest.mark.parametrize("free,tiles", [(512, 1), (37, 1), (256, 3)])
def test_bn_stats_and_aggr_give_mean_and_variance(free: int, tiles: int) -> None:
    @nki.jit
    def kernel(x):
        xs = _sbuf_copy(x)
        stats = nl.ndarray((x.shape[0], 6 * tiles), dtype=nl.float32, buffer=nl.sbuf)
        for t in nl.static_range(tiles):
            nisa.bn_stats(dst=stats[:, nl.ds(6 * t, 6)], data=xs[:, nl.ds(t * free, free)])
        mv = nl.ndarray((x.shape[0], 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mv, data=stats)
        return _out(stats), _out(mv)

    x = (RNG.standard_normal((96, free * tiles)) * 3 + 1).astype(np.float32)
    stats, mv = nki.simulate(kernel)(x)
    first = x[:, :free].astype(np.float64)
    for k, half in enumerate((first[:, 0::2], first[:, 1::2])):
        np.testing.assert_array_equal(stats[:, 3 * k], half.shape[1])
        np.testing.assert_allclose(stats[:, 3 * k + 1], half.mean(axis=1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(stats[:, 3 * k + 2], half.var(axis=1) * half.shape[1], rtol=1e-4)
    np.testing.assert_allclose(mv[:, 0], x.astype(np.float64).mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mv[:, 1], x.astype(np.float64).var(axis=1), rtol=1e-4)


def test_bn_stats_limits_the_free_size_to_the_target() -> None:
    @nki.jit
    def bad(x):
        xs = _sbuf_copy(x)
        st = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(dst=st, data=xs)
        return _out(st)

    with pytest.raises(NkiError, match="at most 512"):
        bad.trace(np.zeros((128, 1024), np.float32))


# -- exponential (gen4) -------------------------------------------------------------------------------------
def _exp_kernel(max_tile: bool, chained: bool):
    @nki.jit(platform_target="trn3")
    def kernel(x, m):
        xs, ms = _sbuf_copy(x), _sbuf_copy(m)
        y = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        half = x.shape[1] // 2
        shift = ms if max_tile else 1.5
        if chained:  # two calls sum into one accumulator; only the last writes it out
            nisa.exponential(dst=y[:, nl.ds(0, half)], src=xs[:, nl.ds(0, half)], max_value=shift,
                             reduce_cmd=nisa.reduce_cmd.reset_reduce)
            nisa.exponential(dst=y[:, nl.ds(half, half)], src=xs[:, nl.ds(half, half)], max_value=shift,
                             reduce_res=s, reduce_cmd=nisa.reduce_cmd.reduce)
        else:
            nisa.exponential(dst=y, src=xs, max_value=shift, reduce_res=s, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        return _out(y), _out(s)

    return kernel


@pytest.mark.parametrize("max_tile,chained", [(False, False), (True, False), (True, True)])
def test_exponential(max_tile: bool, chained: bool) -> None:
    x = RNG.standard_normal((128, 64)).astype(np.float32)
    m = RNG.standard_normal((128, 1)).astype(np.float32)
    y, s = nki.simulate(_exp_kernel(max_tile, chained))(x, m)
    want = np.exp(x.astype(np.float64) - (m if max_tile else 1.5))
    np.testing.assert_allclose(y, want, rtol=1e-6)
    np.testing.assert_allclose(s[:, 0], want.sum(axis=1), rtol=1e-5)


def test_exponential_is_a_gen4_instruction() -> None:
    kernel = _exp_kernel(False, False)
    with pytest.raises(NkiError, match="nisa.exponential is not available on gen3.*gen4 or newer"):
        nki.jit(kernel.func, platform_target="trn2").trace(np.zeros((128, 8), "f4"), np.zeros((128, 1), "f4"))
