"""``make run`` / ``nkic demo``: compile a bundled kernel, simulate it, check it against numpy, report."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from nkic.compiler.driver import compile_traced, run_neff
from nkic.kernels.matmul import matmul
from nkic.support import safeio


def run_demo(out_dir: Path) -> None:
    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((256, 128), dtype=np.float32)
    rhs = rng.standard_normal((256, 1024), dtype=np.float32)
    traced = matmul.trace(lhsT, rhs)
    safeio.make_dirs(out_dir)  # a file in the way is one OutputError line, not FileExistsError
    t0 = time.perf_counter()
    compiled = compile_traced(traced, dump_dir=out_dir / "ir")
    compile_s = time.perf_counter() - t0
    neff_path = out_dir / "matmul.neff"
    safeio.write_bytes(neff_path, compiled.neff)
    t0 = time.perf_counter()
    result = run_neff(compiled.neff, {"lhsT": lhsT, "rhs": rhs})
    sim_s = time.perf_counter() - t0
    got = result.outputs[traced.outputs[0][0]]
    want = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    ok = err < 1e-5
    print("nkic demo: matmul out[128,1024] = lhsT[256,128]^T @ rhs[256,1024] (float32, K=256 accumulated in PSUM)")
    print(f"  compile: {compile_s:.2f} s through {len(compiled.stages)} stages; NEFF {len(compiled.neff)} bytes")
    print(f"  simulate: {sim_s:.2f} s wall, {result.profile.total_cycles} cycles ({result.profile.total_ns:.0f} ns)")
    print(f"  max relative error vs numpy: {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    print(f"  NEFF: {neff_path}")
    print(f"  IR after every stage: {out_dir / 'ir'}")
    if not ok:
        raise SystemExit(1)
