"""NKI dtypes (canonical strings, as in NKI 0.3+) and memory buffers.

A dtype is its canonical name (``"bfloat16"``), an instance of :class:`dtype`, a ``str`` subclass: NKI declares
``DType = str``, kernels annotate parameters with ``nki.dtype`` and test ``isinstance(x, nl.dtype)``, and
``nl.bfloat16 == "bfloat16"``. A plain string is accepted wherever a dtype is expected (nki-library compares
``str(dtype)``); numpy / ml_dtypes dtypes are accepted too.
"""

from __future__ import annotations

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
_UNSUPPORTED = {"tfloat32", "float8_e4m3fn"}


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


class Buffer(NamedToken):
    """A memory region (``nl.sbuf`` …), named as stored on penguin allocations."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return self.name == other or _region(self.name) == other
        return isinstance(other, Buffer) and _region(other.name) == _region(self.name)

    def __hash__(self) -> int:
        return hash(_region(self.name))

    @property
    def on_chip(self) -> bool:
        return self.name in ("sbuf", "psum")

    @property
    def is_hbm(self) -> bool:
        return not self.on_chip


def _region(name: str) -> str:
    """The memory region a buffer name denotes: NKI's ``nl.hbm`` is an alias of ``nl.private_hbm``."""
    return "private_hbm" if name == "hbm" else name


BUFFERS = {name: Buffer(name) for name in ("sbuf", "psum", "hbm", "shared_hbm", "private_hbm")}


def normalize_buffer(buffer: Any) -> Buffer:
    """``nl.sbuf`` or ``'sbuf'`` (NKI 0.2 strings) -> Buffer; NkiError for anything else."""
    if isinstance(buffer, Buffer):
        return buffer
    if isinstance(buffer, str) and buffer in BUFFERS:
        return BUFFERS[buffer]
    raise NkiError(f"unknown buffer {buffer!r}", "use nl.sbuf, nl.psum, nl.hbm, nl.private_hbm or nl.shared_hbm")
