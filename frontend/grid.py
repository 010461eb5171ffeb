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
left untouched, and masked-off indices may lie outside the tensor), see :func:`restrict_operands`.
"""

from __future__ import annotations

import dis
import inspect
import operator
import sys
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from nkic.frontend.affine import DynSlice, IndexExpr, is_symbolic
from nkic.frontend.errors import NkiError, user_frame
from nkic.frontend.tensor import NkiTensor, _static_int

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
        import numpy as np

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
        if isinstance(other, NkiTensor):
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


def block_view(t: NkiTensor, dims: tuple[int, ...], blocks: int) -> NkiTensor:
    """The user's view ``dims`` (block dims first) of a block tensor ``t`` stored as ``block_layout(dims)``."""
    pairs = list(t.pairs)  # storage order: partition, blocks..., free...
    ordered = (*pairs[1 : blocks + 1], pairs[0], *pairs[blocks + 1 :])
    view = NkiTensor(t.storage, t.offset, tuple(ordered), t.dtype)
    view.block_dims = blocks
    return view


# -- tensor indexing with grids ------------------------------------------------------------------------------
def index_view(t: NkiTensor, key: Any) -> NkiTensor:
    """``t[key]`` with index grids / tensors in ``key`` (numpy advanced indexing, see the module docstring)."""
    if t.dyn is not None:
        raise NkiError("an indirect view cannot be indexed again", "put the whole access into one subscript")
    from nkic.frontend.tensor import _expand_key, _is_advanced, _resolve_index, _resolve_slice

    keys = _expand_key(key, t.ndim)
    nb = t.block_dims
    if nb:
        if _is_advanced(tuple(keys[:nb])):
            raise NkiError("the block dims of a par_dim tensor take ints or slices, not index grids",
                           "index one block at a time: t[b, i_p, i_f] in a loop over b")  # fmt: skip
        tile = t._block_item(keys[:nb] + [slice(None)] * (t.ndim - nb))
        if tile.block_dims:
            raise NkiError("index every block dim of a par_dim tensor with an int before indexing it with grids")
        return index_view(tile, tuple(keys[nb:]))
    adv = [i for i, k in enumerate(keys) if isinstance(k, (IndexGrid, NkiTensor))]
    rank = max(keys[i].ndim for i in adv)
    bshape: tuple[int, ...] = ()
    for i in adv:
        k = keys[i]
        # A run-time index tile holds one index per partition: it varies along the first axis (left-aligned).
        shape = (k.shape[0],) + (1,) * (rank - 1) if isinstance(k, NkiTensor) else k.shape
        bshape = _broadcast(bshape, shape)
    nd = len(bshape)
    offset: int | IndexExpr = t.offset
    sliced: list[tuple[int, tuple[int, int]]] = []  # (tensor dim, (step, num)) of the slice dims
    coeff = [[0] * nd for _ in range(t.ndim)]  # coeff[i][d]: tensor dim i per result coordinate d
    runtime: tuple[int, NkiTensor] | None = None
    for i, (k, (step, num)) in enumerate(zip(keys, t.pairs)):
        if isinstance(k, IndexGrid):
            coeff[i] = list(k._padded(nd))
            offset = offset + k.const * step
        elif isinstance(k, NkiTensor):
            if runtime is not None:
                raise NkiError("only one dim can be indexed by a tensor (a run-time index)")
            runtime = (i, k)
        elif isinstance(k, (slice, DynSlice)):
            if isinstance(k, DynSlice):
                k = slice(k.start, k.start + _static_int(k.size, "nl.ds size"), 1)
            start, length, kstep = _resolve_slice(k, num, i)
            offset = offset + start * step
            sliced.append((i, (step * kstep, length)))
        else:
            offset = offset + _resolve_index(k, num, i) * step
    # numpy: adjacent advanced indices put the broadcast dims in their place, otherwise first.
    adjacent = adv == list(range(adv[0], adv[-1] + 1))
    at = sum(1 for i, _ in sliced if i < adv[0]) if adjacent else 0
    bpairs = []
    for d, n in enumerate(bshape):
        stride = sum(coeff[i][d] * t.pairs[i][0] for i in range(t.ndim))
        bpairs.append((stride if n > 1 else 0, n))
    pairs = [p for _, p in sliced]
    pairs[at:at] = bpairs
    order: list[tuple[str, int]] = [("s", i) for i, _ in sliced]
    order[at:at] = [("b", d) for d in range(nd)]
    if runtime is not None:
        return _runtime_view(t, runtime, offset, pairs, at, coeff, bshape)
    if t.on_chip:
        pairs = _on_chip_pairs(t, pairs, order, coeff, bshape)
    view = NkiTensor(t.storage, offset, tuple(pairs), t.dtype)
    view.oob_note = _out_of_range(t, keys, bshape)
    return view


def _out_of_range(t: NkiTensor, keys: list[Any], bshape: tuple[int, ...]) -> str | None:
    """Which grid index leaves its dim (checked when an instruction uses the view: a mask may cut it first)."""
    for i, (k, n) in enumerate(zip(keys, t.shape)):
        if not isinstance(k, IndexGrid):
            continue
        lo, hi = (k.const.bounds() if is_symbolic(k.const) else (k.const, k.const))
        for c, m in zip(k._padded(len(bshape)), bshape):
            lo, hi = lo + min(0, c * (m - 1)), hi + max(0, c * (m - 1))
        if lo < 0 or hi >= n:
            return f"the index grid on dim {i} ranges over {lo}..{hi}, outside 0..{n - 1}"
    return None


def _on_chip_pairs(t: NkiTensor, pairs: list[tuple[int, int]], order: list[tuple[str, int]],
                   coeff: list[list[int]], bshape: tuple[int, ...]) -> list[tuple[int, int]]:  # fmt: skip
    """Check that the result's first dim walks the partitions one by one and no other dim moves across them
    (what an on-chip access pattern can express), and give the first pair the partition step."""
    pstep = t.pairs[0][0]
    walking = [r for r, (kind, x) in enumerate(order)
               if (kind == "s" and x == 0 and pairs[r][1] > 1) or (kind == "b" and coeff[0][x] and bshape[x] > 1)]
    hint = "SBUF/PSUM views keep the partition dim first: index it with i_p = nl.arange(P)[:, None] (+ a constant)"
    if len(walking) > 1 or (walking and walking[0] != 0):
        raise NkiError(f"on-chip tensor '{t.label}': the partition dim would not be the first dim of the view "
                       f"(it moves along result dims {walking})", hint + "; transpose with nisa.nc_transpose")
    if walking:
        kind, x = order[0]
        if kind == "b" and coeff[0][x] != 1:
            raise NkiError(f"on-chip tensor '{t.label}': the partition index steps by {coeff[0][x]}", hint)
        if pairs[0][0] != pstep:
            raise NkiError(f"on-chip tensor '{t.label}': the first axis of the view moves the partition and a free dim "
                           "together, which no on-chip access pattern expresses", hint)  # fmt: skip
    elif pairs and pairs[0][1] > 1:
        raise NkiError(f"on-chip tensor '{t.label}': the first dim of the view ({pairs[0][1]} elements) does not walk "
                       "the partitions", hint)  # fmt: skip
    if not pairs:
        return [(pstep, 1), (1, 1)]
    out = [(pstep, pairs[0][1]), *pairs[1:]]
    return out if len(out) >= 2 else [*out, (1, 1)]


def _runtime_view(t: NkiTensor, runtime: tuple[int, NkiTensor], offset: Any, pairs: list[tuple[int, int]],
                  at: int, coeff: list[list[int]], bshape: tuple[int, ...]) -> NkiTensor:  # fmt: skip
    """``data[idx_tile, i_f]``: the rows of result dim 0 start at the run-time indices (an indirect DMA)."""
    dim, idx = runtime
    if t.on_chip:
        raise NkiError(f"a tensor index (run-time index) needs an HBM tensor, '{t.label}' is in {t.buffer}",
                       "gather on chip with nisa.local_gather / nl.gather_flattened")  # fmt: skip
    if at != 0 or not bshape:
        raise NkiError("a tensor index must come with index grids that start the result (data[idx, i_f])")
    if idx.size != bshape[0] or any(n != 1 for n in idx.shape[1:]) or idx.shape[0] != bshape[0]:
        raise NkiError(f"the index tensor has shape {idx.shape}; it must hold one index per row of the result "
                       f"({bshape[0]}, 1)", "index with a (rows, 1) tile: data[idx_tile[i_p, 0], i_f]")  # fmt: skip
    if any(coeff[i][0] for i in range(t.ndim)):
        raise NkiError("with a tensor index, the other indices cannot move along the first result axis",
                       "index the other dims with grids of shape (1, F): nl.arange(F)[None, :]")  # fmt: skip
    step = t.pairs[dim][0]
    first = (step, pairs[0][1])
    pattern = [list(first)] + [list(p) for p in pairs[1:]]
    base = NkiTensor(t.storage, 0, t.pairs, t.dtype)
    # .ap counts the index in units of the indexed dim's stride (indirect_dim of the tensor it is called on).
    return base.ap(pattern, offset=offset, vector_offset=idx, indirect_dim=dim)


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


# The instructions whose operands do not share the mask's coordinates dim by dim (the PE array contracts the
# partitions, transposes swap dims, shuffles and gathers move data across partitions): a mask cannot be mapped.
_CROSS = frozenset({
    "nc_matmul", "nc_matmul_mx", "nc_transpose", "dma_transpose", "tensor_partition_reduce", "nc_stream_shuffle",
    "local_gather", "nc_n_gather", "quantize_mx", "sendrecv", "core_barrier", "dma_compute",
})  # fmt: skip


def restrict_operands(op: str, tensors: dict[str, NkiTensor], b: Box,
                      applied_dims: set[int] | None = None) -> dict[str, NkiTensor] | None:  # fmt: skip
    """The operands of ``nisa.<op>`` cut to the box ``b`` of a mask (None: the box is empty, nothing to do).

    Each one-coordinate bound on dim ``d`` cuts dim ``d`` of every operand of the mask's rank whose dim ``d`` spans
    the mask's (operands of another rank: the partition dim only); a dim of size 1 is broadcast and not cut.
    A bound that cuts no operand is an error: never a silently ignored mask. For the instructions of an ``nl``
    function (``applied_dims`` given) the bound only has to cut an operand of one of them: the dims it cut are
    added to ``applied_dims`` and ``with_mask`` checks the rest.
    """
    if any(lo >= hi for lo, hi in b.bounds):
        return None
    cuts = [(d, lo, hi) for d, ((lo, hi), n) in enumerate(zip(b.bounds, b.shape)) if (lo, hi) != (0, n)]
    if not cuts:
        return dict(tensors)
    if op in _CROSS:
        raise NkiError(f"nisa.{op}: mask= is not supported on this instruction (its operands do not share the "
                       "mask's index axes)", "index the operands to the elements you need instead")  # fmt: skip
    out = dict(tensors)
    for d, lo, hi in cuts:
        applied = False
        for role, t in out.items():
            dim = _dim_of(t, d, b.shape)
            if dim is None:
                continue
            out[role] = _cut(t, dim, lo, hi)
            applied = True
        if applied and applied_dims is not None:
            applied_dims.add(d)
        if not applied and applied_dims is None:
            raise NkiError(f"nisa.{op}: the mask bounds axis {d} (size {b.shape[d]}) but no operand has that axis",
                           f"operand shapes: {', '.join(f'{r} {t.shape}' for r, t in tensors.items())}")  # fmt: skip
    return out


# Instructions whose results are free-axis indices of their input: a cut that starts past 0 would shift them.
_WRITES_INDICES = frozenset({"nc_find_index8", "nc_match_replace8", "nonzero_with_count", "topk", "sequence_bounds"})


def _shift_coordinates(op: str, arguments: dict[str, Any], dst: NkiTensor | None, b: Box) -> None:
    """Instructions whose values depend on the element's coordinates keep the uncut coordinates: an iota /
    affine_select pattern restarts at the box's corner (its offset moves, its sizes shrink), range_select's
    ``range_start`` moves; instructions that write indices refuse a box not starting at 0 on the free axes."""
    lows = {d: lo for d, ((lo, hi), n) in enumerate(zip(b.bounds, b.shape)) if (lo, hi) != (0, n)}
    if not lows:
        return
    free_lows = {d: lo for d, lo in lows.items() if d > 0 and lo}
    if op in _WRITES_INDICES and free_lows:
        raise NkiError(f"nisa.{op}: a mask whose free-axis bound starts at {next(iter(free_lows.values()))} would "
                       "shift the indices it writes", "index the operands to the range instead")  # fmt: skip
    if op not in ("iota", "affine_select", "range_select") or dst is None:
        return
    dims = {d: _dim_of(dst, d, b.shape) for d in lows}
    if op == "range_select":
        if any(dim is not None and dim > 0 for dim in dims.values()) and dst.ndim != 2:
            raise NkiError("nisa.range_select: a free-axis mask bound needs a 2-D dst")
        arguments["range_start"] = arguments.get("range_start", 0) + sum(
            lows[d] for d, dim in dims.items() if dim == 1)
        return
    pattern = [list(p) for p in arguments.get("pattern") or ()]
    if len(pattern) != dst.ndim - 1 or any(p[1] != n for p, n in zip(pattern, dst.shape[1:])):
        raise NkiError(f"nisa.{op}: a mask on an instruction whose pattern does not follow dst's dims "
                       f"{dst.shape} is not supported", "give one [step, size] per free dim of dst")  # fmt: skip
    offset = arguments.get("offset", 0)
    for d, dim in dims.items():
        if dim is None:
            continue
        lo, hi = b.bounds[d]
        if dim == 0:
            offset += _static_int(arguments.get("channel_multiplier", 0), "channel_multiplier") * lo
        else:
            offset += pattern[dim - 1][0] * lo
            pattern[dim - 1][1] = hi - lo
    arguments["pattern"], arguments["offset"] = pattern, offset


def _dim_of(t: NkiTensor, d: int, shape: tuple[int, ...]) -> int | None:
    """The dim of operand ``t`` that mask axis ``d`` (of a mask over ``shape``) runs along, or None."""
    dim = d if t.ndim == len(shape) else (0 if d == 0 else None)
    if dim is None or dim >= t.ndim or t.shape[dim] != shape[d]:
        return None
    return dim


def _cut(t: NkiTensor, dim: int, lo: int, hi: int) -> NkiTensor:
    """``t`` restricted to ``lo:hi`` along ``dim``. The rows of a vector-offset (run-time indexed) view start at
    their index values: cutting them cuts the index tile, not the offset."""
    step, _ = t.pairs[dim]
    pairs = list(t.pairs)
    pairs[dim] = (step, hi - lo)
    dyn, offset = t.dyn, t.offset + lo * step
    if dyn is not None and dyn.kind == "vector" and dim == 0:
        dyn, offset = replace(dyn, index=_cut(dyn.index, 0, lo, hi)), t.offset
    return NkiTensor(t.storage, offset, tuple(pairs), t.dtype, dyn)


# -- the mask= of every instruction ---------------------------------------------------------------------------
@dataclass
class _Ambient:
    """The mask of an ``nl`` function being traced, and the mask axes its instructions have cut so far."""

    mask: Predicate
    applied: set[int]


# The masks of the nl functions being traced (their instructions inherit the innermost); None while a mask's own
# helper instructions are recorded. A stack per thread: a ContextVar holding a tuple, pushed by ``_push_ambient`` and
# popped by resetting its token, so another thread's trace never sees (or pops) this one's masks.
_AMBIENT: ContextVar[tuple[_Ambient | None, ...]] = ContextVar("nkic_ambient_masks", default=())


def _innermost_ambient() -> _Ambient | None:
    stack = _AMBIENT.get()
    return stack[-1] if stack else None


def masked(name: str, impl: Callable[..., Any]) -> Callable[..., Any]:
    """``impl`` (an ``nki.isa`` function's body) taking ``mask=``: its tensor arguments are cut to the mask's box
    before it validates them; conditions over several axes predicate the write of dst (``_predicated``). Inside an
    ``nl`` function called with ``mask=`` the function's mask applies."""
    sig = inspect.signature(impl)

    def run(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        mask = as_mask(kwargs.pop("mask", None))
        ambient = None
        if mask is None:
            ambient = _innermost_ambient()
            mask = ambient.mask if ambient is not None else None
        if mask is None and not _has_blocks(args, kwargs):
            return impl(ctx, *args, **kwargs)
        bound = sig.bind(ctx, *args, **kwargs)
        tensors = {k: v for k, v in bound.arguments.items() if isinstance(v, NkiTensor)}
        for role, t in tensors.items():
            if t.block_dims:
                raise NkiError(f"nisa.{name}: '{role}' is a block tensor (dims before nl.par_dim)",
                               "index its block dims first: t[b]")  # fmt: skip
        if mask is None:
            return impl(ctx, *args, **kwargs)
        b = box(mask)
        if b.general:
            _check_predicable(name, bound.arguments, b)
        cut = restrict_operands(name, tensors, b, ambient.applied if ambient is not None else None)
        if cut is None:
            return None
        _shift_coordinates(name, bound.arguments, tensors.get("dst"), b)
        bound.arguments.update(cut)
        if b.general:
            return _predicated(ctx, impl, bound, b)
        return impl(*bound.args, **bound.kwargs)

    return _like(run, impl)  # inspect.signature sees the instruction's own


def _check_predicable(op: str, arguments: dict[str, Any], b: Box) -> None:
    """A condition over several axes is applied by computing into a temporary and copying it into dst under a
    predicate tile: dst must be the only output, on chip, and span every axis the condition uses."""
    from nkic.target.instructions import INSTRUCTIONS

    dst = arguments.get("dst")
    spec = next((s for k, s in INSTRUCTIONS.items() if (s.nki_name or k) == op), None)
    others = [r.name for r in spec.roles if r.write and r.name != "dst" and arguments.get(r.name) is not None] \
        if spec is not None else []  # fmt: skip
    why = None
    if op in _CROSS or not isinstance(dst, NkiTensor):
        why = "its operands do not share the mask's index axes"
    elif not dst.on_chip:
        why = f"its dst is in {dst.buffer}; only on-chip writes can be predicated"
    elif others:
        why = f"it also writes {', '.join(others)}, which a predicate on dst cannot mask"
    elif any(_dim_of(dst, d, b.shape) is None for c, _ in b.general for d, x in enumerate(c) if x):
        why = f"dst {dst.shape} does not span every axis of the condition (mask over {b.shape})"
    if why is not None:
        raise NkiError(f"nisa.{op}: mask= with a condition over several index axes is not supported here: {why}",
                       "use one-axis bounds (i_p < 64) & (i_f < 256), or nisa.affine_select on the result")  # fmt: skip


def _predicated(ctx: Any, impl: Callable[..., Any], bound: inspect.BoundArguments, b: Box) -> Any:
    """Run the instruction into a temporary, then ``tensor_copy_predicated`` it into dst where every general
    condition holds (a condition ``Σ c_d·k_d + c >= 0`` is a GpSimd iota of its value and a ``>= 0`` compare)."""
    from nkic.frontend import isa  # isa imports this module

    dst: NkiTensor = bound.arguments["dst"]
    tmp = ctx.allocate(dst.shape, dst.dtype, dst.buffer, "", None)
    bound.arguments["dst"] = tmp
    token = _AMBIENT.set((*_AMBIENT.get(), None))
    try:
        result = impl(*bound.args, **bound.kwargs)
        pred = None
        for coeffs, const in b.general:
            los = [lo for lo, _ in b.bounds]
            offset = const + sum(c * lo for c, lo in zip(coeffs, los))
            pattern = [[c, n] for c, n in zip(coeffs[1:], dst.shape[1:])] or [[0, 1]]
            value = ctx.allocate(dst.shape, "int32", "sbuf", "", None)
            isa.iota.__nki_impl__(ctx, value, pattern, offset=offset, channel_multiplier=coeffs[0])
            holds = ctx.allocate(dst.shape, "uint8", "sbuf", "", None)
            isa.tensor_scalar.__nki_impl__(ctx, holds, value, "greater_equal", 0.0)
            if pred is not None:
                both = ctx.allocate(dst.shape, "uint8", "sbuf", "", None)
                isa.tensor_tensor.__nki_impl__(ctx, both, pred, holds, "multiply")
                holds = both
            pred = holds
        isa.tensor_copy_predicated.__nki_impl__(ctx, dst, tmp, pred)
    finally:
        _AMBIENT.reset(token)
    return result


def ambient_mask() -> bool:
    """Whether the ``mask=`` of an enclosing ``nl`` function applies to the instructions recorded now."""
    return _innermost_ambient() is not None


def _has_blocks(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    return any(v.block_dims for v in (*args, *kwargs.values()) if isinstance(v, NkiTensor))


def with_mask(impl: Callable[..., Any]) -> Callable[..., Any]:
    """``impl`` (an ``nl`` function's body) taking ``mask=``: the instructions it records inherit the mask."""

    def run(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        mask = as_mask(kwargs.pop("mask", None))
        if mask is None:
            return impl(ctx, *args, **kwargs)
        ambient = _Ambient(mask, set())
        token = _AMBIENT.set((*_AMBIENT.get(), ambient))
        try:
            result = impl(ctx, *args, **kwargs)
        finally:
            _AMBIENT.reset(token)
        b = box(mask)
        missed = [d for d, (lo_hi, n) in enumerate(zip(b.bounds, b.shape)) if lo_hi != (0, n)
                  and lo_hi[0] < lo_hi[1] and d not in ambient.applied]  # fmt: skip
        if missed and all(lo < hi for lo, hi in b.bounds):
            raise NkiError(f"nl.{impl.__name__}: the mask bounds axis {missed[0]} (size {b.shape[missed[0]]}) but "
                           "no operand of its instructions has that axis", "check the mask's index grids")  # fmt: skip
        return result

    return _like(run, impl)


def refuse_mask(name: str, impl: Callable[..., Any]) -> Callable[..., Any]:
    """``impl`` (an nl function that records no masked instruction) with ``mask=`` other than None an error."""

    def run(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("mask") is not None:
            raise NkiError(f"{name} does not take mask=", "mask the instructions that read or write the tensor")
        kwargs.pop("mask", None)
        return impl(ctx, *args, **kwargs)

    return _like(run, impl)


def _like(run: Callable[..., Any], impl: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` dressed as ``impl`` (its signature is the one a call is checked against) and marked masked."""
    run.__wrapped__ = impl  # type: ignore[attr-defined]
    run.__name__ = impl.__name__
    run.__qualname__ = getattr(impl, "__qualname__", impl.__name__)
    run.__module__ = impl.__module__
    run.__doc__ = impl.__doc__
    run.__nki_masked__ = True  # type: ignore[attr-defined]
    return run


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

