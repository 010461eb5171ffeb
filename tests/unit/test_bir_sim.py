"""``bir-sim``: BIR run in program order agrees with the concurrent NEFF simulation on real kernels, and the check
catches a missing ordering."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.compiler.driver import make_context
from nkic.frontend import TensorSpec
from nkic.kernels.flash_attention import flash_attention
from nkic.kernels.matmul import matmul
from nkic.kernels.rmsnorm import rmsnorm
from nkic.kernels.softmax import softmax
from nkic.kernels.tensor_add import tensor_add
from nkic.passes.bir_sim import BirSimPass, check
from nkic.passes.bir_to_isa import BirToIsaPass
from nkic.passes.insert_semaphores import InsertSemaphoresPass

from pipeline_run import passes_on


def _f32(*s: int) -> TensorSpec:
    return TensorSpec(s, "float32")


def _bf16(*s: int) -> TensorSpec:
    return TensorSpec(s, "bfloat16")


CASES: dict[str, Callable[[], object]] = {
    "tensor_add": lambda: tensor_add.trace(_f32(256, 512), _f32(256, 512)),
    "matmul_bf16": lambda: matmul.trace(_bf16(256, 128), _bf16(256, 512)),
    "softmax": lambda: softmax.trace(_f32(256, 1000)),
    "rmsnorm": lambda: rmsnorm.trace(_bf16(256, 512), _bf16(512)),
    "attention": lambda: flash_attention.trace(_bf16(1, 512, 64), _bf16(1, 512, 64), _bf16(1, 512, 64), scale=0.125),
}


def _bir(traced: object, drop_edges: bool = False) -> ModuleOp:
    """The module just before bir-to-isa; ``drop_edges`` removes every dependency edge before insert-semaphores."""
    for p, module, ctx in passes_on(traced):
        if isinstance(p, BirToIsaPass):
            break
        if drop_edges and isinstance(p, InsertSemaphoresPass):
            for fn in [f for f in module.ops if isinstance(f, bir.FunctionOp)]:
                for inst in fn.instructions():
                    inst.properties.pop("deps", None)
        p.apply(ctx, module)
    return module


@pytest.mark.parametrize("name", sorted(CASES))
def test_program_order_agrees_with_concurrent_simulation(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = _bir(CASES[name]())
    before = str(module)
    BirSimPass().apply(make_context(), module)
    assert "agree bit for bit" in capsys.readouterr().out
    assert str(module) == before  # the IR is left alone


def test_a_missing_ordering_is_caught() -> None:
    module = _bir(CASES["softmax"](), drop_edges=True)
    with pytest.raises(PassFailedException, match="output 'out' differs between program order and the concurrent"):
        check(module, 0, 100_000)


def test_big_kernels_are_skipped_by_the_bound() -> None:
    assert "skipped" in check(_bir(CASES["tensor_add"]()), 0, 1)
