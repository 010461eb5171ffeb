"""``chlo-legalize``: the chlo ops JAX emits by default, decomposed into StableHLO as StableHLO's own
``chlo-legalize-to-stablehlo`` pass does (openxla/stablehlo, ``stablehlo/transforms/ChloLegalizeToStablehlo.cpp`` and
``ChloDecompositionPatternsMath.td``), so the lowering sees StableHLO only and the numbers are XLA's:

* ``chlo.square`` on a real operand is ``x * x`` ("Square on real input: x * x").
* ``chlo.erf`` is Eigen's rational approximation ``x * Alpha(x^2) / Beta(x^2)`` on ``x`` clamped into [-4, 4], the
  result clamped into [-1, 1] (``materializeErfApproximationF32``, "the same approximation as used in Eigen").
* ``chlo.erfc`` is ``1 - x T(x^2)`` for ``|x| < 1`` and Cephes' ``exp(-x^2) / |x| * P(1/x^2)`` (``|x| < 2``) or
  ``R(1/x^2)`` beyond, 0 where ``-x^2 < -maxlog`` and ``2 - erfc(-x)`` for ``x < 0``
  (``materializeErfcApproximationF32``).
* f16 and bf16 are computed in f32 and converted back (``materializeWithUpcast``); f64 is rejected (nkic's engines
  compute in at most fp32).
* ``chlo.erf_inv`` is Giles' polynomial in ``w = -log1p(-x^2)`` with coefficients chosen by ``w < 5``, ±inf at ±1
  (``erfInv32``).
* ``chlo.top_k`` is a stable sort of (values, iota) along the last dimension with a ``GT``/``TOTALORDER``
  comparator, sliced to the first ``k`` (``ConvertTopKOp``).

A clamp is written ``minimum(maximum(x, lo), hi)``, which is StableHLO's definition of ``clamp``
("min(max(operand, min_element), max_element)", StableHLO spec, clamp).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import (
    BFloat16Type,
    BoolAttr,
    Float16Type,
    Float32Type,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
    i64,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from nkic.dialects import stablehlo as hlo
from nkic.frontend.errors import NkiError
from nkic.hlo.rewrite import Builder, rewrite_each

# Coefficients, highest power first, as ChloLegalizeToStablehlo.cpp lists them (float literals, read as f32).
ERF_ALPHA = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
             -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)  # fmt: skip
ERF_BETA = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
            -1.42647390514189e-02)  # fmt: skip
ERF_T = (7.853861353153693e-5, -8.010193625184903e-4, 5.188327685732524e-3, -2.685381193529856e-2,
         1.128358514861418e-1, -3.761262582423300e-1, 1.128379165726710e0)  # fmt: skip
ERFC_P = (2.326819970068386e-2, -1.387039388740657e-1, 3.687424674597105e-1, -5.824733027278666e-1,
          6.210004621745983e-1, -4.944515323274145e-1, 3.404879937665872e-1, -2.741127028184656e-1,
          5.638259427386472e-1)  # fmt: skip
ERFC_R = (-1.047766399936249e1, 1.297719955372516e1, -7.495518717768503e0, 2.921019019210786e0,
          -1.015265279202700e0, 4.218463358204948e-1, -2.820767439740514e-1, 5.641895067754075e-1)  # fmt: skip
MAXLOG = 88.72283905206835
# erfinv in f32 (erfInv32): a degree-8 polynomial in w - 2.5 (w < 5) or sqrt(w) - 3 (w >= 5), w = -log1p(-x^2).
ERFINV_W_LT5 = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                -0.00417768164, 0.246640727, 1.50140941)  # fmt: skip
ERFINV_W_GE5 = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                0.00943887047, 1.00167406, 2.83297682)  # fmt: skip
# What each chlo op becomes (hlo/coverage.py: a chlo op is lowered when all of these are).
_ARITH = ("stablehlo.constant", "stablehlo.convert", "stablehlo.multiply", "stablehlo.add", "stablehlo.divide")
LEGALIZED: dict[str, tuple[str, ...]] = {
    "chlo.square": ("stablehlo.multiply",),
    "chlo.erf": (*_ARITH, "stablehlo.maximum", "stablehlo.minimum"),
    "chlo.erfc": (*_ARITH, "stablehlo.subtract", "stablehlo.negate", "stablehlo.abs", "stablehlo.exponential",
                  "stablehlo.compare", "stablehlo.select"),  # fmt: skip
    "chlo.erf_inv": (*_ARITH, "stablehlo.negate", "stablehlo.log_plus_one", "stablehlo.compare", "stablehlo.select",
                     "stablehlo.subtract", "stablehlo.sqrt", "stablehlo.abs"),  # fmt: skip
    "chlo.top_k": ("stablehlo.iota", "stablehlo.sort", "stablehlo.compare", "stablehlo.return", "stablehlo.slice"),
}


def erf_f32(b: Builder, x: SSAValue) -> SSAValue:
    x = b.clamp(-4.0, x, 4.0)
    x_sq = b.op("multiply", x, x)
    erf = b.op("divide", b.op("multiply", x, b.poly(x_sq, ERF_ALPHA)), b.poly(x_sq, ERF_BETA))
    return b.clamp(-1.0, erf, 1.0)


def _erfc_ge_one(b: Builder, x: SSAValue) -> SSAValue:
    x_sq = b.op("multiply", x, x)
    z = b.op("negate", x_sq)
    abs_x, one, two = b.op("abs", x), b.const(1.0, x), b.const(2.0, x)
    recip_x_sq = b.op("divide", one, x_sq)
    scale = b.op("multiply", b.op("exponential", z), b.op("divide", one, abs_x))
    poly = b.select(b.compare("LT", abs_x, two), b.poly(recip_x_sq, ERFC_P), b.poly(recip_x_sq, ERFC_R))
    zero = b.const(0.0, x)
    approx = b.select(b.compare("LT", z, b.const(-MAXLOG, x)), zero, b.op("multiply", scale, poly))
    return b.select(b.compare("LT", x, zero), b.op("subtract", two, approx), approx)


def erfc_f32(b: Builder, x: SSAValue) -> SSAValue:
    one = b.const(1.0, x)
    erf_small = b.op("multiply", x, b.poly(b.op("multiply", x, x), ERF_T))
    small = b.compare("LT", b.op("abs", x), one)
    return b.select(small, b.op("subtract", one, erf_small), _erfc_ge_one(b, x))


def erf_inv_f32(b: Builder, x: SSAValue) -> SSAValue:
    """``erfInv32``: Giles' single-precision approximation; erfinv(±1) = ±inf, where the polynomial is
    indeterminate."""
    w = b.op("negate", b.op("log_plus_one", b.op("multiply", x, b.op("negate", x))))
    lt = b.compare("LT", w, b.const(5.0, x))
    w = b.select(lt, b.op("subtract", w, b.const(2.5, x)), b.op("subtract", b.op("sqrt", w), b.const(3.0, x)))

    def coefficient(i: int) -> SSAValue:
        return b.select(lt, b.const(ERFINV_W_LT5[i], x), b.const(ERFINV_W_GE5[i], x))

    p = coefficient(0)
    for i in range(1, len(ERFINV_W_LT5)):
        p = b.op("add", coefficient(i), b.op("multiply", p, w))
    at_one = b.compare("EQ", b.op("abs", x), b.const(1.0, x))
    return b.select(at_one, b.op("multiply", x, b.const(math.inf, x)), b.op("multiply", p, x))


def _with_upcast(b: Builder, op: Operation, x: SSAValue, fn: Any) -> SSAValue:
    element = hlo.ttype(x).element_type
    if isinstance(element, Float32Type):
        return fn(b, x)
    if isinstance(element, (Float16Type, BFloat16Type)):
        return b.convert(fn(b, b.convert(x, Float32Type())), element)
    raise NkiError(f"{op.name} of {element}: nkic computes erf/erfc/erf_inv in f16, bf16 or f32")


def _top_k(b: Builder, op: hlo.ChloTopKOp) -> list[SSAValue]:
    x = op.operand[0]
    shape, k = hlo.shape_of(x), op.k.value.data
    last = len(shape) - 1
    iota = b.add(hlo.IotaOp.create(properties={"iota_dimension": IntegerAttr(last, i64)},
                                   result_types=[TensorType(IntegerType(32), shape)]))  # fmt: skip
    element = hlo.ttype(x).element_type
    scalars = [TensorType(element, []), TensorType(element, []), TensorType(IntegerType(32), []),
               TensorType(IntegerType(32), [])]  # fmt: skip
    body = Block(arg_types=scalars)
    kind = "TOTALORDER" if not isinstance(element, IntegerType) else "SIGNED"
    cmp = hlo.CompareOp.create(
        operands=[body.args[0], body.args[1]], result_types=[TensorType(IntegerType(1), [])],
        properties={"comparison_direction": hlo.ComparisonDirectionAttr("GT"),
                    "compare_type": hlo.ComparisonTypeAttr(kind)})  # fmt: skip
    body.add_ops([cmp, hlo.ReturnOp([cmp.results[0]])])
    sort = hlo.SortOp.create(
        operands=[x, iota], result_types=[x.type, iota.type], regions=[Region(body)],
        properties={"dimension": IntegerAttr(last, i64), "is_stable": BoolAttr(True, IntegerType(1))})  # fmt: skip
    b.add(sort)
    out = []
    for r, res in zip(sort.results, op.outs):
        limit = [*shape[:-1], k]
        out.append(b.add(hlo.SliceOp.create(
            operands=[r], result_types=[res.type],
            properties={"start_indices": hlo.i64_array([0] * len(shape)), "limit_indices": hlo.i64_array(limit),
                        "strides": hlo.i64_array([1] * len(shape))})))  # fmt: skip
    return out


def legalize_op(op: Operation) -> list[SSAValue] | None:
    """The StableHLO values replacing ``op``'s results (inserted before it), or None for a non-chlo op."""
    b = Builder(op)
    if isinstance(op, hlo.ChloSquareOp):
        x = op.operand[0]
        return [b.op("multiply", x, x)]
    if isinstance(op, hlo.ChloErfOp):
        return [_with_upcast(b, op, op.operand[0], erf_f32)]
    if isinstance(op, hlo.ChloErfcOp):
        return [_with_upcast(b, op, op.operand[0], erfc_f32)]
    if isinstance(op, hlo.ChloErfInvOp):
        return [_with_upcast(b, op, op.operand[0], erf_inv_f32)]
    if isinstance(op, hlo.ChloTopKOp):
        return _top_k(b, op)
    return None


def legalize_chlo(module: ModuleOp) -> None:
    rewrite_each(module, legalize_op)


@dataclass(frozen=True)
class ChloLegalize(ModulePass):
    """``chlo-legalize``: every chlo op replaced by its StableHLO decomposition."""

    name = "chlo-legalize"

    def apply(self, ctx: Any, op: ModuleOp) -> None:
        legalize_chlo(op)
