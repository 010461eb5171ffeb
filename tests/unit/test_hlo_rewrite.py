"""decompose-hlo and chlo-legalize rewrite in one walk of the module (hlo/rewrite.py), not one walk per rewrite."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp

from nkic.dialects import stablehlo as hlo
from nkic.hlo.chlo_legalize import legalize_chlo
from nkic.hlo.decompose_hlo import decompose_hlo

N = 40


def _program() -> str:
    """N chained cases, each branch holding a clamp and a chlo.square: 3N ops to rewrite."""
    lines = ["func.func @main(%i: tensor<i32>, %lo: tensor<f32>, %x0: tensor<8xf32>, %hi: tensor<f32>) -> tensor<8xf32> {"]
    for k in range(N):
        lines += [
            f'  %x{k + 1} = "stablehlo.case"(%i) ({{',
            f"    %c = stablehlo.clamp %lo, %x{k}, %hi : (tensor<f32>, tensor<8xf32>, tensor<f32>) -> tensor<8xf32>",
            "    stablehlo.return %c : tensor<8xf32>",
            "  }, {",
            f"    %s = chlo.square %x{k} : tensor<8xf32> -> tensor<8xf32>",
            "    stablehlo.return %s : tensor<8xf32>",
            "  }) : (tensor<i32>) -> tensor<8xf32>",
        ]
    lines += [f"  func.return %x{N} : tensor<8xf32>", "}"]
    return "\n".join(lines)


def _names(module: ModuleOp) -> set[str]:
    return {op.name for op in module.walk()}


def test_one_walk_per_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    module = hlo.parse_stablehlo(_program())
    walks: list[int] = []
    original = ModuleOp.walk

    def counting(self: ModuleOp, **kwargs: bool):  # noqa: ANN202
        walks.append(1)
        return original(self, **kwargs)

    monkeypatch.setattr(ModuleOp, "walk", counting)
    legalize_chlo(module)
    decompose_hlo(module)
    monkeypatch.undo()
    assert len(walks) == 2
    names = _names(module)
    assert not names & {"stablehlo.case", "stablehlo.clamp", "chlo.square"}
    assert sum(op.name == "stablehlo.select" for op in module.walk()) == N
    module.verify()
