"""``dep-reduction`` never drops a real ordering: on every bundled kernel the reachability relation of the
dependency graph is the same before and after it (with and without each engine's program order counted), and the
simulated outputs are bit-identical with and without the pass in the pipeline."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from nkic.dialects import bir
from nkic.compiler.driver import make_context, run_neff
from nkic.frontend import TensorSpec
from nkic.kernels.flash_attention import flash_attention
from nkic.kernels.matmul import matmul
from nkic.kernels.rmsnorm import rmsnorm
from nkic.kernels.softmax import softmax
from nkic.kernels.tensor_add import tensor_add, tensor_add_spmd
from nkic.passes.dep_reduction import DepReductionPass, reachability, stretches
from nkic.passes.insert_semaphores import InsertSemaphoresPass

from pipeline_run import neff_bytes, passes_on, random_inputs


def _f32(*shape: int) -> TensorSpec:
    return TensorSpec(shape, "float32")


def _bf16(*shape: int) -> TensorSpec:
    return TensorSpec(shape, "bfloat16")


CASES: dict[str, Callable[[], object]] = {
    "tensor_add": lambda: tensor_add.trace(_f32(256, 1024), _f32(256, 1024)),
    "tensor_add_spmd2": lambda: tensor_add_spmd[2].trace(_f32(256, 512), _f32(256, 512)),
    "matmul_f32": lambda: matmul.trace(_f32(384, 256), _f32(384, 1024)),
    "matmul_bf16": lambda: matmul.trace(_bf16(256, 128), _bf16(256, 512)),
    "softmax": lambda: softmax.trace(_f32(256, 1000)),
    "rmsnorm_bf16": lambda: rmsnorm.trace(_bf16(256, 512), _bf16(512)),
    "attention_causal_bf16": lambda: flash_attention.trace(
        _bf16(1, 1024, 64), _bf16(1, 1024, 64), _bf16(1, 1024, 64), scale=0.125
    ),
    "attention_window_f32": lambda: flash_attention.trace(
        _f32(1, 512, 128), _f32(1, 512, 128), _f32(1, 512, 128), sliding_window=200
    ),
}


def _functions(module: ModuleOp) -> list[bir.FunctionOp]:
    return [f for f in module.ops if isinstance(f, bir.FunctionOp)]


def _closures(module: ModuleOp, engine_order: bool) -> list[list[int]]:
    return [reachability(s, engine_order) for fn in _functions(module) for s in stretches(fn)]


def _edges(module: ModuleOp) -> int:
    return sum(len(i.dep_list) for fn in _functions(module) for i in fn.instructions())


def _compile(traced: object, reduce: bool) -> tuple[bytes, ModuleOp | None, ModuleOp | None]:
    """The NEFF, and (with ``reduce``) the module just before and just after dep-reduction."""
    before = after = None
    for p, module, ctx in passes_on(traced):
        if isinstance(p, DepReductionPass):
            if not reduce:
                continue
            before = module.clone()
            p.apply(ctx, module)
            after = module.clone()
            continue
        if isinstance(p, InsertSemaphoresPass):
            module.verify()
        p.apply(ctx, module)
    return neff_bytes(module), before, after


@pytest.mark.parametrize("name", sorted(CASES))
def test_reachability_and_numerics_unchanged(name: str) -> None:
    traced = CASES[name]()
    reduced, before, after = _compile(traced, reduce=True)
    plain, _, _ = _compile(traced, reduce=False)
    assert before is not None and after is not None
    # The pipeline runs it with engine order: the closure including it must be unchanged; so must the closure of
    # the explicit edges plus engine order computed on the original edges (the same relation, checked both ways).
    assert _closures(before, True) == _closures(after, True)
    assert _edges(after) <= _edges(before)
    inputs = random_inputs(traced)
    want = run_neff(plain, inputs).outputs
    got = run_neff(reduced, inputs).outputs
    assert want.keys() == got.keys()
    for k in want:
        assert want[k].tobytes() == got[k].tobytes(), f"{name}: output {k} differs with dep-reduction"


@pytest.mark.parametrize("name", ["attention_causal_bf16", "softmax"])
def test_plain_reduction_keeps_explicit_reachability(name: str) -> None:
    """Without engine order the pass is a pure transitive reduction of the explicit edges: valid before any
    scheduling, so the closure of the edges alone is unchanged; and it is minimal (no kept edge is implied)."""
    traced = CASES[name]()
    _, before, _ = _compile(traced, reduce=True)
    assert before is not None
    reduced = before.clone()
    DepReductionPass(engine_order=False).apply(make_context(), reduced)
    assert _closures(before, False) == _closures(reduced, False)
    assert _edges(reduced) < _edges(before)
    again = reduced.clone()
    DepReductionPass(engine_order=False).apply(make_context(), again)
    assert _edges(again) == _edges(reduced)


def test_redundant_edge_through_other_engine_dropped_and_waits_fewer() -> None:
    """On causal attention the pass removes most edges and, through insert-semaphores, semaphore waits."""
    traced = CASES["attention_causal_bf16"]()
    _, before, after = _compile(traced, reduce=True)
    assert before is not None and after is not None
    for m in (before, after):
        InsertSemaphoresPass().apply(make_context(), m)

    def waits(m: ModuleOp) -> int:
        return sum(len(i.waits.get_values()) // 2 for fn in _functions(m) for i in fn.instructions() if i.waits)

    assert 2 * _edges(after) <= _edges(before)  # at least half (the kernel's GpSimd max folds add needed edges)
    assert waits(after) < waits(before)
