"""Outputs under real use (issue 25): every file nkic writes is atomic, follows the umask and never goes through a
symbolic link; a failed write keeps the old file and says which file and why in one line; Ctrl-C is status 130 and
one line; a closed stdout ends quietly.

``nkic.support.safeio`` is tested directly first (links planted between opening and writing, simulated full disks,
interrupts mid-write, umasks), then every output of the command line: ``-o``, ``--dump-dir``, ``--profile``,
``--trace``, ``nkic run --output-dir`` (a link planted and the folder swapped for a link during the run), ``nkic
demo --out-dir``, ``nkic-opt -o``, and the legacy entry points' ``save_neff_name``. The last part runs the console
scripts in subprocesses: SIGINT during a run, stdout closed for every subcommand, a file-size limit as a full disk.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pytest

from nkic.support import safeio
from nkic.tools import cli
from nkic.tools import info as info_command

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"
BIN = Path(sys.executable).parent
ADD = [f"{KERNELS / 'tensor_add.py'}:tensor_add", "--arg", "a=float32[128,64]", "--arg", "b=float32[128,64]"]

SLOW_KERNEL = """
import nki, nki.language as nl, nki.isa as nisa

@nki.jit
def slow(a, n):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    for i in nl.sequential_range(n):  # kept rolled (--roll-loops): a small NEFF that simulates for many seconds
        nisa.tensor_tensor(dst=x, data1=x, data2=x, op=nl.add)
    nisa.dma_copy(dst=out, src=x)
    return out
"""

BAD_KERNEL = """import nki, nki.language as nl

@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = 1 / 0
    return out
"""

TUNE_KERNEL = """import nki, nki.language as nl, nki.isa as nisa

@nki.jit
def scaled(a, f=1.0):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.tensor_scalar(dst=x, data=x, op0=nl.multiply, operand0=f)
    nisa.dma_copy(dst=out, src=x)
    return out
"""


def leftovers(folder: Path) -> list[str]:
    """Temporary files of safeio's writes left in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(safeio.TEMP_PREFIX))


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def no_space(*_: Any) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


# -- safeio: atomic, umask, links ---------------------------------------------------------------------------------
def test_write_replaces_the_file_and_leaves_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "k.neff"
    safeio.write_bytes(path, b"first")
    safeio.write_bytes(path, b"second")
    safeio.write_text(tmp_path / "t.json", '{"a": 1}')
    safeio.write_with(tmp_path / "a.npy", lambda f: np.save(f, np.arange(4)))
    assert path.read_bytes() == b"second" and (tmp_path / "t.json").read_text() == '{"a": 1}'
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.arange(4))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "k.neff", "t.json"]


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_new_files_and_folders_follow_the_umask(tmp_path: Path, mask: int, mode: int) -> None:
    with umask(mask):
        safeio.write_bytes(tmp_path / "f", b"x")
        safeio.make_dirs(tmp_path / "d" / "e")
        safeio.write_bytes(tmp_path / "d" / "e" / "g", b"x", within=tmp_path / "d")
    assert (tmp_path / "f").stat().st_mode & 0o777 == mode
    assert (tmp_path / "d" / "e" / "g").stat().st_mode & 0o777 == mode
    assert (tmp_path / "d" / "e").stat().st_mode & 0o777 == 0o777 & ~mask


def test_a_link_at_the_destination_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "out").mkdir()
    link = tmp_path / "out" / "k.neff"
    link.symlink_to(victim)
    dangling = tmp_path / "out" / "new.neff"
    dangling.symlink_to(tmp_path / "created-through-the-link")
    writes = [lambda p: safeio.write_bytes(p, b"evil"), lambda p: safeio.write_text(p, "evil"),
              lambda p: safeio.write_bytes(p, b"evil", within=tmp_path / "out"),
              lambda p: safeio.Folder(tmp_path / "out").write_bytes(p.name, b"evil")]  # fmt: skip
    for write in writes:
        for path in (link, dangling):
            with pytest.raises(safeio.OutputError) as e:
                write(path)
            assert str(e.value) == (f"cannot write {path}: it is a symbolic link, and nkic never writes through one "
                                    "(remove it, or write elsewhere)")  # fmt: skip
    assert victim.read_bytes() == b"precious" and not (tmp_path / "created-through-the-link").exists()
    assert link.is_symlink() and dangling.is_symlink() and leftovers(tmp_path / "out") == []


def test_a_link_planted_after_the_last_check_is_replaced_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the checks cannot close: the link appears just before the rename. The rename replaces the link
    itself; the file it points to is not written."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    path = tmp_path / "k.neff"
    real_replace = os.replace

    def plant_then_replace(src: Any, dst: Any, **kw: Any) -> None:
        os.symlink(victim, dst, dir_fd=kw.get("dst_dir_fd"))
        real_replace(src, dst, **kw)

    monkeypatch.setattr(os, "replace", plant_then_replace)
    safeio.write_bytes(path, b"new")
    monkeypatch.undo()
    assert not path.is_symlink() and path.read_bytes() == b"new" and victim.read_bytes() == b"precious"


def test_within_opens_every_folder_without_following_links(tmp_path: Path) -> None:
    root, outside = tmp_path / "out", tmp_path / "elsewhere"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    folder = safeio.Folder(root)  # opened "before the run"
    # during the run: out/sub is renamed away and a link to a folder outside takes its place
    (root / "sub").rename(root / "sub.old")
    (root / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(safeio.OutputError, match="out/sub is a symbolic link, which nkic does not follow inside"):
        folder.write_bytes("sub/y.npy", b"data")
    with pytest.raises(safeio.OutputError, match="is a symbolic link, which nkic does not follow"):
        safeio.write_bytes(root / "sub" / "y.npy", b"data", within=root)
    assert list(outside.iterdir()) == []
    # lexically outside the folder: refused before anything is opened
    for path in (tmp_path / "x", root / ".." / "x", root):
        with pytest.raises(safeio.OutputError, match="it is not inside"):
            safeio.write_bytes(path, b"data", within=root)
    folder.close()


def test_a_folder_swapped_for_a_link_while_writing_keeps_the_write_inside(tmp_path: Path) -> None:
    """The swap happens while the file is being written, after every component was opened: the rename is relative
    to the folder handle, so the file lands in the original folder (now renamed), never in the link's target."""
    root, outside = tmp_path / "out", tmp_path / "elsewhere"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()

    def fill(f: IO[bytes]) -> None:
        f.write(b"data")
        (root / "sub").rename(root / "moved")
        (root / "sub").symlink_to(outside, target_is_directory=True)

    safeio.write_with(root / "sub" / "y.npy", fill, within=root)
    assert (root / "moved" / "y.npy").read_bytes() == b"data" and list(outside.iterdir()) == []


def test_a_pinned_folder_survives_being_replaced_by_a_link(tmp_path: Path) -> None:
    out, outside = tmp_path / "out", tmp_path / "elsewhere"
    outside.mkdir()
    with safeio.Folder(out, create=True) as folder:
        out.rename(tmp_path / "moved")
        out.symlink_to(outside, target_is_directory=True)
        folder.write_bytes("y.npy", b"data")
        safeio.write_bytes(out / "z.npy", b"data", within=folder)
    assert sorted(p.name for p in (tmp_path / "moved").iterdir()) == ["y.npy", "z.npy"]
    assert list(outside.iterdir()) == []


# -- safeio: failures keep the old file, one line naming it ---------------------------------------------------------
def test_a_full_disk_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "k.neff"
    path.write_bytes(b"good old neff")
    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(safeio.OutputError) as e:
        safeio.write_bytes(path, b"new" * 1000)
    monkeypatch.undo()
    assert str(e.value) == f"cannot write {path}: No space left on device" and e.value.errno == errno.ENOSPC

    def half_then_full(f: IO[bytes]) -> None:  # the disk fills in the middle of the data
        f.write(b"partial")
        f.flush()
        no_space()

    with pytest.raises(safeio.OutputError, match="No space left on device"):
        safeio.write_with(path, half_then_full)
    assert path.read_bytes() == b"good old neff" and leftovers(tmp_path) == []


NPY_UNDER_A_FILE_SIZE_LIMIT = """
import resource, sys
import numpy as np
from nkic.support import safeio
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
try:
    safeio.write_with(sys.argv[1], lambda f: np.save(f, np.zeros((128, 4096), np.float32)))
except safeio.OutputError as e:
    print(e, e.errno)
"""


def test_a_full_disk_under_numpy_save_names_the_os_reason(tmp_path: Path) -> None:
    """``np.save`` writes the data with C stdio (``ndarray.tofile``), whose short write is an OSError without errno
    ("524288 requested and 16352 written"): the message gives the OS's reason instead. A real limit (RLIMIT_FSIZE in
    a child process, EFBIG as a full disk gives ENOSPC), since the short write happens below Python."""
    path = tmp_path / "out.npy"
    path.write_bytes(b"old")
    r = subprocess.run([sys.executable, "-c", NPY_UNDER_A_FILE_SIZE_LIMIT, str(path)], capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert (r.returncode, r.stdout, r.stderr) == (0, f"cannot write {path}: File too large {errno.EFBIG}\n", "")
    assert path.read_bytes() == b"old" and leftovers(tmp_path) == []


def test_a_killed_writers_temporary_file_goes_with_the_next_write_after_an_hour(tmp_path: Path) -> None:
    """SIGKILL mid-write leaves ``.tmp-<hex>-k.neff`` (bench/kill_outputs.py); the next write of k.neff removes it
    once it is an hour old. A younger one may be another process's write in progress; other names are not ours."""
    hour_ago = time.time() - safeio.STALE_TEMP_SECONDS - 60
    names = {"stale": ".tmp-0123456789abcdef-k.neff", "fresh": ".tmp-fedcba9876543210-k.neff",
             "other file": ".tmp-0123456789abcdef-j.neff", "not ours": ".tmp-notahexnumber00-k.neff",
             "a folder": ".tmp-00112233445566ff-k.neff"}  # fmt: skip
    for what, name in names.items():
        if what == "a folder":
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_bytes(b"half")
        if what != "fresh":
            os.utime(tmp_path / name, (hour_ago, hour_ago))
    with safeio.Folder(tmp_path) as folder:
        folder.write_bytes("j2.neff", b"new")  # another name: nothing of k.neff's goes
        assert len(leftovers(tmp_path)) == 5
        folder.write_bytes("k.neff", b"new")  # the folder's handle is listed again: each listing starts afresh
    assert leftovers(tmp_path) == sorted(n for w, n in names.items() if w != "stale")
    assert (tmp_path / "k.neff").read_bytes() == b"new"

def test_an_interrupt_mid_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "out.npy"
    path.write_bytes(b"old")

    def interrupted(f: IO[bytes]) -> None:
        f.write(b"half")
        raise KeyboardInterrupt

    def buggy(f: IO[bytes]) -> None:
        raise ValueError("not an I/O error")

    with pytest.raises(KeyboardInterrupt):
        safeio.write_with(path, interrupted)
    with pytest.raises(ValueError, match="not an I/O error"):  # not an OutputError: the caller's own failure
        safeio.write_with(path, buggy)
    assert path.read_bytes() == b"old" and leftovers(tmp_path) == []


def test_an_interrupt_as_the_temporary_file_is_created_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT the moment the temporary file appears (bench/kill_outputs.py polls for it) can raise KeyboardInterrupt
    right after ``os.open`` created it, before safeio knew of it: the file must still go."""
    path = tmp_path / "k.neff"
    path.write_bytes(b"old")
    real_open = os.open

    def open_then_interrupted(file: Any, flags: int, *args: Any, **kw: Any) -> int:
        fd = real_open(file, flags, *args, **kw)
        if flags & os.O_EXCL:
            os.close(fd)
            raise KeyboardInterrupt
        return fd

    monkeypatch.setattr(os, "open", open_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        safeio.write_bytes(path, b"new")
    monkeypatch.undo()
    assert path.read_bytes() == b"old" and leftovers(tmp_path) == []

def test_what_is_in_the_way_is_named(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    cases = {
        tmp_path / "afile" / "k.neff": f"{tmp_path / 'afile'} is not a directory",
        tmp_path / "afile" / "sub" / "k.neff": f"{tmp_path / 'afile'} is not a directory",
        tmp_path / "nodir" / "k.neff": f"the directory {tmp_path / 'nodir'} does not exist",
        tmp_path / "adir": "Is a directory",
        tmp_path / "fifo": "it is not a regular file (a device, pipe or socket), which nkic does not replace",
        tmp_path / ("x" * 300): "File name too long",
    }
    for path, reason in cases.items():
        for attempt in (safeio.check_destination, lambda p: safeio.write_bytes(p, b"x")):
            with pytest.raises(safeio.OutputError) as e:
                attempt(path)
            assert str(e.value) == f"cannot write {path}: {reason}"
    with pytest.raises(safeio.OutputError) as e:
        safeio.make_dirs(tmp_path / "afile")
    assert str(e.value) == f"cannot create the directory {tmp_path / 'afile'}: exists and is not a directory"
    with pytest.raises(safeio.OutputError, match="afile is not a directory"):
        safeio.make_dirs(tmp_path / "afile" / "x" / "y")
    assert safeio.not_a_directory(tmp_path / "adir") is None
    assert safeio.not_a_directory("afile-nowhere/x") == "the directory afile-nowhere does not exist"
    assert leftovers(tmp_path) == [] and (tmp_path / "afile").read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "k.neff"
    path.write_bytes(b"old")
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(safeio.OutputError) as e:
            safeio.write_bytes(path, b"new")
    finally:
        tmp_path.chmod(0o755)
    assert str(e.value) == f"cannot write {path}: Permission denied" and path.read_bytes() == b"old"


# -- the command line, in process -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def neffs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tensor_add's NEFF and inputs, and the slow kernel's NEFF, compiled once for the module."""
    d = tmp_path_factory.mktemp("neffs")
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    np.save(d / "a.npy", a)
    (d / "slow.py").write_text(SLOW_KERNEL)
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["compile", *ADD, "-o", str(d / "k.neff")]) == 0
        assert cli.main(["compile", f"{d / 'slow.py'}:slow", "--arg", "a=float32[128,64]", "--arg", "n=60000",
                         "--roll-loops", "-o", str(d / "slow.neff")]) == 0  # fmt: skip
    return d


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, neffs: Path) -> Path:
    for name in ("k.neff", "a.npy", "slow.neff"):
        (tmp_path / name).symlink_to(neffs / name)  # inputs may be links: only outputs are never written through
    (tmp_path / "victim").write_bytes(b"precious")
    (tmp_path / "afile").write_text("a file")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def one_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = cli.main(list(args))
    err = capsys.readouterr().err
    assert code == 1 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err.rstrip("\n")


RUN = ["run", "k.neff", "--input", "a=a.npy", "--input", "b=a.npy"]
LINK_REASON = "it is a symbolic link, and nkic never writes through one (remove it, or write elsewhere)"


@pytest.mark.parametrize(
    "args,link,message",
    [
        (["compile", *ADD, "-o", "k2.neff"], "k2.neff", f"nkic: error: -o k2.neff: {LINK_REASON}"),
        (["compile", *ADD, "-o", "k2.neff", "--dump-dir", "ir"], "ir/00-penguin.mlir",
         f"nkic: error: cannot write ir/00-penguin.mlir: {LINK_REASON}"),
        ([*RUN, "--output-dir", "o"], "o/out.npy", f"nkic: error: cannot write o/out.npy: {LINK_REASON}"),
        ([*RUN, "--output-dir", "o", "--profile", "p.json"], "p.json", f"nkic: error: --profile p.json: {LINK_REASON}"),
        (["profile", "k.neff", "-o", "t.png"], "t.png", f"nkic: error: -o t.png: {LINK_REASON}"),
        (["profile", "k.neff", "-o", "t.png", "--trace", "t.json"], "t.json",
         f"nkic: error: --trace t.json: {LINK_REASON}"),
    ],
)  # fmt: skip
def test_cli_refuses_a_link_at_every_output(
    work: Path, capsys: pytest.CaptureFixture[str], args: list[str], link: str, message: str
) -> None:
    (work / link).parent.mkdir(exist_ok=True)
    (work / link).symlink_to(work / "victim")
    assert one_error(capsys, *args) == message
    assert (work / "victim").read_bytes() == b"precious" and (work / link).is_symlink()


def test_cli_run_writes_into_the_output_dir_it_opened(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder is swapped for a link to another folder while the kernel runs: the outputs still land in the
    folder that was opened (now renamed), none outside. Then a link planted at the output during the run: refused."""
    from nkic.tools import commands

    real_run = commands.run_neff
    (work / "elsewhere").mkdir()

    def swap_during_run(*args: Any, **kw: Any) -> Any:
        result = real_run(*args, **kw)
        (work / "d" / "out").rename(work / "d" / "moved")
        (work / "d" / "out").symlink_to(work / "elsewhere", target_is_directory=True)
        return result

    monkeypatch.setattr(commands, "run_neff", swap_during_run)
    assert cli.main([*RUN, "--output-dir", "d/out"]) == 0
    assert [p.name for p in (work / "d" / "moved").iterdir()] == ["out.npy"]
    assert list((work / "elsewhere").iterdir()) == []
    np.testing.assert_array_equal(np.load(work / "d" / "moved" / "out.npy"), 2 * np.load(work / "a.npy"))

    def plant_during_run(*args: Any, **kw: Any) -> Any:
        result = real_run(*args, **kw)
        (work / "o2" / "out.npy").symlink_to(work / "victim")
        return result

    monkeypatch.setattr(commands, "run_neff", plant_during_run)
    capsys.readouterr()
    assert one_error(capsys, *RUN, "--output-dir", "o2") == f"nkic: error: cannot write o2/out.npy: {LINK_REASON}"
    assert (work / "victim").read_bytes() == b"precious" and leftovers(work / "o2") == []


def test_cli_failed_writes_name_the_file(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (work / "k2.neff").write_bytes(b"old")
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", no_space)
    assert one_error(capsys, "compile", *ADD, "-o", "x.neff", "--dump-dir", "ir") == (
        "nkic: error: cannot write ir/00-penguin.mlir: No space left on device")  # fmt: skip
    assert one_error(capsys, "compile", *ADD, "-o", "k2.neff") == (
        "nkic: error: cannot write k2.neff: No space left on device")  # fmt: skip
    monkeypatch.setattr(os, "fsync", real_fsync)  # not undo(): that would also undo the fixture's chdir
    assert (work / "k2.neff").read_bytes() == b"old" and leftovers(work) == [] and leftovers(work / "ir") == []
    assert one_error(capsys, "compile", *ADD, "-o", "afile/k.neff") == (
        "nkic: error: -o afile/k.neff: afile is not a directory")  # fmt: skip
    assert one_error(capsys, "demo", "--out-dir", "afile") == (
        "nkic: error: --out-dir afile: exists and is not a directory")  # fmt: skip
    assert one_error(capsys, *RUN, "--output-dir", "afile/o") == "nkic: error: --output-dir afile/o: afile is not a directory"


def test_a_located_message_is_printed_once(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "bad.py").write_text(BAD_KERNEL)
    err = one_error(capsys, "compile", "bad.py:k", "--arg", "a=float32[128,64]", "-o", "x.neff")
    assert err.startswith(f"{work / 'bad.py'}:6: error: ZeroDivisionError: division by zero"), err
    assert cli.error_line(cli.CliError("--grid 0: ...")) == "nkic: error: --grid 0: ..."
    assert cli.error_line(ValueError("k.py:7:3: error: x")) == "k.py:7:3: error: x"


def test_nkic_opt_output_is_atomic_and_never_through_a_link(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from nkic.tools import opt

    good = work / "good.mlir"
    good.write_text("builtin.module {}\n")
    (work / "bad.mlir").write_text("builtin.module {\n")
    (work / "out.mlir").write_text("old")
    with pytest.raises(SystemExit) as e:  # a failing run writes nothing: the old file stays
        opt.main([str(work / "bad.mlir"), "-o", "out.mlir"])
    assert e.value.code == 1 and (work / "out.mlir").read_text() == "old"
    opt.main([str(good), "-o", "out.mlir"])
    assert (work / "out.mlir").read_text().startswith("builtin.module") and leftovers(work) == []
    (work / "link.mlir").symlink_to(work / "victim")
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        opt.main([str(good), "-o", "link.mlir"])
    assert e.value.code == 1
    assert capsys.readouterr().err == f"nkic-opt: error: cannot write link.mlir: {LINK_REASON}\n"
    assert (work / "victim").read_bytes() == b"precious"


def test_entry_points_refuse_a_link(tmp_path: Path) -> None:
    from nkic import api as nki
    from nkic.frontend.errors import NkiError

    nl = nki.language

    def double(a):  # type: ignore[no-untyped-def]
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(a)))
        return out

    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "k.neff").symlink_to(victim)
    kernel = nki.baremetal(save_neff_name=str(tmp_path / "k.neff"))(double)
    with pytest.raises(NkiError, match=f"cannot write {tmp_path / 'k.neff'}: it is a symbolic link"):
        kernel(np.ones((128, 64), np.float32))
    assert victim.read_bytes() == b"precious"


# -- the console scripts: interrupts, closed pipes, a full disk -----------------------------------------------------
def console(name: str) -> list[str]:
    script = BIN / name
    return [str(script)] if script.exists() else [sys.executable, "-m", f"nkic.tools.{'opt' if '-' in name else 'cli'}"]


def test_sigint_during_a_run_is_status_130_one_line_no_output(work: Path) -> None:
    proc = subprocess.Popen([*console("nkic"), "run", "slow.neff", "--input", "a=a.npy", "--output-dir", "out"],
                            cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not (work / "out").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # the folder is made just before the simulation starts
    time.sleep(0.3)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err == "nkic: interrupted\n" and "output" not in out
    assert list((work / "out").iterdir()) == []


def test_sigint_during_a_compile_is_status_130_one_line_no_output(work: Path) -> None:
    """Ctrl-C while the passes run: the first dump file marks the end of the trace, the NEFF is written last."""
    (work / "slow.py").write_text(SLOW_KERNEL)
    (work / "old.neff").write_bytes(b"old")
    proc = subprocess.Popen([*console("nkic"), "compile", "slow.py:slow", "--arg", "a=float32[128,512]", "--arg",
                             "n=2000", "-o", "old.neff", "--dump-dir", "ir"], cwd=work, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not (work / "ir" / "00-penguin.mlir").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, "nkic: interrupted\n")
    assert (work / "old.neff").read_bytes() == b"old" and leftovers(work) == [] and leftovers(work / "ir") == []


def test_an_interrupt_a_library_turned_into_another_error_is_still_one_line(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """numpy's C-extension import, interrupted, prints the KeyboardInterrupt (``import_array()`` calls
    ``PyErr_Print``, that is ``sys.excepthook``) and raises ``ImportError: numpy._core.multiarray failed to import``
    (found by sending SIGINT at random moments: status 1, 70 lines). Ctrl-C came first: status 130, one line."""

    def interrupted_import(args: Any) -> None:
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt as e:
            sys.excepthook(type(e), e, e.__traceback__)
            raise ImportError("numpy._core.multiarray failed to import") from e

    monkeypatch.setattr(info_command, "cmd_info", interrupted_import)
    assert cli.main(["info", "k.neff"]) == 130
    assert capsys.readouterr().err == "nkic: interrupted\n"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler and sys.excepthook is sys.__excepthook__

    def failing(args: Any) -> None:  # without Ctrl-C the same error is the command's one error line
        raise ImportError("numpy._core.multiarray failed to import")

    monkeypatch.setattr(info_command, "cmd_info", failing)
    assert cli.main(["info", "k.neff"]) == 1
    assert capsys.readouterr().err.startswith("nkic: error: ImportError: numpy._core.multiarray failed to import")


class _InterruptedImport:
    """A meta path finder: importing ``name`` receives SIGINT, raised as KeyboardInterrupt or, as numpy's import
    reports it, turned into an ImportError."""

    def __init__(self, name: str, convert: bool) -> None:
        self.name, self.convert = name, convert

    def find_spec(self, fullname: str, *_: Any) -> None:
        if fullname != self.name:
            return None
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt as e:
            if not self.convert:
                raise
            raise ImportError("numpy._core.multiarray failed to import") from e
        raise AssertionError("SIGINT did not interrupt")


@pytest.mark.parametrize("convert", [False, True])
def test_nkic_opt_interrupted_while_it_loads_is_one_line(
    convert: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """nkic-opt imports xDSL and every nkic dialect and pass (over a second) after its entry point runs: Ctrl-C then
    is ``nkic-opt: interrupted`` and status 130, not a traceback."""
    from nkic import tools
    from nkic.tools import opt

    monkeypatch.delitem(sys.modules, "nkic.tools.opt_tool", raising=False)  # loaded anew, as a fresh process does
    monkeypatch.delattr(tools, "opt_tool", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_InterruptedImport("nkic.tools.opt_tool", convert), *sys.meta_path])
    with pytest.raises(SystemExit) as e:
        opt.main(["x.mlir"])
    assert e.value.code == 130 and capsys.readouterr().err == "nkic-opt: interrupted\n"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

def test_a_closed_stdout_ends_every_subcommand_quietly(work: Path) -> None:
    """stdout is a pipe whose reader is gone before the command starts (the deterministic form of ``| head -1``):
    status 141, nothing on stderr; with stdout buffered (the usual case: the error comes when it is flushed) and
    unbuffered (PYTHONUNBUFFERED: at the first print). Every subcommand ``nkic --help`` lists is here."""
    (work / "ir").mkdir()
    (work / "ir" / "p.mlir").write_text("builtin.module {}\n")
    commands = {
        "compile": [*console("nkic"), "compile", *ADD, "-o", "c.neff"],
        "run": [*console("nkic"), *RUN, "--output-dir", "o"],
        "profile": [*console("nkic"), "profile", "k.neff", "-o", "t.png", "--width", "200"],
        "info": [*console("nkic"), "info", "k.neff"],
        "tune": [*console("nkic"), "tune", "tk.py:scaled", "--arg", "a=float32[128,64]", "--space", "f=1.0,2.0",
                 "--jobs", "1"],
        "cache": [*console("nkic"), "cache", "info"],
        "demo": [*console("nkic"), "demo", "--out-dir", "demo"],
        "help": [*console("nkic"), "--help"],
        "nkic-opt": [*console("nkic-opt"), "ir/p.mlir"],
        "python -m nkic info": [sys.executable, "-m", "nkic", "info", "k.neff"],
    }
    (subcommands,) = [a.choices for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(subcommands) <= set(commands), "a subcommand is missing here"
    (work / "tk.py").write_text(TUNE_KERNEL)
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    unbuffered = {**buffered, "PYTHONUNBUFFERED": "1"}
    read, write = os.pipe()
    os.close(read)
    procs = {(name, bool(env.get("PYTHONUNBUFFERED"))):
             subprocess.Popen(cmd, cwd=work, stdout=write, stderr=subprocess.PIPE, text=True, env=env)
             for env in (buffered, unbuffered) for name, cmd in commands.items()
             if (env is buffered) != (name in ("python -m nkic info", "nkic-opt"))}  # fmt: skip
    os.close(write)
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=120)
        assert (proc.returncode, err) == (141, ""), name
    shell = subprocess.run(f"{' '.join(console('nkic'))} info k.neff | head -1", shell=True, cwd=work,
                           capture_output=True, text=True)  # fmt: skip
    assert shell.stderr == "" and shell.stdout.startswith("NEFF tensor_add")


def test_a_file_size_limit_keeps_the_old_neff(work: Path) -> None:
    """RLIMIT_FSIZE makes the NEFF write fail for real (EFBIG, as a full disk would with ENOSPC)."""
    (work / "k2.neff").write_bytes(b"old")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    r = subprocess.run([*console("nkic"), "compile", *ADD, "-o", "k2.neff"], cwd=work, capture_output=True,
                       text=True, preexec_fn=limit)  # fmt: skip
    assert (r.returncode, r.stderr) == (1, "nkic: error: cannot write k2.neff: File too large\n")
    assert (work / "k2.neff").read_bytes() == b"old" and leftovers(work) == []
