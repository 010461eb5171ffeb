"""Every sub-package is listed in pyproject (an unlisted one imports in editable mode but is left out of the wheel)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_all_subpackages_listed() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"nkic"} | {
        "nkic." + ".".join(p.parent.relative_to(ROOT).parts)
        for p in ROOT.rglob("__init__.py")
        if p.parent != ROOT and not _outside_the_package(p.relative_to(ROOT).parts)
    }
    assert found == listed


def _outside_the_package(parts: tuple[str, ...]) -> bool:
    # Hidden folders (.venv), the tests and benchmarks, and build output are not part of the nkic package.
    return parts[0].startswith(".") or parts[0] in ("tests", "bench", "build", "out") or parts[0].endswith(".egg-info")


def test_no_top_level_nki_package_without_the_alias() -> None:
    import subprocess
    import sys

    code = "import nkic, nkic.frontend, nkic.compiler.driver\ntry:\n import nki\nexcept ImportError:\n print('absent')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent)
    assert out.stdout.strip() == "absent", out.stderr
