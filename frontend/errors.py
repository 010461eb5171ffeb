"""Errors raised while tracing a kernel, located at the user's source line.

Every user-facing problem is an ``NkiError`` whose message starts with ``file:line:`` of the innermost stack frame
that belongs to the user: frames inside ``nkic/frontend`` (the tracer itself) and inside numpy / ml_dtypes (library
code the user called) are skipped, so the location is the kernel line that made the bad call.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable
from types import CodeType, FrameType

import ml_dtypes
import numpy

_FRONTEND_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (numpy, ml_dtypes))


def _is_internal(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_FRONTEND_DIR) or path.startswith(_LIBRARY_DIRS)


def user_frame() -> FrameType | None:
    """The innermost frame outside the tracer and outside numpy, or None if there is none."""
    frame = sys._getframe(1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


@functools.lru_cache(maxsize=4096)
def _columns(code: CodeType) -> tuple[int, ...]:
    """The 1-based start column of each code unit of ``code`` (0 when Python does not know it), built once per code
    object: a kernel line asks for its column on every instruction it records."""
    return tuple(col + 1 if col is not None else 0 for _, _, col, _ in code.co_positions())


def frame_column(frame: FrameType) -> int:
    """1-based column of the instruction the frame is executing (0 when Python does not know it)."""
    columns, i = _columns(frame.f_code), frame.f_lasti // 2
    return columns[i] if 0 <= i < len(columns) else 0


def user_location() -> tuple[str, int, int]:
    """(file, line, column) of the user's current source position; ('<unknown>', 0, 0) if none."""
    frame = user_frame()
    if frame is None:
        return ("<unknown>", 0, 0)
    return (frame.f_code.co_filename, frame.f_lineno, frame_column(frame))


class NkiError(Exception):
    """A kernel the frontend cannot compile; the message is ``"{file}:{line}: error: {what}. {hint}"``."""

    def __init__(self, what: str, hint: str = "", where: tuple[str, int] | None = None):
        file, line = where if where is not None else user_location()[:2]
        self.what, self.hint, self.file, self.line = what, hint, file, line
        text = f"{file}:{line}: error: {what}."
        super().__init__(f"{text} {hint}" if hint else text)


class NeedsUnroll(BaseException):
    """Internal: a symbolic loop's induction variable needed a concrete value.

    A BaseException so that a user's ``except Exception`` cannot swallow it; the tracer catches it at the top of
    the trace, marks the loop sites as unrolled and re-traces the kernel.
    """

    def __init__(self, sites: Iterable[tuple[str, int, int]]):
        self.sites = tuple(sites)
        super().__init__(f"loop induction variable needs a concrete value (loop sites {self.sites})")
