"""Errors raised while tracing a kernel, located at the user's source line.

Every user-facing problem is an ``NkiError`` whose message starts with ``file:line:`` of the innermost stack frame
that belongs to the user: frames inside ``nkic/frontend`` (the tracer itself), nkic's runtime entry points
(``api/``, ``interop/``, ...) and inside numpy / ml_dtypes (library
code the user called) are skipped, so the location is the kernel line that made the bad call.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import CodeType, FrameType, TracebackType

import ml_dtypes
import numpy

_FRONTEND_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (numpy, ml_dtypes))
# nkic's runtime entry points: the modules a user's call goes through before the frontend checks its arguments
# (kernel(a) -> execute.run_kernel -> Kernel.trace, nki.profile's runner, nki.simulate, the framework adapters). An
# error raised there is about the user's call, so the user's frame is the one calling into them, not their lines.
_ENTRY_POINT_FILES = frozenset(
    os.path.join(os.path.dirname(_FRONTEND_DIR.rstrip(os.sep)), *f"{m}.py".split("/"))
    for m in ("api/__init__", "api/execute", "api/entry_points", "api/alias", "interop/__init__", "interop/jax",
              "interop/torch", "interop/framework", "compiler/driver", "compiler/cache")
)


# Absolute file name -> whether it is internal. Every recorded instruction walks the stack (~5 frames) to the
# user's frame: one dict lookup per frame instead of normalising the name each time. An absolute name's answer does
# not depend on the working directory; a relative one is never stored here.
_INTERNAL_ABS: dict[str, bool] = {}


def _is_internal(filename: str) -> bool:
    known = _INTERNAL_ABS.get(filename)
    if known is not None:
        return known
    path = os.path.abspath(filename)
    internal = path.startswith(_FRONTEND_DIR) or path.startswith(_LIBRARY_DIRS) or path in _ENTRY_POINT_FILES
    if os.path.isabs(filename) and len(_INTERNAL_ABS) < 4096:
        _INTERNAL_ABS[filename] = internal
    return internal


def user_frame() -> FrameType | None:
    """The innermost frame outside the tracer, nkic's runtime entry points and numpy, or None if there is none."""
    frame = sys._getframe(1)
    known = _INTERNAL_ABS.get
    while frame is not None:
        name = frame.f_code.co_filename
        internal = known(name)
        if internal is None:
            internal = _is_internal(name)
        if not internal:
            break
        frame = frame.f_back
    return frame


# id(code) -> (code, the 1-based start column of each of its code units). Keyed by identity, not by the code object:
# a code object's hash is computed from its contents (bytecode, constants, names) on every lookup. The entry keeps
# the code alive, so its id cannot be reused while the entry exists.
_COLUMNS: dict[int, tuple[CodeType, tuple[int, ...]]] = {}


def _columns(code: CodeType) -> tuple[int, ...]:
    """The 1-based start column of each code unit of ``code`` (0 when Python does not know it), built once per code
    object: a kernel line asks for its column on every instruction it records."""
    entry = _COLUMNS.get(id(code))
    if entry is not None and entry[0] is code:
        return entry[1]
    columns = tuple(col + 1 if col is not None else 0 for _, _, col, _ in code.co_positions())
    if len(_COLUMNS) >= 4096:
        _COLUMNS.clear()
    _COLUMNS[id(code)] = (code, columns)
    return columns


def frame_column(frame: FrameType) -> int:
    """1-based column of the instruction the frame is executing (0 when Python does not know it)."""
    columns, i = _columns(frame.f_code), frame.f_lasti // 2
    return columns[i] if 0 <= i < len(columns) else 0


# A source position that stands for the user's frame while a program not written in Python is traced (the StableHLO
# front door: the MLIR op being lowered), with a note for profiles (the op and its JAX source): the innermost one, per
# thread and context (as the active trace is: two threads lowering programs at once must not see each other's pin).
_PINNED: ContextVar[tuple[str, int, int, str] | None] = ContextVar("nkic_pinned_location", default=None)


@contextmanager
def pinned_location(file: str, line: int, col: int, note: str = "") -> Iterator[None]:
    """Within the block, the user's position is ``file:line:col`` (what instructions record and errors name) and
    ``note`` prefixes each instruction's nki call in profiles."""
    token = _PINNED.set((file, line, col, note))
    try:
        yield
    finally:
        _PINNED.reset(token)


@contextmanager
def without_note() -> Iterator[None]:
    """Within the block, the pinned position stays but no note prefixes the nki calls: a kernel traced there (and
    cached, and reused from other call sites) records its own calls only; the caller stamps its note on its copy."""
    pin = _PINNED.get()
    if pin is None:
        yield
        return
    with pinned_location(*pin[:3], ""):
        yield


def pinned_note() -> str:
    """The note of the innermost pinned position ("" if none)."""
    pin = _PINNED.get()
    return pin[3] if pin is not None else ""


def pinned_call(api_call: str) -> str:
    """The nki call an instruction records: ``api_call``, after the pinned note when there is one."""
    note = pinned_note()
    if not note:
        return api_call
    return f"{note} {api_call}" if api_call else note


# The front door's own code: while it runs, a pinned position stands for it (a user's NKI kernel a custom call traces
# keeps its own lines).
_FRONT_DOOR_DIR = os.path.join(os.path.dirname(_FRONTEND_DIR.rstrip(os.sep)), "hlo") + os.sep


def user_location() -> tuple[str, int, int]:
    """(file, line, column) of the user's current source position; ('<unknown>', 0, 0) if none. Within
    ``pinned_location``, the pinned position when the innermost user frame is nkic's front door (``hlo/``)."""
    frame = user_frame()
    pin = _PINNED.get()
    if pin is not None and (frame is None or os.path.abspath(frame.f_code.co_filename).startswith(_FRONT_DOOR_DIR)):
        return pin[:3]
    if frame is None:
        return ("<unknown>", 0, 0)
    return (frame.f_code.co_filename, frame.f_lineno, frame_column(frame))


class NkiWarning(UserWarning):
    """A kernel that compiles but probably does not do what its author meant (``file:line: warning: ...``)."""


class NkiError(Exception):
    """A kernel the frontend cannot compile; the message is ``"{file}:{line}: error: {what}. {hint}"``."""

    def __init__(self, what: str, hint: str = "", where: tuple[str, int] | None = None):
        file, line = where if where is not None else user_location()[:2]
        self.what, self.hint, self.file, self.line = what, hint, file, line
        text = f"{file}:{line}: error: {what}."
        super().__init__(f"{text} {hint}" if hint else text)


_NKIC_DIR = os.path.dirname(_FRONTEND_DIR.rstrip(os.sep)) + os.sep
# nkic's own code (the bundled kernels/ and the tests' kernels are user code); the standard library and installed
# packages are the user's libraries: a frame there is not where the user's kernel went wrong.
_NKIC_CODE = tuple(
    _NKIC_DIR + d + os.sep
    for d in ("frontend", "tools", "passes", "runtime", "dialects", "target", "support", "compiler", "api", "interop")
)
_LIBRARIES = tuple({sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")})


def _is_nkic(path: str) -> bool:
    return path.startswith(_NKIC_CODE) or (os.path.dirname(path) + os.sep == _NKIC_DIR)


def caller_location() -> tuple[str, int]:
    """``file:line`` of the innermost caller outside nkic (and numpy): where the user called into nkic."""
    frame = sys._getframe(1)
    while frame is not None and (_is_internal(frame.f_code.co_filename) or _is_nkic(frame.f_code.co_filename)):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("<unknown>", 0)


def _innermost_user_frame(tb: TracebackType | None) -> tuple[str, int] | None:
    """The innermost traceback entry in the user's code: not nkic, numpy or ml_dtypes; outside the standard library
    and installed packages when such an entry exists."""
    best: tuple[str, int] | None = None
    best_is_library = True
    while tb is not None:
        path = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not _is_internal(path) and not _is_nkic(path):
            is_library = path.startswith(_LIBRARIES) and not path.startswith(_NKIC_DIR)
            if not is_library or best_is_library:
                best, best_is_library = (tb.tb_frame.f_code.co_filename, tb.tb_lineno), is_library
        tb = tb.tb_next
    return best


def _raised_in_nkic(tb: TracebackType | None) -> bool:
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and (_is_nkic(os.path.abspath(last.tb_frame.f_code.co_filename)))


def located_error(error: BaseException, context: str = "", source: str | None = None) -> NkiError:
    """``error`` (any exception a kernel's code raised, SystemExit included) as an NkiError at the innermost line of
    the user's code in its traceback: ``file:line: error: ZeroDivisionError: division by zero``.

    A ``SyntaxError`` is located at the line it names (``k.py:10: error: SyntaxError: '(' was never closed``): its
    traceback is the importer's (``<frozen importlib._bootstrap>``), not the file's. ``source`` is the file that
    ``context`` is running: a syntax error in it needs no context (the location already says which file)."""
    tb = error.__traceback__
    where = _innermost_user_frame(tb)
    if isinstance(error, SyntaxError) and error.filename and error.lineno:
        what = f"{type(error).__name__}: {error.msg}" if error.msg else type(error).__name__
        same_file = source is not None and os.path.abspath(error.filename) == os.path.abspath(source)
        if context and not same_file:
            what = f"{what} ({context})"
        return _located_class(type(error))(what.rstrip("."), where=(error.filename, error.lineno))
    if isinstance(error, SystemExit):
        what = f"the kernel code called sys.exit({error.code!r})"
    else:
        text = str(error).splitlines()[0] if str(error) else ""
        what = f"{type(error).__name__}: {text}" if text else type(error).__name__
    if context:
        what = f"{what} ({context})"
    hint = "this is a bug in nkic: please report it (rerun with --debug for the traceback)" \
        if _raised_in_nkic(tb) else ""
    return _located_class(type(error))(what.rstrip("."), hint, where=where or ("<unknown>", 0))


_LOCATED: dict[type[BaseException], type[NkiError]] = {}


def _located_class(kind: type[BaseException]) -> type[NkiError]:
    """An NkiError class that is also ``kind``, so ``except AssertionError`` around a kernel call (a validation
    assert of the kernel) still catches it; SystemExit and other non-Exceptions stay plain NkiErrors (an error must
    not exit the interpreter), and so do kinds whose layout cannot be combined (NameError, OSError, ...)."""
    if not issubclass(kind, Exception) or issubclass(kind, NkiError):
        return NkiError
    located = _LOCATED.get(kind)
    if located is None:
        try:
            located = type(f"NkiError_{kind.__name__}", (NkiError, kind),
                           {"__module__": __name__, "__str__": Exception.__str__})  # KeyError quotes
        except TypeError:
            located = NkiError
        # setdefault: two threads making the class at once both use the one stored (one class per kind)
        located = _LOCATED.setdefault(kind, located)
    return located


class NeedsUnroll(BaseException):
    """Internal: a symbolic loop's induction variable needed a concrete value.

    A BaseException so that a user's ``except Exception`` cannot swallow it; the tracer catches it at the top of
    the trace, marks the loop sites as unrolled and re-traces the kernel.
    """

    def __init__(self, sites: Iterable[tuple[str, int, int]]):
        self.sites = tuple(sites)
        super().__init__(f"loop induction variable needs a concrete value (loop sites {self.sites})")
