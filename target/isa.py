"""The ISA: one ``OpSpec`` per opcode of ``runtime/ISA_FORMAT.md``, and the ``Operand`` / ``Instr`` records.

An opcode is declared once, as LLVM's instruction formats are: its code, the engines that run it, its operand
slots (which ones it writes, which are (P, 1) scalar tiles, which share dst's shape), its immediates (named exactly
as the IR properties that hold them) and its flag bits. The encoder, the decoder, the listings, the ISA op classes
and their verifiers are derived from it. This table holds the opcodes several instructions share (DMA_COPY), those
of no instruction (SEM_WAIT) and those whose slots differ from their instruction's roles; an opcode of exactly one
instruction is declared with it (``instructions.declare(InstrSpec(...), encoding(code, doc, imms=, flags=))``): its
mnemonic, engines, slots and ISA traits are the instruction's, the encoding adds only its code, immediates and flags.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from nkic.target.machine import ENGINE_NAMES
from nkic.target.vocab import ACT_FUNCS, ALU_OPS, DTYPES, ISA_MEMORIES, REDUCE_CMDS, Vocabulary

__all__ = [
    "Imm", "OpSpec", "OPCODES", "OPCODE_BY_CODE", "ENUM_KINDS", "Operand", "Instr", "MAX_SLOTS", "MAX_IMMS",
    "MAX_FREE_DIMS", "f32_bits", "bits_f32", "i32_bits", "bits_i32", "encode_imm", "decode_imm", "StringTable",
    "MAX_STRING_LENGTH",
]  # fmt: skip

MAX_SLOTS = 6
MAX_IMMS = 9
MAX_FREE_DIMS = 4
# Dynamic operand kinds, by their code in the operand table entry (runtime/ISA_FORMAT.md): codes 0-3 in the entry's
# two kind bits, "indirect" (tensor indirection of an on-chip compute operand, NeuronCore-v4) in a bit of its own.
DYN_KINDS = ("", "reg", "scalar", "vector", "indirect")
ENUM_KINDS: dict[str, Vocabulary] = {"alu": ALU_OPS, "act": ACT_FUNCS, "reduce_cmd": REDUCE_CMDS}


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
class Imm:
    """One immediate word, named after the IR property that holds it.

    ``kind``: ``alu`` / ``act`` / ``reduce_cmd`` (the code of a name), ``u32``, ``i32``, ``f32``, ``value``
    (i32 when the instruction's ``int_value`` flag is set, else f32), or ``str`` (a string: the word is its index
    in the NEFF's string table, :class:`StringTable`; the IR property holds the string itself). ``default`` is
    encoded when the property is absent, and decoding leaves the property out when the word equals it; ``optional``:
    may be absent without one. ``tensor_role``: the slot that replaces this immediate (a scalar is a (P, 1) tile
    or an immediate, never both); ``required``: one of the two is given.
    """

    prop: str
    kind: str
    default: str | int | float | None = None
    tensor_role: str | None = None
    required: bool = False
    optional: bool = False  # may be absent although it has no default (TENSOR_SCALAR's second stage)
    sparse: bool = False  # listed (NEFF engine JSON) only when non-zero: a mode field most instructions leave off


# The longest string a ``str`` immediate may name (characters): a debug prefix, not a payload.
MAX_STRING_LENGTH = 4096


class StringTable:
    """The strings of one NEFF (its ``strings.json`` member): a ``str`` immediate is the index of its string here.
    Equal strings are interned once, in order of first use, so the table (and the NEFF) is deterministic."""

    def __init__(self, strings: tuple[str, ...] | list[str] = ()) -> None:
        self.strings: list[str] = []
        self._index: dict[str, int] = {}
        for s in strings:
            self.intern(s)

    def intern(self, text: str) -> int:
        if not isinstance(text, str) or len(text) > MAX_STRING_LENGTH:
            raise ValueError(f"a string immediate must be a str of at most {MAX_STRING_LENGTH} characters")
        index = self._index.get(text)
        if index is None:
            index = self._index[text] = len(self.strings)
            self.strings.append(text)
        return index


def encode_imm(kind: str, value: str | int | float | None, strings: StringTable | None = None) -> int:
    """The word of an immediate. A ``str`` is interned in ``strings``; without a table (a cost estimate, a width
    check) it encodes as 0, a placeholder that never reaches a NEFF."""
    if value is None:
        return 0
    if kind == "str":
        return strings.intern(str(value)) if strings is not None else 0
    if kind in ENUM_KINDS:
        return ENUM_KINDS[kind].code(str(value))
    if kind == "f32":
        return f32_bits(float(value))
    if kind == "i32":
        return i32_bits(int(value))
    return int(value)


def decode_imm(kind: str, raw: int) -> str | int | float:
    """The value of an immediate word; ValueError for an enum code no name has. A ``str`` word decodes to its
    string-table index (the table is the NEFF's: see :class:`StringTable`)."""
    if kind in ENUM_KINDS:
        name = ENUM_KINDS[kind].name_of(raw)
        if name is None:
            raise ValueError(f"{kind} code {raw} out of range")
        return name
    if kind == "f32":
        return bits_f32(raw)
    if kind == "i32":
        return bits_i32(raw)
    return raw


FieldGetter = Callable[[str], "str | int | float | bool | None"]

# Flags computed from other fields rather than stored: their value given the fields.
DERIVED_FLAGS: dict[str, Callable[[FieldGetter], bool]] = {
    "has_op1": lambda get: get("op1") is not None,
    "int_value": lambda get: isinstance(get("value"), int) and not isinstance(get("value"), bool),
}


def word_kind(imm: Imm, flag: Callable[[str], bool]) -> str:
    """The encoding of an immediate word: ``value`` words are i32 when the int_value flag is set, else f32."""
    if imm.kind != "value":
        return imm.kind
    return "i32" if flag("int_value") else "f32"


def encode_fields(spec: OpSpec, get: FieldGetter, has_slot: Callable[[str], bool],
                  strings: StringTable | None = None) -> tuple[tuple[int, ...], int]:  # fmt: skip
    """The immediate words and flag bits of an instruction whose fields ``get`` returns (None = absent); ``str``
    immediates are interned in ``strings`` (see :func:`encode_imm`)."""

    def flag(name: str) -> bool:
        return DERIVED_FLAGS[name](get) if name in spec.derived_flags else bool(get(name))

    imms = []
    for imm in spec.imms:
        if imm.tensor_role is not None and has_slot(imm.tensor_role):
            imms.append(0)  # the slot carries the scalar; the immediate word is unused
            continue
        value = get(imm.prop)
        imms.append(encode_imm(word_kind(imm, flag), imm.default if value is None else value, strings))
    return tuple(imms), sum(1 << bit for bit, name in enumerate(spec.flags) if flag(name))


@dataclass(frozen=True)
class OpSpec:
    """One opcode. Slot, immediate and flag order is the record layout; ``doc`` is its one-line formula."""

    mnemonic: str
    code: int
    engines: tuple[str, ...]
    slots: tuple[str, ...]
    doc: str
    required: tuple[str, ...] = ()
    imms: tuple[Imm, ...] = ()
    flags: tuple[str, ...] = ()
    derived_flags: frozenset[str] = frozenset()  # computed from other fields, never a property of their own
    writes: tuple[str, ...] = ("dst",)
    scalar_slots: tuple[str, ...] = ()  # (P, 1) tiles, P = dst's partitions
    same_shape: tuple[str, ...] = ()  # slots with dst's (partitions, elements per partition)
    # "dma", "pattern", "control", "meets" (the simulator makes cores meet at it), "wait" (ordering only)
    traits: frozenset[str] = field(default_factory=frozenset)

    @property
    def key(self) -> str:
        """The op-name suffix of this opcode's ISA ops (``isa_act.activate``)."""
        return self.mnemonic.lower()

    def imm(self, prop: str) -> Imm:
        return next(i for i in self.imms if i.prop == prop)

    def imm_index(self, prop: str) -> int:
        return [i.prop for i in self.imms].index(prop)


# The engines of an opcode an NKI instruction lowers to are not stated here: they are the union, over generations
# and over the instructions that lower to it, of the engines each ``InstrSpec`` declares (``instructions.declare``
# fills them in), so the reference's engine list is written once. An opcode of no instruction (SEM_WAIT) or one
# every stream holds a copy of (the control instructions) names its engines itself.
FROM_INSTRUCTIONS: tuple[str, ...] = ()
_SPECS = (
    OpSpec("DMA_COPY", 0x01, FROM_INSTRUCTIONS, ("dst", "src", "dst_offset", "src_offset"), "dst = src on DMA queue "
           "`queue`; `transpose` swaps src's first and last dims; `oob_skip` skips out-of-bounds dynamic rows",
           required=("dst", "src"), imms=(Imm("queue", "u32"),), flags=("transpose", "oob_skip"),
           traits=frozenset({"dma"})),
    OpSpec("IOTA", 0x0A, FROM_INSTRUCTIONS, ("dst", "pattern"), "dst[p, i...] = offset + p * pattern[0].step + "
           "sum(step * i)", required=("dst", "pattern"), imms=(Imm("offset", "i32", default=0),),
           same_shape=("pattern",), traits=frozenset({"pattern"})),
    OpSpec("AFFINE_SELECT", 0x0B, FROM_INSTRUCTIONS, ("dst", "on_true", "pattern"), "dst = (affine value <cmp_op> 0) ? "
           "on_true : on_false_value", required=("dst", "on_true", "pattern"),
           imms=(Imm("offset", "i32", default=0), Imm("cmp_op", "alu"), Imm("on_false_value", "f32")),
           same_shape=("on_true", "pattern"), traits=frozenset({"pattern"})),
    OpSpec("TENSOR_SCALAR_REDUCE", 0x0D, FROM_INSTRUCTIONS, ("dst", "src", "operand0", "reduce_res", "dst_offset",
                                                             "src_offset"),
           "dst = src <op0> operand0; reduce_res = (-)reduce(reduce_op, dst)", required=("dst", "src"),
           imms=(Imm("op0", "alu"), Imm("operand0", "f32", tensor_role="operand0", required=True),
                 Imm("reduce_op", "alu")),
           flags=("reverse0", "negate"), writes=("dst", "reduce_res"), scalar_slots=("operand0", "reduce_res"),
           same_shape=("src",)),
    OpSpec("SEM_WAIT", 0x0F, ENGINE_NAMES, (), "block until wait_sem >= wait_value", writes=(),
           traits=frozenset({"wait"})),
)  # fmt: skip
OPCODES: dict[str, OpSpec] = {s.mnemonic: s for s in _SPECS}
# Opcodes whose engines come from the instructions that lower to them (see FROM_INSTRUCTIONS).
DERIVED_ENGINES: set[str] = {s.mnemonic for s in _SPECS if not s.engines}
OPCODE_BY_CODE: dict[int, OpSpec] = {s.code: s for s in _SPECS}
assert len(OPCODE_BY_CODE) == len(OPCODES), "opcode codes are unique"
assert all(len(s.slots) <= MAX_SLOTS and len(s.imms) <= MAX_IMMS for s in _SPECS)


F = TypeVar("F", bound=Callable[..., Any])


def per_opcode(table: dict[str, F], what: str, *opcodes: str) -> Callable[[F], F]:
    """A decorator registering one function for ``opcodes`` in ``table`` (as xDSL's ``@impl(Op)``)."""

    def register(fn: F) -> F:
        for op in opcodes:
            if op not in OPCODES:
                raise ValueError(f"{what} for undeclared opcode {op}")
            table[op] = fn
        return fn

    return register


def register_opcode(spec: OpSpec) -> OpSpec:
    """Add an opcode (used by instruction declarations whose ISA form is their own)."""
    if spec.mnemonic in OPCODES or spec.code in OPCODE_BY_CODE:
        raise ValueError(f"opcode {spec.mnemonic} / {spec.code:#x} is already declared")
    OPCODES[spec.mnemonic] = spec
    OPCODE_BY_CODE[spec.code] = spec
    if not spec.engines:
        DERIVED_ENGINES.add(spec.mnemonic)
    return spec


def set_opcode_engines(mnemonic: str, engines: tuple[str, ...]) -> OpSpec:
    """The engines of an opcode whose engines come from its instructions (``instructions.declare``)."""
    if mnemonic not in DERIVED_ENGINES:
        raise ValueError(f"opcode {mnemonic} names its engines itself")
    spec = replace(OPCODES[mnemonic], engines=engines)
    OPCODES[mnemonic] = OPCODE_BY_CODE[spec.code] = spec
    return spec


@dataclass(frozen=True)
class Operand:
    """One access-pattern operand.

    ``pattern`` holds ``(step, num)`` pairs, outermost first. For SBUF/PSUM pair 0 is the partition pair
    ``(1, nparts)`` and the other steps count elements of ``dtype``; for HBM every pair is an element step from
    ``address`` (a byte offset inside variable ``var_id``); for ``none`` it is an iota/affine_select pattern.

    A dynamic operand adds ``dyn_scale·v`` elements at run time (runtime/ISA_FORMAT.md, "Dynamic operands"):
    ``dyn`` is ``reg`` (v = register ``dyn_ref``), ``scalar`` (v = the one element of the instruction's operand in
    slot ``dyn_ref``) or ``vector`` (row i0 of pair 0 uses element i0 of slot ``dyn_ref`` instead of ``step_0·i0``)
    or ``indirect`` (tensor indirection of an on-chip operand: element i1 of pair 1 sits at ``dyn_scale·v_i1``, v the
    offsets of slot ``dyn_ref`` in the engine's snake order, in place of ``step_1·i1``).
    """

    memory: str
    dtype: str
    pattern: tuple[tuple[int, int], ...]
    start_partition: int = 0
    address: int = 0
    var_id: int = 0
    dyn: str = ""  # "" (static), "reg", "scalar", "vector", "indirect"
    dyn_ref: int = 0  # the register (reg) or the instruction slot holding the index (scalar, vector, indirect)
    dyn_scale: int = 0  # elements per unit of the dynamic value

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", tuple((int(s), int(n)) for s, n in self.pattern))
        if self.dyn not in DYN_KINDS:
            raise ValueError(f"unknown dynamic offset kind '{self.dyn}', expected one of {DYN_KINDS}")
        if self.memory not in ISA_MEMORIES:
            raise ValueError(f"unknown memory '{self.memory}', expected one of {ISA_MEMORIES.names}")
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
    """One ISA instruction record.

    Canonical form: trailing absent operand slots and trailing zero immediates are dropped on construction, so two
    instructions that encode to the same bytes compare equal. Operands, immediates and flags are read by name.
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
        return OPCODES[self.opcode]

    def operand(self, slot: int | str) -> Operand | None:
        """Operand in a slot given by index or by the opcode's slot name; None when absent."""
        index = self.spec.slots.index(slot) if isinstance(slot, str) else slot
        return self.operands[index] if index < len(self.operands) else None

    def imm(self, index: int | str) -> int:
        """Raw immediate word by index or by name."""
        if isinstance(index, str):
            index = self.spec.imm_index(index)
        return self.imms[index] if index < len(self.imms) else 0

    def value(self, prop: str) -> str | int | float:
        """Decoded immediate ``prop`` (enum names, floats, ints); ValueError for a corrupt enum code."""
        return decode_imm(word_kind(self.spec.imm(prop), self.flag), self.imm(prop))

    def flag(self, name: str) -> bool:
        return bool(self.flags >> self.spec.flags.index(name) & 1)



# -- the encoding's field widths (runtime/ISA_FORMAT.md) -----------------------------------------------------------
# The one statement of which values each field of a record or operand entry can hold: the encoder refuses anything
# else, and the ISA ops' verifiers ask the same question, so ``isa-verify`` accepts exactly what ``-t neff`` writes.
U8, U16, U32 = (0, 0xFF), (0, 0xFFFF), (0, 0xFFFFFFFF)
I32 = (-(1 << 31), (1 << 31) - 1)
NO_OPERAND = 0xFFFF  # an absent slot in a record; the operand table holds fewer entries


def _outside(what: str, value: int, bounds: tuple[int, int]) -> str | None:
    lo, hi = bounds
    return None if lo <= value <= hi else f"{what} = {value} outside {lo}..{hi}"


def operand_encoding_problem(op: Operand) -> str | None:
    """Why ``op`` has no operand-table entry, or None."""
    checks = [("start_partition", op.start_partition, U8), ("var_id", op.var_id, U16), ("address", op.address, U32)]
    for step, num in op.pattern:
        checks += [("pattern step", step, I32), ("pattern num", num, U32)]
    if op.dyn:
        checks += [(f"{op.dyn} dynamic offset reference", op.dyn_ref, (0, 63 if op.dyn == "reg" else MAX_SLOTS - 1)),
                   ("dynamic offset scale", op.dyn_scale, I32)]  # fmt: skip
    return next((p for what, v, b in checks if (p := _outside(what, v, b)) is not None), None)


def instr_encoding_problem(ins: Instr, valid_sem: Callable[[int], bool]) -> str | None:
    """Why ``ins`` has no record (its opcode's declaration: slots, immediates and their kinds, flags), or None."""
    spec = OPCODES.get(ins.opcode)
    if spec is None:
        return f"unknown opcode '{ins.opcode}'"
    if ins.engine not in spec.engines:
        return f"{ins.opcode} cannot run on engine '{ins.engine}' (allowed: {', '.join(spec.engines)})"
    if len(ins.operands) > len(spec.slots):
        return f"{ins.opcode} takes at most {len(spec.slots)} operands, got {len(ins.operands)}"
    if len(ins.imms) > MAX_IMMS:
        return f"at most {MAX_IMMS} immediates, got {len(ins.imms)}"
    if ins.flags >> len(spec.flags):
        return f"{ins.opcode} flags {ins.flags:#x} set undefined bits"
    for imm, value in zip(spec.imms, ins.imms):
        if (p := _outside(f"immediate {imm.prop}", value, U32)) is not None:
            return p
        if imm.kind in ENUM_KINDS and ENUM_KINDS[imm.kind].name_of(value) is None:
            return f"{ins.opcode} {imm.prop}: {imm.kind} code {value} out of range"
    for value in ins.imms[len(spec.imms) :]:
        if (p := _outside("immediate", value, U32)) is not None:
            return p
    for what, sem in (("wait", ins.wait_sem), ("signal", ins.signal_sem)):
        if sem is not None and not valid_sem(sem):
            return f"{what} semaphore {sem} is not an engine (0..4) or DMA queue (8..23) semaphore"
    for what, value in (("wait_value", ins.wait_value), ("inst_id", ins.inst_id)):
        if (p := _outside(what, value, U32)) is not None:
            return p
    return next((p for op in ins.operands if op is not None and (p := operand_encoding_problem(op))), None)
