"""The NEFF cache's warm-hit cost against a cold compile (issue 25: "tracing is cheap relative to compiling; measure
and report the warm-hit cost").

``python bench/cache_warm.py [--repeat N] [CASE ...]``; cases: ``add`` (the bundled tensor_add, float32
[256, 1024]), ``matmul`` (the bundled matmul, bf16 lhsT [1024, 1024] x rhs [1024, 1024]), ``attn-4k`` (the bundled
flash attention, causal bf16 d128, seqlen 4096). Every measurement is a fresh interpreter, as a team member's next
process would be: a cold compile into an empty ``NKIC_CACHE_DIR``, then a warm one from the entry it stored.

Columns (median of ``--repeat`` runs, wall time): the cold compile (trace + passes + store); the warm hit, split
into the trace and the ``cache`` stage (printing the penguin module, hashing it with the settings, reading and
checking the entry); and the build identity, nkic's version and the digest of its own sources, computed once per
process by the first compile that uses the cache (so a process compiling many kernels pays it once). Process start
and imports are not counted.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))  # run from a checkout without install

CASES = {
    "add": "tensor_add, float32 [256, 1024]",
    "matmul": "matmul, bf16 [1024, 1024] x [1024, 1024]",
    "attn-4k": "flash attention 4K causal bf16 d128",
}


def _call(case: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    from nkic.frontend import TensorSpec

    if case == "add":
        from nkic.kernels.tensor_add import tensor_add

        a = TensorSpec((256, 1024), "float32")
        return tensor_add, (a, a), {}
    if case == "matmul":
        from nkic.kernels.matmul import matmul

        m = TensorSpec((1024, 1024), "bfloat16")
        return matmul, (m, m), {}
    from nkic.kernels.flash_attention import flash_attention

    s = TensorSpec((1, 4096, 128), "bfloat16")
    return flash_attention, (s, s, s), {"scale": 128**-0.5}


def run_one(case: str) -> dict[str, Any]:
    """One compile through the cache in this process (the child)."""
    from nkic.compiler import cache
    from nkic.compiler.driver import compile_kernel

    kernel, args, kwargs = _call(case)
    t0 = time.perf_counter()
    try:
        cache.compiler_digest()
    except cache.Uncacheable:  # nkic's files were edited since this process imported them: the parent retries
        return {"uncacheable": True}
    identity_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    result = compile_kernel(kernel, args, kwargs)
    total_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    stages = {s.name: s.seconds for s in result.stages}
    return {"cached": result.cached, "total_s": total_s, "cpu_s": cpu_s, "identity_s": identity_s,
            "trace_s": stages["trace"], "cache_s": stages.get("cache", 0.0),
            "neff_bytes": len(result.neff)}  # fmt: skip


def child(case: str, cache_dir: str) -> dict[str, Any]:
    env = dict(os.environ, NKIC_CACHE_DIR=cache_dir, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    for _ in range(10):
        out = subprocess.run([sys.executable, __file__, "--one", case], env=env, check=True, capture_output=True,
                             text=True).stdout  # fmt: skip
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        if not result.get("uncacheable"):
            return result
    raise SystemExit("nkic's sources kept changing under every process; measure on a quiet checkout")


def measure(case: str, repeat: int) -> dict[str, float]:
    cold: list[dict[str, Any]] = []
    warm: list[dict[str, Any]] = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="nkic-cache-bench-") as d:
            first = child(case, d)
            second = child(case, d)
        if first["cached"] or not second["cached"]:  # nkic's sources edited between the two processes: a miss
            print(f"  {case}: skipped a pair (cold cached={first['cached']}, warm cached={second['cached']})",
                  file=sys.stderr)  # fmt: skip
            continue
        cold.append(first)
        warm.append(second)

    def med(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rows) if rows else float("nan")

    return {"cold": med(cold, "total_s"), "warm": med(warm, "total_s"), "trace": med(warm, "trace_s"),
            "cold_cpu": med(cold, "cpu_s"), "warm_cpu": med(warm, "cpu_s"),
            "cache": med(warm, "cache_s"), "identity": med(warm + cold, "identity_s"), "pairs": len(cold),
            "neff_kb": med(cold, "neff_bytes") / 1024}  # fmt: skip


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        print(json.dumps(run_one(argv[1])))
        return
    repeat = 3
    if argv[:1] == ["--repeat"]:
        repeat, argv = int(argv[1]), argv[2:]
    cases = argv or list(CASES)
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {list(CASES)}")
    print("| kernel | NEFF | cold compile (CPU) | warm hit: trace + key + read (CPU) | of which trace | key + read "
          "| warm / cold | build identity (once per process) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        r = measure(case, repeat)
        print(f"| {CASES[case]} | {r['neff_kb']:.0f} KB | {r['cold']:.3f} s ({r['cold_cpu']:.3f}) | {r['warm']:.3f} s "
              f"({r['warm_cpu']:.3f}) | {r['trace']:.3f} s | {r['cache']:.3f} s | {r['warm'] / r['cold']:.0%} "
              f"| {r['identity']:.3f} s |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
