"""Simulator: every opcode against numpy, dtype casts, reduce registers, semaphore timing, deadlocks, multi-core,
profile / Chrome trace."""

from __future__ import annotations

import json
import math
import time

import ml_dtypes
import numpy as np
import pytest

from nkic.dialects.common import contiguous_pattern
from nkic.target.vocab import ACT_FUNCS, ALU_OPS, DTYPES, REDUCE_CMDS
from nkic.target.costs import (
    DMA_LATENCY_NS,
    dependent_latency_ns,
    dma_transfer,
    instr_ns,
    neff_teardown_ns,
    occupancy_ns,
)
from nkic.runtime.encoding import ENGINES, Instr, Operand, engine_sem, f32_bits, i32_bits, queue_sem
from nkic.runtime.neff import Neff, Subgraph, Variable, write_neff
from nkic.runtime.simulator import SimulationDeadlock, SimulationError, run_neff_bytes, simulate

RNG = np.random.default_rng(0)
ALU = dict(ALU_OPS.codes)
ACT = dict(ACT_FUNCS.codes)
CMD = dict(REDUCE_CMDS.codes)


def sbuf(shape: tuple[int, ...], dtype: str = "float32", addr: int = 0, memory: str = "sbuf", start: int = 0) -> Operand:
    return Operand(memory, dtype, ((1, shape[0]),) + tuple(contiguous_pattern(shape[1:])), start, addr)


def hbm(var_id: int, shape: tuple[int, ...], dtype: str = "float32") -> Operand:
    return Operand("hbm", dtype, tuple(contiguous_pattern(shape)), var_id=var_id)


class Kernel:
    """Builds a one-core NEFF: DMA every input HBM->SBUF, run compute streams, DMA SBUF tiles back to outputs."""

    def __init__(self) -> None:
        self.vars: list[Variable] = []
        self.loads: list[Instr] = []
        self.stores: list[tuple[Operand, Operand]] = []
        self.engines: dict[str, list[Instr]] = {e: [] for e in ENGINES}

    def input(self, name: str, tile: Operand, shape: tuple[int, ...] | None = None, dtype: str | None = None) -> None:
        shape = shape or tile.shape
        var = Variable(name, len(self.vars), "input", shape, dtype or tile.dtype)
        self.vars.append(var)
        self.loads.append(Instr("DMA_COPY", "sp", (tile, hbm(var.var_id, shape, var.dtype)), (0,),
                                signal_sem=queue_sem(0)))  # fmt: skip

    def output(self, name: str, tile: Operand, shape: tuple[int, ...] | None = None, dtype: str | None = None) -> None:
        shape = shape or tile.shape
        var = Variable(name, len(self.vars), "output", shape, dtype or tile.dtype)
        self.vars.append(var)
        self.stores.append((hbm(var.var_id, shape, var.dtype), tile))

    def op(self, opcode: str, engine: str, *operands: Operand | None, imms: tuple[int, ...] = (), flags: int = 0) -> None:
        self.engines[engine].append(Instr(opcode, engine, operands, imms, flags))

    def neff(self) -> Neff:
        streams = {e: list(v) for e, v in self.engines.items()}
        used = [e for e in ("pe", "act", "dve", "pool") if streams[e]]
        for e in used:  # each compute engine waits for every load, then reports completion on its semaphore
            streams[e].insert(0, Instr("SEM_WAIT", e, wait_sem=queue_sem(0), wait_value=len(self.loads)))
            streams[e].append(Instr("SEM_WAIT", e, signal_sem=engine_sem(e)))
        sp = list(self.loads) + [Instr("SEM_WAIT", "sp", wait_sem=engine_sem(e), wait_value=1) for e in used]
        if not used:
            sp.append(Instr("SEM_WAIT", "sp", wait_sem=queue_sem(0), wait_value=len(self.loads)))
        sp += [Instr("DMA_COPY", "sp", (dst, src), (1,), signal_sem=queue_sem(1)) for dst, src in self.stores]
        streams["sp"] = sp
        return Neff("test", self.vars, [Subgraph("sg00", streams)])

    def run(self, **inputs: np.ndarray) -> dict[str, np.ndarray]:
        return simulate(self.neff(), inputs).outputs


def rand(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------------------------
# data movement


def test_dma_round_trip_is_bit_exact() -> None:
    k = Kernel()
    t = sbuf((128, 32), "float32", addr=64)
    k.input("x", t)
    k.output("y", t)
    bits = RNG.integers(0, 1 << 32, (128, 32), dtype=np.uint64).astype(np.uint32)
    bits[0, :4] = [0x7FC00001, 0xFFC12345, 0x7F800000, 0x00000001]  # NaN payloads, inf, denormal
    out = k.run(x=bits.view(np.float32))["y"]
    assert np.array_equal(out.view(np.uint32), bits)


def test_dma_cast_reshape_and_transpose() -> None:
    k = Kernel()
    k.input("x", sbuf((128, 8)), shape=(4, 256))  # same element order, different shapes
    k.output("bf", sbuf((128, 8)), dtype="bfloat16")  # cast through fp32 on the way out
    tin = sbuf((32, 64), addr=1024)
    k.input("m", tin, shape=(64, 32))
    k.loads[-1] = Instr("DMA_COPY", "sp", k.loads[-1].operands, (0,), flags=1, signal_sem=queue_sem(0))
    k.output("mt", tin)
    x, m = rand(4, 256), rand(64, 32)
    out = k.run(x=x, m=m)
    assert np.array_equal(out["bf"], x.reshape(128, 8).astype(ml_dtypes.bfloat16))
    assert np.array_equal(out["mt"], m.T)


def test_uninitialised_reads_are_nan() -> None:
    k = Kernel()
    k.output("f", sbuf((128, 4), addr=8))
    k.output("b", sbuf((128, 4), "bfloat16", addr=2))
    k.engines["sp"] = []
    out = k.run()
    assert np.isnan(out["f"]).all() and np.isnan(out["b"].astype(np.float32)).all()


def test_dma_element_count_mismatch() -> None:
    k = Kernel()
    k.input("x", sbuf((128, 8)), shape=(128, 4))
    with pytest.raises(SimulationError, match="element counts"):
        k.run(x=rand(128, 4))


def test_out_of_bounds_access() -> None:
    k = Kernel()
    k.input("x", sbuf((128, 8), addr=212984 - 16))
    with pytest.raises(SimulationError, match="outside"):
        k.run(x=rand(128, 8))


# ---------------------------------------------------------------------------------------------------------------
# TensorE


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_matmul_overwrite_and_accumulate(dtype: str) -> None:
    k = Kernel()
    a, b, c = sbuf((128, 64), dtype), sbuf((128, 256), dtype, addr=1024), sbuf((128, 256), dtype, addr=2048)
    acc, ovw = sbuf((64, 256), memory="psum"), sbuf((64, 256), memory="psum", addr=2048)
    for name, t in (("a", a), ("b", b), ("c", c)):
        k.input(name, t)
    k.op("MATMUL", "pe", acc, a, b)
    k.op("MATMUL", "pe", acc, a, c, flags=1)
    k.op("MATMUL", "pe", ovw, a, b, flags=1)  # accumulates onto garbage first ...
    k.op("MATMUL", "pe", ovw, a, c)  # ... then overwrites it
    for name, t in (("acc", acc), ("ovw", ovw)):
        res = sbuf((64, 256), addr=8192 if name == "acc" else 16384)
        k.op("TENSOR_COPY", "act", res, t)
        k.output(name, res)
    k.engines["act"].insert(0, Instr("SEM_WAIT", "act", wait_sem=engine_sem("pe"), wait_value=1))
    xa, xb, xc = rand(128, 64), rand(128, 256), rand(128, 256)
    out = k.run(a=xa, b=xb, c=xc)
    fa, fb, fc = (v.astype(DTYPES[dtype]).astype(np.float64) for v in (xa, xb, xc))
    np.testing.assert_allclose(out["acc"], fa.T @ fb + fa.T @ fc, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out["ovw"], fa.T @ fc, rtol=1e-5, atol=1e-4)


def test_pe_transpose_flattens_free_dims() -> None:
    k = Kernel()
    src, dst, res = sbuf((64, 4, 8)), sbuf((32, 64), memory="psum"), sbuf((32, 64), addr=4096)
    k.input("x", src)
    k.op("TRANSPOSE", "pe", dst, src)
    k.op("TENSOR_COPY", "act", res, dst)
    k.engines["act"].insert(0, Instr("SEM_WAIT", "act", wait_sem=engine_sem("pe"), wait_value=1))
    k.output("y", res)
    x = rand(64, 4, 8)
    assert np.array_equal(k.run(x=x)["y"], x.reshape(64, 32).T)


# ---------------------------------------------------------------------------------------------------------------
# elementwise ALU


def _np_alu(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    table = {
        "add": a + b, "subtract": a - b, "multiply": a * b, "divide": a / b, "maximum": np.maximum(a, b),
        "minimum": np.minimum(a, b), "equal": a == b, "not_equal": a != b, "greater": a > b,
        "greater_equal": a >= b, "less": a < b, "less_equal": a <= b,
        "logical_and": (a != 0) & (b != 0), "logical_or": (a != 0) | (b != 0), "logical_xor": (a != 0) ^ (b != 0),
        "abs_max": np.where(np.abs(a) > np.abs(b), a, b), "abs_min": np.where(np.abs(a) < np.abs(b), a, b),
        "mod": np.mod(a, b), "bypass": a, "abs": np.abs(a), "square": a * a, "relu": np.maximum(a, 0),
        "reciprocal": 1 / a,
    }  # fmt: skip
    return np.asarray(table[op], np.float32)


FLOAT_OPS = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "equal", "not_equal", "greater",
             "greater_equal", "less", "less_equal", "logical_and", "logical_or", "logical_xor", "abs_max",
             "abs_min", "mod", "bypass", "abs", "square", "relu", "reciprocal"]  # fmt: skip


@pytest.mark.parametrize("engine", ["dve", "pool", "act"])
def test_tensor_tensor_float_ops(engine: str) -> None:
    k = Kernel()
    a, b = sbuf((128, 16)), sbuf((128, 16), addr=64)
    k.input("a", a)
    k.input("b", b)
    for i, op in enumerate(FLOAT_OPS):
        dst = sbuf((128, 16), addr=1024 + 64 * i)
        k.op("TENSOR_TENSOR", engine, dst, a, b, imms=(ALU[op],))
        k.output(op, dst)
    pw = sbuf((128, 16), addr=8192)
    k.op("TENSOR_TENSOR", engine, pw, b, a, imms=(ALU["power"],))
    k.output("power", pw)
    xa, xb = rand(128, 16), rand(128, 16)
    xa[:, :4] = xb[:, :4]  # exercise equality
    xb[:, 8:] = np.abs(xb[:, 8:]) + 0.5
    out = k.run(a=xa, b=xb)
    for op in FLOAT_OPS:
        np.testing.assert_allclose(out[op], _np_alu(op, xa, xb), rtol=2e-6, atol=1e-6, err_msg=op)
    np.testing.assert_allclose(out["power"][:, 8:], np.power(xb[:, 8:], xa[:, 8:]), rtol=2e-6)


def test_tensor_tensor_int32_is_exact() -> None:
    k = Kernel()
    a, b = sbuf((128, 8), "int32"), sbuf((128, 8), "int32", addr=64)
    k.input("a", a)
    k.input("b", b)
    ops = ["add", "subtract", "multiply", "maximum", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
           "right_shift", "divide", "equal"]  # fmt: skip
    for i, op in enumerate(ops):
        dst = sbuf((128, 8), "int32", addr=1024 + 64 * i)
        k.op("TENSOR_TENSOR", "pool", dst, a, b, imms=(ALU[op],))
        k.output(op, dst)
    xa = RNG.integers(-(1 << 30), 1 << 30, (128, 8), dtype=np.int32)
    xb = RNG.integers(1, 20, (128, 8), dtype=np.int32)
    out = k.run(a=xa, b=xb)
    wa, wb = xa.astype(np.int64), xb.astype(np.int64)
    want = {
        "add": wa + wb, "subtract": wa - wb, "multiply": wa * wb, "maximum": np.maximum(wa, wb),
        "bitwise_and": wa & wb, "bitwise_or": wa | wb, "bitwise_xor": wa ^ wb,
        "left_shift": (wa << wb) & 0xFFFFFFFF, "right_shift": (wa & 0xFFFFFFFF) >> wb,
        "divide": np.trunc(wa / wb), "equal": wa == wb,
    }  # fmt: skip
    for op in ops:
        assert np.array_equal(out[op], want[op].astype(np.int64).astype(np.int32)), op


def test_tensor_scalar_immediates_tiles_and_reverse() -> None:
    k = Kernel()
    x, s = sbuf((128, 32)), sbuf((128, 1), addr=512)
    k.input("x", x)
    k.input("s", s)
    cases = {
        "mul_add": ((ALU["multiply"], f32_bits(3.0), ALU["add"], f32_bits(-1.0)), 4, None, None),
        "rsub": ((ALU["subtract"], f32_bits(10.0)), 1, None, None),
        "tile_div_rev": ((ALU["divide"], 0, ALU["subtract"], f32_bits(2.0)), 1 | 2 | 4, s, None),
        "tile_max": ((ALU["maximum"], 0, ALU["multiply"], 0), 4, s, s),
    }
    for i, (name, (imms, flags, op0, op1)) in enumerate(cases.items()):
        dst = sbuf((128, 32), "bfloat16", addr=1024 + 128 * i)
        k.op("TENSOR_SCALAR", "dve", dst, x, op0, op1, imms=imms, flags=flags)
        k.output(name, dst)
    xx, xs = rand(128, 32), rand(128, 1, lo=0.5, hi=2.0)
    out = k.run(x=xx, s=xs)
    want = {"mul_add": xx * 3 - 1, "rsub": 10 - xx, "tile_div_rev": 2 - xs / xx, "tile_max": np.maximum(xx, xs) * xs}
    for name, w in want.items():
        assert np.array_equal(out[name], w.astype(np.float32).astype(ml_dtypes.bfloat16)), name


def test_tensor_scalar_bitvec_on_ints() -> None:
    k = Kernel()
    x, dst = sbuf((128, 8), "int32"), sbuf((128, 8), "int32", addr=64)
    k.input("x", x)
    k.op("TENSOR_SCALAR", "dve", dst, x, imms=(ALU["right_shift"], f32_bits(4.0), ALU["bitwise_and"],
                                              f32_bits(255.0)), flags=4)  # fmt: skip
    k.output("y", dst)
    xx = RNG.integers(0, 1 << 30, (128, 8), dtype=np.int32)
    assert np.array_equal(k.run(x=xx)["y"], (xx >> 4) & 255)


def test_scalar_tensor_tensor() -> None:
    k = Kernel()
    x, y, s = sbuf((128, 16)), sbuf((128, 16), addr=64), sbuf((128, 1), addr=128)
    for name, t in (("x", x), ("y", y), ("s", s)):
        k.input(name, t)
    d0, d1 = sbuf((128, 16), addr=1024), sbuf((128, 16), addr=2048)
    k.op("SCALAR_TENSOR_TENSOR", "dve", d0, x, None, y, imms=(ALU["multiply"], f32_bits(2.0), ALU["add"]))
    k.op("SCALAR_TENSOR_TENSOR", "pool", d1, x, s, y, imms=(ALU["subtract"], 0, ALU["divide"]), flags=3)
    k.output("d0", d0)
    k.output("d1", d1)
    xx, xy, xs = rand(128, 16), rand(128, 16), rand(128, 1)
    out = k.run(x=xx, y=xy, s=xs)
    np.testing.assert_allclose(out["d0"], xx * 2 + xy, rtol=1e-6)
    np.testing.assert_allclose(out["d1"], xy / (xs - xx), rtol=1e-5)


def test_tensor_copy_memset_reciprocal() -> None:
    k = Kernel()
    x = sbuf((128, 16))
    k.input("x", x)
    cp, m_f, m_i, rc = (sbuf((128, 16), dt, addr=a) for dt, a in
                        (("bfloat16", 1024), ("float32", 2048), ("int32", 3072), ("float32", 4096)))  # fmt: skip
    k.op("TENSOR_COPY", "pool", cp, x)
    k.op("MEMSET", "act", m_f, imms=(f32_bits(-2.5),))
    k.op("MEMSET", "dve", m_i, imms=(i32_bits(-7),), flags=1)
    k.op("RECIPROCAL", "dve", rc, x)
    for name, t in (("cp", cp), ("mf", m_f), ("mi", m_i), ("rc", rc)):
        k.output(name, t)
    xx = rand(128, 16)
    out = k.run(x=xx)
    assert np.array_equal(out["cp"], xx.astype(ml_dtypes.bfloat16))
    assert (out["mf"] == -2.5).all() and (out["mi"] == -7).all()
    np.testing.assert_allclose(out["rc"], 1 / xx, rtol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# reductions


def test_tensor_reduce() -> None:
    k = Kernel()
    x = sbuf((128, 4, 8))
    k.input("x", x)
    cases = {"sum_last": (ALU["add"], 1, 0, (128, 4)), "max_all": (ALU["maximum"], 2, 0, (128, 1)),
             "neg_min": (ALU["minimum"], 0, 1, (128, 1)), "prod": (ALU["multiply"], 1, 0, (128, 4))}  # fmt: skip
    for i, (name, (op, ndims, negate, shape)) in enumerate(cases.items()):
        dst = sbuf(shape, addr=1024 + 64 * i)
        k.op("TENSOR_REDUCE", "dve" if i % 2 else "pool", dst, x, imms=(op, ndims), flags=negate)
        k.output(name, dst)
    xx = rand(128, 4, 8, lo=0.5, hi=1.5)
    out = k.run(x=xx)
    np.testing.assert_allclose(out["sum_last"], xx.sum(-1), rtol=1e-6)
    np.testing.assert_allclose(out["max_all"][:, 0], xx.reshape(128, -1).max(-1))
    np.testing.assert_allclose(out["neg_min"][:, 0], -xx.reshape(128, -1).min(-1))
    np.testing.assert_allclose(out["prod"], xx.prod(-1), rtol=1e-5)


def test_tensor_scalar_reduce() -> None:
    k = Kernel()
    x, dst, res, nres = sbuf((128, 64)), sbuf((128, 64), addr=512), sbuf((128, 1), addr=1024), sbuf((128, 1), addr=1028)
    k.input("x", x)
    k.op("TENSOR_SCALAR_REDUCE", "dve", dst, x, None, res, imms=(ALU["multiply"], f32_bits(2.0), ALU["add"]))
    k.op("TENSOR_SCALAR_REDUCE", "dve", dst, x, None, nres, imms=(ALU["multiply"], f32_bits(2.0), ALU["maximum"]),
         flags=2)  # fmt: skip
    for name, t in (("dst", dst), ("res", res), ("nres", nres)):
        k.output(name, t)
    xx = rand(128, 64)
    out = k.run(x=xx)
    np.testing.assert_allclose(out["dst"], 2 * xx)
    np.testing.assert_allclose(out["res"][:, 0], (2 * xx).sum(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["nres"][:, 0], -(2 * xx).max(-1))


# ---------------------------------------------------------------------------------------------------------------
# ScalarE


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x)


def _sig(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


ACT_REF = {
    "copy": lambda x: x, "exp": np.exp, "log": np.log, "tanh": np.tanh, "sigmoid": _sig,
    "relu": lambda x: np.maximum(x, 0), "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    "silu": lambda x: x * _sig(x), "square": np.square, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": lambda x: 1 / x, "sin": np.sin, "abs": np.abs, "sign": np.sign,
    "softplus": lambda x: np.log1p(np.exp(x)), "erf": _erf, "arctan": np.arctan,
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x))), "gelu_apprx_sigmoid": lambda x: x * _sig(1.702 * x),
    "gelu_dx": lambda x: 0.5 * (1 + _erf(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi),
    "gelu_apprx_sigmoid_dx": lambda x: _sig(1.702 * x) + 1.702 * x * _sig(1.702 * x) * (1 - _sig(1.702 * x)),
    "silu_dx": lambda x: _sig(x) + x * _sig(x) * (1 - _sig(x)), "erf_dx": lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x),
    "prelu": lambda x: np.maximum(x, 0),  # ACTIVATE has no relu_param: the slope is 0
}  # fmt: skip


def test_activation_functions() -> None:
    assert set(ACT_REF) == set(ACT_FUNCS)
    k = Kernel()
    x = sbuf((128, 32))
    k.input("x", x)
    for func, i in ACT.items():
        dst = sbuf((128, 32), addr=1024 + 128 * i)
        # func(x * 0.5 + 0.25): the affine part keeps inputs inside every function's valid range
        k.op("ACTIVATE", "act", dst, x, imms=(ACT[func], f32_bits(0.5), f32_bits(0.25)))
        k.output(func, dst)
    xx = rand(128, 32, lo=0.1, hi=3.0)
    out = k.run(x=xx)
    arg = xx.astype(np.float64) * 0.5 + 0.25
    for func in ACT_FUNCS:
        np.testing.assert_allclose(out[func], ACT_REF[func](arg), rtol=2e-6, atol=1e-6, err_msg=func)


def test_sin_has_no_range_reduction() -> None:
    k = Kernel()
    x, dst = sbuf((128, 1)), sbuf((128, 1), addr=64)
    k.input("x", x)
    k.op("ACTIVATE", "act", dst, x, imms=(ACT["sin"], f32_bits(1.0)))
    k.output("y", dst)
    assert abs(k.run(x=np.full((128, 1), 9.0, np.float32))["y"][0, 0] - math.sin(9.0)) > 1.0


def test_activation_tile_bias_scale_and_reduce_registers() -> None:
    k = Kernel()
    x, b, s = sbuf((128, 16)), sbuf((128, 1), addr=64), sbuf((128, 1), addr=68)
    for name, t in (("x", x), ("b", b), ("s", s)):
        k.input(name, t)
    y = sbuf((128, 16), "bfloat16", addr=1024)
    r1, r2, r3, r4 = (sbuf((128, 1), addr=2048 + 4 * i) for i in range(4))
    add = ALU["add"]
    k.op("ACTIVATE", "act", y, x, b, s, r1, imms=(ACT["exp"], 0, 0, CMD["reset_reduce"], add))
    k.op("ACTIVATE", "act", y, x, b, s, r2, imms=(ACT["exp"], 0, 0, CMD["reduce"], add))
    k.op("ACTIVATE", "act", y, x, None, None, r3, imms=(ACT["copy"], f32_bits(1.0), 0, CMD["idle"], add))
    k.op("ACTIVATE", "act", y, x, None, None, r4, imms=(ACT["copy"], f32_bits(1.0), 0, CMD["reset"], add))
    for name, t in (("y", y), ("r1", r1), ("r2", r2), ("r3", r3), ("r4", r4)):
        k.output(name, t)
    xx, xb, xs = rand(128, 16), rand(128, 1), rand(128, 1)
    out = k.run(x=xx, b=xb, s=xs)
    e = np.exp(xx.astype(np.float64) * xs + xb)
    assert np.array_equal(out["y"], xx.astype(ml_dtypes.bfloat16))
    np.testing.assert_allclose(out["r1"][:, 0], e.sum(-1), rtol=1e-5)
    np.testing.assert_allclose(out["r2"][:, 0], 2 * e.sum(-1), rtol=1e-5)
    np.testing.assert_allclose(out["r3"][:, 0], 2 * e.sum(-1), rtol=1e-5)  # idle leaves the registers alone
    assert (out["r4"] == 0).all()


# ---------------------------------------------------------------------------------------------------------------
# GpSimd patterns


def test_iota_and_affine_select() -> None:
    k = Kernel()
    x = sbuf((128, 128))
    k.input("x", x)
    iota_i, iota_f, sel = sbuf((128, 4, 8), "int32", addr=1024), sbuf((128, 32), addr=2048), sbuf((128, 128), addr=4096)
    k.op("IOTA", "pool", iota_i, Operand("none", "int32", ((3, 128), (100, 4), (-1, 8))), imms=(i32_bits(-5),))
    k.op("IOTA", "pool", iota_f, Operand("none", "int32", ((0, 128), (2, 32))), imms=(7,))
    causal = Operand("none", "int32", ((1, 128), (-1, 128)))  # value = p - f
    k.op("AFFINE_SELECT", "pool", sel, x, causal, imms=(0, ALU["greater_equal"], f32_bits(-1e30)))
    for name, t in (("ii", iota_i), ("if", iota_f), ("sel", sel)):
        k.output(name, t)
    xx = rand(128, 128)
    out = k.run(x=xx)
    p, a, b = np.meshgrid(np.arange(128), np.arange(4), np.arange(8), indexing="ij")
    assert np.array_equal(out["ii"], -5 + 3 * p + 100 * a - b)
    assert np.array_equal(out["if"], np.broadcast_to(7 + 2 * np.arange(32), (128, 32)).astype(np.float32))
    assert np.array_equal(out["sel"], np.where(np.tril(np.ones((128, 128), bool)), xx, np.float32(-1e30)))


# ---------------------------------------------------------------------------------------------------------------
# scheduling


def _pipeline(wait_on_load: bool) -> Neff:
    """SP loads x, ACT computes exp (waiting for the load unless told not to), SP stores after ACT signals."""
    x, y, t, u = hbm(0, (128, 64)), hbm(1, (128, 64)), sbuf((128, 64)), sbuf((128, 64), addr=4096)
    wait = {"wait_sem": queue_sem(0), "wait_value": 1} if wait_on_load else {}
    act = [Instr("ACTIVATE", "act", (u, t), (ACT["exp"], f32_bits(1.0)), signal_sem=engine_sem("act"), inst_id=2,
                 **wait)]  # type: ignore[arg-type]  # fmt: skip
    sp = [Instr("DMA_COPY", "sp", (t, x), (0,), signal_sem=queue_sem(0), inst_id=1),
          Instr("DMA_COPY", "sp", (y, u), (1,), wait_sem=engine_sem("act"), wait_value=1, signal_sem=queue_sem(1),
                inst_id=3)]  # fmt: skip
    variables = [Variable("x", 0, "input", (128, 64), "float32"), Variable("y", 1, "output", (128, 64), "float32")]
    return Neff("pipe", variables, [Subgraph("sg00", {"act": act, "sp": sp})])


def test_semaphore_orders_consumer_after_producer() -> None:
    xx = rand(128, 64)
    res = simulate(_pipeline(True), {"x": xx})
    np.testing.assert_allclose(res.outputs["y"], np.exp(xx), rtol=1e-6)
    prof = res.profile
    (load,) = prof.events_for("q0")
    (act,) = prof.events_for("act")
    (store,) = prof.events_for("q1")
    assert act.start_ns >= load.end_ns and store.start_ns >= act.end_ns
    # The queue track shows a transfer's data phase: it starts DMA_LATENCY_NS after SP triggered it and, alone on
    # the core, moves at its engines' full rate (the timeline model, target/costs.py).
    (trigger, _) = prof.events_for("sp")
    work, rate = dma_transfer(_pipeline(True).subgraphs[0].engines["sp"][0])
    assert load.start_ns == pytest.approx(trigger.end_ns + DMA_LATENCY_NS)
    assert load.dur_ns == pytest.approx(work / rate)
    activate = _pipeline(True).subgraphs[0].engines["act"][0]
    assert act.dur_ns == pytest.approx(occupancy_ns(activate)) and occupancy_ns(activate) == instr_ns(activate)
    # ACT's result is readable (its semaphore signals) its dependent latency after it ends.
    store_trigger = [ev for ev in prof.events_for("sp") if ev.inst_id == 3][0]
    assert store_trigger.start_ns == pytest.approx(act.end_ns + dependent_latency_ns("act"))
    assert prof.total_ns == pytest.approx(store.end_ns + neff_teardown_ns())  # the completion write follows
    assert prof.total_cycles == round(prof.total_ns * 1.4)
    assert prof.instr_counts == {"pe": 0, "act": 1, "dve": 0, "pool": 0, "sp": 2, "q0": 1, "q1": 1}
    assert prof.busy_ns["pe"] == 0.0 and prof.busy_ns["q0"] == pytest.approx(load.dur_ns)
    # Without the wait ACT reads SBUF before the load lands: the answer is wrong (NaN garbage).
    bad = simulate(_pipeline(False), {"x": xx})
    assert np.isnan(bad.outputs["y"]).all()
    assert bad.profile.events_for("act")[0].start_ns < load.end_ns


def test_dma_queue_is_fifo_and_queues_overlap() -> None:
    t, x = sbuf((128, 64)), hbm(0, (128, 64))
    sp = [Instr("DMA_COPY", "sp", (t, x), (q,), signal_sem=queue_sem(q)) for q in (0, 0, 1)]
    neff = Neff("q", [Variable("x", 0, "input", (128, 64), "float32")], [Subgraph("sg00", {"sp": sp})])
    prof = simulate(neff, {"x": rand(128, 64)}).profile
    a, b = prof.events_for("q0")
    (c,) = prof.events_for("q1")
    assert b.start_ns == pytest.approx(a.end_ns) and c.start_ns < a.end_ns


def test_deadlock_is_detected_quickly() -> None:
    t = sbuf((128, 4))
    act = [Instr("TENSOR_COPY", "act", (t, t), wait_sem=engine_sem("dve"), wait_value=1, signal_sem=engine_sem("act"))]
    dve = [Instr("TENSOR_COPY", "dve", (t, t), wait_sem=engine_sem("act"), wait_value=1, signal_sem=engine_sem("dve"))]
    neff = Neff("dl", [], [Subgraph("sg00", {"act": act, "dve": dve})])
    start = time.perf_counter()
    with pytest.raises(SimulationDeadlock) as info:
        simulate(neff, {})
    assert time.perf_counter() - start < 1.0
    msg = str(info.value)
    assert "act[0] TENSOR_COPY" in msg and "dve[0] TENSOR_COPY" in msg and "S[2](dve) >= 1" in msg
    assert "current value 0" in msg
    assert "\n" not in msg  # one line, as every error prints


def test_deadlock_after_partial_progress() -> None:
    pe = [Instr("SEM_WAIT", "pe", signal_sem=engine_sem("pe")), Instr("SEM_WAIT", "pe", wait_sem=0, wait_value=5)]
    with pytest.raises(SimulationDeadlock, match=r"S\[0\]\(pe\)=1"):
        simulate(Neff("dl", [], [Subgraph("sg00", {"pe": pe})]), {})


def test_runaway_guard() -> None:
    pe = [Instr("SEM_WAIT", "pe")] * 50
    with pytest.raises(SimulationError, match="runaway"):
        simulate(Neff("r", [], [Subgraph("sg00", {"pe": pe})]), {}, max_events=10)


def test_multi_subgraph_shares_hbm_and_traces() -> None:
    variables = [Variable("x", 0, "input", (128, 32), "float32"), Variable("y", 1, "output", (128, 32), "float32")]
    sgs = []
    for core in range(2):
        rows = Operand("hbm", "float32", ((32, 64), (1, 32)), address=core * 64 * 32 * 4, var_id=0)
        out = Operand("hbm", "float32", ((32, 64), (1, 32)), address=core * 64 * 32 * 4, var_id=1)
        t, u = sbuf((64, 32)), sbuf((64, 32), addr=512)
        sp = [Instr("DMA_COPY", "sp", (t, rows), (0,), signal_sem=queue_sem(0)),
              Instr("DMA_COPY", "sp", (out, u), (2,), wait_sem=engine_sem("dve"), wait_value=1)]  # fmt: skip
        dve = [Instr("TENSOR_SCALAR", "dve", (u, t), (ALU["add"], f32_bits(float(core + 1))), wait_sem=queue_sem(0),
                     wait_value=1, signal_sem=engine_sem("dve"))]  # fmt: skip
        sgs.append(Subgraph(f"sg{core:02d}", {"sp": sp, "dve": dve}))
    data = write_neff(Neff("mc", variables, sgs))
    xx = rand(128, 32)
    res = run_neff_bytes(data, {"x": xx})
    np.testing.assert_allclose(res.outputs["y"][:64], xx[:64] + 1)
    np.testing.assert_allclose(res.outputs["y"][64:], xx[64:] + 2)
    prof = res.profile
    assert {ev.core for ev in prof.events} == {0, 1} and prof.instr_counts["dve"] == 2
    assert prof.core_busy_ns(1)["q2"] > 0 and "core" in prof.summary()
    trace = prof.to_chrome_trace()
    json.dumps(trace)
    events = trace["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {0: "NeuronCore 0 (sg00)", 1: "NeuronCore 1 (sg01)"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert threads[(0, 2)] == "DVE (VectorE)" and threads[(1, 10)] == "DMA q2" and threads[(0, 8)] == "DMA q0"
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == len(prof.events) and all((e["pid"], e["tid"]) in threads for e in spans)
    dma = next(e for e in spans if e["tid"] == 8)
    ev = prof.events_for("q0")[0]
    assert dma["ts"] == pytest.approx(ev.start_ns / 1000) and dma["dur"] == pytest.approx(ev.dur_ns / 1000)


def test_write_chrome_trace(tmp_path) -> None:  # type: ignore[no-untyped-def]
    prof = simulate(_pipeline(True), {"x": rand(128, 64)}).profile
    path = tmp_path / "trace.json"
    prof.write_chrome_trace(path)
    assert json.loads(path.read_text()) == json.loads(json.dumps(prof.to_chrome_trace()))


def test_target_changes_timing_not_results() -> None:
    xx = rand(128, 64)
    runs = {t: simulate(_pipeline(True), {"x": xx}, target=t) for t in ("gen2", "gen3", "gen4")}
    assert all(np.array_equal(r.outputs["y"], runs["gen3"].outputs["y"]) for r in runs.values())
    act = {t: r.profile.events_for("act")[0].dur_ns for t, r in runs.items()}
    assert act["gen2"] < act["gen3"]  # 1.4 GHz vs 1.2 GHz ScalarE
    with pytest.raises(ValueError):
        simulate(_pipeline(True), {"x": xx}, target="gen9")


def test_input_validation() -> None:
    neff = _pipeline(True)
    with pytest.raises(ValueError, match="missing input 'x'"):
        simulate(neff, {})
    with pytest.raises(ValueError, match="shape"):
        simulate(neff, {"x": np.zeros((64, 128), np.float32)})
    with pytest.raises(ValueError, match="unknown inputs"):
        simulate(neff, {"x": rand(128, 64), "z": rand(1)})
    res = simulate(neff, {"x": np.ones((128, 64), np.float64)})  # cast to the declared dtype
    assert res.outputs["y"].dtype == np.float32 and res.outputs["y"].shape == (128, 64)
