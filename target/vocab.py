"""The vocabularies of the machine: dtypes, ALU ops, activation functions, reduce commands, memories, engines.

Each dtype, ALU op, activation function and reduce command is one record (``DTYPE_RECORDS``, ``ALU_RECORDS``,
``ACT_RECORDS``, ``REDUCE_RECORDS``): its name (the ``nl`` token), its code, and what the numerics and the frontend
read of it. The tables everyone else uses (``DTYPES``, ``DTYPE_CODES``, ``FLOAT_DTYPES``, ``ALU_OPS``, ...) are
derived from them, so adding a dtype or an ALU op is one record (and its tests).

Every entry carries its binary code explicitly: the code is part of the ISA (``runtime/ISA_FORMAT.md``), so it
never depends on the position of a name in a list. IR levels store the names; only the encoder sees the codes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = [
    "Vocabulary", "DtypeRecord", "DTYPE_RECORDS", "DTYPE_BY_NAME", "AluRecord", "ALU_RECORDS", "ALU_BY_NAME",
    "NamedCode", "ACT_RECORDS", "REDUCE_RECORDS",
    "DTYPES", "DTYPE_CODES", "FLOAT_DTYPES", "ALU_OPS", "ACT_FUNCS", "REDUCE_CMDS", "IR_MEMORIES",
    "ISA_MEMORIES", "HBM_MEMORIES", "ON_CHIP", "dtype_size", "numpy_dtype", "dtype_from_numpy", "PACKED_DTYPES",
    "PackedDtype",
]  # fmt: skip


@dataclass(frozen=True)
class Vocabulary:
    """Names with explicit binary codes; ``what`` names the vocabulary in error messages."""

    what: str
    codes: Mapping[str, int]

    def __post_init__(self) -> None:
        if len(set(self.codes.values())) != len(self.codes):
            raise ValueError(f"{self.what}: two names share a code")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.codes)

    def __contains__(self, name: object) -> bool:
        return name in self.codes

    def __iter__(self) -> Iterator[str]:
        return iter(self.codes)

    def __len__(self) -> int:
        return len(self.codes)

    def code(self, name: str) -> int:
        if name not in self.codes:
            raise ValueError(f"unknown {self.what} '{name}', expected one of: {', '.join(self.codes)}")
        return self.codes[name]

    def name_of(self, code: int) -> str | None:
        """The name with binary code ``code``, None when no name has it (a corrupt record)."""
        return self._by_code.get(code)

    @property
    def _by_code(self) -> dict[int, str]:
        cached = self.__dict__.get("_by_code_cache")
        if cached is None:
            cached = {c: n for n, c in self.codes.items()}
            object.__setattr__(self, "_by_code_cache", cached)
        return cached


def _numbered(what: str, names: str) -> Vocabulary:
    """A vocabulary whose codes are written next to the names (``"0 bypass, 1 add, ..."``)."""
    codes: dict[str, int] = {}
    for item in names.split(","):
        code, name = item.split()
        codes[name] = int(code, 0)
    return Vocabulary(what, codes)


@dataclass(frozen=True)
class PackedDtype:
    """A packed MX dtype: ``count`` values of ``element`` (``bits`` wide each) in one storage word.

    Value ``j`` of a word sits in bits ``[j * bits, (j + 1) * bits)`` of the little-endian word: for the fp8 types
    byte ``j``, for float4_e2m1fn_x4 the low nibble of byte 0 is value 0, its high nibble value 1, and so on (the
    layout of the NKI docs' MX examples, which view 4 fp8 bytes as one uint32 and pack 2 fp4 values per byte).
    """

    element: np.dtype
    bits: int
    count: int = 4

    def unpack(self, words: np.ndarray) -> np.ndarray:
        """(..., n) words -> (..., n * count) values of ``element`` (bit-exact)."""
        raw = np.ascontiguousarray(words).view(np.uint8)
        if self.bits == 4:
            raw = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(*raw.shape[:-1], -1)
        return raw.view(self.element)

    def pack(self, values: np.ndarray) -> np.ndarray:
        """(..., n * count) values of ``element`` -> (..., n) storage words (the inverse of ``unpack``)."""
        raw = np.ascontiguousarray(values.astype(self.element)).view(np.uint8)
        if self.bits == 4:
            pairs = raw.reshape(*raw.shape[:-1], -1, 2)
            raw = ((pairs[..., 0] & 0xF) | (pairs[..., 1] << 4)).astype(np.uint8)
        return np.ascontiguousarray(raw).view(_PACKED_STORAGE[self.bits])


_PACKED_STORAGE = {8: np.dtype(np.uint32), 4: np.dtype(np.uint16)}


@dataclass(frozen=True)
class DtypeRecord:
    """One dtype, said once: its ``nl`` name (also its IR name), its code in ISA operand records
    (``runtime/ISA_FORMAT.md``), its numpy storage (what the numerics compute in), the MLIR element type of penguin
    tensors holding it, whether it is a float type, and for packed MX data how values sit in a storage word."""

    name: str
    code: int
    storage: np.dtype
    element: str  # MLIR element type name (dialects/common.py builds the attribute)
    is_float: bool = False
    packed: PackedDtype | None = None


def _dt(name: str, code: int, storage: object, element: str, is_float: bool = False,
        packed: PackedDtype | None = None) -> DtypeRecord:  # fmt: skip
    return DtypeRecord(name, code, np.dtype(storage), element, is_float, packed)  # type: ignore[call-overload]


# In this order: dtype_from_numpy takes the first record whose storage matches a numpy dtype.
DTYPE_RECORDS: tuple[DtypeRecord, ...] = (
    _dt("float32", 0, np.float32, "f32", True),
    _dt("bfloat16", 1, ml_dtypes.bfloat16, "bf16", True),
    _dt("float16", 2, np.float16, "f16", True),
    _dt("int32", 3, np.int32, "i32"),
    _dt("uint32", 4, np.uint32, "ui32"),
    _dt("int16", 5, np.int16, "i16"),
    _dt("uint16", 6, np.uint16, "ui16"),
    _dt("int8", 7, np.int8, "i8"),
    _dt("uint8", 8, np.uint8, "ui8"),
    # NKI's float8_e4m3 is the IEEE-style e4m3 of NeuronCore v2/v3 (max 240, with infinities: nki-library clips
    # fp8 to 240 there); float8_e4m3fn is OCP's finite e4m3 (max 448, NaN only) of v4 and the MX formats.
    _dt("float8_e4m3", 9, ml_dtypes.float8_e4m3, "f8E4M3", True),
    _dt("float8_e5m2", 10, ml_dtypes.float8_e5m2, "f8E5M2", True),
    _dt("bool_", 11, np.uint8, "i1"),  # stored as uint8
    # The OCP MX shared scale: a power of two 2**(byte - 127), 0xFF = NaN.
    _dt("float8_e8m0fnu", 12, ml_dtypes.float8_e8m0fnu, "f8E8M0FNU", True),
    # Packed MX data (nc_matmul_mx / quantize_mx): one element holds 4 values; storage is the raw word.
    _dt("float8_e4m3fn_x4", 13, np.uint32, "vector<4xf8E4M3FN>",
        packed=PackedDtype(np.dtype(ml_dtypes.float8_e4m3fn), 8)),
    _dt("float8_e5m2_x4", 14, np.uint32, "vector<4xf8E5M2>", packed=PackedDtype(np.dtype(ml_dtypes.float8_e5m2), 8)),
    _dt("float4_e2m1fn_x4", 15, np.uint16, "vector<4xf4E2M1FN>",
        packed=PackedDtype(np.dtype(ml_dtypes.float4_e2m1fn), 4)),
    _dt("float8_e4m3fn", 16, ml_dtypes.float8_e4m3fn, "f8E4M3FN", True),
    # TensorFloat-32: float32 storage; the PE reads it with the low 13 mantissa bits dropped (runtime/semantics.py
    # tf32). Last, so a numpy float32 array is float32 (dtype_from_numpy takes the first match).
    _dt("tfloat32", 17, np.float32, "tf32", True),
)
DTYPE_BY_NAME: dict[str, DtypeRecord] = {r.name: r for r in DTYPE_RECORDS}
# NKI dtype name -> numpy storage dtype.
DTYPES: dict[str, np.dtype] = {r.name: r.storage for r in DTYPE_RECORDS}
DTYPE_CODES = Vocabulary("dtype", {r.name: r.code for r in DTYPE_RECORDS})
FLOAT_DTYPES = frozenset(r.name for r in DTYPE_RECORDS if r.is_float)
PACKED_DTYPES: dict[str, PackedDtype] = {r.name: r.packed for r in DTYPE_RECORDS if r.packed is not None}


_Binary = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class AluRecord:
    """One ALU operation, said once: its name (also its ``nl`` operator token, ``op=nl.<name>``), its code in
    instruction records, its arithmetic and the flags the numerics (runtime/semantics.py) and the frontend read."""

    name: str
    code: int
    # ``fn(a, b)`` on numpy arrays, both float32 or both int64 (runtime/semantics.py ``alu`` chooses the mode from
    # the flags and runs it with numpy's floating-point errors silenced); a unary op ignores ``b``.
    fn: _Binary
    unary: bool = False  # the scalar / second operand is ignored (abs, rsqrt, ...)
    bitvec: bool = False  # computes on the integer bits (bitwise ops, shifts)
    int_exact: bool = False  # in integer mode the result is an exact integer (else computed in float32)
    # nl.<name>(x, y) is a binary tile function (the generations that have it are target/rules/language.py's)
    tile_function: bool = False


def _alu(name: str, code: int, flags: str, fn: _Binary) -> AluRecord:
    """``flags``: any of ``unary``, ``bitvec``, ``exact`` (int_exact; bitvec ops are exact too), ``tile`` (a binary
    tile function)."""
    f = set(flags.split())
    return AluRecord(name, code, fn, "unary" in f, "bitvec" in f, "exact" in f or "bitvec" in f, "tile" in f)


# -- the ALU ops' arithmetic (runtime/semantics.py ``alu`` runs it) ------------------------------------------------
def _cmp(fn: _Binary) -> _Binary:
    return lambda a, b: fn(a, b).astype(np.result_type(a, b))


def _logical(fn: _Binary) -> _Binary:
    return lambda a, b: fn(a != 0, b != 0).astype(np.result_type(a, b))


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return a / b
    # Integer division truncates toward zero like C. Division by zero has one result on every engine and
    # instruction: what the fp32 path gives once stored (x/0 = +-inf saturates to the dtype's max/min, 0/0 = NaN
    # stores 0), so tensor_tensor's exact integer path and tensor_scalar's fp32 path agree (the hardware rule is
    # unpublished). The quotient is returned as float64 (exact for 32-bit operands) so that cast() saturates it.
    safe = np.where(b == 0, 1, b)
    q = (np.abs(a) // np.abs(safe) * np.sign(a) * np.sign(safe)).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b == 0, np.asarray(a, np.float64) / 0.0, q)


def _mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.mod(a, b)
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.mod(a, safe))


def _shift_amount(b: np.ndarray) -> np.ndarray:
    return np.clip(b, 0, 32)


_U32 = 0xFFFFFFFF
ALU_RECORDS: tuple[AluRecord, ...] = (
    _alu("bypass", 0, "exact", lambda a, b: a),
    _alu("add", 1, "exact tile", np.add),
    _alu("subtract", 2, "exact tile", np.subtract),
    _alu("multiply", 3, "exact tile", np.multiply),
    _alu("divide", 4, "exact tile", _divide),
    _alu("maximum", 5, "exact tile", np.maximum),
    _alu("minimum", 6, "exact tile", np.minimum),
    _alu("equal", 7, "exact tile", _cmp(np.equal)),
    _alu("not_equal", 8, "exact tile", _cmp(np.not_equal)),
    _alu("greater", 9, "exact tile", _cmp(np.greater)),
    _alu("greater_equal", 10, "exact tile", _cmp(np.greater_equal)),
    _alu("less", 11, "exact tile", _cmp(np.less)),
    _alu("less_equal", 12, "exact tile", _cmp(np.less_equal)),
    _alu("logical_and", 13, "exact tile", _logical(np.logical_and)),
    _alu("logical_or", 14, "exact tile", _logical(np.logical_or)),
    _alu("logical_xor", 15, "exact tile", _logical(np.logical_xor)),
    _alu("bitwise_and", 16, "bitvec tile", np.bitwise_and),
    _alu("bitwise_or", 17, "bitvec tile", np.bitwise_or),
    _alu("bitwise_xor", 18, "bitvec tile", np.bitwise_xor),
    # Shifts act on the 32-bit register image; right_shift is logical (NKI has no arithmetic shift).
    _alu("left_shift", 19, "bitvec tile", lambda a, b: ((a & _U32) << _shift_amount(b)) & _U32),
    _alu("right_shift", 20, "bitvec tile", lambda a, b: (a & _U32) >> _shift_amount(b)),
    _alu("power", 21, "tile", np.power),
    # nki.language: the signed operand of larger / smaller magnitude, ties -> the second operand.
    _alu("abs_max", 22, "exact tile", lambda a, b: np.where(np.abs(a) > np.abs(b), a, b)),
    _alu("abs_min", 23, "exact tile", lambda a, b: np.where(np.abs(a) < np.abs(b), a, b)),
    _alu("mod", 24, "exact tile", _mod),
    _alu("abs", 25, "unary exact", lambda a, b: np.abs(a)),
    _alu("rsqrt", 26, "unary", lambda a, b: np.float32(1.0) / np.sqrt(a)),
    _alu("reciprocal", 27, "unary", lambda a, b: np.float32(1.0) / a),
    _alu("square", 28, "unary exact", lambda a, b: a * a),
    _alu("relu", 29, "unary exact", lambda a, b: np.maximum(a, np.zeros((), a.dtype))),
    # KLR's AluOp "average": the mean of the two operands (as a reduction, the mean of the reduced elements).
    _alu("average", 0x60, "tile", lambda a, b: (a + b) / np.float32(2)),  # fp32 (not an integer-exact op)
)
ALU_BY_NAME: dict[str, AluRecord] = {r.name: r for r in ALU_RECORDS}
ALU_OPS = Vocabulary("ALU opcode", {r.name: r.code for r in ALU_RECORDS})


@dataclass(frozen=True)
class NamedCode:
    """An activation function or a reduce command: its name (for activation functions also the ``nl`` token,
    ``op=nl.<name>``) and its code in instruction records."""

    name: str
    code: int


def _records(text: str) -> tuple[NamedCode, ...]:
    """Records written as ``"0 copy, 1 exp, ..."`` (the code next to the name, as the ISA tables print them)."""
    return tuple(NamedCode(name, int(code, 0)) for code, name in (item.split() for item in text.split(",")))


ACT_RECORDS = _records(
    "0 copy, 1 exp, 2 log, 3 tanh, 4 sigmoid, 5 relu, 6 gelu, 7 gelu_apprx_tanh, 8 silu, 9 square, 10 sqrt, "
    "11 rsqrt, 12 reciprocal, 13 sin, 14 abs, 15 sign, 16 softplus, 17 erf, 18 arctan, 19 mish, "
    "20 gelu_apprx_sigmoid, "
    "0x60 gelu_dx, 0x61 gelu_apprx_sigmoid_dx, 0x62 silu_dx, 0x63 erf_dx, 0x64 prelu"
)
ACT_FUNCS = Vocabulary("activation function", {r.name: r.code for r in ACT_RECORDS})
REDUCE_RECORDS = _records("0 idle, 1 reset, 2 reduce, 3 reset_reduce, 4 load_reduce")
REDUCE_CMDS = Vocabulary("reduce command", {r.name: r.code for r in REDUCE_RECORDS})

# Memory spaces of the IR (penguin tensors, bir memlocs) and of ISA operands (``none`` = a pattern-only operand).
IR_MEMORIES: tuple[str, ...] = ("sbuf", "psum", "hbm", "shared_hbm", "private_hbm")
HBM_MEMORIES: tuple[str, ...] = ("hbm", "shared_hbm", "private_hbm")
ON_CHIP: tuple[str, ...] = ("sbuf", "psum")
ISA_MEMORIES = _numbered("memory", "0 sbuf, 1 psum, 2 hbm, 3 none")


def dtype_size(dtype: str) -> int:
    return DTYPES[dtype].itemsize


def numpy_dtype(dtype: str) -> np.dtype:
    return DTYPES[dtype]


def dtype_from_numpy(dt: np.dtype) -> str | None:
    """The NKI dtype name of a numpy dtype, or None when nkic has no such dtype."""
    dt = np.dtype(dt)
    for name, cand in DTYPES.items():
        if cand == dt and name != "bool_" and name not in PACKED_DTYPES:
            return name
    if dt == np.dtype(np.bool_):
        return "bool_"
    return None
