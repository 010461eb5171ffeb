"""The README's first Python example runs as written and gives the right numbers."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_example_runs(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]
    code += "\nassert (nki.simulate(add)(a, a) == 2.0).all()\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
