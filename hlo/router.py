"""Attention routing on StableHLO, one pass per rule (the Neuron compiler's ``LowerToCustomNativeKernel`` and
``DecomposeAttention``, and the composite contract the field has moved to).

* ``route-attention-composite``: a ``stablehlo.composite`` whose name says attention becomes the attention custom
  call, its ``composite_attributes`` (``scale``, ``causal``/``is_causal``, ``window``/``sliding_window``) carried in
  the backend_config as the kernel's arguments. The name is the robust contract; the decomposition is not looked at.
* ``route-attention``: failing that, the idiom ``dot(Q, Kᵀ) · scale → [causal select] → softmax(last axis) →
  dot(·, V)`` becomes ``stablehlo.custom_call @AttentionMMSoftmaxMMWithoutSwap`` (``@CausalAttention...`` when the
  select's predicate is the lower triangle) with the seed's backend_config ``{psum_shape, sb_shape, auto_cast,
  auto_cast_type, kernel_name}`` plus the scale/causal/window arguments. It fires only on the exact idiom: softmax
  over the last axis (max-subtracted, exp, divided by the sum over the same axis), a constant splat scale, the
  triangle mask (or none); anything else stays op by op.
* ``decompose-attention``: the inverse, an attention custom call expanded back to dot → −max → exp → ÷Σ → dot.

The custom call is then lowered to an ``internal`` kernel node of nkic's ``flash_attention``
(``nkic.hlo.lower``). Q, K and V travel as (batch, seq, d) tensors of Q's dtype (reshapes and converts are inserted
around the call, and removed again by op-by-op lowering being free for reshapes).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from nkic.dialects import stablehlo as hlo
from nkic.hlo import tiles
from nkic.hlo.lower import ATTENTION_TARGETS, inline_calls, main_function

PLAIN, CAUSAL = "AttentionMMSoftmaxMMWithoutSwap", "CausalAttentionMMSoftmaxMMWithoutSwap"
KERNEL = "flash_attention"
# A select's fill at or below this is "masked out": -inf, finfo.min, or the -1e9 / -1e4 programs often write (-1e9
# in bf16 is -9.99e8). exp(fill - max) is then exactly 0 in f32 as long as each row's largest unmasked score stays
# above fill + 104 (every causal row keeps its diagonal), which is what the kernel computes.
MASKED = -1e4


@dataclass(frozen=True)
class Attention:
    q: SSAValue
    k: SSAValue
    v: SSAValue
    scale: float
    causal: bool
    window: int = 0
    # q, k, v given with their last two dimensions swapped (q.T @ ..., q @ k.T as transpose + dot, p @ v.T ...):
    # the call gets them transposed back to (..., seq, d)
    swapped: tuple[bool, bool, bool] = (False, False, False)

    def shape(self, i: int) -> tuple[int, ...]:
        s = hlo.shape_of((self.q, self.k, self.v)[i])
        return (*s[:-2], s[-1], s[-2]) if self.swapped[i] else s


def _consts(fn: func.FuncOp) -> dict[SSAValue, np.ndarray]:
    consts: dict[SSAValue, np.ndarray] = {}
    for op in fn.body.block.ops:
        value = tiles.fold(op, consts)
        if value is not None:
            consts[op.results[0]] = value
    return consts


def _op(v: SSAValue) -> Operation | None:
    return v.owner if isinstance(v.owner, Operation) else None


def _strip(v: SSAValue, *kinds: type[Operation]) -> SSAValue:
    while (o := _op(v)) is not None and isinstance(o, kinds):
        v = o.operands[0]
    return v


def _is(v: SSAValue, kind: type[Operation]) -> Operation | None:
    o = _op(v)
    return o if isinstance(o, kind) else None


def _splat(v: SSAValue, consts: dict[SSAValue, np.ndarray]) -> float | None:
    c = consts.get(v)
    if c is None or c.size == 0 or not np.all(c == c.flat[0]):
        return None
    return float(c.flat[0])


def _reduce_last(v: SSAValue, combiner: str, rank: int) -> SSAValue | None:
    """``v`` = reduce(x, combiner) over the last of ``rank`` dims, through broadcasts/reshapes: x."""
    r = _is(_strip(v, hlo.BroadcastInDimOp, hlo.ReshapeOp, hlo.ConvertOp), hlo.ReduceOp)
    if not isinstance(r, hlo.ReduceOp) or r.combiner() != combiner or hlo.int_list(r.dimensions) != (rank - 1,):
        return None
    return r.inputs[0]


def _same_matrices(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Two shapes that differ only by leading unit dimensions."""
    return a[-2:] == b[-2:] and math.prod(a) == math.prod(b)


def _batch_ok(dn: hlo.DotAttr, rank: int) -> bool:
    batch = tuple(range(rank - 2))
    return dn.dims("lhs_batching_dimensions") == batch and dn.dims("rhs_batching_dimensions") == batch


def match_attention(dot2: hlo.DotGeneralOp, consts: dict[SSAValue, np.ndarray]) -> Attention | None:
    """The matmul → softmax → matmul idiom ending at ``dot2``, or None."""
    p_val, v = dot2.lhs[0], dot2.lhs[1]
    rank2 = len(hlo.shape_of(p_val))
    dn2 = dot2.dot_dimension_numbers
    if rank2 < 2 or len(hlo.shape_of(v)) != rank2 or not _batch_ok(dn2, rank2):
        return None
    if dn2.dims("lhs_contracting_dimensions") != (rank2 - 1,):
        return None
    if (v_swapped := dn2.dims("rhs_contracting_dimensions")) not in ((rank2 - 2,), (rank2 - 1,)):
        return None
    p_src = _strip(p_val, hlo.ConvertOp)
    if (rs := _is(p_src, hlo.ReshapeOp)) is not None and _same_matrices(hlo.shape_of(rs.operands[0]),
                                                                        hlo.shape_of(p_src)):  # fmt: skip
        p_src = _strip(rs.operands[0], hlo.ConvertOp)  # jax's batch-1 matmul: (1, q, k) viewed as (q, k)
    div = _is(p_src, hlo.ELEMENTWISE["divide"])
    if div is None:
        return None
    rank = len(hlo.shape_of(div.results[0]))  # the softmax's rank (the scores' dot)
    e = _strip(div.operands[0], hlo.ConvertOp)
    summed = _reduce_last(div.operands[1], "add", rank)
    if summed is None or _strip(summed, hlo.ConvertOp) != e:
        return None
    exp = _is(e, hlo.ELEMENTWISE["exponential"])
    sub = _is(exp.operands[0], hlo.ELEMENTWISE["subtract"]) if exp is not None else None
    if sub is None:
        return None
    x = sub.operands[0]
    m = _strip(sub.operands[1], hlo.BroadcastInDimOp, hlo.ReshapeOp)
    if (mx := _is(m, hlo.ELEMENTWISE["maximum"])) is not None:  # jax: max(-inf, reduce_max(x)), a no-op
        floor = [o for o in mx.operands if (s := _splat(o, consts)) is not None and s <= MASKED]
        rest = [o for o in mx.operands if o not in floor]
        if len(floor) != 1 or len(rest) != 1:
            return None
        m = rest[0]
    maxed = _reduce_last(m, "maximum", rank)
    if maxed is None or _strip(maxed, hlo.ConvertOp) != _strip(x, hlo.ConvertOp):
        return None
    causal, window = False, 0
    scores = _strip(x, hlo.ConvertOp)
    if (sel := _is(scores, hlo.SelectOp)) is not None:
        pred, on_true, on_false = sel.operands
        fill = _splat(on_false, consts)
        mask = consts.get(pred)
        window = _causal_window(mask) if mask is not None else None
        if fill is None or fill > MASKED or window is None:
            return None
        causal, scores = True, _strip(on_true, hlo.ConvertOp)
    scale = None
    if (mul := _is(scores, hlo.ELEMENTWISE["multiply"])) is not None:
        for i in (0, 1):
            if (s := _splat(mul.operands[i], consts)) is not None:
                scale, scores = s, mul.operands[1 - i]
    elif (dv := _is(scores, hlo.ELEMENTWISE["divide"])) is not None and (s := _splat(dv.operands[1], consts)):
        scale, scores = 1.0 / s, dv.operands[0]
    if scale is None:
        return None  # an unscaled softmax(QKᵀ) is not the routed idiom
    dot1 = _is(_strip(scores, hlo.ConvertOp), hlo.DotGeneralOp)
    if not isinstance(dot1, hlo.DotGeneralOp) or not _batch_ok(dot1.dot_dimension_numbers, rank):
        return None
    dn1 = dot1.dot_dimension_numbers
    lc, rc = dn1.dims("lhs_contracting_dimensions"), dn1.dims("rhs_contracting_dimensions")
    if lc not in ((rank - 1,), (rank - 2,)) or rc not in ((rank - 1,), (rank - 2,)):
        return None
    swapped = (lc == (rank - 2,), rc == (rank - 2,), v_swapped == (rank - 1,))
    att = Attention(dot1.lhs[0], dot1.lhs[1], v, scale, causal, window if causal else 0, swapped)
    (sq, d), (skv, dk), (sv, dv) = att.shape(0)[-2:], att.shape(1)[-2:], att.shape(2)[-2:]
    if not dk == dv == d or d > 128 or skv != sv:
        return None  # flash_attention: one head dim for q, k and v, at most 128
    if causal and sq != skv:
        return None
    batches = [math.prod(att.shape(i)[:-2]) for i in range(3)]
    if batches[0] != batches[2] or batches[1] != batches[2]:
        return None
    return att


def _causal_window(mask: np.ndarray) -> int | None:
    """0 when ``mask`` (broadcast over leading dims) is the lower triangle ``q >= k``, W when it is the causal
    sliding window ``0 <= q - k < W``, else None."""
    if mask.ndim < 2:
        return None
    n, m = mask.shape[-2:]
    diff = np.arange(n)[:, None] - np.arange(m)[None, :]
    window = int(mask.reshape(-1, n, m)[0, :, 0].astype(bool).sum())  # column 0 holds the first W queries
    for w in (0, window):
        band = (diff >= 0) & (diff < w) if w else diff >= 0
        if np.all(mask.astype(bool) == band):
            return w if w < n else 0
    return None


# -- building the custom call -------------------------------------------------------------------------------------
def _tensor(shape: tuple[int, ...], element: Attribute) -> TensorType:
    return TensorType(element, list(shape))


def _insert(op: Operation, at: Operation) -> SSAValue:
    Rewriter.insert_op(op, InsertPoint.before(at))
    return op.results[0]


def _as3d(v: SSAValue, element: Attribute, at: Operation) -> SSAValue:
    """``v`` as (batch, seq, d) of ``element`` (the batch dims flattened)."""
    shape = hlo.shape_of(v)
    if hlo.ttype(v).element_type != element:
        v = _insert(hlo.ConvertOp.create(operands=[v], result_types=[_tensor(shape, element)]), at)
    if len(shape) != 3:
        flat = (math.prod(shape[:-2]), *shape[-2:])
        v = _insert(hlo.ReshapeOp.create(operands=[v], result_types=[_tensor(flat, element)]), at)
    return v


def backend_config(att: Attention) -> dict[str, object]:
    """The seed's five keys plus the kernel's arguments. ``psum_shape``: the PSUM tile of one KV tile of scores
    (128 query rows x 512 keys, fp32); ``sb_shape``: the SBUF-resident Kᵀ of one section (d x seqlen_kv)."""
    d, skv = att.shape(0)[-1], att.shape(1)[-2]
    dtype = tiles.nki_dtype(tiles.result_dtype(att.q))
    return {
        "psum_shape": [128, 512], "sb_shape": [d, min(skv, 8192)], "auto_cast": "none", "auto_cast_type": dtype,
        "kernel_name": KERNEL, "scale": att.scale, "is_causal": att.causal, "sliding_window": att.window,
    }  # fmt: skip


def replace_with_call(root: Operation, att: Attention) -> hlo.CustomCallOp:
    """Replace ``root``'s single result by ``custom_call @[Causal]Attention...(q, k, v)`` (reshaped/converted)."""
    element = hlo.ttype(att.q).element_type

    def source(x: SSAValue) -> SSAValue:  # skip an upcast of a tensor already of q's dtype
        s = _strip(x, hlo.ConvertOp)
        return s if hlo.ttype(s).element_type == element else x

    def seq_major(x: SSAValue, swapped: bool) -> SSAValue:
        if not swapped:
            return x
        shape = hlo.shape_of(x)
        perm = [*range(len(shape) - 2), len(shape) - 1, len(shape) - 2]
        t = _tensor(tuple(shape[p] for p in perm), hlo.ttype(x).element_type)
        return _insert(hlo.TransposeOp.create(operands=[x], result_types=[t],
                                              properties={"permutation": hlo.i64_array(perm)}), root)  # fmt: skip

    q, k, v = (_as3d(seq_major(source(x), sw), element, root)
               for x, sw in zip((att.q, att.k, att.v), att.swapped))  # fmt: skip
    out_shape = hlo.shape_of(q)
    call = hlo.CustomCallOp.create(
        operands=[q, k, v],
        result_types=[_tensor(out_shape, element)],
        properties={
            "call_target_name": StringAttr(CAUSAL if att.causal else PLAIN),
            "backend_config": StringAttr(json.dumps(backend_config(att), sort_keys=True)),
            "api_version": IntegerAttr(1, IntegerType(32)),
        },
    )
    result = _insert(call, root)
    want = root.results[0]
    if hlo.ttype(want).element_type != element:
        result = _insert(hlo.ConvertOp.create(operands=[result], result_types=[_tensor(out_shape, hlo.ttype(want).element_type)]), root)  # noqa: E501
    if hlo.shape_of(want) != out_shape:
        result = _insert(hlo.ReshapeOp.create(operands=[result], result_types=[want.type]), root)
    want.replace_all_uses_with(result)
    Rewriter.erase_op(root)
    return call


def remove_dead(fn: func.FuncOp) -> None:
    """Erase side-effect-free StableHLO ops whose results nobody uses."""
    changed = True
    while changed:
        changed = False
        for op in reversed(list(fn.body.block.ops)):
            if op.name.startswith("stablehlo.") and not isinstance(op, hlo.CustomCallOp) and op.results:
                if all(not r.uses for r in op.results):
                    Rewriter.erase_op(op)
                    changed = True


# -- the passes -------------------------------------------------------------------------------------------------------
def _attr_value(a: Attribute) -> object:
    if isinstance(a, IntegerAttr) and a.type == IntegerType(1):
        return bool(a.value.data)
    if isinstance(a, (IntegerAttr, FloatAttr)):
        return a.value.data
    if isinstance(a, DenseIntOrFPElementsAttr):
        return hlo.dense_to_numpy(a).reshape(-1)[0].item()
    if isinstance(a, StringAttr):
        return a.data
    return str(a)


@dataclass(frozen=True)
class RouteAttentionComposite(ModulePass):
    """A composite named ``*attention*`` → the attention custom call with the composite's attributes."""

    name = "route-attention-composite"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for comp in [o for o in op.walk() if isinstance(o, hlo.CompositeOp)]:
            if "attention" not in comp.composite_name.data.lower() or len(comp.inputs) < 3 or len(comp.outs) != 1:
                continue
            attrs = comp.composite_attributes
            values = {k: _attr_value(a) for k, a in attrs.data.items()} if isinstance(attrs, DictionaryAttr) else {}
            q, k, v = comp.inputs[:3]
            scale = float(values.get("scale", 1.0 / math.sqrt(hlo.shape_of(q)[-1])))  # type: ignore[arg-type]
            causal = bool(values.get("causal", values.get("is_causal", False)))
            window = int(values.get("window", values.get("sliding_window", 0)) or 0)  # type: ignore[arg-type]
            replace_with_call(comp, Attention(q, k, v, scale, causal, window))


@dataclass(frozen=True)
class RouteAttention(ModulePass):
    """The matmul → softmax → matmul idiom → ``stablehlo.custom_call @[Causal]AttentionMMSoftmaxMMWithoutSwap``."""

    name = "route-attention"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        inline_calls(op)
        fn = main_function(op)
        consts = _consts(fn)
        for dot in [o for o in fn.body.block.ops if isinstance(o, hlo.DotGeneralOp)]:
            att = match_attention(dot, consts)
            if att is not None:
                replace_with_call(dot, att)
        remove_dead(fn)


@dataclass(frozen=True)
class DecomposeAttention(ModulePass):
    """An attention custom call → dot → −max → exp → ÷Σ → dot (the causal mask as iota ≥ iota select)."""

    name = "decompose-attention"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for call in [o for o in op.walk() if isinstance(o, hlo.CustomCallOp)]:
            if call.call_target_name.data in ATTENTION_TARGETS:
                cfg = call.config()
                causal = bool(cfg.get("is_causal", call.call_target_name.data.startswith("Causal")))
                _decompose(call, float(cfg.get("scale", 1.0)), causal)  # type: ignore[arg-type]


def _decompose(call: hlo.CustomCallOp, scale: float, causal: bool) -> None:
    q, k, v = call.inputs[:3]
    (b, sq, d), skv = hlo.shape_of(q), hlo.shape_of(k)[1]
    f32 = hlo.ttype(q).element_type
    element = hlo.ttype(q).element_type
    from xdsl.dialects.builtin import Float32Type

    f32 = Float32Type()
    s_t, row_t, scalar_t = _tensor((b, sq, skv), f32), _tensor((b, sq), f32), _tensor((), f32)

    def ins(o: Operation) -> SSAValue:
        return _insert(o, call)

    def conv(x: SSAValue, shape: tuple[int, ...], to: Attribute) -> SSAValue:
        return x if hlo.ttype(x).element_type == to else ins(hlo.ConvertOp.create(operands=[x], result_types=[_tensor(shape, to)]))  # noqa: E501

    def const(value: float, t: TensorType) -> SSAValue:
        c = ins(hlo.ConstantOp(DenseIntOrFPElementsAttr.from_list(scalar_t, [value])))
        return ins(hlo.BroadcastInDimOp.create(operands=[c], result_types=[t],
                                               properties={"broadcast_dimensions": hlo.i64_array([])}))  # fmt: skip

    def bcast_rows(x: SSAValue) -> SSAValue:
        return ins(hlo.BroadcastInDimOp.create(operands=[x], result_types=[s_t],
                                               properties={"broadcast_dimensions": hlo.i64_array([0, 1])}))  # fmt: skip

    def reduce(x: SSAValue, combiner: str, init: float) -> SSAValue:
        block = Block(arg_types=[scalar_t, scalar_t])
        inner = hlo.ELEMENTWISE[combiner].create(operands=list(block.args), result_types=[scalar_t])
        block.add_ops([inner, hlo.ReturnOp([inner.results[0]])])
        c = ins(hlo.ConstantOp(DenseIntOrFPElementsAttr.from_list(scalar_t, [init])))
        return ins(hlo.ReduceOp.create(operands=[x, c], result_types=[row_t], regions=[Region(block)],
                                       properties={"dimensions": hlo.i64_array([2])}))  # fmt: skip

    def binary(kind: str, a: SSAValue, c: SSAValue, t: TensorType) -> SSAValue:
        return ins(hlo.ELEMENTWISE[kind].create(operands=[a, c], result_types=[t]))

    dot1 = ins(hlo.DotGeneralOp.create(
        operands=[conv(q, (b, sq, d), f32), conv(k, (b, skv, d), f32)], result_types=[s_t],
        properties={"dot_dimension_numbers": hlo.DotAttr([0], [0], [2], [2])}))  # fmt: skip
    s = binary("multiply", dot1, const(scale, s_t), s_t)
    if causal:
        idx_t = _tensor((b, sq, skv), IntegerType(32))
        rows = ins(hlo.IotaOp.create(properties={"iota_dimension": IntegerAttr(1, i64)}, result_types=[idx_t]))
        cols = ins(hlo.IotaOp.create(properties={"iota_dimension": IntegerAttr(2, i64)}, result_types=[idx_t]))
        pred = ins(hlo.CompareOp.create(operands=[rows, cols], result_types=[_tensor((b, sq, skv), IntegerType(1))],
                                        properties={"comparison_direction": hlo.ComparisonDirectionAttr("GE")}))  # fmt: skip
        s = ins(hlo.SelectOp.create(operands=[pred, s, const(-math.inf, s_t)], result_types=[s_t]))
    m = reduce(s, "maximum", -math.inf)
    e = ins(hlo.ELEMENTWISE["exponential"].create(operands=[binary("subtract", s, bcast_rows(m), s_t)],
                                                   result_types=[s_t]))  # fmt: skip
    p = binary("divide", e, bcast_rows(reduce(e, "add", 0.0)), s_t)
    out_t = _tensor((b, sq, d), f32)
    out = ins(hlo.DotGeneralOp.create(
        operands=[p, conv(v, (b, skv, d), f32)], result_types=[out_t],
        properties={"dot_dimension_numbers": hlo.DotAttr([0], [0], [2], [1])}))  # fmt: skip
    out = conv(out, (b, sq, d), element)
    call.outs[0].replace_all_uses_with(out)
    Rewriter.erase_op(call)


ROUTING = (RouteAttentionComposite(), RouteAttention())
