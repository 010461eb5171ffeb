"""Pieces shared by the penguin, bir and ISA dialects: access patterns, element types, field attributes.

The vocabularies (dtypes, opcodes, engines, memories) come from ``nkic.target``; the IR stores their names, and
numeric codes only appear in the ISA binary encoding (see ``runtime/ISA_FORMAT.md``).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    f32,
    i1,
    i64,
)
from xdsl.ir import Attribute, Data, Dialect
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from nkic.target.machine import ENGINE_NAMES, NKI_ENGINES
from nkic.target.vocab import DTYPE_RECORDS, DTYPES, IR_MEMORIES

# Engines as NKI names them (nki.isa.engine), and as BIR names them ("unassigned" before engine assignment).
ENGINES: tuple[str, ...] = NKI_ENGINES.names
BIR_ENGINES: tuple[str, ...] = ("unassigned", *ENGINE_NAMES)
MEMORIES: tuple[str, ...] = IR_MEMORIES


def parse_i64(parser: AttrParser) -> int:
    """An integer literal that fits an i64 (IR shapes and addresses are i64 arrays): a parse error otherwise."""
    pos = parser.pos
    value = parser.parse_integer()
    if not -(1 << 63) <= value < (1 << 63):
        parser.raise_error(f"integer {value} does not fit in 64 bits", pos, parser.pos)
    return value


def check_member(what: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise VerifyException(f"unknown {what} '{value}', expected one of: {', '.join(allowed)}")


# Constant tensor contents (nl.shared_constant) travel through penguin, bir and isa as a ``data`` property: the raw
# little-endian bytes, row-major, as a "0x..." hex string (text round-trips, and FORM B's JSON carries it as is).
def constant_attr(data: bytes) -> StringAttr:
    return StringAttr("0x" + data.hex())


def constant_bytes(attr: StringAttr, size: int) -> bytes:
    """The bytes of a ``data`` property, checked to be ``size`` bytes of well-formed hex."""
    text = attr.data
    if not text.startswith("0x"):
        raise VerifyException("constant data must be a \"0x...\" hex string")
    try:
        data = bytes.fromhex(text[2:])
    except ValueError:
        raise VerifyException("constant data is not well-formed hex") from None
    if len(data) != size:
        raise VerifyException(f"constant data has {len(data)} bytes, the tensor needs {size}")
    return data


# The plain-value form of an access pattern: (offset, iv coefficients, [step, num] pairs, view dtype, dynamic term).
ApData = tuple[int, tuple[int, ...], tuple[tuple[int, int], ...], str, tuple[str, str, int, int]]
_STATIC: tuple[str, str, int, int] = ("", "", 0, 0)


@irdl_attr_definition
class AccessPatternAttr(Data[ApData]):
    """An NKI access pattern over the flat storage of a tensor.

    Element ``(i0, …, ik)`` is storage element ``offset + Σ ivs[d]·iv_d + Σ step_j·i_j``, where ``iv_d`` is the
    induction variable of the d-th enclosing loop (outermost first). For on-chip tensors the first pair is the
    partition pair ``[row_elems, nparts]``.

    ``view``: the dtype the operand reads the storage's bytes as (``tensor.view(dtype)`` / ``.ap(dtype=)``);
    empty for the storage's own dtype. Offsets and steps count elements of the operand's dtype.

    Syntax: ``<0 + 128*i0 : [512, 128], [1, 512]>`` (the ``+ c*iN`` terms only when non-zero), with ``as uint8``
    after the pairs for a view.

    A *dynamic* access pattern (``.ap(scalar_offset=, vector_offset=)``) adds a run-time term ``dyn_scale·v``:
    ``dyn_kind`` is ``reg`` (v = register ``dyn_reg``), ``scalar`` (v = the one element of the instruction's operand
    role ``dyn_role``) or ``vector`` (row ``i0`` of pair 0 takes v = element ``i0`` of operand ``dyn_role``, in place
    of ``step_0·i0``) or ``indirect`` (tensor indirection of an on-chip operand: element ``i1`` of pair 1 takes v =
    offset ``i1`` of operand ``dyn_role``, read in the engine's snake order, in place of ``step_1·i1``). Printed after
    the pairs: ``+ 512*r3``, ``+ 512*src_offset``, ``+ 512*vector src_offset``, ``+ 1*indirect src_offset``.

    One attribute holding plain Python values (``data``, an ``ApData`` tuple): tracing, lowering and the FORM B
    round trip build hundreds of thousands of patterns, and a pattern made of nested builtin attributes was ~13
    attribute objects, each verified when built. The ``offset``/``ivs``/``pattern``/``view``/``dyn_*`` properties
    still give those attributes (built on demand) for code that reads them; the plain accessors (``offset_value``,
    ``iv_coeffs``, ``pairs``, ``view_dtype``, ``dyn``) are the cheap way.
    """

    name = "nkic.ap"

    def __init__(
        self,
        offset: int | ApData,
        pattern: Sequence[Sequence[int]] | None = None,
        ivs: Sequence[int] = (),
        view: str = "",
        dyn: tuple[str, str, int, int] = _STATIC,
    ):
        if pattern is None:  # the parser's and Data.new's form: the ApData tuple itself
            assert isinstance(offset, tuple)
            super().__init__(offset)
            return
        kind, role, reg, scale = dyn
        super().__init__((_index(offset), _coeffs(ivs), tuple((_index(s), _index(n)) for s, n in pattern), str(view),
                          (str(kind), str(role), _index(reg), _index(scale))))  # fmt: skip

    # -- plain values ----------------------------------------------------------------------------------
    @property
    def offset_value(self) -> int:
        return self.data[0]

    @property
    def dyn(self) -> tuple[str, str, int, int]:
        """(kind, role, register, scale) of the dynamic term; kind "" for a static pattern."""
        return self.data[4]

    @property
    def is_dynamic(self) -> bool:
        return bool(self.data[4][0])

    def moved(self, offset: int, ivs: Sequence[int]) -> AccessPatternAttr:
        """The same pattern (view and dynamic term kept) at another static offset."""
        _, _, pairs, view, dyn = self.data
        return AccessPatternAttr((_index(offset), _coeffs(ivs), pairs, view, dyn))

    @property
    def view_dtype(self) -> str | None:
        return self.data[3] or None

    def operand_dtype(self, storage_dtype: str) -> str:
        """The dtype the operand accesses: its view's, else the storage's."""
        return self.data[3] or storage_dtype

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return list(self.data[2])

    @property
    def pair_tuple(self) -> tuple[tuple[int, int], ...]:
        return self.data[2]

    @property
    def iv_coeffs(self) -> list[int]:
        return list(self.data[1])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(n for _, n in self.data[2])

    @property
    def num_elements(self) -> int:
        return int(np.prod(self.shape)) if self.data[2] else 1

    # -- the same fields as attributes (built on demand) ------------------------------------------------
    @property
    def offset(self) -> IntAttr:
        return int_attr(self.data[0])

    @property
    def ivs(self) -> ArrayAttr[IntAttr]:
        return _ivs_cached(self.data[1])

    @property
    def pattern(self) -> ArrayAttr[ArrayAttr[IntAttr]]:
        return _pairs_cached(self.data[2])

    @property
    def view(self) -> StringAttr:
        return string_attr(self.data[3])

    @property
    def dyn_kind(self) -> StringAttr:
        return string_attr(self.data[4][0])

    @property
    def dyn_role(self) -> StringAttr:
        return string_attr(self.data[4][1])

    @property
    def dyn_reg(self) -> IntAttr:
        return int_attr(self.data[4][2])

    @property
    def dyn_scale(self) -> IntAttr:
        return int_attr(self.data[4][3])

    def verify(self) -> None:
        data = self.data
        if not (isinstance(data, tuple) and len(data) == 5):
            raise VerifyException("an access pattern holds (offset, ivs, pairs, view, dyn)")
        offset, ivs, pairs, view, dyn = data
        if type(offset) is not int or type(ivs) is not tuple or any(type(c) is not int for c in ivs):
            raise VerifyException("access pattern offset and loop coefficients must be integers")
        if type(pairs) is not tuple:
            raise VerifyException("access pattern entries must be [step, num] pairs")
        for p in pairs:
            if type(p) is not tuple or len(p) != 2 or type(p[0]) is not int or type(p[1]) is not int:
                raise VerifyException("access pattern entries must be [step, num] pairs")
            if p[1] <= 0:
                raise VerifyException("access pattern sizes must be positive")
        if not pairs:
            raise VerifyException("access pattern must have at least one [step, num] pair")
        if view:
            check_member("dtype", view, _DTYPE_NAMES)
        kind, role, reg, _ = dyn
        if kind:
            check_member("dynamic offset kind", kind, DYN_KINDS)
            if kind == "reg" and not 0 < reg < 64:
                raise VerifyException(f"dynamic offset register r{reg} outside r1..r63")
            if kind in ("scalar", "vector", "indirect") and not role:
                raise VerifyException(f"a {kind} dynamic offset names the operand role holding its index")

    def min_max_offset(self, iv_values: Sequence[int] = ()) -> tuple[int, int]:
        base = self.data[0] + sum(c * v for c, v in zip(self.data[1], iv_values))
        lo = hi = base
        for s, n in self.data[2]:
            span = s * (n - 1)
            lo += min(0, span)
            hi += max(0, span)
        return lo, hi

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> ApData:
        with parser.in_angle_brackets():
            return parse_ap_body(parser).data

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string("<" + ap_body_str(self) + ">")


_DTYPE_NAMES: tuple[str, ...] = tuple(DTYPES)


def _index(value: object) -> int:
    """A plain int (numpy integers and bools accepted, floats refused, as IntAttr did)."""
    return value if type(value) is int else operator.index(value)  # type: ignore[arg-type]


def _coeffs(ivs: Sequence[int]) -> tuple[int, ...]:
    """Loop coefficients without trailing zeros (``i2``'s term of a depth-2 access is omitted, not zero)."""
    coeffs = [_index(c) for c in ivs]
    while coeffs and coeffs[-1] == 0:
        coeffs.pop()
    return tuple(coeffs)
DYN_KINDS = ("", "reg", "scalar", "vector", "indirect")


def _parse_dyn(parser: AttrParser) -> tuple[str, str, int, int]:
    """``+ 512*r3`` / ``+ 512*src_offset`` / ``+ 512*vector src_offset`` after the pairs (or nothing)."""
    if parser.parse_optional_punctuation("+") is None:
        return "", "", 0, 0
    scale = parser.parse_integer()
    parser.parse_punctuation("*")
    word = parser.parse_identifier()
    if word in ("vector", "indirect"):
        return word, parser.parse_identifier(), 0, scale
    if word.startswith("r") and word[1:].isdigit():
        return "reg", "", int(word[1:]), scale
    return "scalar", word, 0, scale


def parse_ap_body(parser: AttrParser) -> AccessPatternAttr:
    """Parse ``0 + 128*i0 : [512, 128], [1, 512]`` and an optional ``as <dtype>`` (shared by every printed form of
    an access pattern)."""
    offset = parser.parse_integer()
    ivs: dict[int, int] = {}
    while True:
        sign = 1
        if parser.parse_optional_punctuation("+") is None:
            if parser.parse_optional_punctuation("-") is None:
                break
            sign = -1
        coeff = parser.parse_integer(allow_negative=False)
        parser.parse_punctuation("*")
        name = parser.parse_identifier()
        if not (name.startswith("i") and name[1:].isdigit()):
            parser.raise_error(f"expected a loop induction variable like 'i0', got '{name}'")
        ivs[int(name[1:])] = ivs.get(int(name[1:]), 0) + sign * coeff
    parser.parse_punctuation(":")

    def pair() -> tuple[int, int]:
        vals = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        if len(vals) != 2:
            parser.raise_error("access pattern entries must be [step, num] pairs")
        return vals[0], vals[1]

    pairs = [pair()]
    while parser.parse_optional_punctuation(",") is not None:
        pairs.append(pair())
    depth = max(ivs) + 1 if ivs else 0
    coeffs = [ivs.get(d, 0) for d in range(depth)]
    dyn = _parse_dyn(parser)
    view = parser.parse_identifier() if parser.parse_optional_keyword("as") is not None else ""
    return AccessPatternAttr(offset, pairs, coeffs, view, dyn)


def ap_body_str(ap: AccessPatternAttr) -> str:
    offset, ivs, pairs, view, (kind, role, reg, scale) = ap.data
    text = str(offset)
    for d, c in enumerate(ivs):
        if c:
            text += f" {'+' if c > 0 else '-'} {abs(c)}*i{d}"
    text += " : " + ", ".join(f"[{s}, {n}]" for s, n in pairs)
    if kind:
        text += f" + {scale}*" + {"reg": f"r{reg}", "scalar": role, "vector": f"vector {role}",
                                   "indirect": f"indirect {role}"}[kind]
    return text + (f" as {view}" if view else "")


# Shared instances of small immutable attributes (ints, strings, the attribute views of an access pattern's fields):
# passes build many of them, mostly the same few values. Only exact ints and strs are shared (True == 1 but prints
# differently), so every attribute is equal to, and prints as, the one it replaces.
@functools.lru_cache(maxsize=1 << 16)
def _int_attr(value: int) -> IntAttr:
    return IntAttr(value)


def int_attr(value: int) -> IntAttr:
    """``IntAttr(value)``, shared for a plain int."""
    return _int_attr(value) if type(value) is int else IntAttr(value)


@functools.lru_cache(maxsize=1 << 16)
def _string_attr(value: str) -> StringAttr:
    return StringAttr(value)


def string_attr(value: str) -> StringAttr:
    """``StringAttr(value)``, shared for a plain str."""
    return _string_attr(value) if type(value) is str else StringAttr(value)


@functools.lru_cache(maxsize=1 << 12)
def _names_cached(names: tuple[str, ...]) -> ArrayAttr[StringAttr]:
    return ArrayAttr([_string_attr(n) for n in names])


def names_attr(names: Sequence[str]) -> ArrayAttr[StringAttr]:
    """``ArrayAttr`` of ``StringAttr``s (an instruction's operand roles, its memloc references), shared."""
    key = tuple(names)
    if all(type(n) is str for n in key):
        return _names_cached(key)
    return ArrayAttr([StringAttr(n) for n in key])


@functools.lru_cache(maxsize=1 << 18)
def _i64_cached(value: int) -> "IntegerAttr[I64]":
    if 0 <= value < 1 << 63:
        # What IntegerAttr(value, i64) verifies (parameter kinds, the value in range, no normalisation) holds
        # here by construction; xDSL's generic verification cost ~25 us for every new instruction id.
        attr = IntegerAttr.__new__(IntegerAttr)
        object.__setattr__(attr, "value", _int_attr(value))
        object.__setattr__(attr, "type", i64)
        return attr
    return IntegerAttr(value, i64)


def i64_attr(value: int) -> "IntegerAttr[I64]":
    """``IntegerAttr(value, i64)``, shared for a plain int: instruction ids, semaphores, queues and integer fields
    are built for every instruction by several passes, and an IntegerAttr normalises and verifies when built."""
    if type(value) is int:
        return _i64_cached(value)
    return IntegerAttr(value, i64)


@functools.lru_cache(maxsize=1 << 16)
def _dense_i64_cached(values: tuple[int, ...]) -> "DenseArrayBase":
    return DenseArrayBase.from_list(i64, list(values))


def dense_i64_attr(values: Sequence[int]) -> "DenseArrayBase":
    """``DenseArrayBase.from_list(i64, values)``, shared for plain ints (memloc shapes and addresses: the same few
    values for thousands of tiles, each built and verified again, ~50 us)."""
    key = tuple(values)
    if all(type(v) is int for v in key):
        return _dense_i64_cached(key)
    return DenseArrayBase.from_list(i64, list(key))


_DENSE: dict[int, tuple["DenseArrayBase", tuple[int, ...]]] = {}


def dense_ints(attr: "DenseArrayBase") -> tuple[int, ...]:
    """The values of an integer dense array (a memloc's shape or address), decoded once per attribute object:
    passes read every operand's memloc address and shape, and ``get_values`` unpacks the bytes each time. Keyed by
    identity (the entry holds the attribute, so its id is not reused while cached): hashing a DenseArrayBase walks
    its parameters in Python and cost more than the decoding."""
    hit = _DENSE.get(id(attr))
    if hit is not None and hit[0] is attr:
        return hit[1]
    values = tuple(int(v) for v in attr.get_values())
    if len(_DENSE) >= 1 << 16:
        _DENSE.clear()
    _DENSE[id(attr)] = (attr, values)
    return values


@functools.lru_cache(maxsize=1 << 14)
def _ivs_cached(ivs: tuple[int, ...]) -> ArrayAttr[IntAttr]:
    return ArrayAttr([_int_attr(c) for c in ivs])


@functools.lru_cache(maxsize=1 << 14)
def _pairs_cached(pairs: tuple[tuple[int, int], ...]) -> ArrayAttr[ArrayAttr[IntAttr]]:
    return ArrayAttr([ArrayAttr([_int_attr(s), _int_attr(n)]) for s, n in pairs])


def contiguous_pattern(shape: Sequence[int]) -> list[tuple[int, int]]:
    """Row-major [step, num] pairs for a dense tensor of ``shape``."""
    pairs: list[tuple[int, int]] = []
    step = 1
    for n in reversed(shape):
        pairs.append((step, n))
        step *= n
    return list(reversed(pairs))


def element_type(dtype: str) -> "Attribute":
    """The builtin xDSL element type used in tensor types for an NKI dtype."""
    return _element_types()[dtype]


@functools.cache
def _element_types() -> dict[str, "Attribute"]:
    """NKI dtype -> element type, from each dtype's record (``DtypeRecord.element``), built once (attributes are
    immutable; building the table took ~0.6 ms, and every traced tensor type asks for it)."""
    return {r.name: _mlir_element(r.element) for r in DTYPE_RECORDS}


def _mlir_element(name: str) -> Attribute:
    """The element type a dtype record writes in MLIR's own syntax (``f32``, ``ui16``, ``vector<4xf8E4M3FN>``: four
    values per element), read by xDSL's parser, so a new dtype needs no table here."""
    return Parser(Context(), name).parse_type()


def dtype_of_element_type(t: "Attribute") -> str:
    for name in DTYPES:
        if element_type(name) == t:
            return name
    raise VerifyException(f"element type {t} is not an NKI dtype")


NkicAttrs = Dialect("nkic", [], [AccessPatternAttr])


def ap_indices(offset: int, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """Flat storage indices an access pattern touches, shaped like the pattern (outermost first)."""
    idx = np.full((), offset, dtype=np.int64)
    for step, num in pairs:
        idx = idx[..., None] + step * np.arange(num, dtype=np.int64)
    return idx


def attr_of(value: object) -> "Attribute":
    """A Python field value as a property attribute: bool -> i1, int -> i64, float -> f32, str -> string.
    Plain values get shared attributes (bir-to-isa builds every instruction's fields)."""
    kind = type(value)
    if kind is str:
        return _string_attr(value)  # type: ignore[arg-type]
    if kind is int:
        return _i64_cached(value)  # type: ignore[arg-type]
    if kind is bool:
        return _bool_cached(value)  # type: ignore[arg-type]
    if kind is float and value != 0.0:  # 0.0 == -0.0 as a cache key, but they are different fields
        return _f32_cached(value)  # type: ignore[arg-type]
    return _attr_of(value)


@functools.lru_cache(maxsize=2)
def _bool_cached(value: bool) -> "Attribute":
    return IntegerAttr(int(value), i1)


@functools.lru_cache(maxsize=1 << 12)
def _f32_cached(value: float) -> "Attribute":
    return FloatAttr(value, f32)


def _attr_of(value: object) -> "Attribute":
    if isinstance(value, Attribute):
        return value
    if isinstance(value, bool):
        return IntegerAttr(int(value), i1)
    if isinstance(value, int):
        return i64_attr(value)
    if isinstance(value, float):
        return FloatAttr(value, f32)
    if isinstance(value, str):
        return string_attr(value)
    raise TypeError(f"cannot store {value!r} as an op field")


def value_of(attr: "Attribute | None") -> "str | int | float | bool | None":
    """The Python value of a field attribute (inverse of ``attr_of``)."""
    if attr is None:
        return None
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)
    if isinstance(attr, IntegerAttr):
        return bool(attr.value.data) if attr.type == i1 else int(attr.value.data)
    raise TypeError(f"unexpected field attribute {attr}")


# The generation a module was traced for (``builtin.module attributes {nkic.target = "gen2"}``), stamped by the
# tracer as Triton stamps ``ttg.target``: passes run from nkic-opt on a dump plan for it.
TARGET_ATTR = "nkic.target"


def module_target(op: "Operation") -> str | None:
    """The ``nkic.target`` of the module enclosing ``op`` (``op`` itself included), or None."""
    while op is not None and not isinstance(op, ModuleOp):
        op = op.parent_op()  # type: ignore[assignment]
    attr = None if op is None else op.attributes.get(TARGET_ATTR)
    return attr.data if isinstance(attr, StringAttr) else None


def stamp_target(module: "Operation", target: str) -> None:
    """Name ``target`` as the generation ``module`` is compiled for (the tracer's stamp, or the driver's option)."""
    module.attributes[TARGET_ATTR] = StringAttr(target)
