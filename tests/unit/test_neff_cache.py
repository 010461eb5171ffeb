"""The content-addressed NEFF cache (``NKIC_CACHE_DIR``, ``nkic.compiler.cache``): off by default; a warm compile traces and
returns the stored NEFF without running a pass; every input of the compile makes a miss (the traced code, whatever it
read — a helper file, a closure, a global, the environment, a ``shared_constant`` file —, argument shapes, dtypes and
constants, options, nkic's version and sources); a corrupt entry is ignored and rebuilt; entries follow the umask, the
cache stays within its size limit, stale temporary files go, and an unusable folder is one warning."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nkic
from nkic.compiler import cache
from nkic.compiler import driver
from nkic.compiler.driver import compile_kernel, compile_traced
from nkic.frontend import TensorSpec
from nkic.tools.commands import load_kernel

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


def test_hit_returns_the_same_neff_without_compiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_dir: Path
) -> None:
    kernel = _load(kernel_dir)
    cold = compile_kernel(kernel, (A,))
    assert not cold.cached and [s.name for s in cold.stages][:2] == ["trace", "penguin-to-bir"]
    assert len(_entries(tmp_path)) == 1
    # The stored NEFF is the one the compiler makes from this trace.
    assert cold.neff == compile_traced(kernel.trace(A)).neff

    def no_compile(*_: Any, **__: Any) -> Any:
        raise AssertionError("a cache hit ran the compiler")

    fresh = _load(kernel_dir)  # a new process would have a new Kernel object: no trace cache to lean on
    monkeypatch.setattr(driver, "compile_traced", no_compile)
    warm = compile_kernel(fresh, (A,))
    assert warm.cached and warm.neff == cold.neff and [s.name for s in warm.stages] == ["trace", "cache"]


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
    from nkic.passes.options import CompileOptions

    def variant(roll: bool) -> str:
        return str(CompileOptions.build(roll_loops=roll).cache_settings()["variant"])

    monkeypatch.delenv("NKIC_ROLL_INTERLEAVE", raising=False)
    assert variant(False) == "" and variant(True) == "roll-loops"
    monkeypatch.setenv("NKIC_ROLL_INTERLEAVE", "4")
    assert variant(True) == "roll-loops-interleave-4" and variant(False) == ""


def test_miss_when_the_nkic_version_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_dir: Path
) -> None:
    def bump(_: Any) -> None:
        monkeypatch.setattr(nkic.version, "__version__", nkic.version.__version__ + ".post1")
        cache.reset_compiler_digest()

    try:
        _miss_after(tmp_path, kernel_dir, bump)
    finally:
        monkeypatch.undo()
        cache.reset_compiler_digest()


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


def test_simulate_goes_through_the_cache(tmp_path: Path, kernel_dir: Path) -> None:
    import nkic.api.execute  # noqa: F401 — registers the executor that makes kernel(...) simulate

    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    np.testing.assert_array_equal(_load(kernel_dir)(a, bias=1.0), a * 2 + 1)
    assert len(_entries(tmp_path)) == 1
    np.testing.assert_array_equal(_load(kernel_dir)(a, bias=1.0), a * 2 + 1)  # a fresh kernel: served from the cache
    assert len(_entries(tmp_path)) == 1


def test_unwritable_cache_still_compiles_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_dir: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(blocker / "cache"))
    monkeypatch.setattr(cache, "_warned", set())
    kernel = _load(kernel_dir)
    with pytest.warns(cache.CacheWarning, match="cannot be used") as caught:
        first = compile_kernel(kernel, (A,))
        second = compile_kernel(kernel, (A,))
    assert not first.cached and not second.cached and first.neff == second.neff
    assert len([w for w in caught if issubclass(w.category, cache.CacheWarning)]) == 1  # once per process


# -- what the trace read is in the key (issue: stale results) ---------------------------------------------------
def _scale_kernel(factor: float) -> Any:
    """A kernel made per call, reading ``factor`` from its closure (``nki.jit(lambda a: body(a, f))``)."""
    from nkic import api as nki

    nl, nisa = nki.language, nki.isa

    def body(a: Any, f: float) -> Any:
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
        x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        nisa.tensor_scalar(dst=x, data=x, op0=nl.multiply, operand0=f)
        nisa.dma_copy(dst=out, src=x)
        return out

    return nki.jit(lambda a: body(a, factor))


ONES = np.ones((128, 64), np.float32)


def test_closure_values_key_their_own_entries(tmp_path: Path, kernel_dir: Path) -> None:
    import nkic.api.execute  # noqa: F401 — kernel(...) simulates

    assert _scale_kernel(3.0)(ONES)[0, 0] == 3.0
    assert _scale_kernel(5.0)(ONES)[0, 0] == 5.0  # the old key (source text + arguments) served 3.0
    assert _scale_kernel(3.0)(ONES)[0, 0] == 3.0 and len(_entries(tmp_path)) == 2


GLOBAL_KERNEL = '''
import os
import numpy as np
from nkic import api as nki

nl = nki.language
nisa = nki.isa
FACTOR = 4.0


@nki.jit
def scaled(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    env = float(os.environ.get("NKIC_TEST_OFFSET", "0"))
    nisa.tensor_scalar(dst=x, data=x, op0=nl.multiply, operand0=FACTOR, op1=nl.add, operand1=env)
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=nl.shared_constant(os.environ["NKIC_TEST_CONST"]))
    nisa.tensor_tensor(dst=x, data1=x, data2=c, op=nl.add)
    nisa.dma_copy(dst=out, src=x)
    return out
'''


@pytest.fixture
def global_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A kernel reading a module global, an environment variable and a ``shared_constant`` file; loaded anew (as a
    new process would) by calling the returned function."""
    import nkic.api.execute  # noqa: F401 — kernel(...) simulates

    (tmp_path / "gk.py").write_text(GLOBAL_KERNEL)
    np.save(tmp_path / "c.npy", np.zeros((128, 64), np.float32))
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("NKIC_TEST_CONST", str(tmp_path / "c.npy"))
    return lambda: load_kernel(f"{tmp_path / 'gk.py'}:scaled")


def test_a_global_set_at_run_time_keys_its_own_entry(global_kernel: Any) -> None:
    assert global_kernel()(ONES)[0, 0] == 4.0
    kernel = global_kernel()
    sys.modules[kernel.func.__module__].FACTOR = 7.0  # set at run time: the file still says 4.0
    assert kernel(ONES)[0, 0] == 7.0


def test_the_environment_read_while_tracing_keys_its_own_entry(
    global_kernel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert global_kernel()(ONES)[0, 0] == 4.0
    monkeypatch.setenv("NKIC_TEST_OFFSET", "1.5")
    assert global_kernel()(ONES)[0, 0] == 5.5


def test_a_rewritten_shared_constant_file_keys_its_own_entry(global_kernel: Any, tmp_path: Path) -> None:
    assert global_kernel()(ONES)[0, 0] == 4.0
    np.save(tmp_path / "c.npy", np.full((128, 64), 10.0, np.float32))  # same path, new data
    assert global_kernel()(ONES)[0, 0] == 14.0


def test_an_edit_under_a_running_process_does_not_poison_the_cache(global_kernel: Any, tmp_path: Path) -> None:
    """A notebook imported the kernel (FACTOR 4), then its file was edited (FACTOR 5): the running process still
    runs FACTOR 4 and must store that result under FACTOR 4's key, so a fresh process gets 5."""
    running = global_kernel()
    path = tmp_path / "gk.py"
    path.write_text(path.read_text().replace("FACTOR = 4.0", "FACTOR = 5.0"))
    assert running(ONES)[0, 0] == 4.0
    assert global_kernel()(ONES)[0, 0] == 5.0  # the old key (the text on disk) served 4.0 here
    assert running(ONES)[0, 0] == 4.0


def test_an_installed_kernel_keys_by_its_code(global_kernel: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel in an installed package (here: a folder the interpreter reports as site-packages), upgraded between
    processes: the old key skipped installed files; the traced code has no such blind spot."""
    import sysconfig

    paths = {**sysconfig.get_paths(), "purelib": str(tmp_path), "platlib": str(tmp_path)}
    monkeypatch.setattr(sysconfig, "get_paths", lambda *_, **__: paths)
    assert global_kernel()(ONES)[0, 0] == 4.0
    path = tmp_path / "gk.py"
    path.write_text(path.read_text().replace("op1=nl.add", "op1=nl.subtract"))  # an upgrade of the package
    assert global_kernel()(ONES)[0, 0] == 4.0  # 4*1 - 0 + 0
    path.write_text(path.read_text().replace("FACTOR = 4.0", "FACTOR = 8.0"))
    assert global_kernel()(ONES)[0, 0] == 8.0


def test_edited_nkic_sources_turn_the_cache_off_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_dir: Path
) -> None:
    """After a ``git pull`` under a running process, its loaded code is not the code on disk: no key is honest."""
    first = next(iter(nkic.sources.SOURCE_STATS))
    stale = {**nkic.sources.SOURCE_STATS, first: (0, 0)}
    monkeypatch.setattr(nkic.sources, "SOURCE_STATS", stale)
    monkeypatch.setattr(cache, "_warned", set())
    cache.reset_compiler_digest()
    try:
        kernel = _load(kernel_dir)
        with pytest.warns(cache.CacheWarning, match="sources changed"):
            assert not compile_kernel(kernel, (A,)).cached
            assert not compile_kernel(kernel, (A,)).cached
        assert _entries(tmp_path) == []
    finally:
        monkeypatch.undo()
        cache.reset_compiler_digest()


# -- a cache a team can run --------------------------------------------------------------------------------------
@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_entries_follow_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        cache.store(tmp_path, "ab" * 32, b"neff")
    finally:
        os.umask(old)
    (entry,) = tmp_path.rglob("*.neff")
    assert entry.stat().st_mode & 0o777 == mode
    assert cache.load(tmp_path, "ab" * 32) == b"neff"


def test_the_size_limit_evicts_the_least_recently_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    digests = [f"{i:02x}" * 32 for i in range(4)]
    entry_bytes = len(cache.MAGIC) + 32 + 1000
    monkeypatch.setenv(cache.MAX_BYTES_ENV, str(3 * entry_bytes))
    for age, d in enumerate(digests[:3]):
        cache.store(tmp_path, d, bytes(1000))
        os.utime(cache._entry(tmp_path, d), (1000 + age, 1000 + age))  # stored in this order
    assert cache.load(tmp_path, digests[0]) is not None  # a hit makes the oldest the most recently used
    cache.store(tmp_path, digests[3], bytes(1000))  # one over the limit: the least recently used (1) goes
    present = [d for d in digests if cache._entry(tmp_path, d).exists()]
    assert present == [digests[0], digests[2], digests[3]]
    assert cache.stats(tmp_path) == cache.CacheStats(3, 3 * entry_bytes, 0)


@pytest.mark.parametrize("text,size", [("", cache.DEFAULT_MAX_BYTES), ("1000", 1000), ("2K", 2048), ("1.5G", 3 << 29)])
def test_max_bytes_parses_sizes(monkeypatch: pytest.MonkeyPatch, text: str, size: int) -> None:
    monkeypatch.setenv(cache.MAX_BYTES_ENV, text)
    assert cache.max_bytes() == size


def test_stale_temporary_files_are_removed(tmp_path: Path) -> None:
    folder = tmp_path / "cd"
    folder.mkdir()
    stale, fresh = folder / f"{cache.TMP_PREFIX}killed", folder / f"{cache.TMP_PREFIX}writing"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    old = time.time() - cache.STALE_TMP_SECONDS - 60
    os.utime(stale, (old, old))
    cache.store(tmp_path, "cd" * 32, b"neff")
    assert not stale.exists() and fresh.exists()  # a write in progress elsewhere is left alone
    assert cache.stats(tmp_path).temporary == 1
    assert cache.clear(tmp_path) == 1 and cache.stats(tmp_path) == cache.CacheStats()


def test_cli_cache_info_and_clear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nkic.tools.cli import main

    compile_kernel(_load(kernel_dir), (A,))
    (entry,) = _entries(tmp_path)
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"cache: {tmp_path / 'cache'}" in out and "entries: 1" in out and f"bytes: {entry.stat().st_size} " in out
    assert main(["cache", "clear"]) == 0 and "removed 1 entries" in capsys.readouterr().out
    assert _entries(tmp_path) == []
    monkeypatch.delenv(cache.CACHE_DIR_ENV)
    assert main(["cache", "info"]) == 0 and "cache: off" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 1 and "the NEFF cache is off" in capsys.readouterr().err


# -- fresh processes: a global set at run time, an installed package upgraded between them -----------------------
INSTALLED_KERNEL = '''
from nkic import api as nki

nl = nki.language
nisa = nki.isa
FACTOR = 1.0


@nki.jit
def scaled(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.tensor_scalar(dst=x, data=x, op0=nl.multiply, operand0=FACTOR, op1=nl.add, operand1=1.0)
    nisa.dma_copy(dst=out, src=x)
    return out
'''

# One process of a team member: the package comes from a site-packages folder (``site.addsitedir``, as an installed
# distribution does), its module global FACTOR is set at run time (the file says 1.0), then compile and simulate.
FRESH_PROCESS = '''
import site, sys
import numpy as np
site.addsitedir(sys.argv[1])
import kpkg_cached
from nkic.compiler import cache
from nkic.compiler.driver import compile_kernel, run_neff
from nkic.frontend import TensorSpec

cache._identity = ("one-build", "")  # the same compiler in every process, even while nkic's files are being edited
kpkg_cached.FACTOR = float(sys.argv[2])
result = compile_kernel(kpkg_cached.scaled, (TensorSpec((128, 64), "float32"),))
out = run_neff(result.neff, {"a": np.ones((128, 64), np.float32)}).outputs["out"]
print(float(out[0, 0]), result.cached)
'''


def test_fresh_processes_key_a_run_time_global_and_an_upgraded_installed_package(tmp_path: Path) -> None:
    """The issue's cases across processes sharing one cache folder: a module global set to 4.0 then 7.0 in a new
    process (the old key served 4.0), and an installed kernel upgraded between processes (the old key skipped
    site-packages and served the old result)."""
    import subprocess

    site_dir = tmp_path / "lib" / "site-packages"
    (site_dir / "kpkg_cached").mkdir(parents=True)
    init = site_dir / "kpkg_cached" / "__init__.py"
    init.write_text(INSTALLED_KERNEL)
    env = {**os.environ, cache.CACHE_DIR_ENV: str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}

    def fresh(factor: float) -> tuple[float, bool]:
        r = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(site_dir), str(factor)], env=env,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        assert r.returncode == 0, r.stderr
        value, cached = r.stdout.split()
        return float(value), cached == "True"

    assert fresh(4.0) == (5.0, False)
    assert fresh(7.0) == (8.0, False)  # the global's run-time value is in the trace, so in the key
    assert fresh(4.0) == (5.0, True)  # the cache is in use: the same code in a new process hits
    init.write_text(INSTALLED_KERNEL.replace("op1=nl.add", "op1=nl.subtract"))  # `pip install -U kpkg`
    assert fresh(4.0) == (3.0, False)


def test_links_in_the_cache_are_never_written_through(tmp_path: Path) -> None:
    """A link planted at an entry, or at an entry's folder, below the cache folder: the store fails (the compile
    goes on uncached, with one warning) and nothing is written where the link points; a link at an entry is not a
    hit, and clearing the cache removes the link, never its target."""
    root, victim, elsewhere = tmp_path / "cache", tmp_path / "victim", tmp_path / "elsewhere"
    victim.write_bytes(b"precious")
    elsewhere.mkdir()
    entry = cache._entry(root, "ab" * 32)
    entry.parent.mkdir(parents=True)
    entry.symlink_to(victim)
    with pytest.raises(OSError, match="it is a symbolic link"):
        cache.store(root, "ab" * 32, b"neff")
    (root / "cd").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(OSError, match="cd is a symbolic link, which nkic does not follow"):
        cache.store(root, "cd" * 32, b"neff")
    assert victim.read_bytes() == b"precious" and list(elsewhere.iterdir()) == []
    assert cache.load(root, "ab" * 32) is None
    entry.parent.joinpath("ef.neff").symlink_to(victim)
    cache.clear(root)
    assert victim.read_bytes() == b"precious"


def test_the_cli_says_an_unusable_cache_in_one_line_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python's warning format is two lines naming nkic's own source line; the command prints one, once."""
    from nkic.tools.cli import main

    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path / "a-file" / "cache"))
    monkeypatch.setattr(cache, "_warned", set())
    add = [str(Path(nkic.__file__).parent / "kernels" / "tensor_add.py") + ":tensor_add", "--arg", "a=float32[128,64]",
           "--arg", "b=float32[128,64]", "-o", str(tmp_path / "k.neff")]  # fmt: skip
    assert main(["compile", *add]) == 0 and main(["compile", *add]) == 0
    assert capsys.readouterr().err == (
        f"nkic: warning: NEFF cache {tmp_path / 'a-file' / 'cache'} cannot be used (Not a directory); compiling without "
        "it\n")  # fmt: skip
