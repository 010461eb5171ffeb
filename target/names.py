"""The names a NEFF may carry: kernel (NEFF) names, variable names and tar member names.

A NEFF is untrusted input and its names become file names (``nkic run`` writes ``<output-dir>/<name>.npy``), so the
writer and the reader accept only :data:`SAFE_NAME`: an ASCII letter or underscore, then up to 127 ASCII letters,
digits, underscores or dots (the compiler names per-iteration and inlined tensors ``t.0``, ``kernel.t``). No ``/``,
``\\``, NUL, space or non-ASCII character can appear, and a name cannot start with a dot, so a name is always a single,
portable, visible file-name component of at most 128 bytes (never ``.`` or ``..``). The tracer turns any
user-provided name into one with :func:`safe_name` (``nl.ndarray(name="a b/c")`` becomes ``a_b_c``), so compiling
never fails on a name.
"""

from __future__ import annotations

import re

__all__ = ["SAFE_NAME", "MAX_NAME_LENGTH", "is_safe_name", "safe_name"]

MAX_NAME_LENGTH = 128
SAFE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,%d}" % (MAX_NAME_LENGTH - 1))
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9_.]")


def is_safe_name(name: object) -> bool:
    return isinstance(name, str) and SAFE_NAME.fullmatch(name) is not None


def safe_name(name: str, default: str = "t", room: int = 16) -> str:
    """``name`` with every character outside ``[A-Za-z0-9_.]`` replaced by ``_``, a leading digit or dot prefixed by
    ``_``, and cut so that ``room`` more characters (a uniquing suffix) still fit the limit; ``default`` if nothing is left."""
    cleaned = _UNSAFE_CHAR.sub("_", name)
    if not cleaned:
        cleaned = default
    if not (cleaned[0].isalpha() or cleaned[0] == "_"):
        cleaned = "_" + cleaned
    return cleaned[: MAX_NAME_LENGTH - room]
