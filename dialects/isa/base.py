"""Physical-location instruction ops shared by the per-engine ISA dialects (``isa_pe``, ``isa_act``, ...).

An ISA op is one record of ``runtime/ISA_FORMAT.md``: every operand is a physical location (``IsaLocAttr``) plus the
record's ``[step, num]`` pattern, and every immediate / flag bit is a named property. ``IsaInst`` derives all of it
from the opcode's ``nkic.target.isa.OpSpec`` (``SPEC``): the slots, the immediates (one property each, named as in
the spec), the flags, and the generic checks (engine, semaphores, memories, bounds, (P, 1) scalar tiles, shapes
shared with dst). ``ops.py`` generates one op class per (opcode, engine)::

    isa_act.activate dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]],
                     src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]] {id = 1 : i64, func = "exp"}

``to_instr`` / ``from_instr`` convert to and from ``nkic.target.isa.Instr``. The decoded form is canonical:
properties equal to their encoding default (``scale = 1.0``, ``bias = 0.0``, false flags, ...) are left out.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Mapping, Sequence
from typing import ClassVar, Self

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    Float32Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    f32,
    i64,
)
from xdsl.ir import Attribute, Operation, ParametrizedAttribute
from xdsl.irdl import AnyOf, base, irdl_attr_definition, opt_prop_def, prop_def
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from nkic.dialects.common import (
    AccessPatternAttr,
    attr_of,
    check_member,
    i64_attr,
    int_attr,
    names_attr,
    string_attr,
    value_of,
)
from nkic.dialects.inst import RoleOperandOp
from nkic.target.instructions import InstrSpec, dims_problem, engine_problem
from nkic.target.isa import (
    DERIVED_FLAGS,
    ENUM_KINDS,
    Imm,
    Instr,
    Operand,
    OpSpec,
    StringTable,
    decode_imm,
    encode_fields,
    encode_imm,
    instr_encoding_problem,
    word_kind,
)
from nkic.target.machine import ENGINE_BY_NAME, MAX_PSUM_BYTES, MAX_SBUF_BYTES, NUM_PARTITIONS, engine_sem, valid_sem
from nkic.target.vocab import DTYPES, ISA_MEMORIES, dtype_size

MEMORIES = ISA_MEMORIES.names
_DTYPE_NAMES = tuple(DTYPES)
# Static per-partition bounds; the simulator's target may be smaller, but no target is larger.
CAPACITY: dict[str, int] = {"sbuf": MAX_SBUF_BYTES, "psum": MAX_PSUM_BYTES}
MAX_PAIRS = 5  # partition pair + at most 4 free dims (operand table entry)
U32_MAX = 0xFFFFFFFF


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
            string_attr(memory), int_attr(start_partition), int_attr(address), string_attr(dtype), int_attr(var_id)
        )

    @classmethod
    def of(cls, op: Operand) -> IsaLocAttr:
        if cls is not IsaLocAttr:
            return cls(op.memory, op.dtype, op.start_partition, op.address, op.var_id)
        return _shared_loc(op.memory, op.dtype, op.start_partition, op.address, op.var_id)

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
        check_member("dtype", self.dt, _DTYPE_NAMES)
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


@functools.lru_cache(maxsize=1 << 16)
def _shared_loc(memory: str, dtype: str, start_partition: int, address: int, var_id: int) -> IsaLocAttr:
    """One verified attribute per location: bir-to-isa places ~3 operands per instruction over a few thousand
    distinct locations (attributes are immutable, so sharing them is safe)."""
    return IsaLocAttr(memory, dtype, start_partition, address, var_id)


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


def imm_attr(kind: str, raw: int, strings: Sequence[str] | None = None) -> Attribute:
    """The property attribute of a raw immediate word (ValueError for a bad enum code, or a ``str`` index that is
    not in ``strings``, the NEFF's string table)."""
    value = decode_imm(kind, raw)
    if kind == "str":
        if strings is None or not 0 <= raw < len(strings):
            have = "no string table" if strings is None else f"a string table of {len(strings)}"
            raise ValueError(f"string index {raw} is not in the NEFF's strings ({have})")
        return StringAttr(strings[raw])
    if kind in ENUM_KINDS:
        return StringAttr(str(value))
    if kind == "f32":
        return FloatAttr(float(value), f32)
    return i64_attr(int(value))


def imm_prop_def(imm: Imm) -> object:
    """The IRDL property of an immediate: enums are strings, f32 a float, integers i64."""
    if imm.kind in ENUM_KINDS or imm.kind == "str":
        constraint: object = StringAttr
    elif imm.kind == "f32":
        constraint = FloatAttr[Float32Type]
    elif imm.kind == "value":
        constraint = AnyOf((base(FloatAttr), base(IntegerAttr)))
    else:
        constraint = IntegerAttr[I64]
    optional = imm.default is not None or imm.tensor_role is not None or imm.optional
    return opt_prop_def(constraint) if optional else prop_def(constraint)  # type: ignore[arg-type]




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
    # A vector dynamic term places each row of pair 0 at run time: only the rest is known statically.
    # A tensor indirection term places every element of pair 1 at run time: only its base element is known.
    kind = ap.dyn[0]
    pairs = ap.pairs if loc.mem == "hbm" and kind != "vector" else ap.pairs[2:] if kind == "indirect" else ap.pairs[1:]
    lo, hi = _span(pairs)
    size = dtype_size(loc.dt)
    return loc.addr + size * lo, loc.addr + size * (hi + 1)


@functools.lru_cache(maxsize=1 << 16)
def static_ap(pattern: tuple[tuple[int, int], ...]) -> AccessPatternAttr:
    """One shared attribute per static ISA pattern (offset 0, no loop terms): few distinct ones per kernel."""
    return AccessPatternAttr(0, pattern)


# ------------------------------------------------------------------------------------------------------------------
# Memos keyed on shared attributes
# ------------------------------------------------------------------------------------------------------------------
# An ISA op's properties are shared, immutable attribute objects (one per location, tile pattern or field value), so
# what a function of some of them computes can be memoised on their identities. Every entry holds the attributes its
# key names: an id in a key then always names a live object, and an equal-but-different attribute simply misses.

_PER_OP = frozenset(("id", "wait_sem", "wait_value", "signal_sem", "locs"))  # per instruction: not in shape keys
_ARRAYS = frozenset(("roles", "aps", "locs"))
MEMO_LIMIT = 1 << 15  # entries per memo; a kernel has a few thousand distinct keys, a full memo is cleared


def shape_key(op: IsaInst, key_locs: bool = False) -> tuple[tuple[object, ...], list[Attribute]] | None:
    """The key of ``op``'s class and properties other than the id, semaphores and (unless ``key_locs``) locations,
    by the identity of their attributes (property names included, so which optional ones are present), and the
    attributes it names; None when the properties are not of the usual form."""
    parts: list[object] = [type(op)]
    keep: list[Attribute] = []
    for name, attr in op.properties.items():
        parts.append(name)
        if name in _PER_OP and not (key_locs and name == "locs"):
            continue
        if name in _ARRAYS:
            if type(attr) is not ArrayAttr:
                return None
            parts.append(tuple(map(id, attr.data)))
            keep.extend(attr.data)
        else:
            parts.append(id(attr))
            keep.append(attr)
    return tuple(parts), keep


_FIELDS: dict[tuple[object, ...], tuple[list[Attribute], tuple[tuple[int, ...], int]]] = {}


def _memo_fields(op: IsaInst) -> tuple[tuple[int, ...], int]:
    """The immediate words and flag bits of ``op`` (no ``str`` immediates): a function of its class, fields and
    which slots are present, so of its shape key."""
    keyed = shape_key(op)
    if keyed is None:
        return encode_fields(op.SPEC, op.field, op.has, None)
    key, keep = keyed
    hit = _FIELDS.get(key)
    if hit is not None:
        return hit[1]
    words = encode_fields(op.SPEC, op.field, op.has, None)
    if len(_FIELDS) >= MEMO_LIMIT:
        _FIELDS.clear()
    _FIELDS[key] = (keep, words)
    return words


_OPERANDS: dict[tuple[int, int], tuple[IsaLocAttr, AccessPatternAttr, Operand]] = {}


def _operand_of(loc: IsaLocAttr, ap: AccessPatternAttr) -> Operand:
    """The record operand of a static pattern at a location (an ``Operand`` is immutable, so it is shared)."""
    hit = _OPERANDS.get((id(loc), id(ap)))
    if hit is not None and hit[0] is loc and hit[1] is ap:
        return hit[2]
    operand = Operand(loc.mem, loc.dt, ap.pair_tuple, loc.start, loc.addr, loc.var, "", 0, ap.data[4][3])
    if len(_OPERANDS) >= MEMO_LIMIT:
        _OPERANDS.clear()
    _OPERANDS[(id(loc), id(ap))] = (loc, ap, operand)
    return operand


def _array(items: tuple[Attribute, ...]) -> ArrayAttr:
    """``ArrayAttr(items)`` without the generic attribute construction: ArrayAttr's verifier checks nothing (its
    element constraints are the op's, checked when the op is verified), and every ISA op built gets two."""
    attr = ArrayAttr.__new__(ArrayAttr)
    object.__setattr__(attr, "data", items)
    return attr


_HAS_DEFAULTS: dict[type, bool] = {}  # op class -> whether its definition has default-valued properties
_HAS_STR: dict[type, bool] = {}  # op class -> whether it has ``str`` immediates (records then depend on the table)


def _int_value(attr: Attribute | None) -> int | None:
    """A semaphore property's value (None when absent or not an integer)."""
    return int(attr.value.data) if isinstance(attr, IntegerAttr) else None


# ------------------------------------------------------------------------------------------------------------------
# The instruction base
# ------------------------------------------------------------------------------------------------------------------

_BASE_PROPS = ("roles", "aps", "locs", "id", "wait_sem", "wait_value", "signal_sem")


class _CanonicalFields(dict[str, Attribute]):
    """Field attributes of the format's own properties only, in declaration order: an op built with them has its
    properties in canonical order without sorting (``IsaInst.build``)."""


class IsaInst(RoleOperandOp):
    """One ISA instruction of engine ``ENGINE`` with opcode spec ``SPEC`` (see ``runtime/ISA_FORMAT.md``).

    ``ops.py`` sets the class variables below from the spec; formats with rules of their own subclass this.
    """

    SPEC: ClassVar[OpSpec]
    DIMS_RULES: ClassVar[tuple[InstrSpec, ...]] = ()  # the instructions lowering to SPEC that have a dims_rule
    INSTR_SPECS: ClassVar[tuple[InstrSpec, ...]] = ()  # the instructions lowering to SPEC (their engines)
    ENGINE: ClassVar[str] = ""
    MNEMONIC: ClassVar[str] = ""
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    IMMS: ClassVar[tuple[Imm, ...]] = ()
    # Flag bit i is the boolean property FLAGS[i], except names in DERIVED_FLAGS (computed from other fields).
    FLAGS: ClassVar[tuple[str, ...]] = ()
    DERIVED_FLAGS: ClassVar[frozenset[str]] = frozenset()
    OPERAND_PROPS: ClassVar[tuple[str, ...]] = ("roles", "aps", "locs")
    # True for formats whose own rules (verify_format) read the locations: their verification memo
    # (verify_memo.py) keys on the locations as well.
    KEY_LOCS: ClassVar[bool] = False
    # Methods of a format's own rules that read only the locations and shared attributes (and raise
    # VerifyException): a verification memo hit runs them on every op instead of keying on the locations.
    LOC_RULES: ClassVar[tuple[str, ...]] = ()

    locs = prop_def(ArrayAttr[IsaLocAttr])
    id = prop_def(IntegerAttr[I64])
    wait_sem = opt_prop_def(IntegerAttr[I64])
    wait_value = opt_prop_def(IntegerAttr[I64])
    signal_sem = opt_prop_def(IntegerAttr[I64])

    def __post_init__(self) -> None:
        # IRDLOperation's fills in default-valued properties and attributes, looping over every property
        # definition for every op built; the ISA formats declare none (checked per class, once).
        cls = type(self)
        defaults = _HAS_DEFAULTS.get(cls)
        if defaults is None:
            op_def = cls.get_irdl_definition()
            defaults = _HAS_DEFAULTS[cls] = any(d.default_value is not None for d in
                                                (*op_def.properties.values(), *op_def.attributes.values()))  # fmt: skip
        if defaults:
            super().__post_init__()
        else:
            Operation.__post_init__(self)

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
        cls._check_slots(given)
        roles = [r for r in cls.ROLES if r in given]
        aps = [cls._ap_of(given[r]) for r in roles]
        placed = {r: (IsaLocAttr.of(given[r]), ap) for r, ap in zip(roles, aps)}
        return cls.build(inst_id, placed, cls.field_attrs(fields), wait_sem=wait_sem, wait_value=wait_value,
                         signal_sem=signal_sem)  # fmt: skip

    @classmethod
    def _check_slots(cls, given: Mapping[str, object]) -> None:
        unknown = set(given) - set(cls.ROLES)
        if unknown:
            raise ValueError(f"'{cls.name}' has no operand role(s) {sorted(unknown)}")

    @classmethod
    def field_attrs(cls, fields: Mapping[str, object]) -> dict[str, Attribute]:
        """The property attributes of Python field values. None, and False for a flag, mean "absent" so that built
        ops are canonical (as decoded ops are)."""
        attrs = {k: attr_of(v) for k, v in fields.items() if v is not None and not cls._is_clear_flag(k, v)}
        order = cls._prop_order()[4:-3]  # the format's fields, in declaration order
        if attrs.keys() <= frozenset(order):
            return _CanonicalFields((k, attrs[k]) for k in order if k in attrs)
        return attrs

    @classmethod
    def _slot_order(cls, given: tuple[str, ...]) -> tuple[tuple[str, ...], ArrayAttr[StringAttr]]:
        """The given slots in canonical order and their ``roles`` attribute (ValueError for a slot the op does not
        have); memoised per class on the slots as given (an instruction kind gives the same ones every time)."""
        memo = cls.__dict__.get("_SLOT_ORDER")
        if memo is None:
            memo = {}
            cls._SLOT_ORDER = memo  # type: ignore[attr-defined]
        hit = memo.get(given)
        if hit is None:
            cls._check_slots(given)
            roles = tuple(r for r in cls.ROLES if r in given)
            hit = memo[given] = (roles, names_attr(roles))
        return hit

    @classmethod
    def build(
        cls,
        inst_id: int,
        placed: Mapping[str, tuple[IsaLocAttr, AccessPatternAttr]],
        fields: Mapping[str, Attribute],
        *,
        wait_sem: int | None = None,
        wait_value: int | None = None,
        signal_sem: int | None = None,
    ) -> Self:
        """Build from operand attributes (location, pattern) by slot and field attributes (``field_attrs``): what
        ``make`` does after converting its arguments, for a caller that has the (shared) attributes already."""
        roles, names = cls._slot_order(tuple(placed))
        locs, aps = zip(*[placed[r] for r in roles]) if roles else ((), ())
        props: dict[str, Attribute] = {"roles": names, "aps": _array(aps), "locs": _array(locs), "id": i64_attr(inst_id)}
        props.update(fields)
        if wait_sem is not None:
            props["wait_sem"] = i64_attr(wait_sem)
        if wait_value is not None:
            props["wait_value"] = i64_attr(wait_value)
        if signal_sem is not None:
            props["signal_sem"] = i64_attr(signal_sem)
        # Already in the canonical order when the fields are (``field_attrs``' usual result).
        return cls.create(properties=props if type(fields) is _CanonicalFields else cls._ordered(props))

    @classmethod
    def _ap_of(cls, op: Operand) -> AccessPatternAttr:
        """The operand's pattern; a dynamic term names its index operand by slot (or its register)."""
        if not op.dyn:
            return static_ap(op.pattern)
        if op.dyn == "reg":
            return AccessPatternAttr(0, op.pattern, dyn=("reg", "", op.dyn_ref, op.dyn_scale))
        if op.dyn_ref >= len(cls.ROLES):
            raise ValueError(f"'{cls.name}' has no slot {op.dyn_ref} for a dynamic index")
        return AccessPatternAttr(0, op.pattern, dyn=(op.dyn, cls.ROLES[op.dyn_ref], 0, op.dyn_scale))

    @classmethod
    def _prop_order(cls) -> tuple[str, ...]:
        order = cls.__dict__.get("_PROP_ORDER")  # per op class, computed on first use
        if order is None:
            fields = [k for k in cls.get_irdl_definition().properties if k not in _BASE_PROPS]
            order = ("roles", "aps", "locs", "id", *fields, "wait_sem", "wait_value", "signal_sem")
            cls._PROP_ORDER = order  # type: ignore[attr-defined]
        return order

    @classmethod
    def _is_clear_flag(cls, name: str, value: object) -> bool:
        return name in cls.FLAGS and name not in cls.DERIVED_FLAGS and value is False

    @classmethod
    def _ordered(cls, props: dict[str, Attribute]) -> dict[str, Attribute]:
        """Canonical print order: operands, id, format fields in declaration order, semaphores, anything else."""
        order = cls._prop_order()
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
        kind, slot, reg, scale = ap.dyn
        ref = reg if kind == "reg" else self.ROLES.index(slot) if kind else 0
        return Operand(loc.mem, loc.dt, tuple(ap.pairs), loc.start, loc.addr, loc.var, kind, ref, scale)

    def field(self, name: str) -> str | int | float | bool | None:
        return value_of(self.properties.get(name))

    def dims(self, role: str) -> tuple[int, int]:
        """(partitions, elements per partition) of an on-chip or pattern operand."""
        pairs = self.ap(role).pairs
        return pairs[0][1], _free_size(pairs)

    def _sem(self, name: str) -> int | None:
        return _int_value(self.properties.get(name))

    # -- encoding -----------------------------------------------------------------------------------
    def to_instr(self, strings: StringTable | None = None) -> Instr:
        """The record; ``str`` immediates are interned in ``strings``, the NEFF's table (a fresh one if None).

        Memoised (the verifier checks its encoding, then the NEFF writer encodes it): it is a function of the
        properties alone, so the memo is used only while they are the very same attributes. A record with ``str``
        immediates depends on the table too, so it is never memoised."""
        has_str = _HAS_STR.get(type(self))
        if has_str is None:
            has_str = _HAS_STR[type(self)] = any(imm.kind == "str" for imm in self.IMMS)
        if has_str:
            return self._to_instr(StringTable() if strings is None else strings)
        props = self.properties
        memo = self.__dict__.get("_nkic_instr")
        if memo is not None:
            keys, values, instr = memo
            if len(values) == len(props) and all(a is b for a, b in zip(values, props.values())) and \
                    keys == tuple(props):
                return instr
        instr = self._to_instr(None)
        self.__dict__["_nkic_instr"] = (tuple(props), tuple(props.values()), instr)
        return instr

    def _to_instr(self, strings: StringTable | None) -> Instr:
        if strings is None:
            imms, flags = _memo_fields(self)
        else:
            imms, flags = encode_fields(self.SPEC, self.field, self.has, strings)
        by_role: dict[str, Operand] = {}
        for role, loc, ap in zip(self.roles.data, self.locs.data, self.aps.data):
            if role.data not in by_role:  # the first operand of a role, as ``operand`` finds it
                by_role[role.data] = _operand_of(loc, ap) if not ap.data[4][0] else self.operand(role.data)
        props = self.properties
        wait, value, signal = (_int_value(props.get(k)) for k in ("wait_sem", "wait_value", "signal_sem"))
        return Instr(
            opcode=self.MNEMONIC,
            engine=self.ENGINE,
            operands=tuple(by_role.get(r) for r in self.ROLES),
            imms=imms,
            flags=flags,
            wait_sem=wait,
            wait_value=value or 0,
            signal_sem=signal,
            inst_id=props["id"].value.data,  # type: ignore[attr-defined]
        )

    def flag(self, name: str) -> bool:
        """Value of flag ``name`` (derived flags are computed from the fields they stand for)."""
        if name in self.DERIVED_FLAGS:
            return DERIVED_FLAGS[name](self.field)
        return bool(self.field(name))

    @classmethod
    def from_instr(cls, instr: Instr, strings: Sequence[str] | None = None) -> Self:
        """The op of a record; ``strings`` is the NEFF's string table (needed by ``str`` immediates)."""
        cls._check_decodable(instr)
        operands = dict(zip(cls.ROLES, instr.operands))
        has_wait = instr.wait_sem is not None
        return cls.make(
            instr.inst_id,
            operands,
            wait_sem=instr.wait_sem,
            wait_value=instr.wait_value if has_wait else None,
            signal_sem=instr.signal_sem,
            **cls.decode_fields(instr, strings),
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
    def decode_fields(cls, instr: Instr, strings: Sequence[str] | None = None) -> dict[str, Attribute]:
        fields: dict[str, Attribute] = {}
        for index, imm in enumerate(cls.IMMS):
            slot = cls.ROLES.index(imm.tensor_role) if imm.tensor_role is not None else None
            if slot is not None and slot < len(instr.operands) and instr.operands[slot] is not None:
                continue
            raw = instr.imm(index)
            if imm.default is not None and raw == encode_imm(imm.kind, imm.default):
                continue
            fields[imm.prop] = imm_attr(word_kind(imm, instr.flag), raw, strings)
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
        problem = self.engine_problem()  # after the immediates: its ALU ops are known names
        if problem is not None:
            raise VerifyException(f"{self.MNEMONIC} cannot run on engine '{self.ENGINE}': {problem}")
        self.verify_format()
        self._verify_encoding()

    def _verify_encoding(self) -> None:
        """The record fits the binary format: every field in its width (target/isa.py, as the encoder checks)."""
        try:
            problem = instr_encoding_problem(self.to_instr(), valid_sem)
        except (ValueError, OverflowError, struct.error) as e:
            problem = str(e)
        if problem is not None:
            raise VerifyException(f"'{self.name}' (id {self.inst_id}) cannot be encoded: {problem}")

    def verify_format(self) -> None:
        """Shape checks the spec and the instructions lowering to it declare; formats with rules of their own
        extend this."""
        self.same_dims(*self.SPEC.same_shape)
        self.scalar_tiles(*self.SPEC.scalar_slots)
        # A slot holding another operand's dynamic index is that index, whatever role shares its slot.
        index_slots = {ap.dyn[1] for ap in self.aps.data if ap.dyn[0] in ("scalar", "vector", "indirect")}
        for spec in self.DIMS_RULES:
            dims = {r.name: self.dims(r.isa_slot) for r in spec.roles
                    if self.has(r.isa_slot) and (r.isa_slot not in index_slots or r.name.endswith("_offset"))}
            problem = dims_problem(spec, dims)
            if problem is not None:
                raise VerifyException(problem)

    def engine_problem(self, nc_version: int | None = None) -> str | None:
        """Why no NKI instruction lowering to this opcode may run on this engine with these ALU ops, on
        generation ``nc_version`` (None: on some generation), or None. The operands' memories are the operand
        checks' (the same ``Engine.reads`` / ``writes``)."""
        if "control" in self.SPEC.traits:  # every stream holds a copy: there is no placement to check
            return None
        problems = []
        for spec in self.INSTR_SPECS:
            fields = {f.name: self.field(f.isa_name) for f in spec.fields if f.kind == "alu" and f.isa_name}
            problem = engine_problem(spec, self.ENGINE, nc_version, None, fields)
            if problem is None:
                return None
            problems.append(problem)
        return problems[0] if problems else None

    def _verify_header(self) -> None:
        spec = self.SPEC
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
        """The semaphore this instruction signals at completion (ISA_FORMAT: its own engine's, a DMA its queue's)."""
        return engine_sem(self.ENGINE)

    def _verify_operand(self, role: str) -> None:
        loc, ap = self.loc(role), self.ap(role)
        if ap.offset_value or ap.iv_coeffs:
            raise VerifyException(f"'{role}': ISA patterns have offset 0 and no loop terms (use the address)")
        if len(ap.pairs) > MAX_PAIRS:
            raise VerifyException(f"'{role}': {len(ap.pairs) - 1} free dims, at most {MAX_PAIRS - 1}")
        self._verify_memory(role, loc.mem)
        self._verify_dynamic(role, loc, ap)
        if loc.mem in CAPACITY:
            self._verify_onchip(role, loc, ap)
        elif loc.mem == "hbm" and byte_range(loc, ap)[0] < 0:
            raise VerifyException(f"'{role}': HBM access starts before its variable")

    def _verify_dynamic(self, role: str, loc: IsaLocAttr, ap: AccessPatternAttr) -> None:
        """A dynamic term's index slot is present and (for a vector) has one element per row of the operand."""
        kind, slot, _, _ = ap.dyn
        if kind in ("", "reg"):
            return
        if slot not in self.ROLES or not self.has(slot) or slot == role:
            raise VerifyException(f"'{role}': its {kind} dynamic offset names slot '{slot}', which holds no index")
        index = self.ap(slot)
        if kind == "scalar" and index.num_elements != 1:
            raise VerifyException(f"'{role}': a scalar dynamic offset reads one element, '{slot}' has {index.shape}")
        if kind == "indirect":
            if loc.mem == "hbm" or len(ap.pairs) != 2:
                raise VerifyException(f"'{role}': tensor indirection needs an on-chip (partitions, offsets) operand")
            if index.pairs[0][1] != ap.pairs[0][1] or index.num_elements < ap.pairs[1][1]:
                raise VerifyException(f"'{role}': {ap.pairs[1][1]} indirect offsets over {ap.pairs[0][1]} partitions "
                                      f"but '{slot}' is {index.shape}")  # fmt: skip
        if kind == "vector":
            if loc.mem != "hbm":
                raise VerifyException(f"'{role}': a vector dynamic offset needs an HBM operand, not {loc.mem}")
            if index.num_elements != ap.pairs[0][1]:
                raise VerifyException(f"'{role}': {ap.pairs[0][1]} rows but '{slot}' holds {index.num_elements} "
                                      "indices")  # fmt: skip

    def _verify_memory(self, role: str, mem: str) -> None:
        if (role == "pattern") != (mem == "none"):
            raise VerifyException(f"'{role}': only the 'pattern' slot is pattern-only (none), got {mem}")
        if "control" in self.SPEC.traits:  # the core's sequencers together reach SBUF and HBM (not PSUM)
            if mem == "psum":
                raise VerifyException(f"'{role}': a register moves to or from SBUF or HBM, not PSUM")
            return
        if mem == "none":
            return
        # What each engine may read and write: target/machine.py ENGINES, from the NKI ISA reference.
        engine, write = ENGINE_BY_NAME[self.ENGINE], role in self.SPEC.writes
        if engine.reaches(mem, write):
            return
        if mem == "hbm":
            raise VerifyException(f"'{role}': engine {self.ENGINE} cannot access HBM (only SP DMA can)")
        if mem == "psum" and not engine.psum:
            raise VerifyException(f"'{role}': engine {self.ENGINE} cannot access PSUM")
        reach = sorted(engine.writes if write else engine.reads)
        raise VerifyException(f"'{role}': {self.ENGINE.upper()} {self.MNEMONIC} {role} must be in "
                              f"{' or '.join(reach)}, got {mem}")  # fmt: skip

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
            if imm.kind in ENUM_KINDS and value is not None:
                vocab = ENUM_KINDS[imm.kind]
                check_member(vocab.what, str(value), vocab.names)
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
        if not roles:
            return
        want = self.dims("dst")
        for r in roles:
            if self.has(r) and self.dims(r) != want:
                raise VerifyException(f"'{r}' is {self.dims(r)} (partitions, free) but dst is {want}")

    def scalar_tiles(self, *roles: str) -> None:
        """Every present role is a (P, 1) tile, P = dst's partitions (scalars broadcast along the free dims)."""
        if not roles:
            return
        nparts = self.dims("dst")[0]
        for r in roles:
            if self.has(r) and self.dims(r) != (nparts, 1):
                raise VerifyException(f"'{r}' must be a ({nparts}, 1) tile, got {self.dims(r)}")
