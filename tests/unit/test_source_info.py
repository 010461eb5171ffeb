"""Profiles name the kernel line and the nki call of every instruction: the tracer records the call, penguin and
BIR carry ``loc``/``call``, ``compile_*(debug_info=True)`` writes ``sgNN/source.json``, the simulator's Chrome trace
names them. The binary encoding and the engine listings do not change, and without ``debug_info`` the NEFF bytes are
the same as before (the goldens)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nkic import api as nki
from nkic.api import isa as nisa
from nkic.api import language as nl
from nkic.compiler.driver import compile_kernel, run_neff
from nkic.runtime.neff import NeffFormatError, read_neff, write_neff

HERE = Path(__file__).resolve()


@nki.jit
def scaled_softmax(x):  # type: ignore[no-untyped-def]
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)  # LINE_LOAD
    e = nl.softmax(t, axis=1)  # LINE_SOFTMAX
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.activation(dst=y, op=nl.tanh, data=e)  # LINE_ACT
    nl.store(out, nl.add(y, 1.0))  # LINE_STORE
    return out


def _line(marker: str) -> int:
    return next(i for i, text in enumerate(HERE.read_text().splitlines(), 1) if text.endswith(f"# {marker}"))


X = np.random.default_rng(3).standard_normal((128, 64)).astype(np.float32)


def test_every_instruction_names_its_line_and_call() -> None:
    neff = compile_kernel(scaled_softmax, (X,), debug_info=True).neff
    sg = read_neff(neff).subgraphs[0]
    ids = {ins.inst_id for instrs in sg.engines.values() for ins in instrs}
    assert set(sg.sources) == ids
    where = {call: loc for loc, call in sg.sources.values()}
    assert where["nl.load"].startswith(f"{HERE}:{_line('LINE_LOAD')}:")
    assert where["nl.softmax"].startswith(f"{HERE}:{_line('LINE_SOFTMAX')}:")
    assert where["nisa.activation"].startswith(f"{HERE}:{_line('LINE_ACT')}:")
    assert where["nl.store"].startswith(f"{HERE}:{_line('LINE_STORE')}:")
    assert where["nl.add"].startswith(f"{HERE}:{_line('LINE_STORE')}:")
    calls = [call for _, call in sg.sources.values()]
    assert calls.count("nl.softmax") >= 3  # one nl call, several instructions: each names it
    trace = run_neff(neff, {"x": X}).profile.to_chrome_trace()
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]  # type: ignore[index]
    assert spans and all(e["args"]["source"].startswith(str(HERE)) for e in spans)
    assert {e["name"] for e in spans} >= {"ACTIVATE nisa.activation", "DMA_COPY nl.load", "DMA_COPY nl.store"}


def test_encoding_unchanged_and_off_by_default() -> None:
    plain = compile_kernel(scaled_softmax, (X,)).neff
    debug = compile_kernel(scaled_softmax, (X,), debug_info=True).neff
    a, b = read_neff(plain), read_neff(debug)
    assert a.subgraphs[0].sources == {} and b.subgraphs[0].sources
    assert a.subgraphs[0].engines == b.subgraphs[0].engines  # same instructions, same binary records
    b.subgraphs[0].sources = {}
    b.metadata = a.metadata
    assert write_neff(b) == plain  # the source member is the only difference
    trace = run_neff(plain, {"x": X}).profile.to_chrome_trace()
    assert all("source" not in e.get("args", {}) for e in trace["traceEvents"])  # type: ignore[union-attr]


def test_round_trip_and_reader_checks() -> None:
    neff = read_neff(compile_kernel(scaled_softmax, (X,), debug_info=True).neff)
    assert read_neff(write_neff(neff)).subgraphs[0].sources == neff.subgraphs[0].sources
    neff.subgraphs[0].sources[10_000] = ("k.py:1", "nl.exp")  # no such instruction
    with pytest.raises(NeffFormatError, match="source.json: entry 10000"):
        read_neff(write_neff(neff))
    del neff.subgraphs[0].sources[10_000]
    first = min(neff.subgraphs[0].sources)
    neff.subgraphs[0].sources[first] = ("x" * 5000, "")
    with pytest.raises(NeffFormatError, match="source.json: bad entry"):
        read_neff(write_neff(neff))


def test_cli_compile_writes_source_info(tmp_path: Path) -> None:
    kernels = HERE.parents[2] / "kernels"
    args = [sys.executable, "-m", "nkic", "compile", f"{kernels / 'softmax.py'}:softmax", "--arg", "x=float32[128,256]"]
    subprocess.run([*args, "-o", str(tmp_path / "a.neff")], check=True, capture_output=True)
    subprocess.run([*args, "--no-source-info", "-o", str(tmp_path / "b.neff")], check=True, capture_output=True)
    with_info = read_neff((tmp_path / "a.neff").read_bytes()).subgraphs[0].sources
    assert with_info and all(loc.startswith(str(kernels / "softmax.py")) for loc, _ in with_info.values())
    assert not read_neff((tmp_path / "b.neff").read_bytes()).subgraphs[0].sources
    assert any(c.startswith(("nl.", "nisa.")) for _, c in with_info.values())
