"""Shared fixtures: loading nki-library kernels from the read-only corpus, unmodified.

nki-library is read by path from ``../shared/corpus/nki-library/src/nkilib_src`` (``NKILIB_SRC`` overrides it). Its
package ``__init__`` imports every subpackage (one of which does not parse upstream), so kernel modules are loaded one
by one under synthetic ``nkilib.*`` packages whose ``__path__`` points into the corpus: their relative imports
(``from ..utils.allocator import align_to``) resolve, and nothing else of the library is imported. Every synthetic
module is removed again afterwards. Tests that need the corpus use the ``nkilib`` fixture (a ``load(dotted_name)``
function) and skip cleanly when the folder is absent.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

# The tests verify the IR after every pass of every compile (the driver's default is once, after the last pass):
# a pass that leaves invalid IR fails at that pass. A value already set wins.
os.environ.setdefault("NKIC_VERIFY_EACH_PASS", "1")

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
NKILIB_SRC = Path(os.environ.get("NKILIB_SRC") or CORPUS / "nki-library" / "src" / "nkilib_src")
_TOUCHED = ("nkilib", "scipy")


def _circulant(c: object) -> np.ndarray:
    """``scipy.linalg.circulant``: the matrix whose first column is ``c``, each next column rolled down by one."""
    c = np.asarray(c).ravel()
    n = len(c)
    return c[(np.arange(n)[:, None] - np.arange(n)[None, :]) % n]


def _scipy_stand_in() -> dict[str, types.ModuleType]:
    """``rotational_topk_utils`` imports ``scipy.linalg.circulant`` at module level; scipy is not a dependency."""
    if "scipy" in sys.modules or importlib.util.find_spec("scipy") is not None:  # real, or an outer loader's stand-in
        return {}
    scipy, linalg = types.ModuleType("scipy"), types.ModuleType("scipy.linalg")
    linalg.circulant = _circulant  # type: ignore[attr-defined]
    scipy.linalg = linalg  # type: ignore[attr-defined]
    return {"scipy": scipy, "scipy.linalg": linalg}


@contextlib.contextmanager
def nkilib_loader() -> Iterator[Callable[[str], types.ModuleType]]:
    """A loader of ``nkilib.<dotted.module>`` by path (skipping the test when the file is absent)."""
    import nkic

    if not (NKILIB_SRC / "nkilib").is_dir():
        pytest.skip(f"{NKILIB_SRC}/nkilib (the nki-library source) does not exist")
    nkic.install_nki_alias()
    root = NKILIB_SRC / "nkilib"
    saved = {n: m for n, m in sys.modules.items() if n.split(".")[0] in _TOUCHED}

    def load(name: str) -> types.ModuleType:
        parts = name.split(".")
        for i in range(1, len(parts)):
            pkg_name = ".".join(parts[:i])
            if pkg_name not in sys.modules:
                pkg = types.ModuleType(pkg_name)
                pkg.__path__ = [str(root.joinpath(*parts[1:i]))]
                sys.modules[pkg_name] = pkg
        if name in sys.modules:
            return sys.modules[name]
        path = root.joinpath(*parts[1:]).with_suffix(".py")
        if not path.is_file():
            pytest.skip(f"{path} does not exist")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    try:
        sys.modules.update(_scipy_stand_in())
        yield load
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] in _TOUCHED]:
            del sys.modules[name]
        sys.modules.update(saved)


@pytest.fixture
def nkilib() -> Iterator[Callable[[str], types.ModuleType]]:
    """``load("nkilib.core.cumsum.cumsum")`` returns that corpus module, unmodified."""
    with nkilib_loader() as load:
        yield load


@pytest.fixture(scope="module")
def nkilib_module_scope() -> Iterator[Callable[[str], types.ModuleType]]:
    """The ``nkilib`` loader, kept for a whole test module (for module-scoped kernel fixtures)."""
    with nkilib_loader() as load:
        yield load
