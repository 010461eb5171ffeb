"""The generation a pass plans for: the one its module names.

No pass takes a target option. The tracer stamps every traced module with the generation it was traced for
(``builtin.module attributes {nkic.target = "gen2"}``, as Triton stamps ``ttg.target``); the driver stamps the
``CompileOptions`` target when one is given, and ``nkic-opt --target`` does the same for a hand-written module. So
``nkic-opt -p assign-engines`` on a dump traced for gen2 plans for gen2, and a module that names no generation is
planned for the default one.
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects.common import module_target
from nkic.target.machine import DEFAULT_TARGET, Target, get_target


def target_of(op: Operation) -> Target:
    """The generation the module enclosing ``op`` is compiled for (its ``nkic.target``, else the default)."""
    return _resolve(module_target(op) or DEFAULT_TARGET)


def declared_target(op: Operation) -> Target | None:
    """The generation the module enclosing ``op`` names, or None when it names none (checks for any generation)."""
    name = module_target(op)
    return None if name is None else _resolve(name)


def _resolve(name: str) -> Target:
    try:
        return get_target(name)
    except ValueError as e:  # a hand-edited nkic.target: the pass fails as a diagnostic, not a traceback
        raise PassFailedException(str(e)) from None
