"""Multi-result ``stablehlo.reduce``: ``jnp.argmax`` / ``jnp.argmin`` (``(values, iota)`` reduced together).

What the body computes is probed numerically (``common.probe``): it must keep the larger (argmax) or smaller
(argmin) value with its index, and on a tie the smaller index (JAX's first occurrence). The index operand must be
the iota along the reduced dimension. Lowered on VectorE with the NKI instructions made for it: ``nisa.max8``
("the 8 largest values of src[p] in descending order") and ``nisa.nc_find_index8`` ("the free index of vals[p, i]
in data[p]; the k-th duplicate of a value in vals takes its k-th match"), so slot 0 gives the maximum and its first
index; argmin negates the values first. Rows tile by 128 partitions; a row of fewer than 8 values is padded with
-inf (max8 takes 8..16384 elements per partition).
"""

from __future__ import annotations

import math

import numpy as np

from nkic.dialects import stablehlo as hlo
from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.hlo import common, tiles
from nkic.hlo.tiles import P_TILE, SegmentInterpreter

MAX8_MAX = 16384  # max8: "8..16384 elements" per partition


def _direction(op: hlo.ReduceOp) -> str | None:
    """'max' or 'min' when the body is an arg-reduction with first-index ties, else None."""
    body = op.body

    def run(a: float, ia: int, b: float, ib: int) -> tuple[float, int] | None:
        out = common.probe(body, [a, ia, b, ib])
        return None if out is None else (float(out[0]), int(out[1]))

    bigger, smaller, tie = run(1.0, 0, 2.0, 1), run(2.0, 0, 1.0, 1), run(1.0, 1, 1.0, 0)
    if tie != (1.0, 0):
        return None
    if bigger == (2.0, 1) and smaller == (2.0, 0):
        return "max"
    if bigger == (1.0, 0) and smaller == (1.0, 1):
        return "min"
    return None


@common.lowering("reduce.arg")
def arg_reduce(interp: SegmentInterpreter, op: hlo.ReduceOp) -> None:
    x_val, idx_val, init_v, init_i = op.inputs
    shape, rdims = hlo.shape_of(x_val), hlo.int_list(op.dimensions)
    direction = _direction(op)
    if direction is None or len(rdims) != 1:
        raise common.unsupported(op, "a multi-result reduce other than argmax/argmin over one dimension")
    (d,) = rdims
    idx = interp.get(idx_val)
    iota = np.broadcast_to(np.arange(shape[d]).reshape([-1 if i == d else 1 for i in range(len(shape))]), shape)
    if not isinstance(idx, np.ndarray) or not np.array_equal(idx, iota):
        raise common.unsupported(op, "an arg-reduction whose indices are not the iota of the reduced dimension")
    kept = [i for i in range(len(shape)) if i != d]
    x = interp._permuted(interp.get(x_val), shape, [*kept, d])
    rows, cols = math.prod(shape[i] for i in kept), shape[d]
    if cols > MAX8_MAX:
        raise common.unsupported(op, f"an arg-reduction over more than {MAX8_MAX} elements")
    vals, inds = interp.alloc(op.outs[0]), interp.alloc(op.outs[1])
    sign = 1.0 if direction == "max" else -1.0
    for r0 in range(0, rows, P_TILE):
        nr = min(P_TILE, rows - r0)
        data = nl.ndarray((nr, max(cols, 8)), dtype=nl.float32, buffer=nl.sbuf)
        if cols < 8:
            nisa.memset(dst=data, value=-np.inf)
        nisa.tensor_copy(dst=data[:, 0:cols], src=nl.multiply(nl.load(x.tile(r0, nr, 0, cols)), sign,
                                                               dtype="float32"))  # fmt: skip
        top = nl.ndarray((nr, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=top, src=data)
        where = nl.ndarray((nr, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=where, data=data, vals=top)
        nl.store(vals.tensor.ap([[1, nr], [1, 1]], offset=r0), nl.multiply(top[:, 0:1], sign, dtype=vals.dtype))
        nl.store(inds.tensor.ap([[1, nr], [1, 1]], offset=r0), nl.copy(where[:, 0:1], dtype=inds.dtype))
    _check_init(op, interp, init_v, init_i, sign)
    interp.values[op.outs[0]], interp.values[op.outs[1]] = vals, inds


def _check_init(op: hlo.ReduceOp, interp: SegmentInterpreter, init_v: object, init_i: object, sign: float) -> None:
    """The init values must be the identity (-inf for argmax, +inf for argmin): nothing else is folded in."""
    v = interp.get(init_v)  # type: ignore[arg-type]
    if not isinstance(v, np.ndarray) or float(v.reshape(-1)[0]) != -sign * np.inf:
        raise common.unsupported(op, "an arg-reduction whose init value is not -inf (argmax) / +inf (argmin)")
    del init_i  # the index of the identity never wins: any value beats -inf
