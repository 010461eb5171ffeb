"""Timing-only runs of the backend's optional transformations (issue 11: schedule-aware allocation, post-schedule,
DMA coalescing/transposes) on the kernels they target, one case per process (the tutorial case sets the trn1
target through the environment):

``python bench/backend_variants.py CASE [VARIANT ...]``, CASE one of ``tutorial`` (the NKI matmul tutorial's
``nki_matmul_fully_optimized_`` at lhsT [1024, 2048] @ rhs [1024, 8192], trn1), ``matmul`` (the bundled
``kernels/matmul.py``, bf16 2048^3, gen3), ``attn4k`` / ``attn8k`` (the bundled causal bf16 d128 flash attention,
gen3). A VARIANT is a comma-separated list of ``key=value`` fields of ``nkic.passes.options.CompileOptions`` (e.g.
``alloc_policy=stack`` or ``post_schedule=false``); ``default`` is the pipeline as it is. Prints one markdown row per
variant: simulated time, PE % of the bf16 roofline, busy % per engine, CPU seconds to compile.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
if len(sys.argv) > 1 and sys.argv[1] == "tutorial":
    os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = "trn1"  # before the kernels are traced: their options read it

import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import nkic  # noqa: E402

nkic.install_nki_alias()

from nkic.compiler import driver  # noqa: E402
from nkic.frontend import TensorSpec  # noqa: E402
from nkic.runtime.neff import read_neff  # noqa: E402
from nkic.runtime.simulator import simulate  # noqa: E402
from nkic.target.machine import DEFAULT_TARGET, get_target  # noqa: E402



def _case(name: str) -> tuple[Any, str, float]:
    """(traced kernel, simulator target, FLOPs)."""
    if name == "tutorial":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from matmul_tutorial import load_tutorial

        k, m, n = 1024, 2048, 8192
        kern = load_tutorial().nki_matmul_fully_optimized_  # type: ignore[attr-defined]
        return kern.trace(TensorSpec((k, m), "bfloat16"), TensorSpec((k, n), "bfloat16")), "gen2", 2.0 * k * m * n
    if name == "matmul":
        from nkic.kernels.matmul import matmul

        s = 2048
        return matmul.trace(TensorSpec((s, s), "bfloat16"), TensorSpec((s, s), "bfloat16")), DEFAULT_TARGET, 2.0 * s**3
    if name in ("attn4k", "attn8k"):
        from nkic.kernels.flash_attention import flash_attention

        s, d = {"attn4k": 4096, "attn8k": 8192}[name], 128
        specs = [TensorSpec((1, s, d), "bfloat16") for _ in range(3)]
        return flash_attention.trace(*specs, scale=d**-0.5), DEFAULT_TARGET, 2 * 2 * s * s * d / 2
    raise SystemExit(f"unknown case {name}")


def _options(variant: str) -> dict[str, Any]:
    if variant == "default":
        return {}
    out: dict[str, Any] = {}
    for kv in variant.split(","):
        key, value = kv.split("=")
        out[key] = int(value) if value.isdigit() else {"true": True, "false": False}.get(value, value)
    return out


def run(case: str, variant: str) -> str:
    traced, target, flops = _case(case)
    t0 = time.process_time()
    neff = driver.compile_traced(traced, **_options(variant)).neff  # the variant's CompileOptions fields
    compile_s = time.process_time() - t0
    prof = simulate(read_neff(neff), {}, target=target, timing_only=True).profile
    busy = {k: v / prof.total_ns for k, v in prof.busy_ns.items() if v and not k.startswith("q")}
    pe = flops / prof.total_ns / get_target(target).bf16_peak_flops_per_ns
    cols = ", ".join(f"{k} {v:.0%}" for k, v in busy.items())
    return f"| {case} | {variant} | {prof.total_ns / 1e3:.1f} µs | {pe:.1%} | {cols} | {compile_s:.1f} s |"


if __name__ == "__main__":
    for v in sys.argv[2:] or ["default"]:
        print(run(sys.argv[1], v), flush=True)
