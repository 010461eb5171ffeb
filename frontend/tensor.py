"""The abstract tensor a kernel body manipulates: storage + a strided view of it.

An ``NkiTensor`` is a view ``(offset, [[step, num], …])`` over the row-major flat storage of one allocation (a
kernel parameter or an ``nl.ndarray``). Element ``(i0, …, ik)`` of the view is storage element
``offset + Σ step_j·i_j``; ``offset`` may be affine in the induction variables of symbolic loops. For on-chip tensors
(SBUF/PSUM) pair 0 is the partition pair ``[row_elems·k, nparts]``, matching NKI's ``.ap`` semantics, so the view is
exactly the operand pattern the emitter records.

Indexing follows NKI 0.3+: ints, slices with steps, negative indices, ``...``, ``nl.ds`` and loop
variable expressions; a subscript with legacy index grids (``nl.arange``/``nl.mgrid``) or an index tile goes to
``frontend/grid.py``. On-chip views keep the partition dim and stay ≥2-D; HBM views drop int-indexed dims.
A slice may be empty (``x[0:0]``, ``nl.ds(i, 0)``): an instruction with an empty operand records nothing.
Tensor values are unknown at trace time, so ``bool()``, comparisons and ``int()`` on a tensor raise the dynamic
control flow error.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nkic.frontend.affine import DynSlice, IndexExpr, is_symbolic, value_bounds
from nkic.frontend.affine import static_int as _static_int
from nkic.frontend.context import active_context
from nkic.frontend.control import VirtualRegister
from nkic.frontend.dtypes import Buffer, itemsize, normalize_dtype
from nkic.frontend.errors import NkiError
from nkic.frontend.grid import IndexGrid, _broadcast
from nkic.target.machine import NUM_PARTITIONS, get_target

Pairs = tuple[tuple[int, int], ...]


@dataclass(eq=False)
class Storage:
    """One allocation: what the emitter's ``param``/``alloc`` returned a handle for."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    buffer: Buffer
    address: tuple[int, int] | None
    handle: object
    owner: object  # the (context, program) that created it; a tensor must not leak into another trace
    loc: tuple[str, int, int] = ("<unknown>", 0, 0)
    is_param: bool = False
    written: bool = field(default=False)
    # The symbolic loops open when it was allocated (LoopVars, outermost first): it exists only inside them.
    scope: tuple[Any, ...] = ()
    # What messages call it: the user's name= or the variable the allocating line assigns it to (frontend/varnames.py);
    # "" for none, then the IR name. The IR keeps ``name``, so dumps do not depend on the kernel's local names.
    label: str = ""

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def contiguous_pairs(shape: Sequence[int]) -> Pairs:
    pairs: list[tuple[int, int]] = []
    step = 1
    for n in reversed(shape):
        pairs.append((step, n))
        step *= n
    return tuple(reversed(pairs))


def _dense(pairs: Pairs) -> bool:
    """True if the pairs enumerate consecutive elements (ignoring size-1 dims)."""
    expected = 1
    for step, num in reversed(pairs):
        if num == 1:
            continue
        if step != expected:
            return False
        expected *= num
    return True


_DYNAMIC_CF = (
    "dynamic control flow on a tensor is not supported; use nisa.affine_select / static bounds",
    "Python if/while/comparisons run at trace time, when tensor values are unknown",
)


@dataclass(frozen=True)
class DynamicOffset:
    """The run-time part of an ``.ap(scalar_offset=, vector_offset=)`` view: ``scale`` elements per unit of a
    register's value (``reg``), of the one element of ``index`` (``scalar``), or, per row of the pattern's first
    pair, of that row's element of ``index`` in place of the first pair's step (``vector``); or of a tensor
    indirection view (``.indirect(index)``), per column of the second pair, of that column's offset in ``index``
    (``indirect``)."""

    kind: str
    scale: int
    register: Any = None  # a control.VirtualRegister (kind "reg")
    index: NkiTensor | None = None  # kinds "scalar" and "vector"

    def term(self, role: str) -> tuple[str, str, int, int]:
        """The IR's (kind, index role, register, scale) for an operand whose index rides in ``role``."""
        if self.kind == "reg":
            return "reg", "", self.register.number, self.scale
        return self.kind, role, 0, self.scale


_INDEX_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32")


class NkiTensor:
    """A view of a Storage; see the module docstring for the addressing model."""

    __array_ufunc__ = None  # keep numpy from treating a tensor as an array-like
    _nki_tensor_ = True  # grid.py tells a tensor operand by this (it sits below this module)

    def __init__(
        self,
        storage: Storage,
        offset: IndexExpr | int,
        pairs: Pairs,
        dtype: str | None = None,
        dyn: DynamicOffset | None = None,
    ):
        self.storage = storage
        self.offset = offset
        self.pairs = tuple((int(s), int(n)) for s, n in pairs)
        self.dtype = dtype or storage.dtype
        self.dyn = dyn

    # -- properties -----------------------------------------------------------------------------------
    _shape: tuple[int, ...] | None = None  # shape, computed on first use (``pairs`` is set once, in __init__)

    @property
    def shape(self) -> tuple[int, ...]:
        shape = self._shape
        if shape is None:
            shape = self._shape = tuple(n for _, n in self.pairs)
        return shape

    @property
    def strides(self) -> tuple[int, ...]:
        return tuple(s for s, _ in self.pairs)

    @property
    def buffer(self) -> Buffer:
        return self.storage.buffer

    @property
    def name(self) -> str:
        return self.storage.name

    @property
    def label(self) -> str:
        """The tensor's name in messages: the user's name for it when the trace knows one (``acc``), else the IR's."""
        return self.storage.label or self.storage.name

    @property
    def ndim(self) -> int:
        return len(self.pairs)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return itemsize(self.dtype)

    @property
    def on_chip(self) -> bool:
        return self.buffer.on_chip

    @property
    def base_tensor(self) -> NkiTensor:
        """The whole tensor this view shares storage with, in the storage's own shape and dtype (``x.view(dt)``'s
        base keeps ``x``'s dtype). Not in the API reference, but NKI tensors have it: nki-library reads it on kernel
        arguments and their dtype views (gate_up_projection_mx_shard_H.py: ``weight.base_tensor``, then views the
        loaded copy back as ``weight.dtype``)."""
        return NkiTensor(self.storage, 0, contiguous_pairs(self.storage.shape), self.storage.dtype)

    @property
    def partitions(self) -> int:
        return self.shape[0] if self.pairs else 1

    @property
    def free_size(self) -> int:
        return math.prod(self.shape[1:])

    def get_pattern(self) -> list[list[int]]:
        return [[s, n] for s, n in self.pairs]

    def is_contiguous(self) -> bool:
        return _dense(self.pairs)

    def is_indirect(self) -> bool:
        return self.dyn is not None

    def storage_elems(self) -> int:
        """Storage size counted in elements of this view's dtype."""
        return self.storage.size * itemsize(self.storage.dtype) // self.itemsize

    def _view(self, offset: IndexExpr | int, pairs: Pairs, dtype: str | None = None) -> NkiTensor:
        if self.dyn is not None:
            raise NkiError(
                "an indirect view (.ap with scalar_offset / vector_offset, or .indirect) cannot be indexed, reshaped "
                "or viewed again",
                "put the whole access into the .ap pattern, or slice the tile before .indirect",
            )
        return NkiTensor(self.storage, offset, pairs, dtype or self.dtype)

    def __repr__(self) -> str:
        return f"NkiTensor({self.name}, shape={self.shape}, {self.dtype}, {self.buffer}, offset={self.offset})"

    # -- indexing -------------------------------------------------------------------------------------
    # Leading block dims of a legacy ``(B, nl.par_dim(P), F)`` on-chip tensor (frontend/grid.py); 0 for a tile.
    block_dims = 0
    # Why a view indexed with grids reaches outside its tensor (an error only if an instruction uses it uncut).
    oob_note: str | None = None

    def __getitem__(self, key: Any) -> NkiTensor:
        if not self.block_dims:
            view = self._int_item(key)
            if view is not None:
                return view
        if _is_advanced(key):
            return index_view(self, key)
        keys = _expand_key(key, self.ndim)
        if self.block_dims:
            return self._block_item(keys)
        offset: IndexExpr | int = self.offset
        pairs: list[tuple[int, int]] = []
        int_dims: list[int] = []
        for dim, (k, (step, num)) in enumerate(zip(keys, self.pairs)):
            if isinstance(k, DynSlice):
                k = slice(k.start, k.start + _static_int(k.size, "nl.ds size"), 1)
            if isinstance(k, slice):
                start, length, kstep = _resolve_slice(k, num, dim)
                offset = offset + start * step
                pairs.append((step * kstep, length))
            else:
                idx = _resolve_index(k, num, dim)
                offset = offset + idx * step
                pairs.append((step, 1))
                int_dims.append(dim)
        return self._view(offset, _drop_int_dims(pairs, int_dims, self.on_chip))

    def _int_item(self, key: Any) -> NkiTensor | None:
        """``__getitem__`` of the common key, plain ints and slices of ints (``t[k * 128 : (k + 1) * 128, 0]``), the
        same view by the same arithmetic with the slices resolved through a cache; None for any other key, for an
        int out of bounds or too many indices, and on an indirect view (the general path then says what is wrong)."""
        if self.dyn is not None:
            return None
        keys = key if type(key) is tuple else (key,)
        pairs = self.pairs
        n = len(keys)
        if n > len(pairs):
            return None
        offset: IndexExpr | int = self.offset
        out: list[tuple[int, int]] = []
        int_dims: list[int] = []
        for dim in range(n):
            k = keys[dim]
            step, num = pairs[dim]
            kind = type(k)
            if kind is slice:
                a, b, c = k.start, k.stop, k.step
                if a is None and b is None and c is None:  # ``:``
                    start, length, kstep = 0, num, 1
                elif (a is None or type(a) is int) and (b is None or type(b) is int) and (c is None or type(c) is int):
                    start, length, kstep = _int_slice(a, b, 1 if c is None else c, num, dim)
                else:
                    return None
                offset = offset + start * step
                out.append((step * kstep, length))
            elif kind is int:
                if not -num <= k < num:
                    return None
                offset = offset + (k + num if k < 0 else k) * step
                out.append((step, 1))
                int_dims.append(dim)
            else:
                return None
        if n < len(pairs):  # the dims the key leaves out: whole (``slice(None)``)
            if type(offset) is not int:  # keep the general path's arithmetic on a symbolic offset
                for step, _ in pairs[n:]:
                    offset = offset + 0 * step
            out.extend(pairs[n:])
        # The pairs are ints already: the view is built without NkiTensor.__init__'s normalisation.
        return NkiTensor._of_ints(self.storage, offset, _drop_int_dims(out, int_dims, self.on_chip), self.dtype)

    @staticmethod
    def _of_ints(storage: Storage, offset: IndexExpr | int, pairs: Pairs, dtype: str) -> NkiTensor:
        """``NkiTensor(storage, offset, pairs, dtype)`` for a tuple of (int, int) pairs and a dtype (no dynamic
        offset): the same attributes as ``__init__`` sets, without converting each entry again."""
        t = NkiTensor.__new__(NkiTensor)
        t.storage, t.offset, t.pairs, t.dtype, t.dyn = storage, offset, pairs, dtype, None
        return t

    def _block_item(self, keys: list[Any]) -> NkiTensor:
        """Index a block tensor: int-indexed block dims drop, the rest index the tile(s) as usual."""
        nb = self.block_dims
        offset: IndexExpr | int = self.offset
        kept: list[tuple[int, int]] = []
        for dim, (k, (step, num)) in enumerate(zip(keys[:nb], self.pairs[:nb])):
            if isinstance(k, (slice, DynSlice)):
                if isinstance(k, DynSlice):
                    k = slice(k.start, k.start + _static_int(k.size, "nl.ds size"), 1)
                start, length, kstep = _resolve_slice(k, num, dim)
                offset = offset + start * step
                kept.append((step * kstep, length))
            else:
                offset = offset + _resolve_index(k, num, dim) * step
        tile = NkiTensor(self.storage, offset, self.pairs[nb:], self.dtype)[tuple(keys[nb:])]
        if not kept:
            return tile
        view = NkiTensor(self.storage, tile.offset, (*kept, *tile.pairs), self.dtype)
        view.block_dims = len(kept)
        return view

    def __setitem__(self, key: Any, value: Any) -> None:
        _lent(ASSIGN, "assigning to a tensor view")(self[key], value)

    # -- reshaping and reinterpretation ---------------------------------------------------------------
    def reshape(self, *dims_given: Any, shape: Any = None) -> NkiTensor:
        """A view of the same elements in ``shape`` (``t.reshape((128, 24))``, ``t.reshape(128, 24)`` or, as the API
        reference names the parameter, ``t.reshape(shape=(128, 24))``); one entry may be -1."""
        if shape is not None and dims_given:
            raise NkiError("reshape: give the shape either positionally or as shape=, not both")
        dims = _shape_arg(dims_given if shape is None else (shape,))
        dims = _infer_minus_one(dims, self.size)
        if math.prod(dims) != self.size:
            raise NkiError(f"cannot reshape a tensor of shape {self.shape} into {tuple(dims)}", "element counts differ")
        if not self.on_chip:
            if not _dense(self.pairs):
                raise NkiError("reshape of a non-contiguous HBM view is not supported", "reshape the full tensor")
            return self._view(self.offset, contiguous_pairs(dims))
        if not dims or dims[0] != self.partitions:
            raise NkiError(
                f"reshape of an on-chip tensor must keep the partition dim {self.partitions}, got {tuple(dims)}"
            )
        if not _dense(self.pairs[1:]):
            raise NkiError("reshape of a non-contiguous on-chip view is not supported", "reshape the full tensor")
        return self._view(self.offset, (self.pairs[0], *contiguous_pairs(dims[1:])))

    def broadcast_to(self, shape: Sequence[int]) -> NkiTensor:
        """The legacy tile method ``t.broadcast_to(shape)``: ``nl.broadcast_to(t, shape=shape)``, a new SBUF tile
        (numpy broadcasting of size-1 dims, the partition dim included). NKI 0.3 tensors have no such method; it is
        kept on both surfaces so a kernel ported half-way still runs, and a legacy kernel gets the migration
        warning naming ``nl.broadcast_to``."""
        if LEGACY_OPERATOR is not None:
            LEGACY_OPERATOR("broadcast_to", self, shape)  # only warns, in legacy kernels
        return _lent(BROADCAST_TO, "t.broadcast_to")(self, shape)

    def broadcast(self, dim: int, size: int) -> NkiTensor:
        """NKI 0.3's ``t.broadcast(dim, size)``: a view repeating the size-1 dim ``dim`` ``size`` times (stride 0, no
        data moves). An on-chip tensor's partition dim cannot be broadcast this way: partitions are separate memories
        (``nl.broadcast_to`` copies through TensorE instead)."""
        d = _static_int(dim, "broadcast dim")
        n = _static_int(size, "broadcast size")
        if not -self.ndim <= d < self.ndim:
            raise NkiError(f"broadcast: dim {d} is not a dim of a tensor of shape {self.shape}")
        d %= self.ndim
        if self.shape[d] != 1:
            raise NkiError(f"broadcast: dim {d} has size {self.shape[d]}, only a size-1 dim can be broadcast")
        if n < 1:
            raise NkiError(f"broadcast: size must be positive, got {n}")
        if d == 0 and self.on_chip:
            raise NkiError("broadcast: the partition dim of an on-chip tensor cannot be broadcast by a view",
                           "use nl.broadcast_to(t, shape), which copies the partition across partitions")  # fmt: skip
        pairs = list(self.pairs)
        pairs[d] = (0, n)
        return self._view(self.offset, tuple(pairs))

    def view(self, dtype: Any) -> NkiTensor:
        """Reinterpret the bytes as ``dtype``; the last dim scales by the size ratio."""
        new = normalize_dtype(dtype)
        old_size, new_size = self.itemsize, itemsize(new)
        if old_size == new_size:
            return self._view(self.offset, self.pairs, new)
        if not self.pairs or self.pairs[-1][0] != 1:
            raise NkiError("view(dtype) needs a view whose last dim is contiguous")
        scale = (old_size, new_size)

        def conv(x: int, what: str) -> int:
            if (x * scale[0]) % scale[1]:
                raise NkiError(f"view({new}): {what} {x} is not a whole number of {new} elements")
            return x * scale[0] // scale[1]

        pairs = [(conv(s, "stride"), n) for s, n in self.pairs[:-1]]
        pairs.append((1, conv(self.pairs[-1][1], "last dim")))
        offset = _reinterpret_offset(self, new)
        return self._view(offset, tuple(pairs), new)

    def ap(
        self,
        pattern: Sequence[Sequence[int]],
        offset: Any = None,
        scalar_offset: Any = None,
        vector_offset: Any = None,
        indirect_dim: int = 0,
        dtype: Any = None,
    ) -> NkiTensor:
        """A raw access pattern over the storage (ignores this view's pattern; ``offset=None`` inherits it).

        ``scalar_offset`` (a register or a one-element integer tensor in SBUF/HBM) adds its run-time value times the
        stride of ``self``'s dim ``indirect_dim`` to every element; ``vector_offset`` (an SBUF integer tensor with
        one index per row of the pattern's first pair, on an HBM tensor) makes row ``i`` start at ``index[i]`` times
        that stride instead of at ``i`` times the first pair's step. Only the static part is bounds-checked here;
        the simulator checks each run-time row (``oob_mode`` of the DMA).
        """
        if self.dyn is not None:
            raise NkiError("an indirect view cannot be indirected again", "check t.is_indirect() first")
        new = normalize_dtype(dtype) if dtype is not None else self.dtype
        pairs = tuple((_static_int(s, "pattern step"), _static_int(n, "pattern size")) for s, n in pattern)
        if not pairs or any(n <= 0 for _, n in pairs):
            raise NkiError(f"invalid access pattern {[list(p) for p in pairs]}", "sizes must be positive")
        base = NkiTensor(self.storage, 0, (), new)
        if offset is None:
            off = self.offset if new == self.dtype else _reinterpret_offset(self, new)
        else:
            off = offset if is_symbolic(offset) else _static_int(offset, "offset")
        if self.on_chip:
            row = math.prod(self.storage.shape[1:]) * itemsize(self.storage.dtype) // itemsize(new)
            if pairs[0][0] != row:
                raise NkiError(
                    f"the first pair of an on-chip access pattern must be [{row}, nparts], got {list(pairs[0])}",
                    "on-chip patterns start with the partition step (elements per partition)",
                )
            if pairs[0][1] > NUM_PARTITIONS:
                raise NkiError(f"access pattern spans {pairs[0][1]} partitions, the limit is {NUM_PARTITIONS}")
        # Its bounds are checked when an instruction uses it (``bounds_problem``): as in NKI, a kernel may build a
        # pattern that would overrun and then not use it (nki-library's output_projection_tkg guards with an `if`).
        if scalar_offset is not None and (is_symbolic(scalar_offset) or isinstance(scalar_offset, int)):
            # An offset known at trace time (a number, an affine_range index) is a static offset: no run-time term.
            off = off + scalar_offset * self._offset_scale(indirect_dim, new)
            scalar_offset = None
        view = base._view(off, pairs, new)
        view.dyn = self._dynamic_offset(scalar_offset, vector_offset, indirect_dim, new, pairs)
        return view

    def bounds_problem(self) -> str | None:
        """What is wrong with the elements this view touches (outside its storage), or None. Of a vector-offset
        view only the static part is known: the rows of its first pair are placed at run time."""
        static = self
        if self.dyn is not None and self.dyn.kind == "vector":
            static = NkiTensor(self.storage, self.offset, self.pairs[1:] or ((1, 1),), self.dtype)
        elif self.dyn is not None and self.dyn.kind == "indirect":  # the offsets are placed at run time
            static = NkiTensor(self.storage, self.offset, self.pairs[:1], self.dtype)
        lo, hi = _flat_bounds(static)
        total = self.storage_elems()
        if lo < 0 or hi >= total:
            note = f" ({self.oob_note}; mask= the elements outside)" if self.oob_note else ""
            return f"access pattern touches elements {lo}..{hi} of '{self.label}', which has {total}{note}"
        return None

    def indirect(self, index: Any, num_elem: Any = None) -> NkiTensor:
        """A tensor indirection view: column ``i`` is this tile's free element ``index``'s offset ``i``, on every
        partition ("TI allows reading or writing a column of data at given free-dimension offsets across contiguous
        partition dimensions", nl NkiTensor.indirect; "Available on NeuronCore-v4 (Trn3) and later"). The offsets
        count elements of this view's free dims (one strided run); their order is the engine's snake
        (runtime/state.py ``_indirect_offsets``). Shape ``(P, num_elem)``; a gather as a source, a scatter as a dst."""
        ctx = active_context()
        gen = get_target(ctx.options.target).nc_version if ctx is not None else None
        if gen is not None and gen < 4:
            raise NkiError(f".indirect: tensor indirection is available on NeuronCore-v4 (trn3) and later, not on "
                           f"NeuronCore-v{gen}",
                           "gather with nisa.dma_copy and .ap(vector_offset=) instead")  # fmt: skip
        if self.dyn is not None:
            raise NkiError("an indirect view cannot be indirected again", "check t.is_indirect() first")
        if not self.on_chip:
            raise NkiError(f".indirect: '{self.label}' is in {self.buffer}; tensor indirection views an SBUF or PSUM "
                           "tile", "dma_copy it on chip, or use .ap(vector_offset=) on the HBM tensor")  # fmt: skip
        if not isinstance(index, NkiTensor) or index.dtype not in _INDEX_DTYPES or index.buffer != "sbuf":
            raise NkiError(".indirect: index must be an SBUF tensor of an integer dtype",
                           "index: SBUF tensor containing free-dimension offsets, shape (P, K)")  # fmt: skip
        if index.is_indirect() or index.partitions != self.partitions:
            raise NkiError(f".indirect: index must be a plain (P, K) tile with P = {self.partitions} (this tile's "
                           f"partitions), got shape {index.shape}")  # fmt: skip
        count = index.size if num_elem is None else _static_int(num_elem, "num_elem")
        if not 1 <= count <= index.size:
            raise NkiError(f".indirect: num_elem must be 1..{index.size} (the index's size), got {count}")
        step = _free_run(self.pairs[1:])
        if step is None:
            raise NkiError(f".indirect: the free dims of '{self.label}' (pattern {self.get_pattern()}) are not one "
                           "strided run", "index a 2-D (P, F) tile, or one whose free dims are contiguous")  # fmt: skip
        view = NkiTensor(self.storage, self.offset, (self.pairs[0], (step, count)), self.dtype)
        view.dyn = DynamicOffset("indirect", step, index=index)
        return view

    def _offset_scale(self, indirect_dim: Any, dtype: str) -> int:
        """Elements of ``dtype`` between consecutive indices of dim ``indirect_dim`` (the unit of an offset)."""
        dim = _static_int(indirect_dim, "indirect_dim")
        if not 0 <= dim < self.ndim:
            raise NkiError(f".ap: indirect_dim {dim} is not a dim of a tensor of shape {self.shape}")
        stride_bytes = self.pairs[dim][0] * self.itemsize
        if stride_bytes % itemsize(dtype):
            raise NkiError(f".ap: the stride of dim {dim} is not a whole number of {dtype} elements")
        return stride_bytes // itemsize(dtype)

    def _dynamic_offset(
        self, scalar: Any, vector: Any, indirect_dim: Any, dtype: str, pairs: Pairs
    ) -> DynamicOffset | None:
        """The run-time term of ``.ap`` (checked as NKI documents it), or None for a static pattern."""
        if scalar is None and vector is None:
            return None
        if scalar is not None and vector is not None:
            raise NkiError(".ap: scalar_offset and vector_offset are mutually exclusive")
        if self.on_chip and _static_int(indirect_dim, "indirect_dim") == 0:
            raise NkiError(".ap: a dynamic offset cannot move the partition dim of an on-chip tensor",
                           "use indirect_dim >= 1, or index an HBM tensor")  # fmt: skip
        scale = self._offset_scale(indirect_dim, dtype)
        if vector is not None:
            index = _index_tensor(vector, "vector_offset")
            if self.on_chip:
                raise NkiError(".ap: vector_offset indexes an HBM tensor", f"'{self.label}' is in {self.buffer}")
            if index.buffer != "sbuf":
                raise NkiError(f".ap: vector_offset must be an SBUF tensor, got {index.buffer}")
            if index.size != pairs[0][1]:
                raise NkiError(f".ap: vector_offset holds {index.size} indices for the {pairs[0][1]} rows of the "
                               "pattern's first pair", "give one index per row: shape (rows, 1)")  # fmt: skip
            return DynamicOffset("vector", scale, index=index)
        if isinstance(scalar, VirtualRegister):
            return DynamicOffset("reg", scale, register=scalar)
        index = _index_tensor(scalar, "scalar_offset")
        if index.size != 1:
            raise NkiError(f".ap: scalar_offset must hold exactly one element, got shape {index.shape}")
        return DynamicOffset("scalar", scale, index=index)

    # -- values are unknown at trace time -------------------------------------------------------------
    def __bool__(self) -> bool:
        """Always true, as for NKI's ``NkiTensor`` (a plain object without ``__bool__``): ``if bias:`` asks whether a
        tensor was given (nki-library's ``if params.expert_params.expert_index:``), never what it holds. Comparing a
        tensor's values (``x < 3``) still fails: those are unknown at trace time."""
        return True

    def _dynamic(self, *_: Any) -> Any:
        raise NkiError(*_DYNAMIC_CF)

    __lt__ = __le__ = __gt__ = __ge__ = __index__ = __int__ = __float__ = _dynamic

    def __eq__(self, other: object) -> Any:
        if other is None:
            return False
        return self._dynamic()

    def __ne__(self, other: object) -> Any:
        if other is None:
            return True
        return self._dynamic()

    __hash__ = object.__hash__

    def _operator(self, *_: Any) -> Any:
        # NKI 0.3+ tensors define no arithmetic operators (only the legacy neuronxcc tiles did): point at the
        # value-returning nl functions instead.
        raise NkiError(
            "arithmetic operators on tensors are not supported (NKI 0.3+ tensors have none)",
            "call the nl function instead: nl.add(a, b), nl.multiply(a, 2.0), nl.negative(a), nl.matmul(a, b)",
        )

    def _legacy(name: str) -> Any:  # type: ignore[misc]  # a class-body helper, not a method
        """The operator ``name``: the legacy surface's meaning in legacy kernels (neuronxcc tiles had operators,
        ``LEGACY_OPERATOR``), the error above everywhere else."""

        def method(self: NkiTensor, other: Any = None) -> Any:
            if LEGACY_OPERATOR is not None:
                result = LEGACY_OPERATOR(name, self, other)
                if result is not NotImplemented:
                    return result
            return self._operator()

        method.__name__ = f"__{name}__"
        return method

    __add__, __radd__, __sub__, __rsub__ = _legacy("add"), _legacy("radd"), _legacy("sub"), _legacy("rsub")
    __mul__, __rmul__, __truediv__, __rtruediv__ = _legacy("mul"), _legacy("rmul"), _legacy("truediv"), _legacy(
        "rtruediv")
    __neg__, __iadd__, __isub__, __imul__ = _legacy("neg"), _legacy("iadd"), _legacy("isub"), _legacy("imul")
    __pow__ = __matmul__ = _operator
    del _legacy

    def __len__(self) -> int:
        return self.shape[0] if self.pairs else 0

    def __iter__(self) -> Any:
        raise NkiError("iterating over a tensor is not supported", "index it with nl.affine_range / static_range")


# What the layers above lend the tensor model, registered when they load (``frontend/__init__.py`` loads them all):
# they record instructions, and import this module. ``t[key] = value`` records a copy or a memset
# (``recorders/__init__.py``); ``t.broadcast_to(shape)`` is ``nl.broadcast_to`` (``tiles.py``).
ASSIGN: Callable[[NkiTensor, Any], None] | None = None
BROADCAST_TO: Callable[[NkiTensor, Any], NkiTensor] | None = None


def _lent(hook: Callable[..., Any] | None, what: str) -> Callable[..., Any]:
    if hook is None:
        raise NkiError(f"internal error: {what} needs the frontend's instructions, which are not loaded",
                       "import nkic.frontend (or nkic.api) rather than nkic.frontend.tensor alone")  # fmt: skip
    return hook


# The arithmetic operators of the legacy surface (``frontend/legacy/language.py``): ``(name, tensor, other)`` -> the
# result, or NotImplemented when the caller is not a legacy kernel (then the operator is an error).
LEGACY_OPERATOR: Callable[[str, NkiTensor, Any], Any] | None = None


# -- helpers ----------------------------------------------------------------------------------------------
def _free_run(pairs: Pairs) -> int | None:
    """The element step of free pairs that enumerate one strided run (offset ``k`` at ``k * step``), or None."""
    run = [(s, n) for s, n in pairs if n != 1]
    if not run:
        return 1
    for (outer, _), (inner, n) in zip(run, run[1:]):
        if outer != inner * n:
            return None
    return run[-1][0]


def _index_tensor(value: Any, what: str) -> NkiTensor:
    if not isinstance(value, NkiTensor):
        raise NkiError(f".ap: {what} must be a tensor{' or a VirtualRegister' if what == 'scalar_offset' else ''}, "
                       f"got {type(value).__name__}")  # fmt: skip
    if value.dtype not in _INDEX_DTYPES:
        raise NkiError(f".ap: {what} must have an integer dtype, got {value.dtype}", "indices are int32 / uint32")
    if value.buffer not in ("sbuf", "hbm", "private_hbm", "shared_hbm"):
        raise NkiError(f".ap: {what} must be in SBUF or HBM, got {value.buffer}")
    if value.is_indirect():
        raise NkiError(f".ap: {what} cannot itself be an indirect view")
    return value


def _shape_arg(shape: tuple[Any, ...]) -> list[int]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return [_static_int(d, "shape entry") for d in shape]


def _infer_minus_one(dims: list[int], size: int) -> list[int]:
    if dims.count(-1) == 1:
        rest = math.prod(d for d in dims if d != -1)
        if rest and size % rest == 0:
            dims = [size // rest if d == -1 else d for d in dims]
    return dims


def _is_advanced(key: Any) -> bool:
    """A subscript with an index grid (``nl.arange``/``nl.mgrid``) or a tensor (a run-time index) in it."""
    keys = key if isinstance(key, tuple) else (key,)
    return any(getattr(k, "_nki_index_grid_", False) or isinstance(k, NkiTensor) for k in keys)


def _expand_key(key: Any, ndim: int) -> list[Any]:
    keys = list(key) if isinstance(key, tuple) else [key]
    if sum(k is Ellipsis for k in keys) > 1:
        raise NkiError("an index can only have a single ellipsis ('...')")
    i = next((i for i, k in enumerate(keys) if k is Ellipsis), None)
    if i is not None:
        keys[i : i + 1] = [slice(None)] * (ndim - len(keys) + 1)
    if len(keys) > ndim:
        raise NkiError(f"too many indices: {len(keys)} for a tensor with {ndim} dims")
    return keys + [slice(None)] * (ndim - len(keys))


def _resolve_index(k: Any, num: int, dim: int) -> IndexExpr | int:
    if is_symbolic(k):
        lo, hi = value_bounds(k)
        if lo < 0 or hi >= num:
            raise NkiError(f"index {k} ranges over {lo}..{hi}, out of bounds for dim {dim} of size {num}")
        return k
    if not isinstance(k, int):
        try:
            k = operator.index(k)
        except TypeError:
            raise NkiError(f"unsupported index {k!r} of type {type(k).__name__}", "use ints, slices or nl.ds") from None
    if not -num <= k < num:
        raise NkiError(f"index {k} is out of bounds for dim {dim} of size {num}")
    return k + num if k < 0 else k


def _resolve_slice(k: slice, num: int, dim: int) -> tuple[IndexExpr | int, int, int]:
    """(start, length, step) of a slice of a dim of size ``num``."""
    step = 1 if k.step is None else _static_int(k.step, "slice step")
    if step == 0:
        raise NkiError("slice step cannot be zero")
    if is_symbolic(k.start) or is_symbolic(k.stop):
        if step < 0:
            raise NkiError("a slice with a loop-variable bound needs a positive step")
        start = 0 if k.start is None else k.start
        stop = num if k.stop is None else k.stop
        length = max(0, -(-_static_int(stop - start, "slice length") // step))
        if length == 0:
            return start, 0, step  # an empty view: instructions using it record nothing
        lo, hi = value_bounds(start)
        if lo < 0 or hi + (length - 1) * step >= num:
            raise NkiError(f"slice {k.start}:{k.stop} is out of bounds for dim {dim} of size {num}")
        return start, length, step
    bounds = [None if v is None else _static_int(v, "slice bound") for v in (k.start, k.stop)]
    return _int_slice(bounds[0], bounds[1], step, num, dim)


@functools.lru_cache(maxsize=1 << 14)
def _int_slice(start: int | None, stop: int | None, step: int, num: int, dim: int) -> tuple[int, int, int]:
    """(start, length, step) of ``start:stop:step`` over a dim of size ``num``, all ints (an unrolled loop slices the
    same few ranges over and over: cached)."""
    if step == 0:
        raise NkiError("slice step cannot be zero")
    for v in (start, stop):
        if v is not None and not -num <= v <= num:
            raise NkiError(f"slice bound {v} is out of bounds for dim {dim} of size {num}")
    start, stop, step = slice(start, stop, step).indices(num)
    return start, len(range(start, stop, step)), step  # length 0: an empty view, a no-op in any instruction


def _drop_int_dims(pairs: list[tuple[int, int]], int_dims: list[int], on_chip: bool) -> Pairs:
    """HBM views drop int-indexed dims; on-chip views keep dim 0 and never go below 2-D."""
    if not on_chip:
        return tuple(p for d, p in enumerate(pairs) if d not in int_dims)
    kept = [p for d, p in enumerate(pairs) if d == 0 or d not in int_dims]
    if len(kept) == 1 and len(pairs) > 1:
        kept.append(pairs[-1])  # an int-indexed last dim stays as size 1
    return tuple(kept)


def _flat_bounds(t: NkiTensor) -> tuple[int, int]:
    lo, hi = value_bounds(t.offset)
    for step, num in t.pairs:
        span = step * (num - 1)
        lo += min(0, span)
        hi += max(0, span)
    return lo, hi


def _reinterpret_offset(t: NkiTensor, new: str) -> IndexExpr | int:
    old, size = t.itemsize, itemsize(new)
    if is_symbolic(t.offset):
        return (t.offset * old) // size
    if (t.offset * old) % size:
        raise NkiError(f"offset {t.offset} is not a whole number of {new} elements")
    return t.offset * old // size


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
