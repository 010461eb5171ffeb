"""``nl.device_print`` end to end: one DEBUG_PRINT instruction per call, executed by the simulator in program order.

Each printed line is checked against numpy (``f"{prefix} {value}"``, what ``print(prefix, value)`` writes) for SBUF and
HBM tensors, f32 and bf16, in loops (unrolled and rolled), between writes of the printed tile, and through the legacy
spelling; the NEFF carries the prefixes in its string table, and the reader refuses a bad index.
"""

from __future__ import annotations

import importlib.util
import io
import json
import tarfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.compiler.driver import compile_kernel  # noqa: E402
from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.runtime.encoding import decode_stream  # noqa: E402
from nkic.runtime.errors import NeffFormatError  # noqa: E402
from nkic.runtime.neff import HEADER_SIZE, read_neff, write_neff  # noqa: E402
from nkic.runtime.simulator import simulate  # noqa: E402

RNG = np.random.default_rng(5)
SDK_TEST = Path(__file__).resolve().parents[3] / "shared/corpus/aws-neuron-sdk/nki/test/test_nki_simulate_kernel.py"


def _line(prefix: str, value: np.ndarray) -> str:
    return f"{prefix} {value}"


def _printed(capsys: pytest.CaptureFixture[str]) -> str:
    """Everything the run wrote to stdout."""
    return capsys.readouterr().out


def _lines(*lines: str) -> str:
    """The stdout of these device-print lines (a printed array may span lines itself)."""
    return "".join(line + "\n" for line in lines)


def _out(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


# -- values at their point of the program ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_sbuf_and_hbm_tiles_print_their_value_at_that_point(dtype, capsys: pytest.CaptureFixture[str]) -> None:
    @nki.jit
    def kernel(a):
        t = nl.load(a)
        nl.device_print("a (hbm):", a)
        nl.device_print("t:", t)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)  # in place: the next print sees it
        nl.device_print("t*2:", t)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        return _out(t)

    a = RNG.standard_normal((4, 6)).astype(dtype)
    got = nki.simulate(kernel)(a)
    doubled = (a.astype(np.float32) * 2).astype(dtype)
    np.testing.assert_array_equal(got, (doubled.astype(np.float32) + 1).astype(dtype))
    assert _printed(capsys) == _lines(_line("a (hbm):", a), _line("t:", a), _line("t*2:", doubled))


def test_a_printed_output_shows_what_was_stored(capsys: pytest.CaptureFixture[str]) -> None:
    @nki.jit
    def kernel(a):
        out = nl.ndarray((2, 3, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, value=t)
        nl.device_print("out", out)  # after the store it depends on: the stored values, 3-D
        return out

    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(a), a)
    assert _printed(capsys) == _lines(_line("out", a))


@pytest.mark.parametrize("roll", [False, True])
def test_a_print_in_a_loop_prints_once_per_iteration(roll: bool, monkeypatch, capsys) -> None:
    monkeypatch.setenv("NKIC_ROLL_LOOPS", "1" if roll else "0")

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(a.shape[0] // 4):
            t = nl.load(a[i * 4:(i + 1) * 4, :])
            nl.device_print("rows:", t)
            nl.device_print("hbm rows:", a[i * 4:(i + 1) * 4, :])
            nl.store(out[i * 4:(i + 1) * 4, :], value=t)
        return out

    a = RNG.standard_normal((12, 5)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(a), a)
    blocks = [a[4 * i:4 * i + 4] for i in range(3)]
    want = [line for b in blocks for line in (_line("rows:", b), _line("hbm rows:", b))]
    assert _printed(capsys) == _lines(*want)
    neff = compile_kernel(kernel, (a,)).neff
    loops = [ins for sg in read_neff(neff).subgraphs for ins in sg.engines["sp"] if ins.opcode == "COUNTED_LOOP_END"]
    prints = [ins for sg in read_neff(neff).subgraphs for ins in sg.engines["sp"] if ins.opcode == "DEBUG_PRINT"]
    assert (len(loops), len(prints)) == ((1, 2) if roll else (0, 6))  # rolled: the body once, run 3 times


def test_a_running_sum_prints_each_step(capsys: pytest.CaptureFixture[str]) -> None:
    @nki.jit
    def kernel(a):
        acc = nl.zeros((4, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        for i in nl.sequential_range(3):
            t = nl.load(a[i])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
            nl.device_print("acc", acc)
        return _out(acc)

    a = RNG.integers(-4, 5, (3, 4, 8)).astype(ml_dtypes.bfloat16)
    sums = np.cumsum(a.astype(np.float32), axis=0).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(nki.simulate(kernel)(a), sums[-1])
    assert _printed(capsys) == _lines(*(_line("acc", s) for s in sums))


# -- the NEFF: one string table, interned; the reader validates it -------------------------------------------------
@nki.jit
def _two_prints(a):
    t = nl.load(a)
    nl.device_print("same", t)
    nl.device_print("same", a)
    nl.device_print("other \"quoted\" ✓", t)
    return _out(t)


def _members(neff: bytes) -> dict[str, bytes]:
    import gzip

    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(neff[HEADER_SIZE:]))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar}  # type: ignore[union-attr]


def test_the_neff_interns_prefixes_and_reads_back() -> None:
    a = np.ones((2, 3), np.float32)
    data = compile_kernel(_two_prints, (a,)).neff
    assert json.loads(_members(data)["strings.json"]) == {"strings": ["same", "other \"quoted\" ✓"]}
    neff = read_neff(data)
    assert neff.strings == ("same", "other \"quoted\" ✓")
    prints = [ins for ins in neff.subgraphs[0].engines["sp"] if ins.opcode == "DEBUG_PRINT"]
    assert sorted(ins.value("prefix") for ins in prints) == [0, 0, 1]
    assert write_neff(neff) == data  # the table survives a round trip byte for byte


def test_a_kernel_without_prints_has_no_string_table() -> None:
    @nki.jit
    def plain(a):
        return _out(nl.load(a))

    assert "strings.json" not in _members(compile_kernel(plain, (np.ones((2, 3), np.float32),)).neff)


def test_the_reader_refuses_a_prefix_outside_the_string_table(monkeypatch: pytest.MonkeyPatch) -> None:
    neff = read_neff(compile_kernel(_two_prints, (np.ones((2, 3), np.float32),)).neff)
    neff.strings = ("only one",)  # the index 1 of the third print now names nothing
    with pytest.raises(ValueError, match=r"DEBUG_PRINT prefix names string 1, but the NEFF's string table holds 1"):
        write_neff(neff)
    # A NEFF written with a short table (as a corrupt or hostile file would be) is refused when read.
    from nkic.runtime import neff as neff_module

    with monkeypatch.context() as m:
        m.setattr(neff_module, "_check_string_refs", lambda *args: None)
        data = write_neff(neff)
    with pytest.raises(NeffFormatError, match=r"SP\.bin instruction \d+: DEBUG_PRINT prefix names string 1"):
        read_neff(data)


def test_the_listing_names_the_index_and_the_record_holds_it() -> None:
    data = compile_kernel(_two_prints, (np.ones((2, 3), np.float32),)).neff
    members = _members(data)
    _, instrs = decode_stream(members["sg00/SP.bin"])
    listing = json.loads(members["sg00/SP.json"])["instructions"]
    for ins, entry in zip(instrs, listing):
        if ins.opcode == "DEBUG_PRINT":
            assert entry["imms"]["prefix"] == ins.imm("prefix") and entry["operands"].keys() == {"src"}


def test_timing_only_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    neff = read_neff(compile_kernel(_two_prints, (np.ones((2, 3), np.float32),)).neff)
    simulate(neff, {}, timing_only=True)
    assert capsys.readouterr().out == ""
    lines: list[str] = []
    simulate(neff, {"a": np.full((2, 3), 7, np.float32)}, on_print=lines.append)  # a sink instead of stdout
    assert capsys.readouterr().out == "" and len(lines) == 3 and lines[0].startswith("same [[7. 7. 7.]")


# -- errors at the user's line ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case,message", [
    ("number_prefix", "print_prefix must be a constant string, got int"),
    ("psum", "'tensor' must be in SBUF or HBM, not psum"),
    ("not_a_tensor", "'tensor' must be a tensor in SBUF or HBM, got list"),
])  # fmt: skip
def test_bad_arguments_are_errors_at_the_call(case: str, message: str) -> None:
    @nki.jit
    def kernel(a):
        t = nl.load(a)
        if case == "number_prefix":
            nl.device_print(3, t)
        elif case == "psum":
            p = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.psum)
            nisa.tensor_copy(dst=p, src=t)
            nl.device_print("p", p)
        else:
            nl.device_print("l", [1, 2])
        return _out(t)

    with pytest.raises(NkiError, match=rf"test_device_print\.py:\d+: error: nl\.device_print: {message}"):
        nki.simulate(kernel)(np.ones((2, 3), np.float32))


# -- the legacy surface -----------------------------------------------------------------------------------------
def test_legacy_device_print_with_prefix_x_and_mask(capsys: pytest.CaptureFixture[str]) -> None:
    import neuronxcc.nki as lnki
    import neuronxcc.nki.language as lnl

    @lnki.jit
    def kernel(a):
        out = lnl.ndarray(a.shape, dtype=a.dtype, buffer=lnl.shared_hbm)
        t = lnl.load(a)
        i_p = lnl.arange(4)[:, None]
        lnl.device_print(prefix="first rows", x=t, mask=(i_p < 2))
        lnl.device_print("all", t)
        lnl.store(out, value=t)
        return out

    a = RNG.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(lnki.simulate_kernel(kernel, a), a)
    assert _printed(capsys) == _lines(_line("first rows", a[:2]), _line("all", a))


@pytest.mark.skipif(not SDK_TEST.is_file(), reason="the Neuron SDK tests are not in ../shared/corpus")
def test_the_sdk_simulate_kernel_example_prints_its_tile(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("sdk_simulate_kernel_example", SDK_TEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    a = RNG.random((3, 4)).astype(np.float32) * 10
    np.testing.assert_array_equal(nki.simulate_kernel(module.print_kernel, a), a)
    assert _printed(capsys) == _lines(_line("value of a:", a))


def test_nkic_run_prints_and_timing_only_does_not(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from nkic.tools.cli import main

    neff = tmp_path / "k.neff"
    neff.write_bytes(compile_kernel(_two_prints, (np.ones((2, 3), np.float32),)).neff)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "a.npy", a)
    assert main(["run", str(neff), "--input", f"a={tmp_path / 'a.npy'}", "--output-dir", str(tmp_path)]) == 0
    out = _printed(capsys)
    assert out.startswith(_lines(_line("same", a), _line("same", a), _line("other \"quoted\" ✓", a)))
    assert main(["run", str(neff), "--timing-only"]) == 0
    assert "same" not in _printed(capsys)


def test_bir_sim_compares_the_prints_without_showing_them(capsys: pytest.CaptureFixture[str]) -> None:
    from nkic.compiler.driver import make_context
    from nkic.frontend import TensorSpec
    from nkic.passes.bir_sim import BirSimPass
    from nkic.passes.bir_to_isa import BirToIsaPass
    from nkic.passes.pipelines import backend, frontend_lowering

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nl.load(a[i])
            nl.device_print("t", t)
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
            nl.device_print("t+1", t)
            nl.store(out[i], value=t)
        return out

    module = kernel.trace(TensorSpec((2, 4, 8), "float32")).module.clone()
    ctx = make_context()
    for p in (*frontend_lowering(), *backend()):
        if isinstance(p, BirToIsaPass):
            break
        p.apply(ctx, module)
    BirSimPass().apply(ctx, module)
    out = capsys.readouterr().out
    assert "agree bit for bit" in out and "t+1" not in out
