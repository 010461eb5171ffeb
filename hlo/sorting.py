"""``stablehlo.sort`` along one dimension (``jnp.sort``, ``jnp.argsort``, and ``chlo.top_k`` once decomposed into a
sort and a slice), on VectorE's top-8 instructions.

The comparator is probed numerically (``common.probe``): exactly one operand must decide the order (the *key*),
ascending or descending; the other operands follow the key's permutation. Each row (the sort dim moved last,
128 rows per tile, up to 16384 elements) is sorted descending by rounds of ``nisa.max8`` ("the 8 largest values of
src[p] in descending order"), ``nisa.nc_find_index8`` ("the k-th duplicate of a value in vals takes its k-th
match", so equal keys keep their input order: the sort is stable) and ``nisa.nc_match_replace8`` (the 8 taken
replaced by -inf for the next round; its own ``dst_idx`` pairs duplicates in descending slot order, not stable). An ascending sort negates the key. When the results are
only read through slices of the first k positions (top-k), only ceil(k / 8) rounds run. Keys are compared in fp32;
a -inf key is not told apart from a position already taken, so rows holding -inf keys are not lowered exactly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nkic.dialects import stablehlo as hlo
from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.hlo import common, gathers, tiles
from nkic.hlo.tiles import P_TILE, Hbm, SegmentInterpreter

MAX8_MAX = 16384  # max8: "8..16384 elements" per partition


def _key(op: Any) -> tuple[int, bool]:
    """(key operand, ascending) from what the comparator returns on probes differing in one operand only."""
    n = len(op.inputs)
    found: list[tuple[int, bool]] = []
    for j in range(n):
        def cmp(a: float, b: float) -> bool | None:
            args: list[float] = []
            for i in range(n):
                args += [a, b] if i == j else [0, 0]
            out = common.probe(op.comparator, args)
            return None if out is None else bool(out[0].reshape(-1)[0])

        less, greater = cmp(1, 2), cmp(2, 1)
        if less is None or greater is None:
            raise common.unsupported(op, "a comparator nkic cannot evaluate")
        if less != greater:
            found.append((j, bool(less)))
    if len(found) != 1:
        raise common.unsupported(op, "a sort whose order depends on more than one operand (a lexicographic sort)")
    return found[0]


def _needed(op: Any, dim: int, n: int) -> int:
    """How many leading positions along ``dim`` any user reads: k when every use is a slice [0, k) (top-k)."""
    k = 0
    for r in op.results:
        for use in r.uses:
            user = use.operation
            if not isinstance(user, hlo.SliceOp):
                return n
            start, limit = hlo.int_list(user.start_indices), hlo.int_list(user.limit_indices)
            if start[dim] != 0:
                return n
            k = max(k, limit[dim])
    return k


@common.lowering("sort")
def sort(interp: SegmentInterpreter, op: Any) -> None:
    dim = op.dimension.value.data
    shape = hlo.shape_of(op.inputs[0])
    key, ascending = _key(op)
    n = shape[dim]
    if n > MAX8_MAX:
        raise common.unsupported(op, f"a sort of more than {MAX8_MAX} elements per row")
    rank = len(shape)
    perm = [d for d in range(rank) if d != dim] + [dim]
    back = [perm.index(d) for d in range(rank)]
    rows = math.prod(shape) // max(n, 1)
    x = interp._permuted(interp.get(op.inputs[key]), shape, perm)
    sorted_keys = common.scratch(interp, (rows, n), x.dtype)
    order = common.scratch(interp, (rows, n), "int32")
    k = _needed(op, dim, n)
    for r0 in range(0, rows, P_TILE):
        _sort_rows(x, sorted_keys, order, r0, min(P_TILE, rows - r0), n, k, ascending)
    pshape = tuple(shape[p] for p in perm)
    for i, (v, res) in enumerate(zip(op.inputs, op.results)):
        if i == key:
            data = sorted_keys
        else:
            data = _follow(interp, v, shape, perm, order, rows, n)
        h = Hbm(data.tensor, pshape, data.dtype)
        out = interp._permuted(h, pshape, back)
        interp.values[res] = Hbm(out.tensor, shape, out.dtype)


def _sort_rows(x: Hbm, keys: Hbm, order: Hbm, r0: int, nr: int, n: int, k: int, ascending: bool) -> None:
    """Rows [r0, r0 + nr): the first k keys in order and their input positions."""
    sign = -1.0 if ascending else 1.0
    width = max(n, 8)
    work = nl.ndarray((nr, width), dtype=nl.float32, buffer=nl.sbuf)
    if n < 8:
        nisa.memset(dst=work, value=-np.inf)
    nisa.tensor_copy(dst=work[:, 0:n], src=nl.multiply(nl.load(x.tile(r0, nr, 0, n)), sign, dtype="float32"))
    done = min(-(-k // 8) * 8, n)
    if done < n:  # positions no user reads: zeros, so that nothing downstream reads unwritten memory
        zero = nl.ndarray((nr, n - done), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=zero, value=0.0)
        for dst in (keys, order):
            nl.store(dst.tensor.ap([[n, nr], [1, n - done]], offset=r0 * n + done), nl.copy(zero, dtype=dst.dtype))
    for c0 in range(0, done, 8):
        nc = min(8, n - c0)
        top = nl.ndarray((nr, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=top, src=work)
        where = nl.ndarray((nr, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=where, data=work, vals=top)  # the k-th equal value takes the k-th match
        nisa.nc_match_replace8(dst=work, data=work, vals=top, imm=-np.inf)
        nl.store(keys.tensor.ap([[n, nr], [1, nc]], offset=r0 * n + c0),
                 nl.multiply(top[:, 0:nc], sign, dtype=keys.dtype))  # fmt: skip
        nl.store(order.tensor.ap([[n, nr], [1, nc]], offset=r0 * n + c0), nl.copy(where[:, 0:nc], dtype="int32"))


def _follow(interp: SegmentInterpreter, v: Any, shape: tuple[int, ...], perm: list[int], order: Hbm, rows: int,
            n: int) -> Hbm:  # fmt: skip
    """A non-key operand permuted as the key was: the iota along the sort dim is ``order`` itself; any other
    operand is gathered element by element at row * n + order."""
    value = interp.get(v)
    iota = np.broadcast_to(np.arange(n).reshape([-1 if d == perm[-1] else 1 for d in range(len(shape))]), shape)
    if isinstance(value, np.ndarray) and np.array_equal(value, iota):
        if tiles.nki_dtype(value.dtype) == "int32":
            return order
    src = interp._permuted(value, shape, perm)
    flat = common.scratch(interp, (rows, n), "int32")
    base = interp.hbm((np.arange(rows, dtype=np.int32) * n)[:, None].repeat(n, axis=1))
    interp._map_tiles(flat, lambda r0, nr, c0, nc: nl.add(nl.load(order.tile(r0, nr, c0, nc)),
                                                          nl.load(base.tile(r0, nr, c0, nc)), dtype="int32"))  # fmt: skip
    return gathers._gather_runs(interp, Hbm(src.tensor, (rows * n,), src.dtype), flat, rows * n, 1, src.dtype)
