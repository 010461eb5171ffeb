"""Flash attention (causal, bf16, d=128, bs=1) at seqlen 1024, 4096 and 16384: trace time, per-pass compile time
and op counts, NEFF size, simulated cycles, per-engine busy %, PE utilisation against the bf16 roofline, simulator
wall time vs a plain numpy reference. ``python bench/attention.py [SEQLEN ...]``; writes a profile of the first run
as Chrome trace JSON (``out/bench/attention-<S>.trace.json``, opens in Perfetto)."""

from __future__ import annotations

import os

# Before numpy loads: the simulator runs many small matmuls, which a threaded BLAS only slows down (measured 30x
# slower on 2 busy cores); a value already set wins. nkic itself sets no environment variables.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))  # run from a checkout without install

from nkic.compiler.driver import compile_traced, run_neff  # noqa: E402
from nkic.kernels.flash_attention import flash_attention  # noqa: E402
from nkic.target.machine import DEFAULT_TARGET, get_target  # noqa: E402



def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    s = (q @ np.swapaxes(k, 1, 2)) * scale
    n = s.shape[-1]
    s = np.where(np.tril(np.ones((s.shape[1], n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def run(seqlen: int, d: int = 128, target: str = DEFAULT_TARGET, profile_dir: Path | None = None) -> dict[str, object]:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, seqlen, d)).astype(ml_dtypes.bfloat16) for _ in range(3))
    scale = 1.0 / np.sqrt(d)
    t0 = time.perf_counter()
    traced = flash_attention.trace(q, k, v, scale=scale)
    trace_s = time.perf_counter() - t0
    compiled = compile_traced(traced)
    t0 = time.perf_counter()
    result = run_neff(compiled.neff, {"q": q, "k": k, "v": v}, target=target)
    sim_s = time.perf_counter() - t0
    q32, k32, v32 = (x.astype(np.float32) for x in (q, k, v))
    t0 = time.perf_counter()
    want = reference(q32, k32, v32, scale)
    np_s = time.perf_counter() - t0
    got = result.outputs["out"].astype(np.float32)
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    p = result.profile
    flops = 2 * 2 * seqlen * seqlen * d / 2  # QK^T and PV, causal half
    pe_util = flops / (p.total_ns * 1e-9) / (get_target(target).bf16_peak_flops_per_ns * 1e9)
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
        p.write_chrome_trace(profile_dir / f"attention-{seqlen}.trace.json")
    return {
        "seqlen": seqlen, "err": err, "trace_s": trace_s, "stages": compiled.stages,
        "compile_s": compiled.total_seconds, "neff_bytes": len(compiled.neff), "cycles": p.total_cycles,
        "ns": p.total_ns, "busy": {k: v / p.total_ns for k, v in sorted(p.busy_ns.items()) if v},
        "pe_util": pe_util, "sim_s": sim_s, "numpy_s": np_s, "instructions": {k: v for k, v in sorted(p.instr_counts.items()) if not k.startswith("q")},
    }  # fmt: skip


def report(r: dict[str, object]) -> None:
    print(f"\n== causal bf16 d=128 seqlen {r['seqlen']}: max rel err {r['err']:.1e}")
    print(f"   trace {r['trace_s']:.2f} s")
    for s in r["stages"]:  # type: ignore[attr-defined]
        print(f"   {s.name:26s} {s.seconds:8.2f} s  {s.ops:8d} ops")
    print(f"   compile total {r['compile_s']:.2f} s; NEFF {r['neff_bytes']} bytes")
    busy = ", ".join(f"{k} {v:.0%}" for k, v in r["busy"].items())  # type: ignore[attr-defined]
    print(f"   simulated {r['cycles']} cycles ({r['ns'] / 1e3:.1f} us); busy: {busy}")  # type: ignore[operator]
    counts = r["instructions"]  # per engine (DMAs counted on SP, not again on their queues)
    print(f"   ISA instructions: {sum(counts.values())} ({', '.join(f'{k} {v}' for k, v in counts.items())})")  # type: ignore[attr-defined]
    print(f"   PE utilisation vs bf16 roofline: {r['pe_util']:.1%}")
    print(f"   simulator wall {r['sim_s']:.2f} s vs numpy {r['numpy_s']:.3f} s "
          f"(x{r['sim_s'] / max(r['numpy_s'], 1e-9):.0f})")  # type: ignore[operator]  # fmt: skip


def main() -> None:
    seqlens = [int(a) for a in sys.argv[1:]] or [1024, 4096, 16384]
    for i, s in enumerate(seqlens):
        report(run(s, profile_dir=ROOT / "out" / "bench" if i == 0 else None))


if __name__ == "__main__":
    main()
