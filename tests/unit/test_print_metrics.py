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
from nkic.compiler.driver import compile_traced, make_context, run_neff
from nkic.frontend import TensorSpec
from nkic.kernels.softmax import softmax
from nkic.kernels.matmul import matmul
from nkic.library import RESOLVER
from nkic.passes.bir_to_isa import BirToIsaPass
from nkic.passes.pipelines import backend, frontend_lowering
from nkic.passes.print_metrics import metrics, report
from nkic.passes.resolver import use_resolver
from nkic.target.machine import get_target

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def _scheduled_bir(traced: object) -> bir.FunctionOp:
    """The function as print-metrics sees it in the driver's pipeline (for the kernel's target)."""
    module = traced.module.clone()  # type: ignore[attr-defined]
    ctx = make_context()
    with use_resolver(RESOLVER):
        for p in (*frontend_lowering(), *backend()):  # the module names its target (the tracer stamps it)
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
    # engine). Busy time is the simulator's model without what only a run knows: VectorE/ScalarE/GpSimd agree
    # exactly, TensorE may run at up to half rate (gen3 throttling after idle time), and the DMA queues share the
    # core's bandwidth, so per queue they differ while their total stays close.
    assert m.counts == {k: prof.instr_counts[k] for k in m.counts}
    assert sum(v for k, v in m.counts.items() if k.startswith("q")) == prof.instr_counts.get("sp", 0)
    for track, busy in m.busy_ns.items():
        if track in ("act", "dve", "pool"):
            assert busy == pytest.approx(prof.busy_ns[track], rel=1e-9)
        elif track == "pe":
            assert busy - 1e-6 <= prof.busy_ns[track] <= 2 * busy + 1e-6
    queues = [k for k in m.busy_ns if k.startswith("q")]
    # a transfer's span alone on its queue, or longer while other queues' transfers share the core's bandwidth
    alone, shared = sum(m.busy_ns[k] for k in queues), sum(prof.busy_ns[k] for k in queues)
    assert alone - 1e-6 <= shared <= len(queues) * alone + 1e-6
    # the critical path (with the NEFF's launch and teardown, as the run) and the busiest compute engine stay lower
    # bounds of the simulated time
    assert m.overhead_ns == pytest.approx(prof.launch_ns + prof.teardown_ns) and m.overhead_ns > 2000
    assert m.overhead_ns < m.critical_ns <= prof.total_ns + 1e-6
    assert max(v for k, v in m.busy_ns.items() if not k.startswith("q")) <= prof.total_ns + 1e-6
    assert 0 < m.high_water["sbuf"] <= m.capacity["sbuf"]
    assert m.control == 0  # no runtime loop: the static counts are the dynamic ones
    assert m.simulated_ns == pytest.approx(prof.total_ns, rel=0.02)


def _bundled() -> list[tuple[str, object, tuple[object, ...], dict[str, object]]]:
    from nkic.kernels.flash_attention import flash_attention
    from nkic.kernels.rmsnorm import rmsnorm
    from nkic.kernels.tensor_add import tensor_add

    f32, bf16 = "float32", "bfloat16"
    qkv = TensorSpec((1, 512, 128), bf16)
    return [
        ("flash_attention", flash_attention, (qkv, qkv, qkv), {"scale": 0.088}),
        ("matmul", matmul, (TensorSpec((512, 256), bf16), TensorSpec((512, 1024), bf16)), {}),
        ("rmsnorm", rmsnorm, (TensorSpec((256, 512), f32), TensorSpec((512,), f32)), {}),
        ("softmax", softmax, (TensorSpec((256, 1000), f32),), {}),
        ("tensor_add", tensor_add, (TensorSpec((256, 1024), f32), TensorSpec((256, 1024), f32)), {}),
    ]


@pytest.mark.parametrize("case", _bundled(), ids=lambda case: case[0])
@pytest.mark.parametrize("target", ["gen2", "gen3"])
def test_metrics_and_simulation_agree_within_2_percent(case: tuple, target: str) -> None:
    """Every bundled kernel on trn1 and trn2: print-metrics' simulated line is what the run reports (the same model
    and overheads: DMA latency, dependent latencies, shared ports, throttling), and its lower bounds stay below."""
    _, kernel, args, kwargs = case
    traced = kernel.with_options(target=target).trace(*args, **kwargs)
    m = metrics(_scheduled_bir(traced), get_target(target))
    total = run_neff(compile_traced(traced).neff, {}, target=target, timing_only=True).profile.total_ns
    assert m.simulated_ns == pytest.approx(total, rel=0.02)
    assert m.critical_ns <= total + 1e-6
    assert max(v for k, v in m.busy_ns.items() if not k.startswith("q")) <= total + 1e-6


def test_metrics_before_insert_semaphores_say_why_not_simulated() -> None:
    traced = softmax.trace(TensorSpec((128, 256), "float32"))
    module = traced.module.clone()
    ctx = make_context()
    with use_resolver(RESOLVER):
        for p in (*frontend_lowering(), *backend()):
            if p.name == "insert-semaphores":
                break
            p.apply(ctx, module)
    fn = next(f for f in module.ops if isinstance(f, bir.FunctionOp))
    m = metrics(fn, get_target("gen3"))
    assert m.simulated_ns is None and "insert-semaphores" in m.not_simulated
    assert "simulated: not yet" in report(m)


def test_cli_compile_metrics(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "nkic", "compile", f"{KERNELS / 'softmax.py'}:softmax", "--arg",
                        "x=float32[128,256]", "--metrics", "-o", str(tmp_path / "k.neff")],
                       capture_output=True, text=True, check=True)  # fmt: skip
    assert re.search(r"print-metrics @main: \d+ instructions", r.stdout)
    assert re.search(r"critical path: [\d.]+ ns over \d+ instructions", r.stdout)
    assert re.search(r"simulated \(the runtime's timeline on this schedule, as nkic run reports it\): [\d.]+ ns",
                     r.stdout)  # fmt: skip
    assert "SBUF high-water" in r.stdout and r.stdout.rstrip().splitlines()[-1].startswith("compiled softmax")
