"""The content-addressed NEFF cache (``NKIC_CACHE_DIR``, ``nkic.cache``): off by default, a warm compile returns the
stored NEFF without tracing, every key component (kernel source, a helper file's source, argument shapes, dtypes and
constants, options, nkic's version) makes a miss, and a corrupt entry is ignored and rebuilt."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nkic
from nkic import cache
from nkic.driver import compile_kernel, compile_traced
from nkic.frontend import TensorSpec
from nkic.tools.cli import load_kernel

KERNEL = '''
from nkic import api as nki
from {helper} import FACTOR

nl = nki.language
nisa = nki.isa


@nki.jit
def scaled(a, bias=0.0):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.tensor_scalar(dst=x, data=x, op0=nl.multiply, operand0=FACTOR, op1=nl.add, operand1=bias)
    nisa.dma_copy(dst=out, src=x)
    return out
'''


@pytest.fixture
def kernel_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kernel file and a helper module it imports, in a fresh folder on sys.path; the cache in another folder."""
    src = tmp_path / "src"
    src.mkdir()
    helper = f"cache_helper_{abs(hash(tmp_path)) % 10**8}"
    (src / f"{helper}.py").write_text("FACTOR = 2.0\n")
    (src / "kern.py").write_text(KERNEL.format(helper=helper))
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    yield src
    sys.modules.pop(helper, None)


def _load(src: Path) -> Any:
    for name in [n for n in sys.modules if n.startswith("cache_helper_")]:
        del sys.modules[name]  # a fresh import sees the helper's current text
    return load_kernel(f"{src / 'kern.py'}:scaled")


def _entries(root: Path) -> list[Path]:
    return sorted((root / "cache").rglob("*.neff"))


A = TensorSpec((128, 64), "float32")


def test_off_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_dir: Path) -> None:
    monkeypatch.delenv(cache.CACHE_DIR_ENV)
    kernel = _load(kernel_dir)
    assert not compile_kernel(kernel, (A,)).cached
    assert not compile_kernel(kernel, (A,)).cached
    assert not (tmp_path / "cache").exists()


def test_hit_returns_the_same_neff_without_tracing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_dir: Path
) -> None:
    kernel = _load(kernel_dir)
    cold = compile_kernel(kernel, (A,))
    assert not cold.cached and [s.name for s in cold.stages][:2] == ["trace", "penguin-to-bir"]
    assert len(_entries(tmp_path)) == 1
    # The stored NEFF is the one the compiler makes from this trace.
    assert cold.neff == compile_traced(kernel.trace(A)).neff

    def no_trace(*_: Any, **__: Any) -> Any:
        raise AssertionError("a cache hit traced the kernel")

    fresh = _load(kernel_dir)  # a new process would have a new Kernel object: no trace cache to lean on
    monkeypatch.setattr(type(fresh), "trace", no_trace)
    warm = compile_kernel(fresh, (A,))
    assert warm.cached and warm.neff == cold.neff and [s.name for s in warm.stages] == ["cache"]


def _miss_after(tmp_path: Path, kernel_dir: Path, change: Any, args: tuple[Any, ...] = (A,),
                kwargs: dict[str, Any] | None = None) -> None:  # fmt: skip
    kernel = _load(kernel_dir)
    compile_kernel(kernel, (A,))
    assert compile_kernel(kernel, (A,)).cached
    kernel = change(kernel) or _load(kernel_dir)
    other = compile_kernel(kernel, args, kwargs)
    assert not other.cached
    assert len(_entries(tmp_path)) == 2
    assert compile_kernel(kernel, args, kwargs).cached  # ... and the new entry hits in turn


def test_miss_when_kernel_source_changes(tmp_path: Path, kernel_dir: Path) -> None:
    def edit(_: Any) -> None:
        path = kernel_dir / "kern.py"
        path.write_text(path.read_text().replace("op1=nl.add", "op1=nl.subtract"))

    _miss_after(tmp_path, kernel_dir, edit)


def test_miss_when_a_helper_file_changes(tmp_path: Path, kernel_dir: Path) -> None:
    def edit(_: Any) -> None:
        (helper,) = kernel_dir.glob("cache_helper_*.py")
        helper.write_text("FACTOR = 3.0\n")

    _miss_after(tmp_path, kernel_dir, edit)


@pytest.mark.parametrize(
    "args,kwargs",
    [((TensorSpec((128, 32), "float32"),), None), ((TensorSpec((128, 64), "bfloat16"),), None), ((A,), {"bias": 1.5})],
    ids=["shape", "dtype", "constant"],
)
def test_miss_when_an_argument_changes(
    tmp_path: Path, kernel_dir: Path, args: tuple[Any, ...], kwargs: dict[str, Any] | None
) -> None:
    _miss_after(tmp_path, kernel_dir, lambda k: k, args, kwargs)


@pytest.mark.parametrize("change", [{"carrier_format": "klir"}, {"enable_stack_allocator": True}, {"target": "gen2"}])
def test_miss_when_an_option_changes(tmp_path: Path, kernel_dir: Path, change: dict[str, Any]) -> None:
    _miss_after(tmp_path, kernel_dir, lambda k: k.with_options(**change))


def test_rolling_settings_key_their_own_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rolling, and the iterations per rolled body, change a rolled program's bytes: each names its own entry."""
    from nkic.driver import _variant

    monkeypatch.delenv("NKIC_ROLL_INTERLEAVE", raising=False)
    assert _variant(False) == "" and _variant(True) == "roll-loops"
    monkeypatch.setenv("NKIC_ROLL_INTERLEAVE", "4")
    assert _variant(True) == "roll-loops-interleave-4" and _variant(False) == ""


def test_miss_when_the_nkic_version_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_dir: Path
) -> None:
    def bump(_: Any) -> None:
        monkeypatch.setattr(nkic, "__version__", nkic.__version__ + ".post1")
        cache.compiler_digest.cache_clear()

    try:
        _miss_after(tmp_path, kernel_dir, bump)
    finally:
        monkeypatch.undo()
        cache.compiler_digest.cache_clear()


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupt_entry_is_ignored_and_rebuilt(tmp_path: Path, kernel_dir: Path, damage: str) -> None:
    kernel = _load(kernel_dir)
    good = compile_kernel(kernel, (A,)).neff
    (entry,) = _entries(tmp_path)
    data = entry.read_bytes()
    broken = {"truncate": data[:-7], "flip": data[:-1] + bytes([data[-1] ^ 1]), "garbage": b"not a neff"}[damage]
    entry.write_bytes(broken)
    rebuilt = compile_kernel(kernel, (A,))
    assert not rebuilt.cached and rebuilt.neff == good
    assert entry.read_bytes() == data  # rewritten whole
    assert compile_kernel(kernel, (A,)).cached


def test_uncacheable_constant_has_no_key(tmp_path: Path, kernel_dir: Path) -> None:
    kernel = _load(kernel_dir)

    class Opaque:  # no value-based key: its identity would be the key, which no other process can reproduce
        __hash__ = None  # type: ignore[assignment]

    with pytest.raises(cache.Uncacheable):
        cache.key(kernel, (A,), {"bias": Opaque()})
    with pytest.raises(cache.Uncacheable):
        cache.key(kernel, (A,), {"bias": (1.0, Opaque())})
    assert cache.key(kernel, (A,), {}) == cache.key(_load(kernel_dir), (A,), {})  # reproducible


def test_simulate_goes_through_the_cache(tmp_path: Path, kernel_dir: Path) -> None:
    import nkic.execute  # noqa: F401 — registers the executor that makes kernel(...) simulate

    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    np.testing.assert_array_equal(_load(kernel_dir)(a, bias=1.0), a * 2 + 1)
    assert len(_entries(tmp_path)) == 1
    np.testing.assert_array_equal(_load(kernel_dir)(a, bias=1.0), a * 2 + 1)  # a fresh kernel: served from the cache
    assert len(_entries(tmp_path)) == 1


def test_unwritable_cache_still_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_dir: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(blocker / "cache"))
    kernel = _load(kernel_dir)
    first = compile_kernel(kernel, (A,))
    assert not first.cached and not compile_kernel(kernel, (A,)).cached and first.neff


def test_a_kernel_under_the_checkouts_tests_folder_keys_by_its_own_text(
    tmp_path: Path, kernel_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files below the package root but outside nkic proper (tests/, bench/) are in no compiler digest: they must be
    user files, else editing such a kernel would hit a stale entry."""
    monkeypatch.setattr(cache, "_PACKAGE", kernel_dir.parent)
    tests = kernel_dir.parent / "tests"
    kernel_dir.rename(tests)
    monkeypatch.syspath_prepend(str(tests))
    kernel = _load(tests)
    assert str((tests / "kern.py").resolve()) in cache.source_files(kernel)
    assert cache._in_compiler(kernel_dir.parent / "kern.py") and not cache._in_compiler(tests / "kern.py")
