"""The ambient trace context: one singleton per running trace, fetched by every nki API call.

``nl.*`` / ``nisa.*`` functions are plain Python functions marked with :func:`nki_op`. Calling one fetches the
active ``TraceContext`` (see ``tracer.py``) and routes through ``TraceContext.call``, which records the op. With no
active trace — e.g. an nl call after the kernel returned — the call raises ``NkiError`` ("nki API called outside of
an NKI kernel"), mirroring the official ``err_nki_api_outside_of_nki_kernel``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from nkic.frontend.errors import NkiError

F = TypeVar("F", bound=Callable[..., Any])

_active: Any = None  # the running TraceContext (typed loosely: tracer.py imports this module)


def current_context() -> Any:
    """The running TraceContext; raises NkiError when called outside a kernel trace."""
    if _active is None:
        raise NkiError(
            "nki API called outside of an NKI kernel",
            "nl.* and nisa.* functions may only be called while a @nki.jit kernel is traced",
        )
    return _active


def active_context() -> Any:
    """The running TraceContext or None (never raises)."""
    return _active


def set_active(ctx: Any) -> Any:
    """Install ``ctx`` as the ambient context and return the previous one (for restoring)."""
    global _active
    previous, _active = _active, ctx
    return previous


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
