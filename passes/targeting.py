"""The generation a pass plans for: the one it was given, else the one its module was traced for.

Every pass with a ``target`` option defaults it to "" and, at ``apply``, asks ``for_module``: an explicit option
(the driver's pipeline passes one) wins; otherwise the module's ``nkic.target`` attribute (the tracer stamps it), so
``nkic-opt -p assign-engines`` on a dump traced for gen2 plans for gen2; otherwise the default generation.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypeVar

from xdsl.dialects.builtin import ModuleOp

from nkic.dialects.common import module_target
from nkic.target.machine import DEFAULT_TARGET

P = TypeVar("P")


def for_module(p: P, op: ModuleOp, default: str = DEFAULT_TARGET) -> P:
    """``p`` with its ``target`` resolved for ``op`` (``p`` itself when it names one)."""
    current: Any = p
    if current.target:
        return p
    return replace(current, target=module_target(op) or default)
