"""NEFF bytes of the bundled kernels are pinned: a refactor that changes what the compiler emits fails here.

``data/neff_golden.json`` maps each case to the SHA-256 of its NEFF. A deliberate change of the generated code
(a new schedule, a new encoding) regenerates it with ``NKIC_REGEN_GOLDEN=1 pytest tests/unit/test_neff_golden.py``
and says so in its commit.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from nkic.compiler.driver import compile_traced
from nkic.frontend import TensorSpec
from nkic.kernels.flash_attention import flash_attention
from nkic.kernels.matmul import matmul
from nkic.kernels.rmsnorm import rmsnorm
from nkic.kernels.softmax import softmax
from nkic.kernels.tensor_add import tensor_add, tensor_add_spmd

GOLDEN = Path(__file__).parent / "data" / "neff_golden.json"


def _f32(*shape: int) -> TensorSpec:
    return TensorSpec(shape, "float32")


def _bf16(*shape: int) -> TensorSpec:
    return TensorSpec(shape, "bfloat16")


CASES: dict[str, Callable[[], object]] = {
    "tensor_add_256x1024": lambda: tensor_add.trace(_f32(256, 1024), _f32(256, 1024)),
    "tensor_add_spmd2": lambda: tensor_add_spmd[2].trace(_f32(256, 512), _f32(256, 512)),
    "matmul_f32_384x256x1024": lambda: matmul.trace(_f32(384, 256), _f32(384, 1024)),
    "matmul_bf16_256x128x512": lambda: matmul.trace(_bf16(256, 128), _bf16(256, 512)),
    "softmax_256x1000": lambda: softmax.trace(_f32(256, 1000)),
    "rmsnorm_bf16_256x512": lambda: rmsnorm.trace(_bf16(256, 512), _bf16(512)),
    "attention_causal_bf16_1024_d64": lambda: flash_attention.trace(
        _bf16(2, 1024, 64), _bf16(1, 1024, 64), _bf16(1, 1024, 64), scale=0.125
    ),
    "attention_window_f32_512_d128": lambda: flash_attention.trace(
        _f32(1, 512, 128), _f32(1, 512, 128), _f32(1, 512, 128), sliding_window=200
    ),
    "attention_full_f32_384_d32": lambda: flash_attention.trace(
        _f32(1, 384, 32), _f32(1, 256, 32), _f32(1, 256, 32), causal_mask=False
    ),
}


def _digest(name: str) -> str:
    return hashlib.sha256(compile_traced(CASES[name]()).neff).hexdigest()


def test_regenerate_if_asked() -> None:
    if not os.environ.get("NKIC_REGEN_GOLDEN"):
        pytest.skip("set NKIC_REGEN_GOLDEN=1 to rewrite data/neff_golden.json")
    GOLDEN.write_text(json.dumps({n: _digest(n) for n in CASES}, indent=2, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", sorted(CASES))
def test_neff_bytes_unchanged(name: str) -> None:
    golden = json.loads(GOLDEN.read_text())
    assert name in golden, f"no golden digest for {name}: regenerate with NKIC_REGEN_GOLDEN=1"
    assert _digest(name) == golden[name]
