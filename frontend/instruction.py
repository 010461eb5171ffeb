"""``nisa.NkiInstruction``: the handle every traced ``nisa`` call returns, and its ``depends_on``.

An edge ``consumer.depends_on(producer)`` is an ordering the data alone may not impose: the emitter tags the
producer and lists the tag on the consumer (``tag`` / ``after`` on the penguin instruction, carried to BIR), and
``dependency-analysis`` adds an ``ordered`` edge from the consumer to the latest earlier instruction with that tag,
which the backend turns into a semaphore wait like any other edge.

Rules (NKI's, plus one of nkic's): both instructions belong to the same trace and SPMD program; the producer was
traced before the consumer (an instruction cannot wait for one the program has not reached — on one engine that
would deadlock); and the producer sits in the consumer's dynamic loop (``nl.fori_loop`` / ``nl.while_loop`` /
``nl.dynamic_range``) or an enclosing scope, never inside a dynamic loop the consumer is outside of. (A dynamic
loop's begin and end are barriers in nkic, so an edge from an enclosing scope into one is already satisfied.) Python
loops and nkic's symbolic (unrolled) loops do not
count: a consumer after such a loop waits for the producer's last iteration, one inside it for the same iteration's.
"""

from __future__ import annotations

import os
from typing import Any

from nkic.frontend.errors import NkiError


class NkiInstruction:
    """Opaque handle to the instruction(s) one ``nisa`` call traced."""

    def __init__(
        self, ctx: Any, ops: list[Any], serial: int, dynamic_scope: tuple[Any, ...], what: str | tuple[str, str, int]
    ):
        self._ctx = ctx
        self._owner = ctx._owner
        self._ops = ops
        self._serial = serial  # trace order of the call
        self._scope = dynamic_scope  # the open dynamic loops (by identity), outermost first
        # "nisa.x at file.py:3", or (x, file, line) to word so only if asked: every nisa call returns a handle, and
        # most are dropped unread.
        self._about = what

    @property
    def _what(self) -> str:
        about = self._about
        if isinstance(about, tuple):
            name, file, line = about
            about = self._about = f"nisa.{name} at {os.path.basename(file)}:{line}"
        return about

    @property
    def _tag(self) -> str:
        """Unique within the kernel, and apart from an inlined sub-kernel's tags (prefixed by the kernel's name)."""
        return f"{self._ctx.kernel.name}.i{self._serial}"

    def __repr__(self) -> str:
        return f"NkiInstruction({self._what})"

    def depends_on(self, *producers: NkiInstruction) -> NkiInstruction:
        """Add scheduling dependencies: this instruction runs after every listed producer completes. Returns
        ``self``, so calls chain."""
        for p in producers:
            self._check(p)
        for p in producers:
            for producer in p._ops:
                for consumer in self._ops:
                    self._ctx.emitter.order(consumer, producer, p._tag)
        return self

    def _check(self, p: Any) -> None:
        if not isinstance(p, NkiInstruction):
            raise NkiError(f"depends_on takes instructions (what nisa calls return), got {type(p).__name__}")
        if p._owner is not self._owner or p._ctx is not self._ctx:
            raise NkiError(f"depends_on: {p._what} belongs to another trace or SPMD program")
        if p is self or p._serial == self._serial:
            raise NkiError(f"depends_on: {self._what} cannot depend on itself")
        if p._serial > self._serial:
            raise NkiError(f"depends_on: {p._what} is traced after {self._what}, which cannot wait for it",
                           "call depends_on on the later instruction: later.depends_on(earlier)")  # fmt: skip
        inside = len(p._scope) <= len(self._scope) and all(a is b for a, b in zip(p._scope, self._scope))
        if not inside:
            raise NkiError(f"depends_on: {p._what} is inside a dynamic loop that {self._what} is not in",
                           "both must sit in the same dynamic loop (or the producer in an enclosing scope)")  # fmt: skip
