"""Symbolic index arithmetic: affine expressions over the induction variables of symbolic loops.

``affine_range`` / ``sequential_range`` bodies are traced once with a :class:`LoopVar` standing for the induction
variable. ``+``, ``-`` and ``*`` by ints keep an expression affine (``const + Σ coeff·iv``) so it can be used in
indices, ``nl.ds`` and ``.ap`` offsets. Anything that needs the concrete value — ``int()``, ``__index__`` (list
indexing, ``range`` bounds), ``bool()``, comparisons, true division, a non-exact ``//`` — raises the internal
``NeedsUnroll`` naming the loops involved; the tracer then re-traces with those loops unrolled, where the variable is
a plain int.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import Any

from nkic.frontend.errors import NeedsUnroll, NkiError


class IndexExpr:
    """``const + Σ coeff·var`` over LoopVars; never constant (constant results collapse to int)."""

    __array_ufunc__ = None  # numpy scalars defer to our reflected operators instead of converting us
    __slots__ = ("const", "terms")

    def __init__(self, const: int, terms: tuple[tuple["LoopVar", int], ...]):
        self.const = const
        self.terms = terms

    # -- construction -----------------------------------------------------------------------------------
    @staticmethod
    def make(const: int, terms: dict[int, tuple["LoopVar", int]]) -> "IndexExpr | int":
        kept = tuple(sorted(((v, c) for v, c in terms.values() if c != 0), key=lambda vc: vc[0].uid))
        return IndexExpr(const, kept) if kept else const

    def _term_map(self) -> dict[int, tuple["LoopVar", int]]:
        return {v.uid: (v, c) for v, c in self.terms}

    @property
    def loop_vars(self) -> tuple["LoopVar", ...]:
        return tuple(v for v, _ in self.terms)

    def _concrete(self) -> int:
        raise NeedsUnroll(v.site for v in self.loop_vars)

    # -- affine arithmetic ------------------------------------------------------------------------------
    def __add__(self, other: Any) -> "IndexExpr | int":
        if isinstance(other, IndexExpr):
            terms = self._term_map()
            for v, c in other.terms:
                terms[v.uid] = (v, terms.get(v.uid, (v, 0))[1] + c)
            return IndexExpr.make(self.const + other.const, terms)
        k = _as_int(other)
        if k is None:
            return NotImplemented if not _is_number(other) else self._concrete()
        return IndexExpr.make(self.const + k, self._term_map())

    __radd__ = __add__

    def __neg__(self) -> "IndexExpr | int":
        return self * -1

    def __pos__(self) -> "IndexExpr":
        return self

    def __sub__(self, other: Any) -> "IndexExpr | int":
        if isinstance(other, IndexExpr):
            return self + (-other)
        k = _as_int(other)
        if k is None:
            return NotImplemented if not _is_number(other) else self._concrete()
        return self + (-k)

    def __rsub__(self, other: Any) -> "IndexExpr | int":
        return (-self) + other

    def __mul__(self, other: Any) -> "IndexExpr | int":
        if isinstance(other, IndexExpr):
            return self._concrete()  # a product of induction variables is not affine
        k = _as_int(other)
        if k is None:
            return NotImplemented if not _is_number(other) else self._concrete()
        return IndexExpr.make(self.const * k, {v.uid: (v, c * k) for v, c in self.terms})

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> "IndexExpr | int":
        k = _as_int(other)
        if k and self.const % k == 0 and all(c % k == 0 for _, c in self.terms):
            return IndexExpr.make(self.const // k, {v.uid: (v, c // k) for v, c in self.terms})
        return self._concrete()

    # -- everything else needs the concrete value -------------------------------------------------------
    def __index__(self) -> int:
        return self._concrete()

    __int__ = __index__

    def __float__(self) -> float:
        return float(self._concrete())

    def __bool__(self) -> bool:
        return bool(self._concrete())

    def _needs(self, *_: Any) -> Any:
        return self._concrete()

    __truediv__ = __rtruediv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = _needs
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __abs__ = __round__ = _needs
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        parts = [f"{c}*{v.name}" if c != 1 else v.name for v, c in self.terms]
        if self.const:
            parts.append(str(self.const))
        return " + ".join(parts)

    def bounds(self) -> tuple[int, int]:
        """(min, max) of the expression over the iteration ranges of its loops."""
        lo = hi = self.const
        for v, c in self.terms:
            a, b = c * v.first, c * v.last
            lo += min(a, b)
            hi += max(a, b)
        return lo, hi


class LoopVar(IndexExpr):
    """The induction variable of one symbolic loop (``start + k·step`` for k in [0, trip))."""

    __slots__ = ("uid", "site", "first", "last", "frame", "name")
    # Process-wide and handed out by next() (one C call, atomic under the GIL), so loop variables made by threads
    # tracing at the same time never share a uid; a read-modify-write of a class attribute could hand two the same.
    _uids = itertools.count(1)

    def __init__(self, site: tuple[str, int, int], start: int, stop: int, step: int, frame: object):
        self.uid = next(LoopVar._uids)
        self.site = site
        trip = len(range(start, stop, step))
        self.first, self.last = start, start + step * (trip - 1)
        self.frame = frame  # the tracer's loop record; tells whether the loop is still open
        self.name = f"iv{self.uid}"
        super().__init__(0, ((self, 1),))


@dataclass(frozen=True)
class DynSlice:
    """``nl.ds(start, size)``: the slice ``start:start+size`` with a possibly symbolic start."""

    start: Any
    size: int


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) or type(value).__module__ == "numpy"


def is_symbolic(value: Any) -> bool:
    return isinstance(value, IndexExpr)


def value_bounds(value: "IndexExpr | int") -> tuple[int, int]:
    return value.bounds() if isinstance(value, IndexExpr) else (value, value)


def static_int(value: Any, what: str) -> int:
    """An int known at trace time (a loop variable here forces its loop to unroll)."""
    if isinstance(value, bool):
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        raise NkiError(f"{what} must be an int, got {type(value).__name__}") from None
