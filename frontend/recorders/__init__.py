"""The instruction recorders: ``nki.isa``'s instructions, one module per instruction family (data movement, the PE
array, the vector engines, the activation engine, fills and predicates, registers, random numbers, top-k, gathers,
the LNC pair), on the shared checks of ``record.py``. Each instruction validates its operands on the views it is
given, so errors name the user's line, and records one penguin instruction through ``TraceContext.inst``.

Importing the package imports every family and publishes each instruction once, for all of them: its body is wrapped
by the ``mask=`` handling (every instruction takes ``mask=``; its operands are cut to the mask's box before the
instruction checks them, ``frontend/grid.py``), so that no path into an instruction -- a ``nisa`` call, an ``nl``
function, a legacy wrapper calling ``__nki_impl__`` -- can skip it; and its ``__module__`` becomes the public module,
``nkic.frontend.isa`` (``nki.isa``), which is where users call it from and how the tracer and its messages name it
(``nisa.dma_copy``), as ``numpy``'s functions name ``numpy`` rather than the file that defines them. It also lends
the tensor model its assignment, ``t[key] = value`` (``tensor.ASSIGN``): the model sits below the instructions.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from nkic.frontend import tensor
from nkic.frontend.context import is_nki_op
from nkic.frontend.errors import NkiError
from nkic.frontend.recorders import act, enums, gather, lnc, movement, pe, registers, rng, select, topk, vector
from nkic.frontend.recorders.masks import masked
from nkic.frontend.recorders.movement import dma_copy, tensor_copy
from nkic.frontend.recorders.select import memset

PUBLIC_MODULE = "nkic.frontend.isa"
FAMILIES: tuple[ModuleType, ...] = (movement, pe, vector, act, select, registers, rng, topk, gather, lnc)


def _publish(module: ModuleType) -> None:
    """Wrap every instruction ``module`` defines in its ``mask=`` handling, and name every public function and class
    it defines after the public module."""
    for name, value in list(vars(module).items()):
        if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
            continue
        if is_nki_op(value):
            value.__nki_impl__ = masked(name, value.__nki_impl__)
        value.__module__ = PUBLIC_MODULE


for _module in (enums, *FAMILIES):
    _publish(_module)


def _assign(dst: tensor.NkiTensor, value: Any) -> None:
    """``dst = value`` for a view ``dst`` (``t[key] = value``): a copy between on-chip tiles, a DMA when either is in
    HBM, a memset of a number."""
    if isinstance(value, tensor.NkiTensor):
        if _same_view(dst, value):
            return  # `t[key] += x` updated the view in place, and Python assigns it back: a copy onto itself
        if dst.on_chip and value.on_chip:
            tensor_copy(dst, value)
        else:
            dma_copy(dst, value)
    elif isinstance(value, (int, float)):
        memset(dst, value)
    else:
        raise NkiError(f"cannot assign a {type(value).__name__} to a tensor view", "assign a tensor or a number")


def _same_view(a: tensor.NkiTensor, b: tensor.NkiTensor) -> bool:
    """Whether ``a`` and ``b`` are the same elements of the same tensor in the same order and dtype (offsets compared
    term by term: an affine offset's ``==`` is a loop-dependent comparison, not an identity)."""
    if a.storage is not b.storage or a.pairs != b.pairs or a.dtype != b.dtype or a.dyn is not None or b.dyn is not None:
        return False
    x, y = a.offset, b.offset
    if isinstance(x, int) or isinstance(y, int):
        return isinstance(x, int) and isinstance(y, int) and x == y
    return x.const == y.const and [(v.uid, c) for v, c in x.terms] == [(v.uid, c) for v, c in y.terms]


tensor.ASSIGN = _assign
