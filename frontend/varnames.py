"""The user's name for a tensor: the variable a kernel line assigns the allocating call to.

``acc = nl.ndarray(...)`` allocates a tensor the IR calls ``sbuf_1``; a message about it should say ``acc``. The
tracer asks :func:`assigned_name` with the user's frame while that frame is executing the call: the position of the
instruction it is executing (``co_positions``: start and end line and column of the call expression) is looked up
among the file's assignments whose value is exactly that expression. So only the call assigned to the name takes it:
in ``s = nl.add(nl.load(a), b)`` the load's result is not ``s``.

Only messages use these names; the IR keeps the tracer's own (``sbuf_1``): dumps and NEFF variable names do not
depend on how the user spelt the kernel's locals.
"""

from __future__ import annotations

import ast
import linecache
import threading
from types import CodeType, FrameType

# (start line, start column, end line, end column) of an assigned expression -> the text of its target. Columns are
# UTF-8 byte offsets, as in both ast and co_positions.
Span = tuple[int, int, int, int]

# filename -> (the source it was built from, its assignments). The source is kept to notice a file rewritten under
# the same name (a test writing one kernel file after another): a different text is parsed again.
_FILES: dict[str, tuple[str, dict[Span, str]]] = {}
# id(code) -> (code, the span of each code unit, the file's assignments): a kernel line allocating in a loop asks once
# per allocation, and neither the positions nor the file's table changes for a code object. The entry keeps the code
# alive, so its id is not reused while the entry exists.
_CODES: dict[int, tuple[CodeType, tuple[Span | None, ...], dict[Span, str]]] = {}
_LOCK = threading.Lock()  # the tables are filled by every tracing thread
_MAX_ENTRIES = 4096
# A target this long is an expression, not a name a reader would recognise in a one-line message.
_MAX_TARGET = 40


def _target_text(target: ast.expr) -> str | None:
    """``acc``, ``self.acc``, ``tiles[i]``; None for unpacking (``a, b = ...``), whose element is not known here."""
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, (ast.Attribute, ast.Subscript)):
        text = ast.unparse(target)
        return text if len(text) <= _MAX_TARGET else None
    return None


def _assignments(source: str) -> dict[Span, str]:
    """Every ``target = value`` (also annotated, chained and ``:=``) of ``source``, by the span of its value."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # a file changed since it was imported, or no source at all
        return {}
    table: dict[Span, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets[:1], node.value  # a = b = f(): the first name is the one read first
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        elif isinstance(node, ast.NamedExpr):
            targets, value = [node.target], node.value
        else:
            continue
        text = _target_text(targets[0])
        if text is not None and value.end_lineno is not None and value.end_col_offset is not None:
            table[(value.lineno, value.col_offset, value.end_lineno, value.end_col_offset)] = text
    return table


def _file_table(filename: str, module_globals: dict[str, object]) -> dict[Span, str]:
    source = "".join(linecache.getlines(filename, module_globals))
    known = _FILES.get(filename)
    if known is not None and known[0] == source:
        return known[1]
    table = _assignments(source) if source else {}
    with _LOCK:
        if len(_FILES) >= _MAX_ENTRIES:
            _FILES.clear()
        _FILES[filename] = (source, table)
    return table


def _code_entry(frame: FrameType) -> tuple[tuple[Span | None, ...], dict[Span, str]]:
    code = frame.f_code
    entry = _CODES.get(id(code))
    if entry is not None and entry[0] is code:
        return entry[1], entry[2]
    spans = tuple(
        (line, col, end_line, end_col) if None not in (line, col, end_line, end_col) else None
        for line, end_line, col, end_col in code.co_positions()
    )
    table = _file_table(code.co_filename, frame.f_globals)
    with _LOCK:
        if len(_CODES) >= _MAX_ENTRIES:
            _CODES.clear()
        _CODES[id(code)] = (code, spans, table)
    return spans, table


def assigned_name(frame: FrameType | None) -> str:
    """The target the user's line assigns the call ``frame`` is executing to, or "" when it assigns none."""
    if frame is None:
        return ""
    spans, table = _code_entry(frame)
    if not table:
        return ""
    i = frame.f_lasti // 2  # f_lasti is a byte offset; co_positions has one entry per 2-byte code unit
    span = spans[i] if 0 <= i < len(spans) else None
    return table.get(span, "") if span is not None else ""
