"""``bir-unroll``: flatten every ``bir.loop`` into straight-line instructions.

Loops are unrolled innermost first. In each copy of a body the induction variable's coefficient folds into the
access-pattern offset, and tensors allocated inside the loop (memlocs ``scope``d to its axis) get a fresh memloc
per iteration, so each iteration really sees a new allocation (which the allocator may later overlap with dead
ones). Name-level dependency edges cannot survive the copy; ``dependency-analysis`` recomputes them on physical
addresses. Instructions are renumbered in program order.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.target.limits import INSTRUCTIONS_VAR, max_instructions
from nkic.dialects.common import AccessPatternAttr, i64_attr, names_attr


def _fold_iv(ap: AccessPatternAttr, depth: int, value: int) -> AccessPatternAttr:
    coeffs = ap.iv_coeffs
    if len(coeffs) <= depth:
        return ap
    return ap.moved(ap.offset_value + coeffs[depth] * value, coeffs[:depth])


class _Unroller:
    def __init__(self, fn: bir.FunctionOp):
        self.fn = fn
        self.locs = fn.memlocs()

    def block(self, block: Block, axes: list[str]) -> None:
        for op in list(block.ops):
            if isinstance(op, bir.LoopOp):
                self.block(op.body.block, [*axes, op.axis.data])
                self.expand(op, axes)

    def expand(self, loop: bir.LoopOp, outer: list[str]) -> None:
        axis, depth = loop.axis.data, len(outer)
        scoped = [loc for loc in self.locs.values() if loc.scope is not None and loc.scope.data == axis]
        parent = loop.parent_block()
        assert parent is not None
        for v in loop.iterations:
            names = {}
            for loc in scoped:
                fresh = f"{loc.sym_name.data}.{v}"
                names[loc.sym_name.data] = fresh
                clone = loc.clone()
                clone.properties["sym_name"] = StringAttr(fresh)
                if outer:
                    clone.properties["scope"] = StringAttr(outer[-1])
                else:
                    del clone.properties["scope"]
                loc.parent_block().insert_op_before(clone, loc)  # type: ignore[union-attr]
                self.locs[fresh] = clone
            for op in loop.body.block.ops:
                parent.insert_op_before(self.copy(op, names, depth, v), loop)
        for loc in scoped:
            del self.locs[loc.sym_name.data]
            loc.detach()
            loc.erase()
        loop.detach()
        loop.erase()

    @staticmethod
    def copy(op: Operation, names: dict[str, str], depth: int, value: int) -> Operation:
        assert isinstance(op, bir.BirInst), "inner loops are unrolled first"
        new = op.clone()
        new.properties["aps"] = ArrayAttr([_fold_iv(ap, depth, value) for ap in op.aps.data])
        new.properties["refs"] = names_attr([names.get(r, r) for r in op.ref_names])
        new.properties.pop("deps", None)
        return new


def unrolled_count(block: Block) -> int:
    """Instructions ``block`` holds once every loop in it is unrolled (computed without unrolling anything)."""
    total = 0
    for op in block.ops:
        if isinstance(op, bir.LoopOp):
            total += len(op.iterations) * unrolled_count(op.body.block)
        elif isinstance(op, bir.BirInst):
            total += 1
    return total


def renumber(fn: bir.FunctionOp) -> None:
    for i, inst in enumerate(fn.instructions()):
        inst.properties["id"] = i64_attr(i)


@dataclass(frozen=True)
class BirUnrollPass(ModulePass):
    """``max_instructions`` bounds each function once unrolled (0: ``NKIC_MAX_INSTRUCTIONS`` or the default of
    ``target/limits.py``); it is checked before any loop is expanded, so a huge trip count fails at once."""

    name = "bir-unroll"
    max_instructions: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        limit = self.max_instructions if self.max_instructions > 0 else max_instructions()
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            if not any(isinstance(o, bir.LoopOp) for o in fn.body.walk()):
                continue
            count = unrolled_count(fn.body.block)
            if count > limit:
                raise PassFailedException(
                    f"@{fn.sym_name.data} unrolls to {count} instructions, over the limit of {limit}: raise it with "
                    f"{INSTRUCTIONS_VAR}=N or bir-unroll{{max-instructions=N}}"
                )
            _Unroller(fn).block(fn.body.block, [])
            for inst in fn.instructions():
                inst.properties.pop("deps", None)
            renumber(fn)
