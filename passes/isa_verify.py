"""``isa-verify``: whole-program checks on the ISA streams that single-op verifiers cannot make.

The semaphore protocol is played out abstractly (no timing): an engine may advance while its next instruction's
wait is met; DMA completions are credited to their queue semaphores in issue order. If no engine can advance
before every stream is done, the schedule would deadlock on hardware, and the pass reports who waits for what.

Control instructions (registers, runtime loops) are barriers that reset the semaphores: every stream of a core must
hold the same control instructions in the same order, with balanced LOOP_BEGIN/LOOP_END, and the protocol is
played stretch by stretch between them (a loop body's stretch is then the same in every iteration).

When the module names its generation (``nkic.target``), every instruction's engine must be one its declaration
allows on that generation (the ISA ops'
own verifiers, which know no generation, accept an engine any generation allows): e.g. ``isa_act.tensor_copy`` is
refused for gen2, where "tensor_copy is not supported on the Scalar Engine".

Every instruction also keeps the NKI reference's documented rules (``nkic.target.rules``, the objects the nisa call,
the penguin verifier and bir-verify ask) where the ISA carries what they read: an opcode that exactly one nkic
instruction lowers to is that instruction, its slots are the instruction's roles (``Role.isa_slot``), each operand's
location gives its memory and dtype and its pattern its (partitions, elements per partition), and its immediates
are the instruction's fields of the same names. Unrolled copies of one instruction are one question, asked once.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects.isa import CoreOp, core_streams
from nkic.passes.targeting import declared_target
from nkic.target.instructions import INSTRUCTIONS, LOOP_OPCODE_PAIRS
from nkic.target.rules import RULES, Call, Operand, problems
from nkic.target.rules import message as rule_message

_LOOP_DEPTH = {**{b: 1 for b in LOOP_OPCODE_PAIRS}, **{e: -1 for e in LOOP_OPCODE_PAIRS.values()}}


def check_core(core: object, nc_version: int | None = None) -> None:
    name = core.sym_name.data  # type: ignore[attr-defined]
    segments: dict[str, list[list]] = {}
    controls: dict[str, list[tuple[int, str]]] = {}
    for engine, stream in core_streams(core).items():  # type: ignore[arg-type]
        if nc_version is not None:
            _check_engines(name, engine, stream, nc_version)
        _check_rules(name, stream, nc_version)
        segments[engine], controls[engine] = _split(list(stream))
        _check_nesting(name, engine, controls[engine])
    first = next(iter(controls.values()), [])
    for engine, ctl in controls.items():
        if ctl != first:
            raise PassFailedException(f"@{name}: stream {engine} has control instructions {ctl}, other streams "
                                      f"{first}; every engine must reach the same barriers")  # fmt: skip
    for k in range(len(first) + 1):
        _check_segment(name, {e: segs[k] for e, segs in segments.items()})


def _check_engines(core: str, engine: str, stream: object, nc_version: int) -> None:
    """Every instruction of ``engine``'s stream may run there on generation ``nc_version``."""
    for inst in stream:  # type: ignore[attr-defined]
        problem = inst.engine_problem(nc_version)
        if problem is not None:
            raise PassFailedException(f"@{core}: instruction {inst.inst_id} ({inst.MNEMONIC}) cannot run on {engine} "
                                      f"on NeuronCore-v{nc_version}: {problem}")  # fmt: skip


def _sole_instruction(mnemonic: str) -> str | None:
    """The nkic instruction an opcode stands for, when exactly one lowers to it and it has documented rules. Not a
    DMA: a DMA's ISA pattern is its descriptors' (no partition axis), and its slots hold the index tensors."""
    if mnemonic not in _SOLE:
        named = [n for n, s in INSTRUCTIONS.items() if s.opcode == mnemonic]
        sole = len(named) == 1 and named[0] in RULES and not INSTRUCTIONS[named[0]].is_dma
        _SOLE[mnemonic] = named[0] if sole else None
    return _SOLE[mnemonic]


_SOLE: dict[str, str | None] = {}


def isa_rule_call(inst: object, nc_version: int | None) -> Call | None:
    """The ISA instruction as the documented rules see it (None: no single nkic instruction it stands for)."""
    instr = _sole_instruction(inst.MNEMONIC)  # type: ignore[attr-defined]
    if instr is None:
        return None
    spec, operands = INSTRUCTIONS[instr], {}
    for role in spec.roles:
        loc = inst.loc(role.isa_slot)  # type: ignore[attr-defined]
        ap = inst.ap(role.isa_slot)  # type: ignore[attr-defined]
        if loc is not None and ap is not None:
            operands[role.name] = Operand(loc.mem, loc.dt, inst.dims(role.isa_slot), loc.start,  # type: ignore[attr-defined]
                                          ap.dyn[0] == "indirect")  # fmt: skip
    values = {f.name: inst.field(f.name) for f in spec.fields}  # type: ignore[attr-defined]
    if any(f.kind == "engine" for f in spec.fields):  # the engine the instruction runs on is its stream's
        values["engine"] = inst.ENGINE  # type: ignore[attr-defined]
    return Call(instr, operands, {k: v for k, v in values.items() if v is not None}, nc_version)


def _check_rules(core: str, stream: object, nc_version: int | None) -> None:
    asked: set[tuple] = set()
    for inst in stream:  # type: ignore[attr-defined]
        call = isa_rule_call(inst, nc_version)
        if call is None:
            continue
        key = (call.instr, tuple(call.operands.items()), tuple(sorted(call.fields.items())))
        if key in asked:
            continue
        asked.add(key)
        broken = problems(call)
        if broken:
            raise PassFailedException(f"@{core}: instruction {inst.inst_id} ({inst.MNEMONIC}): "
                                      f"{rule_message(call, broken[0])}")  # fmt: skip


def _split(insts: list) -> tuple[list[list], list[tuple[int, str]]]:
    """The stretches between control instructions, and those instructions as (id, mnemonic)."""
    segments: list[list] = [[]]
    controls: list[tuple[int, str]] = []
    for inst in insts:
        if "control" in inst.SPEC.traits:
            controls.append((inst.inst_id, inst.MNEMONIC))
            segments.append([])
        else:
            segments[-1].append(inst)
    return segments, controls


def _check_nesting(core: str, engine: str, controls: list[tuple[int, str]]) -> None:
    depth = 0
    for inst_id, mnemonic in controls:
        depth += _LOOP_DEPTH.get(mnemonic, 0)
        if depth < 0:
            raise PassFailedException(f"@{core}: {engine} LOOP_END (id {inst_id}) has no LOOP_BEGIN")
    if depth:
        raise PassFailedException(f"@{core}: {engine} has {depth} LOOP_BEGIN without a LOOP_END")


def _check_segment(core: str, streams: dict[str, list]) -> None:
    pos = dict.fromkeys(streams, 0)
    sems: dict[int, int] = {}
    progressed = True
    while progressed:
        progressed = False
        for engine, insts in streams.items():
            while pos[engine] < len(insts):
                inst = insts[pos[engine]]
                w = inst.wait_sem
                if w is not None and sems.get(w.value.data, 0) < inst.wait_value.value.data:  # type: ignore[union-attr]
                    break
                if inst.signal_sem is not None:
                    s = inst.signal_sem.value.data
                    sems[s] = sems.get(s, 0) + 1
                pos[engine] += 1
                progressed = True
    stuck = [
        f"{e}: instruction {insts[pos[e]].inst_id} waits for semaphore {insts[pos[e]].wait_sem.value.data} >= "  # type: ignore[union-attr]
        f"{insts[pos[e]].wait_value.value.data} (it reaches {sems.get(insts[pos[e]].wait_sem.value.data, 0)})"  # type: ignore[union-attr]
        for e, insts in streams.items()
        if pos[e] < len(insts)
    ]
    if stuck:
        raise PassFailedException(f"@{core}: the semaphore schedule deadlocks: " + "; ".join(stuck))


@dataclass(frozen=True)
class IsaVerifyPass(ModulePass):
    name = "isa-verify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # engine legality for the module's generation; a module that names none is checked for any generation
        target = declared_target(op)
        nc_version = target.nc_version if target is not None else None
        cores = [c for c in op.ops if isinstance(c, CoreOp)]
        if not cores:
            raise PassFailedException("isa-verify expects isa.core ops (run bir-to-isa first)")
        for i, core in enumerate(cores):
            if core.sym_name.data != f"sg{i:02d}":  # the NEFF's subgraph folders, in order
                raise PassFailedException(f"isa.core {i} must be named @sg{i:02d}, not @{core.sym_name.data}")
            check_core(core, nc_version)
