"""``bir-to-isa``: lower scheduled, allocated BIR to the per-engine ISA dialects.

Each host BIR function (one per SPMD program) becomes an ``isa.core @sgNN`` holding the HBM variables of the
NEFF's ``def.json`` and one ``isa.stream`` per engine, in program order. Every BIR instruction becomes the ISA op of
its engine with physical operands (partition range + byte address on chip, variable + byte offset in HBM); the
first semaphore wait rides on the instruction, further waits become ``sem_wait`` ops in front of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr, value_of
from nkic.passes.physical import place
from nkic.runtime.encoding import Operand

ENGINES = ("pe", "act", "dve", "pool", "sp")
HBM_SPACES = ("hbm", "shared_hbm", "private_hbm")


@dataclass(frozen=True)
class Lowering:
    """How one BIR op becomes an ISA op: format key, BIR role -> ISA slot, and which fields carry over."""

    format_key: str
    roles: dict[str, str]
    fields: tuple[str, ...] = ()
    extra: Callable[[bir.BirInst], dict[str, Any]] | None = None


def _same(*roles: str) -> dict[str, str]:
    return {r: r for r in roles}


LOWERINGS: dict[str, Lowering] = {
    "dma_copy": Lowering("dma_copy", _same("dst", "src"), extra=lambda i: {"queue": _int(i, "queue")}),
    "dma_transpose": Lowering(
        "dma_copy", _same("dst", "src"), extra=lambda i: {"queue": _int(i, "queue"), "transpose": True}
    ),
    "matmul": Lowering("matmul", _same("dst", "stationary", "moving"), ("accumulate",)),
    "transpose": Lowering("transpose", {"dst": "dst", "data": "src"}),
    "tensor_copy": Lowering("tensor_copy", _same("dst", "src")),
    "tensor_tensor": Lowering("tensor_tensor", {"dst": "dst", "data1": "in0", "data2": "in1"}, ("op",)),
    "tensor_scalar": Lowering(
        "tensor_scalar",
        {"dst": "dst", "data": "src", "operand0": "operand0", "operand1": "operand1"},
        ("op0", "operand0", "reverse0", "op1", "operand1", "reverse1"),
    ),
    "scalar_tensor_tensor": Lowering(
        "scalar_tensor_tensor",
        _same("dst", "data", "operand0", "operand1"),
        ("op0", "operand0", "op1", "reverse0", "reverse1"),
    ),
    "tensor_reduce": Lowering(
        "tensor_reduce",
        {"dst": "dst", "data": "src"},
        ("op", "negate"),
        extra=lambda i: {"num_reduced_dims": len(i.axis_list)},  # type: ignore[attr-defined]
    ),
    "tensor_scalar_reduce": Lowering(
        "tensor_scalar_reduce",
        {"dst": "dst", "data": "src", "operand0": "operand0", "reduce_res": "reduce_res"},
        ("op0", "operand0", "reduce_op", "reverse0"),
        extra=lambda i: {"negate": _flag(i, "reduce_res_negate")},
    ),
    "activation": Lowering(
        "activate",
        {"dst": "dst", "data": "src", "bias": "bias", "scale": "scale", "reduce_res": "reduce_res"},
        ("func", "scale", "bias", "reduce_cmd", "reduce_op"),
    ),
    "memset": Lowering("memset", _same("dst"), ("value",)),
    "iota": Lowering("iota", _same("dst"), extra=lambda i: {"offset": _pattern(i).offset.data}),
    "affine_select": Lowering(
        "affine_select",
        _same("dst", "on_true"),
        ("cmp_op", "on_false_value"),
        extra=lambda i: {"offset": _pattern(i).offset.data},
    ),
    "reciprocal": Lowering("reciprocal", {"dst": "dst", "data": "src"}),
}


def _int(inst: bir.BirInst, name: str) -> int:
    v = inst.properties.get(name)
    return int(v.value.data) if isinstance(v, IntegerAttr) else 0


def _flag(inst: bir.BirInst, name: str) -> bool:
    return bool(_int(inst, name))


def _pattern(inst: bir.BirInst) -> AccessPatternAttr:
    p = inst.properties["pattern"]
    assert isinstance(p, AccessPatternAttr)
    return p


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
    if p.memory == "hbm":
        return Operand("hbm", p.dtype, p.free_pairs, address=p.address, var_id=var_ids[name])
    return Operand(p.memory, p.dtype, ((1, p.num_partitions), *p.free_pairs), p.start_partition, p.address)


def _pattern_operand(inst: bir.BirInst) -> Operand:
    pat = _pattern(inst)
    nparts = inst.ap("dst").shape[0]  # type: ignore[union-attr]
    return Operand("none", "int32", ((_int(inst, "channel_multiplier"), nparts), *pat.pairs))


def lower_instruction(
    inst: bir.BirInst, locs: dict[str, bir.MemLocOp], var_ids: dict[str, int]
) -> list[Operation]:
    from nkic.dialects.isa import ISA_OPS

    low = LOWERINGS[inst.OPNAME]
    engine = inst.engine.data
    cls = ISA_OPS.get((engine, low.format_key))
    if cls is None:
        raise PassFailedException(f"instruction {inst.inst_id}: {engine} has no {low.format_key} instruction")
    operands = {slot: _operand(inst, role, locs, var_ids) for role, slot in low.roles.items() if inst.has(role)}
    if low.format_key in ("iota", "affine_select"):
        operands["pattern"] = _pattern_operand(inst)
    fields = {f: value_of(inst.properties[f]) for f in low.fields if f in inst.properties}
    if low.extra is not None:
        fields.update(low.extra(inst))
    waits = [] if inst.waits is None else [int(v) for v in inst.waits.get_values()]
    pairs = list(zip(waits[::2], waits[1::2]))
    ops: list[Operation] = []
    for sem, value in pairs[1:]:
        ops.append(ISA_OPS[(engine, "sem_wait")].make(inst.inst_id, {}, wait_sem=sem, wait_value=value))
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
    kinds = {"input": "input", "output": "output", "internal": "tmp-buf"}
    for name, loc in locs.items():
        if loc.mem in HBM_SPACES:
            key = table.key(core, loc)
            var_ids[name] = table.id_of(key)
            variables.append(VarOp(key, kinds[loc.kind.data], loc.dims, loc.dtype.data, var_ids[name]))
    streams = {e: StreamOp(e) for e in ENGINES}
    for inst in fn.instructions():
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
