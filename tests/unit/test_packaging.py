"""Every sub-package is listed in pyproject (an unlisted one imports in editable mode but is left out of the wheel)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_all_subpackages_listed() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    top = [d for d in ROOT.iterdir() if d.is_dir() and not d.name.startswith(".") and d.name not in ("tests", "bench")]
    found = {"nkic"} | {
        "nkic." + ".".join(p.parent.relative_to(ROOT).parts) for d in top for p in d.rglob("__init__.py")
    }
    assert found == listed


def test_no_top_level_nki_package_without_the_alias() -> None:
    import subprocess
    import sys

    code = "import nkic, nkic.frontend, nkic.driver\ntry:\n import nki\nexcept ImportError:\n print('absent')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent)
    assert out.stdout.strip() == "absent", out.stderr
