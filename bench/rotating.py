"""Rotating buffers (issue 24): a block tensor indexed by a rolled loop, rolled vs unrolled.

``python bench/rotating.py`` compiles and simulates (timing only) two kernels of ``tests/unit/test_rotating_buffers.py``:

* ``scale_blocks`` (legacy): 53 fp32 blocks of [128, 2048], 2.04x SBUF, loaded, doubled and stored one per iteration;
* ``prefetch_blocks`` (legacy): the same tensor, software-pipelined (block b + 1 loaded while block b is scaled);
* ``modern_blocks`` (NKI 0.2+): a [128, 8, 512] tensor whose block b the loop loads, adds 1 to and stores;

unrolled, rolled (``roll_loops=True``), rolled with ``NKIC_ROLL_INTERLEAVE=2``, and (modern, which fits whole) rolled
with ``rotate-blocks`` left out. Columns: NEFF instructions, simulated µs (the timeline alone, gen3).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))  # run from a checkout without install

from nkic.compiler.driver import compile_kernel, run_neff  # noqa: E402
from nkic.passes.rotate_blocks import RotateBlocksPass  # noqa: E402
from nkic.runtime.neff import read_neff  # noqa: E402

_SPEC = importlib.util.spec_from_file_location("rotating_cases", ROOT / "tests" / "unit" / "test_rotating_buffers.py")
assert _SPEC is not None and _SPEC.loader is not None
CASES = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(CASES)  # the kernels the tests check against numpy


def measure(kernel: object, a: np.ndarray, roll: bool, interleave: int = 1) -> str:
    os.environ["NKIC_ROLL_INTERLEAVE"] = str(interleave)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            neff = compile_kernel(kernel, (a,), roll_loops=roll).neff  # type: ignore[arg-type]
        except Exception as e:  # noqa: BLE001 — the table says how it failed
            return f"fails: {str(e).splitlines()[0][:120]} |"
    program = read_neff(neff)
    instrs = sum(len(s) for sg in program.subgraphs for s in sg.engines.values())
    us = run_neff(program, {}, timing_only=True).profile.total_ns / 1e3
    return f"{instrs} | {us:.1f} |"


def main() -> None:
    legacy = np.zeros((CASES.TWICE_SBUF, 128, CASES.F), np.float32)
    modern = np.zeros((128, 8 * 512), np.float32)
    print("| kernel | form | NEFF instr. | simulated µs |\n|---|---|---|---|")
    for name, kernel, a in (("scale_blocks 2.04x SBUF", CASES.scale_blocks, legacy),
                            ("prefetch_blocks 2.04x SBUF", CASES.prefetch_blocks, legacy),
                            ("modern_blocks", CASES.modern_blocks, modern)):
        print(f"| {name} | unrolled | {measure(kernel, a, False)}", flush=True)
        print(f"| {name} | rolled | {measure(kernel, a, True)}", flush=True)
        print(f"| {name} | rolled, interleave 2 | {measure(kernel, a, True, 2)}", flush=True)
    apply = RotateBlocksPass.apply
    RotateBlocksPass.apply = lambda self, ctx, op: None  # type: ignore[method-assign]
    print(f"| modern_blocks | rolled, no rotation | {measure(CASES.modern_blocks, modern, True)}", flush=True)
    print(f"| modern_blocks | rolled, interleave 2, no rotation | {measure(CASES.modern_blocks, modern, True, 2)}")
    RotateBlocksPass.apply = apply  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
