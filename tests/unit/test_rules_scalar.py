"""The documented restrictions of the Scalar Engine family (``target/rules/scalar.py``: activation, activate2,
exponential, reciprocal, dropout and the PRNG instructions) and of the ``nl`` functions (``target/rules/language.py``).

Table-driven: each rule has a kernel body that breaks exactly it (an ``NkiError`` at the body's line, on the
generation the rule names) and a legal body at its edge (it compiles, and matches numpy where the result is
deterministic; a PRNG state body is only traced)."""

from __future__ import annotations

import linecache
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from nkic import api as nki
from nkic.frontend import NkiError
from nkic.target.rules import RULES, Call, Operand, problems

nl, nisa = nki.language, nki.isa
TARGETS = {2: "trn1", 3: "trn2", 4: "trn3"}
RNG = np.random.default_rng(23)
P, F = 128, 8


def sb(shape: tuple[int, ...], dtype: Any = nl.float32, buffer: Any = None) -> Any:
    """A new on-chip tile (SBUF unless ``buffer``)."""
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf if buffer is None else buffer)


def filled(shape: tuple[int, ...], value: float, dtype: Any = nl.float32) -> Any:
    t = sb(shape, dtype)
    nisa.memset(dst=t, value=value)
    return t


# -- breaking bodies: each line is one call that breaks one rule ---------------------------------------------------
def _act(**kw: Any) -> None:
    nisa.activation(dst=kw.pop("dst", sb((P, F))), op=nl.copy, data=kw.pop("data", filled((P, F), 1.0)), **kw)


def _act2(**kw: Any) -> None:
    nisa.activate2(dst=sb((P, F)), op=nl.copy, data=filled((P, F), 1.0), **kw)


def _exp(**kw: Any) -> None:
    shape = kw.pop("shape", (P, F))
    src = filled(shape, 1.0, kw.pop("src_dtype", nl.float32))
    nisa.exponential(dst=sb(shape, kw.pop("dst_dtype", nl.float32)), src=src, **kw)


def _drop(dst: Any = nl.float32, data: Any = nl.float32, prob: Any = nl.float32) -> None:
    nisa.dropout(dst=sb((P, F), dst), data=filled((P, F), 1.0, data), prob=filled((P, 1), 0.0, prob))


def _state(shape: tuple[int, ...], dtype: Any = nl.uint32, buffer: Any = None) -> Any:
    return sb(shape, dtype, buffer)


def _no_reorder_fori() -> None:
    with nl.no_reorder():
        nl.fori_loop(0, 2, lambda i: None)


BREAKING: list[tuple[str, Callable[[], Any], int, str]] = [
    # (rule, body, generation, what the error says)
    ("activation scale fp32", lambda: _act(scale=filled((P, 1), 1.0, nl.bfloat16)), 3, "the scale tile is bfloat16"),
    ("activation v2 bias vector", lambda: _act(bias=1.0), 2, r"bias=1.0 is a constant; the bias must be a \[N, 1\] vector"),
    ("activation bias not tfloat32", lambda: _act(bias=filled((P, 1), 1.0, nl.tfloat32)), 3, "the bias tile cannot be tfloat32"),  # noqa: E501
    ("nc_matmul tfloat32 pair", lambda: nisa.nc_matmul(dst=sb((F, F), buffer=nl.psum), stationary=filled((P, F), 1.0, nl.tfloat32), moving=filled((P, F), 1.0, nl.bfloat16)), 3, "a tfloat32/float32 operand needs a tfloat32/float32 partner"),  # noqa: E501
    ("exponential src not tfloat32", lambda: _exp(src_dtype=nl.tfloat32), 4, "'src' cannot be tfloat32"),
    ("activation N", lambda: _act(scale=filled((64, 1), 1.0)), 3, r"'scale' must be a \(128, 1\)"),
    ("activation partitions", lambda: _act(dst=sb((64, F))), 3, "partition count mismatch"),
    ("activation free", lambda: _act(dst=sb((P, 2 * F))), 3, "elements per partition"),
    ("activation reduce_op add", lambda: _act(reduce_op=nl.maximum, reduce_res=sb((P, 1))), 3, "reduce_op must be nl.add"),
    ("activation_reduce v2 add", lambda: nisa.activation_reduce(dst=sb((P, F)), op=nl.copy, data=filled((P, F), 1.0), reduce_op=nl.maximum, reduce_res=sb((P, 1))), 2, "reduce_op must be nl.add, got nl.maximum on NeuronCore-v2"),  # noqa: E501
    ("activation_reduce reduce_res", lambda: nisa.activation_reduce(dst=sb((P, F)), op=nl.copy, data=filled((P, F), 1.0), reduce_op=nl.add, reduce_res=sb((P, 2))), 3, r"'reduce_res' must be a \(128, 1\) tile"),  # noqa: E501
    ("activate2 imm dtypes", lambda: _act2(imm0=filled((P, 1), 2.0), imm1=filled((P, 1), 1.0, nl.bfloat16), op0=nl.multiply, op1=nl.add), 4, "imm0 and imm1 tiles must share a dtype, got float32 and bfloat16"),  # noqa: E501
    ("activate2 N", lambda: _act2(imm0=filled((64, 1), 2.0), imm1=0.0, op0=nl.multiply, op1=nl.bypass), 4, r"'imm0' must be a \(128, 1\)"),  # noqa: E501
    ("activate2 combos", lambda: _act2(imm0=1.0, imm1=1.0, op0=nl.add, op1=nl.add), 4, r"\(op0, op1\) = \(add, add\) is not one of"),  # noqa: E501
    ("activate2 op0 arithmetic", lambda: _act2(imm0=1.0, imm1=1.0, op0=nl.maximum, op1=nl.bypass), 4, "op0 must be one of multiply, add, subtract, bypass, got maximum"),  # noqa: E501
    ("activate2 op1 arithmetic", lambda: _act2(imm0=1.0, imm1=1.0, op0=nl.multiply, op1=nl.multiply), 4, "op1 must be one of add, subtract, bypass, got multiply"),  # noqa: E501
    ("activate2 op1 requires op0", lambda: _act2(imm0=1.0, imm1=1.0, op0=nl.bypass, op1=nl.add), 4, "op1=add needs op0 to be set"),  # noqa: E501
    ("activate2 reverse0 requires op0", lambda: _act2(imm0=1.0, imm1=1.0, op0=nl.bypass, op1=nl.bypass, reverse0=True), 4, "reverse0 needs op0 to be set"),  # noqa: E501
    ("activate2 reverse1 requires op1", lambda: _act2(imm0=1.0, imm1=1.0, op0=nl.add, op1=nl.bypass, reverse1=True), 4, "reverse1 needs op1 to be set"),  # noqa: E501
    ("activate2 gen4", lambda: _act2(imm0=1.0, imm1=1.0, op0=nl.multiply, op1=nl.add), 3, "nisa.activate2 is not available on gen3"),  # noqa: E501
    ("exponential rank", lambda: _exp(shape=(P, 2, 2, 2, 2)), 4, "'src' is a 5-D tensor, at most 4-D"),
    ("exponential reduce_init", lambda: _exp(reduce_init=1.0), 4, "reduce_init is only used with reduce_cmd=load_reduce"),
    ("exponential dst dtype", lambda: _exp(dst_dtype=nl.uint32), 4, "'dst' cannot be uint32"),
    ("exponential max_value dtype", lambda: _exp(max_value=filled((P, 1), 0.0, nl.bfloat16)), 4, "'max_value' cannot be bfloat16"),  # noqa: E501
    ("exponential reduce_init dtype", lambda: _exp(reduce_init=filled((P, 1), 0.0, nl.bfloat16), reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_res=sb((P, 1))), 4, "'reduce_init' cannot be bfloat16"),  # noqa: E501
    ("exponential partitions", lambda: nisa.exponential(dst=sb((64, F)), src=filled((P, F), 1.0)), 4, "partition count mismatch"),  # noqa: E501
    ("exponential reduce_res shape", lambda: _exp(reduce_res=sb((P, 2)), reduce_cmd=nisa.reduce_cmd.reset_reduce), 4, r"'reduce_res' must be a \(128, 1\)"),  # noqa: E501
    ("exponential gen4", lambda: _exp(), 3, "nisa.exponential is not available on gen3"),
    ("reciprocal partitions", lambda: nisa.reciprocal(dst=sb((64, F)), data=filled((P, F), 1.0)), 3, "partition count mismatch"),  # noqa: E501
    ("reciprocal free", lambda: nisa.reciprocal(dst=sb((P, 4)), data=filled((P, F), 1.0)), 3, "elements per partition"),  # noqa: E501
    ("dropout dtype", lambda: _drop(dst=nl.bfloat16), 3, "dst dtype bfloat16 must match data dtype float32"),
    ("dropout int prob", lambda: _drop(dst=nl.int32, data=nl.int32, prob=nl.bfloat16), 3, "prob must be float32 for int32 data, got bfloat16"),  # noqa: E501
    ("dropout float prob", lambda: _drop(prob=nl.int32), 3, "prob must be a float type for float32 data, got int32"),
    ("rand2 gen4", lambda: nisa.rand2(dst=sb((P, F)), min=0.0, max=1.0), 3, "nisa.rand2 is not available on gen3"),
    ("set_rng_seed 32-bit", lambda: nisa.set_rng_seed(src_seeds=sb((1, 1), nl.int16)), 3, "src_seeds must hold a 32-bit value, got int16"),  # noqa: E501
    ("set_rng_seed [1,1]", lambda: nisa.set_rng_seed(src_seeds=sb((2, 1), nl.int32)), 3, r"src_seeds must be \[1, 1\]"),
    ("set_rng_seed memory", lambda: nisa.set_rng_seed(src_seeds=nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)), 3, "must be in SBUF or PSUM"),  # noqa: E501
    ("rand_set_state uint32", lambda: nisa.rand_set_state(src_seeds=_state((P, 6), nl.int32)), 3, "'src_seeds' must be uint32, got int32"),  # noqa: E501
    ("rand_set_state 2D", lambda: nisa.rand_set_state(src_seeds=_state((P, 2, 3))), 3, "'src_seeds' must be a 2D tensor, got 3-D"),  # noqa: E501
    ("rand_set_state words", lambda: nisa.rand_set_state(src_seeds=_state((P, 6)), engine=nisa.vector_engine), 4, "must hold 24 uint32 words per partition"),  # noqa: E501
    ("rand_set_state SBUF", lambda: nisa.rand_set_state(src_seeds=_state((P, 6), buffer=nl.psum)), 3, "must be in SBUF"),  # noqa: E501
    ("rand_get_state uint32", lambda: nisa.rand_get_state(dst=_state((P, 6), nl.float32)), 3, "'dst' must be uint32, got float32"),  # noqa: E501
    ("rand_get_state 2D", lambda: nisa.rand_get_state(dst=_state((P, 3, 2))), 3, "'dst' must be a 2D tensor, got 3-D"),
    ("rand_get_state words", lambda: nisa.rand_get_state(dst=_state((P, 24))), 3, "must hold 6 uint32 words per partition"),  # noqa: E501
    ("rand_get_state v3 SBUF", lambda: nisa.rand_get_state(dst=_state((P, 6), buffer=nl.psum)), 3, "dst must be in SBUF, not psum on NeuronCore-v3"),  # noqa: E501
    ("rand_get_state gpsimd PSUM", lambda: nisa.rand_get_state(dst=_state((P, 6), buffer=nl.psum), engine=nisa.gpsimd_engine), 4, "dst must be in SBUF when using the GpSimd engine"),  # noqa: E501
    # nl.*
    ("nl.abs_max gen4", lambda: nl.abs_max(filled((P, F), 1.0), 2.0), 3, "nl.abs_max is not available on gen3"),
    ("nl.abs_min gen4", lambda: nl.abs_min(filled((P, F), 1.0), 2.0), 2, "nl.abs_min is not available on gen2"),
    ("nl.equal a tile", lambda: nl.equal(1.0, 2.0), 3, "nl.equal: at least one of x, y must be a tile"),
    ("nl.logical_or a tile", lambda: nl.logical_or(1, 0), 3, "nl.logical_or: at least one of x, y must be a tile"),
    ("nl.bitwise_and integer", lambda: nl.bitwise_and(filled((P, F), 1.0), 1), 3, "'x' is float32; the inputs must be integer typed"),  # noqa: E501
    ("nl.left_shift integer", lambda: nl.left_shift(filled((P, F), 1, nl.int32), 1.5), 3, "'y' is 1.5; the inputs must be integer typed"),  # noqa: E501
    ("nl.invert integer", lambda: nl.invert(filled((P, F), 1.0, nl.bfloat16)), 3, "nl.invert: 'x' is bfloat16"),
    ("nl.copy SBUF/PSUM", lambda: nl.copy(nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)), 3, "nl.copy: x must be a tile in SBUF or PSUM"),  # noqa: E501
    ("nl.sum free axes", lambda: nl.sum(filled((P, F), 1.0), axis=0), 3, "nl.sum: cannot reduce along the partition axis 0"),  # noqa: E501
    ("nl.softmax free axes", lambda: nl.softmax(filled((P, F), 1.0), axis=0), 3, "nl.softmax: cannot reduce along the partition axis 0"),  # noqa: E501
    ("nl.broadcast_to rank", lambda: nl.broadcast_to(filled((P, 1), 1.0), shape=(P, 1, 4)), 3, "has rank 3, x"),
    ("nl.broadcast_to dims", lambda: nl.broadcast_to(filled((2, F), 1.0), shape=(P, F)), 3, r"shapes \(2, 8\) and \(128, 8\) cannot be broadcast"),  # noqa: E501
    ("nl.matmul contraction", lambda: nl.matmul(filled((P, 64), 1.0), filled((32, F), 1.0)), 3, "x @ y needs y with 64 rows"),  # noqa: E501
    ("nl.matmul free <= 128", lambda: nl.matmul(filled((P, 256), 1.0), filled((P, F), 1.0), transpose_x=True), 3, "its partition and free dimensions must be at most 128"),  # noqa: E501
    ("nl.fori_loop inside no_reorder", _no_reorder_fori, 3, "nl.fori_loop is a register-based dynamic loop: it cannot be inside a no_reorder block"),  # noqa: E501
    ("nl.dynamic_range step", lambda: list(nl.dynamic_range(0, 4, 0)), 3, "step must be a compile-time positive integer, got 0"),  # noqa: E501
    ("nl.fori_loop step", lambda: nl.fori_loop(0, 4, lambda i: None, step=-1), 3, "nl.fori_loop: step must be a compile-time positive integer, got -1"),  # noqa: E501
    ("nl.device_print prefix", lambda: nl.device_print(3, filled((P, F), 1.0)), 3, "print_prefix must be a constant string, got int"),  # noqa: E501
]  # fmt: skip


@pytest.mark.parametrize(("name", "body", "gen", "message"), BREAKING, ids=[c[0] for c in BREAKING])
def test_breaking_kernels_are_rejected_at_their_line(name: str, body: Callable[[], Any], gen: int,
                                                     message: str) -> None:  # fmt: skip
    @nki.jit(platform_target=TARGETS[gen])
    def kernel(x):  # noqa: ANN001, ANN202
        body()
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    with pytest.raises(NkiError, match=message) as e:
        kernel.trace(np.zeros((P, F), np.float32))
    assert e.value.file == __file__, str(e.value)
    # The line named is the call of the function under test (in the case's lambda, or the helper it calls).
    assert name.split()[0].removeprefix("nl.") + "(" in linecache.getline(__file__, e.value.line), str(e.value)


# -- legal edge cases: compile, and match numpy ---------------------------------------------------------------------
def _store(r: Any) -> Any:
    out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
    nl.store(out, r)
    return out


def _activation_edge(a: Any, b: Any) -> Any:
    """fp32 scale tile, bf16 bias tile (any dtype but tfloat32), from PSUM into SBUF: a * b[:, 0] + 1."""
    x, s = nl.load(a), nl.load(b)
    p = sb(x.shape, nl.float32, nl.psum)
    nisa.tensor_copy(dst=p, src=x)
    bias = filled((x.shape[0], 1), 1.0, nl.bfloat16)
    dst = sb(x.shape)
    nisa.activation(dst=dst, op=nl.copy, data=p, scale=s, bias=bias)
    return _store(dst)


def _activation_const_bias(a: Any, b: Any) -> Any:
    """A constant bias: legal from NeuronCore-v3 (and a zero bias, i.e. none, on v2 too)."""
    x, dst = nl.load(a), sb(a.shape)
    nisa.activation(dst=dst, op=nl.copy, data=x, bias=float(b.shape[1] - 1))
    return _store(dst)


def _activation_reduce_edge(a: Any, b: Any) -> Any:
    """activation_reduce into a (N, 1) PSUM reduce_res."""
    x, dst, res = nl.load(a), sb(a.shape), sb((a.shape[0], 1), nl.float32, nl.psum)
    nisa.activation_reduce(dst=dst, op=nl.copy, data=x, reduce_op=nl.add, reduce_res=res)
    return _store(res)


def _activate2_edge(a: Any, b: Any) -> Any:
    """imm0 and imm1 tiles of one dtype (bf16): a * 2 + 1."""
    x, dst = nl.load(a), sb(a.shape)
    nisa.activate2(dst=dst, op=nl.copy, data=x, imm0=filled((a.shape[0], 1), 2.0, nl.bfloat16),
                   imm1=filled((a.shape[0], 1), 1.0, nl.bfloat16), op0=nl.multiply, op1=nl.add)  # fmt: skip
    return _store(dst)


def _activate2_reverse_edge(a: Any, b: Any) -> Any:
    """(subtract, bypass) with reverse0: op0 is set, so reverse0 may be: 3 - a."""
    x, dst = nl.load(a), sb(a.shape)
    nisa.activate2(dst=dst, op=nl.copy, data=x, imm0=3.0, imm1=0.0, op0=nl.subtract, op1=nl.bypass, reverse0=True)
    return _store(dst)


def _exponential_edge(a: Any, b: Any) -> Any:
    """A 4-D src, an fp32 max_value tile, reduce_init with load_reduce: sum(exp(a - 1)) + 2 per partition."""
    x = nl.load(a).reshape((a.shape[0], 2, 2, a.shape[1] // 4))
    dst, res = sb(x.shape), sb((a.shape[0], 1))
    nisa.exponential(dst=dst, src=x, max_value=filled((a.shape[0], 1), 1.0), reduce_res=res,
                     reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=filled((a.shape[0], 1), 2.0))  # fmt: skip
    return _store(res)


def _reciprocal_edge(a: Any, b: Any) -> Any:
    x, dst = nl.load(a), sb(a.shape, nl.bfloat16)
    nisa.reciprocal(dst=dst, data=x)
    return _store(dst)


def _dropout_edge(a: Any, b: Any) -> Any:
    """int32 data with a float32 prob tile of 0: nothing dropped."""
    x = nl.load(a, dtype=nl.int32)
    dst = sb(a.shape, nl.int32)
    nisa.dropout(dst=dst, data=x, prob=filled((a.shape[0], 1), 0.0))
    return _store(dst)


def _nl_ops_edge(a: Any, b: Any) -> Any:
    """abs_max (v4), an integer bitwise op with an integral float, invert, a tile compared with a number."""
    x = nl.load(a)
    i = nl.load(a, dtype=nl.int32)
    r = nl.abs_max(x, -3.0)
    r = nl.add(r, nl.bitwise_and(i, 6.0))  # int32 results: a bit operator writes an integer tile
    r = nl.add(r, nl.invert(i))
    return _store(nl.add(r, nl.equal(x, 2.0, dtype=nl.float32)))


def _nl_shapes_edge(a: Any, b: Any) -> Any:
    """nl.copy of PSUM, a non-trailing free-axis reduction, a partition broadcast, a transpose_x matmul at 128."""
    x, y = nl.load(a), nl.load(b)
    m = nl.copy(nl.matmul(x, y, transpose_x=True))  # (128 partitions, 16)^T @ (128, 16), from PSUM
    s = nl.sum(m.reshape((a.shape[1], 4, 4)), axis=1)  # (16, 4): axis 1 of 1..2 is not the trailing one
    row = nl.broadcast_to(nl.load(b[0:1, 0:4]), shape=(a.shape[1], 4))
    return _store(nl.add(s, row))


def _nl_loops_edge(a: Any, b: Any) -> Any:
    """Static loops inside no_reorder, a dynamic_range of step 2 outside it, an f-string prefix."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    with nl.no_reorder():
        for k in nl.affine_range(2):
            half = a.shape[1] // 2
            nl.store(out[:, k * half:(k + 1) * half], nl.load(a[:, k * half:(k + 1) * half]))
    for _ in nl.dynamic_range(0, 4, 2):
        pass
    nl.device_print(f"rows {a.shape[0]}", nl.load(b[0:1, 0:4]))
    return out


EDGES: list[tuple[str, Callable[..., Any], int, tuple[int, int], Callable[[np.ndarray, np.ndarray], np.ndarray]]] = [
    # (name, kernel, generation, b's shape, expected from (a, b))
    ("activation fp32 scale, bf16 bias, PSUM data", _activation_edge, 3, (P, 1), lambda a, b: a * b + 1),
    ("activation v2 zero bias", _activation_const_bias, 2, (P, 1), lambda a, b: a),
    ("activation v3 constant bias", _activation_const_bias, 3, (P, 3), lambda a, b: a + 2),
    ("activation_reduce PSUM reduce_res", _activation_reduce_edge, 2, (P, 1), lambda a, b: a.sum(1, keepdims=True)),
    ("activate2 bf16 immediates", _activate2_edge, 4, (P, 1), lambda a, b: a * 2 + 1),
    ("activate2 reverse0 with op0", _activate2_reverse_edge, 4, (P, 1), lambda a, b: 3 - a),
    ("exponential 4-D, load_reduce", _exponential_edge, 4, (P, 1),
     lambda a, b: np.exp(a - 1).sum(1, keepdims=True) + 2),
    ("reciprocal into bf16", _reciprocal_edge, 3, (P, 1),
     lambda a, b: (1 / a).astype(ml_dtypes.bfloat16).astype(np.float32)),
    ("dropout int32 data, fp32 prob", _dropout_edge, 3, (P, 1), lambda a, b: a.astype(np.int32)),
    ("nl elementwise", _nl_ops_edge, 4, (P, 1),
     lambda a, b: np.where(np.abs(a) > 3, a, -3.0) + (a.astype(np.int32) & 6) + ~a.astype(np.int32) + (a == 2)),
    ("nl shapes", _nl_shapes_edge, 3, (P, 16),
     lambda a, b: (a.T @ b).reshape(16, 4, 4).sum(1) + b[0:1, 0:4]),
    ("nl loops and prints", _nl_loops_edge, 3, (P, 4), lambda a, b: a),
]  # fmt: skip


@pytest.mark.parametrize(("name", "kernel", "gen", "b_shape", "want"), EDGES, ids=[c[0] for c in EDGES])
def test_legal_edges_compile_and_match_numpy(name: str, kernel: Callable[..., Any], gen: int, b_shape: tuple[int, int],
                                             want: Callable[[np.ndarray, np.ndarray], np.ndarray],
                                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    a = RNG.integers(-4, 5, (P, 16)).astype(np.float32)  # small integers: exact in every dtype used here
    a[a == 0] = 1  # reciprocal
    b = RNG.integers(1, 4, b_shape).astype(np.float32)
    got = nki.jit(kernel, platform_target=TARGETS[gen])(a, b)
    np.testing.assert_allclose(np.asarray(got, np.float32), want(a, b).astype(np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("name", "body", "gen"), [
    ("rand_get_state: VectorE into PSUM on v4", lambda: nisa.rand_get_state(dst=_state((P, 24), buffer=nl.psum), engine=nisa.vector_engine), 4),  # noqa: E501
    ("rand_set_state: GpSimd, 6 words", lambda: nisa.rand_set_state(src_seeds=_state((P, 6))), 3),
    ("set_rng_seed: a float32 seed is a 32-bit value", lambda: nisa.set_rng_seed(src_seeds=filled((1, 1), 1.5)), 3),
    ("rand2: the whole partition", lambda: nisa.rand2(dst=sb((P, 1024)), min=0.0, max=1.0), 4),
    ("fori_loop outside no_reorder", lambda: nl.fori_loop(0, 2, lambda i: None, step=1), 3),
])  # fmt: skip
def test_legal_state_edges_trace(name: str, body: Callable[[], Any], gen: int) -> None:
    @nki.jit(platform_target=TARGETS[gen])
    def kernel(x):  # noqa: ANN001, ANN202
        body()
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    kernel.trace(np.zeros((P, F), np.float32))


# -- rules the frontend never reaches (it rejects first), and the verifier's view ---------------------------------
def _op(dims: tuple[int, int], dtype: str = "float32", memory: str = "sbuf") -> Operand:
    return Operand(memory, dtype, dims)


@pytest.mark.parametrize(("call", "wrong"), [
    (Call("activation", {"data": _op((P, F)), "dst": _op((P, F)), "scale": _op((64, 1))}), "'scale' must be a (128, 1)"),
    (Call("activation", {"data": _op((P, F)), "dst": _op((64, F))}), "they must be the same"),
    (Call("activation", {"data": _op((P, 300000)), "dst": _op((P, 300000))}), "more than one SBUF partition"),
    (Call("activation", {"bias": _op((P, 1), "tfloat32"), "data": _op((P, F))}), "cannot be tfloat32"),
    (Call("reciprocal", {"dst": _op((P, 4)), "data": _op((P, F))}), "they must match"),
    (Call("activate2", {"data": _op((P, F)), "dst": _op((P, F)), "relu_param": _op((P, 2))}), "'relu_param' must be"),
    (Call("exponential", {"src": _op((P, F)), "dst": _op((P, F))}, {"reduce_init": 1.0}), "reduce_init is only used"),
    (Call("rand2", {"dst": _op((256, F))}), "at most 128"),
    (Call("rand2", {"dst": _op((P, 5000), memory="psum")}, gen=4), "more than one PSUM partition"),
    (Call("dropout", {"dst": _op((P, F), "int8"), "data": _op((P, F), "int32")}), "must match"),
    (Call("rand_get_state", {"dst": _op((P, 6), memory="psum")}, {"engine": "gpsimd"}), "when using the GpSimd"),
])  # fmt: skip
def test_rules_hold_on_neutral_calls(call: Call, wrong: str) -> None:
    """What the penguin verifier asks of IR text (no generation, no nisa function): the rules of every generation."""
    found = [p for _, p in problems(call)]
    assert any(wrong in p for p in found), found


def test_generation_and_api_scoping() -> None:
    bias = Call("activation", {"data": _op((P, F)), "dst": _op((P, F))}, {"bias": 1.0}, 2, "nisa.activation")
    assert problems(bias) and not problems(Call(**{**bias.__dict__, "gen": 3}))
    assert not problems(Call(**{**bias.__dict__, "gen": None, "api": ""}))  # IR text: a rule of v2 is not checked
    psum = Call("rand_get_state", {"dst": _op((P, 24), "uint32", "psum")}, {"engine": "vector"}, 4)
    assert not problems(psum) and problems(Call(**{**psum.__dict__, "gen": 3}))
    assert all(r.api.startswith("nl.") for name, rules in RULES.items() if name.startswith("nl.") for r in rules)


# -- tfloat32: a dtype (float32 storage; the Tensor Engine drops the low 13 mantissa bits) ------------------------
def _tf32_matmul(a: Any, b: Any, st: Any, mv: Any, via_nl: bool) -> Any:
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a, dtype=st), nl.load(b, dtype=mv)
    if via_nl:
        p = nl.matmul(x, y, transpose_x=True)
    else:
        p = sb((a.shape[1], b.shape[1]), nl.float32, nl.psum)
        nisa.nc_matmul(dst=p, stationary=x, moving=y)
    nl.store(out, p)
    return out


def _tf32(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize(("st", "mv", "via_nl", "gen"), [
    ("tfloat32", "float32", False, 2),  # "if one of the input tiles is tfloat32/float32, the other tile must also be"
    ("tfloat32", "tfloat32", False, 3),
    ("float32", "tfloat32", False, 4),
    ("tfloat32", "bfloat16", True, 3),  # nl.matmul widens the bf16 operand: the pair stays legal
])  # fmt: skip
def test_tfloat32_matmul_reads_ten_mantissa_bits(st: str, mv: str, via_nl: bool, gen: int) -> None:
    a = (RNG.standard_normal((P, 32)) * (1 + 2.0**-15)).astype(np.float32)
    b = RNG.integers(-3, 4, (P, 16)).astype(np.float32)
    got = nki.jit(_tf32_matmul, platform_target=TARGETS[gen])(a, b, getattr(nl, st), getattr(nl, mv), via_nl)
    conv = {"tfloat32": _tf32, "float32": lambda v: v.astype(np.float32),
            "bfloat16": lambda v: v.astype(ml_dtypes.bfloat16).astype(np.float32)}  # fmt: skip
    want = conv[st](a).astype(np.float64).T @ conv[mv](b).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    if st == "tfloat32":  # the dropped bits show: fp32 operands give another result
        assert not np.allclose(got, a.astype(np.float64).T @ b, rtol=1e-7, atol=0)


def test_tfloat32_tiles_hold_float32_values() -> None:
    """Elsewhere a tfloat32 tile is float32 storage: a copy through one keeps every bit; exponential may write one."""

    def kernel(a: Any) -> Any:
        t = nl.load(a, dtype=nl.tfloat32)
        e = sb(a.shape, nl.tfloat32)
        nisa.exponential(dst=e, src=nl.load(a), max_value=0.0)
        out = nl.ndarray((2, *a.shape), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[0], nl.copy(t, dtype=nl.float32))
        nl.store(out[1], e)
        return out

    a = RNG.standard_normal((P, 8)).astype(np.float32)
    got = nki.jit(kernel, platform_target="trn3")(a)
    np.testing.assert_array_equal(got[0], a)
    np.testing.assert_allclose(got[1], np.exp(a), rtol=1e-6)
    assert str(nl.tfloat32) == "tfloat32"
