"""``decompose-hlo``: StableHLO ops nkic lowers through other StableHLO ops, rewritten before the lowering (run by
``lower_module`` after ``chlo-legalize`` and after calls are inlined):

* ``clamp(min, x, max)`` is ``minimum(maximum(x, min), max)``, a scalar bound broadcast to x's shape — the StableHLO
  spec's definition ("min(max(operand, min_element), max_element)").
* ``case(index) {b0}, {b1}, ...`` (``lax.cond``, ``lax.switch``) runs every branch and picks each result with
  ``select(index == k, r_k, ...)`` from the last branch down, so an index out of range takes the last branch as the
  spec says ("If index < 0 or index >= N, then index = N - 1"). Branches of a StableHLO program from JAX are pure
  (no side effects), so running them all computes the same results; a compile-time index folds to its branch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerType, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from nkic.dialects import stablehlo as hlo
from nkic.hlo.rewrite import Builder, rewrite_each

# What each op becomes (hlo/coverage.py: it is lowered when all of these are).
DECOMPOSED: dict[str, tuple[str, ...]] = {
    "stablehlo.clamp": ("stablehlo.maximum", "stablehlo.minimum", "stablehlo.broadcast_in_dim"),
    "stablehlo.case": ("stablehlo.constant", "stablehlo.compare", "stablehlo.broadcast_in_dim", "stablehlo.select"),
}


def _broadcast(b: Builder, v: SSAValue, like: SSAValue) -> SSAValue:
    """``v`` (a scalar or of ``like``'s shape) at ``like``'s shape."""
    shape, t = hlo.shape_of(like), hlo.ttype(v)
    if hlo.shape_of(v) == shape:
        return v
    return b.add(hlo.BroadcastInDimOp.create(operands=[v], result_types=[TensorType(t.element_type, shape)],
                                             properties={"broadcast_dimensions": hlo.i64_array([])}))  # fmt: skip


def _clamp(b: Builder, op: hlo.ClampOp) -> list[SSAValue]:
    lo, x, hi = op.operand
    return [b.op("minimum", b.op("maximum", x, _broadcast(b, lo, x)), _broadcast(b, hi, x))]


def _branch(b: Builder, region: Any) -> list[SSAValue]:
    """The branch's ops cloned before the case op; its returned values."""
    mapping: dict[SSAValue, SSAValue] = {}
    for inner in region.block.ops:
        if isinstance(inner, hlo.ReturnOp):
            return [mapping.get(v, v) for v in inner.operands]
        new = inner.clone(value_mapper=mapping)  # type: ignore[arg-type]
        Rewriter.insert_op(new, InsertPoint.before(b.anchor))
        mapping.update(zip(inner.results, new.results))
    raise AssertionError("verified: a branch ends in stablehlo.return")


def _case(b: Builder, op: hlo.CaseOp) -> list[SSAValue]:
    index = op.index[0]
    results = [_branch(b, region) for region in op.branches]
    chosen = list(results[-1])
    for k in range(len(results) - 2, -1, -1):
        k_const = b.add(hlo.ConstantOp(DenseIntOrFPElementsAttr.from_list(TensorType(IntegerType(32), []), [k])))
        hit = b.compare("EQ", index, k_const)
        for i, (mine, other) in enumerate(zip(results[k], chosen)):
            pred = _broadcast(b, hit, other)
            chosen[i] = b.select(pred, mine, other)
    return chosen


def decompose_op(op: Operation) -> list[SSAValue] | None:
    """The values replacing ``op``'s results (inserted before it), or None for an op kept as it is."""
    if isinstance(op, hlo.ClampOp):
        return _clamp(Builder(op), op)
    if isinstance(op, hlo.CaseOp):
        return _case(Builder(op), op)
    return None


def decompose_hlo(module: ModuleOp) -> None:
    """One pass over the module's ops, innermost first (``rewrite_each``): a case's branches are decomposed before
    the case clones them out, clamps and nested cases in them included."""
    rewrite_each(module, decompose_op)


@dataclass(frozen=True)
class DecomposeHlo(ModulePass):
    """``decompose-hlo``: clamp as maximum/minimum, case as every branch and a select per result."""

    name = "decompose-hlo"

    def apply(self, ctx: Any, op: ModuleOp) -> None:
        decompose_hlo(op)

