"""``nisa.activate2`` (ScalarE, gen4) end to end against numpy: every (op0, op1) stage pair with both operand orders,
number and (P, 1) immediates, prelu's relu_param, each reduce op and reduce_cmd, dtypes in and out, and its errors."""

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
from kernel_harness import load as _sbuf, store as _out  # noqa: E402

RNG = np.random.default_rng(48)
GEN4 = {"platform_target": "trn3"}
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# Independent float64 references of the functions the tests use.
REF = {
    "copy": lambda x, a: x,
    "exp": lambda x, a: np.exp(x),
    "gelu": lambda x, a: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "gelu_dx": lambda x, a: 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
    "silu_dx": lambda x, a: _sigmoid(x) + x * _sigmoid(x) * (1 - _sigmoid(x)),
    "gelu_apprx_sigmoid_dx": lambda x, a: _sigmoid(1.702 * x) + 1.702 * x * _sigmoid(1.702 * x) * (1 - _sigmoid(1.702 * x)),
    "erf_dx": lambda x, a: 2 / math.sqrt(math.pi) * np.exp(-x * x),
    "prelu": lambda x, a: np.where(x >= 0, x, a * x),
    "tanh": lambda x, a: np.tanh(x),
}
OPS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}


def _stage(v, op, imm, reverse):
    if op == "bypass":
        return v
    imm = np.float32(imm) if np.ndim(imm) == 0 else imm.astype(np.float32)
    return (OPS[op](imm, v) if reverse else OPS[op](v, imm)).astype(np.float32)


def _reference(x, func, op0, imm0, op1, imm1, relu=0.0, reverse0=False, reverse1=False):
    v = _stage(x.astype(np.float32), op0, imm0, reverse0)
    v = _stage(v, op1, imm1, reverse1)
    return REF[func](v.astype(np.float64), np.asarray(relu, np.float64)).astype(np.float32)


def _kernel(func, op0, op1, tiles=(False, False), relu=None, reverse=(False, False), out_dtype=nl.float32,
            reduce=None, cmd=None, psum_in=False):  # fmt: skip
    """activate2 over x with imm0/imm1 as numbers (2.0, -0.75) or (P, 1) tiles, relu_param None / number / tile."""

    @nki.jit(**GEN4)
    def kernel(x, i0, i1, a):
        xs = _sbuf(x)
        if psum_in:
            p = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
            nisa.tensor_copy(dst=p, src=xs)
            xs = p
        imm0 = _sbuf(i0) if tiles[0] else 2.0
        imm1 = _sbuf(i1) if tiles[1] else -0.75
        kw = {}
        if relu is not None:
            kw["relu_param"] = _sbuf(a) if relu == "tile" else relu
        y = nl.ndarray(x.shape, dtype=out_dtype, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        if reduce is not None:
            kw.update(reduce_op=reduce, reduce_res=r, reduce_cmd=cmd or nisa.reduce_cmd.reset_reduce)
        nisa.activate2(dst=y, op=func, data=xs, imm0=imm0, imm1=imm1, op0=op0, op1=op1, reverse0=reverse[0],
                       reverse1=reverse[1], **kw)
        return _out(y), _out(r)

    return kernel


def _inputs(shape=(128, 48), dtype=np.float32):
    x = RNG.standard_normal(shape).astype(dtype)
    i0 = RNG.uniform(0.5, 2.0, (shape[0], 1)).astype(np.float32)
    i1 = RNG.standard_normal((shape[0], 1)).astype(np.float32)
    a = RNG.uniform(0.01, 0.3, (shape[0], 1)).astype(np.float32)
    return x, i0, i1, a


STAGES = [("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"), ("add", "bypass"),
          ("subtract", "bypass"), ("bypass", "bypass")]  # fmt: skip


@pytest.mark.parametrize("op0,op1", STAGES)
@pytest.mark.parametrize("reverse0,reverse1", [(False, False), (True, True)])
def test_activate2_tensor_scalar_stage(op0: str, op1: str, reverse0: bool, reverse1: bool) -> None:
    reverse0 &= op0 != "bypass"
    reverse1 &= op1 != "bypass"
    x, i0, i1, a = _inputs()
    kernel = _kernel(nl.tanh, getattr(nl, op0), getattr(nl, op1), reverse=(reverse0, reverse1))
    got, _ = nki.simulate(kernel)(x, i0, i1, a)
    want = _reference(x, "tanh", op0, 2.0, op1, -0.75, reverse0=reverse0, reverse1=reverse1)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("tiles", [(True, False), (False, True), (True, True)])
def test_activate2_per_partition_immediates(tiles) -> None:
    x, i0, i1, a = _inputs()
    got, _ = nki.simulate(_kernel(nl.exp, nl.multiply, nl.subtract, tiles=tiles))(x, i0, i1, a)
    want = _reference(x, "exp", "multiply", i0 if tiles[0] else 2.0, "subtract", i1 if tiles[1] else -0.75)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("func", ["gelu", "gelu_dx", "silu_dx", "gelu_apprx_sigmoid_dx", "erf_dx"])
def test_activate2_functions(func: str) -> None:
    x, i0, i1, a = _inputs()
    got, _ = nki.simulate(_kernel(getattr(nl, func), nl.multiply, nl.add))(x, i0, i1, a)
    np.testing.assert_allclose(got, _reference(x, func, "multiply", 2.0, "add", -0.75), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("relu", [None, 0.1, "tile"])
def test_activate2_prelu_relu_param(relu) -> None:
    x, i0, i1, a = _inputs()
    got, _ = nki.simulate(_kernel(nl.prelu, nl.multiply, nl.add, relu=relu))(x, i0, i1, a)
    slope = a if relu == "tile" else np.float32(relu or 0.0)  # an immediate is an f32 word
    want = _reference(x, "prelu", "multiply", 2.0, "add", -0.75, relu=slope)
    np.testing.assert_array_equal(got, want)  # one fp32 multiply per element: exact
    assert (got < 0).any() == (relu is not None)  # relu_param defaults to 0: prelu is relu


@pytest.mark.parametrize("in_dtype,out_dtype", [
    (np.float32, nl.bfloat16), (ml_dtypes.bfloat16, nl.float32), (np.float16, nl.float16),
    (np.int8, nl.float32), (np.int32, nl.int32), (np.float32, nl.float8_e4m3),
])  # fmt: skip
def test_activate2_dtypes(in_dtype, out_dtype) -> None:
    x, i0, i1, a = _inputs()
    x = (x * 4).astype(in_dtype)
    got, _ = nki.simulate(_kernel(nl.copy, nl.multiply, nl.add, out_dtype=out_dtype))(x, i0, i1, a)
    want = _reference(x, "copy", "multiply", 2.0, "add", -0.75)
    np_out = np.dtype(got.dtype)
    if np_out.kind in "iu":  # fp32 results round half to even into integers
        want = np.rint(want)
    np.testing.assert_array_equal(got, want.astype(np_out))


def test_activate2_reads_psum() -> None:
    x, i0, i1, a = _inputs()
    got, _ = nki.simulate(_kernel(nl.gelu, nl.subtract, nl.bypass, psum_in=True, reverse=(True, False)))(x, i0, i1, a)
    np.testing.assert_allclose(got, _reference(x, "gelu", "subtract", 2.0, "bypass", 0, reverse0=True), rtol=1e-6,
                               atol=1e-7)  # fmt: skip


_REDUCERS = {"add": lambda y: y.sum(axis=1), "maximum": lambda y: y.max(axis=1), "minimum": lambda y: y.min(axis=1),
             "abs_max": lambda y: np.take_along_axis(y, np.abs(y).argmax(axis=1)[:, None], 1)[:, 0],
             "abs_min": lambda y: np.take_along_axis(y, np.abs(y).argmin(axis=1)[:, None], 1)[:, 0]}  # fmt: skip


@pytest.mark.parametrize("reduce", sorted(_REDUCERS))
def test_activate2_reduce_ops(reduce: str) -> None:
    x, i0, i1, a = _inputs()
    y, r = nki.simulate(_kernel(nl.tanh, nl.multiply, nl.add, reduce=getattr(nl, reduce)))(x, i0, i1, a)
    want = _reference(x, "tanh", "multiply", 2.0, "add", -0.75)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(r[:, 0], _REDUCERS[reduce](want.astype(np.float64)), rtol=1e-5, atol=1e-6)


def _chain_kernel(first_cmd, second_cmd, reduce_op):
    @nki.jit(**GEN4)
    def kernel(x):
        xs = _sbuf(x)
        y = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activate2(dst=y, op=nl.copy, data=xs, imm0=1.0, imm1=0.0, op0=nl.multiply, op1=nl.bypass,
                       reduce_op=reduce_op, reduce_cmd=first_cmd)  # keeps the result in the registers
        nisa.activate2(dst=y, op=nl.copy, data=xs, imm0=3.0, imm1=0.0, op0=nl.multiply, op1=nl.bypass,
                       reduce_op=reduce_op, reduce_res=r, reduce_cmd=second_cmd)
        return _out(r)

    return kernel


@pytest.mark.parametrize("first,second,want", [
    ("reset_reduce", "reduce", lambda x: x.sum(1) + 3 * x.sum(1)),  # the second call continues the first's sum
    ("reset_reduce", "idle", lambda x: x.sum(1)),  # idle only reads the registers out
    ("reset_reduce", "reset", lambda x: np.zeros(len(x))),  # reset: add's identity, nothing reduced
    ("reset", "reduce", lambda x: 3 * x.sum(1)),
])  # fmt: skip
def test_activate2_reduce_cmd_chains(first: str, second: str, want) -> None:
    x = RNG.standard_normal((128, 32)).astype(np.float32)
    kernel = _chain_kernel(getattr(nisa.reduce_cmd, first), getattr(nisa.reduce_cmd, second), nl.add)
    np.testing.assert_allclose(nki.simulate(kernel)(x)[:, 0], want(x.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_activate2_abs_min_reset_starts_from_infinity() -> None:
    x = RNG.standard_normal((128, 32)).astype(np.float32)
    r = nki.simulate(_chain_kernel(nisa.reduce_cmd.reset, nisa.reduce_cmd.reduce, nl.abs_min))(x)
    np.testing.assert_array_equal(r[:, 0], _REDUCERS["abs_min"](3 * x))


def _zeros(shape, dtype):
    t = nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    return t


def _error(**kw):
    args = dict(op=nl.exp, imm0=1.0, imm1=1.0, op0=nl.multiply, op1=nl.add) | kw

    @nki.jit(**GEN4)
    def kernel(x):
        xs = _sbuf(x)
        y = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        i = {k: (_zeros(*v[1:]) if isinstance(v, tuple) else v) for k, v in args.items()}
        nisa.activate2(dst=y, data=xs, **i)
        return _out(y)

    return kernel


@pytest.mark.parametrize("kw,message", [
    ({"op0": nl.add, "op1": nl.add}, r"\(op0, op1\) = \(add, add\) is not one of"),
    ({"op0": nl.bypass, "op1": nl.add}, "op1=add needs op0 to be set"),
    ({"op0": nl.bypass, "op1": nl.bypass, "reverse0": True}, "reverse0 needs op0 to be set"),
    ({"op1": nl.bypass, "reverse1": True}, "reverse1 needs op1 to be set"),
    ({"reduce_cmd": nisa.reduce_cmd.reset_reduce}, "reduce_cmd=reset_reduce needs a reduce_op"),
    ({"reduce_op": nl.multiply, "reduce_cmd": nisa.reduce_cmd.reduce}, "reduce_op must be one of add, maximum"),
    ({"reduce_op": nl.add, "reduce_cmd": nisa.reduce_cmd.load_reduce}, "reduce_cmd must be idle, reset, reduce"),
    ({"op": nl.add}, "unsupported activation function 'add'"),
    ({"imm0": ("tile", (128, 1), nl.float32), "imm1": ("tile", (128, 1), nl.bfloat16)},
     "imm0 and imm1 tiles must share a dtype"),
    ({"imm0": ("tile", (128, 2), nl.float32)}, r"'imm0' must be a \(128, 1\) tile"),
    ({"relu_param": ("tile", (64, 1), nl.float32)}, r"'relu_param' must be a \(128, 1\) tile"),
])  # fmt: skip
def test_activate2_errors(kw, message: str) -> None:
    kernel = _error(**kw)
    with pytest.raises(NkiError, match=message) as e:
        kernel.trace(np.zeros((128, 8), np.float32))
    assert "test_activate2.py" in str(e.value)  # at the kernel's line


def test_activate2_is_a_gen4_instruction() -> None:
    kernel = _error()
    with pytest.raises(NkiError, match="nisa.activate2 is not available on gen3.*gen4 or newer"):
        nki.jit(kernel.func, platform_target="trn2").trace(np.zeros((128, 8), np.float32))


def test_activate2_reference_example() -> None:
    """The API reference's example: multiply by 2.0, add 0.5, then GELU."""

    @nki.jit(**GEN4)
    def activate2_scale_bias_kernel(data_tensor):
        out = nl.ndarray(data_tensor.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.ndarray(data_tensor.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=data_tensor)
        result = nl.ndarray(data_tensor.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activate2(dst=result, op=nl.gelu, data=x, imm0=2.0, imm1=0.5, op0=nl.multiply, op1=nl.add)
        nisa.dma_copy(dst=out, src=result)
        return out

    x = RNG.standard_normal((128, 256)).astype(np.float32)
    got = nki.simulate(activate2_scale_bias_kernel)(x)
    np.testing.assert_allclose(got, _reference(x, "gelu", "multiply", 2.0, "add", 0.5), rtol=1e-6, atol=1e-7)
