"""How a BIR instruction maps onto its ISA record, as its declaration in ``nkic.target.instructions`` says.

``isa_fields`` gives the ISA immediates and flags of a BIR instruction (used by ``bir-to-isa``); ``cost_record``
builds the ``Instr`` record the shared cost model (``nkic.target.costs``) prices, from the memlocs' memories and
dtypes only, so that engine assignment and scheduling can ask what an instruction would cost on an engine before
it has physical operands.
"""

from __future__ import annotations

import functools
from typing import Any

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr
from xdsl.ir import Attribute

from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr, value_of
from nkic.target.instructions import InstrSpec
from nkic.target.isa import MAX_FREE_DIMS, Instr, Operand, encode_fields
from nkic.target.vocab import HBM_MEMORIES


def _int(inst: bir.BirInst, name: str) -> int:
    v = inst.properties.get(name)
    return int(v.value.data) if isinstance(v, IntegerAttr) else 0


def _python(attr: Attribute) -> Any:
    if isinstance(attr, DenseArrayBase):
        return tuple(int(a) for a in attr.get_values())
    if isinstance(attr, AccessPatternAttr):
        return attr
    return value_of(attr)


def isa_fields(inst: bir.BirInst) -> dict[str, Any]:
    """The ISA immediates and flags of a BIR instruction, as its declaration maps them."""
    spec: InstrSpec = inst.SPEC
    values = {f.name: _python(inst.properties[f.name]) for f in spec.fields if f.name in inst.properties}
    fields = {f.isa_name: values[f.name] for f in spec.fields if f.isa_name is not None and f.name in values}
    fields.update(spec.constants)
    if spec.derive is not None:
        fields.update(spec.derive(values))
    if spec.is_dma:
        fields["queue"] = _int(inst, "queue")
    for f in spec.fields:
        if f.kind == "pattern":
            fields.pop(f.name, None)
            fields["offset"] = values[f.name].offset_value
    return fields


def pattern_operands(inst: bir.BirInst) -> dict[str, Operand]:
    """The iota/affine_select ``pattern`` slot: the partition pair carries channel_multiplier."""
    out = {}
    for f in inst.SPEC.fields:
        if f.kind == "pattern":
            pattern = inst.properties[f.name]
            assert isinstance(pattern, AccessPatternAttr)
            nparts = inst.ap("dst").shape[0]  # type: ignore[union-attr]
            out["pattern"] = Operand("none", "int32", ((_int(inst, "channel_multiplier"), nparts), *pattern.pairs))
    return out


def _fit(pairs: list[tuple[int, int]], keep: int) -> tuple[tuple[int, int], ...]:
    """At most ``keep`` leading pairs plus MAX_FREE_DIMS free ones: outer free dims fold into one (for costing)."""
    head, free = pairs[:keep], pairs[keep:]
    while len(free) > MAX_FREE_DIMS:
        (s0, n0), (_, n1) = free[0], free[1]
        free = [(s0, n0 * n1), *free[2:]]
    return (*head, *free)


def _cost_operand(loc: bir.MemLocOp, ap: AccessPatternAttr) -> Operand:
    return _cost_operand_of(loc.mem, loc.dtype.data, ap)


@functools.lru_cache(maxsize=1 << 14)
def _cost_operand_of(mem: str, loc_dtype: str, ap: AccessPatternAttr) -> Operand:
    """Shared (an ``Operand`` is immutable): several passes price every instruction, mostly on a few tile shapes."""
    dtype = ap.operand_dtype(loc_dtype)
    if mem in HBM_MEMORIES:
        return Operand("hbm", dtype, _fit(list(ap.pairs), 1))
    (_, nparts), *free = ap.pairs
    return Operand(mem, dtype, _fit([(1, nparts), *free], 1))


# Properties the cost record never reads: they change from pass to pass (renumbering, edges, semaphores) while the
# record stays the same. The engine is part of the memo key.
_NOT_COSTED = frozenset(("id", "deps", "waits", "signal", "engine"))


def cost_record(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], engine: str | None = None) -> Instr:
    """The ISA record of ``inst`` on ``engine`` (default: its own) with placeholder addresses.

    Memoised on the instruction, per engine: assign-engines, pre-schedule, schedule-instructions and
    dma-optimization each price every instruction. A memo entry is used only while every property the record can
    read is the very same (immutable) attribute object and every operand's memory and dtype are unchanged."""
    engine = engine or inst.engine.data
    key = (tuple((k, v) for k, v in inst.properties.items() if k not in _NOT_COSTED),
           tuple((m.memory, m.dtype) for m in (locs[r] for r in inst.ref_names)))  # fmt: skip
    memo: dict[str, tuple[Any, Instr]] = inst.__dict__.setdefault("_nkic_cost_memo", {})
    hit = memo.get(engine)
    if hit is not None and _same(hit[0], key):
        return hit[1]
    record = _cost_record(inst, locs, engine)
    memo[engine] = (key, record)
    return record


def _same(a: tuple[Any, Any], b: tuple[Any, Any]) -> bool:
    """Same property names with the very same attributes, equal memlocs' (memory, dtype) attribute pairs."""
    (pa, la), (pb, lb) = a, b
    return len(pa) == len(pb) and all(x[1] is y[1] and x[0] == y[0] for x, y in zip(pa, pb)) and la == lb


def _cost_record(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], engine: str) -> Instr:
    spec: InstrSpec = inst.SPEC
    operands: dict[str, Operand] = {}
    for role, ref, ap in zip(inst.role_names, inst.ref_names, inst.aps.data):
        operands[spec.role(role).isa_slot] = _cost_operand(locs[ref], ap)
    operands.update(pattern_operands(inst))
    fields = isa_fields(inst)
    imms, flags = encode_fields(spec.isa, fields.get, lambda slot: slot in operands)
    slots = spec.isa.slots
    return Instr(spec.opcode, engine, tuple(operands.get(s) for s in slots), imms, flags)
