"""The calibration status line: ``nkic run --timing-only``, ``nkic profile`` and ``nki.benchmark`` each print
'model: trn1/trn2 cost model, median error X% on N public measurements (see docs)', with X and N computed from the
table of ``target/calibration.py`` (which ``test_cost_calibration.py`` keeps current), not written anywhere."""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nkic.target import calibration
from nkic.target.calibration import MEASUREMENTS, Measurement, status_line
from nkic.tools import cli

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
LINE = re.compile(r"^model: trn1/trn2 cost model, median error (\d+\.\d)% on (\d+) public measurements \(see docs\)$",
                  re.MULTILINE)  # fmt: skip


def _from_table(rows: tuple[Measurement, ...]) -> tuple[str, str]:
    """X and N as the line should show them, computed here from the rows' raw fields."""
    errors = [abs(r.predicted_ns / (r.published_ns * math.prod(r.shape) / math.prod(r.published_shape)) - 1)
              for r in rows]  # fmt: skip
    return f"{100 * statistics.median(errors):.1f}", str(len(rows))


def _shown(text: str) -> tuple[str, str]:
    found = LINE.findall(text)
    assert len(found) == 1, text
    return found[0]


# A table unlike the real one (errors 10%, -20%, 40%: median 20.0% on 3), to catch numbers written into the code.
FAKE = tuple(dataclasses.replace(row, predicted_ns=row.expected_ns * f) for row, f in zip(MEASUREMENTS, (1.1, 0.8, 1.4)))


def test_the_line_is_the_tables_median_error() -> None:
    assert MEASUREMENTS and len({r.name for r in MEASUREMENTS}) == len(MEASUREMENTS)
    assert all(r.source and r.generation in ("gen2", "gen3") and r.published_ns > 0 for r in MEASUREMENTS)
    assert _shown(status_line()) == _from_table(MEASUREMENTS)
    assert _shown(status_line(FAKE)) == _from_table(FAKE) == ("20.0", "3")
    assert calibration.median_error(FAKE) == pytest.approx(20.0)


@pytest.fixture(scope="module")
def neff(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("status")
    r = subprocess.run([sys.executable, "-m", "nkic.tools.cli", "compile", f"{KERNELS / 'tensor_add.py'}:tensor_add",
                        "--arg", "a=float32[128,512]", "--arg", "b=float32[128,512]", "-o", "k.neff"],
                       cwd=folder, capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return folder / "k.neff"


@pytest.mark.parametrize("command", [["run", "--timing-only"], ["profile", "-o", "t.png"]], ids=["run", "profile"])
def test_cli_prints_the_line(neff: Path, command: list[str]) -> None:
    r = subprocess.run([sys.executable, "-m", "nkic.tools.cli", command[0], str(neff), *command[1:]],
                       cwd=neff.parent, capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert _shown(r.stdout) == _from_table(MEASUREMENTS)
    assert "ns" in r.stdout.split("model: ")[0]  # after the timing it qualifies


@pytest.mark.parametrize("command", [["run", "--timing-only"], ["profile", "-o", "t.png"]], ids=["run", "profile"])
def test_cli_line_follows_the_table(neff: Path, command: list[str], monkeypatch, capsys) -> None:
    monkeypatch.setattr(calibration, "MEASUREMENTS", FAKE)
    monkeypatch.chdir(neff.parent)
    assert cli.main([command[0], str(neff), *command[1:]]) == 0
    assert _shown(capsys.readouterr().out) == ("20.0", "3")


def test_run_with_numerics_does_not_print_it(neff: Path, capsys) -> None:
    a = np.ones((128, 512), np.float32)
    np.save(neff.parent / "a.npy", a)
    assert cli.main(["run", str(neff), "--input", f"a={neff.parent / 'a.npy'}", "--input",
                     f"b={neff.parent / 'a.npy'}", "--output-dir", str(neff.parent / "out")]) == 0  # fmt: skip
    assert "model:" not in capsys.readouterr().out


@pytest.mark.parametrize("table", ["real", "fake"])
def test_benchmark_prints_the_line(table: str, monkeypatch, capsys) -> None:
    import nkic

    nkic.install_nki_alias()
    import nki
    import nki.language as nl

    rows = MEASUREMENTS if table == "real" else FAKE
    monkeypatch.setattr(calibration, "MEASUREMENTS", rows)

    def double(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(a)))
        return out

    nki.benchmark(warmup=1, iters=2)(double)(np.ones((128, 64), np.float32))
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].startswith("nki.benchmark double: simulated")
    assert _shown(printed) == _from_table(rows)
    from nkic.frontend import TensorSpec

    assert nki.benchmark(double, timing_only=True)(TensorSpec((128, 64), "float32")) is None
    assert _shown(capsys.readouterr().out) == _from_table(rows)
