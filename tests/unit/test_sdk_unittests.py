"""Every test method of the Neuron SDK's own NKI unittests (``aws-neuron-sdk/nki/test/*.py``), run unmodified through
nkic with the test's own inputs and numpy goldens.

The files are read by path from the corpus (never copied) after ``nkic.install_nki_alias()``, so their ``import
neuronxcc.nki...`` resolve to nkic's legacy surface. Collection only parses them (``ast``); a file is imported when
its first test runs (some run a kernel at import time), and each method runs through ``TestCase.debug()`` (setUp,
the method, tearDown; a failure raises). Every expected failure is a strict xfail naming its reason. Skipped when the
corpus is absent.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import unittest
from pathlib import Path
from types import ModuleType

import pytest

import nkic

nkic.install_nki_alias()


from nkic.frontend.legacy import migration  # noqa: E402

SDK_TESTS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "aws-neuron-sdk" / "nki" / "test"

# Failures that are the test's, not nkic's: nkic computes what the hardware does.
WRONG_TEST: dict[str, str] = {
    "test_nki_isa_activation.py::test_activation":
        "the second activation casts to dtype=nl.bfloat16 but the golden np.square(b*2+c) is compared at fp32 "
        "tolerance; nkic's result equals the bf16-rounded golden bit for bit (the legacy numpy simulator did not "
        "round)",
    **{f"test_nki_isa_dma_copy.py::test_indirect_{kind}_oob_err_negative":
        "it asserts the exact exception of the legacy numpy simulator, type(exc) == IndexError with numpy's message "
        "'index 66048 is out of bounds for axis 0 with size 65536'; nkic stops the same out-of-bounds DMA with a "
        "SimulationError naming the instruction, the row and the run-time offset" for kind in ("load", "store")},
}  # fmt: skip


def _methods(path: Path) -> list[tuple[str, str]]:
    """(class, method) of every ``test_*`` method of the file's TestCase classes, from its source."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any("TestCase" in ast.unparse(b) for b in node.bases):
            found += [(node.name, f.name) for f in node.body
                      if isinstance(f, ast.FunctionDef) and f.name.startswith("test")]  # fmt: skip
    return found


def _cases() -> list[object]:
    if not SDK_TESTS.is_dir():
        return [pytest.param(None, None, None, marks=pytest.mark.skip(reason=f"corpus absent: {SDK_TESTS}"))]
    cases = []
    for path in sorted(SDK_TESTS.glob("test_*.py")):
        for cls, method in _methods(path):
            key = f"{path.name}::{method}"
            marks = []
            if key in WRONG_TEST:
                marks.append(pytest.mark.xfail(strict=True, reason=WRONG_TEST[key]))
            cases.append(pytest.param(path, cls, method, id=key, marks=marks))
    return cases


_MODULES: dict[Path, ModuleType | BaseException] = {}


def _load(path: Path) -> ModuleType:
    """The SDK test file as a module, imported once (an import-time failure fails each of its tests)."""
    if path not in _MODULES:
        name = f"sdk_nki_test_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
            _MODULES[path] = module
        except BaseException as e:  # noqa: BLE001 — re-raised by every test of the file
            _MODULES[path] = e
            del sys.modules[name]
    loaded = _MODULES[path]
    if isinstance(loaded, BaseException):
        raise loaded
    return loaded


@pytest.fixture(autouse=True)
def no_migration_warnings():
    """The SDK tests are legacy code by design: their migration warnings are not what this file checks."""
    migration.set_action("ignore")
    yield
    migration.set_action(None)


@pytest.mark.parametrize("path,cls,method", _cases())
def test_sdk_unittest(path: Path, cls: str, method: str) -> None:
    case: unittest.TestCase = getattr(_load(path), cls)(method)
    case.debug()


def test_every_sdk_method_is_collected_and_the_tables_name_real_methods() -> None:
    if not SDK_TESTS.is_dir():
        pytest.skip(f"corpus absent: {SDK_TESTS}")
    keys = {f"{p.name}::{m}" for p in SDK_TESTS.glob("test_*.py") for _, m in _methods(p)}
    assert len(keys) == 85
    assert set(WRONG_TEST) <= keys
