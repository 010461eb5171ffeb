"""``bir-to-isa``: lower scheduled, allocated BIR to the per-engine ISA dialects.

Each host BIR function (one per SPMD program) becomes an ``isa.core @sgNN`` holding the HBM variables of the
NEFF's ``def.json`` and one ``isa.stream`` per engine, in program order. Every BIR instruction becomes the ISA op of
its engine with physical operands (partition range + byte address on chip, variable + byte offset in HBM); the
first semaphore wait rides on the instruction, further waits become ``sem_wait`` ops in front of it. A control
instruction (``IsControl``: registers, runtime loops) goes into every engine's stream: the engines execute it
together, at a barrier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr
from nkic.dialects.isa import CoreOp, StreamOp, VarOp, isa_op
from nkic.dialects.isa.base import IsaLocAttr, static_ap
from nkic.dialects.traits import IsControl
from nkic.passes.lowering import isa_fields, pattern_operands
from nkic.passes.physical import ON_CHIP, place
from nkic.target.instructions import InstrSpec
from nkic.target.isa import Operand
from nkic.target.machine import ENGINE_NAMES
from nkic.target.vocab import HBM_MEMORIES


class _VarTable:
    """HBM variables of the NEFF: shared tensors keep one id across cores, per-program scratch gets its own."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def key(self, core: str, loc: bir.MemLocOp) -> str:
        shared = loc.kind.data != "internal" or loc.mem == "shared_hbm"
        return loc.sym_name.data if shared else f"{core}.{loc.sym_name.data}"

    def id_of(self, key: str) -> int:
        return self.ids.setdefault(key, len(self.ids))


def _operand(inst: bir.BirInst, role: str, locs: dict[str, bir.MemLocOp], var_ids: dict[str, int]) -> Operand:
    name, ap = inst.ref(role), inst.ap(role)
    assert name is not None and ap is not None
    p = place(locs[name], ap, inst, role)
    dyn = _dynamic(inst, ap)
    if p.memory == "hbm":
        return Operand("hbm", p.dtype, p.free_pairs, address=p.address, var_id=var_ids[name], **dyn)
    return Operand(p.memory, p.dtype, ((1, p.num_partitions), *p.free_pairs), p.start_partition, p.address, **dyn)


def _dynamic(inst: bir.BirInst, ap: AccessPatternAttr) -> dict[str, Any]:
    """The ISA form of a dynamic term: its register, or the slot number of the role holding its index."""
    kind, role, reg, scale = ap.dyn
    if not kind:
        return {}
    spec: InstrSpec = inst.SPEC
    ref = reg if kind == "reg" else spec.isa.slots.index(spec.role(role).isa_slot)
    return {"dyn": kind, "dyn_ref": ref, "dyn_scale": scale}


class _Memo:
    """What bir-to-isa computes once per distinct value (within one function): the ISA location and pattern of each
    (memloc placement facts, static pattern), the ISA field attributes of each (op class, BIR field attributes; the
    function's BIR ops, and so the keyed attributes, stay alive until the pass ends), the ISA class of each (engine,
    opcode)."""

    def __init__(self) -> None:
        self.placed: dict[tuple[int, object], tuple[Any, AccessPatternAttr]] = {}
        self.fields: dict[tuple[object, ...], dict[str, Any]] = {}
        self.memloc: dict[str, int] = {}  # memloc name -> the number of its placement facts (``memloc_key``)
        self.facts: dict[tuple[object, ...], int] = {}
        self.classes: dict[tuple[str, str], Any] = {}

    def isa_class(self, engine: str, opcode: str) -> Any:
        """``isa_op(engine, opcode)``, looked up once per pair."""
        cls = self.classes.get((engine, opcode))
        if cls is None:
            cls = self.classes[(engine, opcode)] = isa_op(engine, opcode)
        return cls

    def memloc_key(self, name: str, loc: bir.MemLocOp) -> int:
        """What ``place`` reads of a memloc, its memory, dtype, shape and address on chip, its name (variable) in
        HBM, numbered (memlocs with the same facts get the same number, so placement keys hash one int for them)."""
        mem = loc.mem
        facts = (name,) if mem not in ON_CHIP else (mem, loc.dtype.data, loc.dims, loc.addr)
        key = self.memloc[name] = self.facts.setdefault(facts, len(self.facts))
        return key


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_SLOTS: dict[type, dict[str, str]] = {}


def _slots(inst: bir.BirInst) -> dict[str, str]:
    """Role name -> ISA slot of an instruction class."""
    slots = _SLOTS.get(type(inst))
    if slots is None:
        slots = _SLOTS[type(inst)] = {r.name: r.isa_slot for r in inst.SPEC.roles}
    return slots


def _field_names(inst: bir.BirInst) -> tuple[str, ...]:
    """The BIR properties ``isa_fields`` reads (per op class)."""
    names = _FIELD_NAMES.get(type(inst))
    if names is None:
        names = _FIELD_NAMES[type(inst)] = (*(f.name for f in inst.SPEC.fields), "queue")
    return names


def _placed(inst: bir.BirInst, role: str, locs: dict[str, bir.MemLocOp],
            var_ids: dict[str, int]) -> tuple[Any, AccessPatternAttr]:  # fmt: skip
    """The ISA (location, pattern) of an operand with a static pattern: class-independent, so ``lower_instruction``
    memoises it on what ``place`` reads, the pattern's values and the memloc's (``_Memo.memloc_key``): unrolled code
    has a memloc and a pattern attribute per tile but few distinct placements. (A first placement raises
    ``place``'s diagnostics.)"""
    op = _operand(inst, role, locs, var_ids)
    return IsaLocAttr.of(op), static_ap(op.pattern)


_HAS_PATTERN: dict[type, bool] = {}


def _has_pattern(inst: bir.BirInst) -> bool:
    """Whether the instruction class has a ``pattern`` field (``pattern_operands``)."""
    has = _HAS_PATTERN.get(type(inst))
    if has is None:
        has = _HAS_PATTERN[type(inst)] = any(f.kind == "pattern" for f in inst.SPEC.fields)
    return has


def _fields(inst: bir.BirInst, cls: Any, memo: _Memo) -> dict[str, Any]:
    """The ISA field attributes of ``inst`` on op class ``cls``: a function of the BIR fields ``isa_fields`` reads."""
    props = inst.properties
    key = (cls, type(inst), *map(id, map(props.get, _field_names(inst))))
    hit = memo.fields.get(key)
    if hit is None:
        hit = memo.fields[key] = cls.field_attrs(isa_fields(inst))
    return hit


def lower_instruction(
    inst: bir.BirInst,
    locs: dict[str, bir.MemLocOp],
    var_ids: dict[str, int],
    engine: str | None = None,
    memo: _Memo | None = None,
) -> list[Operation]:
    """The ISA ops of ``inst`` on its engine (or on ``engine``, for a control instruction's copies); ``memo``
    shares the work between the instructions of one function."""
    memo = memo or _Memo()
    spec: InstrSpec = inst.SPEC
    props = inst.properties  # read directly: the property descriptors are a generic lookup per access
    engine = engine or props["engine"].data  # type: ignore[attr-defined]
    cls = memo.isa_class(engine, spec.opcode)
    if cls is None:
        where = f", {inst.loc.data}" if inst.loc else ""
        raise PassFailedException(
            f"instruction {inst.inst_id} ({inst.name}{where}): engine '{engine}' has no {spec.opcode} instruction"
        )
    placed: dict[str, tuple[Any, AccessPatternAttr]] = {}
    pending: dict[str, Operand] = {}  # a dynamic pattern names its index operand by slot number: per op class
    slots = _slots(inst)
    for role, ref, ap in zip(props["roles"].data, props["refs"].data, props["aps"].data):  # type: ignore[attr-defined]
        if ap.data[4][0]:  # a dynamic term
            pending[slots[role.data]] = _operand(inst, role.data, locs, var_ids)
            continue
        name = ref.data
        memloc = memo.memloc.get(name)
        if memloc is None:
            memloc = memo.memloc_key(name, locs[name])
        hit = memo.placed.get((memloc, ap.data))
        if hit is None:
            hit = memo.placed[(memloc, ap.data)] = _placed(inst, role.data, locs, var_ids)
        placed[slots[role.data]] = hit
    if _has_pattern(inst):
        pending.update(pattern_operands(inst))
    if pending:
        placed.update({slot: (IsaLocAttr.of(op), cls._ap_of(op)) for slot, op in pending.items()})
    fields = _fields(inst, cls, memo)
    inst_id = props["id"].value.data  # type: ignore[attr-defined]
    waits_attr, signal_attr = props.get("waits"), props.get("signal")
    waits = () if waits_attr is None else waits_attr.get_values()  # type: ignore[attr-defined]  # i64: Python ints
    pairs = list(zip(waits[::2], waits[1::2]))
    ops: list[Operation] = []
    for sem, value in pairs[1:]:
        ops.append(memo.isa_class(engine, "SEM_WAIT").make(inst_id, {}, wait_sem=sem, wait_value=value))  # type: ignore[union-attr]
    first = pairs[0] if pairs else (None, None)
    signal = signal_attr.value.data if signal_attr is not None else None  # type: ignore[attr-defined]
    ops.append(cls.build(inst_id, placed, fields, wait_sem=first[0], wait_value=first[1], signal_sem=signal))
    return ops


def lower_function(fn: bir.FunctionOp, core: str, table: _VarTable) -> Operation:
    locs = fn.memlocs()
    var_ids: dict[str, int] = {}
    variables: list[Operation] = []
    kinds = {"input": "input", "output": "output", "internal": "tmp-buf", "constant": "file"}
    for name, loc in locs.items():
        if loc.mem in HBM_MEMORIES:
            key = table.key(core, loc)
            var_ids[name] = table.id_of(key)
            variables.append(VarOp(key, kinds[loc.kind.data], loc.dims, loc.dtype.data, var_ids[name], loc.data))
    streams = {e: StreamOp(e) for e in ENGINE_NAMES}
    ops: dict[str, list[Operation]] = {e: [] for e in ENGINE_NAMES}  # added to the streams at the end
    memo = _Memo()
    control: dict[type, bool] = {}  # per op class: has_trait is a generic lookup
    for inst in fn.instructions():
        is_control = control.get(type(inst))
        if is_control is None:
            is_control = control[type(inst)] = inst.has_trait(IsControl)
        if is_control:
            for e in ENGINE_NAMES:
                ops[e].extend(lower_instruction(inst, locs, var_ids, e, memo))
        else:
            ops[inst.engine.data].extend(lower_instruction(inst, locs, var_ids, memo=memo))
    for e, stream in streams.items():
        stream.body.block.add_ops(ops[e])
    result = CoreOp(core)
    result.body.block.add_ops([*variables, *(s for s in streams.values() if s.body.block.ops)])
    return result


@dataclass(frozen=True)
class BirToIsaPass(ModulePass):
    name = "bir-to-isa"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fns = [f for f in op.ops if isinstance(f, bir.FunctionOp)]
        table = _VarTable()
        cores = [lower_function(fn, f"sg{i:02d}", table) for i, fn in enumerate(fns)]
        for fn in fns:
            fn.detach()
            fn.erase()
        op.body.block.add_ops(cores)
