"""Every instruction and opcode is complete: engines, lowering, executor, cost, generation, round-trip samples.

``problems()`` walks the declarations in ``nkic.target`` and lists what is missing; the test asserts the list is
empty, and the last tests delete one registration at a time to show a missing entry is reported by name.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.parser import Parser

from nkic.dialects import bir, penguin
from nkic.dialects.common import NkicAttrs
from nkic.dialects.isa import ISA_OPS, isa_op
from nkic.dialects.instructions import INSTRUCTION_FIELDS
from nkic.passes.penguin_to_bir import PenguinToBirPass
from nkic.passes.translate_nki_ast_to_bir import TranslateNkiAstToBirPass
from nkic.runtime import semantics
from nkic.runtime.simulator import EXECUTORS
from nkic.target.costs import COSTS
from nkic.target.instructions import INSTRUCTIONS, InstrSpec, first_generation
from nkic.target.isa import OPCODES, OpSpec
from nkic.target.vocab import ACT_FUNCS, ALU_OPS

ROOT = Path(__file__).resolve().parents[2]
LIT = ROOT / "tests" / "filecheck" / "dialects"


def _lowering_problems(spec: InstrSpec) -> list[str]:
    isa = spec.isa
    out = []
    names = {i.prop for i in isa.imms} | set(isa.flags)
    for f in spec.fields:
        if f.isa_name is not None and f.kind != "pattern" and f.isa_name not in names:
            out.append(f"{spec.name}: field '{f.name}' lowers to '{f.isa_name}', which {isa.mnemonic} does not have")
    for k in spec.constants:
        if k not in names:
            out.append(f"{spec.name}: constant '{k}' is not a field of {isa.mnemonic}")
    for r in spec.roles:
        if r.scalar and r.isa_slot not in isa.scalar_slots:
            out.append(f"{spec.name}: scalar role '{r.name}' is not a scalar slot of {isa.mnemonic}")
        if r.write != (r.isa_slot in isa.writes):
            out.append(f"{spec.name}: role '{r.name}' and slot '{r.isa_slot}' disagree on being written")
    return out


def instruction_problems(spec: InstrSpec) -> list[str]:
    out = []
    if not spec.engines:
        out.append(f"{spec.name}: no engine")
    for e in spec.engines:
        if isa_op(e, spec.opcode) is None:
            out.append(f"{spec.name}: engine '{e}' has no {spec.opcode} op")
    if first_generation(spec.name) is None:
        out.append(f"{spec.name}: no generation has it")
    if spec.name not in INSTRUCTION_FIELDS or spec.name not in penguin.INSTRUCTION_OPS:
        out.append(f"{spec.name}: no penguin/bir op")
    return out + _lowering_problems(spec)


def opcode_problems(spec: OpSpec, isa_doc: str) -> list[str]:
    out = []
    if spec.mnemonic not in EXECUTORS:
        out.append(f"{spec.mnemonic}: no executor (runtime/exec_<family>.py @execute)")
    if spec.mnemonic not in COSTS:
        out.append(f"{spec.mnemonic}: no cost (target/costs.py @cost)")
    for e in spec.engines:
        if (e, spec.key) not in ISA_OPS:
            out.append(f"{spec.mnemonic}: no ISA op on {e}")
    row = re.search(rf"^\| 0x{spec.code:02X} \| {spec.mnemonic} \| ([^|]*) \| ([^|]*) \|", isa_doc, re.M)
    if row is None:
        out.append(f"{spec.mnemonic}: no row in runtime/ISA_FORMAT.md")
    else:
        engines = {e.strip().lower() for e in row.group(1).split(",")}
        if engines != {"all"} and engines != set(spec.engines):
            out.append(f"{spec.mnemonic}: ISA_FORMAT.md lists engines {sorted(engines)}, the spec {spec.engines}")
        slots = [s.strip().split("(")[0].rstrip("?") for s in row.group(2).split(",") if s.strip() not in ("–", "")]
        if tuple(slots) != spec.slots:
            out.append(f"{spec.mnemonic}: ISA_FORMAT.md lists slots {slots}, the spec {spec.slots}")
    return out


def sample_problems() -> list[str]:
    """Every instruction has a penguin and bir round-trip sample, every ISA op an ISA one (the lit tests)."""
    out = []
    penguin_text = (LIT / "penguin" / "ops.mlir").read_text()
    isa_text = (LIT / "isa" / "ops.mlir").read_text()
    out += [f"{n}: no sample in penguin/ops.mlir" for n in INSTRUCTIONS if f"penguin.{n} " not in penguin_text]
    out += [f"{op.name}: no sample in isa/ops.mlir" for op in ISA_OPS.values() if f"{op.name} " not in isa_text]
    return out


def vocabulary_problems() -> list[str]:
    out = [f"ALU op '{n}' has no semantics" for n in ALU_OPS if n not in semantics.ALU_FUNCS]
    return out + [f"activation '{n}' has no semantics" for n in ACT_FUNCS if n not in semantics.ACT_FUNCS_IMPL]


def problems() -> list[str]:
    isa_doc = (ROOT / "runtime" / "ISA_FORMAT.md").read_text()
    out = [p for spec in INSTRUCTIONS.values() for p in instruction_problems(spec)]
    out += [p for spec in OPCODES.values() for p in opcode_problems(spec, isa_doc)]
    return out + sample_problems() + vocabulary_problems()


def test_every_instruction_and_opcode_is_complete() -> None:
    assert problems() == []


def _context() -> Context:
    ctx = Context()
    for d in (Builtin, NkicAttrs, penguin.Penguin, bir.Bir):
        ctx.load_dialect(d)
    return ctx


def test_every_instruction_round_trips_at_penguin_and_bir_level() -> None:
    ctx = _context()
    text = (LIT / "penguin" / "ops.mlir").read_text()
    module = Parser(ctx, text).parse_module()
    module.verify()
    PenguinToBirPass().apply(ctx, module)
    TranslateNkiAstToBirPass().apply(ctx, module)
    printed = str(module)
    again = Parser(ctx, printed).parse_module()
    again.verify()
    assert str(again) == printed
    names = {op.name for op in again.walk()}
    assert {f"bir.{n}" for n in INSTRUCTIONS} <= names


@pytest.mark.parametrize(
    "registry,key,what",
    [(EXECUTORS, "RANGE_SELECT", "no executor"), (COSTS, "MATMUL", "no cost"), (ISA_OPS, ("dve", "range_select"),
     "no ISA op on dve"), (semantics.ALU_FUNCS, "maximum", "has no semantics")],
)  # fmt: skip
def test_a_missing_registration_is_reported(registry: dict, key: object, what: str, monkeypatch) -> None:
    monkeypatch.delitem(registry, key)
    found = problems()
    assert any(what in p for p in found), found


def test_a_lowering_to_an_unknown_immediate_is_reported() -> None:
    from dataclasses import replace

    from nkic.target.instructions import Field

    spec = INSTRUCTIONS["tensor_reduce"]
    bad = replace(spec, fields=(*spec.fields, Field("typo", "bool")))
    assert any("lowers to 'typo'" in p for p in instruction_problems(bad))
