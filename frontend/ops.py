"""Operator tokens (``nl.add``, ``nl.exp`` …) and their resolution to the NKI opcode names stored on penguin ops.

Kernels pass operators as values (``op=nl.add``, ``op=nl.exp``, D1 code also ``np.add``/``np.exp``). A token is an
``OpToken`` whose ``str()`` is the NKI name; resolution dispatches on identity, like the official frontend, and
checks the name against the ALU / activation vocabularies of ``nkic.dialects.common``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nkic.target.vocab import ACT_FUNCS, ACT_RECORDS, ALU_OPS, ALU_RECORDS
from nkic.frontend.context import current_context
from nkic.frontend.dtypes import NamedToken
from nkic.frontend.errors import NkiError


# The value-returning tile functions by nl name (``frontend/tiles.py`` fills it when it is imported): calling a
# token runs the function of its name, so ``nl.add`` is both ``op=nl.add`` and ``nl.add(a, b)``.
TILE_FUNCTIONS: dict[str, Callable[..., Any]] = {}


class OpToken(NamedToken):
    """An ``nl`` operator usable as ``op=`` of nisa instructions and callable as the tile function ``nl.<name>``.

    ``call_as`` is the tile function a call runs when it differs from the operator: ``nl.max`` is the ALU op
    ``maximum`` as ``op=`` but the reduction ``nl.max(x, axis)`` when called.
    """

    __slots__ = ("call_as",)

    def __init__(self, name: str, call_as: str | None = None):
        super().__init__(name)
        self.call_as = call_as or name

    def __repr__(self) -> str:
        return f"nl.{self.call_as}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        current_context()  # outside a kernel this is the "nki API called outside" error
        fn = TILE_FUNCTIONS.get(self.call_as)
        if fn is None:
            raise NkiError(
                f"nl.{self.call_as}(...) is not a tile function",
                f"nl.{self.call_as} is an operator: pass it as op=nl.{self.call_as} to a nisa instruction",
            )
        return fn(*args, **kwargs)


# Every ALU op and activation function is an nl token of its name (target/vocab.py ALU_RECORDS, ACT_RECORDS).
ALU_TOKENS = [r.name for r in ALU_RECORDS]
ACT_TOKENS = [r.name for r in ACT_RECORDS]

TOKENS: dict[str, OpToken] = {name: OpToken(name) for name in dict.fromkeys(ALU_TOKENS + ACT_TOKENS)}
# nl.max / nl.min / nl.sum are these ALU ops as op= but reductions when called.
ALIASES: dict[str, OpToken] = {"max": OpToken("maximum", "max"), "min": OpToken("minimum", "min"),
                               "sum": OpToken("add", "sum")}

_NUMPY: dict[Any, str] = {
    np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide",
    np.maximum: "maximum", np.minimum: "minimum", np.max: "maximum", np.amax: "maximum", np.min: "minimum",
    np.amin: "minimum", np.sum: "add", np.equal: "equal", np.not_equal: "not_equal", np.greater: "greater",
    np.greater_equal: "greater_equal", np.less: "less", np.less_equal: "less_equal",
    np.logical_and: "logical_and", np.logical_or: "logical_or", np.logical_xor: "logical_xor",
    np.bitwise_and: "bitwise_and", np.bitwise_or: "bitwise_or", np.bitwise_xor: "bitwise_xor",
    np.left_shift: "left_shift", np.right_shift: "right_shift", np.power: "power", np.mod: "mod",
    np.exp: "exp", np.log: "log", np.tanh: "tanh", np.sqrt: "sqrt", np.square: "square",
    np.reciprocal: "reciprocal", np.sin: "sin", np.abs: "abs", np.sign: "sign", np.arctan: "arctan",
    np.copy: "copy",
}  # fmt: skip


def _name_of(op: Any) -> str | None:
    if isinstance(op, OpToken):
        return op.name
    if isinstance(op, str):
        return op
    try:
        return _NUMPY.get(op)
    except TypeError:  # unhashable
        return None


def alu_op(op: Any, what: str = "op") -> str:
    """The ALU opcode name of ``op``; NkiError when it is not an ALU operation."""
    name = _name_of(op)
    if name not in ALU_OPS:
        raise NkiError(f"unsupported ALU operation {_show(op)} for {what}", f"expected one of: {', '.join(ALU_OPS)}")
    return name  # type: ignore[return-value]


def act_func(op: Any) -> str:
    """The activation function name of ``op``; NkiError when it is not in the activation table."""
    name = _name_of(op)
    if name not in ACT_FUNCS:
        raise NkiError(f"unsupported activation function {_show(op)}", f"expected one of: {', '.join(ACT_FUNCS)}")
    return name  # type: ignore[return-value]


def _show(op: Any) -> str:
    name = _name_of(op)
    return f"'{name}'" if name else repr(op)
