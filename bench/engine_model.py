"""Every benchmark of bench/README.md's "engine model" table, timing only: the bundled kernels (gen3) and the fused
mamba tutorial's ``mamba_v1`` (trn1, from the docs corpus next to the repository), one line each with the
simulated time, the PE bf16 roofline fraction (79 TF/s) where it applies and the per-engine busy share.
``python bench/engine_model.py [NAME ...]`` (names as printed; default all). Run it on two checkouts to compare
models (the table's columns)."""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: the simulator's small matmuls

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))  # run from a checkout without install

from nkic.compiler.driver import compile_traced, run_neff  # noqa: E402
from nkic.frontend import TensorSpec  # noqa: E402
from nkic.kernels.flash_attention import flash_attention  # noqa: E402
from nkic.kernels.matmul import matmul  # noqa: E402
from nkic.kernels.rmsnorm import rmsnorm  # noqa: E402
from nkic.kernels.softmax import softmax  # noqa: E402
from nkic.kernels.tensor_add import tensor_add  # noqa: E402
from nkic.target.machine import get_target  # noqa: E402

MAMBA = ROOT.parent / "shared" / "corpus" / "aws-neuron-sdk" / "nki" / "examples" / "fused_mamba" / \
    "mamba_nki_kernels.py"  # fmt: skip


def _t(*shape: int, dtype: str = "float32") -> TensorSpec:
    return TensorSpec(shape, dtype)


def _attention(s: int) -> tuple[object, float]:
    q = _t(1, s, 128, dtype="bfloat16")
    return flash_attention.trace(q, q, q, scale=0.088), 2 * 2 * s * s * 128 / 2  # QK^T and PV, causal half


def _mamba() -> tuple[object, None]:
    import nkic

    nkic.install_nki_alias()  # the tutorial says `import nki`
    os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = "trn1"  # the tutorial's hardware; options bind at jit time
    spec = importlib.util.spec_from_file_location("nki_fused_mamba_bench", MAMBA)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    del os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"]
    b, c, s, n = 1, 256, 512, 16
    return module.mamba_v1.trace(_t(b, c, s), _t(b, c, s), _t(c, n), _t(b, n, s), _t(b, n, s)), None


CASES: dict[str, Callable[[], tuple[object, float | None]]] = {
    "attention-1k": lambda: _attention(1024),
    "attention-4k": lambda: _attention(4096),
    "attention-8k": lambda: _attention(8192),
    "matmul-bf16-1024": lambda: (matmul.trace(_t(1024, 1024, dtype="bfloat16"), _t(1024, 1024, dtype="bfloat16")),
                                 2 * 1024**3),
    "matmul-bf16-2048": lambda: (matmul.trace(_t(2048, 2048, dtype="bfloat16"), _t(2048, 2048, dtype="bfloat16")),
                                 2 * 2048**3),
    "matmul-fp32-512x128x512": lambda: (matmul.trace(_t(512, 128), _t(512, 512)), None),
    "matmul-fp32-1024x512x2048": lambda: (matmul.trace(_t(1024, 512), _t(1024, 2048)), None),
    "softmax-256x512": lambda: (softmax.trace(_t(256, 512)), None),
    "softmax-2048x2048": lambda: (softmax.trace(_t(2048, 2048)), None),
    "rmsnorm-2048x2048": lambda: (rmsnorm.trace(_t(2048, 2048), _t(2048)), None),
    "tensor_add-2048x2048": lambda: (tensor_add.trace(_t(2048, 2048), _t(2048, 2048)), None),
    "mamba_v1-trn1": _mamba,
}  # fmt: skip


def run(name: str) -> str:
    traced, flops = CASES[name]()
    target = traced.options.target  # type: ignore[attr-defined]
    profile = run_neff(compile_traced(traced).neff, {}, target=target, timing_only=True).profile
    pe = f", {100 * flops / get_target(target).bf16_peak_flops_per_ns / profile.total_ns:.1f}% of PE" if flops else ""
    busy = " ".join(f"{k.upper()} {100 * v / profile.total_ns:.0f}%" for k, v in profile.busy_ns.items()
                    if v and not k.startswith(("q", "sp")))  # fmt: skip
    waits = "; ".join(f"{w} waited {ns / 1e3:.1f} µs for {h}" for (w, h, _), ns in profile.port_contention().items())
    return f"{name} ({target}) | {profile.total_ns / 1e3:.1f} µs{pe} | {busy}" + (f" | ports: {waits}" if waits else "")


def main(names: list[str]) -> None:
    for name in names or list(CASES):
        if name == "mamba_v1-trn1" and not MAMBA.is_file():
            print(f"{name}: skipped (the docs corpus is not next to the repository)")
            continue
        print(run(name), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
