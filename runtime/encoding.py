"""Codec for nkic's per-engine instruction streams (the ``.bin`` members of a NEFF).

The byte layout is specified in ``runtime/ISA_FORMAT.md``; this module is its only implementation. The opcode table,
the record types and every numeric code (dtypes, memories, engines, ALU ops, activation functions, reduce
commands) come from ``nkic.target``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence

from nkic.runtime.errors import NeffFormatError
from nkic.target.isa import (
    DYN_KINDS,
    ENUM_KINDS,
    MAX_FREE_DIMS,
    MAX_IMMS,
    MAX_SLOTS,
    OPCODE_BY_CODE,
    OPCODES,
    Instr,
    Operand,
    OpSpec,
    bits_f32,
    bits_i32,
    f32_bits,
    i32_bits,
    instr_encoding_problem,
    operand_encoding_problem,
    word_kind,
)
from nkic.target.machine import (
    ENGINE_NAMES,
    ENGINES as _ENGINE_LIST,
    NUM_DMA_QUEUES,
    engine_sem,
    queue_sem,
    sem_name,
    valid_sem,
)
from nkic.target.vocab import DTYPE_CODES, ISA_MEMORIES

__all__ = [
    "ENGINES", "ENGINE_IDS", "MEMORIES", "OPCODES", "OP_SPECS", "OpSpec", "Operand", "Instr",
    "NUM_DMA_QUEUES", "NO_SEM", "engine_sem", "queue_sem", "sem_name", "valid_sem", "f32_bits", "bits_f32",
    "i32_bits", "bits_i32", "encode_stream", "decode_stream", "disassemble", "to_json", "imm_values",
]  # fmt: skip

MAGIC = b"NKIS"
VERSION = 1
ENGINES: tuple[str, ...] = ENGINE_NAMES
ENGINE_IDS: dict[str, int] = {e.name: e.code for e in _ENGINE_LIST}
MEMORIES: tuple[str, ...] = ISA_MEMORIES.names
OP_SPECS = OPCODES  # the opcode table lives in nkic.target.isa
NO_SEM = 0xFF
NO_OPERAND = 0xFFFF

_HEADER = struct.Struct("<4sHBBII16x")
_RECORD = struct.Struct("<BBHBBHII6H9I")
_OPERAND = struct.Struct("<BBBBHHI" + "iI" * (1 + MAX_FREE_DIMS) + "i")
assert (_HEADER.size, _RECORD.size, _OPERAND.size) == (32, 64, 56)
_ENGINE_BY_CODE = {e.code: e.name for e in _ENGINE_LIST}


# ---------------------------------------------------------------------------------------------------------------
# encoding


def _pack_operand(op: Operand) -> bytes:
    problem = operand_encoding_problem(op)
    if problem is not None:
        raise ValueError(problem)
    pairs: list[int] = []
    for step, num in op.pattern:
        pairs += [step, num]
    pairs += [0, 0] * (1 + MAX_FREE_DIMS - len(op.pattern))
    return _OPERAND.pack(
        ISA_MEMORIES.code(op.memory), DTYPE_CODES.code(op.dtype), op.start_partition, len(op.pattern) - 1,
        op.var_id, _dyn_word(op), op.address, *pairs, op.dyn_scale if op.dyn else 0,
    )  # fmt: skip


# Bit 8 of the dynamic word: tensor indirection (its kind bits 0-1 are 0; bits 2-7 still name the index slot).
_TI_BIT = 1 << 8


def _dyn_word(op: Operand) -> int:
    """Bytes 6-7 of an operand entry: the dynamic kind in bits 0-1 (or bit 8, tensor indirection), its register or
    index slot in bits 2-7."""
    if not op.dyn:
        return 0
    if op.dyn == "indirect":
        return _TI_BIT | op.dyn_ref << 2
    return DYN_KINDS.index(op.dyn) | op.dyn_ref << 2


def _check_sem(what: str, sem: int | None) -> int:
    if sem is None:
        return NO_SEM
    if not valid_sem(sem):
        raise ValueError(f"{what} semaphore {sem} is not an engine (0..4) or DMA queue (8..23) semaphore")
    return sem


def _check_instr(engine: str, ins: Instr) -> OpSpec:
    if ins.engine != engine:
        raise ValueError(f"{ins.opcode} is tagged engine '{ins.engine}' but is in the '{engine}' stream")
    problem = instr_encoding_problem(ins, valid_sem)
    if problem is not None:
        raise ValueError(problem)
    return OP_SPECS[ins.opcode]


def encode_stream(engine: str, instrs: Sequence[Instr]) -> bytes:
    """Encode one engine's instruction stream; identical operands share one operand-table entry."""
    if engine not in ENGINE_IDS:
        raise ValueError(f"unknown engine '{engine}'")
    table: dict[Operand, int] = {}
    records = []
    for ins in instrs:
        spec = _check_instr(engine, ins)
        slots = [NO_OPERAND] * MAX_SLOTS
        for i, op in enumerate(ins.operands):
            if op is not None:
                slots[i] = table.setdefault(op, len(table))
        imms = list(ins.imms) + [0] * (MAX_IMMS - len(ins.imms))
        wait = _check_sem("wait", ins.wait_sem)
        signal = _check_sem("signal", ins.signal_sem)
        records.append(
            _RECORD.pack(spec.code, ENGINE_IDS[engine], ins.flags, wait, signal, 0, ins.wait_value, ins.inst_id,
                         *slots, *imms)
        )  # fmt: skip
    if len(table) >= NO_OPERAND:
        raise ValueError(f"too many distinct operands ({len(table)})")
    header = _HEADER.pack(MAGIC, VERSION, ENGINE_IDS[engine], 0, len(records), len(table))
    return header + b"".join(records) + b"".join(_pack_operand(op) for op in table)


# ---------------------------------------------------------------------------------------------------------------
# decoding


def _bad(msg: str) -> NeffFormatError:
    return NeffFormatError(f"ISA stream: {msg}")


def _unpack_operand(data: bytes, offset: int, index: int) -> Operand:
    mem, dt, start, nfree, var_id, dyn, address, *pairs = _OPERAND.unpack_from(data, offset)
    pairs, scale = pairs[:-1], pairs[-1]
    memory, dtype = ISA_MEMORIES.name_of(mem), DTYPE_CODES.name_of(dt)
    if memory is None:
        raise _bad(f"operand {index}: bad memory code {mem}")
    if dtype is None:
        raise _bad(f"operand {index}: bad dtype code {dt}")
    if nfree > MAX_FREE_DIMS:
        raise _bad(f"operand {index}: {nfree} free dims (max {MAX_FREE_DIMS})")
    pattern = tuple((pairs[2 * i], pairs[2 * i + 1]) for i in range(1 + nfree))
    kind, ref = DYN_KINDS[dyn & 3], dyn >> 2 & 0x3F
    if dyn & _TI_BIT:
        if dyn & 3 or memory not in ("sbuf", "psum"):
            raise _bad(f"operand {index}: tensor indirection needs an SBUF/PSUM operand and no other dynamic kind")
        kind = "indirect"
    if kind in ("scalar", "vector", "indirect") and ref >= MAX_SLOTS:
        raise _bad(f"operand {index}: dynamic index slot {ref} (max {MAX_SLOTS - 1})")
    if kind == "vector" and memory != "hbm":
        raise _bad(f"operand {index}: a vector dynamic offset needs an HBM operand, not {memory}")
    return Operand(memory, dtype, pattern, start, address, var_id, kind, ref if kind else 0, scale if kind else 0)


def _decode_header(data: bytes) -> tuple[str, int, int]:
    if len(data) < _HEADER.size:
        raise _bad(f"{len(data)} bytes is shorter than the {_HEADER.size}-byte header")
    magic, version, engine_id, _res, n_instr, n_ops = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise _bad(f"bad magic {magic!r} (expected {MAGIC!r})")
    if version != VERSION:
        raise _bad(f"unsupported version {version} (expected {VERSION})")
    if engine_id not in _ENGINE_BY_CODE:
        raise _bad(f"bad engine id {engine_id}")
    expected = _HEADER.size + n_instr * _RECORD.size + n_ops * _OPERAND.size
    if len(data) != expected:
        raise _bad(f"size {len(data)} does not match {n_instr} instructions and {n_ops} operands ({expected} bytes)")
    return _ENGINE_BY_CODE[engine_id], n_instr, n_ops


def _decode_sem(index: int, what: str, sem: int) -> int | None:
    if sem == NO_SEM:
        return None
    if not valid_sem(sem):
        raise _bad(f"instruction {index}: bad {what} semaphore {sem}")
    return sem


def _decode_record(data: bytes, offset: int, index: int, engine: str, table: list[Operand]) -> Instr:
    code, eng, flags, wait, signal, _res, wait_value, inst_id, *rest = _RECORD.unpack_from(data, offset)
    slots, imms = rest[:MAX_SLOTS], rest[MAX_SLOTS:]
    if code not in OPCODE_BY_CODE:
        raise _bad(f"instruction {index}: unknown opcode {code:#x}")
    spec = OPCODE_BY_CODE[code]
    name = spec.mnemonic
    if eng != ENGINE_IDS[engine]:
        raise _bad(f"instruction {index}: engine id {eng} inside the {engine} stream")
    if engine not in spec.engines:
        raise _bad(f"instruction {index}: {name} is not allowed on {engine}")
    if flags >> len(spec.flags):
        raise _bad(f"instruction {index}: {name} sets undefined flag bits {flags:#x}")
    operands: list[Operand | None] = []
    for s, slot in enumerate(slots):
        if slot == NO_OPERAND:
            operands.append(None)
        elif slot >= len(table) or s >= len(spec.slots):
            raise _bad(f"instruction {index}: operand slot {s} has bad index {slot}")
        else:
            operands.append(table[slot])
    for imm, value in zip(spec.imms, imms):
        if imm.kind in ENUM_KINDS and ENUM_KINDS[imm.kind].name_of(value) is None:
            raise _bad(f"instruction {index}: {name} {imm.prop} has bad {imm.kind} code {value}")
    return Instr(name, engine, tuple(operands), tuple(imms), flags, _decode_sem(index, "wait", wait), wait_value,
                 _decode_sem(index, "signal", signal), inst_id)  # fmt: skip


def decode_stream(data: bytes) -> tuple[str, list[Instr]]:
    """Decode a ``.bin`` member into ``(engine, instructions)``; any malformation raises NeffFormatError."""
    data = bytes(data)
    engine, n_instr, n_ops = _decode_header(data)
    ops_start = _HEADER.size + n_instr * _RECORD.size
    table = [_unpack_operand(data, ops_start + i * _OPERAND.size, i) for i in range(n_ops)]
    instrs = [_decode_record(data, _HEADER.size + i * _RECORD.size, i, engine, table) for i in range(n_instr)]
    return engine, instrs


# ---------------------------------------------------------------------------------------------------------------
# human-readable forms


def _imm_value(kind: str, raw: int) -> object:
    if kind == "f32":
        value = bits_f32(raw)
        return value if math.isfinite(value) else repr(value)  # JSON has no nan/inf literals
    if kind == "i32":
        return bits_i32(raw)
    if kind in ENUM_KINDS:
        name = ENUM_KINDS[kind].name_of(raw)
        return raw if name is None else name
    return raw


def imm_values(ins: Instr) -> dict[str, object]:
    """Immediates decoded by name (f32 as float, enums as names); unnamed non-zero ones appear as ``immN``."""
    named = ins.spec.imms
    out: dict[str, object] = {}
    for i in range(max(len(named), len(ins.imms))):
        if i < len(named):
            if named[i].sparse and not ins.imm(i):
                continue
            out[named[i].prop] = _imm_value(word_kind(named[i], ins.flag), ins.imm(i))
        else:
            out[f"imm{i}"] = ins.imm(i)
    return out


def _flag_names(ins: Instr) -> list[str]:
    return [name for bit, name in enumerate(ins.spec.flags) if ins.flags >> bit & 1]


def _operand_str(op: Operand, var_names: Mapping[int, str]) -> str:
    pairs = "".join(f"[{s},{n}]" for s, n in op.pattern)
    if op.memory == "hbm":
        where = f"hbm:{var_names.get(op.var_id, f'v{op.var_id}')}"
    elif op.memory == "none":
        return f"pattern{pairs}"
    else:
        where = f"{op.memory}:p{op.start_partition}"
    return f"{where}@{op.address:#x}:{op.dtype}{pairs}"


def _instr_line(index: int, ins: Instr, var_names: Mapping[int, str]) -> str:
    parts = [f"{index:5d}  {ins.engine:<4} {ins.opcode:<20}"]
    slots = ins.spec.slots
    for i, op in enumerate(ins.operands):
        if op is not None:
            parts.append(f"{slots[i]}={_operand_str(op, var_names)}")
    parts += [f"{k}={v}" for k, v in imm_values(ins).items()]
    parts += _flag_names(ins)
    if ins.wait_sem is not None:
        parts.append(f"wait {sem_name(ins.wait_sem)}>={ins.wait_value}")
    if ins.signal_sem is not None:
        parts.append(f"signal {sem_name(ins.signal_sem)}++")
    parts.append(f"id={ins.inst_id}")
    return " ".join(parts)


def disassemble(instrs: Iterable[Instr], var_names: Mapping[int, str] | None = None) -> str:
    """One line per instruction: index, engine, mnemonic, named operands, immediates, flags, semaphores, id."""
    names = var_names or {}
    return "\n".join(_instr_line(i, ins, names) for i, ins in enumerate(instrs))


def operand_json(op: Operand, var_names: Mapping[int, str] | None = None) -> dict[str, object]:
    out: dict[str, object] = {"memory": op.memory, "dtype": op.dtype, "pattern": [list(p) for p in op.pattern]}
    if op.memory in ("sbuf", "psum"):
        out.update(start_partition=op.start_partition, address=op.address)
    elif op.memory == "hbm":
        out.update(var_id=op.var_id, address=op.address)
        if var_names and op.var_id in var_names:
            out["var"] = var_names[op.var_id]
    return out


def _instr_json(index: int, ins: Instr, var_names: Mapping[int, str] | None) -> dict[str, object]:
    slots = ins.spec.slots
    return {
        "index": index,
        "mnemonic": ins.opcode,
        "opcode": ins.spec.code,
        "engine": ins.engine,
        "inst_id": ins.inst_id,
        "operands": {slots[i]: operand_json(op, var_names) for i, op in enumerate(ins.operands) if op is not None},
        "imms": imm_values(ins),
        "flags": _flag_names(ins),
        "wait": None if ins.wait_sem is None else {"sem": ins.wait_sem, "value": ins.wait_value},
        "signal": ins.signal_sem,
    }


def to_json(instrs: Iterable[Instr], var_names: Mapping[int, str] | None = None) -> list[dict[str, object]]:
    """JSON-ready description of a stream (the ``instructions`` list of an engine's ``.json`` member)."""
    return [_instr_json(i, ins, var_names) for i, ins in enumerate(instrs)]
