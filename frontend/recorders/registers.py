"""Sequencer registers: ``register_alloc`` / ``_move`` / ``_load`` / ``_store`` (``frontend/control.py`` has the model
and the runtime loops that use them)."""

from __future__ import annotations

from typing import Any

from nkic.frontend import control
from nkic.frontend.context import nki_op
from nkic.frontend.control import VirtualRegister
from nkic.frontend.errors import NkiError
from nkic.frontend.recorders.record import _record
from nkic.frontend.tensor import NkiTensor


# -- registers (frontend/control.py has the loops that use them) ----------------------------------------------
@nki_op
def register_alloc(ctx: Any, x: Any = None) -> VirtualRegister:
    """A fresh register, set to ``x`` when it is an int (or a register: a copy), or loaded from ``x`` when it is a
    one-element tensor: nki-library's ``all_expert_mx_impl`` writes ``nisa.register_alloc(decision_sb[0, 0])``,
    the ``register_alloc`` + ``register_load`` pair of NKI's ``VirtualRegister`` example in one call."""
    reg = control.new_register(ctx)
    if isinstance(x, NkiTensor):
        t = _check_scalar_tensor("register_alloc", "x", x)
        _record(ctx, "register_load", {"src": t}, {"dst_reg": reg.number})
    elif x is not None:
        control.set_register(ctx, reg, x, "register_alloc")
    return reg


@nki_op
def register_move(ctx: Any, dst: Any, src: Any) -> None:
    """``dst = src``, an int constant or another register."""
    control.set_register(ctx, _register("register_move", "dst", dst), src)


@nki_op
def register_load(ctx: Any, dst: Any, src: Any) -> None:
    """``dst`` = the one element of ``src`` (SBUF or HBM), read as a 32-bit integer."""
    reg = _register("register_load", "dst", dst)
    t = _check_scalar_tensor("register_load", "src", src)
    _record(ctx, "register_load", {"src": t}, {"dst_reg": reg.number})


@nki_op
def register_store(ctx: Any, dst: Any, src: Any) -> None:
    """The one element of ``dst`` (SBUF or HBM) = the register ``src``, converted to dst's dtype."""
    reg = _register("register_store", "src", src)
    t = _check_scalar_tensor("register_store", "dst", dst)
    _record(ctx, "register_store", {"dst": t}, {"src_reg": reg.number})


def _register(op: str, role: str, value: Any) -> VirtualRegister:
    if not isinstance(value, VirtualRegister):
        raise NkiError(f"{op}: '{role}' must be a VirtualRegister (nisa.register_alloc), got {type(value).__name__}")
    return value


def _check_scalar_tensor(op: str, role: str, t: Any) -> NkiTensor:
    if not isinstance(t, NkiTensor):
        raise NkiError(f"{op}: '{role}' must be a tensor, got {type(t).__name__}")
    if t.size != 1:
        raise NkiError(f"{op}: '{role}' must hold exactly one element, got shape {t.shape}")
    return t
