"""``bir-verify`` (the spec's birverifier): the invariants the ISA lowering relies on.

Flat (unrolled) functions with no carriers left; unique, increasing instruction ids; every engine assigned;
every used on-chip memloc placed; dependency edges pointing backwards; and every semaphore wait satisfiable by
instructions that come earlier in program order — which, with in-order engines, rules out deadlock.

Every instruction also keeps the NKI reference's documented rules (``nkic.target.rules``, the objects the nisa call
and the penguin verifier ask), read from what BIR carries: each operand's memloc (memory, dtype) and access pattern
(partitions, elements per partition), the instruction's fields, and the module's generation (``nkic.target``; IR
without one gets only the rules of every generation). Unrolled copies of one instruction are one question, asked
once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects import instructions as fields
from nkic.dialects.common import module_target
from nkic.dialects.traits import IsControl
from nkic.passes.insert_semaphores import ENGINE_SEM
from nkic.target.instructions import LOOP_PAIRS
from nkic.target.machine import TARGET_ALIASES, get_target
from nkic.target.rules import RULES, Call, Operand, problems
from nkic.target.rules import message as rule_message

_LOOP_DEPTH = {**{b: 1 for b in LOOP_PAIRS}, **{e: -1 for e in LOOP_PAIRS.values()}}


@functools.cache
def _unlowered(cls: type) -> bool:
    """An op class the backend must not see (per class: an ABC isinstance check per op is slow)."""
    return issubclass(cls, bir.LoopOp | bir.NkiKlirKernelOp | bir.NkiKernelOp | bir.BirKernelOp)


def rule_call(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], gen: int | None) -> Call:
    """This instruction as the documented rules see it: the same ``Call`` the penguin verifier builds."""
    operands = {}
    for role, ref, ap in zip(inst.role_names, inst.ref_names, inst.aps.data):
        loc = locs[ref]
        dtype = ap.operand_dtype(loc.dtype.data)
        operands[role] = Operand(loc.memory.data, dtype, (ap.shape[0], fields.free_elements(ap.shape)),
                                 indirect=ap.dyn[0] == "indirect")  # fmt: skip
    return Call(inst.OPNAME, operands, fields.field_values(inst), gen)


def _check_rules(fn: bir.FunctionOp, locs: dict[str, bir.MemLocOp], gen: int | None) -> None:
    """The first documented rule an instruction breaks, as the pass's failure naming the instruction."""
    asked: set[tuple] = set()
    for inst in fn.instructions():
        if inst.OPNAME not in RULES:
            continue
        call = rule_call(inst, locs, gen)
        key = (call.instr, tuple(call.operands.items()), tuple(sorted(call.fields.items(), key=lambda kv: kv[0])))
        try:
            if key in asked:
                continue
            asked.add(key)
        except TypeError:  # an unhashable field value (a pattern list): ask every time
            pass
        broken = problems(call)
        if broken:
            raise PassFailedException(f"@{fn.sym_name.data} instruction {inst.inst_id} ({inst.OPNAME}): "
                                      f"{rule_message(call, broken[0])}")  # fmt: skip


def verify_function(fn: bir.FunctionOp, gen: int | None = None) -> None:
    name = fn.sym_name.data
    for op in fn.body.walk():
        if _unlowered(type(op)):
            raise PassFailedException(f"@{name}: '{op.name}' must be lowered before the backend")
    locs = fn.memlocs()
    # the memlocs an instruction may name without more checks (placed, or off chip); any other goes to the check
    ok_refs = {n for n, m in locs.items() if m.mem not in ("sbuf", "psum") or m.addr is not None}
    signals: dict[int, int] = {}
    last_id = barrier = -1
    depth = 0
    for inst in fn.instructions():
        props = inst.properties  # read directly: the irdl accessors cost more than the checks
        i = props["id"].value.data  # type: ignore[attr-defined]
        where = f"@{name} instruction {i} ({inst.OPNAME})"
        if i <= last_id:
            raise PassFailedException(f"{where}: ids must increase in program order")
        last_id = i
        if inst.has_trait(IsControl):  # a barrier: semaphores restart from zero, no edge crosses it
            signals, barrier = {}, i
            depth += _LOOP_DEPTH.get(inst.OPNAME, 0)
            if depth < 0:
                raise PassFailedException(f"{where}: {inst.OPNAME} without a loop opening it")
        if props["engine"].data not in ENGINE_SEM:  # type: ignore[attr-defined]
            raise PassFailedException(f"{where}: no engine assigned")
        for r in inst.ref_names:
            if r not in ok_refs and locs[r].mem in ("sbuf", "psum") and locs[r].addr is None:
                raise PassFailedException(f"{where}: memloc '{r}' has no address")
        deps = inst.dep_ids
        for dep in deps if deps and (max(deps) >= i or min(deps) <= barrier) else ():  # the loop finds which
            if dep >= i:
                raise PassFailedException(f"{where}: depends on a later instruction {dep}")
            if dep <= barrier:
                raise PassFailedException(f"{where}: depends on instruction {dep}, across the barrier {barrier}")
        waits = props.get("waits")
        if waits is not None:
            vals = [int(v) for v in waits.get_values()]  # type: ignore[attr-defined]
            for sem, value in zip(vals[::2], vals[1::2]):
                if signals.get(sem, 0) < value:
                    raise PassFailedException(
                        f"{where}: waits for semaphore {sem} >= {value}, but only {signals.get(sem, 0)} earlier "
                        "instructions signal it (the schedule would deadlock)"
                    )
        signal = props.get("signal")
        if signal is not None:
            s = signal.value.data  # type: ignore[attr-defined]
            signals[s] = signals.get(s, 0) + 1
    if depth:
        raise PassFailedException(f"@{name}: {depth} loop_begin without a loop_end")
    _check_rules(fn, locs, gen)


@dataclass(frozen=True)
class BirVerifyPass(ModulePass):
    name = "bir-verify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target = module_target(op)
        gen = get_target(target).nc_version if target in TARGET_ALIASES else None
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            verify_function(fn, gen)
