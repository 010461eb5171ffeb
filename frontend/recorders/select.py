"""Fills and predicates: ``memset``, ``iota``, ``affine_select``, ``range_select``, ``tensor_copy_predicated``,
``select_reduce``."""

from __future__ import annotations

from typing import Any

from nkic.frontend.context import nki_op
from nkic.frontend.errors import NkiError
from nkic.frontend.ops import alu_op
from nkic.frontend.recorders.enums import _ENGINE, _REDUCE_CMD
from nkic.frontend.recorders.record import (
    _elementwise,
    _enum,
    _in_sbuf_not_psum,
    _mask,
    _on_chip,
    _record,
    _rules,
    _scalar,
    _tensor,
)
from nkic.frontend.tensor import NkiTensor


# -- fills and predicates -----------------------------------------------------------------------------------
@nki_op
def memset(ctx: Any, dst: NkiTensor, value: Any, engine: Any = None, **kw: Any) -> None:
    """Fill ``dst`` with ``value``."""
    _mask(kw)
    dst = _tensor("memset", "dst", dst)
    _on_chip("memset", "dst", dst)
    if not isinstance(value, (int, float)):
        raise NkiError(f"memset: value must be a number, got {type(value).__name__}")
    is_float = dst.dtype.startswith(("float", "bfloat", "tfloat"))
    if not is_float and float(value) != int(value):
        raise NkiError(f"memset: value {value} does not fit the integer dtype {dst.dtype}")
    eng = _enum(engine, _ENGINE, "engine")
    _record(ctx, "memset", {"dst": dst}, {"value": float(value) if is_float else int(value), "engine": eng}, eng)


def _pattern(op: str, pattern: Any) -> tuple[tuple[int, int], ...]:
    try:
        pairs = tuple((int(s), int(n)) for s, n in pattern)
    except (TypeError, ValueError):
        raise NkiError(f"{op}: pattern must be a list of [step, num] pairs, got {pattern!r}") from None
    if not pairs or any(n <= 0 for _, n in pairs):  # at most 4 pairs: target/rules/vector.py
        raise NkiError(f"{op}: pattern {[list(p) for p in pairs]} needs pairs with positive sizes")
    return pairs


@nki_op
def iota(ctx: Any, dst: NkiTensor, pattern: Any, offset: Any = 0, channel_multiplier: Any = 0, **kw: Any) -> None:
    """``dst[p, i…] = offset + p·channel_multiplier + Σ step·i``."""
    _mask(kw)
    dst = _tensor("iota", "dst", dst)
    _rules(ctx, "iota", {"dst": dst}, {})  # dst in SBUF, its size (target/rules/vector.py)
    pairs = _pattern("iota", pattern)
    attrs = {"pattern": pairs, "offset": int(offset), "channel_multiplier": int(channel_multiplier)}
    _record(ctx, "iota", {"dst": dst}, attrs)


@nki_op
def affine_select(
    ctx: Any,
    dst: NkiTensor,
    pattern: Any,
    channel_multiplier: Any,
    on_true_tile: NkiTensor,
    on_false_value: Any,
    cmp_op: Any = "equal",
    offset: Any = 0,
    **kw: Any,
) -> None:
    """``dst = on_true if cmp_op(offset + p·channel_multiplier + Σ step·i, 0) else on_false_value``."""
    _mask(kw)
    name = "affine_select"
    dst, on_true = _tensor(name, "dst", dst), _tensor(name, "on_true_tile", on_true_tile)
    for role, t in (("dst", dst), ("on_true_tile", on_true)):
        if str(t.buffer) == "psum":  # the common mistake (matmul scores): its own message, with the fix
            _in_sbuf_not_psum(name, role, t)
    _rules(ctx, name, {"dst": dst, "on_true": on_true}, {})  # SBUF tiles, sizes (target/rules/vector.py)
    _elementwise(name, {"dst": dst, "on_true_tile": on_true})
    pairs = _pattern(name, pattern)
    attrs = {"pattern": pairs, "channel_multiplier": int(channel_multiplier), "cmp_op": alu_op(cmp_op, "cmp_op"),
             "on_false_value": float(on_false_value), "offset": int(offset)}  # fmt: skip
    _record(ctx, name, {"dst": dst, "on_true": on_true}, attrs)


@nki_op
def range_select(
    ctx: Any,
    dst: NkiTensor,
    on_true_tile: NkiTensor,
    comp_op0: Any,
    comp_op1: Any,
    bound0: NkiTensor,
    bound1: NkiTensor,
    reduce_cmd: Any = None,
    reduce_res: NkiTensor | None = None,
    reduce_op: Any = None,
    range_start: Any = 0,
    on_false_value: Any = -3.4028234663852886e38,
    **kw: Any,
) -> None:
    """``dst = on_true_tile`` where both ``comp_op(range_start + free index, bound)`` hold, else
    ``on_false_value``; the row reduction with ``reduce_op`` (maximum) accumulates per ``reduce_cmd``."""
    _mask(kw)
    name = "range_select"
    dst, on_true = _tensor(name, "dst", dst), _tensor(name, "on_true_tile", on_true_tile)
    _elementwise(name, {"dst": dst, "on_true_tile": on_true})
    ops = {k: alu_op(v, k) for k, v in (("comp_op0", comp_op0), ("comp_op1", comp_op1))}
    bounds = {k: _tensor(name, k, v) for k, v in (("bound0", bound0), ("bound1", bound1))}
    _rules(ctx, name, {"on_true": on_true, **bounds}, {})  # bounds: (P, 1) tiles on on_true's partitions
    if reduce_res is not None:
        _scalar(name, "reduce_res", _tensor(name, "reduce_res", reduce_res), dst)
    reduce = alu_op(reduce_op if reduce_op is not None else "maximum", "reduce_op")
    attrs = {**ops, "on_false_value": float(on_false_value), "range_start": int(range_start), "reduce_op": reduce,
             "reduce_cmd": _enum(reduce_cmd if reduce_cmd is not None else "reset_reduce", _REDUCE_CMD, "reduce_cmd")}
    operands = {"dst": dst, "on_true": on_true, **bounds, "reduce_res": reduce_res}
    _record(ctx, name, operands, attrs, "vector")  # type: ignore[arg-type]


@nki_op
def tensor_copy_predicated(
    ctx: Any, dst: NkiTensor, src: Any, predicate: NkiTensor, reverse_pred: bool = False, **kw: Any
) -> None:
    """``dst = src`` where ``predicate`` is non-zero (zero with ``reverse_pred``); elsewhere dst is unchanged."""
    _mask(kw)
    name = "tensor_copy_predicated"
    dst, pred = _tensor(name, "dst", dst), _tensor(name, "predicate", predicate)
    tensors = {"dst": dst, "predicate": pred}
    value = None
    if isinstance(src, NkiTensor):
        tensors["src"] = src
        if src.buffer == "psum" and pred.buffer == "psum":
            raise NkiError(f"{name}: src and predicate cannot both be in PSUM")
    elif isinstance(src, (int, float)) and not isinstance(src, bool):
        value = float(src)
    else:
        raise NkiError(f"{name}: src must be a tile or a number, got {type(src).__name__}")
    _rules(ctx, name, tensors, {})  # the shapes, predicate's and src's dtypes (target/rules/vector.py)
    operands = {"dst": dst, "src": tensors.get("src"), "predicate": pred}
    _record(ctx, name, operands, {"src": value, "reverse_pred": bool(reverse_pred)}, "vector")


@nki_op
def select_reduce(
    ctx: Any,
    dst: NkiTensor,
    predicate: NkiTensor,
    on_true: NkiTensor,
    on_false: Any,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: Any = None,
    reduce_op: Any = None,
    reverse_pred: bool = False,
    **kw: Any,
) -> None:
    """``dst = on_true`` where ``predicate`` holds, else ``on_false`` (a number or a (P, 1) tile), max-reduced into
    the VectorE registers per ``reduce_cmd``."""
    _mask(kw)
    name = "select_reduce"
    t = {r: _tensor(name, r, v) for r, v in (("dst", dst), ("predicate", predicate), ("on_true", on_true))}
    _rules(ctx, name, t, {})  # the documented shapes (target/rules/vector.py); memories: the declaration's
    if t["on_true"].buffer == "psum" and t["predicate"].buffer == "psum":
        raise NkiError(f"{name}: on_true and predicate cannot both be in PSUM")
    if t["predicate"].dtype not in ("int8", "uint8", "int16", "uint16"):
        raise NkiError(f"{name}: predicate must be int8, uint8, int16 or uint16, got {t['predicate'].dtype}")
    reduce = alu_op(reduce_op if reduce_op is not None else "maximum", "reduce_op")
    t_false, v_false = _scalar(name, "on_false", on_false, t["dst"])
    t_res = None if reduce_res is None else _tensor(name, "reduce_res", reduce_res)  # its shape: a rule
    attrs = {"on_false": v_false, "reduce_cmd": _enum(reduce_cmd if reduce_cmd is not None else "idle", _REDUCE_CMD,
             "reduce_cmd"), "reduce_op": reduce, "reverse_pred": bool(reverse_pred)}  # fmt: skip
    _record(ctx, name, {**t, "on_false": t_false, "reduce_res": t_res}, attrs, "vector")
