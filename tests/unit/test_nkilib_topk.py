"""nki-library kernels built on the top-k family, unmodified, traced, compiled and simulated by nkic.

* ``experimental/benchmark/find_nonzero_indices_with_count.py`` (``nisa.nonzero_with_count``), checked against the
  output format its docstring gives (nonzero indices, ``-1`` padding, count last).
* ``core/topk/rotational_topk.py``'s ``topk`` entry point for k <= 8, where it runs one stage: the scanning path
  of ``max8`` + ``nc_match_replace8`` (k = 8) or ``max8`` + ``nc_find_index8`` (k < 8). Checked against a numpy
  translation of ``core/topk/torch_ref.py`` (``torch.topk`` values, descending) and, as that reference notes indices
  may differ on ties, by gathering the input at the returned indices.

The corpus is read by path from ``../shared/corpus/nki-library/src/nkilib_src`` (``NKILIB_SRC`` overrides it), under
synthetic ``nkilib.*`` packages as in ``test_attention_cte.py``; every test is skipped when it is absent.
``rotational_topk_utils`` imports ``scipy.linalg.circulant`` at module level (for the constants of its multi-stage
path); when scipy is not installed a numpy ``circulant`` stands in for it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
NKILIB_SRC = Path(os.environ.get("NKILIB_SRC") or CORPUS / "nki-library" / "src" / "nkilib_src")
pytestmark = pytest.mark.skipif(
    not (NKILIB_SRC / "nkilib").is_dir(), reason=f"{NKILIB_SRC}/nkilib (the nki-library source) does not exist"
)
RNG = np.random.default_rng(5)


def _circulant(c) -> np.ndarray:
    """``scipy.linalg.circulant``: the matrix whose first column is ``c``, each next column rolled down by one."""
    c = np.asarray(c).ravel()
    n = len(c)
    return c[(np.arange(n)[:, None] - np.arange(n)[None, :]) % n]


def _scipy_stand_in() -> dict[str, types.ModuleType]:
    if importlib.util.find_spec("scipy") is not None:
        return {}
    scipy, linalg = types.ModuleType("scipy"), types.ModuleType("scipy.linalg")
    linalg.circulant = _circulant  # type: ignore[attr-defined]
    scipy.linalg = linalg  # type: ignore[attr-defined]
    return {"scipy": scipy, "scipy.linalg": linalg}


@contextlib.contextmanager
def _nkilib() -> Iterator[object]:
    """A loader of ``nkilib.<dotted.module>`` by path; the synthetic packages are removed afterwards."""
    import nkic

    nkic.install_nki_alias()
    root = NKILIB_SRC / "nkilib"
    touched = ("nkilib", "scipy")
    saved = {n: m for n, m in sys.modules.items() if n.split(".")[0] in touched}

    def load(name: str) -> types.ModuleType:
        parts = name.split(".")
        for i in range(1, len(parts)):
            pkg_name = ".".join(parts[:i])
            if pkg_name not in sys.modules:
                pkg = types.ModuleType(pkg_name)
                pkg.__path__ = [str(root.joinpath(*parts[1:i]))]
                sys.modules[pkg_name] = pkg
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
        for name in [n for n in sys.modules if n.split(".")[0] in touched]:
            del sys.modules[name]
        sys.modules.update(saved)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("length,density", [(300, 0.2), (64, 0.0), (512, 1.0)])
def test_find_nonzero_indices_with_count(dtype, length: int, density: float) -> None:
    with _nkilib() as load:
        kernel = load("nkilib.experimental.benchmark.find_nonzero_indices_with_count").find_nonzero_indices_with_count
        x = (RNG.random((1, length)) < density).astype(dtype) * RNG.integers(1, 50, (1, length)).astype(dtype)
        got = kernel(x)
    hits = np.flatnonzero(x[0])
    want = np.concatenate([hits, np.full(length - len(hits), -1), [len(hits)]]).astype(np.int32)[None, :]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def ref_topk(x: np.ndarray, k: int) -> np.ndarray:
    """``torch.topk(x, k, dim=-1, largest=True, sorted=True).values`` (core/topk/torch_ref.py), in fp32."""
    return -np.sort(-x.astype(np.float32), axis=-1)[..., :k]


@pytest.mark.parametrize("shape,k,lnc,sort,dtype", [
    ((1, 16, 2048), 8, 1, True, np.float32),  # max8 + nc_match_replace8 (in place, with dst_idx)
    ((1, 16, 2048), 5, 1, True, np.float32),  # max8 + nc_find_index8 for the remainder
    ((1, 16, 2048), 8, 1, False, ml_dtypes.bfloat16),
    ((2, 64, 4096), 8, 1, True, np.float32),
    ((1, 8, 2048), 6, 2, True, np.float32),  # two programs (LNC2)
    ((1, 128, 1000), 3, 1, True, ml_dtypes.bfloat16),
])  # fmt: skip
def test_rotational_topk_single_stage(shape, k: int, lnc: int, sort: bool, dtype) -> None:
    with _nkilib() as load:
        topk = load("nkilib.core.topk.rotational_topk").topk
        x = RNG.standard_normal(shape).astype(dtype)
        with contextlib.redirect_stdout(io.StringIO()):  # the kernel prints its strategy table
            values, indices = topk[lnc](x, k, sorted_flag=sort)
    got = values.astype(np.float32)
    if not sort:
        got = -np.sort(-got, axis=-1)
    np.testing.assert_array_equal(got, ref_topk(x, k))
    gathered = np.take_along_axis(x, indices.astype(np.int64), axis=-1)
    np.testing.assert_array_equal(gathered.astype(np.float32), values.astype(np.float32))
