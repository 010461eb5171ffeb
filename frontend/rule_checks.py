"""The NKI reference's documented restrictions (``nkic.target.rules``) asked while tracing: the first rule a call
breaks is an ``NkiError`` at the user's line, naming the rule, the generation and the sentence.

Below the tensor model, so that the register model's runtime loops (``control.py``) ask the rules of the ``nl``
functions they implement; the instruction recorders build their calls from tiles (``recorders/record.py``).
"""

from __future__ import annotations

from typing import Any

from nkic.frontend.errors import NkiError
from nkic.target.machine import get_target
from nkic.target.rules import Call, Operand, problems
from nkic.target.rules import message as rule_message


def enforce(call: Call) -> None:
    """The first documented rule ``call`` breaks, as an NkiError at the user's line."""
    broken = problems(call)
    if broken:
        raise NkiError(rule_message(call, broken[0]))


def nl_rules(ctx: Any, fn: str, tiles: dict[str, Operand], **fields: Any) -> None:
    """The reference's restrictions on ``nl.<fn>`` itself (``target/rules/language.py``): its tiles as the rules see
    them and the call's other arguments as ``fields`` (``ctx`` None: the generation is not known, so only rules of
    every generation apply)."""
    generation = get_target(ctx.options.target).nc_version if ctx is not None else None
    enforce(Call(f"nl.{fn}", tiles, fields, generation, f"nl.{fn}"))
