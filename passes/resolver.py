"""How passes reach library kernels without importing them: the ``KernelResolver`` protocol.

Two passes meet kernels that are not in the module but named by it: ``penguin-to-bir`` lowers host-graph nodes of
kind ``internal``, ``inline-bir-kernel`` expands IT54 ``bir.bir_kernel`` nodes. The kernels themselves are traced
NKI code (``nkic.library`` over ``nkic.kernels``), which sits *above* the passes; a pass importing it would invert
the layering (and the library imports ``penguin-to-bir`` back to lower what it traced). So the passes only know
this protocol, and the layer above hands an implementation in:

* ``use_resolver(r)``: a context manager, for one compilation (``nkic.compiler.driver`` wraps its pass pipeline in it);
* ``set_default_resolver(r)``: for the whole process (``nkic-opt`` and the ``xdsl.universe`` entry point).

A pass calls ``resolver_for(kernel, pass_name)``: the scoped resolver if one is active, else the default, else a
``PassFailedException`` naming the kernel.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from xdsl.utils.exceptions import PassFailedException

if TYPE_CHECKING:
    from nkic.dialects import bir, penguin

Shape = tuple[int, ...]


class KernelResolver(Protocol):
    """Turns a kernel name plus the shapes and attributes of the node that calls it into IR."""

    def resolve_penguin(
        self, name: str, inputs: Sequence[tuple[Shape, str]], attrs: Mapping[str, Any]
    ) -> penguin.KernelOp:
        """The ``penguin.kernel`` of ``name`` for these (shape, dtype) inputs: a fresh op the caller may own."""
        ...

    def resolve_bir(
        self, name: str, srcs_shape: Sequence[Shape], dsts_shape: Sequence[Shape], attrs: Mapping[str, Any]
    ) -> bir.FunctionOp:
        """The BIR function of ``name`` for an IT54 node (input and output shapes): a fresh op the caller may own.

        Raises ``PassFailedException`` for an unknown name or when the kernel's outputs do not match."""
        ...


_DEFAULT: KernelResolver | None = None
# A ContextVar rather than a second global, so that concurrent compilations (threads, asyncio) each see their own.
_SCOPED: ContextVar[KernelResolver | None] = ContextVar("nkic_kernel_resolver", default=None)


def set_default_resolver(resolver: KernelResolver | None) -> KernelResolver | None:
    """Install the process-wide resolver (``None`` removes it); returns the previous one."""
    global _DEFAULT
    previous, _DEFAULT = _DEFAULT, resolver
    return previous


@contextmanager
def use_resolver(resolver: KernelResolver | None) -> Iterator[None]:
    """Within the block, passes resolve kernels with ``resolver`` (``None``: fall back to the default)."""
    token = _SCOPED.set(resolver)
    try:
        yield
    finally:
        _SCOPED.reset(token)


def current_resolver() -> KernelResolver | None:
    """The resolver passes would use now, or ``None``."""
    scoped = _SCOPED.get()
    return scoped if scoped is not None else _DEFAULT


def resolver_for(kernel: str, pass_name: str) -> KernelResolver:
    """The active resolver, or a clear error saying which kernel could not be resolved."""
    resolver = current_resolver()
    if resolver is None:
        raise PassFailedException(
            f"{pass_name}: cannot resolve library kernel '{kernel}': no kernel resolver was provided "
            "(nkic.compiler.driver and nkic-opt provide nkic.library's; elsewhere use nkic.passes.resolver.use_resolver)"
        )
    return resolver
