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
    Float32Type,
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


# -- the idiom in any layout (jax.nn.dot_product_attention) ----------------------------------------------------------
# jax.nn.dot_product_attention writes the idiom on (batch, seq, heads, d) tensors: the scores' dot batches over
# (batch, heads) with a unit group dimension, the softmax runs on a transposed view of the scores and V is the lhs
# of the second dot. The matcher below follows every value through *views* (converts, transposes, reshapes that only
# add or drop unit dimensions), tracking which dimension of the scores each non-unit dimension is, and fires only
# when the dimensions line up exactly: softmax over the keys, the mask's last two dims (queries, keys) the lower
# triangle, V's batch dims paired with Q's, one non-unit free dim per operand.


def _squeezed(v: SSAValue) -> list[int]:
    """The non-unit dimensions of ``v``."""
    return [i for i, n in enumerate(hlo.shape_of(v)) if n != 1]


def _view(v: SSAValue) -> tuple[SSAValue, list[int]]:
    """``v`` as a view of a base value: (base, perm), ``perm[i]`` the base's squeezed dim that is ``v``'s i-th
    squeezed dim."""
    perm = list(range(len(_squeezed(v))))
    while (o := _op(v)) is not None:
        src = o.operands[0] if o.operands else None
        if isinstance(o, hlo.ConvertOp) or (isinstance(o, hlo.ReshapeOp) and src is not None and
                                            [hlo.shape_of(src)[i] for i in _squeezed(src)] ==
                                            [hlo.shape_of(v)[i] for i in _squeezed(v)]):  # fmt: skip
            assert src is not None
            v = src
            continue
        if isinstance(o, hlo.TransposeOp):
            src_index = {d: k for k, d in enumerate(_squeezed(o.operands[0]))}
            order = hlo.int_list(o.permutation)
            step = [src_index[order[i]] for i in _squeezed(o.result)]
            perm = [step[j] for j in perm]
            v = o.operands[0]
            continue
        break
    return v, perm


def _reduced_last(v: SSAValue, combiner: str) -> SSAValue | None:
    """``v`` = reduce(x, combiner) over x's last dim (through broadcasts, reshapes, converts and transposes of the
    reduced vector): x."""
    r = _is(_strip(v, hlo.BroadcastInDimOp, hlo.ReshapeOp, hlo.ConvertOp, hlo.TransposeOp), hlo.ReduceOp)
    if not isinstance(r, hlo.ReduceOp) or r.combiner() != combiner:
        return None
    return r.inputs[0] if hlo.int_list(r.dimensions) == (len(hlo.shape_of(r.inputs[0])) - 1,) else None


def _row_constant(v: SSAValue) -> bool:
    """``v`` is a broadcast that is constant along its last dimension (a per-row value of a softmax)."""
    b = _is(v, hlo.BroadcastInDimOp)
    if not isinstance(b, hlo.BroadcastInDimOp):
        return False
    last = len(hlo.shape_of(v)) - 1
    src = hlo.shape_of(b.operand[0])
    return all(d != last or src[i] == 1 for i, d in enumerate(hlo.int_list(b.broadcast_dimensions)))


@dataclass(frozen=True)
class LayoutAttention:
    """The idiom found in some layout: q, k, v permuted (``*_perm``) then reshaped to (batch..., seq, d), and the
    (batch..., seq_q, d) result permuted by ``out_perm`` to the squeezed dims of the root's result."""

    att: Attention
    q_perm: list[int]
    k_perm: list[int]
    v_perm: list[int]
    batch: tuple[int, ...]  # the non-unit batch sizes, in Q's order
    out_perm: list[int]


def _softmax_input(div: Operation, consts: dict[SSAValue, np.ndarray]) -> SSAValue | None:
    """``div`` = exp(x - max(x)) / sum(exp(..)) over the last axis: x (the max taken on a view of x)."""
    e = _strip(div.operands[0], hlo.ConvertOp)
    summed = _reduced_last(div.operands[1], "add")
    if summed is None or _strip(summed, hlo.ConvertOp) != e or not _row_constant(div.operands[1]):
        return None
    exp = _is(e, hlo.ELEMENTWISE["exponential"])
    sub = _is(exp.operands[0], hlo.ELEMENTWISE["subtract"]) if exp is not None else None
    if sub is None or not _row_constant(sub.operands[1]):
        return None
    x, m = sub.operands[0], _strip(sub.operands[1], hlo.BroadcastInDimOp, hlo.ReshapeOp, hlo.TransposeOp)
    if (mx := _is(m, hlo.ELEMENTWISE["maximum"])) is not None:  # jax: max(-inf, reduce_max(x))
        floor = [o for o in mx.operands if (s := _splat(o, consts)) is not None and s <= MASKED]
        rest = [o for o in mx.operands if o not in floor]
        if len(floor) != 1 or len(rest) != 1:
            return None
        m = rest[0]
    maxed = _reduced_last(m, "maximum")
    if maxed is None:
        return None
    (mb, mperm), (xb, xperm) = _view(maxed), _view(x)
    if mb != xb or not mperm or not xperm or mperm[-1] != xperm[-1]:  # the max over x's (viewed) last axis
        return None
    return x


def match_attention_layout(dot2: hlo.DotGeneralOp, consts: dict[SSAValue, np.ndarray]) -> LayoutAttention | None:
    """The matmul → softmax → matmul idiom ending at ``dot2`` in any layout, or None."""
    dn2 = dot2.dot_dimension_numbers
    sides = ("lhs", "rhs")
    for pi in (0, 1):
        p_base, p_perm = _view(dot2.lhs[pi])
        div = _is(p_base, hlo.ELEMENTWISE["divide"])
        if div is not None:
            break
    else:
        return None
    v_val = dot2.lhs[1 - pi]
    pb, vb = dn2.dims(f"{sides[pi]}_batching_dimensions"), dn2.dims(f"{sides[1 - pi]}_batching_dimensions")
    pc, vc = dn2.dims(f"{sides[pi]}_contracting_dimensions"), dn2.dims(f"{sides[1 - pi]}_contracting_dimensions")
    if len(pc) != 1 or len(vc) != 1 or (x := _softmax_input(div, consts)) is None:
        return None
    # Follow x back to the scores' dot: to_s[i] = the scores' squeezed dim of the softmax's i-th squeezed dim.
    base, to_s = _view(x)
    causal, window, mask = False, 0, None
    if (sel := _is(base, hlo.SelectOp)) is not None:
        pred, on_true, on_false = sel.operands
        fill, mask = _splat(on_false, consts), consts.get(pred)
        if fill is None or fill > MASKED or mask is None:
            return None
        causal, mask_layout = True, sel.result
        base, step = _view(on_true)
        mask_to_s, to_s = list(step), [step[j] for j in to_s]
    scale = None
    if (mul := _is(base, hlo.ELEMENTWISE["multiply"])) is not None:
        for i in (0, 1):
            if (s := _splat(mul.operands[i], consts)) is not None:
                scale, (base, step) = s, _view(mul.operands[1 - i])
                to_s = [step[j] for j in to_s]
                if causal:
                    mask_to_s = [step[j] for j in mask_to_s]
    dot1 = _is(base, hlo.DotGeneralOp)
    if scale is None or not isinstance(dot1, hlo.DotGeneralOp):
        return None
    return _line_up(dot1, dot2, pi, p_perm, to_s, (pb, vb, vc), v_val, scale,
                    (mask, mask_layout, mask_to_s) if causal else None)  # fmt: skip


def _line_up(dot1: hlo.DotGeneralOp, dot2: hlo.DotGeneralOp, pi: int, p_perm: list[int], to_s: list[int],
             dims2: tuple[tuple[int, ...], ...], v_val: SSAValue, scale: float,
             masked: tuple[np.ndarray, SSAValue, list[int]] | None) -> LayoutAttention | None:  # fmt: skip
    """Check that the dimensions of the two dots, the softmax and the mask line up as attention's."""
    dn1 = dot1.dot_dimension_numbers
    q, k = dot1.lhs
    qs, ks, vs = hlo.shape_of(q), hlo.shape_of(k), hlo.shape_of(v_val)
    lb, rb = dn1.dims("lhs_batching_dimensions"), dn1.dims("rhs_batching_dimensions")
    lc, rc = dn1.dims("lhs_contracting_dimensions"), dn1.dims("rhs_contracting_dimensions")
    lfree = [i for i in range(len(qs)) if i not in (*lb, *lc) and qs[i] != 1]
    rfree = [i for i in range(len(ks)) if i not in (*rb, *rc) and ks[i] != 1]
    if len(lc) != 1 or len(rc) != 1 or len(lfree) != 1 or len(rfree) != 1:
        return None
    batch_pairs = [(a, b) for a, b in zip(lb, rb) if qs[a] != 1]
    nb = len(batch_pairs)  # the scores' squeezed dims: the non-unit batches, T, S
    t_dim, s_dim = nb, nb + 1
    if not to_s or to_s[-1] != s_dim or sorted(to_s) != list(range(nb + 2)):
        return None  # the softmax runs over the keys, on all of the scores
    pb, vb, vc = dims2
    p_val = dot2.lhs[pi]
    p_sq = {d: k for k, d in enumerate(_squeezed(p_val))}

    def in_scores(d: int) -> int | None:  # a dim of P -> the scores' squeezed dim
        return to_s[p_perm[p_sq[d]]] if d in p_sq else None

    dn2 = dot2.dot_dimension_numbers
    p_contract = dn2.dims(f"{('lhs', 'rhs')[pi]}_contracting_dimensions")[0]
    if in_scores(p_contract) != s_dim:
        return None
    v_batch: dict[int, int] = {}  # scores' batch index -> V dim
    for a, b in zip(pb, vb):
        j = in_scores(a)
        if j is not None:
            if j >= nb:
                return None
            v_batch[j] = b
    p_free = [d for d in _squeezed(p_val) if d not in (*pb, p_contract)]
    v_free = [d for d in range(len(vs)) if d not in (*vb, *vc) and vs[d] != 1]
    if len(v_batch) != nb or [in_scores(d) for d in p_free] != [t_dim] or len(v_free) != 1:
        return None
    d, t, s = qs[lc[0]], qs[lfree[0]], ks[rfree[0]]
    if ks[rc[0]] != d or vs[v_free[0]] != d or vs[vc[0]] != s or d > 128:
        return None
    window = 0
    if masked is not None:
        mask, layout, mask_to_s = masked
        if t != s:
            return None
        sq = mask.reshape([hlo.shape_of(layout)[i] for i in _squeezed(layout)])
        order = [mask_to_s.index(j) for j in range(nb + 2)]  # the mask in the scores' squeezed order
        found = _causal_window(np.transpose(sq, order))
        if found is None:
            return None
        window = found
    # The second dot's squeezed result dims as scores batch / T / H, in canonical (batch..., T, H) numbering.
    res_kind: list[int] = []
    for a, b in zip(pb, vb):
        if (j := in_scores(a)) is not None:
            res_kind.append(j)
    lhs_free2 = [x for x in range(len(hlo.shape_of(dot2.lhs[0]))) if x not in dn2.dims("lhs_batching_dimensions")
                 and x not in dn2.dims("lhs_contracting_dimensions") and hlo.shape_of(dot2.lhs[0])[x] != 1]
    rhs_free2 = [x for x in range(len(hlo.shape_of(dot2.lhs[1]))) if x not in dn2.dims("rhs_batching_dimensions")
                 and x not in dn2.dims("rhs_contracting_dimensions") and hlo.shape_of(dot2.lhs[1])[x] != 1]
    for side, free in ((0, lhs_free2), (1, rhs_free2)):
        res_kind.extend([t_dim if side == pi else t_dim + 1] * len(free))
    att = Attention(q, k, v_val, scale, masked is not None, window)
    batch = tuple(qs[a] for a, _ in batch_pairs)
    return LayoutAttention(
        att,
        q_perm=[a for a, _ in batch_pairs] + lfree + list(lc) + [i for i in range(len(qs)) if qs[i] == 1 and i not in lc],
        k_perm=[b for _, b in batch_pairs] + rfree + list(rc) + [i for i in range(len(ks)) if ks[i] == 1 and i not in rc],
        v_perm=[v_batch[j] for j in range(nb)] + list(vc) + v_free
        + [i for i in range(len(vs)) if vs[i] == 1 and i not in vc],
        batch=batch,
        out_perm=res_kind,
    )  # fmt: skip


def replace_layout(root: hlo.DotGeneralOp, found: LayoutAttention) -> hlo.CustomCallOp:
    """Q, K, V transposed and reshaped to (batch..., seq, d), the call, its result transposed back into the second
    dot's layout."""
    att = found.att

    def canonical(x: SSAValue, perm: list[int]) -> SSAValue:
        shape = hlo.shape_of(x)
        moved = _transpose(x, perm, root) if perm != list(range(len(shape))) else x
        kept = [shape[p] for p in perm if shape[p] != 1]  # (batch..., seq, d): every non-unit dim, in order
        return _reshape(moved, tuple(kept), root)

    q, k, v = canonical(att.q, found.q_perm), canonical(att.k, found.k_perm), canonical(att.v, found.v_perm)
    call, result = emit_call(root, Attention(q, k, v, att.scale, att.causal, att.window))
    t, d = hlo.shape_of(q)[-2:]
    result = _reshape(result, (*found.batch, t, d), root)
    if found.out_perm != sorted(found.out_perm):
        result = _transpose(result, found.out_perm, root)
    _finish(root, result)
    return call


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


def emit_call(root: Operation, att: Attention) -> tuple[hlo.CustomCallOp, SSAValue]:
    """Insert ``custom_call @[Causal]Attention...(q, k, v)`` (q, k, v reshaped to (batch, seq, d) of q's dtype)
    before ``root``: the call and its (batch, seq_q, d) result."""
    element = hlo.ttype(att.q).element_type

    def source(x: SSAValue) -> SSAValue:  # skip an upcast of a tensor already of q's dtype
        s = _strip(x, hlo.ConvertOp)
        return s if hlo.ttype(s).element_type == element else x

    def seq_major(x: SSAValue, swapped: bool) -> SSAValue:
        if not swapped:
            return x
        shape = hlo.shape_of(x)
        perm = [*range(len(shape) - 2), len(shape) - 1, len(shape) - 2]
        return _transpose(x, perm, root)

    q, k, v = (_as3d(seq_major(source(x), sw), element, root)
               for x, sw in zip((att.q, att.k, att.v), att.swapped))  # fmt: skip
    call = hlo.CustomCallOp.create(
        operands=[q, k, v],
        result_types=[_tensor(hlo.shape_of(q), element)],
        properties={
            "call_target_name": StringAttr(CAUSAL if att.causal else PLAIN),
            "backend_config": StringAttr(json.dumps(backend_config(att), sort_keys=True)),
            "api_version": IntegerAttr(1, IntegerType(32)),
        },
    )
    return call, _insert(call, root)


def _transpose(x: SSAValue, perm: list[int], at: Operation) -> SSAValue:
    shape = hlo.shape_of(x)
    t = _tensor(tuple(shape[p] for p in perm), hlo.ttype(x).element_type)
    return _insert(hlo.TransposeOp.create(operands=[x], result_types=[t],
                                          properties={"permutation": hlo.i64_array(perm)}), at)  # fmt: skip


def _reshape(x: SSAValue, shape: tuple[int, ...], at: Operation) -> SSAValue:
    if hlo.shape_of(x) == shape:
        return x
    return _insert(hlo.ReshapeOp.create(operands=[x], result_types=[_tensor(shape, hlo.ttype(x).element_type)]), at)


def _finish(root: Operation, result: SSAValue) -> None:
    """``result`` (of root's shape) converted to root's element type replaces root's single result."""
    want = root.results[0]
    if hlo.ttype(want).element_type != hlo.ttype(result).element_type:
        result = _insert(hlo.ConvertOp.create(operands=[result], result_types=[_tensor(hlo.shape_of(result), hlo.ttype(want).element_type)]), root)  # noqa: E501
    result = _reshape(result, hlo.shape_of(want), root)
    want.replace_all_uses_with(result)
    Rewriter.erase_op(root)


def replace_with_call(root: Operation, att: Attention) -> hlo.CustomCallOp:
    """Replace ``root``'s single result by ``custom_call @[Causal]Attention...(q, k, v)`` (reshaped/converted)."""
    call, result = emit_call(root, att)
    _finish(root, result)
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
            elif (found := match_attention_layout(dot, consts)) is not None:
                replace_layout(dot, found)
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
