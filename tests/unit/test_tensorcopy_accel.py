"""``tensorcopy-accel``: every fold keeps the simulated outputs bit-identical; copies it must keep, it keeps."""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

from nkic.dialects import bir
from nkic.compiler.driver import run_neff
from nkic.frontend import TensorSpec
# the program-order attention kernel: flash_attention itself reads PSUM directly wherever the ISA allows (its copies
# feed PE transposes' consumers or GpSimd), so it has no copy left to fold
from nkic.kernels.flash_attention import flash_attention_rolled as flash_attention
from nkic.kernels.matmul import matmul
from nkic.passes.resolve_psum_accumulate import ResolvePsumAccumulatePass
from nkic.passes.tensorcopy_accel import fold
from nkic.runtime.neff import read_neff
from pipeline_run import neff_bytes, passes_on


def _bf16(*shape: int) -> TensorSpec:
    return TensorSpec(shape, "bfloat16")


def _compile(traced: object, accel: bool) -> tuple[bytes, int]:
    folded = 0
    for p, module, ctx in passes_on(traced):
        p.apply(ctx, module)
        if accel and isinstance(p, ResolvePsumAccumulatePass):
            folded = sum(fold(f) for f in module.ops if isinstance(f, bir.FunctionOp))
            module.verify()
    return neff_bytes(module), folded


CASES: dict[str, tuple[Callable[[], object], bool]] = {
    # (trace, whether some copy must fold): attention's PSUM max/exp copies fold; matmul's copies feed DMA stores
    "attention_causal": (lambda: flash_attention.trace(_bf16(1, 512, 128), _bf16(1, 512, 128), _bf16(1, 512, 128),
                                                       scale=0.088), True),  # fmt: skip
    "attention_window_f32": (lambda: flash_attention.trace(TensorSpec((1, 256, 64), "float32"),
                                                           TensorSpec((1, 256, 64), "float32"),
                                                           TensorSpec((1, 256, 64), "float32"),
                                                           sliding_window=100), True),  # fmt: skip
    "matmul_bf16": (lambda: matmul.trace(_bf16(256, 128), _bf16(256, 512)), False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_folds_keep_numerics(name: str) -> None:
    make, expect_folds = CASES[name]
    traced = make()
    rng = np.random.default_rng(5)
    inputs = {n: rng.standard_normal(s).astype(ml_dtypes.bfloat16 if d == "bfloat16" else d)
              for n, s, d in traced.inputs}  # type: ignore[attr-defined]  # fmt: skip
    plain, _ = _compile(traced, False)
    accel, folded = _compile(traced, True)
    assert (folded > 0) == expect_folds
    want, got = run_neff(plain, inputs), run_neff(accel, inputs)
    for k in want.outputs:
        assert want.outputs[k].tobytes() == got.outputs[k].tobytes(), f"{name}: {k} changed by tensorcopy-accel"

    def copies(neff: bytes) -> int:
        return sum(i.opcode == "TENSOR_COPY" for sg in read_neff(neff).subgraphs for s in sg.engines.values()
                   for i in s)  # fmt: skip

    assert copies(plain) - copies(accel) == folded
