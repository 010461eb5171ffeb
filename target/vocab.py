"""The vocabularies of the machine: dtypes, ALU ops, activation functions, reduce commands, memories, engines.

Every entry carries its binary code explicitly: the code is part of the ISA (``runtime/ISA_FORMAT.md``), so it
never depends on the position of a name in a list. IR levels store the names; only the encoder sees the codes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = [
    "Vocabulary", "DTYPES", "DTYPE_CODES", "FLOAT_DTYPES", "ALU_OPS", "ACT_FUNCS", "REDUCE_CMDS", "IR_MEMORIES",
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


# NKI dtype name -> numpy dtype. bool_ is stored as uint8.
DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32),
    "int16": np.dtype(np.int16),
    "uint16": np.dtype(np.uint16),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    # NKI's float8_e4m3 is the IEEE-style e4m3 of NeuronCore v2/v3 (max 240, with infinities: nki-library clips
    # fp8 to 240 there); float8_e4m3fn is OCP's finite e4m3 (max 448, NaN only) of v4 and the MX formats.
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "bool_": np.dtype(np.uint8),
    # The OCP MX shared scale: a power of two 2**(byte - 127), 0xFF = NaN.
    "float8_e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
    # Packed MX data (nc_matmul_mx / quantize_mx): one element holds 4 values; storage is the raw word.
    "float8_e4m3fn_x4": np.dtype(np.uint32),
    "float8_e5m2_x4": np.dtype(np.uint32),
    "float4_e2m1fn_x4": np.dtype(np.uint16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    # TensorFloat-32: float32 storage; the PE reads it with the low 13 mantissa bits dropped (runtime/semantics.py
    # tf32). Last, so a numpy float32 array is float32 (dtype_from_numpy takes the first match).
    "tfloat32": np.dtype(np.float32),
}
DTYPE_CODES = _numbered(
    "dtype",
    "0 float32, 1 bfloat16, 2 float16, 3 int32, 4 uint32, 5 int16, 6 uint16, 7 int8, 8 uint8, 9 float8_e4m3, "
    "10 float8_e5m2, 11 bool_, 12 float8_e8m0fnu, 13 float8_e4m3fn_x4, 14 float8_e5m2_x4, 15 float4_e2m1fn_x4, "
    "16 float8_e4m3fn, 17 tfloat32",
)
assert set(DTYPE_CODES) == set(DTYPES)
FLOAT_DTYPES = frozenset(
    {"float32", "bfloat16", "float16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "tfloat32"}
)


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
PACKED_DTYPES: dict[str, PackedDtype] = {
    "float8_e4m3fn_x4": PackedDtype(np.dtype(ml_dtypes.float8_e4m3fn), 8),
    "float8_e5m2_x4": PackedDtype(np.dtype(ml_dtypes.float8_e5m2), 8),
    "float4_e2m1fn_x4": PackedDtype(np.dtype(ml_dtypes.float4_e2m1fn), 4),
}

ALU_OPS = _numbered(
    "ALU opcode",
    "0 bypass, 1 add, 2 subtract, 3 multiply, 4 divide, 5 maximum, 6 minimum, 7 equal, 8 not_equal, 9 greater, "
    "10 greater_equal, 11 less, 12 less_equal, 13 logical_and, 14 logical_or, 15 logical_xor, 16 bitwise_and, "
    "17 bitwise_or, 18 bitwise_xor, 19 left_shift, 20 right_shift, 21 power, 22 abs_max, 23 abs_min, 24 mod, "
    "25 abs, 26 rsqrt, 27 reciprocal, 28 square, 29 relu, "
    "0x60 average",
)
ACT_FUNCS = _numbered(
    "activation function",
    "0 copy, 1 exp, 2 log, 3 tanh, 4 sigmoid, 5 relu, 6 gelu, 7 gelu_apprx_tanh, 8 silu, 9 square, 10 sqrt, "
    "11 rsqrt, 12 reciprocal, 13 sin, 14 abs, 15 sign, 16 softplus, 17 erf, 18 arctan, 19 mish, "
    "20 gelu_apprx_sigmoid, "
    "0x60 gelu_dx, 0x61 gelu_apprx_sigmoid_dx, 0x62 silu_dx, 0x63 erf_dx, 0x64 prelu",
)
REDUCE_CMDS = _numbered("reduce command", "0 idle, 1 reset, 2 reduce, 3 reset_reduce, 4 load_reduce")

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
