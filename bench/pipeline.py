"""Compile and simulate matmul and softmax at two sizes: per-stage compile time and op counts, simulated cycles,
simulator wall time, and the ratio to a plain numpy reference. Run with ``make bench`` (not part of the tests)."""

from __future__ import annotations

import os

# Before numpy loads: the simulator runs many small matmuls, which a threaded BLAS only slows down (measured 30x
# slower on 2 busy cores); a value already set wins. nkic itself sets no environment variables.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # noqa: E402 — run from a checkout without install

from nkic.compiler.driver import compile_traced, run_neff  # noqa: E402
from nkic.kernels.matmul import matmul  # noqa: E402
from nkic.kernels.softmax import softmax  # noqa: E402


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def bench(label: str, kernel: object, args: tuple[np.ndarray, ...], ref: Callable[..., np.ndarray]) -> None:
    t0 = time.perf_counter()
    traced = kernel.trace(*args)  # type: ignore[attr-defined]
    trace_s = time.perf_counter() - t0
    compiled = compile_traced(traced)
    inputs = {name: a for (name, *_), a in zip(traced.inputs, args)}
    t0 = time.perf_counter()
    result = run_neff(compiled.neff, inputs)
    sim_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    want = ref(*args)
    np_s = time.perf_counter() - t0
    got = result.outputs[traced.outputs[0][0]]
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    p = result.profile
    print(f"\n== {label}: max rel err {err:.1e}, NEFF {len(compiled.neff)} B")
    print(f"   trace {trace_s * 1e3:8.1f} ms")
    for s in compiled.stages:
        print(f"   {s.name:26s} {s.seconds * 1e3:8.1f} ms  {s.ops:7d} ops")
    print(f"   compile total {compiled.total_seconds:.2f} s")
    busy = ", ".join(f"{k} {v / p.total_ns:.0%}" for k, v in sorted(p.busy_ns.items()) if v)
    print(f"   simulated {p.total_cycles} cycles ({p.total_ns / 1e3:.1f} us); busy: {busy}")
    print(f"   simulator wall {sim_s:.2f} s vs numpy {np_s * 1e3:.2f} ms (x{sim_s / max(np_s, 1e-9):.0f})")


def main() -> None:
    rng = np.random.default_rng(0)
    for k, m, n in ((512, 128, 512), (1024, 512, 2048)):
        a = rng.standard_normal((k, m), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        bench(f"matmul K={k} M={m} N={n} fp32", matmul, (a, b), lambda x, y: x.T @ y)
    for rows, cols in ((256, 512), (2048, 2048)):
        x = rng.standard_normal((rows, cols), dtype=np.float32)
        bench(f"softmax {rows}x{cols} fp32", softmax, (x,), _softmax_ref)


if __name__ == "__main__":
    main()
