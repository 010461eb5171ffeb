"""Element-wise arithmetic, reductions and scans of the vector engines (VectorE, GpSimd): ``tensor_tensor``,
``tensor_scalar``, ``tensor_reduce``, ``bn_stats`` ..."""

from __future__ import annotations

from typing import Any

from nkic.frontend.affine import is_symbolic
from nkic.frontend.context import nki_op
from nkic.frontend.errors import NkiError
from nkic.frontend.ops import alu_op
from nkic.frontend.recorders.enums import _ENGINE, _REDUCE_CMD
from nkic.frontend.recorders.record import (
    _api_rules,
    _elementwise,
    _enum,
    _mask,
    _on_chip,
    _partitions_agree,
    _record,
    _rules,
    _scalar,
    _scalar_value,
    _tensor,
)
from nkic.frontend.tensor import NkiTensor


# -- element-wise arithmetic --------------------------------------------------------------------------------
@nki_op
def tensor_tensor(
    ctx: Any, dst: NkiTensor, data1: NkiTensor, data2: NkiTensor, op: Any, engine: Any = None, **kw: Any
) -> None:
    """``dst = data1 op data2`` element-wise."""
    _mask(kw)
    name = "tensor_tensor"
    t = {role: _tensor(name, role, v) for role, v in (("dst", dst), ("data1", data1), ("data2", data2))}
    _rules(ctx, name, t, {})  # the documented shape rules (target/rules/vector.py); memories: the declaration's
    eng = _enum(engine, _ENGINE, "engine")
    _record(ctx, name, t, {"op": alu_op(op), "engine": eng}, eng)  # type: ignore[arg-type]


@nki_op
def tensor_scalar(
    ctx: Any,
    dst: NkiTensor,
    data: NkiTensor,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    engine: Any = None,
    **kw: Any,
) -> None:
    """``dst = (data op0 operand0) op1 operand1``; operands are immediates or (P, 1) tiles."""
    _mask(kw)
    name = "tensor_scalar"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _elementwise(name, {"dst": dst, "data": data})
    # op0=None is the bypass stage (a copy, or op1 alone), like op1=None; a bypass takes no operand, so operand0
    # may be None then (nki-library passes op0=None, operand0=None for a clamp that is switched off)
    first = alu_op("bypass" if op0 is None else op0, "op0")
    t0, v0 = (None, 0.0) if first == "bypass" and operand0 is None else _scalar(name, "operand0", operand0, dst)
    attrs: dict[str, Any] = {"op0": first, "operand0": v0, "reverse0": bool(reverse0)}
    t1 = v1 = None
    if op1 is None and operand1 is not None:
        _api_rules(ctx, name, {"operand1_without_op1": True})
    if op1 is not None:
        attrs["op1"] = alu_op(op1, "op1")
        t1, v1 = _scalar(name, "operand1", operand1, dst)
    attrs.update({"operand1": v1, "reverse1": bool(reverse1), "engine": _enum(engine, _ENGINE, "engine")})
    _record(ctx, name, {"dst": dst, "data": data, "operand0": t0, "operand1": t1}, attrs, attrs["engine"])


@nki_op
def scalar_tensor_tensor(
    ctx: Any,
    dst: NkiTensor,
    data: NkiTensor,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: NkiTensor,
    reverse0: bool = False,
    reverse1: bool = False,
    **kw: Any,
) -> None:
    """``dst = (data op0 operand0) op1 operand1``; operand0 scalar or (P, 1), operand1 a full tile."""
    _mask(kw)
    name = "scalar_tensor_tensor"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    other = _tensor(name, "operand1", operand1)
    t0, v0 = _scalar_value(name, "operand0", operand0)
    # the documented shape and memory rules (target/rules/vector.py), operand0's (P, 1) shape among them
    _rules(ctx, name, {"dst": dst, "data": data, "operand1": other, "operand0": t0}, {})
    attrs = {"op0": alu_op(op0, "op0"), "operand0": v0, "op1": alu_op(op1, "op1"), "reverse0": bool(reverse0),
             "reverse1": bool(reverse1)}  # fmt: skip
    _record(ctx, name, {"dst": dst, "data": data, "operand0": t0, "operand1": other}, attrs)


@nki_op
def reciprocal(ctx: Any, dst: NkiTensor, data: NkiTensor, **kw: Any) -> None:
    """``dst = 1 / data`` on VectorE."""
    _mask(kw)
    t = {"dst": _tensor("reciprocal", "dst", dst), "data": _tensor("reciprocal", "data", data)}
    _elementwise("reciprocal", t)
    _record(ctx, "reciprocal", t, {})  # type: ignore[arg-type]


# -- reductions ---------------------------------------------------------------------------------------------
def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    raw = [axis] if isinstance(axis, int) or is_symbolic(axis) else list(axis)
    axes = []
    for a in raw:
        a = int(a)
        if not -ndim <= a < ndim:
            raise NkiError(f"tensor_reduce: axis {a} is out of range for a rank-{ndim} tensor")
        axes.append(a % ndim)
    if not axes:
        raise NkiError("tensor_reduce: no axis given")
    return tuple(sorted(set(axes)))


@nki_op
def tensor_reduce(
    ctx: Any,
    dst: NkiTensor,
    op: Any,
    data: NkiTensor,
    axis: Any,
    negate: bool = False,
    keepdims: bool = False,
    **kw: Any,
) -> None:
    """Reduce the given trailing free axes of ``data`` (``negate`` multiplies the result by -1)."""
    _mask(kw)
    name = "tensor_reduce"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _on_chip(name, "dst", dst)
    _on_chip(name, "data", data)
    axes = _axes(axis, data.ndim)
    # the documented rules (target/rules/vector.py): partitions, free axes only, trailing ones, dst's size
    _rules(ctx, name, {"dst": dst, "data": data}, {"axes": axes, "shape": data.shape})
    attrs = {"op": alu_op(op), "axes": axes, "negate": bool(negate), "keepdims": bool(keepdims)}
    _record(ctx, name, {"dst": dst, "data": data}, attrs)


@nki_op
def tensor_scalar_reduce(
    ctx: Any,
    dst: NkiTensor,
    data: NkiTensor,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: NkiTensor | None = None,
    reverse0: bool = False,
    reduce_cmd: Any = None,
    reduce_init: Any = None,
    reduce_res_negate: bool = False,
    **kw: Any,
) -> None:
    """``dst = data op0 operand0`` and a row reduction of the result into ``reduce_res``."""
    _mask(kw)
    name = "tensor_scalar_reduce"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _elementwise(name, {"dst": dst, "data": data})
    cmd = _enum(reduce_cmd if reduce_cmd is not None else "reset_reduce", _REDUCE_CMD, "reduce_cmd")
    res = _tensor(name, "reduce_res", reduce_res)
    # the documented rules first: reduce_init with its reduce_cmd, reduce_res's memory and (P, 1) shape
    facts = {"reduce_cmd": cmd, "reduce_init_given": reduce_init is not None}
    _rules(ctx, name, {"data": data, "reduce_res": res}, facts)
    if cmd != "reset_reduce":
        raise NkiError(f"{name}: reduce_cmd={cmd} is not implemented in nkic (only reset_reduce)",
                       "reset the accumulator per call, or accumulate the per-call results with nisa.tensor_tensor")
    t0, v0 = _scalar(name, "operand0", operand0, dst)
    attrs = {"op0": alu_op(op0, "op0"), "operand0": v0, "reduce_op": alu_op(reduce_op, "reduce_op"),
             "reverse0": bool(reverse0), "reduce_res_negate": bool(reduce_res_negate)}  # fmt: skip
    _record(ctx, name, {"dst": dst, "data": data, "operand0": t0, "reduce_res": res}, attrs)


@nki_op
def tensor_tensor_scan(
    ctx: Any,
    dst: NkiTensor,
    data0: NkiTensor,
    data1: NkiTensor,
    initial: Any,
    op0: Any,
    op1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    **kw: Any,
) -> None:
    """``dst[:, i] = op1(op0(data0[:, i], dst[:, i-1]), data1[:, i])`` along the free dim, ``initial`` before the
    first element (a number or a (P, 1) tile); fp32 math on VectorE."""
    _mask(kw)
    name = "tensor_tensor_scan"
    t = {role: _tensor(name, role, v) for role, v in (("dst", dst), ("data0", data0), ("data1", data1))}
    _rules(ctx, name, t, {})
    _elementwise(name, t)
    t_init, v_init = _scalar(name, "initial", initial, t["dst"])
    attrs = {"op0": alu_op(op0, "op0"), "op1": alu_op(op1, "op1"), "initial": v_init, "reverse0": bool(reverse0),
             "reverse1": bool(reverse1)}  # fmt: skip
    _record(ctx, name, {**t, "initial": t_init}, attrs, "vector")


@nki_op
def bn_stats(ctx: Any, dst: NkiTensor, data: NkiTensor, **kw: Any) -> None:
    """Per partition: ``(count, mean, variance * count)`` of the even elements of ``data``, then of the odd ones."""
    _mask(kw)
    dst, data = _tensor("bn_stats", "dst", dst), _tensor("bn_stats", "data", data)
    _on_chip("bn_stats", "dst", dst)
    _on_chip("bn_stats", "data", data)
    _partitions_agree("bn_stats", {"dst": dst, "data": data})
    _record(ctx, "bn_stats", {"dst": dst, "data": data}, {})


@nki_op
def bn_aggr(ctx: Any, dst: NkiTensor, data: NkiTensor, **kw: Any) -> None:
    """Mean and variance per partition from one or more ``bn_stats`` outputs laid side by side in ``data``."""
    _mask(kw)
    dst, data = _tensor("bn_aggr", "dst", dst), _tensor("bn_aggr", "data", data)
    _on_chip("bn_aggr", "dst", dst)
    _on_chip("bn_aggr", "data", data)
    _partitions_agree("bn_aggr", {"dst": dst, "data": data})
    _record(ctx, "bn_aggr", {"dst": dst, "data": data}, {})


@nki_op
def tensor_scalar_cumulative(
    ctx: Any,
    dst: NkiTensor,
    src: NkiTensor,
    op0: Any,
    op1: Any,
    imm0: Any,
    imm1: Any = None,
    reduce_cmd: Any = None,
    **kw: Any,
) -> None:
    """A running ``op1`` over ``op0(src, imm0)`` along the free dim, ``dst[i]`` the running value; the register
    starts at op1's identity (``reset_reduce``), at ``imm1`` (``load_reduce``) or where it was (``reduce``)."""
    _mask(kw)
    name = "tensor_scalar_cumulative"
    dst, src = _tensor(name, "dst", dst), _tensor(name, "src", src)
    _elementwise(name, {"dst": dst, "src": src})
    ops = {"op0": alu_op(op0, "op0"), "op1": alu_op(op1, "op1")}
    cmd = _enum(reduce_cmd if reduce_cmd is not None else "reset_reduce", _REDUCE_CMD, "reduce_cmd")
    t0, v0 = _scalar(name, "imm0", imm0, dst)
    t1 = v1 = None
    if cmd == "load_reduce":
        if imm1 is None:
            raise NkiError(f"{name}: reduce_cmd=load_reduce needs imm1, the starting value")
        t1, v1 = _scalar(name, "imm1", imm1, dst)
    attrs = {**ops, "imm0": v0, "imm1": v1, "reduce_cmd": cmd}
    _record(ctx, name, {"dst": dst, "src": src, "imm0": t0, "imm1": t1}, attrs, "vector")


_PARTITION_REDUCE_OPS = ("add", "average", "maximum", "minimum", "bitwise_or", "bitwise_and")


@nki_op
def tensor_partition_reduce(ctx: Any, dst: NkiTensor, op: Any, data: NkiTensor, **kw: Any) -> None:
    """``dst[0, ...] = op``-reduction of ``data`` across its partitions, on GpSimd (no PSUM operands)."""
    _mask(kw)
    name = "tensor_partition_reduce"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _on_chip(name, "dst", dst)
    _on_chip(name, "data", data)
    reduce = alu_op(op)
    if reduce not in _PARTITION_REDUCE_OPS:
        raise NkiError(f"{name}: op must be one of {', '.join(_PARTITION_REDUCE_OPS)}, got {reduce}")
    _record(ctx, name, {"dst": dst, "data": data}, {"op": reduce}, "gpsimd")
