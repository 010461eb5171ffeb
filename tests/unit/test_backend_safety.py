"""The backend's optional transformations never change what a kernel computes: on every bundled kernel the
simulated outputs are bit-identical with and without ``post-schedule``, ``dma-optimization``'s coalescing,
``dma-transpose`` (forced on every qualifying group, whatever the cost model says) and each ``allocate-memory``
policy (lru, rotate, stack), and every variant's dependency graph passes ``bir-verify``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from nkic.dialects import bir
from nkic.compiler.driver import run_neff
from nkic.frontend import TensorSpec
from nkic.kernels.flash_attention import flash_attention
from nkic.kernels.matmul import matmul
from nkic.kernels.rmsnorm import rmsnorm
from nkic.kernels.softmax import softmax
from nkic.kernels.tensor_add import tensor_add, tensor_add_spmd
from nkic.passes.dma_optimization import DmaOptimizationPass
from nkic.passes.dma_transpose import DmaTransposePass

from pipeline_run import neff_bytes, passes_on, random_inputs


def _f32(*shape: int) -> TensorSpec:
    return TensorSpec(shape, "float32")


def _bf16(*shape: int) -> TensorSpec:
    return TensorSpec(shape, "bfloat16")


CASES: dict[str, Callable[[], Any]] = {
    "tensor_add": lambda: tensor_add.trace(_f32(256, 1024), _f32(256, 1024)),
    "tensor_add_spmd2": lambda: tensor_add_spmd[2].trace(_f32(256, 512), _f32(256, 512)),
    "matmul_f32": lambda: matmul.trace(_f32(384, 256), _f32(384, 1024)),
    "matmul_bf16": lambda: matmul.trace(_bf16(512, 256), _bf16(512, 1024)),
    "softmax": lambda: softmax.trace(_f32(256, 1000)),
    "rmsnorm_bf16": lambda: rmsnorm.trace(_bf16(256, 512), _bf16(512)),
    "attention_causal_bf16": lambda: flash_attention.trace(
        _bf16(1, 512, 64), _bf16(1, 512, 64), _bf16(1, 512, 64), scale=0.125
    ),
    "attention_window_f32": lambda: flash_attention.trace(
        _f32(1, 512, 128), _f32(1, 512, 128), _f32(1, 512, 128), sliding_window=200
    ),
}

# None of the new transformations, then each one alone, then all of them with the other allocation policies.
VARIANTS: list[dict[str, Any]] = [
    {"post_schedule": False, "coalesce_dma": False},
    {"post_schedule": True, "coalesce_dma": False},
    {"post_schedule": False, "coalesce_dma": True, "num_queues": 1},  # one queue: transfers queue up, merges pay
    {"alloc_policy": "lru"},
    {"alloc_policy": "stack"},
    {"dma_transpose": "force"},  # every qualifying PE transpose group becomes a DMA transpose
]


def _compile(traced: Any, options: dict[str, Any]) -> tuple[bytes, int]:
    """The NEFF and how many transfers ``dma-optimization`` left."""
    opts = dict(options)
    force = opts.get("dma_transpose") == "force"
    if force:
        opts["dma_transpose"] = True
    dmas = 0
    for p, module, ctx in passes_on(traced, **opts):
        if force and isinstance(p, DmaTransposePass):
            p = dataclasses.replace(p, force=True)
        p.apply(ctx, module)
        if isinstance(p, DmaOptimizationPass):
            fns = [f for f in module.ops if isinstance(f, bir.FunctionOp)]
            dmas = sum(1 for f in fns for i in f.instructions() if i.OPNAME.startswith("dma"))
    module.verify()
    return neff_bytes(module), dmas


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_identical_with_and_without_each_transformation(name: str) -> None:
    traced = CASES[name]()
    inputs = random_inputs(traced)
    results = []
    for options in VARIANTS:
        neff, dmas = _compile(traced, options)
        results.append((options, run_neff(neff, inputs).outputs, dmas))
    _, want, _ = results[0]
    for options, got, _ in results[1:]:
        assert want.keys() == got.keys()
        for k in want:
            assert want[k].tobytes() == got[k].tobytes(), f"{name}: output {k} differs with {options}"


def test_coalescing_merges_the_blocked_matmul_loads() -> None:
    """The check above is not vacuous for coalescing: on one queue the blocked matmul's per-K-tile loads merge."""
    traced = CASES["matmul_bf16"]()
    _, separate = _compile(traced, {"coalesce_dma": False, "num_queues": 1})
    _, merged = _compile(traced, {"coalesce_dma": True, "num_queues": 1})
    assert merged < separate


def test_dma_transpose_rewrites_the_attention_transposes() -> None:
    """The check above is not vacuous for dma-transpose: forced, the bf16 attention's Pᵀ transposes become DMAs."""
    traced = CASES["attention_causal_bf16"]()
    _, plain = _compile(traced, {})
    _, forced = _compile(traced, {"dma_transpose": "force"})
    assert forced > plain
