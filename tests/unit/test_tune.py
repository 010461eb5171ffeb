"""nki.tune / nkic tune: a sweep of a small kernel's tile size on the cost model (timing only), its failures with
their reasons, the strategies, the executors (local processes; Dask's local cluster of 2 workers, whose results must
equal the local ones), the result files and the NEFF cache on a re-run, and one-line errors."""

from __future__ import annotations

import inspect
import io
import json
import sys
from pathlib import Path

import pytest

import nkic
from nkic.api import tuning as tune
from nkic.frontend import NkiError, TensorSpec
from nkic.tools.cli import main

nkic.install_nki_alias()

# Rows of 128 partitions, TILE float32 columns per step: three [128, TILE] SBUF tiles live at once.
KERNEL = '''\
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def tiled_add(a, b, TILE=512):
    rows, cols = a.shape
    assert cols % TILE == 0, f"{cols} columns are not a multiple of TILE={TILE}"
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(cols // TILE):
        x = nl.ndarray((rows, TILE), dtype=a.dtype, buffer=nl.sbuf)
        y = nl.ndarray((rows, TILE), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[0:rows, j * TILE:(j + 1) * TILE])
        nisa.dma_copy(dst=y, src=b[0:rows, j * TILE:(j + 1) * TILE])
        z = nl.ndarray((rows, TILE), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
        nisa.dma_copy(dst=out[0:rows, j * TILE:(j + 1) * TILE], src=z)
    return out
'''
COLS = 32768
ARGS = (TensorSpec((128, COLS), "float32"), TensorSpec((128, COLS), "float32"))
# 32768 columns: three 128 KiB tiles per partition cannot fit SBUF (192 KiB on trn1, 208 KiB on trn2); 3 does not
# divide the columns (the kernel's own assert)
SPACE = {"TILE": [512, 2048, 32768, 3]}


@pytest.fixture(scope="module")
def kernel_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tune") / "k.py"
    path.write_text(KERNEL)
    return path


@pytest.fixture(scope="module")
def kernel(kernel_file: Path) -> nkic.frontend.Kernel:
    return tune.load_kernel(str(kernel_file), "tiled_add")


@pytest.fixture(scope="module")
def inline(kernel: nkic.frontend.Kernel) -> tune.Report:
    return tune.tune(kernel, SPACE, quiet=True)(*ARGS)


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_sweep_sorted_with_reasons(inline: tune.Report, kernel_file: Path) -> None:
    ran = [t for t in inline.trials if t.ok]
    assert [t.config["TILE"] for t in ran] == [2048, 512]  # fewer, larger DMAs: each pays its fixed cost once
    assert ran[0].latency_us < ran[1].latency_us and inline.best is ran[0]
    for t in ran:
        assert set(t.busy) == {"pe", "act", "dve", "pool", "sp"} and all(0 <= v <= 100 for v in t.busy.values())
        assert t.busy["dve"] + t.busy["pool"] > 0  # the adds ran somewhere
        assert 3 * 4 * t.config["TILE"] <= t.sbuf_peak <= t.sbuf_capacity  # three float32 tiles at least
    assert ran[0].sbuf_peak > ran[1].sbuf_peak  # 2048-column tiles take more SBUF than 512-column ones
    assertion, fit = (t.error for t in inline.failed)  # failures by configuration: TILE=3, then 32768
    # at the kernel's line the allocator or the tracer names (an allocation, or the instruction that needs it)
    assert fit.startswith(f"{kernel_file}:") and "does not fit in SBUF" in fit
    assert int(fit.split(":")[1]) in range(_line(KERNEL, "for j in"), _line(KERNEL, "return out"))
    assert assertion.startswith(f"{kernel_file}:{_line(KERNEL, 'assert cols')}: error: AssertionError: ")
    assert "\n" not in fit + assertion
    table = inline.table()
    assert table.index("2048") < table.index(" 512 ") and "failed TILE=32768: " in table
    assert inline.summary().endswith(f"best TILE=2048: {ran[0].latency_us:.3f} us")


def test_local_processes_equal_inline(kernel: nkic.frontend.Kernel, inline: tune.Report) -> None:
    report = tune.tune(kernel, SPACE, jobs=2, quiet=True)(*ARGS)
    assert [t.result() for t in report.trials] == [t.result() for t in inline.trials]
    backwards = tune.tune(kernel, {"TILE": SPACE["TILE"][::-1]}, quiet=True)(*ARGS)  # asked in the other order
    assert backwards.table() == inline.table()


def test_a_dying_worker_fails_its_configuration_only(tmp_path: Path) -> None:
    path = tmp_path / "dies.py"
    path.write_text(KERNEL.replace("    rows, cols = a.shape\n", "    rows, cols = a.shape\n    if TILE == 1024:\n"
                                   "        import os; os._exit(3)  # a worker killed (out of memory, a signal)\n"))
    dying = tune.load_kernel(str(path), "tiled_add")
    report = tune.tune(dying, {"TILE": [512, 1024, 2048]}, jobs=2, quiet=True)(*ARGS)
    assert [t.config["TILE"] for t in report.trials] == [2048, 512, 1024]
    assert report.failed[0].error.startswith("the worker running it failed: BrokenProcessPool")


def test_warnings_are_recorded_per_configuration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "warns.py"
    path.write_text(KERNEL.replace("    rows, cols = a.shape\n", "    rows, cols = a.shape\n    if TILE == 2048:\n"
                                   "        import warnings; warnings.warn(f'TILE {TILE} is wide')\n"))
    report = tune.tune(tune.load_kernel(str(path), "tiled_add"), {"TILE": [512, 2048]})(*ARGS)
    line = _line(path.read_text(), "warnings.warn")
    assert [t.warnings for t in report.trials] == [[f"{path}:{line}: UserWarning: TILE 2048 is wide"], []]
    assert f"warning TILE=2048: {path}:{line}: UserWarning: TILE 2048 is wide\n" in capsys.readouterr().out


def test_dask_local_cluster_equals_local(kernel: nkic.frontend.Kernel, inline: tune.Report) -> None:
    pytest.importorskip("distributed")
    report = tune.tune(kernel, SPACE, executor="dask", workers=2, quiet=True)(*ARGS)
    assert [t.result() for t in report.trials] == [t.result() for t in inline.trials]
    assert report.table() == inline.table()


def test_random_is_a_seeded_sample(kernel: nkic.frontend.Kernel, inline: tune.Report) -> None:
    sweep = tune.tune(kernel, SPACE, strategy="random", trials=2, seed=3, quiet=True)
    first, again = sweep(*ARGS), sweep(*ARGS)  # each call sweeps afresh
    assert len(first.trials) == 2 and [t.config for t in first.trials] == [t.config for t in again.trials]
    by_config = {t.config["TILE"]: t.result() for t in inline.trials}
    assert all(t.result() == by_config[t.config["TILE"]] for t in first.trials)


def test_optuna_asks_and_learns(kernel: nkic.frontend.Kernel, inline: tune.Report) -> None:
    pytest.importorskip("optuna")
    report = tune.tune(kernel, SPACE, strategy="optuna", trials=6, seed=0, quiet=True)(*ARGS)
    assert 1 <= len(report.trials) <= 6  # a configuration suggested again is told again, not re-run
    assert len({t.config["TILE"] for t in report.trials}) == len(report.trials)
    by_config = {t.config["TILE"]: t.result() for t in inline.trials}
    assert all(t.result() == by_config[t.config["TILE"]] for t in report.trials)


def test_files_and_cache_on_rerun(kernel: nkic.frontend.Kernel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nkic.compiler import cache

    monkeypatch.delenv("NKIC_CACHE_DIR", raising=False)
    # the compiler's identity pinned: this tests the tuner's use of the cache, and a shared checkout whose sources
    # are edited while the test runs would turn the cache off (nkic.compiler.cache: a process compiles uncached then)
    monkeypatch.setattr(cache, "compiler_digest", lambda: "test-tune")
    space = {"TILE": [2048, 3]}
    first = tune.tune(kernel, space, output_dir=tmp_path / "out", quiet=True)(*ARGS)
    again = tune.tune(kernel, space, output_dir=tmp_path / "out", quiet=True)(*ARGS)
    assert [t.cached for t in first.trials] == [False, False] and [t.cached for t in again.trials] == [True, False]
    assert [t.result() for t in again.trials] == [t.result() for t in first.trials]
    data = json.loads((tmp_path / "out" / "tune.json").read_text())
    assert data["best"]["config"] == {"TILE": 2048} and data["best"]["latency_us"] == first.best.latency_us
    assert [t["config"]["TILE"] for t in data["trials"]] == [2048, 3] and data["trials"][1]["error"]
    csv_lines = (tmp_path / "out" / "tune.csv").read_text().splitlines()
    assert csv_lines[0].startswith("TILE,latency_us,pe_busy_percent") and csv_lines[1].startswith("2048,")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["neff-cache", "tune.csv", "tune.json"]


def test_api_errors_at_the_callers_line(kernel: nkic.frontend.Kernel) -> None:
    here = inspect.currentframe()
    assert here is not None
    for space, options, message in [
        ({"TILES": [1]}, {}, "has no parameter 'TILES' to tune (it takes a, b, TILE)"),
        ({"TILE": []}, {}, "space 'TILE': no values"),
        ({"TILE": [1, 1]}, {}, "space 'TILE': a value is given twice"),
        ({"TILE": [512]}, {"strategy": "annealing"}, "unknown strategy 'annealing'"),
        ({"TILE": [512]}, {"trials": 0}, "trials=0: at least 1"),
    ]:
        with pytest.raises(NkiError) as e:
            line = here.f_lineno + 1
            nkic.api.tune(kernel, space, **options)
        assert str(e.value).startswith(f"{__file__}:{line}: error: ") and message in str(e.value)
        assert "\n" not in str(e.value)


def test_progress_only_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = tune.Progress(2, stream)
        bar.step(tune.Trial({"T": 1}, latency_us=5.0))
        bar.step(tune.Trial({"T": 2}, error="x"))
        bar.end()
    assert tty.getvalue().endswith(f"\r[{'#' * 30}] 2/2 best 5.0 us\n") and pipe.getvalue() == ""


def test_cli_tune(kernel_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "space.json"
    spec.write_text(json.dumps({"TILE": [2048, 512]}))
    base = ["tune", f"{kernel_file}:tiled_add", "--arg", f"a=float32[128,{COLS}]", "--arg", f"b=float32[128,{COLS}]"]
    assert main([*base, "--space", "TILE=512,2048,3", "--output-dir", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "failed TILE=3: " in out and "best TILE=2048: " in out and (tmp_path / "o" / "tune.csv").is_file()
    assert main([*base, "--space", str(spec), "--jobs", "2"]) == 0
    assert "2 configurations, 2 ran, 0 failed; best TILE=2048" in capsys.readouterr().out
    for extra, message in [
        (["--space", "TILE=1+"], "nkic: error: --space TILE: '1+' is not a Python literal (quote a string)"),
        (["--space", "TILES=1,2"], "nkic: error: kernel 'tiled_add' has no parameter 'TILES' to tune"),
        (["--space", str(tmp_path / "none.json")], "nkic: error: --space "),
        (["--space", "TILE=1", "--space", "TILE=2"], "nkic: error: --space TILE: given twice"),
        ([], "nkic: error: nkic tune needs --space"),
    ]:
        assert main([*base, *extra]) == 1
        err = capsys.readouterr().err
        assert err.startswith(message) and err.count("\n") == 1, err


def test_sbuf_peak_is_the_live_bytes() -> None:
    """A -> B (1), B -> C (2), C and a slice of C -> D (3, D over A's dead bytes), D -> B (4, a new value in B's
    bytes): at most C and D are live together (8192 bytes), the slice counted once and B's two values apart (one
    range from 1 to 4 would add B's 2048); the highest address (12288) is not the peak."""
    from nkic.runtime.neff import Neff, Subgraph
    from nkic.target.isa import Instr, Operand

    def sbuf(address: int, n: int) -> Operand:
        return Operand("sbuf", "float32", ((1, 128), (1, n)), address=address)

    a, b, c, c_slice, d = sbuf(0, 512), sbuf(4096, 512), sbuf(8192, 1024), sbuf(8192, 256), sbuf(0, 1024)
    program = [Instr("TENSOR_COPY", "dve", (b, a), inst_id=1), Instr("TENSOR_COPY", "act", (c, b), inst_id=2),
               Instr("TENSOR_TENSOR", "dve", (d, c, c_slice), inst_id=3), Instr("TENSOR_COPY", "act", (b, d), inst_id=4)]
    engines = {"dve": [program[0], program[2]], "act": [program[1], program[3]]}
    assert tune.sbuf_peak(Neff("k", [], [Subgraph("sg00", engines)])) == 4096 + 4096


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
