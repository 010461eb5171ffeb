"""The NKI matmul tutorial's four kernels, run unmodified on the calibrated cost model (trn1), against the latencies
the tutorial publishes for [4096, 8192] @ [8192, 8192] bf16 on one trn1 NeuronCore.

``python bench/matmul_tutorial.py`` runs the published size (about 100k instructions per kernel for the first three:
minutes each); ``python bench/matmul_tutorial.py K M N`` another size (lhsT [K, M], rhs [K, N]). The runs are
timing-only (``simulate(..., timing_only=True)``): no numerics, so the full size fits a CPU. Not part of the tests.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = "trn1"  # the tutorial's figures are trn1's

import importlib.util
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # noqa: E402 — run from a checkout without install

import nkic  # noqa: E402

nkic.install_nki_alias()

from nkic.compiler.driver import compile_traced  # noqa: E402
from nkic.frontend import TensorSpec  # noqa: E402
from nkic.runtime.neff import read_neff  # noqa: E402
from nkic.runtime.simulator import simulate  # noqa: E402
from nkic.target.calibration import MEASUREMENTS, MMT_SHAPE  # noqa: E402
from nkic.target.machine import get_target  # noqa: E402

TUTORIAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "aws-neuron-sdk" / "nki" / "examples" / \
    "matrix_multiplication" / "matrix_multiplication_nki_kernels.py"
# MMT (general/nki/tutorials/matrix_multiplication.rst): latency in ms on trn1 at [4096, 8192] @ [8192, 8192] bf16,
# from the calibration table (target/calibration.py).
PUBLISHED_MS = {m.name: m.published_ns / 1e6 for m in MEASUREMENTS if m.published_shape == MMT_SHAPE}
PE_BF16_FLOPS_PER_NS = get_target("gen2").bf16_peak_flops_per_ns  # trn1 TensorE: 128x128 MACs at 2.8 GHz


def load_tutorial() -> object:
    spec = importlib.util.spec_from_file_location("nki_matmul_tutorial", TUTORIAL.resolve())
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(kernel: object, k: int, m: int, n: int) -> dict[str, float]:
    """Trace, compile and simulate (timing only) one kernel; wall seconds, instructions, latency and PE fraction."""
    t0 = time.process_time()
    traced = kernel.trace(TensorSpec((k, m), "bfloat16"), TensorSpec((k, n), "bfloat16"))  # type: ignore[attr-defined]
    neff = compile_traced(traced).neff
    compile_s = time.process_time() - t0
    t0 = time.process_time()
    parsed = read_neff(neff)
    profile = simulate(parsed, {}, target="gen2", timing_only=True).profile
    sim_s = time.process_time() - t0
    roofline_ns = 2.0 * k * m * n / PE_BF16_FLOPS_PER_NS
    instrs = sum(len(v) for sg in parsed.subgraphs for v in sg.engines.values())
    busy = profile.busy_ns
    return {"ms": profile.total_ns / 1e6, "pe": roofline_ns / profile.total_ns, "instrs": instrs,
            "compile_s": compile_s, "sim_s": sim_s,
            "pe_busy": busy.get("pe", 0.0) / profile.total_ns}  # fmt: skip


def main(argv: list[str]) -> None:
    k, m, n = (int(a) for a in argv[:3]) if len(argv) >= 3 else MMT_SHAPE
    names = argv[3:] or list(PUBLISHED_MS)
    tutorial = load_tutorial()
    scale = (k * m * n) / (MMT_SHAPE[0] * MMT_SHAPE[1] * MMT_SHAPE[2])
    print(f"lhsT [{k}, {m}] @ rhs [{k}, {n}] bf16 on trn1 (published figures scaled by FLOPs: x{scale:.4g})")
    print("| kernel | instructions | simulated ms | published ms (scaled) | ratio | PE roofline | PE busy |"
          " compile s | simulate s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        r = measure(getattr(tutorial, name), k, m, n)
        pub = PUBLISHED_MS[name] * scale
        print(f"| `{name}` | {r['instrs']} | {r['ms']:.3f} | {pub:.3f} | {r['ms'] / pub:.2f} | {r['pe']:.1%} |"
              f" {r['pe_busy']:.1%} | {r['compile_s']:.1f} | {r['sim_s']:.1f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
