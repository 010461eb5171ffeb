"""The activation engine (ScalarE): ``activation``, ``activation_reduce``, ``activate2``, ``exponential``."""

from __future__ import annotations

from typing import Any

from nkic.frontend.context import nki_op
from nkic.frontend.errors import NkiError
from nkic.frontend.ops import act_func, alu_op
from nkic.frontend.recorders.enums import _REDUCE_CMD
from nkic.frontend.recorders.record import _api_rules, _elementwise, _enum, _mask, _record, _scalar, _tensor
from nkic.frontend.tensor import NkiTensor
from nkic.target.instructions import activate2_problem


# -- activation ---------------------------------------------------------------------------------------------
@nki_op
def activation(
    ctx: Any,
    dst: NkiTensor,
    op: Any,
    data: NkiTensor,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: Any = None,
    **kw: Any,
) -> None:
    """``dst = op(data · scale + bias)`` on ScalarE, optionally row-reducing into ``reduce_res``."""
    _mask(kw)
    _activation(ctx, dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd or "idle")


@nki_op
def activation_reduce(
    ctx: Any,
    dst: NkiTensor,
    op: Any,
    data: NkiTensor,
    reduce_op: Any,
    reduce_res: NkiTensor,
    bias: Any = None,
    scale: Any = 1.0,
    **kw: Any,
) -> None:
    """``activation`` with ``reduce_cmd=reset_reduce`` and the row reduction written to ``reduce_res``."""
    _mask(kw)
    _activation(ctx, dst, op, data, bias, scale, reduce_op, reduce_res, "reset_reduce")


def _activation(
    ctx: Any, dst: Any, op: Any, data: Any, bias: Any, scale: Any, reduce_op: Any, reduce_res: Any, cmd: Any
) -> None:
    name = "activation"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _elementwise(name, {"dst": dst, "data": data})
    attrs: dict[str, Any] = {"func": act_func(op)}
    tb = ts = tr = None
    if bias is not None:
        tb, attrs["bias"] = _scalar(name, "bias", bias, dst)
    ts, attrs["scale"] = _scalar(name, "scale", scale, dst)
    if reduce_res is not None:
        tr, _ = _scalar(name, "reduce_res", _tensor(name, "reduce_res", reduce_res), dst)
        if reduce_op is None:
            raise NkiError(f"{name}: reduce_res needs a reduce_op", "pass reduce_op=nl.add")
    attrs["reduce_op"] = alu_op(reduce_op, "reduce_op") if reduce_op is not None else None
    attrs["reduce_cmd"] = _enum(cmd, _REDUCE_CMD, "reduce_cmd")
    _record(ctx, name, {"dst": dst, "data": data, "bias": tb, "scale": ts, "reduce_res": tr}, attrs)


@nki_op
def activate2(
    ctx: Any,
    dst: NkiTensor,
    op: Any,
    data: NkiTensor,
    imm0: Any,
    imm1: Any,
    op0: Any,
    op1: Any,
    relu_param: Any = 0.0,
    reverse0: bool = False,
    reverse1: bool = False,
    reduce_op: Any = None,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: Any = None,
    **kw: Any,
) -> None:
    """``dst = op((data op0 imm0) op1 imm1, relu_param)`` on ScalarE (gen4+), optionally reducing the activated
    values with ``reduce_op`` into the ScalarE registers per ``reduce_cmd`` (``reduce_res`` receives them).

    ``imm0``/``imm1`` of a bypassed stage are ignored (not recorded). The reduction reads the fp32 activation
    results before their cast to dst's dtype, as ``activation`` does."""
    _mask(kw)
    name = "activate2"
    dst, data = _tensor(name, "dst", dst), _tensor(name, "data", data)
    _elementwise(name, {"dst": dst, "data": data})
    attrs: dict[str, Any] = {"func": act_func(op), "op0": alu_op(op0, "op0"), "op1": alu_op(op1, "op1"),
                             "reverse0": bool(reverse0), "reverse1": bool(reverse1),
                             "reduce_op": alu_op(reduce_op, "reduce_op") if reduce_op is not None else None,
                             "reduce_cmd": _enum(reduce_cmd if reduce_cmd is not None else "idle", _REDUCE_CMD,
                                                 "reduce_cmd")}  # fmt: skip
    _api_rules(ctx, name, attrs)  # the documented (op0, op1) and reverse rules, citing their sentences
    problem = activate2_problem(attrs.get)
    if problem is not None:
        raise NkiError(problem)
    tiles: dict[str, NkiTensor | None] = {"dst": dst, "data": data}
    for k, value in ((0, imm0), (1, imm1)):
        tile, number = _scalar(name, f"imm{k}", value, dst) if attrs[f"op{k}"] != "bypass" else (None, None)
        tiles[f"imm{k}"], attrs[f"imm{k}"] = tile, number
    tiles["relu_param"], relu = _scalar(name, "relu_param", relu_param, dst)
    attrs["relu_param"] = relu if relu else None
    tiles["reduce_res"] = None
    if reduce_res is not None:
        tiles["reduce_res"], _ = _scalar(name, "reduce_res", _tensor(name, "reduce_res", reduce_res), dst)
    _record(ctx, name, tiles, attrs, "scalar")


@nki_op
def exponential(
    ctx: Any,
    dst: NkiTensor,
    src: NkiTensor,
    max_value: Any = 0.0,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: Any = None,
    reduce_init: Any = 0.0,
    **kw: Any,
) -> None:
    """``dst = exp(src - max_value)`` on VectorE (gen4+); the row sums accumulate in its registers per
    ``reduce_cmd`` and ``reduce_res`` receives them."""
    _mask(kw)
    name = "exponential"
    dst, src = _tensor(name, "dst", dst), _tensor(name, "src", src)
    _elementwise(name, {"dst": dst, "src": src})
    t_max, v_max = _scalar(name, "max_value", max_value, dst)
    cmd = _enum(reduce_cmd if reduce_cmd is not None else "idle", _REDUCE_CMD, "reduce_cmd")
    t_init, v_init = _scalar(name, "reduce_init", reduce_init, dst)
    _api_rules(ctx, name, {"ranks": {"src": src.ndim, "dst": dst.ndim}})
    t_res = None
    if reduce_res is not None:
        t_res, _ = _scalar(name, "reduce_res", _tensor(name, "reduce_res", reduce_res), dst)
    attrs = {"max_value": v_max if v_max else None, "reduce_cmd": cmd, "reduce_init": v_init if v_init else None}
    operands = {"dst": dst, "src": src, "max_value": t_max, "reduce_res": t_res, "reduce_init": t_init}
    _record(ctx, name, operands, attrs, "vector")
