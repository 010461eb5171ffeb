"""Hostile and wrong input (issue 12): names and paths, bounded work, kernel errors at the user's line, the CLI.

Every case here once escaped as a raw exception, a file outside the output folder, a hang or a silent wrong value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from xdsl.utils.exceptions import PassFailedException

import nkic.frontend.isa as nisa
import nkic.frontend.language as nl
from nkic.support import safeio
from nkic.compiler.driver import compile_traced
from nkic.api.execute import simulate
from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import TensorSpec, jit
from nkic.runtime.encoding import Instr, Operand, queue_sem
from nkic.runtime.errors import SimulationError
from nkic.runtime.neff import Neff, NeffFormatError, Subgraph, Variable, read_neff, write_neff
from nkic.runtime.simulator import simulate as simulate_neff
from nkic.target.names import is_safe_name, safe_name
from nkic.tools import cli, commands


def _load_neff_helpers():  # the NEFF battery's builders (sample NEFF, re-signing, JSON edits), by path
    import importlib.util

    spec = importlib.util.spec_from_file_location("_neff_battery", Path(__file__).with_name("test_neff.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


_NB = _load_neff_helpers()
_edit_json, rewrap, sample_neff = _NB._edit_json, _NB.rewrap, _NB.sample_neff

A = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
SPEC = TensorSpec((128, 64), "float32")


def line_of(marker: str) -> int:
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# {marker}"):
                return n
    raise AssertionError(marker)


def at(marker: str) -> str:
    return f"{__file__}:{line_of(marker)}"


# -- 1. names and paths ---------------------------------------------------------------------------------------
BAD_NAMES = ["../x", "/var/x", "a/b", "a\0b", "x" * 300, "", "a b", "a\\b", ".hidden", "1abc", "é"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_writer_refuses_unsafe_variable_names(name: str) -> None:
    neff = sample_neff(1)
    neff.variables[1].name = name
    with pytest.raises(ValueError, match="not a safe name"):
        write_neff(neff)


@pytest.mark.parametrize("name", ["../k", "k/x", "x" * 200])
def test_writer_refuses_unsafe_kernel_names(name: str) -> None:
    neff = sample_neff(1)
    neff.name = name
    with pytest.raises(ValueError, match="kernel name .* is not a safe name"):
        write_neff(neff)


def _renamed(good: bytes, old: str, new: str) -> bytes:
    """``good`` with variable ``old`` called ``new`` in every member naming it, re-signed (a valid header)."""
    data = good
    for sg in ("sg00", "sg01"):
        data = _edit_json(data, f"{sg}/def.json", lambda d: d["var"].__setitem__(new, d["var"].pop(old)))
    return data


@pytest.mark.parametrize("name", ["../x", "/var/x", "a\0b", "x" * 300])
def test_reader_refuses_unsafe_variable_names(name: str) -> None:
    with pytest.raises(NeffFormatError, match="is not a safe name"):
        read_neff(_renamed(write_neff(sample_neff()), "y", name))


def test_reader_refuses_an_unsafe_header_name() -> None:
    good = bytearray(write_neff(sample_neff()))
    good[220 : 220 + 9] = b"../evil\0\0"  # the header's 256-byte name field
    with pytest.raises(NeffFormatError, match="header name '../evil' is not a safe name"):
        read_neff(bytes(good))


def test_safe_name() -> None:
    assert safe_name("a b/c") == "a_b_c" and safe_name("3d") == "_3d" and safe_name("") == "t"
    assert is_safe_name(safe_name("x" * 1000)) and is_safe_name(safe_name("../\0é"))
    assert all(not is_safe_name(n) for n in BAD_NAMES)


def k_named(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm, name="a b/c")
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf, name="../" * 100 + "\0")
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_tracer_sanitises_user_names() -> None:
    traced = jit(k_named).trace(SPEC)
    assert [o[0] for o in traced.outputs] == ["a_b_c"]
    neff = read_neff(compile_traced(traced).neff)
    assert all(is_safe_name(v.name) for v in neff.variables)
    np.testing.assert_array_equal(simulate(k_named)(A), A)


def test_output_path_stays_inside_output_dir(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    assert commands.output_path(out, "fine") == out / "fine.npy"
    for name in ["../x", "/var/x", "a\0b", "x" * 300]:
        with pytest.raises(cli.CliError, match="not a safe file name"):
            commands.output_path(out, name)
    (out / "link.npy").symlink_to(tmp_path / "elsewhere.npy")  # a planted link out of the folder
    with pytest.raises(safeio.OutputError, match="link.npy: it is a symbolic link, and nkic never writes through"):
        commands.output_path(out, "link")
    assert not (tmp_path / "elsewhere.npy").exists()


# -- 2. bounded work --------------------------------------------------------------------------------------------
def test_reader_caps_declared_sizes() -> None:
    neff = sample_neff(1)
    neff.variables[2] = Variable("scratch", 2, "tmp-buf", (1 << 31, 1 << 4), "float32")  # 128 GiB
    with pytest.raises(NeffFormatError, match="more than the .* bytes of HBM"):
        read_neff(write_neff(neff))


def test_listing_must_match_binary() -> None:
    good = write_neff(sample_neff())

    def edit(d: dict) -> None:  # the listing claims another activation function than the binary runs
        d["instructions"][0]["imms"]["func"] = "tanh"

    with pytest.raises(NeffFormatError, match=r"sg00/Activation.json disagrees with Activation.bin at instruction 0"):
        read_neff(_edit_json(good, "sg00/Activation.json", edit))
    with pytest.raises(NeffFormatError, match=r"SP.json disagrees with SP.bin in 'dma'"):
        read_neff(_edit_json(good, "sg00/SP.json", lambda d: d["dma"][0].update(queue="q3")))


Pairs = tuple[tuple[int, int], ...]


def _one_dma(src_pairs: Pairs, dst_pairs: Pairs = ((1, 128), (1, 64))) -> Neff:
    src = Operand("hbm", "float32", src_pairs, var_id=0)
    dst = Operand("sbuf", "float32", dst_pairs)
    sp = [Instr("DMA_COPY", "sp", (dst, src), (0,), signal_sem=queue_sem(0))]
    variables = [Variable("x", 0, "input", (128, 64), "float32")]
    return Neff("k", variables, [Subgraph("sg00", {"pe": [], "act": [], "dve": [], "pool": [], "sp": sp})])


@pytest.mark.parametrize("pairs", [((64, 128), (1, 1 << 30)), ((1 << 30, 2), (1, 64)), ((0, 1 << 20), (0, 1 << 20))])
def test_a_flipped_pattern_is_refused_before_any_array(pairs: tuple[tuple[int, int], ...]) -> None:
    t0 = time.perf_counter()
    with pytest.raises(SimulationError, match="access pattern|outside"):
        simulate_neff(read_neff(write_neff(_one_dma(pairs))), {"x": A})
    assert time.perf_counter() - t0 < 5


@pytest.mark.parametrize("pairs", [((1, 128), (1, 1 << 30)), ((1, 128), (0, 1 << 28), (0, 1 << 28)),
                                   ((1, 128), (-1, 64))])  # fmt: skip
def test_a_flipped_on_chip_pattern_is_refused_before_any_array(pairs: tuple[tuple[int, int], ...]) -> None:
    t0 = time.perf_counter()
    with pytest.raises(SimulationError, match="access pattern|outside"):
        simulate_neff(read_neff(write_neff(_one_dma(((64, 128), (1, 64)), pairs))), {"x": A})
    assert time.perf_counter() - t0 < 5


def k_static_loop(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for _ in nl.static_range(10**9):  # E-static-range
        pass
    return out


def k_affine_loop(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(10**9):  # E-affine-range
        t = nl.ndarray((128, 64), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
    return out


def k_many(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), a.dtype, buffer=nl.sbuf)
    for _ in nl.static_range(50):
        nisa.dma_copy(dst=t, src=a)  # E-many
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("fn,marker", [(k_static_loop, "E-static-range"), (k_affine_loop, "E-affine-range")])
def test_trip_count_limit(fn, marker: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(NkiError, match="loop of 1000000000 iterations is over the limit of 65536.*NKIC_MAX_TRIP_COUNT"):
        jit(fn).trace(SPEC)
    assert str(NkiError) and time.perf_counter() - t0 < 5
    with pytest.raises(NkiError) as e:
        jit(fn).trace(SPEC)
    assert str(e.value).startswith(at(marker))


def test_instruction_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NKIC_MAX_INSTRUCTIONS", "20")
    with pytest.raises(NkiError, match="traces more than 20 instructions.*NKIC_MAX_INSTRUCTIONS=N") as e:
        jit(k_many).trace(SPEC)
    assert str(e.value).startswith(at("E-many"))
    monkeypatch.setenv("NKIC_MAX_INSTRUCTIONS", "100")
    monkeypatch.setenv("NKIC_MAX_TRIP_COUNT", str(10**9))
    traced = jit(k_affine_loop).trace(SPEC)  # the rolled loop traces its body once; bir-unroll sees the product
    t0 = time.perf_counter()
    with pytest.raises(PassFailedException, match=r"unrolls to 1000000000 instructions, over the limit of 100"):
        compile_traced(traced)
    assert time.perf_counter() - t0 < 10


# -- 3. kernel errors at the user's line --------------------------------------------------------------------
def _helper_divides(x):
    return 1 / x  # E-zero


def k_zero(a):
    _helper_divides(0)
    return a


def k_name(a):
    return undefined_name  # noqa: F821 # E-name


def _recurse(n):
    return _recurse(n + 1)  # E-recursion


def k_recursion(a):
    _recurse(0)


def k_raise(a):
    raise ValueError("tile size 7 is not supported")  # E-raise


def k_exit(a):
    sys.exit(3)  # E-exit


@pytest.mark.parametrize(
    "fn,marker,message",
    [
        (k_zero, "E-zero", "ZeroDivisionError: division by zero"),
        (k_name, "E-name", "NameError: name 'undefined_name' is not defined"),
        (k_recursion, "E-recursion", "RecursionError: maximum recursion depth exceeded"),
        (k_raise, "E-raise", "ValueError: tile size 7 is not supported"),
        (k_exit, "E-exit", r"the kernel code called sys.exit\(3\)"),
    ],
)
def test_exceptions_in_kernels_are_at_the_user_line(fn, marker: str, message: str) -> None:
    with pytest.raises(NkiError, match=message) as e:
        jit(fn).trace(SPEC)
    assert str(e.value).startswith(f"{at(marker)}: error: "), str(e.value)
    assert "\n" not in str(e.value)


def k_too_big(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    # One instruction whose three operands (80 KiB per partition each) are live at once: more than SBUF, and nothing
    # to spill (an instruction's own operands stay on chip), though within the tracer's fail-fast margin.
    x = nl.ndarray((128, 20480), nl.float32, buffer=nl.sbuf)
    y = nl.ndarray((128, 20480), nl.float32, buffer=nl.sbuf)
    # z is the one that finds no room
    z = nl.ndarray((128, 20480), nl.float32, buffer=nl.sbuf)  # E-capacity
    nisa.memset(dst=x, value=1.0)
    nisa.memset(dst=y, value=2.0)
    nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
    nisa.dma_copy(dst=out, src=z[0:128, 0:64])
    return out


def test_capacity_error_names_the_allocation_line() -> None:
    with pytest.raises(PassFailedException, match="kernel does not fit in SBUF") as e:
        compile_traced(jit(k_too_big).trace(SPEC))
    assert str(e.value).startswith(f"{at('E-capacity')}:"), str(e.value)
    assert "even with spilling" in str(e.value), str(e.value)


def test_hbm_arguments_are_capped() -> None:
    t0 = time.perf_counter()
    with pytest.raises(NkiError, match=r"kernel argument 'a' float32\[99999999999999, 512\] needs .* more than"):
        jit(k_named).trace(TensorSpec((99999999999999, 512), "float32"))
    assert time.perf_counter() - t0 < 5


# -- 4. the CLI -------------------------------------------------------------------------------------------------
KERNEL = """
import sys
import nki
import nki.language as nl
import nki.isa as nisa

@nki.jit
def copy(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm, name="out")
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t)
    return out

@nki.jit
def hbm_only(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    return out
"""


LONG = "x" * 300


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "k.py").write_text(KERNEL)
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(4)\n")
    (tmp_path / "broken.py").write_text("import nki\nimport no_such_module_xyz\n")
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "a64.npy", A.astype(np.float64))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["compile", "k.py:copy", "--arg", "a=float32[128,64]", "-o", "k.neff"]) == 0
    return tmp_path


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = cli.main(list(args))
    err = capsys.readouterr().err
    assert code == 1, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "nkic/tools/" not in err and "cli.py" not in err, err
    return err.strip()


@pytest.mark.parametrize(
    "args,message",
    [
        (["compile", "k.py:copy", "--arg", "a=float32[256,512", "-o", "x.neff"],
         "--arg a: 'float32[256,512' is neither DTYPE[D0,D1,...] nor a Python literal"),
        (["compile", "k.py:copy", "--arg", "a=float32[256,x]", "-o", "x.neff"], "--arg a: 'float32[256,x]': dimensions"),
        (["compile", "k.py:copy", "--arg", "a=float32[0,4]", "-o", "x.neff"], "dimensions must be positive"),
        (["compile", "k.py:copy", "--arg", "a=floaty[4]", "-o", "x.neff"], "--arg a: unknown dtype 'floaty'"),
        (["compile", "k.py:copy", "--arg", "a=1 +", "-o", "x.neff"], "--arg a: '1 +' is neither"),
        (["compile", "k.py:copy", "--arg", "a b=1", "-o", "x.neff"], "is not a parameter name"),
        (["compile", "k.py:copy", "--arg", "a=float32[128,64]", "--arg", "a=float32[128,64]", "-o", "x.neff"],
         "--arg a: given twice"),
        (["compile", "k.py:copy", "-o", "x.neff"], "kernel 'copy' needs --arg a=..."),
        (["compile", "k.py:copy", "--arg", "a=float32[128,64]", "--arg", "b=1", "-o", "x.neff"],
         "--arg b: kernel 'copy' has no parameter 'b'"),
        (["compile", "k.py:copy", "--arg", "a=float32[128,64]", "--grid", "0", "-o", "x.neff"],
         "--grid 0: the number of SPMD programs must be a positive integer"),
        (["compile", "k.py:copy", "--arg", "a=float32[128,64]", "--grid", "-3", "-o", "x.neff"], "--grid -3"),
        (["compile", "k.txt:copy", "-o", "x.neff"], "k.txt: expected a Python file"),
        (["compile", "exits.py:k", "-o", "x.neff"], "exits.py:2: error: the kernel code called sys.exit(4)"),
        (["compile", "broken.py:k", "-o", "x.neff"],
         "broken.py:2: error: ModuleNotFoundError: No module named 'no_such_module_xyz' (importing broken.py)"),
        (["compile", "k.py:copy", "--arg", "a=float32[128,64]", "-o", LONG + ".neff"],
         f"-o {LONG[:60]}...(305 characters): cannot write there (File name too long)"),
        (["compile", "k.py:copy", "--arg", "a=float32[128,64]", "-o", "a\0b"], "-o 'a\\x00b': a path cannot contain NUL"),
        (["compile", "k.py:copy", "--arg", "a=float32[128,64]", "-o", "x.neff", "--dump-dir", LONG],
         "--dump-dir " + LONG[:60] + "...(300 characters): cannot create the directory (File name too long)"),
        (["compile", LONG + ".py:k", "-o", "x.neff"], "...(303 characters): cannot read it (File name too long)"),
        (["run", LONG, "--output-dir", "o"], "cannot read " + LONG[:60] + "...(300 characters): File name too long"),
        (["run", "k.neff", "--input", "a=" + LONG, "--output-dir", "o"], "--input a: cannot read " + LONG[:60]),
        (["run", "k.neff", "--input", "a=a.npy", "--output-dir", LONG], "--output-dir " + LONG[:60]),
        (["run", "k.neff", "--input", "a=a.npy", "--output-dir", "o\0x"], "a path cannot contain NUL"),
        (["run", "k.neff", "--input", "a=a.npy", "--output-dir", "o", "--profile", LONG],
         "--profile " + LONG[:60] + "...(300 characters): cannot write there (File name too long)"),
        (["compile", "k.py:hbm_only", "--arg", "a=float32[99999999999999,512]", "-o", "x.neff"],
         "needs 204799999999997952 bytes, more than"),
        (["compile", "k.py:copy", "--arg", "a=float32[128,64]", "-o", "nodir/x.neff"],
         "-o nodir/x.neff: the directory nodir does not exist"),
        (["compile", "k.py:copy", "--arg", "a=float32[128,64]", "-o", "."], "-o .: is a directory"),
        (["compile", "k.py:copy", "--arg", "a=float32[128,64]", "-o", "x.neff", "--dump-dir", "k.py"],
         "--dump-dir k.py: exists and is not a directory"),
        (["run", "k.neff", "--input", "a=a64.npy", "--output-dir", "o"],
         "--input a: a64.npy holds float64, the kernel takes float32 (convert it, or pass --cast to cast it)"),
        (["run", "k.neff", "--input", "a=a.npy", "--input", "a=a.npy", "--output-dir", "o"], "--input a: given twice"),
        (["run", "k.neff", "--output-dir", "o"], "missing --input for a"),
        (["run", "k.neff", "--input", "b=a.npy", "--output-dir", "o"], "--input b: the kernel has no input 'b'"),
        (["run", "k.neff", "--input", "a=a.npy", "--output-dir", "k.py"],
         "--output-dir k.py: exists and is not a directory"),
        (["run", "k.neff", "--input", "a=a.npy", "--output-dir", "o", "--profile", "nodir/p.json"],
         "--profile nodir/p.json: the directory nodir does not exist"),
    ],
)  # fmt: skip
def test_cli_errors(work: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert message in run_cli(capsys, *args)


def test_cli_cast_and_readonly_output(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "k.neff", "--input", "a=a64.npy", "--cast", "--output-dir", "o"]) == 0
    np.testing.assert_array_equal(np.load(work / "o" / "out.npy"), A)
    capsys.readouterr()
    (work / "o" / "out.npy").unlink()
    (work / "o" / "out.npy").mkdir()  # unwritable even for root
    err = run_cli(capsys, "run", "k.neff", "--input", "a=a.npy", "--output-dir", "o")
    assert err == f"nkic: error: cannot write o{os.sep}out.npy: Is a directory", err


def test_cli_run_refuses_an_escaping_neff(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A NEFF whose output variable is '../escaped' (re-signed so the header is valid): refused, nothing written."""
    good = (work / "k.neff").read_bytes()
    neff = read_neff(good)
    evil = _edit_json(good, "sg00/def.json", lambda d: d["var"].__setitem__("../escaped", d["var"].pop("out")))
    (work / "evil.neff").write_bytes(rewrap(evil, evil[1024:]))
    assert neff.variable("out").kind == "output"
    err = run_cli(capsys, "run", "evil.neff", "--input", "a=a.npy", "--output-dir", "o")
    assert "is not a safe name" in err
    assert not (work / "escaped.npy").exists()


def test_cli_kernel_errors_are_at_the_kernel_line(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "bad.py").write_text(KERNEL + "\n@nki.jit\ndef bad(a):\n    return 1 // 0\n")
    err = run_cli(capsys, "compile", "bad.py:bad", "--arg", "a=float32[128,64]", "-o", "x.neff")
    lines = (KERNEL + "\n@nki.jit\ndef bad(a):\n    return 1 // 0\n").splitlines()
    assert f"bad.py:{len(lines)}: error: ZeroDivisionError: integer division or modulo by zero" in err, err


def test_cli_subprocess_one_line(work: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "nkic.tools.cli", "compile", "k.py:copy", "--arg", "a=float32[128,64",
                        "-o", "x.neff"], capture_output=True, text=True, cwd=work, timeout=60)  # fmt: skip
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--arg a" in r.stderr, r.stderr
    assert json.dumps(r.stderr)  # printable


def test_located_errors_keep_their_python_type() -> None:
    """``except ValueError`` / ``except AssertionError`` around a kernel call still work; SystemExit never exits."""
    with pytest.raises(ValueError, match="tile size 7"):
        jit(k_raise).trace(SPEC)
    with pytest.raises(ZeroDivisionError):
        jit(k_zero).trace(SPEC)
    with pytest.raises(NkiError) as e:
        jit(k_exit).trace(SPEC)
    assert not isinstance(e.value, SystemExit)


def k_key(a):
    return {}["missing"]  # E-key


def test_located_key_error_is_not_quoted() -> None:
    with pytest.raises(KeyError) as e:
        jit(k_key).trace(SPEC)
    assert str(e.value).startswith(f"{at('E-key')}: error: KeyError: 'missing'"), str(e.value)


# -- silent wrong results become errors or defined behaviour (item 5) ------------------------------------------
def k_int_divide(a, z):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=u, src=z)
    by_scalar = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    by_tensor = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=by_scalar, data=t, op0=nl.divide, operand0=0)
    nisa.tensor_tensor(dst=by_tensor, data1=t, data2=u, op=nl.divide)
    o1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    o2 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o1, src=by_scalar)
    nisa.dma_copy(dst=o2, src=by_tensor)
    return o1, o2


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint16])
def test_integer_divide_by_zero_is_one_documented_result(dtype: type) -> None:
    """x/0 saturates to the dtype's max (x > 0) or min (x < 0), 0/0 is 0: tensor_scalar (fp32 path) and
    tensor_tensor (exact integer path) agree (runtime/semantics.py _divide)."""
    info = np.iinfo(dtype)
    a = np.array([[5, 0, 100, -7 if info.min else 9]], dtype)
    want = np.where(a > 0, info.max, np.where(a < 0, info.min, 0)).astype(dtype)
    by_scalar, by_tensor = simulate(jit(k_int_divide))(a, np.zeros_like(a))
    np.testing.assert_array_equal(by_scalar, want)
    np.testing.assert_array_equal(by_tensor, want)


def test_bundled_kernels_ragged_or_refused() -> None:
    """tensor_add adds ragged shapes (200 rows, 700 columns); matmul and softmax refuse shapes outside their tiling
    at the kernel's check, never computing wrong numbers."""
    from nkic.kernels.matmul import matmul
    from nkic.kernels.softmax import softmax
    from nkic.kernels.tensor_add import tensor_add

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((200, 700), np.float32), rng.standard_normal((200, 700), np.float32)
    np.testing.assert_array_equal(simulate(tensor_add)(a, b), a + b)
    with pytest.raises(NkiError, match=r"matmul\.py:\d+: error: .*K and M must be multiples of 128"):
        simulate(matmul)(np.ones((200, 128), np.float32), np.ones((200, 512), np.float32))
    with pytest.raises(NkiError, match=r"softmax\.py:\d+: error: .*100 rows, not a multiple of 128"):
        simulate(softmax)(np.ones((100, 64), np.float32))


def k_reads_unwritten(a):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=u, src=a)
    nisa.tensor_tensor(dst=u, data1=u, data2=t, op=nl.add)  # E-unwritten
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=u)
    return out


def test_uninitialised_read_warns_at_the_reading_line() -> None:
    """Reading an SBUF/PSUM tensor no instruction wrote is a compile-time NkiWarning at the reading instruction's
    line, naming the allocation (the tracer knows which allocations were never written)."""
    from nkic.frontend.errors import NkiWarning

    src = Path(__file__).read_text().splitlines()
    line = next(i + 1 for i, text in enumerate(src) if text.endswith("# E-unwritten"))
    with pytest.warns(NkiWarning, match=r"tensor_tensor reads 'data2' from sbuf tensor .* before any instruction") as w:
        jit(k_reads_unwritten).trace(TensorSpec((128, 8), "float32"))
    assert (w[0].filename, w[0].lineno) == (__file__, line)
