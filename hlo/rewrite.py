"""What ``chlo-legalize`` and ``decompose-hlo`` share: a builder that inserts StableHLO ops before the op being
replaced, and one pass over a snapshot of a module's ops that replaces each op's results and erases it.

The snapshot is taken innermost first (an op's regions before the op), so when a ``case`` is decomposed its
branches already hold only decomposed ops and the clones it makes of them need no second visit: one walk of the
module, however many ops are rewritten (re-walking the module after each rewrite was quadratic in their count).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerType, ModuleOp, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from nkic.dialects import stablehlo as hlo
from nkic.hlo.locations import located

Rewrite = Callable[[Operation], "list[SSAValue] | None"]


@dataclass
class Builder:
    """Inserts StableHLO ops before ``anchor``, each carrying the anchor's location (the op being replaced)."""

    anchor: Operation

    def add(self, op: Operation) -> SSAValue:
        op.location = self.anchor.location
        Rewriter.insert_op(op, InsertPoint.before(self.anchor))
        return op.results[0]

    def const(self, value: float, like: SSAValue) -> SSAValue:
        t = hlo.ttype(like)
        return self.add(hlo.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, [value])))

    def op(self, name: str, *args: SSAValue) -> SSAValue:
        return self.add(hlo.ELEMENTWISE[name].create(operands=list(args), result_types=[args[0].type]))

    def compare(self, direction: str, a: SSAValue, b: SSAValue) -> SSAValue:
        t = hlo.ttype(a)
        return self.add(hlo.CompareOp.create(
            operands=[a, b], result_types=[TensorType(IntegerType(1), t.get_shape())],
            properties={"comparison_direction": hlo.ComparisonDirectionAttr(direction)}))  # fmt: skip

    def select(self, pred: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add(hlo.SelectOp.create(operands=[pred, a, b], result_types=[a.type]))

    def convert(self, x: SSAValue, element: Attribute) -> SSAValue:
        t = hlo.ttype(x)
        return self.add(hlo.ConvertOp.create(operands=[x], result_types=[TensorType(element, t.get_shape())]))

    def clamp(self, lo: float, x: SSAValue, hi: float) -> SSAValue:
        return self.op("minimum", self.op("maximum", x, self.const(lo, x)), self.const(hi, x))

    def poly(self, x: SSAValue, coefficients: Sequence[float]) -> SSAValue:
        """Horner's rule, as ``materializePolynomialApproximation``: c0, then ``p * x + c_i``."""
        p = self.const(coefficients[0], x)
        for c in coefficients[1:]:
            p = self.op("add", self.op("multiply", p, x), self.const(c, x))
        return p


def replace(op: Operation, values: Sequence[SSAValue]) -> None:
    """``op``'s results replaced by ``values`` (inserted before it), then ``op`` erased."""
    for old, new in zip(op.results, values, strict=True):
        old.replace_all_uses_with(new)
    Rewriter.erase_op(op)


def rewrite_each(module: ModuleOp, rewrite: Rewrite) -> int:
    """``rewrite`` applied once to every op of ``module`` (innermost first), each under ``located(op)`` so an op it
    cannot rewrite is an error at its MLIR line; an op it returns values for is replaced. The number replaced."""
    count = 0
    for op in list(module.walk(region_first=True)):
        with located(op):
            values = rewrite(op)
        if values is not None:
            replace(op, values)
            count += 1
    return count
