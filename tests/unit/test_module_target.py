"""The traced module names its generation (``nkic.target``), and passes run without a target plan for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nkic import api as nki
from nkic.dialects.common import TARGET_ATTR, module_target
from nkic.frontend import TensorSpec
from nkic.passes.options import CompileOptions
from nkic.passes.targeting import target_of

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
    assert target_of(module).name == gen


def test_no_pass_takes_a_target() -> None:
    """The generation is the module's (or the compile options', which the driver stamps): no pass option names it."""
    from dataclasses import fields

    from nkic.passes import get_all_passes

    for name, load in get_all_passes().items():
        assert "target" not in {f.name for f in fields(load())}, name


def test_the_driver_stamps_the_options_target() -> None:
    """compile_module with an explicit target compiles for it, and the NEFF records it."""
    from nkic.compiler.driver import compile_module
    from nkic.runtime.neff import read_neff

    module = nki.jit(copies, platform_target="trn2").trace(TensorSpec((128, 64), "float32")).module
    neff = compile_module(module, options=CompileOptions(target="trn1")).neff
    assert module_target(module) == "gen2" and read_neff(neff).metadata["target"] == "gen2"


def test_nkic_opt_on_a_gen2_dump_plans_for_gen2(tmp_path: Path) -> None:
    module = nki.jit(copies, platform_target="trn1").trace(TensorSpec((128, 64), "float32")).module
    (tmp_path / "k.mlir").write_text(str(module))
    engines = {}
    for gen in ("gen2", ""):
        option = ["--generation", gen] if gen else []
        run = subprocess.run([sys.executable, "-m", "nkic.tools.opt", str(tmp_path / "k.mlir"), *option, "-p",
                              "nkic-frontend-lowering,bir-unroll,assign-engines"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        engines[gen] = sorted({line.split('engine = "')[1].split('"')[0]
                               for line in run.stdout.splitlines() if "bir.tensor_copy" in line})  # fmt: skip
    assert "act" not in engines[""]  # tensor_copy has no ScalarE form on NeuronCore v2
    assert engines[""] == engines["gen2"]
