"""Rolled vs unrolled loops (issue 10): instruction count and compile time of causal attention.

``python bench/rolled.py [CASE ...]``; a case is ``<form>-<S>`` with S in {1k, 2k, 4k, 8k, 16k, 64k} and form

* ``unrolled``: the bundled ``flash_attention`` (its KV tile loops are Python loops: unrolled at trace time);
* ``rolled-off``: ``flash_attention_rolled`` (the unmasked KV tiles in ``nl.affine_range``) with every loop
  unrolled by the backend (the default, ``roll_loops=False``);
* ``rolled``: the same kernel with ``roll_loops=True``: its group and section loops roll (its KV tile loops are
  ``nl.static_range``: ``unroll_tiles=True``, the default);
* ``rolled-nested``: ``flash_attention_rolled(unroll_tiles=False)`` with ``roll_loops=True``: the KV tile loops are
  ``nl.affine_range`` too, rolled inside the group and section loops.

``--interleave N`` compiles with ``NKIC_ROLL_INTERLEAVE=N`` (N consecutive iterations per rolled body).

``python bench/rolled.py --check 8k [rolled|rolled-nested] [--interleave N]`` instead simulates the rolled attention
at that size and compares it with a float64 numpy reference and with the same kernel unrolled (too slow for
``make test``, which checks 2K).

Default: ``unrolled-4k rolled-off-4k rolled-4k rolled-16k rolled-64k``. Each case runs in a fresh interpreter (its
own peak RSS, no warm caches). Only the compiler runs. CPU is the process time of trace + compile; "instr." counts
every engine instruction of the NEFF (control instructions once per engine stream, semaphore waits included).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))  # run from a checkout without install

SIZES = {"1k": 1024, "2k": 2048, "4k": 4096, "8k": 8192, "16k": 16384, "32k": 32768, "64k": 65536}
DEFAULT = ["unrolled-4k", "rolled-off-4k", "rolled-4k", "rolled-16k", "rolled-64k"]


def run_one(case: str) -> dict[str, Any]:
    from nkic.compiler.driver import compile_traced
    from nkic.frontend import TensorSpec
    from nkic.kernels.flash_attention import flash_attention, flash_attention_rolled
    from nkic.runtime.neff import read_neff

    form, size = case.rsplit("-", 1)
    kernel = flash_attention if form == "unrolled" else flash_attention_rolled
    spec = TensorSpec((1, SIZES[size], 128), "bfloat16")
    t0, c0 = time.perf_counter(), time.process_time()
    extra = {"unroll_tiles": False} if form == "rolled-nested" else {}
    traced = kernel.trace(spec, spec, spec, scale=128**-0.5, **extra)
    trace_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    compiled = compile_traced(traced, roll_loops=form.startswith("rolled") and form != "rolled-off")
    compile_s = time.perf_counter() - t0
    cpu_s = time.process_time() - c0
    neff = read_neff(compiled.neff)
    instructions = sum(len(i) for sg in neff.subgraphs for i in sg.engines.values())
    return {
        "case": case, "trace_s": trace_s, "compile_s": compile_s, "cpu_s": cpu_s, "instructions": instructions,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "neff_sha": hashlib.sha256(compiled.neff).hexdigest()[:12],
    }  # fmt: skip


def check(size: str, form: str = "rolled") -> None:
    """Rolled attention at ``size`` against numpy and against the unrolled program (simulated)."""
    import ml_dtypes
    import numpy as np

    from nkic.compiler.driver import compile_kernel, run_neff
    from nkic.kernels.flash_attention import flash_attention_rolled

    s = SIZES[size]
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, s, 128)).astype(ml_dtypes.bfloat16) for _ in range(3))
    scale = 128**-0.5
    kwargs = {"scale": scale, "unroll_tiles": form != "rolled-nested"}
    names = [n for n, _, _ in flash_attention_rolled.trace(q, k, v, **kwargs).inputs]
    outs = {}
    for roll in (True, False):
        c0 = time.process_time()
        neff = compile_kernel(flash_attention_rolled, (q, k, v), kwargs, roll_loops=roll).neff
        c1 = time.process_time()
        result = run_neff(neff, dict(zip(names, (q, k, v))))
        (outs[roll],) = result.outputs.values()
        print(f"{'rolled' if roll else 'unrolled'}: compile {c1 - c0:.1f} s CPU, simulate {time.process_time() - c1:.1f}"
              f" s CPU, {result.profile.total_ns / 1e3:.0f} us simulated", flush=True)  # fmt: skip
    qf, kf, vf = (np.asarray(x, np.float64)[0] for x in (q, k, v))
    scores = np.where(np.tril(np.ones((s, s), bool)), scale * qf @ kf.T, -np.inf)
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)) @ vf
    got = np.asarray(outs[True], np.float64)[0]
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    same = np.array_equal(np.asarray(outs[True]).view(np.uint16), np.asarray(outs[False]).view(np.uint16))
    print(f"rolled vs numpy: max relative error {err:.2e} (bf16 tolerance 2e-2); rolled == unrolled bytes: {same}")
    if err >= 2e-2 or not same:
        raise SystemExit(1)


def main(argv: list[str]) -> None:
    if "--interleave" in argv:  # N consecutive iterations per rolled body, in this process and the cases'
        at = argv.index("--interleave")
        os.environ["NKIC_ROLL_INTERLEAVE"] = argv[at + 1]
        argv = argv[:at] + argv[at + 2 :]
    if argv[:1] == ["--check"]:
        check(argv[1] if len(argv) > 1 else "8k", argv[2] if len(argv) > 2 else "rolled")
        return
    if argv[:1] == ["--one"]:
        print(json.dumps(run_one(argv[1])))
        return
    print("| case | trace | compile | CPU | NEFF instr. | CPU ms / instr. | peak RSS | NEFF sha256 |")
    print("|---|---|---|---|---|---|---|---|")
    for case in argv or DEFAULT:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
        done = subprocess.run([sys.executable, __file__, "--one", case], env=env, capture_output=True, text=True)
        if done.returncode:
            print(f"| {case} | failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else '?'} |")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        ms = 1e3 * r["cpu_s"] / max(r["instructions"], 1)
        print(f"| {case} | {r['trace_s']:.2f} s | {r['compile_s']:.2f} s | {r['cpu_s']:.2f} s | {r['instructions']} | "
              f"{ms:.2f} | {r['peak_mb']:.0f} MB | {r['neff_sha']} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
