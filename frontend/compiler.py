"""``nki.compiler``: option decorators that clone a Kernel with updated CompileOptions.

Stacking is ``@nki.compiler.<option>`` (outer) over ``@nki.jit`` (inner); a plain function is jitted first.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from nkic.frontend.tracer import Kernel, jit
from nkic.frontend.unsupported import missing_names


def _kernel(fn: Any) -> Kernel:
    return fn if isinstance(fn, Kernel) else jit(fn)


def skip_middle_end_transformations(kernel: Any) -> Kernel:
    return _kernel(kernel).with_options(skip_middle_end_transformations=True)


def enable_stack_allocator(kernel: Any = None, log_level: int = 0) -> Any:
    """Usable bare (``@enable_stack_allocator``) or with arguments (``@enable_stack_allocator(log_level=1)``).

    nkic's allocator then places each tensor at the lowest free offset (stack-like immediate reuse) instead of
    rotating through free memory."""
    if kernel is None:
        return lambda k: _kernel(k).with_options(enable_stack_allocator=True)
    return _kernel(kernel).with_options(enable_stack_allocator=True)


def kernel_format(fmt: str) -> Any:
    """nkic's carrier choice: ``"bir"`` (IT56 FORM B, embedded BIR JSON) or ``"klir"`` (FORM A, NKAB binary)."""
    if fmt not in ("bir", "klir"):
        raise ValueError(f"kernel_format must be 'bir' or 'klir', not {fmt!r}")
    return lambda k: _kernel(k).with_options(carrier_format=fmt)


def force_auto_alloc(kernel: Any) -> Kernel:
    """Accepted for compatibility: nkic allocates automatically unless addresses are given."""
    return _kernel(kernel)


def no_reorder() -> Any:
    """Scheduling directive; a no-op for nkic."""
    return nullcontext()

# Names nkic lacks are placeholders that raise NkiError when called (``frontend/unsupported.py``).
__getattr__ = missing_names("nki.compiler")
