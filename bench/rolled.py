"""Rolled vs unrolled loops (issue 10): instruction count and compile time of causal attention.

``python bench/rolled.py [CASE ...]``; a case is ``<form>-<S>`` with S in {1k, 2k, 4k, 8k, 16k, 64k} and form

* ``unrolled``: the bundled ``flash_attention`` (its KV tile loops are Python loops: unrolled at trace time);
* ``rolled-off``: ``flash_attention_rolled`` (the unmasked KV tiles in ``nl.affine_range``) with every loop
  unrolled by the backend (the default, ``roll_loops=False``);
* ``rolled``: the same kernel with ``roll_loops=True``: each uniform run of KV tiles stays one loop body.

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

SIZES = {"1k": 1024, "2k": 2048, "4k": 4096, "8k": 8192, "16k": 16384, "64k": 65536}
DEFAULT = ["unrolled-4k", "rolled-off-4k", "rolled-4k", "rolled-16k", "rolled-64k"]


def run_one(case: str) -> dict[str, Any]:
    from nkic.driver import compile_traced
    from nkic.frontend import TensorSpec
    from nkic.kernels.flash_attention import flash_attention, flash_attention_rolled
    from nkic.runtime.neff import read_neff

    form, size = case.rsplit("-", 1)
    kernel = flash_attention if form == "unrolled" else flash_attention_rolled
    spec = TensorSpec((1, SIZES[size], 128), "bfloat16")
    t0, c0 = time.perf_counter(), time.process_time()
    traced = kernel.trace(spec, spec, spec, scale=128**-0.5)
    trace_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    compiled = compile_traced(traced, roll_loops=form == "rolled")
    compile_s = time.perf_counter() - t0
    cpu_s = time.process_time() - c0
    neff = read_neff(compiled.neff)
    instructions = sum(len(i) for sg in neff.subgraphs for i in sg.engines.values())
    return {
        "case": case, "trace_s": trace_s, "compile_s": compile_s, "cpu_s": cpu_s, "instructions": instructions,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "neff_sha": hashlib.sha256(compiled.neff).hexdigest()[:12],
    }  # fmt: skip


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        print(json.dumps(run_one(argv[1])))
        return
    print("| case | trace | compile | CPU | NEFF instr. | CPU ms / instr. | peak RSS | NEFF sha256 |")
    print("|---|---|---|---|---|---|---|---|")
    for case in argv or DEFAULT:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
        out = subprocess.run([sys.executable, __file__, "--one", case], env=env, check=True, capture_output=True,
                             text=True).stdout  # fmt: skip
        r = json.loads(out.strip().splitlines()[-1])
        ms = 1e3 * r["cpu_s"] / max(r["instructions"], 1)
        print(f"| {case} | {r['trace_s']:.2f} s | {r['compile_s']:.2f} s | {r['cpu_s']:.2f} s | {r['instructions']} | "
              f"{ms:.2f} | {r['peak_mb']:.0f} MB | {r['neff_sha']} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
