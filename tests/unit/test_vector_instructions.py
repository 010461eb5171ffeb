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
from kernel_harness import load as _sbuf_copy, store as _out  # noqa: E402

RNG = np.random.default_rng(11)


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


# -- select_reduce ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tile_false,reverse,chained", [(False, False, False), (True, True, False), (False, False, True)])
def test_select_reduce(tile_false: bool, reverse: bool, chained: bool) -> None:
    @nki.jit
    def kernel(x, p, f):
        xs, ps, fs = _sbuf_copy(x), _sbuf_copy(p), _sbuf_copy(f)
        y = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        on_false = fs if tile_false else -2.5
        if chained:  # the max of two halves through the shared VectorE registers
            h = x.shape[1] // 2
            nisa.select_reduce(dst=y[:, nl.ds(0, h)], predicate=ps[:, nl.ds(0, h)], on_true=xs[:, nl.ds(0, h)],
                               on_false=on_false, reduce_cmd=nisa.reduce_cmd.reset_reduce, reverse_pred=reverse)
            nisa.select_reduce(dst=y[:, nl.ds(h, h)], predicate=ps[:, nl.ds(h, h)], on_true=xs[:, nl.ds(h, h)],
                               on_false=on_false, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reduce,
                               reverse_pred=reverse)
        else:
            nisa.select_reduce(dst=y, predicate=ps, on_true=xs, on_false=on_false, reduce_res=r,
                               reduce_cmd=nisa.reduce_cmd.reset_reduce, reverse_pred=reverse)
        return _out(y), _out(r)

    x = RNG.standard_normal((128, 48)).astype(np.float32)
    p = RNG.integers(0, 2, (128, 48)).astype(np.uint8)
    f = RNG.standard_normal((128, 1)).astype(np.float32)
    y, r = nki.simulate(kernel)(x, p, f)
    keep = (p == 0) if reverse else (p != 0)
    want = np.where(keep, x, f if tile_false else np.float32(-2.5))
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(r[:, 0], want.max(axis=1))


# -- tensor_scalar_cumulative -------------------------------------------------------------------------------
def _cumulative_reference(x, op0, imm0, op1, start):
    f0 = {"add": np.add, "multiply": np.multiply, "subtract": np.subtract}[op0]
    f1 = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "subtract": np.subtract}[op1]
    reg = np.broadcast_to(np.asarray(start, np.float32), (x.shape[0],)).astype(np.float32)
    out = np.empty_like(x)
    for i in range(x.shape[1]):
        reg = f1(f0(x[:, i], np.float32(imm0)).astype(np.float32), reg).astype(np.float32)
        out[:, i] = reg
    return out


@pytest.mark.parametrize(
    "op0,imm0,op1,cmd,start",
    [("multiply", 1.0, "add", "reset_reduce", 0.0), ("add", 0.5, "maximum", "reset_reduce", -np.inf),
     ("multiply", 0.9, "multiply", "reset_reduce", 1.0), ("add", 0.0, "add", "load_reduce", 3.0),
     ("add", 1.0, "subtract", "reset_reduce", 0.0)],
)  # fmt: skip
def test_tensor_scalar_cumulative(op0: str, imm0: float, op1: str, cmd: str, start: float) -> None:
    @nki.jit
    def kernel(x):
        xs = _sbuf_copy(x)
        y = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=y, src=xs, op0=getattr(nl, op0), op1=getattr(nl, op1), imm0=imm0,
                                      imm1=start if cmd == "load_reduce" else None,
                                      reduce_cmd=getattr(nisa.reduce_cmd, cmd))
        return _out(y)

    x = RNG.uniform(0.5, 1.5, (128, 32)).astype(np.float32)
    got = nki.simulate(kernel)(x)
    np.testing.assert_allclose(got, _cumulative_reference(x, op0, imm0, op1, start), rtol=1e-6)


def test_tensor_scalar_cumulative_continues_from_the_register() -> None:
    """reduce_cmd=reduce starts from the VectorE register the previous call left: a cumsum in two chunks."""

    @nki.jit
    def kernel(x):
        xs = _sbuf_copy(x)
        y = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        h = x.shape[1] // 2
        nisa.tensor_scalar_cumulative(dst=y[:, nl.ds(0, h)], src=xs[:, nl.ds(0, h)], op0=nl.multiply, op1=nl.add,
                                      imm0=1.0, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.tensor_scalar_cumulative(dst=y[:, nl.ds(h, h)], src=xs[:, nl.ds(h, h)], op0=nl.multiply, op1=nl.add,
                                      imm0=1.0, reduce_cmd=nisa.reduce_cmd.reduce)
        return _out(y)

    x = RNG.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(kernel)(x), np.cumsum(x, axis=1), rtol=1e-5, atol=1e-5)


# -- tensor_partition_reduce (GpSimd) -----------------------------------------------------------------------
@pytest.mark.parametrize("op,dtype", [("add", np.float32), ("maximum", np.float32), ("minimum", ml_dtypes.bfloat16),
                                      ("bitwise_or", np.int32), ("bitwise_and", np.uint16)])  # fmt: skip
def test_tensor_partition_reduce(op: str, dtype) -> None:
    @nki.jit
    def kernel(x):
        xs = _sbuf_copy(x)
        r = nl.ndarray((1, *x.shape[1:]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(dst=r, op=getattr(nl, op), data=xs)
        return _out(r)

    if np.dtype(dtype).kind in "iu":
        x = RNG.integers(0, 1 << 12, (128, 16, 4)).astype(dtype)
    else:
        x = (RNG.standard_normal((128, 16, 4)) * 4).astype(dtype)
    numpy_op = {"add": np.add, "maximum": np.maximum, "minimum": np.minimum, "bitwise_or": np.bitwise_or,
                "bitwise_and": np.bitwise_and}[op]  # fmt: skip
    got = nki.simulate(kernel)(x)
    if op == "add":
        # fp32 accumulation of 128 values of magnitude ~4: absolute error ~128 * 2^-24 * 16 (sums may be near 0)
        np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=0, keepdims=True), rtol=1e-5, atol=1e-3)
    else:
        np.testing.assert_array_equal(got, numpy_op.reduce(x, axis=0, keepdims=True))


@pytest.mark.parametrize(
    "which,match",
    [("bn_stats", r"bn_stats of \(128, 8\) \(partitions, free\) writes \(128, 6\), not \(128, 4\)"),
     ("bn_aggr", r"bn_aggr reads .* triples of \(128, 8\)"),
     ("tensor_partition_reduce", r"tensor_partition_reduce of \(128, 8\) writes \(1, 8\), not \(128, 4\)")],
)  # fmt: skip
def test_declared_shape_rules_name_the_user_line(which: str, match: str) -> None:
    """The declaration's shape rule is the one error at the nisa call (and the same rule verifies the IR)."""

    @nki.jit
    def bad(x):
        xs = _sbuf_copy(x)
        d = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        if which == "tensor_partition_reduce":
            nisa.tensor_partition_reduce(dst=d, op=nl.add, data=xs)  # E-shape
        else:
            getattr(nisa, which)(dst=d, data=xs)  # E-shape
        return _out(d)

    with pytest.raises(NkiError, match=match) as e:
        bad.trace(np.zeros((128, 8), np.float32))
    assert e.value.file == __file__
