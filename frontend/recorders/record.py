"""What every instruction recorder shares: operand validation, the documented rules, and ``_record``, which checks
an instruction against its declaration and records it (``TraceContext.inst``)."""

from __future__ import annotations

import math
from enum import Enum
from typing import Any

import numpy as np

from nkic.frontend.affine import is_symbolic
from nkic.frontend.errors import NkiError
from nkic.frontend.rule_checks import enforce as _enforce
from nkic.frontend.rule_checks import nl_rules
from nkic.frontend.tensor import NkiTensor
from nkic.target.instructions import (
    INSTRUCTIONS,
    InstrSpec,
    Role,
    available_on,
    dims_problem,
    engine_problem,
    first_generation,
    legal_engines,
)
from nkic.target.machine import ENGINE_BY_NAME, ENGINE_OF_HINT, Target, get_target
from nkic.target.rules import Call, Operand, RULES
from nkic.target.rules.indirection import TI_ENGINES
from nkic.target.vocab import PACKED_DTYPES


# -- validation helpers -------------------------------------------------------------------------------------
def _target(ctx: Any) -> Target:
    return get_target(ctx.options.target)



def _tensor(op: str, role: str, value: Any) -> NkiTensor:
    if not isinstance(value, NkiTensor):
        raise NkiError(f"{op}: '{role}' must be a tensor, got {type(value).__name__}")
    return value


def _on_chip(op: str, role: str, t: NkiTensor) -> None:
    if not t.on_chip:
        raise NkiError(f"{op}: '{role}' must be in SBUF or PSUM, not {t.buffer}", "dma_copy it on chip first")


def _in(op: str, role: str, t: NkiTensor, *buffers: str) -> None:
    if str(t.buffer) not in buffers:
        raise NkiError(f"{op}: '{role}' must be in {' or '.join(b.upper() for b in buffers)}, not {t.buffer}")


def _in_sbuf_not_psum(op: str, role: str, t: NkiTensor) -> None:
    """A PSUM tile given to a GpSimd-only instruction whose reference requires SBUF (nisa.affine_select; the rule
    itself is target/rules/vector.py's): the reference's reason, and the copy that fixes it (nki-library's
    attention_cte copies the Q·Kᵀ scores out of PSUM with nisa.tensor_copy before its causal affine_select)."""
    fix = ("copy the PSUM tile to SBUF first with nisa.tensor_copy (VectorE and ScalarE read PSUM), then select from "
           "the copy" if role != "dst" else "give it a dst in SBUF, and copy the result to PSUM if it must be there")
    raise NkiError(
        f"{op}: '{role}' must be in SBUF, not psum",
        f"the NKI ISA reference: nisa.{op} runs on the GpSimd engine, its tiles must be in SBUF, and GpSimd cannot "
        f"access PSUM on any NeuronCore generation. {fix}",
    )


def _partitions_agree(op: str, tensors: dict[str, NkiTensor | None]) -> None:
    given = [(r, t) for r, t in tensors.items() if t is not None]
    first_role, first = given[0]
    for role, t in given[1:]:
        if t.partitions != first.partitions:
            raise NkiError(
                f"{op}: partition count mismatch: '{first_role}' has {first.partitions} partitions, "
                f"'{role}' has {t.partitions}"
            )


def _free_agree(op: str, a_role: str, a: NkiTensor, b_role: str, b: NkiTensor) -> None:
    if a.free_size != b.free_size:
        raise NkiError(
            f"{op}: '{a_role}' has {a.free_size} elements per partition but '{b_role}' has {b.free_size}"
        )


def _scalar(op: str, role: str, value: Any, dst: NkiTensor) -> tuple[NkiTensor | None, float | None]:
    """A scalar operand: an immediate (returned as float) or a (P, 1) tile."""
    if isinstance(value, NkiTensor):
        _on_chip(op, role, value)
        if value.free_size != 1 or value.partitions != dst.partitions:
            raise NkiError(f"{op}: '{role}' must be a ({dst.partitions}, 1) tile, got shape {value.shape}")
        return value, None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None, float(value)
    if isinstance(value, (np.integer, np.floating)):  # a numpy scalar (np.float32(0.0)) is a number too
        return None, float(value)
    if is_symbolic(value):
        return None, float(value)  # needs the concrete value: the loop unrolls
    raise NkiError(f"{op}: '{role}' must be a number or a (P, 1) tile, got {type(value).__name__}")


def _scalar_value(op: str, role: str, value: Any) -> tuple[NkiTensor | None, float | None]:
    """A scalar operand whose (P, 1) shape a documented rule states (``target/rules``): an immediate or a tile."""
    if isinstance(value, NkiTensor):
        return value, None
    return _scalar(op, role, value, None)  # type: ignore[arg-type]  # a number: no tile to compare with


def _enum(value: Any, cls: type[Enum], what: str) -> str:
    if isinstance(value, cls):
        return value.name
    if isinstance(value, str) and value in cls.__members__:
        return value
    if value is None and "unknown" in cls.__members__:
        return "unknown"
    if isinstance(value, int) and not isinstance(value, bool) and value in {m.value for m in cls}:
        return cls(value).name  # the member's integer value, as NKI's int-valued enums accept (nki-library does)
    raise NkiError(f"invalid {what} {value!r}", f"use nisa.{cls.__name__}.<member>")


def _mask(kwargs: dict[str, Any]) -> None:
    """A mask reaching an instruction's body was not applied (``_take_masks`` strips it first): never ignore one."""
    if kwargs.get("mask") is not None:
        raise NkiError("mask= is not supported here", "express predicates with nisa.affine_select")


def _record(
    ctx: Any, op: str, operands: dict[str, NkiTensor | None], attrs: dict[str, Any], engine_name: str = ""
) -> None:
    """Checks shared by every instruction, then one penguin instruction."""
    target = _target(ctx)
    if not _available(target, op):
        # the reference's sentence where it states the generation (target/rules: unavailable), else the declaration
        _enforce(Call(op, {}, {}, target.nc_version, getattr(ctx, "_api_call", "")))
        first = first_generation(op)
        raise NkiError(
            f"nisa.{INSTRUCTIONS[op].nki_name or op} is not available on {target.name}",
            f"it needs {first} or newer" if first else "",
        )
    spec = INSTRUCTIONS[op]
    if any(t is not None and t.dyn is not None for t in operands.values()):
        operands = _with_index_operands(ctx, op, operands)
        engine_name, attrs = _indirection_engine(target, op, operands, attrs, engine_name)
    given = {r: t for r, t in operands.items() if t is not None}
    dst = operands.get("dst")
    bank = target.psum_bank_bytes
    _packed_operands(op, operands)
    if op in RULES and getattr(ctx, "_api_call", "").startswith("nisa."):
        _documented_rules(ctx, target, op, given, attrs)  # first: the message cites the reference's sentence
    # what the declaration states beyond the documented sentences (and, for an nl function's instruction, all of it)
    roles = _role_table(op)
    for role, t in given.items():
        _declared_role(op, roles[role], t, dst)
    if spec.dims_rule is not None:
        problem = dims_problem(spec, {r: (t.partitions, t.free_size) for r, t in given.items()})
        if problem is not None:
            raise NkiError(problem)
    # the declaration's elementwise roles have dst's partitions and elements per partition: every nisa function gets
    # the check from its declaration (one that checks earlier, with NKI's keyword names, keeps its message)
    same = {r: given[r] for r in spec.elementwise if r in given}
    if same and dst is not None:
        _elementwise(op, {"dst": dst, **same})
    _engine_check(target, op, given, attrs, ENGINE_OF_HINT.get(engine_name, ""))
    for role, t in given.items():
        if not t.storage.buffer == "psum":
            continue
        spans_banks = op in ("matmul", "matmul_mx") and role == "dst" and target.matmul_spans_banks
        if t.free_size * t.itemsize > bank and not spans_banks:
            raise NkiError(
                f"{op}: PSUM tile '{role}' needs {t.free_size * t.itemsize} bytes per partition, "
                f"more than one {bank}-byte bank",
                f"split the PSUM tile into bank-sized ({bank} bytes per partition) views",
            )
    ctx.inst(op, given, attrs)


def _engine_check(target: Target, op: str, given: dict[str, NkiTensor], attrs: dict[str, Any], engine: str) -> None:
    """``engine=`` must be one the declaration allows on this generation, for these operands' memories and ALU ops
    (``target.instructions.engine_problem``, what assign-engines and the ISA verifier ask too); with no engine
    given, some engine must be able to run it."""
    spec = INSTRUCTIONS[op]
    memories = {r: getattr(t.storage.buffer, "name", str(t.storage.buffer)) for r, t in given.items()}
    fields = {f.name: attrs.get(f.name) for f in spec.fields if f.kind == "alu"}
    if engine and engine != "unassigned":
        problem = engine_problem(spec, engine, target.nc_version, memories, fields)
        if problem is not None:
            raise NkiError(f"{op}: engine={ENGINE_BY_NAME[engine].nki} is not allowed: {problem}",
                           f"use one of {', '.join(_nki_engines(spec, target))} or leave engine unset")  # fmt: skip
    elif not legal_engines(spec, target.nc_version, memories, fields):
        problems = [engine_problem(spec, e, target.nc_version, memories, fields) for e in spec.engines]
        raise NkiError(f"{op}: no engine can run it here: {'; '.join(p for p in problems if p)}")


def _nki_engines(spec: InstrSpec, target: Target) -> list[str]:
    return [f"nisa.engine.{ENGINE_BY_NAME[e].nki}" for e in spec.engines_on(target.nc_version)]


def _documented_rules(ctx: Any, target: Target, op: str, given: dict[str, NkiTensor], attrs: dict[str, Any]) -> None:
    """The reference's restrictions on this call (``nkic.target.rules``), for the ``nisa`` function the user
    called. An instruction an ``nl`` function emits is nkic's lowering, not the user's choice: the rules are the
    lowering's to keep (the penguin verifier checks them), not an error at the user's line."""
    operands = {r: _rule_operand(t) for r, t in given.items()}
    _enforce(Call(op, operands, attrs, target.nc_version, getattr(ctx, "_api_call", "")))


def language_rules(ctx: Any, fn: str, operands: dict[str, Any], **fields: Any) -> None:
    """The reference's restrictions on ``nl.<fn>`` itself (``target/rules/language.py``), asked by its
    implementation: the tiles among ``operands`` and the call's other arguments as ``fields`` (``ctx`` None: the
    generation is not known, so only rules of every generation apply)."""
    nl_rules(ctx, fn, {r: _rule_operand(t) for r, t in operands.items() if isinstance(t, NkiTensor)}, **fields)


def _api_rules(ctx: Any, op: str, facts: dict[str, Any]) -> None:
    """The reference's restrictions on what no instruction field holds (a tensor's rank): the rules of ``op`` for
    the ``nisa`` function called, asked with those ``facts`` as the call's fields."""
    _enforce(Call(op, {}, facts, _target(ctx).nc_version, getattr(ctx, "_api_call", "")))


def _rule_operand(t: NkiTensor) -> Operand:
    """A tile as the documented rules see it: memory, dtype, (partitions, elements per partition), its first
    partition where the trace knows it, whether it is a tensor indirection view."""
    indirect = t.dyn is not None and t.dyn.kind == "indirect"
    return Operand(t.buffer.name, t.dtype, (t.partitions, t.free_size), _first_partition(t), indirect)


def _first_partition(t: NkiTensor) -> int | None:
    """The partition an on-chip view starts on: its allocation's (a manual ``address=``, else 0: nkic places
    tiles from partition 0) plus its static offset's rows; None when a loop variable moves it."""
    if not t.on_chip or not isinstance(t.offset, int) or t.dtype != t.storage.dtype:
        return None
    row = math.prod(t.storage.shape[1:])
    return (t.storage.address[0] if t.storage.address is not None else 0) + t.offset // max(row, 1)


def _rules(ctx: Any, op: str, given: dict[str, NkiTensor | None], facts: dict[str, Any]) -> None:
    """The reference's restrictions on this call, asked before the instruction is built: its operands, and as the
    call's fields what the IR does not keep (raw parameters, full shapes; ``target/rules/pe.py``). Asked for the
    ``nl`` functions' instructions too: these were the call's own checks before they were rules."""
    _documented_rules(ctx, _target(ctx), op, {r: t for r, t in given.items() if t is not None}, facts)


# (nc_version, instruction) pairs Target.has said yes to (it depends on nothing else, and imports the declarations
# on every call); a no is asked again (it is an error anyway, and a declaration may yet be added).
_AVAILABLE: set[tuple[int, str]] = set()


def _available(target: Target, op: str) -> bool:
    key = (target.nc_version, op)
    if key in _AVAILABLE:
        return True
    if available_on(op, target):
        _AVAILABLE.add(key)
        return True
    return False


# op -> its declared roles by name (InstrSpec.role searches the tuple; _record asks for every operand)
_ROLE_TABLES: dict[str, dict[str, Role]] = {}


def _role_table(op: str) -> dict[str, Role]:
    table = _ROLE_TABLES.get(op)
    if table is None:
        table = _ROLE_TABLES[op] = {r.name: r for r in INSTRUCTIONS[op].roles}
    return table


def _with_index_operands(ctx: Any, op: str, operands: dict[str, NkiTensor | None]) -> dict[str, NkiTensor | None]:
    """A dynamic (``.ap(scalar_offset=, vector_offset=)``) operand brings its index tensor as the declaration's
    ``<role>_offset`` operand; only roles declared ``indirect`` take one."""
    out = dict(operands)
    spec = INSTRUCTIONS[op]
    for role, t in operands.items():
        if t is None or t.dyn is None:
            continue
        if t.dyn.kind == "indirect":
            if not spec.role(role).ti:
                raise NkiError(f"nisa.{spec.nki_name or op}: '{role}' cannot be a tensor indirection view "
                               "(.indirect)", _TI_HINT.get((op, role), "the reference lists the operands that "
                                                           "support it"))  # fmt: skip
            out[spec.role(role).offset_role] = t.dyn.index
            continue
        if not spec.role(role).indirect:
            raise NkiError(f"nisa.{spec.nki_name or op}: '{role}' cannot be a dynamic access pattern "
                           "(scalar_offset / vector_offset)", "only DMA operands can be indirect")  # fmt: skip
        if t.dyn.kind == "reg":
            if t.dyn.register._owner is not ctx._owner:
                raise NkiError(f"{op}: register r{t.dyn.register.number} belongs to another trace or SPMD program")
        else:
            out[spec.role(role).offset_role] = t.dyn.index
    return out


# Operands the reference lets take a tensor indirection view that nkic does not (yet): why not.
_TI_HINT = {(op, "dst"): f"not implemented in nkic: {opcode}'s encoding has one spare operand slot, taken by "
                         f"'{src}''s index; scatter with a tensor_copy from an SBUF result instead"
            for op, opcode, src in (("activation", "ACTIVATE", "data"), ("exponential", "EXPONENTIAL", "src"))}


def _indirection_engine(target: Target, op: str, operands: dict[str, NkiTensor | None], attrs: dict[str, Any],
                        engine_name: str) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """With a tensor indirection operand and no engine named, the first engine the declaration prefers that may run
    the indirection ("When tensor indirection is used, the operation must run on the Vector or Scalar engine":
    ``TI_ENGINES``) and reach the operands' memories; a named engine is the documented rules' to check."""
    allowed = TI_ENGINES.get(op)
    ti = any(t is not None and t.dyn is not None and t.dyn.kind == "indirect" for t in operands.values())
    if not ti or allowed is None or attrs.get("engine", "unknown") != "unknown":
        return engine_name, attrs
    spec = INSTRUCTIONS[op]
    memories = {r: t.buffer.name for r, t in operands.items() if t is not None}
    fields = {f.name: attrs.get(f.name) for f in spec.fields if f.kind == "alu"}
    dst = operands.get("dst")
    # "on the Scalar engine a scattered dst cannot be in PSUM"
    no_act = dst is not None and dst.dyn is not None and dst.dyn.kind == "indirect" and dst.buffer == "psum"
    legal = [e for e in legal_engines(spec, target.nc_version, memories, fields)
             if e in allowed and not (no_act and e == "act")]  # fmt: skip
    if not legal:
        return engine_name, attrs  # the documented rule names the sentence
    return legal[0], {**attrs, "engine": ENGINE_BY_NAME[legal[0]].nki}


# Instructions that may touch packed MX data (_x4 dtypes): the MX instructions, and DMAs that move the words (a
# sendrecv is a DMA between the pair's cores; it moves raw bytes and already requires one dtype), and memset with
# 0 (memset checks the value): all-zero words, every element +0 (nki-library zero-pads MX weight tiles so).
_PACKED_OK = frozenset({"quantize_mx", "matmul_mx", "dma_copy", "dma_transpose", "sendrecv", "memset"})


def _packed_operands(op: str, operands: dict[str, NkiTensor | None]) -> None:
    """Packed MX words are not numbers an engine can compute with: only the MX instructions read them, and a DMA
    moves them only as themselves (no cast through fp32)."""
    packed = {r: t.dtype for r, t in operands.items() if t is not None and t.dtype in PACKED_DTYPES}
    if not packed:
        return
    role, dt = next(iter(packed.items()))
    if op not in _PACKED_OK:
        raise NkiError(
            f"{INSTRUCTIONS[op].nki_name or op}: '{role}' has the packed MX dtype {dt}",
            "packed MX data is read by nisa.nc_matmul_mx only; view it as an integer dtype to move it",
        )
    if op.startswith("dma") and len({t.dtype for t in operands.values() if t is not None}) > 1:
        raise NkiError(f"{op}: cannot convert packed MX data ({dt}) to another dtype", "copy it as the same dtype")


def _declared_role(op: str, role: Role, t: NkiTensor, dst: NkiTensor | None) -> None:
    """What the declaration says of a role: its memory spaces, and (P, 1) for a scalar tile."""
    if str(t.buffer) not in role.memories:
        where = " or ".join(m.upper() for m in role.memories)
        hint = "dma_copy it on chip first" if not t.on_chip and "sbuf" in role.memories else ""
        raise NkiError(f"{op}: '{role.name}' must be in {where}, not {t.buffer}", hint)
    if role.scalar and dst is not None and (t.free_size != 1 or t.partitions != dst.partitions):
        raise NkiError(f"{op}: '{role.name}' must be a ({dst.partitions}, 1) tile, got shape {t.shape}")


def _elementwise(op: str, tensors: dict[str, NkiTensor]) -> None:
    for role, t in tensors.items():
        _on_chip(op, role, t)
    _partitions_agree(op, tensors)  # type: ignore[arg-type]
    (dst_role, dst), *rest = tensors.items()
    for role, t in rest:
        _free_agree(op, dst_role, dst, role, t)


# -- MX (microscaling) -----------------------------------------------------------------------------------------


def _dtype_in(op: str, role: str, t: NkiTensor, *allowed: str) -> None:
    if str(t.dtype) not in allowed:
        raise NkiError(f"{op}: '{role}' must be {' or '.join(allowed)}, got {t.dtype}")


def _int_param(op: str, name: str, value: Any) -> int:
    """A compile-time int32 parameter (a symbolic loop index unrolls the loop)."""
    if isinstance(value, bool) or not (isinstance(value, int) or is_symbolic(value)):
        raise NkiError(f"{op}: {name} must be an int32 number, got {type(value).__name__}")
    v = int(value)
    if not -(1 << 31) <= v < (1 << 31):
        raise NkiError(f"{op}: {name} = {v} does not fit in int32")
    return v
