"""The ambient trace context: one singleton per running trace, fetched by every nki API call.

``nl.*`` / ``nisa.*`` functions are plain Python functions marked with :func:`nki_op`. Calling one fetches the
active ``TraceContext`` (see ``trace_context.py``) and routes through ``TraceContext.call``, which records the op. With no
active trace — e.g. an nl call after the kernel returned — the call raises ``NkiError`` ("nki API called outside of
an NKI kernel"), mirroring the official ``err_nki_api_outside_of_nki_kernel``.

The active trace is per thread (and per ``contextvars`` context): a ``ContextVar``, not a module global, so threads
tracing at the same time each find their own trace -- an nl call in one never records into, allocates in, or closes
the loops of another's. A new thread starts with no active trace (its context starts empty), so a kernel traced in
a thread is traced there from its beginning.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any, TypeVar

from nkic.frontend.errors import NkiError
from nkic.target.machine import DEFAULT_TARGET, TARGET_ALIASES

F = TypeVar("F", bound=Callable[..., Any])

# The running TraceContext (typed loosely: trace_context.py imports this module); None outside a trace.
_ACTIVE: ContextVar[Any] = ContextVar("nkic_active_trace", default=None)
# How many activations are open, every thread together. While none is, no thread has a trace and active_context
# answers without reading the ContextVar: torch.compile's dynamo inlines a kernel's call, and it cannot trace
# ContextVar.get ("Dynamo does not know how to trace method `get` of class `ContextVar`", a graph break that fails a
# fullgraph compile), but it reads (and guards on) a module global.
_open_activations = 0
_OPEN_LOCK = threading.Lock()


def current_context() -> Any:
    """The running TraceContext; raises NkiError when called outside a kernel trace."""
    ctx = _ACTIVE.get()
    if ctx is None:
        raise NkiError(
            "nki API called outside of an NKI kernel",
            "nl.* and nisa.* functions may only be called while a @nki.jit kernel is traced",
        )
    return ctx


def active_context() -> Any:
    """The running TraceContext or None (never raises)."""
    return None if _open_activations == 0 else _ACTIVE.get()


def activate(ctx: Any) -> Token[Any]:
    """Make ``ctx`` this thread's running trace (``None``: none); undo with :func:`deactivate` and the token."""
    global _open_activations
    with _OPEN_LOCK:
        _open_activations += 1
    return _ACTIVE.set(ctx)


def deactivate(token: Token[Any]) -> None:
    """Restore the running trace that :func:`activate` replaced (in the same thread, innermost first)."""
    global _open_activations
    _ACTIVE.reset(token)
    with _OPEN_LOCK:
        _open_activations -= 1


def nki_op(impl: F) -> F:
    """Mark ``impl(ctx, *args, **kwargs)`` as an nki API function; callers use it without the ctx argument."""

    @functools.wraps(impl)
    def op(*args: Any, **kwargs: Any) -> Any:
        return current_context().call(op, *args, **kwargs)

    op.__nki_op__ = True  # type: ignore[attr-defined]
    op.__nki_impl__ = impl  # type: ignore[attr-defined]
    return op  # type: ignore[return-value]


def is_nki_op(func: object) -> bool:
    return bool(getattr(func, "__nki_op__", False))


_TARGETS = TARGET_ALIASES  # NEURON_PLATFORM_TARGET_OVERRIDE's accepted values


def default_target() -> str:
    """The compile target: ``NEURON_PLATFORM_TARGET_OVERRIDE`` if set, else the default generation (gen3, trn2)."""
    value = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", DEFAULT_TARGET)
    if value not in _TARGETS:
        raise NkiError(f"unknown platform target '{value}'", f"expected one of: {', '.join(_TARGETS)}")
    return _TARGETS[value]
