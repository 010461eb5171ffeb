"""Tune the NKI matmul tutorial's ``nki_matmul_fully_optimized_`` over its block sizes on the calibrated trn1 model.

    python bench/tune_matmul.py [--executor local|dask] [--jobs 2] [--workers 2] [--output-dir out/bench/tune-matmul]
                                [--shape K M N]

The published shape is lhsT [8192, 4096] @ rhs [8192, 8192] bf16 on trn1 (the tutorial's "[4096,8192]@[8192,8192]",
MMT in target/calibration.py). The space is 4 x 4 x 2 = 32 configurations of TILES_IN_BLOCK_M/N/K around the
tutorial's published choice, the kernel's defaults (M=16, N=2, K=8); some do not fit SBUF and are reported with
their reason. Prints the table, the best configuration, whether it is the published choice, the wall time and the
load average; writes tune.json / tune.csv into --output-dir (with its NEFF cache: a re-run compiles nothing, so time
a cold run with a fresh folder). Not part of the tests.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = "trn1"  # the tutorial's figures are trn1's

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

TUTORIAL = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "aws-neuron-sdk" / "nki" / "examples" / \
    "matrix_multiplication" / "matrix_multiplication_nki_kernels.py"
KERNEL = "nki_matmul_fully_optimized_"
# The kernel's defaults are the configuration the tutorial publishes its 6.97 ms (85% of PE roofline) for.
PUBLISHED = {"TILES_IN_BLOCK_M": 16, "TILES_IN_BLOCK_N": 2, "TILES_IN_BLOCK_K": 8}
SPACE = {"TILES_IN_BLOCK_M": [4, 8, 16, 32], "TILES_IN_BLOCK_N": [1, 2, 4, 8], "TILES_IN_BLOCK_K": [4, 8]}


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--executor", choices=("local", "dask"), default="local")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--output-dir", default="out/bench/tune-matmul")
    p.add_argument("--shape", type=int, nargs=3, metavar=("K", "M", "N"), default=(8192, 4096, 8192))
    p.add_argument("--reverse", action="store_true",
                   help="walk the grid from its other end: a second sweep sharing the first's NEFF cache folder "
                        "(NKIC_CACHE_DIR) compiles only what the first has not reached (the table is the same)")
    a = p.parse_args(argv)
    from nkic.api import tuning as tune
    from nkic.frontend import TensorSpec

    k, m, n = a.shape
    kernel = tune.load_kernel(str(TUTORIAL), KERNEL)
    load0, t0 = os.getloadavg(), time.perf_counter()
    space = {k: v[::-1] for k, v in SPACE.items()} if a.reverse else SPACE
    report = tune.tune(kernel, space, executor=a.executor, jobs=a.jobs, workers=a.workers,
                       output_dir=a.output_dir)(TensorSpec((k, m), "bfloat16"), TensorSpec((k, n), "bfloat16"))
    wall, load1 = time.perf_counter() - t0, os.getloadavg()
    published = next((t for t in report.trials if t.config == PUBLISHED), None)
    best = report.best
    cpu = sum(t.cpu_seconds for t in report.trials)
    print(f"lhsT [{k}, {m}] @ rhs [{k}, {n}] bf16, trn1, executor {a.executor} "
          f"({a.jobs if a.executor == 'local' else a.workers} workers): {wall:.0f} s wall, {cpu:.0f} s worker CPU, "
          f"{sum(t.cached for t in report.trials)} NEFFs from the cache; load average {load0[0]:.2f} -> {load1[0]:.2f}")
    if best is not None and published is not None:
        rank = report.trials.index(published) + 1
        same = "is" if best.config == PUBLISHED else "is not"
        print(f"the model's best {tune._shown(best.config)} ({best.latency_us:.1f} us) {same} the tutorial's published "
              f"choice; the published choice ranks {rank} at {published.latency_us or float('nan'):.1f} us")


if __name__ == "__main__":  # the dask executor's workers import this file's kernel module, never this script
    main(sys.argv[1:])
