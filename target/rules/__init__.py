"""The documented restrictions of the NKI instructions, as data, and the one checker that applies them.

Each ``Rule`` encodes one sentence of the API reference (the NKI docs' stubs, ``nki/api/nki/isa/__init__.py``): the
instruction it restricts, the generations (``nc_version``) it holds on, the sentence it encodes (``says``, verbatim)
and a test of a ``Call``: what is wrong with it, or None. The rules live in one module per engine family (``pe``,
``vector``, ``scalar``); ``problems(call)`` runs every rule of the call's instruction. It is asked at two points
today, so a rule is stated once and holds at both:

* trace time (``frontend/recorders/record.py`` ``_record``), for the instructions a ``nisa`` call names: an
  ``NkiError`` at the user's line, naming the rule, the generation and the sentence;
* the penguin instruction verifier (``dialects/penguin.py``), for IR text and for the instructions nkic's own
  lowerings emit (an ``nl`` function's instructions must be legal too). IR text carries no target, so a rule that
  holds only on some generations is not checked there (``Call.gen`` is None): where the generation is unknown,
  accept.

A rule may name the NKI function it comes from (``api``): two functions that lower to one instruction can be
documented differently (``nisa.activation``: "``reduce_op`` must be ``nl.add``"; ``nisa.activation_reduce``: only
"On NeuronCore-v2"). Such a rule is checked at trace time, where the called function is known, and nowhere else.

A restriction sentence that is deliberately not a rule (advice, semantics, or a rule checked elsewhere) is waived with
a reason (``waive``); ``python -m nkic.target.rules --report STUBS_DIR`` lists every restriction sentence of the
reference with its rule or waiver (``coverage.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nkic.target.instructions import INSTRUCTIONS, engine_problem, legal_engines
from nkic.target.machine import ENGINE_NAMES, ENGINE_OF_HINT
from nkic.target.vocab import HBM_MEMORIES

__all__ = ["Operand", "Call", "Rule", "RULES", "WAIVERS", "rule", "waive", "problems", "rules_of", "message",
           "dtype_of", "unavailable", "declared_engine", "in_memories"]

STUBS = "nki/api/nki/isa/__init__.py"
GENERATIONS = (2, 3, 4)  # NeuronCore-v2 (trn1), -v3 (trn2), -v4 (trn3): Target.nc_version


@dataclass(frozen=True)
class Operand:
    """One tensor operand as every level sees it: its memory, dtype and (partitions, elements per partition)."""

    memory: str
    dtype: str
    dims: tuple[int, int] = (0, 0)
    start: int | None = None  # the first partition it reaches, where known (a trace's static view, an ISA operand)
    indirect: bool = False  # a tensor indirection view (``.indirect(index)``); its index is role ``<role>_offset``


@dataclass(frozen=True)
class Call:
    """One instruction call: its operands by role, its fields (absent or None: not given), the generation (None:
    unknown) and the NKI function the user called (empty: unknown, e.g. in IR text)."""

    instr: str
    operands: Mapping[str, Operand]
    fields: Mapping[str, Any] = field(default_factory=dict)
    gen: int | None = None
    api: str = ""


@dataclass(frozen=True)
class Rule:
    instr: str
    says: str  # the sentence of the reference it encodes, verbatim
    test: Callable[[Call], str | None]
    gens: tuple[int, ...] = GENERATIONS
    api: str = ""  # the nisa function whose docstring states it, when not every function of the instruction's does

    @property
    def cite(self) -> str:
        return f"{STUBS}, {self.api or 'nisa.' + self.instr}: \"{self.says}\""

    def applies(self, call: Call) -> bool:
        if self.api and call.api != self.api:
            return False
        if call.gen is None:
            return self.gens == GENERATIONS
        return call.gen in self.gens


RULES: dict[str, list[Rule]] = {}
# (api function, the sentence's first words) -> why that restriction sentence is not a rule of its own: advice, not
# a restriction; semantics the simulator implements; or a rule checked elsewhere ("checked: <where>").
WAIVERS: dict[tuple[str, str], str] = {}


# The restrictions on tensor indirection (``.indirect(index)`` views of compute operands) of the instructions nkic
# takes no such view for (those it takes are target/rules/indirection.py): an ``.indirect()`` operand of theirs is an
# error at the call, so no call reaches them. A waiver of its own kind ("unsupported"), counted apart.
NO_INDIRECTION = ("unsupported: nkic takes tensor indirection (.indirect() views) on tensor_copy(_predicated), "
                  "tensor_tensor, tensor_scalar(_reduce, _cumulative), tensor_reduce, nc_matmul and the sources of "
                  "activation(_reduce) and exponential and nc_matmul_mx's dst, not activate2; a view on this "
                  "instruction's operands is an error at the call (frontend/recorders/record.py:"
                  "_with_index_operands), so no call reaches this restriction")  # fmt: skip


def waive(api: str, start: str, reason: str) -> None:
    """Record that the sentence of ``api``'s docstring starting with ``start`` is deliberately not a rule."""
    if (api, start) in WAIVERS:
        raise ValueError(f"{api}: the sentence {start!r} is waived twice")
    WAIVERS[(api, start)] = reason


def rule(instr: str, says: str, gens: tuple[int, ...] = GENERATIONS, api: str = "") -> Callable[
        [Callable[[Call], str | None]], Callable[[Call], str | None]]:  # fmt: skip
    """Declare the decorated test as the rule ``says`` of ``instr``."""

    def register(test: Callable[[Call], str | None]) -> Callable[[Call], str | None]:
        RULES.setdefault(instr, []).append(Rule(instr, says, test, gens, api))
        return test

    return register


def rules_of(instr: str) -> list[Rule]:
    return RULES.get(instr, [])


def problems(call: Call) -> list[tuple[Rule, str]]:
    """Every rule of ``call``'s instruction that it breaks, with what is wrong."""
    out = []
    for r in RULES.get(call.instr, ()):
        if r.applies(call):
            problem = r.test(call)
            if problem is not None:
                out.append((r, problem))
    return out


def message(call: Call, broken: tuple[Rule, str]) -> str:
    """One line: what is wrong, on which generation, and the sentence it breaks."""
    r, problem = broken
    where = f" on NeuronCore-v{call.gen}" if call.gen is not None and r.gens != GENERATIONS else ""
    return f"{problem}{where} (the NKI reference: \"{r.says}\")"


def _gen_name(gens: tuple[int, ...]) -> str:
    return "/".join(f"v{g}" for g in gens)


def dtype_of(call: Call, role: str) -> str | None:
    op = call.operands.get(role)
    return op.dtype if op is not None else None


# -- rules that read the instruction's declaration (target/instructions.py) -------------------------------------
# Some restrictions are facts the whole compiler uses — which generation first has an instruction (``since``: the
# tracer, Target.has), which engines may run it (``engine_problem``: assign-engines, the ISA verifiers). The
# declaration states them once; the rule citing the sentence asks it, so the message at the user's line names the
# sentence and no second copy can drift.
def unavailable(instr: str, says: str, api: str = "") -> None:
    """The sentence says ``instr`` is missing before its declared ``since``: a rule of the earlier generations."""
    spec = INSTRUCTIONS[instr]
    name = api or f"nisa.{spec.nki_name or instr}"

    def test(call: Call) -> str | None:
        return f"{name} is not available on gen{call.gen}: it needs gen{spec.since} or newer"

    rule(instr, says, tuple(g for g in GENERATIONS if g < spec.since), api)(test)


def declared_engine(instr: str) -> Callable[[Call], str | None]:
    """The engine the call names (field ``engine``: an NKI engine name, or nkic's) may run ``instr`` with these
    operands' memories and ALU ops on this generation; with none named, some engine can (``engine_problem``)."""
    def test(call: Call) -> str | None:
        spec = INSTRUCTIONS[instr]
        memories = {r: o.memory for r, o in call.operands.items()}
        alu = {f.name: call.fields.get(f.name) for f in spec.fields if f.kind == "alu"}
        given = call.fields.get("engine")
        engine = ENGINE_OF_HINT.get(given, given) if isinstance(given, str) else None
        if engine in ENGINE_NAMES:  # named (not nisa.engine.unknown): that engine must be legal
            return engine_problem(spec, engine, call.gen, memories, alu)
        if legal_engines(spec, call.gen, memories, alu):
            return None
        return "; ".join(p for e in spec.engines if (p := engine_problem(spec, e, call.gen, memories, alu)))

    return test


def in_memories(fn: str, want: Mapping[str, tuple[str, ...]]) -> Callable[[Call], str | None]:
    """Each role of ``want`` (those given) is in one of its memories (an HBM kind counts as "hbm")."""
    def test(call: Call) -> str | None:
        for role, allowed in want.items():
            o = call.operands.get(role)
            if o is not None and ("hbm" if o.memory in HBM_MEMORIES else o.memory) not in allowed:
                where = " or ".join("HBM" if m == "hbm" else m.upper() for m in allowed)
                return f"{fn}: '{role}' must be in {where}, not {o.memory}"
        return None

    return test



def column(fn: str, like: str, roles: tuple[str, ...], noun: str = "tile") -> Callable[[Call], str | None]:
    """Each of ``roles`` that is given holds one element on each of ``like``'s partitions: a (P, 1) ``noun`` (the
    reference's word: a scalar engine's "vector", a vector engine's "tile")."""

    def test(call: Call) -> str | None:
        ref = call.operands.get(like)
        for role in roles:
            o = call.operands.get(role)
            if o is not None and ref is not None and o.dims != (ref.dims[0], 1):
                return f"{fn}: '{role}' must be a ({ref.dims[0]}, 1) {noun}, got {o.dims[0]} x {o.dims[1]}"
        return None

    return test


# The rule families, one module per group of engines; importing them registers their rules.
from nkic.target.rules import indirection, language, pe, scalar, vector  # noqa: E402,F401
