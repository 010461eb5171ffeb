"""Loops kept rolled: which ``bir.loop``s ``bir-unroll{roll=true}`` keeps as one body, and the form they take.

A rolled loop becomes a counted loop around one copy of its body (see ARCHITECTURE.md "Rolled loops"):

    counted_loop_begin  r_iv, bound = trips·step        (r_iv = 0)
      <the body once; an operand whose address moves with the loop has the run-time term c·r_iv>
    counted_loop_end    r_iv, step, bound = trips·step  (r_iv += step; back while r_iv < bound)

``r_iv`` counts from 0, so an operand's static offset is its address in the first rolled iteration and the
register term ``+ c*r_iv`` (``AccessPatternAttr`` dynamic kind ``reg``) rotates it per iteration. Control
instructions are barriers (every engine, semaphores reset), so the body is one barrier-free stretch for every backend
pass: allocated once, analysed, scheduled and given semaphores once, and each iteration starts with all semaphores
at zero.

What rolls (``rollable``): an ``affine``/``sequential`` loop with a positive step and at least two iterations left
to roll, whose body holds instructions and, at most, the counted-loop control of inner loops that rolled already
(loops are visited innermost first; a runtime loop or register instruction keeps it unrolled). Rolled loops nest:
the loop at depth ``d`` counts in register ``free_register + d`` (``loop_register``), so an inner loop's counter
restarts at its ``counted_loop_begin`` while the outer one's keeps its value. Every operand that moves with the
loop

* is not already dynamic (an access pattern has one run-time term);
* on chip, stays inside the same partitions over the whole loop (the register term moves a byte address within a
  partition, never the start partition), for every value of the enclosing loops;
* is not the ``dst`` of a PSUM-accumulating instruction (matmul): NKI's implicit accumulate is decided per element
  statically, which a destination moving at run time defeats.

The first iteration is *peeled* (emitted unrolled before the loop) when an accumulating instruction of the body with
the implicit rule writes a PSUM tensor that is not fresh per iteration and that no earlier instruction of the
enclosing block (among the 128 ops before the loop) has already written: the peeled copy's matmul then overwrites and the rolled one accumulates, as in
the unrolled program.

*Interleaving* (``interleave_factor``; ``NKIC_ROLL_INTERLEAVE=N``, ``bir-unroll{interleave=N}``, 1 by default): a
barrier-free body may hold N consecutive iterations, each with its own copies of the body's tensors, the counter
stepping N·step (the iterations N does not divide are emitted before the loop). The copies are one stretch, so the
scheduler overlaps them: a barrier every N iterations instead of every one. A top-level loop that carries a block
tensor declared beyond its memory from one iteration to the next gets at least as many copies as that tensor keeps
blocks live per iteration (``carried_blocks``): ``rotate-blocks`` then gives it that many buffers.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator, Sequence

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute, Operation

from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr, ap_indices
from nkic.dialects.traits import AccumulatesDst, IsControl
from nkic.target.instructions import NUM_REGISTERS
from nkic.target.vocab import dtype_size

ROLL_ENV = "NKIC_ROLL_LOOPS"
INTERLEAVE_ENV = "NKIC_ROLL_INTERLEAVE"
INTERLEAVE = 1  # consecutive iterations per rolled body when not told (see interleave_factor)
INTERLEAVE_BUDGET = 1024  # instructions an interleaved body may hold (a larger body has parallel work enough)
CONTROL_PER_LOOP = 2  # counted_loop_begin, counted_loop_end
_LOOKBACK = 128  # ops before a loop searched for matmuls that already wrote its PSUM tile
_MAX_OUTER_COMBOS = 4096  # enclosing iteration values checked for the partition rule; beyond, the loop unrolls
_COUNTED = frozenset({"counted_loop_begin", "counted_loop_end"})
_REGISTER_FIELDS = ("dst_reg", "src0_reg", "src1_reg", "cond_reg", "src_reg", "iv_reg")


def roll_default() -> bool:
    """Whether the compiler keeps loops rolled when not told: ``NKIC_ROLL_LOOPS=1`` (off by default)."""
    return os.environ.get(ROLL_ENV, "") not in ("", "0")


def interleave_default() -> int:
    """Iterations per rolled body when the pass is not told: ``NKIC_ROLL_INTERLEAVE=N`` or ``INTERLEAVE``."""
    value = os.environ.get(INTERLEAVE_ENV, "")
    return max(1, int(value)) if value.strip().isdigit() else INTERLEAVE


def interleave_factor(wanted: int, body: Sequence[Operation], trips: int) -> int:
    """How many consecutive iterations one rolled body holds: ``wanted``, but 1 when the body holds an inner
    loop's control (its barriers would separate the copies anyway), at most half the trips (a loop keeps at
    least two rolled iterations) and at most ``INTERLEAVE_BUDGET`` instructions in all. The copies share one
    barrier-free stretch, so the scheduler overlaps them."""
    if any(isinstance(op, bir.BirInst) and op.has_trait(IsControl) for op in body):
        return 1
    return max(1, min(wanted, trips // 2, INTERLEAVE_BUDGET // max(1, len(body))))


def carried_blocks(loop: bir.LoopOp, locs: dict[str, bir.MemLocOp], limit: dict[str, int]) -> int:
    """The most blocks one iteration of top-level ``loop`` touches of a block tensor declared outside it, larger than
    its memory (``limit``: bytes per partition by memory), and advancing one block per iteration: 2 for ``t[i]``
    written and ``t[i - 1]`` read. Such a tensor's blocks are carried from one iteration to the next, and
    ``rotate-blocks`` can give it rotating buffers (block ``b`` in slot ``b mod K``) only when a rolled body holds
    K >= that many iterations, so the counter moves the blocks by a multiple of K (0: no such tensor)."""
    spans: dict[str, set[int]] = {}
    first, step = loop.iterations[0], loop.step.value.data
    for inst in loop.body.block.ops:
        if not isinstance(inst, bir.BirInst):
            continue
        for _, name, ap in _operands(inst):
            block = _carried_block(locs[name], ap, first, step, limit)
            if block is not None:
                spans.setdefault(name, set()).add(block)
    return max((max(b) - min(b) + 1 for b in spans.values()), default=0)


def _carried_block(loc: bir.MemLocOp, ap: AccessPatternAttr, first: int, step: int,
                   limit: dict[str, int]) -> int | None:  # fmt: skip
    """The block of ``loc`` the operand touches in the loop's first iteration, when it is a block of an oversized
    block tensor advancing one block per iteration; else None."""
    c = _coeff(ap, 0)
    if c == 0 or ap.is_dynamic or loc.scope is not None or loc.addr is not None or loc.kind.data != "internal":
        return None
    dims, size = loc.dims, dtype_size(loc.dtype.data)
    if loc.mem not in limit or len(dims) < 3 or math.prod(dims[1:]) * size <= limit[loc.mem]:
        return None
    elem, block = dtype_size(ap.operand_dtype(loc.dtype.data)), math.prod(dims[2:]) * size
    if c * step * elem != block:
        return None
    offset = (ap.offset_value + c * first) * elem
    lo = offset + elem * sum(min(0, s * (n - 1)) for s, n in ap.pairs[1:])
    hi = offset + elem * sum(max(0, s * (n - 1)) for s, n in ap.pairs[1:])
    row = math.prod(dims[1:]) * size
    if lo // row != hi // row or (lo % row) // block != (hi % row) // block:
        return None
    return (lo % row) // block


def _coeff(ap: AccessPatternAttr, depth: int) -> int:
    coeffs = ap.iv_coeffs
    return coeffs[depth] if len(coeffs) > depth else 0


def _operands(inst: bir.BirInst) -> Iterator[tuple[str, str, AccessPatternAttr]]:
    yield from zip(inst.role_names, inst.ref_names, inst.aps.data)  # type: ignore[misc]


def _row_elems(loc: bir.MemLocOp, dtype: str) -> int:
    row = dtype_size(loc.dtype.data)
    for d in loc.dims[1:]:
        row *= d
    return row // dtype_size(dtype)


def _stays_in_partitions(
    loc: bir.MemLocOp, ap: AccessPatternAttr, depth: int, values: range, outer: Sequence[range]
) -> bool:
    """Whether the on-chip operand keeps its partitions and stays inside its rows at the loop's first and last
    value, for every combination of the enclosing loops' values (placement is monotone in the offset)."""
    row = _row_elems(loc, ap.operand_dtype(loc.dtype.data))
    lo = sum(min(0, s * (n - 1)) for s, n in ap.pairs[1:])
    hi = sum(max(0, s * (n - 1)) for s, n in ap.pairs[1:])
    coeffs, c = ap.iv_coeffs[:depth], _coeff(ap, depth)
    combos = 1
    for r in outer:
        combos *= len(r)
    if combos > _MAX_OUTER_COMBOS:
        return False
    for outer_values in itertools.product(*outer):
        base = ap.offset.data + sum(k * v for k, v in zip(coeffs, outer_values))
        places = [divmod(base + c * v, row) for v in (values[0], values[-1])]
        if places[0][0] != places[1][0]:
            return False
        if any(off + lo < 0 or off + hi >= row for _, off in places):
            return False
    return True


def rollable(
    loop: bir.LoopOp, depth: int, outer: Sequence[range], locs: dict[str, bir.MemLocOp], peel: bool
) -> bool:
    """Whether ``loop`` (at nesting ``depth``, inside loops with values ``outer``) can stay one rolled body."""
    values = loop.iterations
    if loop.kind.data not in ("affine", "sequential") or loop.step.value.data <= 0 or len(values) - peel < 2:
        return False
    body = list(loop.body.block.ops)
    if not body or not all(isinstance(op, bir.BirInst) and _may_nest(op) for op in body):
        return False
    for inst in body:
        assert isinstance(inst, bir.BirInst)
        if inst.has_trait(IsControl):
            continue
        accumulates = inst.has_trait(AccumulatesDst)
        for role, name, ap in _operands(inst):
            if _coeff(ap, depth) == 0:
                continue
            if ap.is_dynamic or (accumulates and role == "dst"):
                return False
            loc = locs[name]
            if loc.mem in ("sbuf", "psum") and not _stays_in_partitions(loc, ap, depth, values, outer):
                return False
    return True


def _may_nest(op: bir.BirInst) -> bool:
    """An instruction a rolled body may hold: any non-control one, or the counted-loop control of an inner rolled
    loop (its own register, one level deeper). A runtime loop or register instruction keeps the loop unrolled: its
    registers are the kernel's, and their values may carry from one iteration to the next."""
    return not op.has_trait(IsControl) or op.OPNAME in _COUNTED


def needs_peel(loop: bir.LoopOp, depth: int, locs: dict[str, bir.MemLocOp]) -> bool:
    """Whether the first iteration must be peeled for NKI's implicit PSUM accumulate (see the module docstring)."""
    axis = loop.axis.data
    earlier = list(_earlier_accumulations(loop))
    for inst in loop.body.block.ops:
        if not (isinstance(inst, bir.BirInst) and inst.has_trait(AccumulatesDst)):
            continue
        if getattr(inst, "accumulate", None) is not None:  # explicit: the same every iteration
            continue
        name, ap = inst.ref("dst"), inst.ap("dst")
        assert name is not None and ap is not None
        scope = locs[name].scope
        if scope is not None and scope.data == axis:
            continue  # a fresh tensor every iteration: the body's own program order decides
        if not _covered(name, ap, depth, earlier):
            return True
    return False


def _earlier_accumulations(loop: bir.LoopOp) -> Iterator[bir.BirInst]:
    """The accumulating instructions among the ``_LOOKBACK`` ops before ``loop`` (a bounded look: a flat program
    of n instructions has O(n) loops; missing an earlier writer only peels an iteration, which is always sound)."""
    op = loop.prev_op
    for _ in range(_LOOKBACK):
        if op is None:
            return
        if isinstance(op, bir.BirInst) and op.has_trait(AccumulatesDst):
            yield op
        op = op.prev_op


def _covered(name: str, ap: AccessPatternAttr, depth: int, earlier: list[bir.BirInst]) -> bool:
    """Whether earlier accumulating writes of the enclosing block (same enclosing-loop coefficients) already cover
    every element ``ap`` touches."""
    want = None
    for inst in earlier:
        other = inst.ap("dst")
        if inst.ref("dst") != name or other is None or other.is_dynamic or other.iv_coeffs != ap.iv_coeffs[:depth]:
            continue
        if other.offset == ap.offset and other.pattern == ap.pattern:
            return True  # the same elements (the common case: one accumulator tile)
        if want is None:
            want = ap_indices(ap.offset.data, ap.pairs).ravel()
        want = want[~np.isin(want, ap_indices(other.offset.data, other.pairs))]
        if not len(want):
            return True
    return False


def free_register(fn: bir.FunctionOp) -> int | None:
    """The first register after every one ``fn`` uses, or None when none is left: a rolled loop at nesting depth
    ``d`` counts in register ``free_register + d`` (``loop_register``), so nested rolled loops never share one."""
    used = 0
    for inst in fn.instructions():
        for name in _REGISTER_FIELDS:
            value = inst.properties.get(name)
            if isinstance(value, IntegerAttr):
                used = max(used, value.value.data)
        for ap in inst.aps.data:
            assert isinstance(ap, AccessPatternAttr)
            if ap.dyn_kind.data == "reg":
                used = max(used, ap.dyn_reg.data)
    return used + 1 if used + 1 < NUM_REGISTERS else None


def loop_register(base: int | None, depth: int) -> int | None:
    """The counter of a rolled loop at nesting ``depth`` (0: outermost): one register per level, siblings share."""
    if base is None or base + depth >= NUM_REGISTERS:
        return None
    return base + depth


def control(opname: str, **fields: int | str) -> bir.BirInst:
    """A control instruction (engine assigned later, id renumbered later)."""
    props: dict[str, Attribute] = {
        "roles": ArrayAttr([]), "aps": ArrayAttr([]), "refs": ArrayAttr([]),
        "id": IntegerAttr(0, i64), "engine": StringAttr("unassigned"),
    }  # fmt: skip
    for k, v in fields.items():
        props[k] = StringAttr(v) if isinstance(v, str) else IntegerAttr(v, i64)
    return bir.INSTRUCTION_OPS[opname].create(properties=props)


def roll_operands(op: Operation, depth: int, first: int, iv_reg: int) -> bir.BirInst:
    """The body instruction, changed in place: the loop's index replaced by the run-time term ``c·r_iv`` (``r_iv``
    counts from 0 at value ``first``); its name-level edges dropped (dependency-analysis recomputes them)."""
    assert isinstance(op, bir.BirInst)
    new = op
    aps = []
    for ap in op.aps.data:
        assert isinstance(ap, AccessPatternAttr)
        c = _coeff(ap, depth)
        if c == 0:
            aps.append(ap if len(ap.ivs.data) <= depth else ap.moved(ap.offset.data, ap.iv_coeffs[:depth]))
        else:
            aps.append(AccessPatternAttr(ap.offset.data + c * first, ap.pairs, ap.iv_coeffs[:depth], ap.view.data,
                                         ("reg", "", iv_reg, c)))  # fmt: skip
    new.properties["aps"] = ArrayAttr(aps)
    new.properties.pop("deps", None)
    return new


def loop_control(values: range, iv_reg: int) -> tuple[bir.BirInst, bir.BirInst]:
    """The instructions before and after the rolled body of the values ``values`` (counter from 0 by step)."""
    step, bound = values.step, len(values) * values.step
    return (control("counted_loop_begin", iv_reg=iv_reg, bound=bound),
            control("counted_loop_end", iv_reg=iv_reg, step=step, bound=bound))  # fmt: skip
