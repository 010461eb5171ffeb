"""Allocation at the edge of SBUF (issue 24): spilling and the trace-time capacity check on the kernels that need them.

``python bench/spill.py [CASE ...]``; cases (default: all):

* ``mamba-8k``: the fused-mamba tutorial's ``mamba_v2`` at seq 8192 (batch 1, 256 channels, 16 states: five fp32
  [128, 8192] tiles of 32 KiB live in a state iteration beside delta, u and the accumulator), simulated and checked
  against a float64 numpy scan; prints the spill warning;
* ``attn-64k``: the bundled ``flash_attention`` at seq 65536, unrolled: time to the result (the trace-time check's
  error, or a NEFF);
* ``moe-cte``: nki-library's ``moe_cte[2]`` (shard_on_block) at H=3072, I=1024, T=255, 2 experts, 4 blocks of 128,
  against a numpy translation of ``moe_cte_torch.py`` (tests/unit/test_nkilib_moe.py's).

Each case runs in a fresh interpreter (its own peak RSS). The corpus is read from ``../shared/corpus``.
"""

from __future__ import annotations

import importlib.util
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
sys.path.insert(0, str(ROOT.parent))  # run from a checkout without install
CASES = ("mamba-8k", "attn-64k", "moe-cte")


def _load(path: Path, name: str):  # noqa: ANN202
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _mamba_ref(delta, u, a, b, c):  # noqa: ANN001, ANN202
    """mamba_torch.py's scan in float64: x_t = exp(delta_t A) x_{t-1} + delta_t u_t B_t, y_t = sum_s C_t x_t."""
    import numpy as np

    d, uu, aa, bb, cc = (x.astype(np.float64) for x in (delta, u, a, b, c))
    decay = np.exp(d[:, :, None, :] * aa[None, :, :, None])  # (batch, channels, state, seq)
    drive = (d * uu)[:, :, None, :] * bb[:, None, :, :]
    x = np.zeros(decay.shape[:3])
    out = np.zeros(d.shape)
    for t in range(d.shape[-1]):
        x = decay[..., t] * x + drive[..., t]
        out[..., t] = (x * cc[:, None, :, t]).sum(axis=2)
    return out


def mamba_8k() -> str:
    import numpy as np

    import nkic

    nkic.install_nki_alias()
    import nki

    module = _load(CORPUS / "aws-neuron-sdk/nki/examples/fused_mamba/mamba_nki_kernels.py", "bench_mamba")
    rng = np.random.default_rng(0)
    seq = 8192
    args = (rng.uniform(0, 1, (1, 256, seq)).astype(np.float32), rng.uniform(-1, 1, (1, 256, seq)).astype(np.float32),
            rng.uniform(-1, 0, (256, 16)).astype(np.float32), rng.uniform(-1, 1, (1, 16, seq)).astype(np.float32),
            rng.uniform(-1, 1, (1, 16, seq)).astype(np.float32))  # fmt: skip
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = nki.simulate(module.mamba_v2)(*args)
    err = float(np.abs(got - _mamba_ref(*args)).max())
    said = [str(w.message) for w in seen if "spilled to HBM" in str(w.message)]
    return f"max abs error {err:.2e}; " + (said[0] if said else "no spill")


def attn_64k() -> str:
    from nkic.compiler.driver import compile_traced
    from nkic.frontend import TensorSpec
    from nkic.kernels.flash_attention import flash_attention

    spec = TensorSpec((1, 65536, 128), "bfloat16")
    try:
        compile_traced(flash_attention.trace(spec, spec, spec, scale=128**-0.5))
    except Exception as e:  # the trace-time check's NkiError is the expected result
        return f"{type(e).__name__}: {str(e)[:400]}"
    return "compiled"


def moe_cte() -> str:
    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    import numpy as np

    import conftest
    import test_nkilib_moe as ref
    from nkic.api.execute import simulate

    with conftest.nkilib_loader() as load, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mod = load("nkilib.core.moe.moe_cte.moe_cte")
        inputs = ref._moe_cte_inputs(255, 3072, 1024, 2, 128, 4)
        spec = mod.MoECTESpec(implementation=mod.MoECTEImplementation.shard_on_block)
        got = simulate(mod.moe_cte[2])(*inputs.values(), 128, spec).astype(np.float32)
    got = got.sum(axis=1) if got.ndim == 3 else got
    rel = ref._rel_err(got[:-1], ref.moe_cte_ref(*inputs.values(), 128)[:-1])
    said = [str(w.message) for w in seen if "spilled to HBM" in str(w.message)]
    return f"relative error {rel:.2e}; " + (said[0] if said else "no spill")


def run_one(case: str) -> None:
    t0 = time.perf_counter()
    result = {"mamba-8k": mamba_8k, "attn-64k": attn_64k, "moe-cte": moe_cte}[case]()
    mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"{case}: {time.perf_counter() - t0:.1f} s wall, {time.process_time():.1f} s CPU, {mb} MB peak: {result}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        return run_one(argv[1])
    for case in argv or CASES:
        subprocess.run([sys.executable, __file__, "--one", case], check=False)


if __name__ == "__main__":
    main(sys.argv[1:])
