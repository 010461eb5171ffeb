"""Migration diagnostics for the legacy ``neuronxcc.nki`` surface: one warning per kernel line and construct, naming
the modern spelling, under a ``-W``-style switch.

The switch is ``nki-legacy=ACTION`` with ACTION one of

* ``default`` — each (file, line, construct) warns once per process (a retraced kernel does not repeat it);
* ``ignore`` — no warnings;
* ``error`` — the first legacy construct is an ``NkiError`` at its line (a migration check for CI).

It is read from the environment variable ``NKIC_LEGACY`` (``NKIC_LEGACY=error``), set by ``python -m nkic -W
nki-legacy=error SCRIPT.py``, or changed in-process with :func:`set_action`. The warnings are
:class:`NkiLegacyWarning` (a ``FutureWarning``, shown by default), issued with ``warnings.warn_explicit`` at the
kernel's file:line, so Python's own filters (``python -W ignore::FutureWarning``) apply to them too.

Constructs nkic cannot honour are never warnings: they are ``NkiError`` s where they are used.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

from nkic.frontend.errors import NkiError, user_location

ACTIONS = ("default", "ignore", "error")
ENV = "NKIC_LEGACY"


class NkiLegacyWarning(FutureWarning):
    """A legacy (``neuronxcc.nki``) construct that has a modern spelling."""


_action: str | None = None  # set_action's choice; None: the environment decides
_seen: set[tuple[str, int, str]] = set()
_seen_lock = threading.Lock()  # one warning per site even when threads trace the same legacy kernel at once


def set_action(action: str | None) -> None:
    """Choose what a legacy construct does (None: back to ``$NKIC_LEGACY``, by default ``default``)."""
    global _action
    if action is not None and action not in ACTIONS:
        raise ValueError(f"nki-legacy action must be one of {', '.join(ACTIONS)}, got {action!r}")
    _action = action


def action() -> str:
    if _action is not None:
        return _action
    value = os.environ.get(ENV, "default").strip().lower() or "default"
    if value not in ACTIONS:
        raise NkiError(f"${ENV}={value!r} is not one of {', '.join(ACTIONS)}")
    return value


def parse_switch(spec: str) -> str:
    """``nki-legacy=error`` (the argument of ``-W``) -> ``error``; anything else is a ValueError."""
    name, _, value = spec.partition("=")
    if name.strip() != "nki-legacy" or value.strip() not in ACTIONS:
        raise ValueError(f"-W expects nki-legacy={'|'.join(ACTIONS)}, got {spec!r}")
    return value.strip()


def reset() -> None:
    """Forget which sites have warned (tests)."""
    _seen.clear()


def legacy(construct: str, modern: str, where: tuple[str, int] | None = None,
           spelling: str = "the legacy neuronxcc.nki spelling") -> None:
    """Report the legacy ``construct`` at the user's current kernel line (or ``where``), whose modern spelling is
    ``modern``; ``spelling`` says whose it is (``frontend/era02.py``: "the NKI 0.2 spelling")."""
    what = action()
    if what == "ignore":
        return
    file, line = where if where is not None else user_location()[:2]
    if what == "error":
        raise NkiError(f"legacy construct {construct} (nki-legacy=error)", f"the modern spelling is {modern}",
                       where=(file, line))  # fmt: skip
    key = (file, line, construct)
    with _seen_lock:
        if key in _seen:
            return
        _seen.add(key)
    warnings.warn_explicit(f"{construct} is {spelling}; the modern one is {modern}",
                           NkiLegacyWarning, file, line)  # fmt: skip


_MODERN_MODE = {
    "simulation": "@nki.jit without mode, called through nki.simulate(kernel)(*args)",
    "baremetal": "@nki.jit without mode (nkic compiles and simulates every kernel); nki.baremetal for the artifacts",
    "benchmark": "nki.benchmark(kernel, warmup=, iters=)",
    "trace": "@nki.jit without mode (a kernel called from a kernel is traced into it)",
}


def legacy_jit(jit: Callable[..., Any]) -> Callable[..., Any]:
    """``neuronxcc.nki.jit``: the modern ``jit`` (``jit``), warning at the decorator's line for a legacy ``mode=``."""

    def legacy(fn: Any = None, **options: Any) -> Any:
        mode = options.get("mode")
        if isinstance(mode, str) and mode in _MODERN_MODE:
            legacy_construct(f"nki.jit(mode={mode!r})", _MODERN_MODE[mode])
        return jit(fn, **options)

    legacy.__doc__, legacy.__name__, legacy.__qualname__ = jit.__doc__, "jit", "jit"
    return legacy


legacy_construct = legacy  # the reporting function, under a name the wrapper above does not shadow
