"""How a BIR instruction maps onto its ISA record, as its declaration in ``nkic.target.instructions`` says.

``isa_fields`` gives the ISA immediates and flags of a BIR instruction (used by ``bir-to-isa``); ``cost_record``
builds the ``Instr`` record the shared cost model (``nkic.target.costs``) prices, from the memlocs' memories and
dtypes only, so that engine assignment and scheduling can ask what an instruction would cost on an engine before
it has physical operands.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr
from xdsl.ir import Attribute

from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr, value_of
from nkic.target.costs import dma_ns, instr_ns
from nkic.target.instructions import InstrSpec
from nkic.target.isa import MAX_FREE_DIMS, Instr, Operand, encode_fields
from nkic.target.machine import Target
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
_MEMO = "_nkic_cost_memo"


class _CostMemo:
    """One instruction's record on one engine, with what it was built from and the durations priced from it.

    ``getter`` reads the costed properties (``names``) back in one call, compared with ``values`` as a tuple: the
    same attribute objects compare equal without calling ``__eq__``; ``refs``/``locs``: the operands' memloc names
    and their (memory, dtype) attributes. ``ns``: durations of ``record`` per (target, DMA model or not), each with
    its target (so an id is never matched against another object's)."""

    __slots__ = ("getter", "values", "count", "refs", "locs", "record", "ns")

    def __init__(self, inst: bir.BirInst, locs: dict[str, bir.MemLocOp], record: Instr,
                 ns: dict[tuple[int, bool], tuple[Target, float]]) -> None:  # fmt: skip
        props = inst.properties
        names = tuple(k for k in props if k not in _NOT_COSTED)
        self.getter: Callable[[Any], Any] = operator.itemgetter(*names) if names else _no_props
        self.values = self.getter(props)
        self.count = len(names)
        self.refs = inst.ref_names
        self.locs = _loc_key(self.refs, locs)
        self.record = record
        self.ns = ns  # shared by the instructions sharing the record

    def holds(self, inst: bir.BirInst, locs: dict[str, bir.MemLocOp]) -> bool:
        """Whether the record still describes ``inst``: the same costed properties, equal attributes, and the same
        memories and dtypes of its operands."""
        props = inst.properties
        try:
            return (self.getter(props) == self.values and len(props) - len(_NOT_COSTED & props.keys()) == self.count
                    and _loc_key(self.refs, locs) == self.locs)  # fmt: skip
        except KeyError:  # a costed property was removed (or a memloc is gone: rebuilding raises as before)
            return False


def _no_props(_: Any) -> tuple[()]:
    return ()


def _loc_key(refs: list[str], locs: dict[str, bir.MemLocOp]) -> tuple[tuple[Attribute, Attribute], ...]:
    """The operands' memloc (memory, dtype) attributes: all the record reads of a memloc."""
    return tuple([(p["memory"], p["dtype"]) for p in [locs[r].properties for r in refs]])


def _cost_memo(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], engine: str) -> _CostMemo:
    """The memo entry of ``inst`` on ``engine``, rebuilt when it no longer ``holds``."""
    memo: dict[str, _CostMemo] | None = inst.__dict__.get(_MEMO)
    if memo is None:
        memo = inst.__dict__[_MEMO] = {}
    hit = memo.get(engine)
    if hit is not None and hit.holds(inst, locs):
        return hit
    entry = memo[engine] = _CostMemo(inst, locs, *_shared_record(inst, locs, engine))
    return entry


# What ``_cost_record`` reads -> (its record, the durations priced from it): instructions with the same op, tile
# patterns, field values and operand memories and dtypes share one (attention at 16K: ~23k instructions, a few
# hundred distinct records), so each is built and priced once.
_SHARED: dict[tuple[Any, ...], tuple[Instr, dict[tuple[int, bool], tuple[Target, float]]]] = {}


def _shared_record(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], engine: str
                   ) -> tuple[Instr, dict[tuple[int, bool], tuple[Target, float]]]:  # fmt: skip
    props = inst.properties
    # roles, patterns and memories as plain tuples and strings: hashed in C, where the attributes' generated
    # __hash__ is a Python call per attribute (the field values stay attributes: a few per instruction)
    key = (type(inst), engine, tuple([r.data for r in inst.roles.data]), tuple([a.data for a in inst.aps.data]),
           tuple([props.get(f.name) for f in inst.SPEC.fields]), props.get("queue"), props.get("channel_multiplier"),
           tuple([(p["memory"].data, p["dtype"].data)  # type: ignore[attr-defined]
                  for p in [locs[r].properties for r in inst.ref_names]]))  # fmt: skip
    try:
        hit = _SHARED.get(key)
    except TypeError:  # an unhashable attribute: built for this instruction alone
        return _cost_record(inst, locs, engine), {}
    if hit is None:
        if len(_SHARED) >= 1 << 14:
            _SHARED.clear()
        hit = _SHARED[key] = (_cost_record(inst, locs, engine), {})
    return hit


def cost_record(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], engine: str | None = None) -> Instr:
    """The ISA record of ``inst`` on ``engine`` (default: its own) with placeholder addresses.

    Memoised on the instruction, per engine: assign-engines, pre-schedule, schedule-instructions and
    dma-optimization each price every instruction. A memo entry is used only while every property the record can
    read is equal to (in practice: the very same immutable attribute object as) the one it was built from, and every
    operand's memory and dtype are unchanged."""
    return _cost_memo(inst, locs, engine or inst.engine.data).record


def cost_ns(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], target: Target, dma: bool,
            engine: str | None = None) -> float:  # fmt: skip
    """``dma_ns`` (``dma``) or ``instr_ns`` of ``cost_record(inst, locs, engine)`` on ``target``, memoised with the
    record (a duration is a function of the record and the target): every scheduling pass prices every
    instruction, several of them more than once."""
    entry = _cost_memo(inst, locs, engine or inst.engine.data)
    hit = entry.ns.get((id(target), dma))
    if hit is not None and hit[0] is target:
        return hit[1]
    ns = dma_ns(entry.record, target) if dma else instr_ns(entry.record, target)
    entry.ns[(id(target), dma)] = (target, ns)
    return ns


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
