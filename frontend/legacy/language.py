"""``neuronxcc.nki.language``: ``nki.language`` plus the names only the legacy generation has."""

from __future__ import annotations

from nkic.frontend.language import *  # noqa: F401,F403 — the legacy surface is a superset of nki.language
from nkic.frontend.unsupported import missing_names

__getattr__ = missing_names("neuronxcc.nki.language")


# -- index grids, block dims, masks (legacy-only names; the machinery is frontend/grid.py) --------------------
from nkic.frontend.grid import arange, mgrid, par_dim  # noqa: E402,F401

# Functions defined elsewhere that are legacy API, for "did you mean" (unsupported.api_names skips imported helpers).
_API_REEXPORTS = ("arange",)
# ===================================================================================================================
# Legacy-only differences (helper `legacy`): the value-returning conventions of NKI <= 0.2. The index grids
# (nl.arange, nl.mgrid), nl.par_dim and mask= live in their own block (helper `grid`).
# ===================================================================================================================
import builtins as _builtins  # noqa: E402 — `bool`, `float` are NKI dtypes in this namespace
import operator as _operator  # noqa: E402
import sys as _sys  # noqa: E402
import weakref as _weakref  # noqa: E402
from collections.abc import Sequence as _Sequence  # noqa: E402
from typing import Any as _Any  # noqa: E402

import numpy as _np  # noqa: E402

from nkic.frontend import isa as _isa  # noqa: E402
from nkic.frontend import language as _modern  # noqa: E402
from nkic.frontend import tensor as _tensor_module  # noqa: E402
from nkic.frontend import tiles as _tiles  # noqa: E402
from nkic.frontend import trace_context as _trace_context  # noqa: E402
from nkic.frontend.context import current_context as _current_context  # noqa: E402
from nkic.frontend.context import nki_op as _nki_op  # noqa: E402
from nkic.frontend.dtypes import BUFFERS as _BUFFERS  # noqa: E402
from nkic.frontend.dtypes import Buffer as _Buffer  # noqa: E402
from nkic.frontend.dtypes import itemsize as _itemsize  # noqa: E402
from nkic.frontend.dtypes import normalize_dtype as _normalize_dtype  # noqa: E402
from nkic.frontend.errors import NkiError as _NkiError  # noqa: E402
from nkic.frontend.errors import user_frame as _user_frame  # noqa: E402
from nkic.frontend.errors import user_location as _where  # noqa: E402
from nkic.frontend.legacy import isa as _legacy_isa  # noqa: E402
from nkic.frontend.legacy import migration as _migration  # noqa: E402
from nkic.frontend.recorders.psum_accumulate import accumulate_in_place as _accumulate_in_place  # noqa: E402
from nkic.frontend.legacy.compiler import Allocation as _Allocation  # noqa: E402
from nkic.frontend.tensor import NkiTensor as _NkiTensor  # noqa: E402
from nkic.target.vocab import DTYPES as _DTYPES  # noqa: E402


def _legacy_buffer(buffer: _Any) -> _Any:
    """``nl.hbm`` in a legacy kernel: the device HBM the legacy simulator handed back to the caller, i.e. what NKI
    0.3 calls ``nl.shared_hbm`` (the modern tracer keeps rejecting a returned private HBM tensor). An explicit
    ``nl.private_hbm`` stays private."""
    if isinstance(buffer, _Buffer) and buffer.name == "hbm":
        return _BUFFERS["shared_hbm"]
    if isinstance(buffer, str) and buffer == "hbm":
        return _BUFFERS["shared_hbm"]
    return buffer


def _dims(shape: _Any) -> tuple[int, ...]:
    return tuple(_operator.index(d) for d in shape)


def _placed(shape: _Any, dtype: _Any, buffer: _Any, address: _Any) -> tuple[_Any, _Any]:
    """(buffer, address) for ``nl.ndarray``: an ``ncc.sbuf/psum.mod_alloc``/``alloc`` allocation becomes its memory
    and the (partition, byte) address it computes (``compiler.py``)."""
    if not isinstance(buffer, _Allocation):
        return _legacy_buffer(buffer), address
    if address is not None:
        raise _NkiError("nl.ndarray: give either address= or an allocation buffer, not both")
    dims = _dims(shape)
    free_bytes = _itemsize(_normalize_dtype(dtype))
    for d in dims[1:]:
        free_bytes *= d
    return _BUFFERS[buffer.memory], buffer.address(dims[0] if dims else 1, free_bytes)


@_nki_op
def ndarray(ctx: _Any, shape: _Sequence[int], dtype: _Any, buffer: _Any = sbuf, name: str = "", address: _Any = None,
            **kw: _Any) -> _NkiTensor:  # fmt: skip
    """``nl.ndarray`` with the legacy buffers: ``nl.hbm`` is shared HBM, and ``buffer=`` may be an explicit
    allocation (``ncc.sbuf.mod_alloc(base_addr=...)``)."""
    buffer, address = _placed(shape, dtype, buffer, address)
    return _modern.ndarray.__nki_impl__(ctx, shape, dtype, buffer, name, address, **kw)  # type: ignore[no-any-return]


@_nki_op
def empty_like(ctx: _Any, x: _NkiTensor, dtype: _Any = None, buffer: _Any = None, name: str = "",
               **kw: _Any) -> _NkiTensor:  # fmt: skip
    buffer, address = _placed(x.shape, dtype or x.dtype, buffer or x.buffer, None)
    return ctx.allocate(x.shape, dtype or x.dtype, buffer, name, address)  # type: ignore[no-any-return]


def _filled_legacy(name: str) -> _Any:
    modern = getattr(_modern, name).__nki_impl__

    def impl(ctx: _Any, *args: _Any, buffer: _Any = sbuf, **kw: _Any) -> _NkiTensor:
        return modern(ctx, *args, buffer=_legacy_buffer(buffer), **kw)  # type: ignore[no-any-return]

    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = f"``nl.{name}`` with the legacy ``nl.hbm`` (shared HBM)."
    return _nki_op(impl)


zeros, ones, full = (_filled_legacy(n) for n in ("zeros", "ones", "full"))


@_nki_op
def rand(ctx: _Any, shape: _Any, dtype: _Any = float32, buffer: _Any = sbuf, name: str = "", **kw: _Any) -> _NkiTensor:
    """Legacy ``nl.rand(shape, dtype=nl.float32)``: uniform in [0, 1); the legacy API defaulted the dtype to
    float32 (NKI 0.3's ``nisa.rand2``/``nl.rand`` need it)."""
    out: _NkiTensor = _tiles.rand.__nki_impl__(ctx, shape, dtype, _legacy_buffer(buffer), name, **kw)
    return out


@_nki_op
def store(ctx: _Any, dst: _NkiTensor, value: _Any, **kw: _Any) -> None:
    """``nl.store``; a number as ``value`` (legacy: "effectively a memset") fills dst through an SBUF tile."""
    if _tiles._is_number(value) and not isinstance(value, _builtins.bool):
        if not isinstance(dst, _NkiTensor) or dst.on_chip:
            raise _NkiError("nl.store: 'dst' must be an HBM tensor")
        _migration.legacy("nl.store(dst, <number>)", "nisa.memset(dst=<sbuf tile>, value=...) then nisa.dma_copy")
        shape = dst.shape if dst.ndim >= 2 else (1, dst.size)
        tile = ctx.allocate(shape, dst.dtype, sbuf, "", None)
        _isa.memset.__nki_impl__(ctx, tile, float(value) if _tiles._is_float(dst.dtype) else int(value))
        value = tile
    _tiles.store.__nki_impl__(ctx, dst, value, **kw)


@_nki_op
def shared_identity_matrix(ctx: _Any, n: int, dtype: _Any = uint8, **kw: _Any) -> _NkiTensor:
    """Legacy ``nl.shared_identity_matrix``: "the same behavior as ``nl.shared_constant``", i.e. an (n, n) identity
    in shared HBM (kernels ``nl.load`` it); NKI 0.3's version builds it in SBUF."""
    want = _normalize_dtype(dtype)
    return ctx.constant(_np.identity(int(n)).astype(_DTYPES[want]))  # type: ignore[no-any-return]


@_nki_op
def atomic_rmw(ctx: _Any, dst: _NkiTensor, value: _Any, op: _Any, mask: _Any = None, **kw: _Any) -> None:
    """Legacy ``nl.atomic_rmw(dst, value, op)``: ``dst = op(dst, value)`` on HBM by the DMA engine, i.e. the modern
    read-modify-write ``nisa.dma_compute(dst, srcs=[dst, value], reduce_op=nl.add)`` (the DMA computes only add; any
    other op is an error there)."""
    _migration.legacy("nl.atomic_rmw(dst, value, op)", "nisa.dma_compute(dst=dst, srcs=[dst, value], reduce_op=op)")
    modern_kw = {**kw, "mask": mask} if mask is not None else dict(kw)
    _isa.dma_compute.__nki_impl__(ctx, dst, [dst, value], op, **modern_kw)


class _LoopReduction:
    """One ``nl.loop_reduce`` site's running destination and the loop indices it last saw."""

    def __init__(self, tile: _NkiTensor, indices: tuple[int, ...]):
        self.tile, self.indices = tile, indices


@_nki_op
def loop_reduce(ctx: _Any, x: _Any, op: _Any, loop_indices: _Any, mask: _Any = None, dtype: _Any = None,
                **kw: _Any) -> _NkiTensor:  # fmt: skip
    """Legacy ``b = nl.loop_reduce(x, op, loop_indices=[k])``: ``b`` accumulates ``op(x, b)`` over the iterations
    of the loops in ``loop_indices`` (the destination is also op's right-hand input).

    Each call site keeps one destination tile per reduction: the loop indices need their values (the loops
    unroll), and a reduction starts over (a copy of ``x``) whenever the indices do not advance — the first iteration,
    or the next iteration of an enclosing loop that is not reduced. The result is the destination itself."""
    x = _tiles._tile("loop_reduce", "x", x)
    indices = tuple(int(i) for i in (loop_indices if isinstance(loop_indices, (list, tuple)) else [loop_indices]))
    _migration.legacy("nl.loop_reduce", "an accumulator tile updated in the loop: acc = nisa.tensor_tensor(dst=acc, "
                      "data1=x, data2=acc, op=...) after an initial copy")  # fmt: skip
    site = ("loop_reduce", *_where()[:2])
    states = ctx.__dict__.setdefault("_legacy_loop_reduce", {})
    state = states.get(site)
    want = _normalize_dtype(dtype) if dtype is not None else x.dtype
    modern_kw = {**kw, "mask": mask} if mask is not None else dict(kw)
    if state is None or indices <= state.indices or state.tile.shape != x.shape:
        tile = ctx.allocate(x.shape, want, sbuf, "", None)
        _isa.tensor_copy.__nki_impl__(ctx, tile, x, **modern_kw)
        states[site] = _LoopReduction(tile, indices)
        return tile
    _isa.tensor_tensor.__nki_impl__(ctx, state.tile, x, state.tile, op, **modern_kw)
    state.indices = indices
    return state.tile


def _is_legacy_kernel_frame() -> bool:
    """Whether the user's current frame is a legacy kernel: its module imported ``neuronxcc.nki`` (one of the legacy
    modules is among its globals)."""
    frame = _user_frame()
    if frame is None:
        return False
    # Every tile operator asks; scanning the module's globals each time costs O(globals) per operator. The answer is
    # kept per code object, valid while its globals are the same dict of the same size (an import adds a global).
    g = frame.f_globals
    seen = _LEGACY_CODE.get(frame.f_code)
    if seen is not None and seen[0] == id(g) and seen[1] == len(g):
        return seen[2]
    answer = _is_legacy_module(g)
    _LEGACY_CODE[frame.f_code] = (id(g), len(g), answer)  # the id, not the dict: globals hold the code's function
    return answer


_LEGACY_CODE: _weakref.WeakKeyDictionary[_Any, tuple[int, int, bool]] = _weakref.WeakKeyDictionary()


def _is_legacy_module(globals_: dict[str, _Any]) -> bool:
    mine = (_sys.modules[__name__], _legacy_isa)
    return any(v is m or getattr(v, "language", None) is mine[0] for v in globals_.values() for m in mine)


def _return_on_chip(ctx: _Any, kernel: _Any, tile: _NkiTensor) -> _NkiTensor | None:
    """A legacy kernel returning an on-chip tile: the legacy simulator handed the tile's values back to the caller,
    so the tile is stored into a new shared-HBM output returned in its place (one DMA at the end of the kernel)."""
    if not _is_legacy_module(kernel.func.__globals__):
        return None
    _migration.legacy("returning an on-chip tile", "nl.store it into an nl.shared_hbm tensor and return that",
                      where=tile.storage.loc[:2])  # fmt: skip
    out: _NkiTensor = ctx.allocate(tile.shape, tile.dtype, _BUFFERS["shared_hbm"], "", None)
    _tiles.store.__nki_impl__(ctx, out, tile)
    return out


_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide"}


def _legacy_operator(name: str, tile: _NkiTensor, other: _Any) -> _Any:
    """The operators of legacy tiles, in legacy kernels only: ``a + b``, ``a - 2.0``, ``2.0 * a``, ``a / b``, ``-a``
    are the ``nl`` functions (``nl.add`` ...) returning a new tile; ``t += x`` rebinds ``t`` to ``t + x``, except
    ``psum_tile += value``, which accumulates into the PSUM tile in place: the legacy ``psum += nisa.nc_matmul(...)``
    is that matmul accumulating into ``psum_tile`` (``recorders/psum_accumulate.py``); any other value
    is one VectorE ``tensor_tensor`` add, fp32 as the PE array accumulates (a PSUM ``value`` first copied to SBUF,
    since tensor_tensor cannot read two PSUM tiles)."""
    if not _is_legacy_kernel_frame():
        return NotImplemented
    if name == "broadcast_to":  # the tile method runs nl.broadcast_to itself; a legacy kernel learns the new name
        _migration.legacy("the tile method t.broadcast_to(shape)", "nl.broadcast_to(t, shape=shape)")
        return None
    if name == "neg":
        _migration.legacy("-tile", "nl.negative(tile)")
        return _modern.negative(tile)
    in_place = name.startswith("i")
    base = name[1:] if in_place else name
    if name == "iadd" and tile.buffer == "psum" and isinstance(other, _NkiTensor):
        _migration.legacy("psum_tile += nisa.nc_matmul(...)",
                          "nisa.nc_matmul(dst=psum_tile, stationary=..., moving=..., accumulate=True)")  # fmt: skip
        if _accumulate_in_place(_current_context(), tile, other):  # a fresh matmul result: the PE array adds
            return tile
        if other.buffer == "psum":  # nisa.tensor_tensor: "data1 and data2 cannot both reside in PSUM"
            staged = _modern.ndarray(other.shape, dtype=other.dtype, buffer=_modern.sbuf)
            _isa.tensor_copy(staged, other)
            other = staged
        _isa.tensor_tensor(tile, tile, other, "add")
        return tile
    reflected = base.startswith("r") and base[1:] in _BINARY
    func = _BINARY[base[1:] if reflected else base]
    _migration.legacy(f"the tile operator for {func}", f"nl.{func}(x, y)")
    x, y = (other, tile) if reflected else (tile, other)
    return getattr(_modern, func)(x, y)  # the nl token: a traced call of the tile function


_tensor_module.LEGACY_OPERATOR = _legacy_operator
_trace_context.RETURN_ON_CHIP = _return_on_chip
# ===================================================================================================================
# End of the legacy-only differences (helper `legacy`).
# ===================================================================================================================
