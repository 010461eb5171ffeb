"""Physical-location instruction ops shared by the per-engine ISA dialects (``isa_pe``, ``isa_act``, ...).

An ISA op is one record of ``runtime/ISA_FORMAT.md``: every operand is a physical location (``IsaLocAttr``) plus the
record's ``[step, num]`` pattern, and every immediate / flag bit is a named property. Each instruction format is one
base class below (roles = the opcode's operand slots in slot order, ``IMMS`` / ``FLAGS`` = its immediate and flag
tables); the engine modules only attach a name and an engine to a format::

    isa_act.activate dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]],
                     src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 1 : i64, func = "exp"}

``to_instr`` / ``from_instr`` convert to and from ``runtime.encoding.Instr``. The decoded form is canonical:
properties equal to their encoding default (``scale = 1.0``, ``bias = 0.0``, false flags, ...) are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Self

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BoolAttr,
    Float32Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    f32,
    i64,
)
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import AnyOf, base, irdl_attr_definition, opt_prop_def, prop_def
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from nkic.dialects.common import (
    ACT_FUNCS,
    ALU_OPS,
    DTYPES,
    REDUCE_CMDS,
    AccessPatternAttr,
    attr_of,
    check_member,
    dtype_size,
    value_of,
)
from nkic.dialects.inst import RoleOperandOp
from nkic.runtime.costs import TARGETS
from nkic.runtime.encoding import (
    ENGINES,
    MEMORIES,
    NUM_DMA_QUEUES,
    OP_SPECS,
    Instr,
    Operand,
    bits_f32,
    bits_i32,
    engine_sem,
    f32_bits,
    i32_bits,
    queue_sem,
    valid_sem,
)

NUM_PARTITIONS = 128
# Static per-partition bounds; the simulator's target may be smaller, but no target is larger.
CAPACITY: dict[str, int] = {"sbuf": max(t.sbuf_bytes_per_partition for t in TARGETS.values()), "psum": 16384}
PSUM_BANK_BYTES = 2048
MAX_PAIRS = 5  # partition pair + at most 4 free dims (operand table entry)
MAX_MATMUL_N = 512
U32_MAX = 0xFFFFFFFF
ENUMS: dict[str, tuple[str, ...]] = {"alu": ALU_OPS, "act": ACT_FUNCS, "reduce_cmd": REDUCE_CMDS}
_ENUM_WHAT = {"alu": "ALU opcode", "act": "activation function", "reduce_cmd": "reduce command"}


# ------------------------------------------------------------------------------------------------------------------
# Physical locations
# ------------------------------------------------------------------------------------------------------------------


@irdl_attr_definition
class IsaLocAttr(ParametrizedAttribute):
    """Where an operand lives: ``sbuf(p0, 0x400, float32)``, ``hbm(var 2, 0x0, bfloat16)``, ``none(int32)``.

    Only the fields meaningful for the memory are printed, so verification insists the others are zero.
    """

    name = "isa.loc"

    memory: StringAttr
    start_partition: IntAttr
    address: IntAttr
    dtype: StringAttr
    var_id: IntAttr

    def __init__(self, memory: str, dtype: str, start_partition: int = 0, address: int = 0, var_id: int = 0):
        super().__init__(
            StringAttr(memory), IntAttr(start_partition), IntAttr(address), StringAttr(dtype), IntAttr(var_id)
        )

    @classmethod
    def of(cls, op: Operand) -> IsaLocAttr:
        return cls(op.memory, op.dtype, op.start_partition, op.address, op.var_id)

    @property
    def mem(self) -> str:
        return self.memory.data

    @property
    def dt(self) -> str:
        return self.dtype.data

    @property
    def start(self) -> int:
        return self.start_partition.data

    @property
    def addr(self) -> int:
        return self.address.data

    @property
    def var(self) -> int:
        return self.var_id.data

    def verify(self) -> None:
        check_member("memory", self.mem, MEMORIES)
        check_member("dtype", self.dt, tuple(DTYPES))
        if not 0 <= self.addr <= U32_MAX:
            raise VerifyException(f"address {self.addr:#x} does not fit in 32 bits")
        if self.mem in ("sbuf", "psum") and not 0 <= self.start < NUM_PARTITIONS:
            raise VerifyException(f"start partition {self.start} outside 0..{NUM_PARTITIONS - 1}")
        if self.mem != "hbm" and self.var:
            raise VerifyException(f"only HBM locations have a variable id, {self.mem} has var {self.var}")
        if self.mem == "hbm" and not 0 <= self.var <= 0xFFFF:
            raise VerifyException(f"HBM variable id {self.var} does not fit in 16 bits")
        if self.mem in ("hbm", "none") and self.start:
            raise VerifyException(f"{self.mem} locations have no start partition")
        if self.mem == "none" and self.addr:
            raise VerifyException("pattern-only (none) locations have no address")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return parse_loc_body(parser).parameters

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<" + loc_str(self) + ">")


def loc_str(loc: IsaLocAttr) -> str:
    if loc.mem in ("sbuf", "psum"):
        return f"{loc.mem}(p{loc.start}, {loc.addr:#x}, {loc.dt})"
    if loc.mem == "hbm":
        return f"hbm(var {loc.var}, {loc.addr:#x}, {loc.dt})"
    return f"{loc.mem}({loc.dt})"


def _parse_partition(parser: AttrParser) -> int:
    word = parser.parse_identifier(" (a start partition like 'p0')")
    if not (word.startswith("p") and word[1:].isdigit()):
        parser.raise_error(f"expected a start partition like 'p0', got '{word}'")
    return int(word[1:])


def parse_loc_body(parser: AttrParser) -> IsaLocAttr:
    """Parse ``sbuf(p0, 0x400, float32)`` / ``hbm(var 2, 0x0, bfloat16)`` / ``none(int32)``."""
    memory = parser.parse_identifier(" (a memory: sbuf, psum, hbm or none)")
    if memory not in MEMORIES:
        parser.raise_error(f"unknown memory '{memory}', expected one of: {', '.join(MEMORIES)}")
    parser.parse_punctuation("(")
    start = address = var_id = 0
    if memory in ("sbuf", "psum"):
        start = _parse_partition(parser)
        parser.parse_punctuation(",")
    elif memory == "hbm":
        parser.parse_keyword("var")
        var_id = parser.parse_integer(allow_negative=False)
        parser.parse_punctuation(",")
    if memory != "none":
        address = parser.parse_integer(allow_negative=False)
        parser.parse_punctuation(",")
    dtype = parser.parse_identifier(" (a dtype)")
    parser.parse_punctuation(")")
    return IsaLocAttr(memory, dtype, start, address, var_id)


# ------------------------------------------------------------------------------------------------------------------
# Immediates
# ------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Imm:
    """One immediate word of a format, named after the property that holds it.

    ``kind``: ``alu`` / ``act`` / ``reduce_cmd`` (enum code of a string), ``u32``, ``i32`` or ``f32``.
    ``default``: encoded when the property is absent; decoding omits the property when it equals the default.
    ``tensor_role``: the operand slot that replaces this immediate (the scalar is a tensor or an immediate, never
    both); ``required`` means one of the two must be given.
    """

    prop: str
    kind: str
    default: str | int | float | None = None
    tensor_role: str | None = None
    required: bool = False


def encode_imm(kind: str, value: str | int | float | None) -> int:
    if value is None:
        return 0
    if kind in ENUMS:
        return ENUMS[kind].index(str(value))
    if kind == "f32":
        return f32_bits(float(value))
    if kind == "i32":
        return i32_bits(int(value))
    return int(value)


def decode_imm(kind: str, raw: int) -> Attribute:
    if kind in ENUMS:
        if raw >= len(ENUMS[kind]):
            raise ValueError(f"{kind} code {raw} out of range")
        return StringAttr(ENUMS[kind][raw])
    if kind == "f32":
        return FloatAttr(bits_f32(raw), f32)
    if kind == "i32":
        return IntegerAttr(bits_i32(raw), i64)
    return IntegerAttr(raw, i64)


# Field values <-> attributes are shared with the other levels (``common.attr_of`` / ``common.value_of``).
to_attr = attr_of
attr_value = value_of


def _free_size(pairs: Sequence[tuple[int, int]]) -> int:
    return math.prod(n for _, n in pairs[1:])


def _span(pairs: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """Lowest and highest element offset a pattern touches."""
    lo = hi = 0
    for step, num in pairs:
        lo += min(0, step * (num - 1))
        hi += max(0, step * (num - 1))
    return lo, hi


def byte_range(loc: IsaLocAttr, ap: AccessPatternAttr) -> tuple[int, int]:
    """Half-open byte range ``[lo, hi)`` touched inside a partition (SBUF/PSUM) or an HBM variable."""
    pairs = ap.pairs if loc.mem == "hbm" else ap.pairs[1:]
    lo, hi = _span(pairs)
    size = dtype_size(loc.dt)
    return loc.addr + size * lo, loc.addr + size * (hi + 1)


# ------------------------------------------------------------------------------------------------------------------
# The instruction base
# ------------------------------------------------------------------------------------------------------------------

_BASE_PROPS = ("roles", "aps", "locs", "id", "wait_sem", "wait_value", "signal_sem")


class IsaInst(RoleOperandOp):
    """One ISA instruction of engine ``ENGINE`` with opcode ``MNEMONIC`` (see ``runtime/ISA_FORMAT.md``)."""

    ENGINE: ClassVar[str] = ""
    MNEMONIC: ClassVar[str] = ""
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    IMMS: ClassVar[tuple[Imm, ...]] = ()
    # Flag bit i is the boolean property FLAGS[i], except names in DERIVED_FLAGS (computed from other fields).
    FLAGS: ClassVar[tuple[str, ...]] = ()
    DERIVED_FLAGS: ClassVar[frozenset[str]] = frozenset()
    OPERAND_PROPS: ClassVar[tuple[str, ...]] = ("roles", "aps", "locs")

    locs = prop_def(ArrayAttr[IsaLocAttr])
    id = prop_def(IntegerAttr[I64])
    wait_sem = opt_prop_def(IntegerAttr[I64])
    wait_value = opt_prop_def(IntegerAttr[I64])
    signal_sem = opt_prop_def(IntegerAttr[I64])

    @classmethod
    def format_key(cls) -> str:
        return cls.MNEMONIC.lower()

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def make(
        cls,
        inst_id: int,
        operands: Mapping[str, Operand | None] | None = None,
        *,
        wait_sem: int | None = None,
        wait_value: int | None = None,
        signal_sem: int | None = None,
        **fields: object,
    ) -> Self:
        """Build from encoding operands by role and Python field values (``func="exp"``, ``scale=2.0``, ...)."""
        given = {r: op for r, op in (operands or {}).items() if op is not None}
        unknown = set(given) - set(cls.ROLES)
        if unknown:
            raise ValueError(f"'{cls.name}' has no operand role(s) {sorted(unknown)}")
        roles = [r for r in cls.ROLES if r in given]
        props: dict[str, Attribute] = {
            "roles": ArrayAttr([StringAttr(r) for r in roles]),
            "aps": ArrayAttr([AccessPatternAttr(0, given[r].pattern) for r in roles]),
            "locs": ArrayAttr([IsaLocAttr.of(given[r]) for r in roles]),
            "id": IntegerAttr(inst_id, i64),
        }
        # None, and False for a flag, mean "absent" so that built ops are canonical (as decoded ops are).
        props.update({k: to_attr(v) for k, v in fields.items() if v is not None and not cls._is_clear_flag(k, v)})
        sems = {"wait_sem": wait_sem, "wait_value": wait_value, "signal_sem": signal_sem}
        props.update({k: IntegerAttr(v, i64) for k, v in sems.items() if v is not None})
        return cls.create(properties=cls._ordered(props))

    @classmethod
    def _is_clear_flag(cls, name: str, value: object) -> bool:
        return name in cls.FLAGS and name not in cls.DERIVED_FLAGS and value is False

    @classmethod
    def _ordered(cls, props: dict[str, Attribute]) -> dict[str, Attribute]:
        """Canonical print order: operands, id, format fields in declaration order, semaphores, anything else."""
        fields = [k for k in cls.get_irdl_definition().properties if k not in _BASE_PROPS]
        order = ["roles", "aps", "locs", "id", *fields, "wait_sem", "wait_value", "signal_sem"]
        out = {k: props[k] for k in order if k in props}
        out.update({k: v for k, v in props.items() if k not in out})
        return out

    # -- RoleOperandOp hooks ------------------------------------------------------------------------
    def _num_refs(self) -> int:
        return len(self.locs.data)

    def _print_ref(self, printer: Printer, index: int) -> None:
        printer.print_string(loc_str(self.locs.data[index]))

    @classmethod
    def _parse_ref(cls, parser: Parser) -> object:
        return parse_loc_body(parser)

    @classmethod
    def _build(cls, refs: list[object], props: dict[str, Attribute], attrs: dict[str, Attribute]) -> Self:
        props["locs"] = ArrayAttr(refs)  # type: ignore[arg-type]
        return cls.create(properties=cls._ordered(props), attributes=attrs)

    # -- accessors ----------------------------------------------------------------------------------
    @property
    def inst_id(self) -> int:
        return self.id.value.data

    def loc(self, role: str) -> IsaLocAttr | None:
        i = self.role_index(role)
        return None if i is None else self.locs.data[i]

    def operand(self, role: str) -> Operand | None:
        loc, ap = self.loc(role), self.ap(role)
        if loc is None or ap is None:
            return None
        return Operand(loc.mem, loc.dt, tuple(ap.pairs), loc.start, loc.addr, loc.var)

    def field(self, name: str) -> str | int | float | bool | None:
        return attr_value(self.properties.get(name))

    def dims(self, role: str) -> tuple[int, int]:
        """(partitions, elements per partition) of an on-chip or pattern operand."""
        pairs = self.ap(role).pairs
        return pairs[0][1], _free_size(pairs)

    def _sem(self, name: str) -> int | None:
        v = self.properties.get(name)
        return int(v.value.data) if isinstance(v, IntegerAttr) else None

    # -- encoding -----------------------------------------------------------------------------------
    def to_instr(self) -> Instr:
        return Instr(
            opcode=self.MNEMONIC,
            engine=self.ENGINE,
            operands=tuple(self.operand(r) for r in self.ROLES),
            imms=self.encode_imms(),
            flags=self.encode_flags(),
            wait_sem=self._sem("wait_sem"),
            wait_value=self._sem("wait_value") or 0,
            signal_sem=self._sem("signal_sem"),
            inst_id=self.inst_id,
        )

    def encode_imms(self) -> tuple[int, ...]:
        return tuple(self._encode_one(imm) for imm in self.IMMS)

    def _encode_one(self, imm: Imm) -> int:
        if imm.tensor_role is not None and self.has(imm.tensor_role):
            return 0  # the slot carries the scalar; the immediate word is unused
        value = self.field(imm.prop)
        return encode_imm(imm.kind, imm.default if value is None else value)

    def encode_flags(self) -> int:
        return sum(1 << bit for bit, name in enumerate(self.FLAGS) if self.flag(name))

    def flag(self, name: str) -> bool:
        """Value of flag ``name``; formats with DERIVED_FLAGS override this for those names."""
        return bool(self.field(name))

    @classmethod
    def from_instr(cls, instr: Instr) -> Self:
        cls._check_decodable(instr)
        operands = dict(zip(cls.ROLES, instr.operands))
        has_wait = instr.wait_sem is not None
        return cls.make(
            instr.inst_id,
            operands,
            wait_sem=instr.wait_sem,
            wait_value=instr.wait_value if has_wait else None,
            signal_sem=instr.signal_sem,
            **cls.decode_fields(instr),
        )

    @classmethod
    def _check_decodable(cls, instr: Instr) -> None:
        """Reject records this op cannot represent instead of silently dropping their contents."""
        if (instr.opcode, instr.engine) != (cls.MNEMONIC, cls.ENGINE):
            raise ValueError(f"'{cls.name}' cannot hold {instr.opcode} on {instr.engine}")
        if len(instr.operands) > len(cls.ROLES):
            raise ValueError(f"{instr.opcode} has {len(instr.operands)} operands, at most {len(cls.ROLES)} slots")
        if len(instr.imms) > len(cls.IMMS):
            raise ValueError(f"{instr.opcode} sets immediate {len(instr.imms) - 1}, beyond its {len(cls.IMMS)}")
        if instr.flags >> len(cls.FLAGS):
            raise ValueError(f"{instr.opcode} sets undefined flag bits {instr.flags:#x}")
        if instr.wait_sem is None and instr.wait_value:
            raise ValueError(f"{instr.opcode} has a wait value without a wait semaphore")

    @classmethod
    def decode_fields(cls, instr: Instr) -> dict[str, Attribute]:
        fields: dict[str, Attribute] = {}
        for index, imm in enumerate(cls.IMMS):
            slot = cls.ROLES.index(imm.tensor_role) if imm.tensor_role is not None else None
            if slot is not None and slot < len(instr.operands) and instr.operands[slot] is not None:
                continue
            raw = instr.imm(index)
            if imm.default is not None and raw == encode_imm(imm.kind, imm.default):
                continue
            fields[imm.prop] = decode_imm(imm.kind, raw)
        for bit, name in enumerate(cls.FLAGS):
            if name not in cls.DERIVED_FLAGS and instr.flags >> bit & 1:
                fields[name] = IntegerAttr.from_bool(True)
        return fields

    # -- verification -------------------------------------------------------------------------------
    def verify_fields(self) -> None:
        self._verify_header()
        for role in self.role_names:
            self._verify_operand(role)
        self._verify_imms()
        self.verify_format()

    def verify_format(self) -> None:
        """Format-specific shape and field checks; formats override."""

    def _verify_header(self) -> None:
        spec = OP_SPECS[self.MNEMONIC]
        if self.ENGINE not in spec.engines:
            raise VerifyException(f"{self.MNEMONIC} cannot run on engine '{self.ENGINE}'")
        if not 0 <= self.inst_id <= U32_MAX:
            raise VerifyException(f"instruction id {self.inst_id} does not fit in 32 bits")
        self._verify_sems()

    def _verify_sems(self) -> None:
        wait, value, signal = self._sem("wait_sem"), self._sem("wait_value"), self._sem("signal_sem")
        if (wait is None) != (value is None):
            raise VerifyException("wait_sem and wait_value must be given together")
        if wait is not None and not valid_sem(wait):
            raise VerifyException(f"wait_sem {wait} is not an engine (0..4) or DMA queue (8..23) semaphore")
        if value is not None and not 0 <= value <= U32_MAX:
            raise VerifyException(f"wait_value {value} does not fit in 32 bits")
        expected = self.signalled_sem()
        if signal is not None and signal != expected:
            raise VerifyException(f"'{self.name}' may only signal semaphore {expected}, not {signal}")

    def signalled_sem(self) -> int:
        """The semaphore this instruction signals at completion (ISA_FORMAT: its own engine's)."""
        return engine_sem(self.ENGINE)

    def _verify_operand(self, role: str) -> None:
        loc, ap = self.loc(role), self.ap(role)
        if ap.offset.data or ap.iv_coeffs:
            raise VerifyException(f"'{role}': ISA patterns have offset 0 and no loop terms (use the address)")
        if len(ap.pairs) > MAX_PAIRS:
            raise VerifyException(f"'{role}': {len(ap.pairs) - 1} free dims, at most {MAX_PAIRS - 1}")
        self._verify_memory(role, loc.mem)
        if loc.mem in CAPACITY:
            self._verify_onchip(role, loc, ap)
        elif loc.mem == "hbm" and byte_range(loc, ap)[0] < 0:
            raise VerifyException(f"'{role}': HBM access starts before its variable")

    def _verify_memory(self, role: str, mem: str) -> None:
        if (role == "pattern") != (mem == "none"):
            raise VerifyException(f"'{role}': only the 'pattern' slot is pattern-only (none), got {mem}")
        if mem == "hbm" and self.ENGINE != "sp":
            raise VerifyException(f"'{role}': engine {self.ENGINE} cannot access HBM (only SP DMA can)")
        if mem == "psum" and self.ENGINE in ("pool", "sp"):
            raise VerifyException(f"'{role}': engine {self.ENGINE} cannot access PSUM")
        if self.ENGINE == "pe":
            want = "psum" if role == "dst" else "sbuf"
            if mem != want:
                raise VerifyException(f"'{role}': PE {self.MNEMONIC} {role} must be in {want}, got {mem}")

    def _verify_onchip(self, role: str, loc: IsaLocAttr, ap: AccessPatternAttr) -> None:
        step, nparts = ap.pairs[0]
        if step != 1:
            raise VerifyException(f"'{role}': partition pair must be [1, num_partitions], got [{step}, {nparts}]")
        if loc.start + nparts > NUM_PARTITIONS:
            raise VerifyException(
                f"'{role}': partitions {loc.start}..{loc.start + nparts - 1} exceed the {NUM_PARTITIONS} partitions"
            )
        lo, hi = byte_range(loc, ap)
        if lo < 0 or hi > CAPACITY[loc.mem]:
            raise VerifyException(
                f"'{role}': bytes [{lo:#x}, {hi:#x}) outside the {CAPACITY[loc.mem]}-byte {loc.mem} partition"
            )

    def _verify_imms(self) -> None:
        for imm in self.IMMS:
            value = self.field(imm.prop)
            if imm.kind in ENUMS and value is not None:
                check_member(_ENUM_WHAT[imm.kind], str(value), ENUMS[imm.kind])
            if imm.kind == "u32" and value is not None and not 0 <= int(value) <= U32_MAX:
                raise VerifyException(f"{imm.prop} = {value} does not fit in 32 bits")
            if imm.kind == "i32" and value is not None and not -(1 << 31) <= int(value) < (1 << 31):
                raise VerifyException(f"{imm.prop} = {value} does not fit in int32")
            if imm.tensor_role is not None:
                self._scalar_xor_tensor(imm)

    def _scalar_xor_tensor(self, imm: Imm) -> None:
        has_t, has_v = self.has(imm.tensor_role), imm.prop in self.properties
        if has_t and has_v:
            raise VerifyException(f"'{imm.prop}' is given both as a tensor and as an immediate")
        if imm.required and not (has_t or has_v):
            raise VerifyException(f"'{self.name}' requires '{imm.prop}' (a tensor or an immediate)")

    # -- shape helpers for verify_format ------------------------------------------------------------
    def same_dims(self, *roles: str) -> None:
        """Every present role has dst's (partitions, elements per partition)."""
        want = self.dims("dst")
        for r in roles:
            if self.has(r) and self.dims(r) != want:
                raise VerifyException(f"'{r}' is {self.dims(r)} (partitions, free) but dst is {want}")

    def scalar_tiles(self, *roles: str) -> None:
        """Every present role is a (P, 1) tile, P = dst's partitions (scalars broadcast along the free dims)."""
        nparts = self.dims("dst")[0]
        for r in roles:
            if self.has(r) and self.dims(r) != (nparts, 1):
                raise VerifyException(f"'{r}' must be a ({nparts}, 1) tile, got {self.dims(r)}")


# ------------------------------------------------------------------------------------------------------------------
# One base class per instruction format (ISA_FORMAT.md "Opcodes" table)
# ------------------------------------------------------------------------------------------------------------------


class DmaCopyFormat(IsaInst):
    """``DMA_COPY`` (SP): ``dst = src`` on DMA queue ``queue``; ``transpose`` swaps src's first and last dims."""

    MNEMONIC: ClassVar[str] = "DMA_COPY"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "src")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "src")
    IMMS: ClassVar[tuple[Imm, ...]] = (Imm("queue", "u32"),)
    FLAGS: ClassVar[tuple[str, ...]] = ("transpose",)
    queue = prop_def(IntegerAttr[I64])
    transpose = opt_prop_def(BoolAttr)

    def queue_index(self) -> int:
        queue = int(self.field("queue"))
        if not 0 <= queue < NUM_DMA_QUEUES:
            raise VerifyException(f"DMA queue {queue} outside 0..{NUM_DMA_QUEUES - 1}")
        return queue

    def signalled_sem(self) -> int:
        return queue_sem(self.queue_index())  # the queue signals when the transfer completes

    def verify_format(self) -> None:
        self.queue_index()
        dst, src = self.ap("dst"), self.ap("src")
        if dst.num_elements != src.num_elements:
            raise VerifyException(f"DMA element counts differ: dst {dst.shape}, src {src.shape}")
        if self.flag("transpose"):
            want = (src.shape[-1], *src.shape[1:-1], src.shape[0])
            if not 2 <= len(src.shape) <= 4 or dst.shape != want:
                raise VerifyException(
                    f"transposing DMA needs 2-D to 4-D operands with dst = src with its first and last dims "
                    f"swapped, got {dst.shape}, {src.shape}"
                )


class MatmulFormat(IsaInst):
    """``MATMUL`` (PE): ``dst[M, N] (+)= stationary[K, M]^T @ moving[K, N]`` into one PSUM bank."""

    MNEMONIC: ClassVar[str] = "MATMUL"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "stationary", "moving")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "stationary", "moving")
    FLAGS: ClassVar[tuple[str, ...]] = ("accumulate",)
    accumulate = opt_prop_def(BoolAttr)

    def verify_format(self) -> None:
        (m, n), (k, m_st), (k_mv, n_mv) = self.dims("dst"), self.dims("stationary"), self.dims("moving")
        if k != k_mv or m != m_st or n != n_mv:
            raise VerifyException(
                f"matmul shapes: stationary {k}x{m_st}, moving {k_mv}x{n_mv}, dst {m}x{n}"
            )
        if n > MAX_MATMUL_N:
            raise VerifyException(f"matmul free size {n} exceeds {MAX_MATMUL_N}")
        lo, hi = byte_range(self.loc("dst"), self.ap("dst"))
        if lo // PSUM_BANK_BYTES != (hi - 1) // PSUM_BANK_BYTES:
            raise VerifyException(f"matmul dst bytes [{lo:#x}, {hi:#x}) cross a {PSUM_BANK_BYTES}-byte PSUM bank")


class TransposeFormat(IsaInst):
    """``TRANSPOSE`` (PE, DVE): ``dst[F, P] = src[P, F]``."""

    MNEMONIC: ClassVar[str] = "TRANSPOSE"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "src")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "src")

    def verify_format(self) -> None:
        if self.dims("dst") != self.dims("src")[::-1]:
            raise VerifyException(f"transpose of {self.dims('src')} cannot produce {self.dims('dst')}")


class TensorTensorFormat(IsaInst):
    """``TENSOR_TENSOR``: ``dst = in0 <op> in1`` elementwise."""

    MNEMONIC: ClassVar[str] = "TENSOR_TENSOR"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "in0", "in1")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "in0", "in1")
    IMMS: ClassVar[tuple[Imm, ...]] = (Imm("op", "alu"),)
    op = prop_def(StringAttr)

    def verify_format(self) -> None:
        self.same_dims("in0", "in1")


class TensorScalarFormat(IsaInst):
    """``TENSOR_SCALAR``: ``dst = (src <op0> operand0) <op1> operand1``; each operand a (P, 1) tile or an f32."""

    MNEMONIC: ClassVar[str] = "TENSOR_SCALAR"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "src", "operand0", "operand1")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "src")
    IMMS: ClassVar[tuple[Imm, ...]] = (
        Imm("op0", "alu"),
        Imm("operand0", "f32", tensor_role="operand0", required=True),
        Imm("op1", "alu"),
        Imm("operand1", "f32", tensor_role="operand1"),
    )
    FLAGS: ClassVar[tuple[str, ...]] = ("reverse0", "reverse1", "has_op1")
    DERIVED_FLAGS: ClassVar[frozenset[str]] = frozenset({"has_op1"})
    op0 = prop_def(StringAttr)
    operand0 = opt_prop_def(FloatAttr[Float32Type])
    reverse0 = opt_prop_def(BoolAttr)
    op1 = opt_prop_def(StringAttr)
    operand1 = opt_prop_def(FloatAttr[Float32Type])
    reverse1 = opt_prop_def(BoolAttr)

    def flag(self, name: str) -> bool:
        return "op1" in self.properties if name == "has_op1" else super().flag(name)

    @classmethod
    def decode_fields(cls, instr: Instr) -> dict[str, Attribute]:
        fields = super().decode_fields(instr)
        if not instr.flags >> 2 & 1:
            # Without op1 the op1/operand1 words are unused padding.
            fields.pop("op1", None)
            fields.pop("operand1", None)
        return fields

    def verify_format(self) -> None:
        has_second = self.has("operand1") or "operand1" in self.properties or self.flag("reverse1")
        if "op1" not in self.properties and has_second:
            raise VerifyException("operand1/reverse1 given without op1")
        if "op1" in self.properties and not (self.has("operand1") or "operand1" in self.properties):
            raise VerifyException("op1 needs operand1 (a tensor or an immediate)")
        self.same_dims("src")
        self.scalar_tiles("operand0", "operand1")


class TensorReduceFormat(IsaInst):
    """``TENSOR_REDUCE``: reduce the trailing ``num_reduced_dims`` free dims of ``src`` (0 = all) with ``op``."""

    MNEMONIC: ClassVar[str] = "TENSOR_REDUCE"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "src")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "src")
    IMMS: ClassVar[tuple[Imm, ...]] = (Imm("op", "alu"), Imm("num_reduced_dims", "u32", default=0))
    FLAGS: ClassVar[tuple[str, ...]] = ("negate",)
    op = prop_def(StringAttr)
    num_reduced_dims = opt_prop_def(IntegerAttr[I64])
    negate = opt_prop_def(BoolAttr)

    def verify_format(self) -> None:
        free_dims = self.ap("src").shape[1:]
        k = int(self.field("num_reduced_dims") or 0) or len(free_dims)
        if k > len(free_dims):
            raise VerifyException(f"cannot reduce {k} trailing dims of {len(free_dims)} free dims")
        kept = math.prod(free_dims[: len(free_dims) - k])
        (dp, df), sp = self.dims("dst"), self.dims("src")[0]
        if (dp, df) != (sp, kept):
            raise VerifyException(f"tensor_reduce dst is {(dp, df)}, expected {(sp, kept)}")


class ActivateFormat(IsaInst):
    """``ACTIVATE`` (ACT): ``dst = func(src * scale + bias)``, optionally reducing into ``reduce_res``."""

    MNEMONIC: ClassVar[str] = "ACTIVATE"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "src", "bias", "scale", "reduce_res")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "src")
    IMMS: ClassVar[tuple[Imm, ...]] = (
        Imm("func", "act"),
        Imm("scale", "f32", default=1.0, tensor_role="scale"),
        Imm("bias", "f32", default=0.0, tensor_role="bias"),
        Imm("reduce_cmd", "reduce_cmd", default="idle"),
        Imm("reduce_op", "alu", default="bypass"),
    )
    func = prop_def(StringAttr)
    scale = opt_prop_def(FloatAttr[Float32Type])
    bias = opt_prop_def(FloatAttr[Float32Type])
    reduce_cmd = opt_prop_def(StringAttr)
    reduce_op = opt_prop_def(StringAttr)

    def verify_format(self) -> None:
        self.same_dims("src")
        self.scalar_tiles("bias", "scale", "reduce_res")


class TensorCopyFormat(IsaInst):
    """``TENSOR_COPY``: ``dst = src`` (with dtype conversion)."""

    MNEMONIC: ClassVar[str] = "TENSOR_COPY"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "src")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "src")

    def verify_format(self) -> None:
        self.same_dims("src")


class MemsetFormat(IsaInst):
    """``MEMSET``: fill ``dst`` with ``value`` (an f32 FloatAttr, or an integer attribute for an int32 fill)."""

    MNEMONIC: ClassVar[str] = "MEMSET"
    ROLES: ClassVar[tuple[str, ...]] = ("dst",)
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst",)
    # The word is i32 when the int_value flag is set, else f32 (see encode_imms / decode_fields).
    IMMS: ClassVar[tuple[Imm, ...]] = (Imm("value", "f32"),)
    FLAGS: ClassVar[tuple[str, ...]] = ("int_value",)
    DERIVED_FLAGS: ClassVar[frozenset[str]] = frozenset({"int_value"})
    value = prop_def(AnyOf((base(FloatAttr), base(IntegerAttr))))

    def flag(self, name: str) -> bool:
        return isinstance(self.value, IntegerAttr) if name == "int_value" else super().flag(name)

    def encode_imms(self) -> tuple[int, ...]:
        return (encode_imm("i32" if self.flag("int_value") else "f32", self.field("value")),)

    @classmethod
    def decode_fields(cls, instr: Instr) -> dict[str, Attribute]:
        return {"value": decode_imm("i32" if instr.flags & 1 else "f32", instr.imm(0))}

    def verify_format(self) -> None:
        value = self.field("value")
        # int32 only: the decoder reads the word back as signed, so u32 values above 2**31 would not round-trip.
        if isinstance(self.value, IntegerAttr) and not -(1 << 31) <= int(value) < (1 << 31):
            raise VerifyException(f"memset value {value} does not fit in int32")


class IotaFormat(IsaInst):
    """``IOTA`` (POOL): ``dst[p, i...] = offset + p * pattern[0].step + sum(step * i)`` over the pattern."""

    MNEMONIC: ClassVar[str] = "IOTA"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "pattern")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "pattern")
    IMMS: ClassVar[tuple[Imm, ...]] = (Imm("offset", "i32", default=0),)
    offset = opt_prop_def(IntegerAttr[I64])

    def verify_format(self) -> None:
        self.same_dims("pattern")


class AffineSelectFormat(IsaInst):
    """``AFFINE_SELECT`` (POOL): ``dst = (affine value <cmp_op> 0) ? on_true : on_false_value``."""

    MNEMONIC: ClassVar[str] = "AFFINE_SELECT"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "on_true", "pattern")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "on_true", "pattern")
    IMMS: ClassVar[tuple[Imm, ...]] = (
        Imm("offset", "i32", default=0),
        Imm("cmp_op", "alu"),
        Imm("on_false_value", "f32"),
    )
    offset = opt_prop_def(IntegerAttr[I64])
    cmp_op = prop_def(StringAttr)
    on_false_value = prop_def(FloatAttr[Float32Type])

    def verify_format(self) -> None:
        self.same_dims("on_true", "pattern")


class ReciprocalFormat(IsaInst):
    """``RECIPROCAL`` (DVE): ``dst = 1 / src``."""

    MNEMONIC: ClassVar[str] = "RECIPROCAL"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "src")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "src")

    def verify_format(self) -> None:
        self.same_dims("src")


class TensorScalarReduceFormat(IsaInst):
    """``TENSOR_SCALAR_REDUCE`` (DVE): ``dst = src <op0> operand0``; ``reduce_res = (-)reduce(reduce_op, dst)``."""

    MNEMONIC: ClassVar[str] = "TENSOR_SCALAR_REDUCE"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "src", "operand0", "reduce_res")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "src")
    IMMS: ClassVar[tuple[Imm, ...]] = (
        Imm("op0", "alu"),
        Imm("operand0", "f32", tensor_role="operand0", required=True),
        Imm("reduce_op", "alu"),
    )
    FLAGS: ClassVar[tuple[str, ...]] = ("reverse0", "negate")
    op0 = prop_def(StringAttr)
    operand0 = opt_prop_def(FloatAttr[Float32Type])
    reduce_op = prop_def(StringAttr)
    reverse0 = opt_prop_def(BoolAttr)
    negate = opt_prop_def(BoolAttr)

    def verify_format(self) -> None:
        self.same_dims("src")
        self.scalar_tiles("operand0", "reduce_res")


class ScalarTensorTensorFormat(IsaInst):
    """``SCALAR_TENSOR_TENSOR`` (DVE, POOL): ``dst = (data <op0> operand0) <op1> operand1`` (operand1 a tensor)."""

    MNEMONIC: ClassVar[str] = "SCALAR_TENSOR_TENSOR"
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "data", "operand0", "operand1")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "data", "operand1")
    IMMS: ClassVar[tuple[Imm, ...]] = (
        Imm("op0", "alu"),
        Imm("operand0", "f32", tensor_role="operand0", required=True),
        Imm("op1", "alu"),
    )
    FLAGS: ClassVar[tuple[str, ...]] = ("reverse0", "reverse1")
    op0 = prop_def(StringAttr)
    operand0 = opt_prop_def(FloatAttr[Float32Type])
    op1 = prop_def(StringAttr)
    reverse0 = opt_prop_def(BoolAttr)
    reverse1 = opt_prop_def(BoolAttr)

    def verify_format(self) -> None:
        self.same_dims("data", "operand1")
        self.scalar_tiles("operand0")


class SemWaitFormat(IsaInst):
    """``SEM_WAIT`` (all engines): block until ``wait_sem >= wait_value``; no operands."""

    MNEMONIC: ClassVar[str] = "SEM_WAIT"
    ROLES: ClassVar[tuple[str, ...]] = ()
    REQUIRED: ClassVar[tuple[str, ...]] = ()

    def verify_format(self) -> None:
        if "wait_sem" not in self.properties:
            raise VerifyException(f"'{self.name}' requires wait_sem")


FORMATS: tuple[type[IsaInst], ...] = (
    DmaCopyFormat, MatmulFormat, TransposeFormat, TensorTensorFormat, TensorScalarFormat, TensorReduceFormat,
    ActivateFormat, TensorCopyFormat, MemsetFormat, IotaFormat, AffineSelectFormat, ReciprocalFormat,
    TensorScalarReduceFormat, ScalarTensorTensorFormat, SemWaitFormat,
)  # fmt: skip
assert {f.MNEMONIC for f in FORMATS} == set(OP_SPECS), "one format per ISA_FORMAT.md opcode"
assert all(f.ROLES == OP_SPECS[f.MNEMONIC].slots for f in FORMATS), "roles are the opcode's slots"
assert set(ENGINES) == {"pe", "act", "dve", "pool", "sp"}
