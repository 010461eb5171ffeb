"""``print-metrics``: the report's numbers against what the simulator measures on real kernels."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from nkic.dialects import bir
from nkic.driver import compile_traced, make_context, run_neff
from nkic.frontend import TensorSpec
from nkic.kernels.softmax import softmax
from nkic.kernels.matmul import matmul
from nkic.library import RESOLVER
from nkic.passes.bir_to_isa import BirToIsaPass
from nkic.passes.pipelines import backend, frontend_lowering
from nkic.passes.print_metrics import metrics
from nkic.passes.resolver import use_resolver
from nkic.target.machine import get_target

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def _scheduled_bir(traced: object) -> bir.FunctionOp:
    module = traced.module.clone()  # type: ignore[attr-defined]
    ctx = make_context()
    with use_resolver(RESOLVER):
        for p in (*frontend_lowering(), *backend()):
            if isinstance(p, BirToIsaPass):
                break
            p.apply(ctx, module)
    return next(f for f in module.ops if isinstance(f, bir.FunctionOp))


@pytest.mark.parametrize("make", [lambda: softmax.trace(TensorSpec((256, 1000), "float32")),
                                  lambda: matmul.trace(TensorSpec((256, 128), "bfloat16"),
                                                       TensorSpec((256, 512), "bfloat16"))])  # fmt: skip
def test_metrics_agree_with_the_simulator(make: object) -> None:
    traced = make()  # type: ignore[operator]
    m = metrics(_scheduled_bir(traced), get_target("gen3"))
    x = {n: np.random.default_rng(0).standard_normal(s).astype(ml_dtypes.bfloat16 if d == "bfloat16" else d)
         for n, s, d in traced.inputs}  # fmt: skip
    prof = run_neff(compile_traced(traced).neff, x).profile
    # counts per engine and per queue are exactly the simulator's (which also shows each DMA's issue on its
    # engine). Busy time is the static per-instruction estimate; the simulator's calibrated timeline adds what only a
    # run knows: VectorE/ScalarE/GpSimd agree exactly, TensorE may run at up to half rate (gen3 throttling after idle
    # time), and the DMA queues share the core's bandwidth, so per queue they differ while their total stays close.
    assert m.counts == {k: prof.instr_counts[k] for k in m.counts}
    assert sum(v for k, v in m.counts.items() if k.startswith("q")) == prof.instr_counts.get("sp", 0)
    for track, busy in m.busy_ns.items():
        if track in ("act", "dve", "pool"):
            assert busy == pytest.approx(prof.busy_ns[track], rel=1e-9)
        elif track == "pe":
            assert busy - 1e-6 <= prof.busy_ns[track] <= 2 * busy + 1e-6
    queues = [k for k in m.busy_ns if k.startswith("q")]
    assert sum(m.busy_ns[k] for k in queues) == pytest.approx(sum(prof.busy_ns[k] for k in queues), rel=0.15)
    # the critical path and the busiest compute engine stay lower bounds of the simulated time
    assert m.critical_ns <= prof.total_ns + 1e-6
    assert max(v for k, v in m.busy_ns.items() if not k.startswith("q")) <= prof.total_ns + 1e-6
    assert 0 < m.high_water["sbuf"] <= m.capacity["sbuf"]
    assert m.control == 0  # no runtime loop: the static counts are the dynamic ones


def test_cli_compile_metrics(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "nkic", "compile", f"{KERNELS / 'softmax.py'}:softmax", "--arg",
                        "x=float32[128,256]", "--metrics", "-o", str(tmp_path / "k.neff")],
                       capture_output=True, text=True, check=True)  # fmt: skip
    assert re.search(r"print-metrics @main: \d+ instructions", r.stdout)
    assert re.search(r"critical path: [\d.]+ ns over \d+ instructions", r.stdout)
    assert "SBUF high-water" in r.stdout and r.stdout.rstrip().splitlines()[-1].startswith("compiled softmax")
