"""``bir-unroll``: flatten every ``bir.loop`` into straight-line instructions.

Loops are unrolled innermost first. In each copy of a body the induction variable's coefficient folds into the
access-pattern offset, and tensors allocated inside the loop (memlocs ``scope``d to its axis) get a fresh memloc
per iteration, so each iteration really sees a new allocation (which the allocator may later overlap with dead
ones). Name-level dependency edges cannot survive the copy; ``dependency-analysis`` recomputes them on physical
addresses. Instructions are renumbered in program order.

With ``roll=true`` (``NKIC_ROLL_LOOPS=1``, ``compile_module(roll_loops=True)``, ``nkic compile --roll-loops``) a
loop that ``loop_rolling.rollable`` accepts is not expanded: it becomes one body between runtime-loop control
instructions, its index a register (see ``passes/loop_rolling.py`` and ARCHITECTURE.md "Rolled loops"). Loops are
still visited innermost first: an outer loop around a rolled one rolls too when it qualifies (its own register),
else it unrolls around it (copying its control instructions).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.passes import loop_rolling as rolling
from nkic.passes.targeting import target_of
from nkic.target.limits import INSTRUCTIONS_VAR, max_instructions
from nkic.dialects.common import AccessPatternAttr, i64_attr, names_attr


def _fold_iv(ap: AccessPatternAttr, depth: int, value: int) -> AccessPatternAttr:
    coeffs = ap.iv_coeffs
    if len(coeffs) <= depth:
        return ap
    return ap.moved(ap.offset_value + coeffs[depth] * value, coeffs[:depth])


class _Unroller:
    def __init__(self, fn: bir.FunctionOp, roll: bool = False, limit: int = 0, interleave: int = 1,
                 capacity: dict[str, int] | None = None):  # fmt: skip
        self.fn = fn
        self.interleave = interleave
        self.capacity = capacity or {}  # bytes per partition by on-chip memory (block tensors carried in a loop)
        self.locs = fn.memlocs()
        self.register = rolling.free_register(fn) if roll else None
        self.rolled = 0
        # With rolling the final size is only known as loops are decided: count as we go, and stop before an
        # expansion would pass the limit (so a huge loop that cannot roll still fails at once).
        self.limit = limit
        self.count = sum(1 for op in fn.body.walk() if isinstance(op, bir.BirInst))
        _check_unique_axes(fn)
        # memlocs by the loop axis they are scoped to (kept up to date as loops are expanded or rolled)
        self.by_scope: dict[str, list[bir.MemLocOp]] = {}
        for loc in self.locs.values():
            if loc.scope is not None:
                self.by_scope.setdefault(loc.scope.data, []).append(loc)

    def grow(self, added: int) -> None:
        self.count += added
        if self.limit and self.count > self.limit:
            raise PassFailedException(
                f"@{self.fn.sym_name.data} unrolls to at least {self.count} instructions with loops rolled, over the "
                f"limit of {self.limit}: raise it with {INSTRUCTIONS_VAR}=N or bir-unroll{{max-instructions=N}}"
            )

    def block(self, block: Block, axes: list[str], outer: tuple[range, ...] = ()) -> None:
        for op in list(block.ops):
            if isinstance(op, bir.LoopOp):
                self.block(op.body.block, [*axes, op.axis.data], (*outer, op.iterations))
                if not self.try_roll(op, axes, outer):
                    self.expand(op, axes)

    def scoped(self, axis: str) -> list[bir.MemLocOp]:
        return list(self.by_scope.get(axis, ()))

    def fresh_copies(self, scoped: list[bir.MemLocOp], v: int, outer: list[str]) -> dict[str, str]:
        """A new memloc per scoped tensor for iteration ``v`` (scoped to the enclosing loop, if any)."""
        names = {}
        for loc in scoped:
            fresh = f"{loc.sym_name.data}.{v}"
            names[loc.sym_name.data] = fresh
            clone = loc.clone()
            clone.properties["sym_name"] = StringAttr(fresh)
            _rescope(clone, outer)
            if outer:
                self.by_scope.setdefault(outer[-1], []).append(clone)
            loc.parent_block().insert_op_before(clone, loc)  # type: ignore[union-attr]
            self.locs[fresh] = clone
        return names

    def expand(self, loop: bir.LoopOp, outer: list[str]) -> None:
        depth = len(outer)
        scoped = self.scoped(loop.axis.data)
        parent = loop.parent_block()
        assert parent is not None
        body = sum(1 for op in loop.body.block.ops if isinstance(op, bir.BirInst))
        self.grow((len(loop.iterations) - 1) * body)
        for v in loop.iterations:
            names = self.fresh_copies(scoped, v, outer)
            for op in loop.body.block.ops:
                parent.insert_op_before(self.copy(op, names, depth, v), loop)
        for loc in scoped:
            del self.locs[loc.sym_name.data]
            loc.detach()
            loc.erase()
        self.by_scope.pop(loop.axis.data, None)
        loop.detach()
        loop.erase()

    def try_roll(self, loop: bir.LoopOp, outer: list[str], values: tuple[range, ...]) -> bool:
        """Keep ``loop`` rolled if it qualifies (``loop_rolling.rollable``): the iterations emitted before the loop
        (the first one if the implicit accumulate needs it, then what the interleave factor leaves over), then the
        control sequence around ``factor`` copies of the body (consecutive iterations, each with its own scoped
        tensors, allocated once for every rolled iteration)."""
        depth = len(outer)
        register = rolling.loop_register(self.register, depth)
        if register is None:
            return False
        peel = rolling.needs_peel(loop, depth, self.locs)
        if not rolling.rollable(loop, depth, values, self.locs, peel):
            return False
        parent = loop.parent_block()
        assert parent is not None
        scoped = self.scoped(loop.axis.data)
        body = list(loop.body.block.ops)
        wanted = self.interleave
        if depth == 0:  # a carried oversized block tensor needs as many iterations per body as it keeps blocks live
            wanted = max(wanted, rolling.carried_blocks(loop, self.locs, self.capacity))
        factor = rolling.interleave_factor(wanted, body, len(loop.iterations) - peel)
        lead = peel + (len(loop.iterations) - peel) % factor
        for v in loop.iterations[:lead]:
            names = self.fresh_copies(scoped, v, outer)
            for op in body:
                parent.insert_op_before(self.copy(op, names, depth, v), loop)
        iterations = loop.iterations[lead:]
        self.grow(rolling.CONTROL_PER_LOOP + (lead + factor - 1) * len(body))
        counter = range(iterations.start, iterations.stop, iterations.step * factor)
        head, tail = rolling.loop_control(counter, register)
        parent.insert_op_before(head, loop)
        copies = [self.renamed(body, self.fresh_copies(scoped, f"u{u}", outer)) for u in range(1, factor)]
        for u, ops in enumerate([body, *copies]):  # copy 0 is the body itself, moved out of the loop erased below
            first = iterations[0] + u * iterations.step
            for op in ops:
                if op.parent is not None:
                    op.detach()
                parent.insert_op_before(rolling.roll_operands(op, depth, first, register), loop)
        parent.insert_op_before(tail, loop)
        for loc in scoped:  # one allocation for every rolled iteration (fresh per iteration of an enclosing loop)
            _rescope(loc, outer)
            if outer:
                self.by_scope.setdefault(outer[-1], []).append(loc)
        self.by_scope.pop(loop.axis.data, None)
        loop.detach()
        loop.erase()
        self.rolled += 1
        return True

    @staticmethod
    def renamed(body: list[Operation], names: dict[str, str]) -> list[Operation]:
        """Clones of ``body`` whose operands name the tensors ``names`` maps to (an interleaved copy's own)."""
        ops = []
        for op in body:
            assert isinstance(op, bir.BirInst)
            props = dict(op.properties)
            props["refs"] = names_attr([names.get(r, r) for r in op.ref_names])
            ops.append(_clone_inst(op, props))
        return ops

    @staticmethod
    def copy(op: Operation, names: dict[str, str], depth: int, value: int) -> Operation:
        assert isinstance(op, bir.BirInst), "inner loops are unrolled first"
        props = dict(op.properties)
        props["aps"] = ArrayAttr([_fold_iv(ap, depth, value) for ap in op.aps.data])
        props["refs"] = names_attr([names.get(r, r) for r in op.ref_names])
        props.pop("deps", None)
        return _clone_inst(op, props)


def _clone_inst(op: bir.BirInst, props: dict[str, Attribute]) -> bir.BirInst:
    """``op.clone()`` with ``props`` as its properties. An instruction has no operands, results, successors or
    regions, so this is all ``clone`` does for it, less its walk over the two ops (for operands) and the property
    updates made on the copy afterwards."""
    if op.operands or op.results or op.regions or op.successors:  # not an instruction's shape: clone generically
        new = op.clone()
        new.properties.clear()
        new.properties.update(props)
        return new
    return type(op).create(properties=props, attributes=dict(op.attributes), location=op.location)


def _check_unique_axes(fn: bir.FunctionOp) -> None:
    """A memloc's ``scope`` names its loop by label, so two loops of one function must not share a label (an
    inlining that kept each kernel's own ``L0``, ``L1``, ... would have both loops' scoped tensors renamed by the
    first)."""
    seen: set[str] = set()
    for op in fn.body.block.ops:
        for loop in op.walk() if op.regions else ():
            if isinstance(loop, bir.LoopOp):
                if loop.axis.data in seen:
                    raise PassFailedException(
                        f"@{fn.sym_name.data} has two loops labelled '{loop.axis.data}': loop labels must be unique "
                        "in a function (memloc scopes name them)"
                    )
                seen.add(loop.axis.data)


def _rescope(loc: bir.MemLocOp, outer: list[str]) -> None:
    if outer:
        loc.properties["scope"] = StringAttr(outer[-1])
    else:
        loc.properties.pop("scope", None)


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
    ``target/limits.py``); it is checked before any loop is expanded, so a huge trip count fails at once (with
    ``roll``, before each expansion, on the count so far)."""

    name = "bir-unroll"
    max_instructions: int = 0
    roll: bool = False
    interleave: int = 0  # iterations per rolled body (0: NKIC_ROLL_INTERLEAVE or loop_rolling.INTERLEAVE)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        limit = self.max_instructions if self.max_instructions > 0 else max_instructions()
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            if not any(isinstance(o, bir.LoopOp) for o in fn.body.walk()):
                continue
            count = unrolled_count(fn.body.block)
            if count > limit and not self.roll:
                raise PassFailedException(
                    f"@{fn.sym_name.data} unrolls to {count} instructions, over the limit of {limit}: raise it with "
                    f"{INSTRUCTIONS_VAR}=N or bir-unroll{{max-instructions=N}}"
                )
            interleave = self.interleave if self.interleave > 0 else rolling.interleave_default()
            t = target_of(op)
            capacity = {"sbuf": t.sbuf_bytes_per_partition, "psum": t.psum_bytes_per_partition}
            _Unroller(fn, self.roll, limit if self.roll else 0, interleave, capacity).block(fn.body.block, [])
            for inst in fn.instructions():
                inst.properties.pop("deps", None)
            renumber(fn)
