"""Where a StableHLO op came from, for everything traced while it is lowered (issue 27 item 4).

``nkic.dialects.stablehlo.parse_stablehlo`` gives every op its line:column in the MLIR text and keeps the location
the text gives it (JAX writes ``loc("jit(f)/dot_general"(callsite(... "model.py":12:8 ...)))`` with
``as_text(debug_info=True)``). ``located(op)`` pins the user's position to it while the op is lowered, so each
instruction the tracer records — what the NEFF's source map and the profile show — and each error raised there is
at that place instead of a line of nkic:

* the position is the JAX source line when the MLIR has one (the line the user wrote), else the MLIR line;
* the note each instruction's profile entry starts with is the op, its JAX name and its MLIR position (not repeated
  when the place is the MLIR line).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from xdsl.dialects.builtin import CallSiteLoc, FusedLoc, LocationAttr, StringAttr, UnknownLoc
from xdsl.ir import Attribute, Operation

from nkic.dialects import stablehlo as hlo
from nkic.frontend.errors import NkiError, pinned_location


def site(op: Operation) -> tuple[str, int, int, str] | None:
    """(file, line, column, note) of ``op``, or None for an op the text did not locate (one nkic made). The note
    (what profiles show before each instruction's nki call) is the op, its JAX name and, when the place is the JAX
    line, its MLIR position."""
    mlir, source = hlo.mlir_location(op), hlo.source_location(op)
    if source is not None:
        return (*source[1:], describe(op))
    if mlir is None:
        return None
    return (*mlir, op.name)


def describe(op: Operation) -> str:
    """``stablehlo.dot_general jit(f)/dot_general model.mlir:5:5``: the op, its JAX name, its MLIR position."""
    mlir, source = hlo.mlir_location(op), hlo.source_location(op)
    parts = [op.name]
    if source is not None and source[0]:
        parts.append(source[0])
    if mlir is not None:
        parts.append(f"{mlir[0]}:{mlir[1]}:{mlir[2]}")
    return " ".join(parts)


def _split(loc: Attribute) -> tuple[Attribute | None, Attribute]:
    """(the MLIR position nkic's parser recorded, the location the text gave)."""
    if isinstance(loc, FusedLoc) and loc.metadata == StringAttr(hlo.MLIR_LOC):
        return loc.locations.data[0], loc.locations.data[1]
    return None, loc


def inlined_location(inner: Operation, call: Operation) -> LocationAttr:
    """``inner``'s location once its function is inlined at ``call``: its own MLIR line, and its source called from
    the call's source (``callsite(inner at call)``, as MLIR's inliner writes it), so an op of a function JAX
    outlined (``jnp.fmod``, ``_where``) is at the user's line that called it."""
    here, source = _split(inner.location)
    _, caller = _split(call.location)
    if not isinstance(caller, UnknownLoc):
        source = CallSiteLoc(source, caller)
    if here is None:
        return source  # type: ignore[return-value]
    return FusedLoc([here, source], StringAttr(hlo.MLIR_LOC))


@contextmanager
def located(op: Operation) -> Iterator[None]:
    """Within the block, instructions and errors are at ``op``'s place; an error there names the op and its MLIR
    line when its message does not already."""
    where = site(op)
    if where is None:
        yield
        return
    file, line, col, note = where
    try:
        with pinned_location(file, line, col, note):
            yield
    except NkiError as e:
        mlir = hlo.mlir_location(op)
        if mlir is None or (e.file, e.line) != (file, line) or f"{mlir[0]}:{mlir[1]}" in e.what:
            raise
        raise NkiError(f"{e.what} ({describe(op)})", e.hint, where=(file, line)) from None
