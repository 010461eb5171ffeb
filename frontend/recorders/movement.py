"""Data movement: ``dma_copy``, ``dma_transpose``, ``dma_compute`` (DMA queues) and ``tensor_copy`` (an engine copy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nkic.frontend.context import nki_op
from nkic.frontend.errors import NkiError
from nkic.frontend.ops import alu_op
from nkic.frontend.recorders.enums import _DGE, _ENGINE, _OOB_MODE, dge_mode, oob_mode
from nkic.frontend.recorders.record import _elementwise, _enum, _mask, _record, _rules, _tensor
from nkic.frontend.tensor import NkiTensor
from nkic.target.instructions import DMA_COMPUTE_MAX_SRCS, DMA_COMPUTE_RMW_SRCS


# -- data movement ------------------------------------------------------------------------------------------
@nki_op
def dma_copy(
    ctx: Any,
    dst: NkiTensor,
    src: NkiTensor,
    priority: Any = None,
    oob_mode: Any = None,
    dge_mode: Any = None,
    engine: Any = None,
    name: Any = None,
    **kw: Any,
) -> None:
    """``dst = src`` between HBM and SBUF (element counts equal, shapes may differ, dtype cast through fp32).

    Either side may be a dynamic ``.ap(scalar_offset=, vector_offset=)`` view (gather / scatter); ``oob_mode=skip``
    leaves out the rows whose run-time address falls outside their tensor instead of failing. ``dge_mode`` and the
    HWDGE ``engine`` are checked as NKI documents them; nkic models one DMA path, so they do not change the
    program."""
    _mask(kw)
    dst, src = _tensor("dma_copy", "dst", dst), _tensor("dma_copy", "src", src)
    for role, t in (("dst", dst), ("src", src)):
        if t.buffer == "psum":
            raise NkiError(f"dma_copy: '{role}' cannot be in PSUM", "copy PSUM to SBUF with nisa.tensor_copy first")
    skip = _dma_modes(ctx, "dma_copy", priority, oob_mode, dge_mode, engine)
    _rules(ctx, "dma_copy", {"dst": dst, "src": src}, {
        "priority": priority, "dge_mode": _enum(dge_mode if dge_mode is not None else "unknown", _DGE, "dge_mode"),
        "hwdge_engine": _enum(engine, _ENGINE, "engine")})  # fmt: skip
    _record(ctx, "dma_copy", {"dst": dst, "src": src}, {"oob_skip": skip or None})


def _dma_modes(ctx: Any, op: str, priority: Any, oob: Any, dge: Any, eng: Any = None) -> bool:
    """Check a DMA's ``priority`` / ``oob_mode`` / ``dge_mode`` / ``engine`` values (which generation and mode they
    need are rules: ``target/rules/pe.py``); True for ``oob_mode.skip``."""
    _enum(dge if dge is not None else "unknown", dge_mode, "dge_mode")
    hw = _enum(eng, _ENGINE, "engine")
    if hw not in ("unknown", "sync", "scalar"):
        raise NkiError(f"{op}: the HWDGE engine must be nisa.engine.sync or nisa.engine.scalar, got {hw}")
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 3:
            raise NkiError(f"{op}: priority must be an int 0..3, got {priority!r}")
    return _enum(oob if oob is not None else "error", oob_mode, "oob_mode") == "skip"


@nki_op
def dma_transpose(
    ctx: Any,
    dst: NkiTensor,
    src: NkiTensor,
    axes: Sequence[int] | None = None,
    priority: Any = None,
    dge_mode: Any = None,
    oob_mode: Any = None,
    name: Any = None,
    **kw: Any,
) -> None:
    """``dst = src.transpose(axes)`` by DMA; dst in SBUF; src may be a dynamic (gather) view."""
    _mask(kw)
    skip = _dma_modes(ctx, "dma_transpose", priority, oob_mode, dge_mode)
    dst, src = _tensor("dma_transpose", "dst", dst), _tensor("dma_transpose", "src", src)
    vector = src.dyn.index if src.dyn is not None and src.dyn.kind == "vector" else None
    _rules(ctx, "dma_transpose", {"dst": dst, "src": src, "src_offset": vector}, {
        "priority": priority, "dge_mode": _enum(dge_mode if dge_mode is not None else "unknown", _DGE, "dge_mode"),
        "src_shape": tuple(src.shape), "src_indirect": src.dyn is not None, "oob_skip": skip})  # fmt: skip
    if src.ndim not in _DMA_TRANSPOSE_AXES:
        raise NkiError(f"dma_transpose: the source must be 2-D, 3-D or 4-D, got shape {src.shape}")
    canonical = _DMA_TRANSPOSE_AXES[src.ndim]
    perm = tuple(int(a) for a in axes) if axes is not None else canonical
    if perm != canonical:
        raise NkiError(
            f"dma_transpose: axes {perm} are not supported for a rank-{src.ndim} source",
            "the supported permutations are (1, 0), (2, 1, 0) and (3, 1, 2, 0)",
        )
    expected = tuple(src.shape[a] for a in perm)
    if dst.shape != expected:
        raise NkiError(f"dma_transpose: dst shape {dst.shape} must equal the permuted source shape {expected}")
    # Every supported permutation swaps the outermost and innermost dims and keeps the middle ones, which is what
    # penguin.dma_transpose means for operands of any rank; no axes attribute is needed.
    _record(ctx, "dma_transpose", {"dst": dst, "src": src}, {"oob_skip": skip or None})


# The NKI permutations by source rank (dst axis i = src axis axes[i]).
_DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


@nki_op
def tensor_copy(ctx: Any, dst: NkiTensor, src: NkiTensor, engine: Any = None, **kw: Any) -> None:
    """On-chip copy with a dtype cast."""
    _mask(kw)
    dst, src = _tensor("tensor_copy", "dst", dst), _tensor("tensor_copy", "src", src)
    _elementwise("tensor_copy", {"dst": dst, "src": src})
    eng = _enum(engine, _ENGINE, "engine")
    _record(ctx, "tensor_copy", {"dst": dst, "src": src}, {"engine": eng}, eng)


@nki_op
def dma_compute(
    ctx: Any,
    dst: NkiTensor,
    srcs: Any,
    reduce_op: Any,
    scales: Any = None,
    unique_indices: bool = True,
    oob_mode: Any = None,
    **kw: Any,
) -> None:
    """``dst = reduce_op(srcs[0] * scales[0], srcs[1] * scales[1], ...)`` by a DMA engine, in fp32 with one cast
    to dst's dtype; only ``nl.add`` and scales of 1.0, as in NKI. Operands in HBM or SBUF with equal element
    counts; up to 16 sources, as in NKI. An instruction record has room for 5 (``DMA_COMPUTE_MAX_SRCS``): more are
    summed by a chain of DMA_COMPUTEs through a float32 tensor of dst's shape (the first adds 5 sources, each next
    one the running sum and 4 more, the last writes dst), the same left-to-right fp32 sum with one cast at the end.

    With a dynamic operand (``.ap(vector_offset=)``, or a scalar / register offset) it is NKI's read-modify-write:
    exactly two sources and ``unique_indices=True``; a gather RMW (``dst`` static, one source indirect, the other
    source the same view as ``dst``) or a scatter RMW (``dst`` indirect and one source the same dynamic view as
    ``dst``, the other the data). ``oob_mode=skip`` leaves out-of-bounds rows untouched, as for ``dma_copy``."""
    _mask(kw)
    name = "dma_compute"
    dst = _tensor(name, "dst", dst)
    if isinstance(srcs, NkiTensor) or not isinstance(srcs, (list, tuple)):
        raise NkiError(f"{name}: srcs must be a list of tensors, got {type(srcs).__name__}")
    if not srcs:
        raise NkiError(f"{name}: srcs is empty")
    sources = {f"src{i}": _tensor(name, f"srcs[{i}]", v) for i, v in enumerate(srcs)}
    skip = _enum(oob_mode if oob_mode is not None else "error", _OOB_MODE, "oob_mode") == "skip"
    if not isinstance(unique_indices, bool):
        raise NkiError(f"{name}: unique_indices must be True or False, got {unique_indices!r}")
    for role, t in (("dst", dst), *((f"srcs[{i}]", v) for i, v in enumerate(sources.values()))):
        if t.buffer == "psum":
            raise NkiError(f"{name}: '{role}' cannot be in PSUM", "copy PSUM to SBUF with nisa.tensor_copy first")
    dynamic = any(t.dyn is not None for t in (dst, *sources.values()))
    # reduce_op, scales, element counts, unique indices, at most 16 sources (target/rules/pe.py)
    _rules(ctx, name, {"dst": dst, **sources}, {
        "reduce_op": alu_op(reduce_op, "reduce_op"), "scales": None if scales is None else list(scales),
        "n_srcs": len(srcs), "unique_indices": unique_indices, "dynamic": dynamic,
        "names": {f"src{i}": f"srcs[{i}]" for i in range(len(srcs))}})  # fmt: skip
    if dynamic:
        _dma_compute_rmw(name, dst, list(sources.values()), unique_indices)
    attrs = {"reduce_op": "add", "oob_skip": skip or None}
    rest = list(sources.values())
    if len(rest) > DMA_COMPUTE_MAX_SRCS:  # a chain through a float32 running sum (see the docstring)
        acc = ctx.allocate(tuple(dst.shape), "float32", "sbuf" if dst.on_chip else "private_hbm", "", None)
        head, rest = rest[:DMA_COMPUTE_MAX_SRCS], rest[DMA_COMPUTE_MAX_SRCS:]
        _record(ctx, name, {"dst": acc, **{f"src{i}": t for i, t in enumerate(head)}}, attrs)
        while len(rest) > DMA_COMPUTE_MAX_SRCS - 1:
            head, rest = rest[: DMA_COMPUTE_MAX_SRCS - 1], rest[DMA_COMPUTE_MAX_SRCS - 1 :]
            _record(ctx, name, {"dst": acc, **{f"src{i}": t for i, t in enumerate((acc, *head))}}, attrs)
        rest = [acc, *rest]
    _record(ctx, name, {"dst": dst, **{f"src{i}": t for i, t in enumerate(rest)}}, attrs)


def _same_view(a: NkiTensor, b: NkiTensor) -> bool:
    """The same elements of the same tensor, by the same (static or dynamic) addressing."""
    same_dyn = a.dyn is b.dyn or (a.dyn is not None and b.dyn is not None and a.dyn.kind == b.dyn.kind
                                  and a.dyn.scale == b.dyn.scale and a.dyn.register is b.dyn.register
                                  and a.dyn.index is not None and b.dyn.index is not None
                                  and _same_view(a.dyn.index, b.dyn.index))  # fmt: skip
    return (a.storage is b.storage and a.pairs == b.pairs and a.dtype == b.dtype and same_dyn
            and str(a.offset) == str(b.offset))  # fmt: skip


def _dma_compute_rmw(name: str, dst: NkiTensor, srcs: list[NkiTensor], unique: bool) -> None:
    """NKI's read-modify-write forms of dma_compute (a dynamic operand): exactly two sources, one of them ``dst``
    itself (gather RMW: ``dst`` static; scatter RMW: ``dst`` dynamic, read by the same dynamic view)."""
    if len(srcs) != DMA_COMPUTE_RMW_SRCS:
        raise NkiError(f"{name}: with a dynamic (vector_offset / scalar_offset) operand it is a read-modify-write "
                       f"and takes exactly {DMA_COMPUTE_RMW_SRCS} sources, got {len(srcs)}")  # fmt: skip
    if not unique:
        raise NkiError(f"{name}: unique_indices=False is not supported with a dynamic operand",
                       "NKI's read-modify-write requires unique indices")  # fmt: skip
    if not any(_same_view(s, dst) for s in srcs):
        form = "scatter (dst dynamic)" if dst.dyn is not None else "gather (dst static)"
        raise NkiError(f"{name}: a read-modify-write {form} needs one source that is dst itself (the same view)",
                       "pass srcs=[<dynamic source>, dst] (gather) or srcs=[dst, <data>] (scatter)")  # fmt: skip
    other = [s for s in srcs if not _same_view(s, dst)] or srcs[1:]
    if dst.dyn is not None and other[0].dyn is not None:
        raise NkiError(f"{name}: a scatter read-modify-write reads its data (the other source) statically")
