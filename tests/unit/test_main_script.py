"""``python -m nkic SCRIPT.py [ARGS]``: a script's ``import nki`` is nkic; NkiError is one line and exit status 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import nkic.frontend.language
from nkic.frontend.unsupported import is_unsupported

SCRIPTS = Path(__file__).parent / "scripts"
EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "aws-neuron-sdk" / "nki" / "examples"


def python_m_nkic(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nkic", *args], cwd=cwd, capture_output=True, text=True)


def test_script_runs_with_its_arguments(tmp_path: Path) -> None:
    r = python_m_nkic(str(SCRIPTS / "nisa_add.py"), "3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok ['3'] 6.0"


def test_nki_error_is_one_line_with_the_kernel_location(tmp_path: Path) -> None:
    r = python_m_nkic(str(SCRIPTS / "nisa_error.py"), cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        f"{SCRIPTS / 'nisa_error.py'}:13: error: all_reduce: replica_group must be a nki.collectives.ReplicaGroup, "
        "got NoneType."
    ]


def test_usage_and_missing_script(tmp_path: Path) -> None:
    r = python_m_nkic(cwd=tmp_path)
    assert r.returncode == 2 and "usage: python -m nkic [-W nki-legacy=default|ignore|error] SCRIPT.py" in r.stderr
    r = python_m_nkic("no_such_script.py", cwd=tmp_path)
    assert r.returncode == 2 and "cannot open script 'no_such_script.py'" in r.stderr
    r = python_m_nkic("info", "missing.neff", cwd=tmp_path)  # the nkic command's subcommands pass through
    assert r.returncode == 1 and r.stderr.startswith("nkic: error: cannot read missing.neff")


def _has_nl_load() -> bool:
    # hasattr() is always true on an NKI module (a missing name is a placeholder); ask whether it is a placeholder.
    return not is_unsupported(nkic.frontend.language.load)


@pytest.mark.parametrize("example", ["getting_started_baremetal.py", "simulate/nki_simulate_example.py"])
def test_docs_examples_run_verbatim(example: str, tmp_path: Path) -> None:
    if not _has_nl_load():
        pytest.skip("nl.load / nl.add / nl.store (value-returning tile functions) are not implemented yet")
    script = EXAMPLES / example
    if not script.is_file():
        pytest.skip(f"{script} is not in ../shared/corpus")
    r = python_m_nkic(str(script), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
