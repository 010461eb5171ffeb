"""The `nkic` command: compile / run / info end to end, and one-line errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

DATA = Path(__file__).parent / "data"
KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def nkic(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nkic.tools.cli", *args], cwd=cwd, capture_output=True, text=True)


def test_compile_run_info_matmul(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((256, 128), dtype=np.float32)
    rhs = rng.standard_normal((256, 512), dtype=np.float32)
    np.save(tmp_path / "lhsT.npy", lhsT)
    np.save(tmp_path / "rhs.npy", rhs)
    r = nkic("compile", f"{KERNELS / 'matmul.py'}:matmul", "--arg", "lhsT=float32[256,128]",
             "--arg", "rhs=float32[256,512]", "-o", "mm.neff", "--dump-dir", "ir", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    dumps = sorted(p.name for p in (tmp_path / "ir").iterdir())
    assert dumps[0] == "00-penguin.mlir" and "01-penguin-to-bir.mlir" in dumps and any(d.endswith("-bir-to-isa.mlir") for d in dumps)
    r = nkic("run", "mm.neff", "--input", "lhsT=lhsT.npy", "--input", "rhs=rhs.npy", "--output-dir", "out",
             "--profile", "trace.json", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "cycles" in r.stdout
    got = np.load(tmp_path / "out" / "out.npy")
    np.testing.assert_allclose(got, lhsT.T @ rhs, rtol=1e-4, atol=1e-4)
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert any(e.get("ph") == "X" for e in trace["traceEvents"])
    r = nkic("info", "mm.neff", cwd=tmp_path)
    assert r.returncode == 0 and "var lhsT: input float32[256, 128]" in r.stdout


@pytest.mark.parametrize(
    "kernel,args,grid",
    [
        ("tensor_add.py:tensor_add", ["a=float32[256,512]", "b=float32[256,512]"], 1),
        ("tensor_add.py:tensor_add_spmd", ["a=float32[256,512]", "b=float32[256,512]"], 2),
        ("rmsnorm.py:rmsnorm", ["x=bfloat16[128,256]", "w=bfloat16[256]", "eps=1e-5"], 1),
    ],
)
def test_cli_kernels_match_numpy(tmp_path: Path, kernel: str, args: list[str], grid: int) -> None:
    rng = np.random.default_rng(3)
    arrays = {}
    for spec in args:
        name, value = spec.split("=")
        if "[" in value:
            shape = tuple(int(d) for d in value[value.index("[") + 1 : -1].split(","))
            # bf16 inputs travel as float32 .npy holding bf16-exact values; the runtime casts them exactly
            arrays[name] = rng.standard_normal(shape).astype(ml_dtypes.bfloat16).astype(np.float32)
            np.save(tmp_path / f"{name}.npy", arrays[name])
    flags = [f for a in args for f in ("--arg", a)]
    r = nkic("compile", str(KERNELS / kernel), *flags, "--grid", str(grid), "-o", "k.neff", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    inputs = [f for n in arrays for f in ("--input", f"{n}={n}.npy")]
    r = nkic("run", "k.neff", *inputs, "--output-dir", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out" / "out.npy")
    if "rmsnorm" in kernel:
        x, w = arrays["x"].astype(np.float64), arrays["w"].astype(np.float64)
        want = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * w
        assert "stored as float32" in r.stdout
        assert np.max(np.abs(got - want)) / np.max(np.abs(want)) < 2**-7
    else:
        np.testing.assert_array_equal(got, arrays["a"] + arrays["b"])


def test_every_dumped_stage_reruns_through_nkic_opt(tmp_path: Path) -> None:
    r = nkic("compile", f"{KERNELS / 'softmax.py'}:softmax", "--arg", "x=float32[128,256]", "-o", "k.neff",
             "--dump-dir", "ir", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    stages = sorted((tmp_path / "ir").glob("*.mlir"))
    for i, stage in enumerate(stages[:-1]):
        nxt = stages[i + 1].name.split("-", 1)[1].removesuffix(".mlir")
        p = subprocess.run([sys.executable, "-m", "nkic.tools.opt", str(stage), "-p", nxt], capture_output=True,
                           text=True)  # fmt: skip
        assert p.returncode == 0, f"{stage.name} -p {nxt}: {p.stderr}"
        assert p.stdout.strip() == stages[i + 1].read_text().strip(), f"{nxt} differs when re-run from text"


def test_unmodified_import_nki_kernel_file_with_constant_and_tuple(tmp_path: Path) -> None:
    x = np.random.default_rng(1).standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", x.astype(np.float32))
    r = nkic("compile", f"{DATA / 'user_kernel.py'}:scaled_exp_rowsum", "--arg", "x=float32[128,64]",
             "--arg", "scale=0.5", "-o", "k.neff", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = nkic("run", "k.neff", "--input", "x=x.npy", "--output-dir", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    want = np.exp(0.5 * x.astype(np.float64))
    np.testing.assert_allclose(np.load(tmp_path / "out" / "out.npy"), want, rtol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "sums.npy")[:, 0], want.sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize(
    "args,message",
    [
        (["compile", "missing.py:k", "-o", "k.neff"], "missing.py: no such file"),
        (["compile", f"{DATA / 'user_kernel.py'}:bad_output_buffer", "--arg", "x=float32[128,64]", "-o", "k.neff"],
         "user_kernel.py:28: error: The input and output tensor of a NKI kernel must be in shared_hbm"),
        (["compile", f"{DATA / 'user_kernel.py'}:scaled_exp_rowsum", "--arg", "x=float64[128,64]", "--arg",
          "scale=1.0", "-o", "k.neff"], "float64"),
        (["run", "nope.neff", "--output-dir", "o"], "cannot read nope.neff"),
        (["info", "garbage.neff"], "NEFF"),
    ],
)  # fmt: skip
def test_errors_are_one_line_without_traceback(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "garbage.neff").write_bytes(b"\x00" * 2000)
    r = nkic(*args, cwd=tmp_path)
    assert r.returncode != 0
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
