"""NKI dtypes (canonical strings, as in NKI 0.3+) and memory buffers.

A dtype is its canonical name (``"bfloat16"``), an instance of :class:`dtype`, a ``str`` subclass: NKI declares
``DType = str``, kernels annotate parameters with ``nki.dtype`` and test ``isinstance(x, nl.dtype)``, and
``nl.bfloat16 == "bfloat16"``. A plain string is accepted wherever a dtype is expected (nki-library compares
``str(dtype)``); numpy / ml_dtypes dtypes are accepted too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from nkic.target.vocab import DTYPES, dtype_from_numpy, dtype_size
from nkic.frontend.errors import NkiError

class dtype(str):  # noqa: N801 — NKI's spelling (``nki.dtype``, ``nl.dtype``)
    """An NKI dtype: its canonical name as a string (so it compares and hashes like the name)."""

    __slots__ = ()


# Spellings seen in public kernels -> canonical name.
_ALIASES = {
    "bool": "bool_", "float8e4": "float8_e4m3", "float8e5": "float8_e5m2", "fp32": "float32", "bf16": "bfloat16",
    "fp16": "float16", "half": "float16",
}  # fmt: skip

# Names NKI knows but nkic cannot compile (yet).
_UNSUPPORTED: set[str] = set()


def normalize_dtype(value: Any) -> str:
    """The canonical NKI dtype (a :class:`dtype`) of ``value``; NkiError if nkic does not support it."""
    if isinstance(value, str):
        name = _ALIASES.get(value, value)
        if name in DTYPES:
            return dtype(name)
        if name in _UNSUPPORTED:
            raise NkiError(f"unsupported dtype '{name}'", f"nkic supports: {', '.join(DTYPES)}")
        raise NkiError(f"unknown dtype '{value}'", f"expected one of: {', '.join(DTYPES)}")
    try:
        np_dtype = np.dtype(value)
    except TypeError:
        raise NkiError(f"unknown dtype {value!r}", "pass an nl dtype such as nl.float32") from None
    name = dtype_from_numpy(np_dtype)
    if name is None:
        raise NkiError(f"unsupported dtype '{np_dtype}'", f"nkic supports: {', '.join(DTYPES)}")
    return dtype(name)


def itemsize(dtype: str) -> int:
    return dtype_size(dtype)


class NamedToken:
    """An ``nl`` constant known by its NKI name: ``str()`` gives the name, ``repr()`` the ``nl.`` spelling."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"nl.{self.name}"


class _RegionType(type):
    """The type of ``nl.MemoryRegion``: like the reference's Enum, its members iterate in order, ``MemoryRegion('sbuf')``
    and ``MemoryRegion['sbuf']`` look one up, and it is a real type (``isinstance(nl.sbuf, nl.MemoryRegion)``)."""

    _members: dict[str, Buffer]

    def __call__(cls, value: Any) -> Buffer:  # type: ignore[override]
        if isinstance(value, Buffer):
            return value
        member = cls._members.get(value) if isinstance(value, str) else None
        if member is None:
            raise ValueError(f"{value!r} is not a valid MemoryRegion")
        return member

    def __getitem__(cls, name: str) -> Buffer:
        if name not in cls._members:
            raise KeyError(name)
        return cls._members[name]

    def __iter__(cls) -> Iterator[Buffer]:
        return iter(dict.fromkeys(cls._members.values()))

    def __len__(cls) -> int:
        return len(dict.fromkeys(cls._members.values()))

    def __contains__(cls, value: object) -> bool:
        return isinstance(value, Buffer)


class Buffer(NamedToken, metaclass=_RegionType):
    """A memory region (``nl.sbuf`` …), named as stored on penguin allocations; ``nl.MemoryRegion`` is this type.

    Members: ``sbuf``, ``psum``, ``private_hbm``, ``shared_hbm`` (``value`` = that name); ``hbm`` is an alias of
    ``private_hbm`` (equal to it, with the same value) that keeps its own name on the IR."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return self.name == other or _region(self.name) == other
        return isinstance(other, Buffer) and _region(other.name) == _region(self.name)

    def __hash__(self) -> int:
        return hash(_region(self.name))

    @property
    def value(self) -> str:
        return _region(self.name)

    @property
    def on_chip(self) -> bool:
        return self.name in ("sbuf", "psum")

    @property
    def is_hbm(self) -> bool:
        return not self.on_chip


def _region(name: str) -> str:
    """The memory region a buffer name denotes: NKI's ``nl.hbm`` is an alias of ``nl.private_hbm``."""
    return "private_hbm" if name == "hbm" else name


def _member(name: str) -> Buffer:
    buffer = object.__new__(Buffer)
    NamedToken.__init__(buffer, name)
    return buffer


BUFFERS = {name: _member(name) for name in ("sbuf", "psum", "hbm", "shared_hbm", "private_hbm")}
Buffer._members = {"sbuf": BUFFERS["sbuf"], "psum": BUFFERS["psum"], "private_hbm": BUFFERS["private_hbm"],
                   "shared_hbm": BUFFERS["shared_hbm"], "hbm": BUFFERS["hbm"]}  # fmt: skip
for _name in ("sbuf", "psum", "private_hbm", "shared_hbm", "hbm"):
    setattr(Buffer, _name, BUFFERS[_name])


def normalize_buffer(buffer: Any) -> Buffer:
    """``nl.sbuf`` or ``'sbuf'`` (NKI 0.2 strings) -> Buffer; NkiError for anything else."""
    if isinstance(buffer, Buffer):
        return buffer
    if isinstance(buffer, str) and buffer in BUFFERS:
        return BUFFERS[buffer]
    raise NkiError(f"unknown buffer {buffer!r}", "use nl.sbuf, nl.psum, nl.hbm, nl.private_hbm or nl.shared_hbm")
