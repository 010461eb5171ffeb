"""Index grids of the legacy ``neuronxcc.nki`` surface: ``nl.arange``, ``nl.mgrid``, ``nl.par_dim`` and ``mask=``.

An :class:`IndexGrid` is an integer array known at trace time, as numpy would build it: a shape and, for each
element ``(k_0, …, k_n)``, the value ``const + Σ coeff_d·k_d`` (``const`` may be affine in loop variables). So
``nl.arange(128)[:, None]`` has shape (128, 1) and value ``k_0``; ``2*nl.arange(64)[:, None] + 1`` is ``2·k_0 + 1``;
grids of different shapes broadcast like numpy arrays. Indexing a tensor with grids is numpy advanced indexing: the
result's shape is the broadcast shape of the index arrays, and since each index is affine in the result's
coordinates the result is a strided view (``stride_d = Σ_i coeff_{i,d}·stride_i`` over the tensor's dims ``i``).
A tensor (an SBUF tile of integers) used as an index is a run-time index: the view becomes a vector-offset DMA
pattern (``NkiTensor.ap(vector_offset=...)``).

A comparison of grids is a :class:`Predicate`, a conjunction of affine constraints over the same coordinates. As
``mask=`` of an instruction it restricts the instruction to the elements whose coordinates satisfy it: a constraint
on one coordinate (``i_p < 64``) cuts that dim of every operand that spans it (masked-off destination elements are
left untouched, and masked-off indices may lie outside the tensor), see ``recorders/masks.py``.

Index grids and predicates are values below the tensor model: ``tensor.py`` indexes a tensor with them
(``index_view``) and ``recorders/masks.py`` applies a mask to an instruction's operands.
"""

from __future__ import annotations

import dis
import operator
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkic.frontend.affine import IndexExpr, is_symbolic, static_int as _static_int
from nkic.frontend.errors import NkiError, user_frame

_CONTROL = (
    "control flow on an index grid is not supported: its values exist only on the device",
    "use mask= (conditions joined with &) or nisa.affine_select",
)


class _NotAnInt(NkiError, TypeError):
    """``int(grid)``: an NkiError for the user, a TypeError for code probing whether a value is an int (the loop
    variable arithmetic of affine.py then defers to the grid's reflected operator)."""


def _int(value: Any, what: str) -> int | IndexExpr:
    """An int or a loop-variable expression (grids combine with both)."""
    if is_symbolic(value):
        return value  # type: ignore[no-any-return]
    return _static_int(value, what)


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise NkiError(f"index grids of shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


class IndexGrid:
    """``const + Σ coeffs[d]·k_d`` over the coordinates ``k`` of ``shape`` (see the module docstring)."""

    __array_ufunc__ = None
    __slots__ = ("shape", "coeffs", "const")
    _nki_index_grid_ = True  # tensor.py tells an advanced subscript by this (it cannot import this module)

    def __init__(self, shape: tuple[int, ...], coeffs: tuple[int, ...], const: int | IndexExpr):
        self.shape = shape
        # A size-1 dim has only k = 0: its coefficient never matters, keep it 0 so equal grids compare equal.
        self.coeffs = tuple(c if n > 1 else 0 for c, n in zip(coeffs, shape))
        self.const = const

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _padded(self, ndim: int) -> tuple[int, ...]:
        return (0,) * (ndim - self.ndim) + self.coeffs

    def values(self) -> Any:
        """The grid as a numpy array (its constant part must be static); for tests and error messages."""
        const = _int(self.const, "grid constant")
        if is_symbolic(const):
            const = int(const)  # needs the loop's value
        idx = np.indices(self.shape) if self.shape else np.zeros((0,), dtype=np.int64)
        return const + sum((c * idx[d] for d, c in enumerate(self.coeffs)), np.zeros(self.shape, dtype=np.int64))

    # -- axis insertion and slicing: arange(n)[:, None], [None, :], [2:5] --------------------------------------
    def __getitem__(self, key: Any) -> IndexGrid:
        keys = list(key) if isinstance(key, tuple) else [key]
        if sum(k is Ellipsis for k in keys) > 1:
            raise NkiError("an index can only have a single ellipsis ('...')")
        real = sum(k is not None and k is not Ellipsis for k in keys)
        if real > self.ndim:
            raise NkiError(f"too many indices for an index grid of shape {self.shape}")
        if Ellipsis in keys:
            i = keys.index(Ellipsis)
            keys[i : i + 1] = [slice(None)] * (self.ndim - real)
        keys += [slice(None)] * (self.ndim - real - sum(k is Ellipsis for k in keys))
        shape: list[int] = []
        coeffs: list[int] = []
        const = self.const
        dim = 0
        for k in keys:
            if k is None:
                shape.append(1)
                coeffs.append(0)
                continue
            n, c = self.shape[dim], self.coeffs[dim]
            dim += 1
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                shape.append(len(range(start, stop, step)))
                coeffs.append(c * step)
                const = const + c * start
            else:
                i = _static_int(k, "index grid subscript")
                if not -n <= i < n:
                    raise NkiError(f"index {i} is out of bounds for an index grid dim of size {n}")
                const = const + c * (i % n)
        return IndexGrid(tuple(shape), tuple(coeffs), const)

    # -- affine arithmetic ------------------------------------------------------------------------------------
    def _combine(self, other: Any, sign: int) -> IndexGrid:
        if isinstance(other, IndexGrid):
            shape = _broadcast(self.shape, other.shape)
            a, b = self._padded(len(shape)), other._padded(len(shape))
            return IndexGrid(shape, tuple(x + sign * y for x, y in zip(a, b)), self.const + sign * other.const)
        if getattr(other, "_nki_tensor_", False):  # an NkiTensor (tensor.py imports this module)
            return NotImplemented
        k = _int(other, "a number added to an index grid")
        return IndexGrid(self.shape, self.coeffs, self.const + sign * k)

    def __add__(self, other: Any) -> IndexGrid:
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other: Any) -> IndexGrid:
        return self._combine(other, -1)

    def __rsub__(self, other: Any) -> IndexGrid:
        return (-self)._combine(other, 1)

    def __neg__(self) -> IndexGrid:
        return self * -1

    def __pos__(self) -> IndexGrid:
        return self

    def __mul__(self, other: Any) -> IndexGrid:
        if isinstance(other, IndexGrid):
            raise NkiError("the product of two index grids is not affine", "multiply index grids by ints only")
        if is_symbolic(other):
            other = operator.index(other)  # a loop variable times a grid: the loop must unroll
        k = _static_int(other, "an index grid factor")
        const = self.const * k
        return IndexGrid(self.shape, tuple(c * k for c in self.coeffs), const)

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> IndexGrid:
        k = _static_int(other, "an index grid divisor")
        const = self.const if not is_symbolic(self.const) else None
        if k and all(c % k == 0 for c in self.coeffs) and const is not None and const % k == 0:
            return IndexGrid(self.shape, tuple(c // k for c in self.coeffs), const // k)
        raise NkiError(f"an index grid divided by {k} is not affine", "only exact divisions of every term are")

    def _not_affine(self, *_: Any) -> Any:
        raise NkiError("this operation on an index grid is not affine", "use + - * by ints (and exact //)")

    __truediv__ = __rtruediv__ = __mod__ = __rmod__ = __pow__ = __rfloordiv__ = __matmul__ = _not_affine

    # -- comparisons build mask predicates ---------------------------------------------------------------------
    def __lt__(self, other: Any) -> Predicate:
        return _compare(other - self - 1)  # self < other  <=>  other - self - 1 >= 0

    def __le__(self, other: Any) -> Predicate:
        return _compare(other - self)

    def __gt__(self, other: Any) -> Predicate:
        return _compare(self - other - 1)

    def __ge__(self, other: Any) -> Predicate:
        return _compare(self - other)

    def __eq__(self, other: Any) -> Predicate:  # type: ignore[override]
        return _compare(self - other) & _compare(other - self)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        raise NkiError("'!=' of index grids is not a conjunction of affine bounds", "use < / > on each side")

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise NkiError(*_CONTROL)

    def __index__(self) -> int:
        raise _NotAnInt(*_CONTROL)

    __int__ = __float__ = __index__

    def __iter__(self) -> Any:
        raise NkiError("iterating over an index grid is not supported", "use nl.affine_range for loops")

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def __repr__(self) -> str:
        terms = [f"{c}*k{d}" for d, c in enumerate(self.coeffs) if c]
        return f"IndexGrid(shape={self.shape}, {' + '.join(terms + [str(self.const)])})"


def _compare(expr: Any) -> Predicate:
    """``expr >= 0`` as a predicate (``expr`` a grid, or a number when both sides were)."""
    if not isinstance(expr, IndexGrid):
        return Predicate((), (((), _static_int(expr, "a comparison")),))
    const = expr.const
    if is_symbolic(const):
        const = operator.index(const)  # a mask bound that moves with a symbolic loop: the loop unrolls
    return _absorb(Predicate(expr.shape, ((expr.coeffs, const),)))


# -- construction: arange, mgrid, par_dim -----------------------------------------------------------------------
def arange(start: Any, stop: Any = None, step: Any = 1) -> IndexGrid:
    """``nl.arange([start,] stop[, step])``: a 1-D index vector; ``[:, None]`` / ``[None, :]`` place it on an axis."""
    if stop is None:
        start, stop = 0, start
    a, b, s = (_static_int(v, "nl.arange bound") for v in (start, stop, step))
    if s == 0:
        raise NkiError("nl.arange step cannot be zero")
    n = len(range(a, b, s))
    if n == 0:
        raise NkiError(f"nl.arange({a}, {b}, {s}) is empty")
    return IndexGrid((n,), (s,), a)


class MGrid(tuple):  # type: ignore[type-arg]
    """The result of ``nl.mgrid[...]``: a tuple of index grids (one per axis, all of the full shape), which also
    names them ``.p .x .y .z`` (axes 0–3) as legacy kernels do (``grid.p``, ``grid.x``)."""

    @property
    def p(self) -> IndexGrid:
        return self[0]  # type: ignore[no-any-return]

    def _axis(self, i: int, name: str) -> IndexGrid:
        if i >= len(self):
            raise NkiError(f"a {len(self)}-D nl.mgrid has no axis .{name}")
        return self[i]  # type: ignore[no-any-return]

    x = property(lambda self: self._axis(1, "x"))
    y = property(lambda self: self._axis(2, "y"))
    z = property(lambda self: self._axis(3, "z"))


class _MGridMaker:
    """``nl.mgrid[0:128, 0:512]``: like ``numpy.mgrid``, one dense grid per slice."""

    def __getitem__(self, key: Any) -> MGrid:
        keys = key if isinstance(key, tuple) else (key,)
        ranges = []
        for k in keys:
            if not isinstance(k, slice) or k.stop is None:
                raise NkiError("nl.mgrid takes slices with a stop: nl.mgrid[0:128, 0:512]")
            a = 0 if k.start is None else _static_int(k.start, "nl.mgrid bound")
            b, s = _static_int(k.stop, "nl.mgrid bound"), 1 if k.step is None else _static_int(k.step, "step")
            if s == 0 or not range(a, b, s):
                raise NkiError(f"nl.mgrid range {a}:{b}:{s} is empty")
            ranges.append((a, len(range(a, b, s)), s))
        shape = tuple(n for _, n, _ in ranges)
        axes = []
        for d, (a, _, s) in enumerate(ranges):
            coeffs = tuple(s if i == d else 0 for i in range(len(shape)))
            axes.append(IndexGrid(shape, coeffs, a))
        return MGrid(axes)

    def __repr__(self) -> str:
        return "nl.mgrid"


mgrid = _MGridMaker()


class par_dim(int):
    """``nl.par_dim(n)`` in a shape: this dim is the partition dim. Dims before it are *block* dims: an on-chip
    tensor ``(B, par_dim(P), F)`` is B tiles of (P, F) (stored as one (P, B·F) allocation, block b at free offset
    b·F); ``t[b]`` is a tile. ``par_dim`` first is the same as no ``par_dim`` (the first dim is the partition dim)."""

    def __new__(cls, n: Any) -> par_dim:
        return super().__new__(cls, _static_int(n, "nl.par_dim size"))

    def __repr__(self) -> str:
        return f"par_dim({int(self)})"


def split_par_dim(shape: Any) -> int:
    """How many block dims precede the ``par_dim`` of ``shape`` (0 without one); more than one par_dim is an
    error."""
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    marked = [i for i, d in enumerate(dims) if isinstance(d, par_dim)]
    if len(marked) > 1:
        raise NkiError(f"shape {tuple(int(d) for d in dims)} has {len(marked)} nl.par_dim entries, at most one")
    return marked[0] if marked else 0


def block_layout(dims: tuple[int, ...], blocks: int) -> tuple[int, ...]:
    """The storage shape of an on-chip block tensor: the partition dim first, then the block dims, then the rest."""
    return (dims[blocks], *dims[:blocks], *dims[blocks + 1 :])


# -- masks ------------------------------------------------------------------------------------------------------
class Predicate:
    """A conjunction of ``Σ coeffs_d·k_d + const >= 0`` over the coordinates of ``shape``."""

    __slots__ = ("shape", "terms")

    def __init__(self, shape: tuple[int, ...], terms: tuple[tuple[tuple[int, ...], int], ...]):
        self.shape = shape
        self.terms = terms

    def __and__(self, other: Any) -> Predicate:
        if not isinstance(other, Predicate):
            raise NkiError(f"cannot combine a mask with {type(other).__name__}", "join conditions with &")
        shape = _broadcast(self.shape, other.shape)
        pad = lambda c: (0,) * (len(shape) - len(c)) + c  # noqa: E731
        terms = tuple((pad(c), k) for c, k in self.terms + other.terms)
        return Predicate(shape, terms)

    __rand__ = __and__

    def __invert__(self) -> Predicate:
        if len(self.terms) != 1:
            raise NkiError("~ of a conjunction is not a conjunction of affine bounds")
        (c, k), = self.terms
        return Predicate(self.shape, ((tuple(-x for x in c), -k - 1),))  # not (e >= 0)  <=>  -e - 1 >= 0

    def __or__(self, other: Any) -> Any:
        raise NkiError("'|' of masks is not supported: a mask is a conjunction of affine bounds", "join with &")

    __ror__ = __or__

    def __bool__(self) -> bool:
        """``mask=(a < n and b < m)``: Python asks for ``bool(a < n)``. The legacy compiler read that as a
        conjunction; so does nkic: the left operand is remembered and joined to the next comparison the same frame
        makes (the right operand). Any other control flow on a predicate (``if``, ``or``, ``not``) is an error."""
        frame = sys._getframe(1)
        if not _is_and(frame):
            raise NkiError(*_CONTROL)
        live = set()
        f = frame
        while f is not None:
            live.add(id(f))
            f = f.f_back
        # frames that returned took theirs along
        _PENDING.set((*((fr, p) for fr, p in _PENDING.get() if id(fr) in live), (frame, self)))
        return True

    def __repr__(self) -> str:
        return f"Predicate(shape={self.shape}, {self.terms})"


# (frame, left operand of an `and`) awaiting the right operand. Per thread (a ContextVar holding a tuple that is
# replaced, never mutated): a thread tracing at the same time must neither absorb nor drop another's pending operand.
_PENDING: ContextVar[tuple[tuple[Any, Predicate], ...]] = ContextVar("nkic_pending_and", default=())


def _absorb(pred: Predicate) -> Predicate:
    """``pred`` joined with the pending left operands of ``and`` of the frame that made it (see ``__bool__``)."""
    pending = _PENDING.get()
    if not pending:
        return pred
    frame = user_frame()
    mine = [p for fr, p in pending if fr is frame]
    if mine:
        _PENDING.set(tuple((fr, p) for fr, p in pending if fr is not frame))
        for p in mine:
            pred = pred & p
    return pred


def _is_and(frame: Any) -> bool:
    """True if ``frame`` is asking for a truth value to evaluate ``x and y``."""
    try:
        ins = {i.offset: i for i in dis.get_instructions(frame.f_code)}
    except Exception:  # noqa: BLE001 — no bytecode: assume the worst
        return False
    here = ins.get(frame.f_lasti)
    if here is None:
        return False
    if here.opname == "JUMP_IF_FALSE_OR_POP":  # Python 3.11
        return True
    if here.opname.startswith("POP_JUMP") and "IF_FALSE" in here.opname:  # 3.12: COPY 1; TO_BOOL; POP_JUMP...
        prev = [i for o, i in ins.items() if o < here.offset]
        return len(prev) >= 2 and any(i.opname == "COPY" and i.arg == 1 for i in prev[-3:])
    return False


def as_mask(value: Any) -> Predicate | None:
    """The ``mask=`` argument as a predicate (None: no mask)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise NkiError(f"mask={value} is not an index predicate",
                       "a mask compares index grids: (i_p < 64) & (i_f < 256)")  # fmt: skip
    if not isinstance(value, Predicate):
        raise NkiError(f"mask= must compare index grids, got {type(value).__name__}",
                       "e.g. mask=(i_p < 64) & (i_f < 256) with i_p = nl.arange(128)[:, None]")  # fmt: skip
    return value


@dataclass(frozen=True)
class Box:
    """The one-coordinate constraints of a mask as half-open intervals per dim, plus the rest (several
    coordinates per term), over the coordinates of ``shape``."""

    shape: tuple[int, ...]
    bounds: tuple[tuple[int, int], ...]
    general: tuple[tuple[tuple[int, ...], int], ...]


def box(mask: Predicate) -> Box:
    bounds = [(0, n) for n in mask.shape]
    general = []
    for coeffs, const in mask.terms:
        moving = [d for d, c in enumerate(coeffs) if c and mask.shape[d] > 1]
        if not moving:
            if const < 0:
                bounds = [(0, 0) for _ in mask.shape]  # never true: nothing is computed
            continue
        if len(moving) > 1:
            general.append((coeffs, const))
            continue
        d = moving[0]
        c = coeffs[d]
        lo, hi = bounds[d]
        if c > 0:  # c·k + const >= 0  <=>  k >= ceil(-const / c)
            lo = max(lo, -(const // c))
        else:  # k <= floor(const / -c)
            hi = min(hi, const // -c + 1)
        bounds[d] = (lo, max(lo, hi))
    return Box(mask.shape, tuple(bounds), tuple(general))


# -- what legacy instructions need from grids -----------------------------------------------------------------
def iota_args(expr: Any) -> tuple[tuple[int, ...], list[list[int]], int, int]:
    """``nisa.iota(expr)`` of the legacy surface: (shape, pattern, offset, channel_multiplier) of the modern
    ``nisa.iota`` computing the grid ``expr`` (dim 0 = partitions)."""
    if not isinstance(expr, IndexGrid):
        raise NkiError(f"nisa.iota: expected an index expression of nl.arange / nl.mgrid, got {type(expr).__name__}")
    shape = expr.shape if expr.ndim >= 2 else (1, *expr.shape)
    coeffs = expr.coeffs if expr.ndim >= 2 else (0, *expr.coeffs)
    const = expr.const if not is_symbolic(expr.const) else operator.index(expr.const)
    pattern = [[c, n] for c, n in zip(coeffs[1:], shape[1:])]
    return tuple(shape), pattern, const, coeffs[0]


def predicate_args(pred: Any) -> tuple[tuple[int, ...], list[list[int]], int, int]:
    """A one-term predicate ``e >= 0`` as (shape, pattern, offset, channel_multiplier) of ``e`` (legacy
    ``nisa.affine_select(pred, ...)`` compares that value with ``greater_equal`` 0)."""
    pred = as_mask(pred)
    if pred is None or len(pred.terms) != 1:
        raise NkiError("expected one affine comparison of index grids (e.g. i_p >= i_f)")
    (coeffs, const), = pred.terms
    return iota_args(IndexGrid(pred.shape, coeffs, const))
