"""The documented restrictions of the Vector and GpSimd instructions (``nkic.target.rules.vector``): for each rule a
call that breaks exactly it (an error at the call's line naming the rule) and a legal call at its edge (compiles and
matches numpy, or at least traces). Table-driven: one kernel template (load the inputs, run the case's one-line
body, store the outputs); each case is its body, inputs and expected outputs."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from nkic import api as nki
from nkic.frontend import NkiError
from nkic.target.rules import RULES, WAIVERS

from kernel_harness import on_chip_case

nl, nisa = nki.language, nki.isa
RNG = np.random.default_rng(11)
BF16 = ml_dtypes.bfloat16
FP32_MIN = float(np.finfo(np.float32).min)


def template(a0: Any, a1: Any, a2: Any, psum: tuple[int, ...], outs: tuple[Any, ...], body: Any) -> Any:
    """Load a0..a2 (those given) into SBUF (or PSUM: the indices in ``psum``), run ``body(*inputs, *outputs)``,
    store the outputs ((shape, dtype) tiles in SBUF)."""
    return on_chip_case((a0, a1, a2), psum, outs, body)


def sb(shape: tuple[int, ...], dtype: Any) -> Any:
    """A scratch SBUF tile, made inside a case's body."""
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


def run(inputs: list[np.ndarray], outs: list[tuple[tuple[int, ...], Any]], body: Callable[..., Any],
        psum: tuple[int, ...] = (), target: str = "trn2") -> tuple[np.ndarray, ...]:  # fmt: skip
    args = [*inputs, *[None] * (3 - len(inputs))]
    return nki.jit(template, platform_target=target)(*args, psum, tuple(outs), body)


F = np.float32
X = RNG.standard_normal((32, 16)).astype(F)
Y = RNG.standard_normal((32, 16)).astype(F)
I = RNG.integers(0, 1 << 12, (32, 16)).astype(np.int32)  # noqa: E741
J = RNG.integers(0, 1 << 12, (32, 16)).astype(np.int32)
COL = RNG.standard_normal((32, 1)).astype(F)
PRED = RNG.integers(0, 2, (32, 16)).astype(np.uint8)
OUT = [((32, 16), nl.float32)]
OUT_I = [((32, 16), nl.int32)]
ROW = [((32, 1), nl.float32)]

# (id, inputs, outs, body, psum inputs, target, what is wrong): each breaks exactly one rule
REJECTS = [
    ("tensor_tensor bitvec on floats", [X, Y], OUT,
     lambda x, y, d: nisa.tensor_tensor(dst=d, data1=x, data2=y, op=nl.bitwise_and), (),
     "the bitvec operator nl.bitwise_and needs integer tiles, 'dst' is float32"),
    ("tensor_scalar operand1 without op1", [X], OUT,
     lambda x, d: nisa.tensor_scalar(dst=d, data=x, op0=nl.add, operand0=1.0, operand1=2.0), (),
     "operand1 is given but op1 is None"),
    ("tensor_scalar mixed operator kinds", [I], OUT_I,
     lambda x, d: nisa.tensor_scalar(dst=d, data=x, op0=nl.bitwise_and, operand0=7, op1=nl.add, operand1=1), (),
     "op0=nl.bitwise_and and op1=nl.add mix a bitvec and an arithmetic operator"),
    ("tensor_scalar bitvec on floats", [X], OUT,
     lambda x, d: nisa.tensor_scalar(dst=d, data=x, op0=nl.bitwise_and, operand0=7), (),
     "the bitvec operator nl.bitwise_and needs integer tiles"),
    ("scalar_tensor_tensor bitvec op0", [I, J], OUT_I,
     lambda x, y, d: nisa.scalar_tensor_tensor(dst=d, data=x, op0=nl.bitwise_and, operand0=7, op1=nl.add,
                                               operand1=y), (),  # fmt: skip
     "op0=nl.bitwise_and is a bitvec operator; op0 must be arithmetic"),
    ("scalar_tensor_tensor two PSUM inputs", [X, Y], OUT,
     lambda x, y, d: nisa.scalar_tensor_tensor(dst=d, data=x, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y),
     (0, 1), "data and operand1 cannot both be in PSUM"),
    ("tensor_reduce bitvec on floats", [X], ROW,
     lambda x, d: nisa.tensor_reduce(dst=d, op=nl.bitwise_or, data=x, axis=1), (),
     "the bitvec operator nl.bitwise_or needs integer tiles"),
    ("tensor_reduce negate with bitvec", [I], [((32, 1), nl.int32)],
     lambda x, d: nisa.tensor_reduce(dst=d, op=nl.bitwise_or, data=x, axis=1, negate=True), (),
     "negate=True needs an arithmetic op, nl.bitwise_or is a bitvec operator"),
    ("tensor_scalar_reduce bitvec op0", [I], [*OUT_I, *ROW],
     lambda x, d, r: nisa.tensor_scalar_reduce(dst=d, data=x, op0=nl.bitwise_and, operand0=7, reduce_op=nl.add,
                                               reduce_res=r), (),  # fmt: skip
     "op0=nl.bitwise_and is a bitvec operator; op0 must be arithmetic"),
    ("tensor_scalar_cumulative bitvec op0", [I.astype(np.int16)], [((32, 16), nl.int16)],
     lambda x, d: nisa.tensor_scalar_cumulative(dst=d, src=x, op0=nl.bitwise_and, op1=nl.add, imm0=7), (),
     "op0=nl.bitwise_and is a bitvec operator"),
    ("tensor_scalar_cumulative op1 divide", [X], OUT,
     lambda x, d: nisa.tensor_scalar_cumulative(dst=d, src=x, op0=nl.multiply, op1=nl.divide, imm0=1.0), (),
     "op1 must be one of nl.add, nl.subtract, nl.multiply, nl.maximum, nl.minimum, got nl.divide"),
    ("tensor_scalar_cumulative int32", [I], OUT_I,
     lambda x, d: nisa.tensor_scalar_cumulative(dst=d, src=x, op0=nl.multiply, op1=nl.add, imm0=1.0), (),
     "'dst' cannot be int32"),
    ("tensor_scalar_cumulative bf16 imm0 tile", [X, COL.astype(BF16)], OUT,
     lambda x, c, d: nisa.tensor_scalar_cumulative(dst=d, src=x, op0=nl.multiply, op1=nl.add, imm0=c), (),
     "the imm0 tile is bfloat16, it must be float32"),
    ("tensor_tensor_scan two PSUM inputs", [X, Y], OUT,
     lambda x, y, d: nisa.tensor_tensor_scan(dst=d, data0=x, data1=y, initial=0.0, op0=nl.multiply, op1=nl.add),
     (0, 1), "data0 and data1 cannot both be in PSUM"),
    ("tensor_copy_predicated float predicate", [X, Y], OUT,
     lambda x, p, d: nisa.tensor_copy_predicated(dst=d, src=x, predicate=p), (),
     "predicate must be uint8, uint16 or uint32, got float32"),
    ("tensor_copy_predicated src dtype", [X.astype(BF16), PRED], OUT,
     lambda x, p, d: nisa.tensor_copy_predicated(dst=d, src=x, predicate=p), (),
     "src is bfloat16 but dst is float32; they must share one dtype"),
    ("memset packed non-zero", [X], OUT,
     lambda x, d: nisa.memset(dst=sb((32, 4), nl.float8_e4m3fn_x4), value=1.0), (),
     "a packed MX tile (float8_e4m3fn_x4) can only be filled with 0, got 1.0"),
    ("iota pattern too short", [], OUT_I,
     lambda d: nisa.iota(dst=d, pattern=[[1, 8]], offset=0), (),
     "pattern covers 8 elements per partition, dst has 16"),
    ("iota 5-D pattern", [], OUT_I,
     lambda d: nisa.iota(dst=d, pattern=[[8, 2], [4, 2], [2, 2], [1, 2], [0, 1]], offset=0), (),
     "has 5 [step, num] pairs, at most 4"),
    ("affine_select 5-D pattern", [X], OUT,
     lambda x, d: nisa.affine_select(dst=d, pattern=[[8, 2], [4, 2], [2, 2], [1, 2], [0, 1]], channel_multiplier=1,
                                     on_true_tile=x, on_false_value=0.0, cmp_op=nl.greater_equal), (),  # fmt: skip
     "has 5 [step, num] pairs, at most 4"),
    ("max8 rank-4 source", [X.reshape(32, 2, 2, 4)], [((32, 8), nl.float32)],
     lambda x, d: nisa.max8(dst=d, src=x), (), "'src' can be at most 3-dimensional, got shape (32, 2, 2, 4)"),
    ("max8 rank-3 result", [X], [((32, 2, 4), nl.float32)],
     lambda x, d: nisa.max8(dst=d, src=x), (), "dst must be a 2-D [32, 8] tile, got shape (32, 2, 4)"),
    ("nc_find_index8 rank-4 vals", [X, X[:, :8].reshape(32, 2, 2, 2)], [((32, 8), nl.uint32)],
     lambda x, v, d: nisa.nc_find_index8(dst=d, data=x, vals=v), (), "'vals' can be at most 3-dimensional"),
    ("affine_select pattern too long", [X], OUT,
     lambda x, d: nisa.affine_select(dst=d, pattern=[[-1, 32]], channel_multiplier=1, on_true_tile=x,
                                     on_false_value=0.0, cmp_op=nl.greater_equal), (),  # fmt: skip
     "pattern covers 32 elements per partition, dst has 16"),
    ("range_select comparison add", [X, COL, COL], OUT,
     lambda x, b0, b1, d: nisa.range_select(dst=d, on_true_tile=x, comp_op0=nl.add, comp_op1=nl.less, bound0=b0,
                                            bound1=b1), (),  # fmt: skip
     "comp_op0 must be one of nl.equal, nl.less, nl.less_equal, nl.greater, nl.greater_equal, got nl.add"),
    ("range_select bf16 bound", [X, COL.astype(BF16), COL], OUT,
     lambda x, b0, b1, d: nisa.range_select(dst=d, on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less,
                                            bound0=b0, bound1=b1), (),  # fmt: skip
     "'bound0' must be float32, got bfloat16"),
    ("range_select integer on_true", [I, COL, COL], OUT_I,
     lambda x, b0, b1, d: nisa.range_select(dst=d, on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less,
                                            bound0=b0, bound1=b1), (),  # fmt: skip
     "on_true_tile must be a floating-point tile, got int32"),
    ("range_select fill not FP32_MIN", [X, COL, COL], OUT,
     lambda x, b0, b1, d: nisa.range_select(dst=d, on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less,
                                            bound0=b0, bound1=b1, on_false_value=0.0), (),  # fmt: skip
     "on_false_value must be FP32_MIN (-3.4028235e+38), got 0.0"),
    ("range_select reduce add", [X, COL, COL], OUT,
     lambda x, b0, b1, d: nisa.range_select(dst=d, on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less,
                                            bound0=b0, bound1=b1, reduce_op=nl.add), (),  # fmt: skip
     "reduce_op must be nl.maximum, got nl.add"),
    ("select_reduce reduce add", [PRED, X], OUT,
     lambda p, x, d: nisa.select_reduce(dst=d, predicate=p, on_true=x, on_false=0.0, reduce_op=nl.add), (),
     "reduce_op must be nl.maximum, got nl.add"),
    ("select_reduce integer reduce_res", [PRED, X], [*OUT, ((32, 1), nl.int32)],
     lambda p, x, d, r: nisa.select_reduce(dst=d, predicate=p, on_true=x, on_false=0.0, reduce_res=r,
                                           reduce_cmd=nisa.reduce_cmd.reset_reduce), (),  # fmt: skip
     "reduce_res must be a float tile, got int32"),
    ("bn_stats 513 elements", [RNG.standard_normal((8, 513)).astype(F)], [((8, 6), nl.float32)],
     lambda x, d: nisa.bn_stats(dst=d, data=x), (),
     "data has 513 elements per partition, at most 512"),
    ("topk float32 source", [RNG.standard_normal((16, 8)).astype(F)], [((16, 4), nl.float32), ((16, 4), nl.uint32)],
     lambda x, v, i: nisa.topk(val_dst=v, idx_dst=i, src=x, n=128), (),
     "'src' must be bfloat16, got float32"),
    ("topk float32 values", [RNG.standard_normal((16, 8)).astype(BF16)], [((16, 4), nl.float32), ((16, 4), nl.uint32)],
     lambda x, v, i: nisa.topk(val_dst=v, idx_dst=i, src=x, n=128), (),
     "'val_dst' must be bfloat16, got float32"),
    ("topk int32 indices", [RNG.standard_normal((16, 8)).astype(BF16)], [((16, 4), nl.bfloat16), ((16, 4), nl.int32)],
     lambda x, v, i: nisa.topk(val_dst=v, idx_dst=i, src=x, n=128), (),
     "'idx_dst' must be uint32, got int32"),
    ("local_gather uint32 index", [X[:16], np.zeros((16, 2), np.uint32)], [((16, 32), nl.float32)],
     lambda s, i, d: nisa.local_gather(dst=d, src_buffer=s, index=i), (),
     "index must be uint16, got uint32"),
    ("local_gather 3 elements per index", [X[:16], np.zeros((16, 2), np.uint16)], [((16, 96), nl.float32)],
     lambda s, i, d: nisa.local_gather(dst=d, src_buffer=s, index=i, num_elem_per_idx=3), (),
     "num_elem_per_idx must be one of [1, 2, 4, 8, 16, 32], got 3"),
    ("local_gather more indices than the slice", [X[:16], np.zeros((16, 2), np.uint16)], [((16, 33), nl.float32)],
     lambda s, i, d: nisa.local_gather(dst=d, src_buffer=s, index=i, num_valid_indices=33), (),
     "num_valid_indices must be 1..32 (the indices in a 16-partition slice of index), got 33"),
    ("local_gather 4097 indices per core", [X[:16], np.zeros((16, 257), np.uint16)], [((16, 4097), nl.float32)],
     lambda s, i, d: nisa.local_gather(dst=d, src_buffer=s, index=i, num_valid_indices=4097), (),
     "4097 indices per GpSimd core, at most 4096"),
    ("nc_n_gather dtype change", [X, np.zeros((32, 4), np.uint32)], [((32, 4), nl.bfloat16)],
     lambda x, i, d: nisa.nc_n_gather(dst=d, data=x, indices=i), (),
     "dst is bfloat16 but data is float32; they must share one dtype"),
    ("nc_n_gather int32 indices", [X, np.zeros((32, 4), np.int32)], [((32, 4), nl.float32)],
     lambda x, i, d: nisa.nc_n_gather(dst=d, data=x, indices=i), (),
     "indices must be uint32, got int32"),
    ("nc_stream_shuffle dtype change", [X], [((32, 16), nl.bfloat16)],
     lambda x, d: nisa.nc_stream_shuffle(dst=d, src=x, shuffle_mask=list(range(32))), (),
     "dst is bfloat16 but src is float32; they must share one dtype"),
    ("tensor_tensor elements differ", [X, Y[:, :8]], OUT,
     lambda x, y, d: nisa.tensor_tensor(dst=d, data1=x, data2=y, op=nl.add), (),
     "'dst' has 16 elements per partition but 'data2' has 8"),
    ("scalar_tensor_tensor operand1 shape", [X, Y[:, :8]], OUT,
     lambda x, y, d: nisa.scalar_tensor_tensor(dst=d, data=x, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y),
     (), "'data' has 16 elements per partition but 'operand1' has 8"),
    ("scalar_tensor_tensor dst partitions", [X, Y], [((16, 16), nl.float32)],
     lambda x, y, d: nisa.scalar_tensor_tensor(dst=d, data=x, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y),
     (), "partition count mismatch: 'data' has 32 partitions, 'dst' has 16"),
    ("scalar_tensor_tensor dst elements", [X, Y], [((32, 8), nl.float32)],
     lambda x, y, d: nisa.scalar_tensor_tensor(dst=d, data=x, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y),
     (), "'data' has 16 elements per partition but 'dst' has 8"),
    ("tensor_reduce dst partitions", [X], [((16, 1), nl.float32)],
     lambda x, d: nisa.tensor_reduce(dst=d, op=nl.add, data=x, axis=1), (),
     "partition count mismatch: 'data' has 32 partitions, 'dst' has 16"),
    ("tensor_reduce over the partition axis", [X], ROW,
     lambda x, d: nisa.tensor_reduce(dst=d, op=nl.add, data=x, axis=0), (),
     "cannot reduce along the partition axis 0"),
    ("tensor_reduce over a middle axis", [X.reshape(32, 4, 4)], [((32, 4), nl.float32)],
     lambda x, d: nisa.tensor_reduce(dst=d, op=nl.add, data=x, axis=1), (),
     "axes (1,) must be the trailing free axes of a rank-3 tensor"),
    ("tensor_reduce dst not the result's size", [X], [((32, 2), nl.float32)],
     lambda x, d: nisa.tensor_reduce(dst=d, op=nl.add, data=x, axis=1), (),
     "dst has 2 elements per partition, the result has 1"),
    ("tensor_tensor_scan elements differ", [X, Y[:, :8]], OUT,
     lambda x, y, d: nisa.tensor_tensor_scan(dst=d, data0=x, data1=y, initial=0.0, op0=nl.multiply, op1=nl.add), (),
     "'data0' has 16 elements per partition but 'data1' has 8"),
    ("affine_select dst partitions", [X], [((16, 16), nl.float32)],
     lambda x, d: nisa.affine_select(dst=d, pattern=[[-1, 16]], channel_multiplier=1, on_true_tile=x,
                                     on_false_value=0.0, cmp_op=nl.greater_equal), (),  # fmt: skip
     "partition count mismatch: 'on_true' has 32 partitions, 'dst' has 16"),
    ("select_reduce predicate elements", [PRED[:, :8], X], OUT,
     lambda p, x, d: nisa.select_reduce(dst=d, predicate=p, on_true=x, on_false=0.0), (),
     "'on_true' has 16 elements per partition but 'predicate' has 8"),
    ("nc_n_gather indices partitions", [X, np.zeros((16, 4), np.uint32)], [((32, 4), nl.float32)],
     lambda x, i, d: nisa.nc_n_gather(dst=d, data=x, indices=i), (),
     "partition count mismatch: 'data' has 32 partitions, 'indices' has 16"),
    ("nc_n_gather dst elements", [X, np.zeros((32, 8), np.uint32)], [((32, 4), nl.float32)],
     lambda x, i, d: nisa.nc_n_gather(dst=d, data=x, indices=i), (),
     "'dst' has 4 elements per partition but 'indices' has 8"),
    ("sequence_bounds bf16 ids", [np.ones((1, 8), BF16)], [((1, 2, 8), nl.float32)],
     lambda s, d: nisa.sequence_bounds(dst=d, segment_ids=s), (),
     "'segment_ids' must be float32 or int32, got bfloat16"),
    ("tensor_scalar unary op0 with an operand", [X], OUT,
     lambda x, d: nisa.tensor_scalar(dst=d, data=x, op0=nl.abs, operand0=3.0), (),
     "op0=abs is a unary operator: operand0 must be None or 0, got 3.0"),
    ("tensor_scalar_reduce unary op0 with a tile operand", [X, COL], [*OUT, *ROW],
     lambda x, c, d, r: nisa.tensor_scalar_reduce(dst=d, data=x, op0=nl.abs, operand0=c, reduce_op=nl.maximum,
                                                  reduce_res=r), (),  # fmt: skip
     "op0=abs is a unary operator: operand0 must be None or 0, not a tile"),
]  # fmt: skip


@pytest.mark.parametrize("inputs,outs,body,psum,wrong", [c[1:] for c in REJECTS], ids=[c[0] for c in REJECTS])
def test_rejects(inputs: list[np.ndarray], outs: list[Any], body: Callable[..., Any], psum: tuple[int, ...],
                 wrong: str) -> None:  # fmt: skip
    target = "trn2"
    line = body.__code__.co_firstlineno
    with pytest.raises(NkiError, match=re.escape(f"test_rules_vector.py:{line}: error: ")) as e:
        run(inputs, outs, body, psum, target)
    assert wrong in str(e.value)
    assert "(the NKI reference: " in str(e.value)  # the rule's sentence, cited


def _scan(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out, prev = np.empty_like(x), np.zeros(x.shape[0], F)
    for i in range(x.shape[1]):
        prev = x[:, i] * prev + y[:, i]
        out[:, i] = prev
    return out


LO, HI = np.full((32, 1), 3.0, F), np.full((32, 1), 11.0, F)
COLS = np.arange(16)
SEL = PRED.astype(bool)
SHUFFLE = [(i * 7) % 32 for i in range(32)]

# (id, inputs, outs, body, psum inputs, expected outputs or None: traces and simulates): each at a rule's edge
ACCEPTS = [
    ("tensor_tensor bitvec on integers", [I, J], OUT_I,
     lambda x, y, d: nisa.tensor_tensor(dst=d, data1=x, data2=y, op=nl.bitwise_and), (), lambda: [I & J]),
    ("tensor_tensor same elements per partition, other shape", [X, Y.reshape(32, 4, 4)], OUT,
     lambda x, y, d: nisa.tensor_tensor(dst=d, data1=x, data2=y, op=nl.add), (), lambda: [X + Y]),
    ("tensor_scalar both bitvec", [I], OUT_I,
     lambda x, d: nisa.tensor_scalar(dst=d, data=x, op0=nl.bitwise_and, operand0=255, op1=nl.bitwise_or,
                                     operand1=256), (), lambda: [(I & 255) | 256]),  # fmt: skip
    ("tensor_scalar op1 with operand1", [X], OUT,
     lambda x, d: nisa.tensor_scalar(dst=d, data=x, op0=nl.add, operand0=1.0, op1=nl.multiply, operand1=2.0), (),
     lambda: [(X + 1) * 2]),
    ("tensor_scalar bf16 operand tile (ambiguous, accepted: nki-library does it)", [X, COL.astype(BF16)], OUT,
     lambda x, c, d: nisa.tensor_scalar(dst=d, data=x, op0=nl.add, operand0=c), (),
     lambda: [X + COL.astype(BF16).astype(F)]),
    ("scalar_tensor_tensor one PSUM input", [X, Y], OUT,
     lambda x, y, d: nisa.scalar_tensor_tensor(dst=d, data=x, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=y),
     (0,), lambda: [X * 2 + Y]),
    ("tensor_reduce bitvec on integers", [I], [((32, 1), nl.int32)],
     lambda x, d: nisa.tensor_reduce(dst=d, op=nl.bitwise_or, data=x, axis=1), (),
     lambda: [np.bitwise_or.reduce(I, axis=1, keepdims=True)]),
    ("tensor_reduce negate arithmetic", [X], ROW,
     lambda x, d: nisa.tensor_reduce(dst=d, op=nl.add, data=x, axis=1, negate=True), (),
     lambda: [-X.sum(axis=1, keepdims=True)]),
    ("tensor_reduce the trailing two of three axes", [X.reshape(32, 4, 4)], ROW,
     lambda x, d: nisa.tensor_reduce(dst=d, op=nl.add, data=x, axis=(1, 2)), (),
     lambda: [X.sum(axis=1, keepdims=True)]),
    ("tensor_reduce the last axis", [X.reshape(32, 4, 4)], [((32, 4), nl.float32)],
     lambda x, d: nisa.tensor_reduce(dst=d, op=nl.maximum, data=x, axis=-1), (), lambda: [X.reshape(32, 4, 4).max(-1)]),
    ("tensor_scalar_reduce arithmetic op0", [X], [*OUT, *ROW],
     lambda x, d, r: nisa.tensor_scalar_reduce(dst=d, data=x, op0=nl.multiply, operand0=2.0, reduce_op=nl.add,
                                               reduce_res=r), (),  # fmt: skip
     lambda: [X * 2, (X * 2).sum(axis=1, keepdims=True)]),
    ("tensor_scalar_cumulative minimum over a fp32 imm0 tile", [X, COL], OUT,
     lambda x, c, d: nisa.tensor_scalar_cumulative(dst=d, src=x, op0=nl.add, op1=nl.minimum, imm0=c), (),
     lambda: [np.minimum.accumulate(X + COL, axis=1)]),
    ("tensor_scalar_cumulative int16", [I.astype(np.int16) % 8], [((32, 16), nl.int16)],
     lambda x, d: nisa.tensor_scalar_cumulative(dst=d, src=x, op0=nl.multiply, op1=nl.add, imm0=1.0), (),
     lambda: [np.cumsum(I.astype(np.int16) % 8, axis=1).astype(np.int16)]),
    ("tensor_tensor_scan one PSUM input", [X, Y], OUT,
     lambda x, y, d: nisa.tensor_tensor_scan(dst=d, data0=x, data1=y, initial=0.0, op0=nl.multiply, op1=nl.add),
     (0,), lambda: [_scan(X, Y)]),
    ("tensor_copy_predicated uint8 predicate", [X, PRED], OUT,
     lambda x, p, d: [nisa.memset(dst=d, value=0.0), nisa.tensor_copy_predicated(dst=d, src=x, predicate=p)], (),
     lambda: [np.where(SEL, X, 0)]),
    ("memset packed zero", [X], OUT,
     lambda x, d: [nisa.memset(dst=sb((32, 4), nl.float8_e4m3fn_x4), value=0), nisa.tensor_copy(dst=d, src=x)], (),
     lambda: [X]),
    ("iota pattern covers dst", [], OUT_I,
     lambda d: nisa.iota(dst=d, pattern=[[1, 16]], offset=0, channel_multiplier=16), (),
     lambda: [np.arange(32 * 16, dtype=np.int32).reshape(32, 16)]),
    ("iota 4-D pattern", [], OUT_I,
     lambda d: nisa.iota(dst=d, pattern=[[8, 2], [4, 2], [2, 2], [1, 2]], offset=0), (),
     lambda: [np.tile(np.arange(16, dtype=np.int32), (32, 1))]),
    ("max8 rank-3 source", [X.reshape(32, 4, 4)], [((32, 8), nl.float32)],
     lambda x, d: nisa.max8(dst=d, src=x), (), lambda: [-np.sort(-X, axis=1)[:, :8]]),
    ("nc_find_index8 rank-3 data and vals", [X.reshape(32, 4, 4), X[:, :8].reshape(32, 2, 4)], [((32, 8), nl.uint32)],
     lambda x, v, d: nisa.nc_find_index8(dst=d, data=x, vals=v), (), lambda: [np.tile(np.arange(8), (32, 1))]),
    ("affine_select pattern covers dst", [X], OUT,
     lambda x, d: nisa.affine_select(dst=d, pattern=[[-1, 16]], channel_multiplier=1, on_true_tile=x,
                                     on_false_value=0.0, cmp_op=nl.greater_equal), (),  # fmt: skip
     lambda: [np.where(np.arange(32)[:, None] >= COLS[None, :], X, 0)]),
    ("range_select at FP32_MIN with nl.maximum", [X, LO, HI], [*OUT, *ROW],
     lambda x, b0, b1, d, r: nisa.range_select(dst=d, on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less,
                                               bound0=b0, bound1=b1, reduce_op=nl.maximum, reduce_res=r,
                                               reduce_cmd=nisa.reduce_cmd.reset_reduce), (),  # fmt: skip
     lambda: [np.where((COLS >= 3) & (COLS < 11), X, FP32_MIN), X[:, 3:11].max(axis=1, keepdims=True)]),
    ("select_reduce maximum into a fp32 reduce_res", [PRED, X], [*OUT, *ROW],
     lambda p, x, d, r: nisa.select_reduce(dst=d, predicate=p, on_true=x, on_false=-5.0, reduce_res=r,
                                           reduce_op=nl.maximum, reduce_cmd=nisa.reduce_cmd.reset_reduce),
     (),
     lambda: [np.where(SEL, X, -5), np.where(SEL, X, -5).max(axis=1, keepdims=True)]),
    ("bn_stats 512 elements", [RNG.standard_normal((8, 512)).astype(F)], [((8, 6), nl.float32)],
     lambda x, d: nisa.bn_stats(dst=d, data=x), (), None),
    ("topk bf16 / uint32", [RNG.standard_normal((16, 8)).astype(BF16)], [((16, 4), nl.bfloat16), ((16, 4), nl.uint32)],
     lambda x, v, i: nisa.topk(val_dst=v, idx_dst=i, src=x, n=128), (), None),
    ("local_gather 4096 indices per core", [X[:16], np.zeros((16, 256), np.uint16)], [((16, 4096), nl.float32)],
     lambda s, i, d: nisa.local_gather(dst=d, src_buffer=s, index=i, num_valid_indices=4096), (),
     lambda: [np.repeat(X[:16, :1], 4096, axis=1)]),
    ("local_gather 32 elements per index", [X[:16], np.zeros((16, 1), np.uint16)], [((16, 32), nl.float32)],
     lambda s, i, d: nisa.local_gather(dst=d, src_buffer=s, index=i, num_elem_per_idx=16, num_valid_indices=2), (),
     lambda: [np.tile(X[:16], 2)]),
    ("nc_n_gather uint32 indices", [X, (np.arange(32 * 4).reshape(32, 4) % 16).astype(np.uint32)],
     [((32, 4), nl.float32)],
     lambda x, i, d: nisa.nc_n_gather(dst=d, data=x, indices=i), (),
     lambda: [np.take_along_axis(X, np.arange(32 * 4).reshape(32, 4) % 16, axis=1)]),
    ("nc_stream_shuffle same dtype", [X], OUT,
     lambda x, d: nisa.nc_stream_shuffle(dst=d, src=x, shuffle_mask=SHUFFLE), (), lambda: [X[SHUFFLE]]),
    ("sequence_bounds int32 ids", [np.array([[1, 1, 2, 2, 2, 0, 0, 0]], np.int32)], [((1, 2, 8), nl.int32)],
     lambda s, d: nisa.sequence_bounds(dst=d, segment_ids=s), (),
     lambda: [np.array([[[0, 0, 2, 2, 2, 8, 8, 8], [2, 2, 5, 5, 5, -1, -1, -1]]], np.int32)]),
    ("tensor_scalar unary op0 with operand0 0", [X], OUT,
     lambda x, d: nisa.tensor_scalar(dst=d, data=x, op0=nl.abs, operand0=0.0, op1=nl.add, operand1=1.0), (),
     lambda: [np.abs(X) + 1]),
    ("tensor_scalar_reduce unary op0 with operand0 0 (nki-library's absmax)", [X], [*OUT, *ROW],
     lambda x, d, r: nisa.tensor_scalar_reduce(dst=d, data=x, op0=nl.abs, operand0=0.0, reduce_op=nl.maximum,
                                               reduce_res=r), (),  # fmt: skip
     lambda: [np.abs(X), np.abs(X).max(axis=1, keepdims=True)]),
]  # fmt: skip


@pytest.mark.parametrize("inputs,outs,body,psum,want", [c[1:] for c in ACCEPTS], ids=[c[0] for c in ACCEPTS])
def test_accepts_the_edges(inputs: list[np.ndarray], outs: list[Any], body: Callable[..., Any], psum: tuple[int, ...],
                           want: Callable[[], list[np.ndarray]] | None) -> None:  # fmt: skip
    got = run(inputs, outs, body, psum)
    if want is None:
        return
    for g, w in zip(got, want(), strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-2, atol=1e-2)


def test_every_vector_rule_has_a_case() -> None:
    """Each rule of this family is broken by some case above (by the sentence's message)."""
    import nkic.target.rules.vector as vector

    mine = [r for rules in RULES.values() for r in rules if r.test.__module__ == vector.__name__]
    assert len(mine) >= 40
    assert all(reason.strip() for (api, _), reason in WAIVERS.items())
