"""Codec for nkic's per-engine instruction streams (the ``.bin`` members of a NEFF).

The byte layout is specified in ``runtime/ISA_FORMAT.md``; this module is its only implementation. Numeric codes for
dtypes, ALU ops, activation functions and reduce commands are the tuple indices / dict order of the tables in
``nkic.dialects.common``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from nkic.dialects.common import ACT_FUNCS, ALU_OPS, DTYPES, REDUCE_CMDS
from nkic.runtime.errors import NeffFormatError

__all__ = [
    "ENGINES", "ENGINE_IDS", "MEMORIES", "OPCODES", "OPCODE_NAMES", "OpSpec", "OP_SPECS", "Operand", "Instr",
    "NUM_DMA_QUEUES", "NO_SEM", "engine_sem", "queue_sem", "sem_name", "valid_sem", "f32_bits", "bits_f32",
    "i32_bits", "bits_i32", "encode_stream", "decode_stream", "disassemble", "to_json", "imm_values",
]  # fmt: skip

MAGIC = b"NKIS"
VERSION = 1
ENGINES: tuple[str, ...] = ("pe", "act", "dve", "pool", "sp")
ENGINE_IDS: dict[str, int] = {name: i for i, name in enumerate(ENGINES)}
MEMORIES: tuple[str, ...] = ("sbuf", "psum", "hbm", "none")
DTYPE_NAMES: tuple[str, ...] = tuple(DTYPES)
NUM_DMA_QUEUES = 16
MAX_SLOTS = 6
MAX_IMMS = 9
MAX_FREE_DIMS = 4
NO_SEM = 0xFF
NO_OPERAND = 0xFFFF
_QUEUE_SEM_BASE = 8

_HEADER = struct.Struct("<4sHBBII16x")
_RECORD = struct.Struct("<BBHBBHII6H9I")
_OPERAND = struct.Struct("<BBBBHHI" + "iI" * (1 + MAX_FREE_DIMS) + "4x")
assert (_HEADER.size, _RECORD.size, _OPERAND.size) == (32, 64, 56)


def engine_sem(engine: str) -> int:
    """Semaphore id owned by a compute/sync engine (signalled by its instructions at completion)."""
    return ENGINE_IDS[engine]


def queue_sem(queue: int) -> int:
    """Semaphore id of DMA queue ``queue`` (signalled when a transfer on that queue completes)."""
    if not 0 <= queue < NUM_DMA_QUEUES:
        raise ValueError(f"DMA queue {queue} out of range 0..{NUM_DMA_QUEUES - 1}")
    return _QUEUE_SEM_BASE + queue


def valid_sem(sem: int) -> bool:
    return 0 <= sem < len(ENGINES) or _QUEUE_SEM_BASE <= sem < _QUEUE_SEM_BASE + NUM_DMA_QUEUES


def sem_name(sem: int) -> str:
    """Profiler-style name, e.g. ``S[2](dve)`` or ``S[8](q0)``."""
    if sem < len(ENGINES):
        return f"S[{sem}]({ENGINES[sem]})"
    return f"S[{sem}](q{sem - _QUEUE_SEM_BASE})"


def f32_bits(x: float) -> int:
    """IEEE-754 binary32 bit pattern of ``x`` (rounded to float32) as an unsigned 32-bit int."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bits_f32(u: int) -> float:
    return struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0]


def i32_bits(x: int) -> int:
    """Two's-complement u32 image of a signed 32-bit int."""
    if not -(1 << 31) <= x < (1 << 32):
        raise ValueError(f"{x} does not fit in 32 bits")
    return x & 0xFFFFFFFF


def bits_i32(u: int) -> int:
    u &= 0xFFFFFFFF
    return u - (1 << 32) if u & 0x80000000 else u


@dataclass(frozen=True)
class OpSpec:
    """Static description of one opcode: code, allowed engines, operand slot names, named immediates, flag bits.

    Immediate kinds: ``u32``, ``i32``, ``f32``, ``alu`` / ``act`` / ``reduce_cmd`` (enum codes), ``value`` (MEMSET:
    i32 when flag bit0 is set, else f32).
    """

    code: int
    engines: tuple[str, ...]
    slots: tuple[str, ...]
    imms: tuple[tuple[str, str], ...] = ()
    flags: tuple[str, ...] = ()


_ELEMENTWISE = ("dve", "pool", "act")
OP_SPECS: dict[str, OpSpec] = {
    "DMA_COPY": OpSpec(0x01, ("sp",), ("dst", "src"), (("queue", "u32"),), ("transpose",)),
    "MATMUL": OpSpec(0x02, ("pe",), ("dst", "stationary", "moving"), (), ("accumulate",)),
    "TRANSPOSE": OpSpec(0x03, ("pe", "dve"), ("dst", "src")),
    "TENSOR_TENSOR": OpSpec(0x04, _ELEMENTWISE, ("dst", "in0", "in1"), (("op", "alu"),)),
    "TENSOR_SCALAR": OpSpec(
        0x05, _ELEMENTWISE, ("dst", "src", "operand0", "operand1"),
        (("op0", "alu"), ("operand0", "f32"), ("op1", "alu"), ("operand1", "f32")),
        ("reverse0", "reverse1", "has_op1"),
    ),
    "TENSOR_REDUCE": OpSpec(0x06, ("dve", "pool"), ("dst", "src"), (("op", "alu"), ("num_dims", "u32")), ("negate",)),
    "ACTIVATE": OpSpec(
        0x07, ("act",), ("dst", "src", "bias", "scale", "reduce_res"),
        (("func", "act"), ("scale", "f32"), ("bias", "f32"), ("reduce_cmd", "reduce_cmd"), ("reduce_op", "alu")),
    ),
    "TENSOR_COPY": OpSpec(0x08, _ELEMENTWISE, ("dst", "src")),
    "MEMSET": OpSpec(0x09, _ELEMENTWISE, ("dst",), (("value", "value"),), ("int_value",)),
    "IOTA": OpSpec(0x0A, ("pool",), ("dst", "pattern"), (("offset", "i32"),)),
    "AFFINE_SELECT": OpSpec(
        0x0B, ("pool",), ("dst", "on_true", "pattern"), (("offset", "i32"), ("cmp_op", "alu"), ("on_false", "f32"))
    ),
    "RECIPROCAL": OpSpec(0x0C, ("dve",), ("dst", "src")),
    "TENSOR_SCALAR_REDUCE": OpSpec(
        0x0D, ("dve",), ("dst", "src", "operand0", "reduce_res"),
        (("op0", "alu"), ("operand0", "f32"), ("reduce_op", "alu")), ("reverse0", "negate"),
    ),
    "SCALAR_TENSOR_TENSOR": OpSpec(
        0x0E, ("dve", "pool"), ("dst", "data", "operand0", "operand1"),
        (("op0", "alu"), ("operand0", "f32"), ("op1", "alu")), ("reverse0", "reverse1"),
    ),
    "SEM_WAIT": OpSpec(0x0F, ENGINES, ()),
}  # fmt: skip
OPCODES: dict[str, int] = {name: spec.code for name, spec in OP_SPECS.items()}
OPCODE_NAMES: dict[int, str] = {code: name for name, code in OPCODES.items()}
_ENUMS: dict[str, tuple[str, ...]] = {"alu": ALU_OPS, "act": ACT_FUNCS, "reduce_cmd": REDUCE_CMDS}


@dataclass(frozen=True)
class Operand:
    """One access pattern (AP) operand.

    ``pattern`` holds ``(step, num)`` pairs, outermost first. For SBUF/PSUM pair 0 is the partition pair
    ``(1, nparts)`` and the other steps count elements of ``dtype``; for HBM every pair is an element step from
    ``address`` (a byte offset inside variable ``var_id``); for ``none`` it is an iota/affine_select pattern.
    """

    memory: str
    dtype: str
    pattern: tuple[tuple[int, int], ...]
    start_partition: int = 0
    address: int = 0
    var_id: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", tuple((int(s), int(n)) for s, n in self.pattern))
        if self.memory not in MEMORIES:
            raise ValueError(f"unknown memory '{self.memory}', expected one of {MEMORIES}")
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype '{self.dtype}'")
        if not 1 <= len(self.pattern) <= 1 + MAX_FREE_DIMS:
            raise ValueError(f"an operand pattern needs 1..{1 + MAX_FREE_DIMS} pairs, got {len(self.pattern)}")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(n for _, n in self.pattern)

    @property
    def num_partitions(self) -> int:
        return self.pattern[0][1]

    @property
    def free_size(self) -> int:
        """Elements per partition (product of the free nums); for HBM the elements per outermost row."""
        return math.prod(n for _, n in self.pattern[1:])

    @property
    def num_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype].itemsize


@dataclass(frozen=True)
class Instr:
    """One ISA instruction.

    Canonical form: trailing absent operand slots and trailing zero immediates are dropped on construction, so two
    instructions that encode to the same bytes compare equal. Use :meth:`operand` / :meth:`imm` for defaulted access.
    """

    opcode: str
    engine: str
    operands: tuple[Operand | None, ...] = ()
    imms: tuple[int, ...] = ()
    flags: int = 0
    wait_sem: int | None = None
    wait_value: int = 0
    signal_sem: int | None = None
    inst_id: int = 0

    def __post_init__(self) -> None:
        operands = list(self.operands)
        while operands and operands[-1] is None:
            operands.pop()
        imms = [int(v) for v in self.imms]
        while imms and imms[-1] == 0:
            imms.pop()
        object.__setattr__(self, "operands", tuple(operands))
        object.__setattr__(self, "imms", tuple(imms))

    @property
    def spec(self) -> OpSpec:
        return OP_SPECS[self.opcode]

    def operand(self, slot: int | str) -> Operand | None:
        """Operand in a slot given by index or by the opcode's slot name; None when absent."""
        index = self.spec.slots.index(slot) if isinstance(slot, str) else slot
        return self.operands[index] if index < len(self.operands) else None

    def imm(self, index: int) -> int:
        return self.imms[index] if index < len(self.imms) else 0

    def flag(self, name: str) -> bool:
        return bool(self.flags >> self.spec.flags.index(name) & 1)


# ---------------------------------------------------------------------------------------------------------------
# encoding


def _check_range(what: str, value: int, lo: int, hi: int) -> None:
    if not lo <= value <= hi:
        raise ValueError(f"{what} = {value} outside {lo}..{hi}")


def _pack_operand(op: Operand) -> bytes:
    _check_range("start_partition", op.start_partition, 0, 0xFF)
    _check_range("var_id", op.var_id, 0, 0xFFFF)
    _check_range("address", op.address, 0, 0xFFFFFFFF)
    pairs: list[int] = []
    for step, num in op.pattern:
        _check_range("pattern step", step, -(1 << 31), (1 << 31) - 1)
        _check_range("pattern num", num, 0, 0xFFFFFFFF)
        pairs += [step, num]
    pairs += [0, 0] * (1 + MAX_FREE_DIMS - len(op.pattern))
    return _OPERAND.pack(
        MEMORIES.index(op.memory), DTYPE_NAMES.index(op.dtype), op.start_partition, len(op.pattern) - 1,
        op.var_id, 0, op.address, *pairs,
    )  # fmt: skip


def _check_sem(what: str, sem: int | None) -> int:
    if sem is None:
        return NO_SEM
    if not valid_sem(sem):
        raise ValueError(f"{what} semaphore {sem} is not an engine (0..4) or DMA queue (8..23) semaphore")
    return sem


def _check_instr(engine: str, ins: Instr) -> OpSpec:
    if ins.opcode not in OP_SPECS:
        raise ValueError(f"unknown opcode '{ins.opcode}'")
    spec = OP_SPECS[ins.opcode]
    if ins.engine != engine:
        raise ValueError(f"{ins.opcode} is tagged engine '{ins.engine}' but is in the '{engine}' stream")
    if engine not in spec.engines:
        raise ValueError(f"{ins.opcode} cannot run on engine '{engine}' (allowed: {', '.join(spec.engines)})")
    if len(ins.operands) > len(spec.slots):
        raise ValueError(f"{ins.opcode} takes at most {len(spec.slots)} operands, got {len(ins.operands)}")
    if len(ins.imms) > MAX_IMMS:
        raise ValueError(f"at most {MAX_IMMS} immediates, got {len(ins.imms)}")
    if ins.flags >> len(spec.flags):
        raise ValueError(f"{ins.opcode} flags {ins.flags:#x} set undefined bits")
    for value in ins.imms:
        _check_range("immediate", value, 0, 0xFFFFFFFF)
    for (name, kind), value in zip(spec.imms, ins.imms):
        if kind in _ENUMS and value >= len(_ENUMS[kind]):
            raise ValueError(f"{ins.opcode} {name}: {kind} code {value} out of range")
    _check_range("wait_value", ins.wait_value, 0, 0xFFFFFFFF)
    _check_range("inst_id", ins.inst_id, 0, 0xFFFFFFFF)
    return spec


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
    mem, dt, start, nfree, var_id, _res, address, *pairs = _OPERAND.unpack_from(data, offset)
    if mem >= len(MEMORIES):
        raise _bad(f"operand {index}: bad memory code {mem}")
    if dt >= len(DTYPE_NAMES):
        raise _bad(f"operand {index}: bad dtype code {dt}")
    if nfree > MAX_FREE_DIMS:
        raise _bad(f"operand {index}: {nfree} free dims (max {MAX_FREE_DIMS})")
    pattern = tuple((pairs[2 * i], pairs[2 * i + 1]) for i in range(1 + nfree))
    return Operand(MEMORIES[mem], DTYPE_NAMES[dt], pattern, start, address, var_id)


def _decode_header(data: bytes) -> tuple[str, int, int]:
    if len(data) < _HEADER.size:
        raise _bad(f"{len(data)} bytes is shorter than the {_HEADER.size}-byte header")
    magic, version, engine_id, _res, n_instr, n_ops = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise _bad(f"bad magic {magic!r} (expected {MAGIC!r})")
    if version != VERSION:
        raise _bad(f"unsupported version {version} (expected {VERSION})")
    if engine_id >= len(ENGINES):
        raise _bad(f"bad engine id {engine_id}")
    expected = _HEADER.size + n_instr * _RECORD.size + n_ops * _OPERAND.size
    if len(data) != expected:
        raise _bad(f"size {len(data)} does not match {n_instr} instructions and {n_ops} operands ({expected} bytes)")
    return ENGINES[engine_id], n_instr, n_ops


def _decode_sem(index: int, what: str, sem: int) -> int | None:
    if sem == NO_SEM:
        return None
    if not valid_sem(sem):
        raise _bad(f"instruction {index}: bad {what} semaphore {sem}")
    return sem


def _decode_record(data: bytes, offset: int, index: int, engine: str, table: list[Operand]) -> Instr:
    code, eng, flags, wait, signal, _res, wait_value, inst_id, *rest = _RECORD.unpack_from(data, offset)
    slots, imms = rest[:MAX_SLOTS], rest[MAX_SLOTS:]
    if code not in OPCODE_NAMES:
        raise _bad(f"instruction {index}: unknown opcode {code:#x}")
    name = OPCODE_NAMES[code]
    spec = OP_SPECS[name]
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
    for (imm_name, kind), value in zip(spec.imms, imms):
        if kind in _ENUMS and value >= len(_ENUMS[kind]):
            raise _bad(f"instruction {index}: {name} {imm_name} has bad {kind} code {value}")
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


def _imm_value(kind: str, raw: int, flags: int) -> object:
    if kind == "value":
        kind = "i32" if flags & 1 else "f32"
    if kind == "f32":
        value = bits_f32(raw)
        return value if math.isfinite(value) else repr(value)  # JSON has no nan/inf literals
    if kind == "i32":
        return bits_i32(raw)
    if kind in _ENUMS:
        return _ENUMS[kind][raw] if raw < len(_ENUMS[kind]) else raw
    return raw


def imm_values(ins: Instr) -> dict[str, object]:
    """Immediates decoded by name (f32 as float, enums as names); unnamed non-zero ones appear as ``immN``."""
    named = ins.spec.imms
    out: dict[str, object] = {}
    for i in range(max(len(named), len(ins.imms))):
        if i < len(named):
            out[named[i][0]] = _imm_value(named[i][1], ins.imm(i), ins.flags)
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
