"""The traced module names its generation (``nkic.target``), and passes run without a target plan for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nkic import api as nki
from nkic.dialects.common import TARGET_ATTR, module_target
from nkic.frontend import TensorSpec
from nkic.passes.assign_engines import AssignEnginesPass
from nkic.passes.targeting import for_module

nl, nisa = nki.language, nki.isa


def copies(a):  # noqa: ANN001, ANN201
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    for _ in range(6):
        y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=y, src=x)
        x = y
    nisa.dma_copy(dst=out, src=x)
    return out


@pytest.mark.parametrize("platform,gen", [("trn1", "gen2"), ("trn2", "gen3"), ("trn3", "gen4")])
def test_the_tracer_stamps_the_generation(platform: str, gen: str) -> None:
    module = nki.jit(copies, platform_target=platform).trace(TensorSpec((128, 64), "float32")).module
    assert module_target(module) == gen and module.attributes[TARGET_ATTR].data == gen
    assert for_module(AssignEnginesPass(), module).target == gen
    assert for_module(AssignEnginesPass(target="gen4"), module).target == "gen4"  # an explicit option wins


def test_nkic_opt_on_a_gen2_dump_plans_for_gen2(tmp_path: Path) -> None:
    module = nki.jit(copies, platform_target="trn1").trace(TensorSpec((128, 64), "float32")).module
    (tmp_path / "k.mlir").write_text(str(module))
    engines = {}
    for gen in ("gen2", ""):
        option = f"{{target={gen}}}" if gen else ""
        run = subprocess.run([sys.executable, "-m", "nkic.tools.opt", str(tmp_path / "k.mlir"), "-p",
                              f"nkic-frontend-lowering,bir-unroll,assign-engines{option}"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        engines[gen] = sorted({line.split('engine = "')[1].split('"')[0]
                               for line in run.stdout.splitlines() if "bir.tensor_copy" in line})  # fmt: skip
    assert "act" not in engines[""]  # tensor_copy has no ScalarE form on NeuronCore v2
    assert engines[""] == engines["gen2"]
