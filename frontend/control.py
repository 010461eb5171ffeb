"""Registers and runtime loops: ``nisa.register_*``, ``nl.dynamic_range``, ``nl.fori_loop``, ``nl.while_loop``.

A ``VirtualRegister`` is a 32-bit integer that lives in the engine sequencers at run time. nkic numbers a
program's registers 1, 2, … (register 0 reads as zero, so a constant is ``r0 + value``) and records them in
``register_alu`` / ``register_load`` / ``register_store`` instructions. A runtime loop is traced once, between
``loop_begin`` and ``loop_end`` instructions that test a condition register; the body runs as many times as the
registers say when the kernel is simulated, so the trip count may come from data. The induction value the body
sees is a copy (writing it has no effect on the loop), as NKI documents.

``while reg:`` on a register is a runtime loop too (nki-library's ``bwmm_shard_on_block_mx`` and ``all_expert_mx``
write it, reloading the register at the end of the body). NKI's ``VirtualRegister`` reference: "``nl.dynamic_range``
and bare ``while reg:`` are supported by the parser frontend"; nkic traces, so the register's ``__bool__`` does
what the parser would: the test at the top of the ``while`` opens ``loop_begin reg`` and answers True, the body is
traced once, and the test at its bottom (the same line, a later bytecode) closes ``loop_end reg`` and answers False.
"""

from __future__ import annotations

import ast
import contextvars
import functools
import linecache
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from nkic.frontend.context import active_context, nki_op
from nkic.frontend.errors import NkiError, user_frame, user_location
from nkic.frontend.rule_checks import nl_rules
from nkic.target.instructions import NUM_REGISTERS

__all__ = ["VirtualRegister", "new_register", "set_register", "register_value", "dynamic_range", "fori_loop",
           "while_loop"]  # fmt: skip


class VirtualRegister:
    """A runtime 32-bit integer register (``nisa.register_alloc``). Its value is unknown while tracing."""

    def __init__(self, number: int, owner: object):
        self.number = number
        self._owner = owner

    def __repr__(self) -> str:
        return f"VirtualRegister(r{self.number})"

    def _no_value(self, *_: Any) -> Any:
        raise NkiError(
            f"the value of register r{self.number} is only known at run time",
            "use it as a loop bound (nl.dynamic_range, or `while reg:` as the whole condition of a while), "
            "or store it with nisa.register_store",
        )

    def __bool__(self) -> bool:
        """The test of ``while reg:`` (see the module docstring); any other truth test has no trace-time value."""
        frame = sys._getframe(1)
        ctx = active_context()
        if ctx is None or self._owner is not ctx._owner or frame is not user_frame():
            self._no_value()
        if not _is_register_while(frame.f_code.co_filename, frame.f_lineno):
            self._no_value()
        return register_while(ctx, self, frame)

    __index__ = __int__ = __float__ = _no_value
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __lt__ = __le__ = __gt__ = __ge__ = _no_value


def new_register(ctx: Any) -> VirtualRegister:
    if ctx.registers >= NUM_REGISTERS - 1:
        raise NkiError(f"more than {NUM_REGISTERS - 1} registers in one program",
                       "reuse registers with nisa.register_move")  # fmt: skip
    ctx.registers += 1
    return VirtualRegister(ctx.registers, ctx._owner)


def _operand(ctx: Any, value: Any, what: str) -> tuple[int, int]:
    """A register source as (register, immediate): a register is (n, 0), an int constant (0, value)."""
    if isinstance(value, VirtualRegister):
        if value._owner is not ctx._owner:
            raise NkiError(f"{what}: register r{value.number} belongs to another trace or SPMD program")
        return value.number, 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise NkiError(f"{what} must be an int or a VirtualRegister, got {type(value).__name__}")
    if not -(1 << 31) <= value < (1 << 31):
        raise NkiError(f"{what} {value} does not fit in a 32-bit register")
    return 0, value


def register_alu(ctx: Any, dst: VirtualRegister, op: str, a: Any, b: Any = 0, what: str = "register_move") -> None:
    """r[dst] = a <op> b, each source an int or a register."""
    r0, i0 = _operand(ctx, a, what)
    r1, i1 = _operand(ctx, b, what)
    attrs = {"dst_reg": dst.number, "op": op}
    attrs.update({k: v for k, v in (("src0_reg", r0), ("imm0", i0), ("src1_reg", r1), ("imm1", i1)) if v})
    ctx.inst("register_alu", {}, attrs)


def set_register(ctx: Any, dst: VirtualRegister, value: Any, what: str = "register_move") -> None:
    register_alu(ctx, dst, "bypass", value, 0, what)


def register_value(ctx: Any, value: Any, what: str) -> VirtualRegister:
    """``value`` as a register of its own (a copy, so later writes to either do not affect the other)."""
    reg = new_register(ctx)
    set_register(ctx, reg, value, what)
    return reg


# -- runtime loops -----------------------------------------------------------------------------------------------
def _begin(ctx: Any, cond: VirtualRegister) -> None:
    """``loop_begin cond``; the tracer checks every runtime loop it opens is closed (no ``break``/``return``)."""
    ctx.inst("loop_begin", {}, {"cond_reg": cond.number})
    ctx.dynamic_loops.append(user_location()[:2])


def _end(ctx: Any, cond: VirtualRegister) -> None:
    ctx.inst("loop_end", {}, {"cond_reg": cond.number})
    ctx.dynamic_loops.pop()


def _positive_step(step: Any, what: str) -> int:
    nl_rules(None, what, {}, step=step)  # target/rules/language.py
    return step


# How many ``with nl.no_reorder():`` blocks enclose the code being traced (per thread / context).
_NO_REORDER: contextvars.ContextVar[int] = contextvars.ContextVar("nkic_no_reorder", default=0)


@contextmanager
def no_reorder_block() -> Iterator[None]:
    token = _NO_REORDER.set(_NO_REORDER.get() + 1)
    try:
        yield
    finally:
        _NO_REORDER.reset(token)


def _not_in_no_reorder(ctx: Any, loop: str) -> None:
    nl_rules(ctx, "no_reorder", {}, loop=loop, depth=_NO_REORDER.get())


@nki_op
def dynamic_range(ctx: Any, start: Any, stop: Any = None, step: Any = 1) -> Iterator[VirtualRegister]:
    """A loop run on the device with bounds that may be registers; yields the induction value as a register."""
    if stop is None:
        start, stop = 0, start
    step = _positive_step(step, "dynamic_range")
    return _range(ctx, start, stop, step)


def _range(ctx: Any, start: Any, stop: Any, step: int) -> Iterator[VirtualRegister]:
    iv = register_value(ctx, start, "dynamic_range start")
    limit = register_value(ctx, stop, "dynamic_range stop")  # a copy: the bound is read once, at entry
    cond = new_register(ctx)
    register_alu(ctx, cond, "less", iv, limit)
    _begin(ctx, cond)
    yield register_value(ctx, iv, "dynamic_range")
    register_alu(ctx, iv, "add", iv, step)
    register_alu(ctx, cond, "less", iv, limit)
    _end(ctx, cond)


@functools.lru_cache(maxsize=256)
def _is_register_while(file: str, line: int) -> bool:
    """True if ``file:line`` starts a ``while`` whose whole condition is one value (``while reg:``), not a
    compound test (``while reg and x``, ``while not reg``) or an ``if``, which have no runtime-loop meaning."""
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.While) and n.lineno == line and isinstance(n.test, (ast.Name, ast.Attribute,
               ast.Subscript)) for n in ast.walk(tree))  # fmt: skip


def register_while(ctx: Any, reg: VirtualRegister, frame: Any) -> bool:
    """One test of ``while reg:`` in ``frame``: open the runtime loop (True) or, from the test at the body's end,
    close it (False). The register is the loop's condition itself, so the body's ``register_load(reg, ...)`` decides
    the next iteration, and the device checks it first, as a while does (``loop_begin`` skips a zero)."""
    site = (frame, frame.f_lineno)
    if ctx.register_whiles and ctx.register_whiles[-1][:2] == site and ctx.register_whiles[-1][2] is reg:
        if ctx.register_whiles[-1][3] == frame.f_lasti:  # the top test again: the body never reached its end
            raise NkiError(f"a runtime loop (while r{reg.number}) was left with break, continue or return",
                           "its iterations must come from the register; reload it at the end of the body",
                           where=ctx.dynamic_loops[-1])  # fmt: skip
        ctx.register_whiles.pop()
        _end(ctx, reg)
        return False
    _not_in_no_reorder(ctx, "while_loop")  # `while reg:` is nl.while_loop written as Python
    _begin(ctx, reg)
    ctx.register_whiles.append((*site, reg, frame.f_lasti))
    return True


@nki_op
def fori_loop(ctx: Any, lower: Any, upper: Any, body_fun: Callable[[VirtualRegister], Any], step: Any = 1) -> None:
    """``for i in range(lower, upper, step): body_fun(i)`` on the device; ``i`` is a register, passed by value."""
    if not callable(body_fun):
        raise NkiError(f"fori_loop: body_fun must be callable, got {type(body_fun).__name__}")
    _not_in_no_reorder(ctx, "fori_loop")
    for i in _range(ctx, lower, upper, _positive_step(step, "fori_loop")):
        body_fun(i)


@nki_op
def while_loop(ctx: Any, init: Any, body_fun: Callable[[VirtualRegister], Any]) -> None:
    """``r = init; while r != 0: r = body_fun(r)`` on the device; the body returns the next condition register."""
    if not isinstance(init, VirtualRegister):
        raise NkiError(f"while_loop: init must be a VirtualRegister, got {type(init).__name__}")
    if not callable(body_fun):
        raise NkiError(f"while_loop: body_fun must be callable, got {type(body_fun).__name__}")
    _not_in_no_reorder(ctx, "while_loop")
    cond = register_value(ctx, init, "while_loop init")
    _begin(ctx, cond)
    result = body_fun(register_value(ctx, cond, "while_loop"))
    if not isinstance(result, VirtualRegister):
        raise NkiError(f"while_loop: body_fun must return the next condition register, got {type(result).__name__}")
    set_register(ctx, cond, result, "while_loop")
    _end(ctx, cond)

