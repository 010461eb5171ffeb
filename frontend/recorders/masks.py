"""The ``mask=`` of every instruction (``frontend/grid.py`` has the index grids and predicates a mask is made of).

An instruction's mask cuts its operands to the mask's box before the instruction checks them (``masked``, applied
to every ``nisa`` body by ``recorders/__init__.py``); a condition over several axes predicates the write of an
on-chip dst (``_predicated``: an iota, a compare and ``tensor_copy_predicated``). An ``nl`` function called with
``mask=`` (``with_mask``) hands its mask to the instructions it records.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from nkic.frontend.affine import static_int as _static_int
from nkic.frontend.errors import NkiError
from nkic.frontend.grid import Box, Predicate, as_mask, box
from nkic.frontend.recorders.select import iota, tensor_copy_predicated
from nkic.frontend.recorders.vector import tensor_scalar, tensor_tensor
from nkic.frontend.tensor import NkiTensor
from nkic.target.instructions import INSTRUCTIONS


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
            iota.__nki_impl__(ctx, value, pattern, offset=offset, channel_multiplier=coeffs[0])
            holds = ctx.allocate(dst.shape, "uint8", "sbuf", "", None)
            tensor_scalar.__nki_impl__(ctx, holds, value, "greater_equal", 0.0)
            if pred is not None:
                both = ctx.allocate(dst.shape, "uint8", "sbuf", "", None)
                tensor_tensor.__nki_impl__(ctx, both, pred, holds, "multiply")
                holds = both
            pred = holds
        tensor_copy_predicated.__nki_impl__(ctx, dst, tmp, pred)
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
