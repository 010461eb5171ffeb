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
from nkic.dialects.traits import IsControl
from nkic.passes.lowering import isa_fields, pattern_operands
from nkic.passes.physical import place
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


def lower_instruction(
    inst: bir.BirInst, locs: dict[str, bir.MemLocOp], var_ids: dict[str, int], engine: str | None = None
) -> list[Operation]:
    """The ISA ops of ``inst`` on its engine (or on ``engine``, for a control instruction's copies)."""
    from nkic.dialects.isa import isa_op

    spec: InstrSpec = inst.SPEC
    engine = engine or inst.engine.data
    cls = isa_op(engine, spec.opcode)
    if cls is None:
        where = f", {inst.loc.data}" if inst.loc else ""
        raise PassFailedException(
            f"instruction {inst.inst_id} ({inst.name}{where}): engine '{engine}' has no {spec.opcode} instruction"
        )
    operands = {spec.role(r).isa_slot: _operand(inst, r, locs, var_ids) for r in inst.role_names}
    operands.update(pattern_operands(inst))
    fields = isa_fields(inst)
    waits = [] if inst.waits is None else [int(v) for v in inst.waits.get_values()]
    pairs = list(zip(waits[::2], waits[1::2]))
    ops: list[Operation] = []
    for sem, value in pairs[1:]:
        ops.append(isa_op(engine, "SEM_WAIT").make(inst.inst_id, {}, wait_sem=sem, wait_value=value))  # type: ignore[union-attr]
    first = pairs[0] if pairs else (None, None)
    signal = inst.signal.value.data if inst.signal is not None else None
    ops.append(
        cls.make(inst.inst_id, operands, wait_sem=first[0], wait_value=first[1], signal_sem=signal, **fields)
    )
    return ops


def lower_function(fn: bir.FunctionOp, core: str, table: _VarTable) -> Operation:
    from nkic.dialects.isa import CoreOp, StreamOp, VarOp

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
    for inst in fn.instructions():
        if inst.has_trait(IsControl):
            for e, stream in streams.items():
                stream.body.block.add_ops(lower_instruction(inst, locs, var_ids, e))
        else:
            streams[inst.engine.data].body.block.add_ops(lower_instruction(inst, locs, var_ids))
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
