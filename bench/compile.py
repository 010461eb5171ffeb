"""Compile-time scaling table: trace and compile time, NEFF instructions, ms per instruction and peak RSS.

``python bench/compile.py [CASE ...]`` (``make bench-compile``); cases: ``attn-1k attn-4k attn-16k attn-64k-rolled mm-2k
mm-10k mm-100k``
(the default is every case but ``attn-16k`` and ``mm-100k``, which take minutes). Only the compiler runs, not the simulator. Each case
runs in a fresh interpreter, so its peak RSS is its own and no case warms a cache for the next; the NEFF's SHA-256
prefix is printed so a change that must not alter the generated code can be checked against the previous table.
Trace and compile are wall times; the CPU column (process time of both) is the steadier figure on a shared machine,
and ms per instruction is computed from it.

* ``attn-<S>``: the bundled flash attention, causal, bf16, d=128, one head, seqlen S.
* ``attn-64k-rolled``: ``flash_attention_rolled`` at seqlen 64K compiled with ``roll_loops=True`` (ARCHITECTURE.md
  "Rolled loops"; the program grows as O(S)); ``bench/rolled.py`` compares the rolled forms.
* ``mm-<N>k``: a ``static_range`` matmul chain (every K tile loaded, accumulated in PSUM, evacuated and stored;
  ``nl.static_range`` unrolls at trace time, so the program has ~N thousand engine instructions).
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

from nkic import api as nki  # noqa: E402

nl = nki.language
nisa = nki.isa


@nki.jit
def matmul_chain(lhsT, rhs):
    """``out = lhsT.T @ rhs`` with every loop a ``static_range``: one unrolled instruction per tile operation."""
    k_total, m_total = lhsT.shape
    _, n_total = rhs.shape
    out = nl.ndarray((m_total, n_total), dtype=lhsT.dtype, buffer=nl.shared_hbm, name="out")
    for m in nl.static_range(m_total // 128):
        for n in nl.static_range(n_total // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.static_range(k_total // 128):
                a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                nisa.dma_copy(dst=b, src=rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                nisa.nc_matmul(acc, a, b)
            res = nl.ndarray((128, 512), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], src=res)
    return out


# case -> (description, kernel name, argument shapes); matmul: 3 instructions per K tile + 2 per output tile
CASES: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "attn-1k": ("attention causal bf16 d128, 1K", "attention", (1024,)),
    "attn-4k": ("attention causal bf16 d128, 4K", "attention", (4096,)),
    "attn-16k": ("attention causal bf16 d128, 16K", "attention", (16384,)),
    "attn-64k-rolled": ("attention causal bf16 d128, 64K, rolled loops", "attention_rolled", (65536,)),
    "mm-2k": ("static_range matmul K=2048 M=512 N=5120", "matmul_chain", (2048, 512, 5120)),
    "mm-10k": ("static_range matmul K=2048 M=2560 N=5120", "matmul_chain", (2048, 2560, 5120)),
    "mm-100k": ("static_range matmul K=4096 M=8192 N=8192", "matmul_chain", (4096, 8192, 8192)),
}
DEFAULT = ["attn-1k", "attn-4k", "attn-64k-rolled", "mm-2k", "mm-10k"]


def _trace(kernel: str, dims: tuple[int, ...]) -> Any:
    from nkic.frontend import TensorSpec

    if kernel.startswith("attention"):
        from nkic.kernels.flash_attention import flash_attention, flash_attention_rolled

        s = TensorSpec((1, dims[0], 128), "bfloat16")
        fn = flash_attention_rolled if kernel == "attention_rolled" else flash_attention
        return fn.trace(s, s, s, scale=128**-0.5)
    k, m, n = dims
    return matmul_chain.trace(TensorSpec((k, m), "bfloat16"), TensorSpec((k, n), "bfloat16"))


def run_one(case: str) -> dict[str, Any]:
    """Trace and compile one case in this process."""
    from nkic.compiler.driver import compile_traced
    from nkic.runtime.neff import read_neff

    _, kernel, dims = CASES[case]
    t0, c0 = time.perf_counter(), time.process_time()
    traced = _trace(kernel, dims)
    trace_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    compiled = compile_traced(traced, roll_loops=kernel == "attention_rolled")
    compile_s = time.perf_counter() - t0
    cpu_s = time.process_time() - c0
    neff = read_neff(compiled.neff)
    instructions = sum(len(i) for sg in neff.subgraphs for i in sg.engines.values())
    return {
        "case": case, "trace_s": trace_s, "compile_s": compile_s, "instructions": instructions, "cpu_s": cpu_s,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "neff_sha": hashlib.sha256(compiled.neff).hexdigest()[:12], "neff_bytes": len(compiled.neff),
        "stages": [(s.name, s.seconds, s.ops) for s in compiled.stages],
    }  # fmt: skip


def _row(r: dict[str, Any]) -> str:
    ms = 1e3 * r["cpu_s"] / max(r["instructions"], 1)
    return (f"| {CASES[r['case']][0]} | {r['trace_s']:.2f} s | {r['compile_s']:.2f} s | {r['cpu_s']:.2f} s | "
            f"{r['instructions']} | {ms:.2f} | {r['peak_mb']:.0f} MB | {r['neff_sha']} |")  # fmt: skip


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:  # the child: one case, its result as JSON on the last line
        print(json.dumps(run_one(argv[1])))
        return
    cases = argv or DEFAULT
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {list(CASES)}")
    print("| workload | trace | compile | CPU (trace + compile) | NEFF instructions | CPU ms / instruction | peak RSS "
          "| NEFF sha256 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
        out = subprocess.run([sys.executable, __file__, "--one", case], env=env, check=True, capture_output=True,
                             text=True).stdout  # fmt: skip
        r = json.loads(out.strip().splitlines()[-1])
        print(_row(r), flush=True)
        slowest = sorted(r["stages"], key=lambda s: -s[1])[:4]
        print("  " + ", ".join(f"{n} {t:.2f} s" for n, t, _ in slowest), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
