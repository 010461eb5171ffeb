"""NKI 0.2 idioms in ``import nki`` kernels: run under their 0.2 meaning, with one migration warning each.

Kernels written for NKI 0.2 already said ``import nki`` (not ``neuronxcc.nki``), so the legacy surface does not see
them; three of their idioms mean something else, or nothing, in 0.3:

* ``nl.hbm`` outputs: in 0.2 ``nl.hbm`` was the device HBM handed back to the caller, so ``out = nl.ndarray(...,
  buffer=nl.hbm)`` ... ``return out`` was the kernel's output; in 0.3 ``nl.hbm`` is private HBM and returning it is
  an error. A tensor allocated with ``nl.hbm`` on a line of the kernel function that assigns it to a name the
  kernel returns is allocated in ``nl.shared_hbm``, as 0.2 meant (an explicit ``nl.private_hbm`` output stays an
  error; a private ``nl.hbm`` scratch tensor that is not returned stays private);
* ``nki.jit(mode="torchxla")``: 0.3 has no modes, the framework comes from the arguments;
* buffers named by strings (``buffer="sbuf"``): 0.3 spells them ``nl.sbuf``.

Each is reported by ``frontend/legacy/migration.py``'s ``legacy`` (an ``NkiLegacyWarning`` once per line; ``-W
nki-legacy=error`` makes it an ``NkiError`` at the line, ``ignore`` silences it), as the ``neuronxcc.nki`` surface's
constructs are.
"""

from __future__ import annotations

import ast
import functools
import linecache
from types import FunctionType
from typing import Any

from nkic.frontend.dtypes import BUFFERS, Buffer
from nkic.frontend.errors import user_frame
from nkic.frontend.legacy.migration import legacy
from nkic.frontend.varnames import assigned_name

ERA = "the NKI 0.2 spelling"


def _report(construct: str, modern: str) -> None:
    legacy(construct, modern, spelling=ERA)


def string_buffer(buffer: Any) -> None:
    """``buffer="sbuf"`` given to an allocation: the 0.2 string spelling of ``nl.sbuf``."""
    if isinstance(buffer, str) and buffer in BUFFERS:
        _report(f"buffer={buffer!r}", f"buffer=nl.{buffer}")


def torchxla_mode(options: dict[str, Any]) -> None:
    """``nki.jit(mode="torchxla")``: reported at the decorator's line."""
    if options.get("mode") == "torchxla":
        _report("nki.jit(mode='torchxla')", "@nki.jit without mode (the framework comes from the arguments)")


@functools.lru_cache(maxsize=1024)
def _returned_names(file: str, first_line: int) -> frozenset[str]:
    """The names the function starting at ``file:first_line`` returns (``return out``, ``return a, b``)."""
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        return frozenset()
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and min([n.lineno, *(d.lineno for d in n.decorator_list)]) <= first_line <= n.lineno), None)  # fmt: skip
    if fn is None:
        return frozenset()
    names: set[str] = set()
    todo: list[ast.AST] = list(fn.body)
    while todo:  # the function's own returns, not those of functions nested in it
        node = todo.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            values = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) else [node.value]
            names.update(v.id for v in values if isinstance(v, ast.Name))
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return frozenset(names)


def hbm_output(func: Any, buffer: Buffer) -> Buffer:
    """The buffer an allocation in ``buffer`` gets: ``nl.shared_hbm`` for an ``nl.hbm`` tensor the kernel function
    ``func`` allocates into a name it returns (the 0.2 output), else ``buffer``."""
    if buffer.name != "hbm" or not isinstance(func, FunctionType):
        return buffer
    frame = user_frame()
    if frame is None or frame.f_code is not func.__code__:
        return buffer
    name = assigned_name(frame)
    if not name or name not in _returned_names(func.__code__.co_filename, func.__code__.co_firstlineno):
        return buffer
    _report(f"returning the nl.hbm tensor '{name}' as the output", "buffer=nl.shared_hbm")
    return BUFFERS["shared_hbm"]
