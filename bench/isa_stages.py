"""The pipeline's last stages in isolation: bir-to-isa, isa-verify, the final module verify and the NEFF writer.

``python bench/isa_stages.py CASE [REPS]`` (cases as in ``bench/compile.py``): compiles the case once, keeping the
module as it enters bir-to-isa, then REPS times (default 3) runs the four stages in pipeline order on a fresh clone
of it, with the garbage collector paused as the driver does, and prints the smallest CPU time (process time) of
each, the instruction count and the SHA-256 prefix of the NEFF written (metadata differs from ``bench/compile.py``'s,
so compare this prefix between trees, not with that table). Running the stages in pipeline order matters: the
verifier and the NEFF writer share memoised work (``IsaInst.to_instr``).
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without install

from nkic.bench.compile import CASES, _trace  # noqa: E402


def main(case: str, reps: int) -> None:
    from nkic.compiler.driver import compile_traced
    from nkic.support.gcpause import gc_paused
    from nkic.passes.bir_to_isa import BirToIsaPass
    from nkic.passes.isa_verify import IsaVerifyPass
    from nkic.runtime.neff import write_neff
    from nkic.tools.targets import isa_module_to_neff

    saved: dict[str, Any] = {}
    apply = BirToIsaPass.apply

    def keep_input(self: BirToIsaPass, ctx: Any, op: Any) -> None:
        saved["module"], saved["ctx"] = op.clone(), ctx
        apply(self, ctx, op)

    BirToIsaPass.apply = keep_input  # type: ignore[method-assign]
    _, kernel, dims = CASES[case]
    compile_traced(_trace(kernel, dims))
    BirToIsaPass.apply = apply  # type: ignore[method-assign]

    best: dict[str, float] = {}
    with gc_paused():
        for _ in range(reps):
            module, ctx = saved["module"].clone(), saved["ctx"]
            out: dict[str, bytes] = {}
            stages: dict[str, Callable[[], object]] = {
                "bir-to-isa": lambda: BirToIsaPass().apply(ctx, module),
                "isa-verify": lambda: IsaVerifyPass().apply(ctx, module),
                "verify": module.verify,
                "neff": lambda: out.setdefault("neff", write_neff(isa_module_to_neff(module, "kernel", {}, None))),
            }
            for name, run in stages.items():
                c0 = time.process_time()
                run()
                best[name] = min(best.get(name, float("inf")), time.process_time() - c0)
    ops = sum(1 for _ in module.walk())
    sha = hashlib.sha256(out["neff"]).hexdigest()[:12]
    print(f"{case}: {ops} ops, " + ", ".join(f"{k} {v:.3f} s" for k, v in best.items()) + f", NEFF {sha}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
