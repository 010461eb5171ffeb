"""``route-matmul``: a plain 2-D ``dot_general`` becomes ``stablehlo.custom_call @AwsNeuronMLPNKI`` naming the
library ``matmul`` kernel, when the cost model says the kernel is faster.

The Neuron compiler's MLP router (``LowerToNKIKernelCC``) emits ``AwsNeuronMLPNKI`` for matmul-heavy subgraphs
(worked example B: "the MLP-to-NKI router (#56, LowerToNKIKernelCC) emits AwsNeuronMLPNKI"); here each matmul of
such a block is a candidate on its own. ``kernels/matmul.py`` computes ``lhsT[K, M]^T @ rhs[K, N]``, K and M
multiples of 128, N a multiple of 512 (or at most 512), the result in the operands' dtype; so a candidate is a
dot of one dtype with no batch dims, the rhs contracting its first dim, whose shapes fit. An lhs given as
``[M, K]`` is transposed before the call (the op-by-op lowering does that transpose on TensorE).

Whether a candidate is routed is not a shape list: ``decide="model"`` asks the cost hook the layer above installs
(``program_cost``: a whole program's simulated time on the timing model) and keeps, greedily in program order,
each routing that makes the whole program faster; with no hook installed nothing is routed. ``decide="always"``
routes every candidate (tests of the rewrite, measurements).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp, StringAttr
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import stablehlo as hlo
from nkic.hlo import tiles
from nkic.hlo.lower import MATMUL_TARGET, inline_calls, main_function
from nkic.hlo.router import _insert, _tensor, _transpose

KERNEL = "matmul"
TILE, TILE_N = 128, 512  # kernels/matmul.py: K and M tiled by 128, N by 512 (or N <= 512 in one tile)


@dataclass(frozen=True)
class Matmul:
    """A routable dot: ``out[M, N] = lhs @ rhs[K, N]``, lhs given as [K, M] (``lhs_transposed``) or [M, K]."""

    k: int
    m: int
    n: int
    dtype: str  # the NKI dtype name of both operands and the result
    lhs_transposed: bool


# a whole StableHLO module -> its simulated ns on the timing model; installed by the layer that can compile and
# simulate (``nkic.interop.framework``), which hlo/ may not import. Per thread (and task), as the active trace is:
# two programs compiled at once each ask their own compile settings' cost.
ProgramCost = Callable[[ModuleOp], float]
_COST: ContextVar[ProgramCost | None] = ContextVar("nkic_route_matmul_cost", default=None)


@contextmanager
def program_cost(cost: ProgramCost) -> Iterator[None]:
    """The cost hook ``decide="model"`` asks while the block runs."""
    token = _COST.set(cost)
    try:
        yield
    finally:
        _COST.reset(token)


def candidate(dot: hlo.DotGeneralOp) -> Matmul | None:
    """``dot`` as a call of the library matmul kernel, or None when the kernel does not compute it."""
    lhs, rhs = dot.lhs[0], dot.lhs[1]
    ls, rs, out = hlo.shape_of(lhs), hlo.shape_of(rhs), hlo.shape_of(dot.results[0])
    dn = dot.dot_dimension_numbers
    if len(ls) != 2 or len(rs) != 2 or dn.dims("lhs_batching_dimensions") or dn.dims("rhs_batching_dimensions"):
        return None
    if dn.dims("rhs_contracting_dimensions") != (0,) or dn.dims("lhs_contracting_dimensions") not in ((0,), (1,)):
        return None
    dtypes = {tiles.nki_dtype(tiles.result_dtype(v)) for v in (lhs, rhs, dot.results[0])}
    if len(dtypes) != 1 or not dtypes <= {"bfloat16", "float32"}:
        return None  # the kernel's result is in its operands' dtype, rounded from fp32 PSUM
    transposed = dn.dims("lhs_contracting_dimensions") == (0,)
    k, m = ls if transposed else ls[::-1]
    n = rs[1]
    if (m, n) != tuple(out) or k % TILE or m % TILE or (n > TILE_N and n % TILE_N):
        return None
    return Matmul(k, m, n, dtypes.pop(), transposed)


def route_dot(dot: hlo.DotGeneralOp, found: Matmul) -> hlo.CustomCallOp:
    """Replace ``dot`` by ``custom_call @AwsNeuronMLPNKI(lhsT, rhs)``."""
    lhs = dot.lhs[0] if found.lhs_transposed else _transpose(dot.lhs[0], [1, 0], dot)
    element = hlo.ttype(dot.results[0]).element_type
    call = hlo.CustomCallOp.create(
        operands=[lhs, dot.lhs[1]],
        result_types=[_tensor((found.m, found.n), element)],
        properties={
            "call_target_name": StringAttr(MATMUL_TARGET),
            "backend_config": StringAttr(json.dumps({"kernel_name": KERNEL}, sort_keys=True)),
            "api_version": IntegerAttr(1, IntegerType(32)),
        },
    )
    dot.results[0].replace_all_uses_with(_insert(call, dot))
    Rewriter.erase_op(dot)
    return call


def _dots(fn: func.FuncOp) -> list[hlo.DotGeneralOp]:
    return [o for o in fn.body.block.ops if isinstance(o, hlo.DotGeneralOp)]


def _route_indices(module: ModuleOp, chosen: list[int]) -> None:
    """Route the dots of ``module``'s main function at ``chosen`` (indices among its dots, all candidates)."""
    dots = _dots(main_function(module))
    for i in chosen:
        found = candidate(dots[i])
        assert found is not None
        route_dot(dots[i], found)


def model_choice(module: ModuleOp, indices: list[int], cost: ProgramCost) -> list[int]:
    """The candidates the cost model routes, greedily in program order: each one is tried on a copy of the program
    with the ones kept so far, and kept when the whole program's simulated time goes down. The whole program, not
    the dot alone: a dot op by op takes its operand in whatever layout its producer stores (a fused chain stores a
    result only matmuls read transposed, as ``lhsT``), where the call's ``lhsT`` is a transpose of its own."""
    best = cost(module.clone())
    chosen: list[int] = []
    for i in indices:
        trial = module.clone()
        _route_indices(trial, [*chosen, i])
        t = cost(trial)
        if t < best:
            chosen, best = [*chosen, i], t
    return chosen


@dataclass(frozen=True)
class RouteMatmul(ModulePass):
    """Plain 2-D matmuls → ``custom_call @AwsNeuronMLPNKI`` (the library ``matmul``) where the cost model says so."""

    name = "route-matmul"
    decide: str = "model"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.decide not in ("model", "always"):
            raise PassFailedException(f"route-matmul: decide must be 'model' or 'always', not '{self.decide}'")
        inline_calls(op)
        fn = main_function(op)
        indices = [i for i, dot in enumerate(_dots(fn)) if candidate(dot) is not None]
        if self.decide == "model":
            cost = _COST.get()
            indices = model_choice(op, indices, cost) if indices and cost is not None else []
        _route_indices(op, indices)
