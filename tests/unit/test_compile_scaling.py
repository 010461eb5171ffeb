"""What keeps the cost of tracing and compiling flat per instruction: the cyclic GC paused around both with memory
still bounded, one verification at the end of the pipeline (every pass with NKIC_VERIFY_EACH_PASS / nkic-opt), the
tracer's O(1) name allocator and cached source columns, and ``nkic compile --time-passes``."""

from __future__ import annotations

import gc
import itertools
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

from nkic import api as nki
from nkic.compiler.driver import compile_traced, pipeline_passes
from nkic.passes.options import VERIFY_EACH_PASS_ENV
from nkic.frontend import TensorSpec
from nkic.frontend.errors import frame_column
from nkic.support import gcpause
from nkic.support.gcpause import gc_paused
from nkic.kernels.matmul import matmul

nl = nki.language
nisa = nki.isa
KERNELS = Path(__file__).resolve().parents[2] / "kernels"


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_gc_paused_freezes_what_it_made_until_the_full_collection_rule_fires(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gc.isenabled()
    monkeypatch.setattr(gcpause, "FULL_MIN", 10**12)  # the rule cannot fire
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested: still off afterwards
            pass
        assert not gc.isenabled()
        ref = weakref.ref(_Node())
        assert ref() is not None  # garbage, but cyclic: alive while the collector is off
    assert gc.isenabled() and gc.get_freeze_count() > 0
    gc.collect()  # frozen: no collection scans it ...
    assert ref() is not None
    monkeypatch.setattr(gcpause, "FULL_MIN", 0)
    monkeypatch.setattr(gcpause, "_live", 0)  # as after a collection that found nothing (an earlier one set it higher)
    with gc_paused():  # ... until a pause starts with the frozen objects past the rule's bound
        assert ref() is None and gc.get_freeze_count() == 0


def test_frozen_garbage_holding_memory_is_collected_by_the_bytes_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    # The process's memory is what the test says it is: the real reading moves with whatever else the process (or,
    # with swapping, the machine) does, and without /proc it is the peak, which an earlier test may have set higher.
    rss = [1 << 30]
    monkeypatch.setattr(gcpause, "resident_bytes", lambda: rss[0])
    monkeypatch.setattr(gcpause, "FULL_MIN", 10**12)  # only the bytes rule can fire
    monkeypatch.setattr(gcpause, "FULL_MIN_BYTES", 64 << 20)
    monkeypatch.setattr(gcpause, "FULL_RATIO", 0.0)
    monkeypatch.setattr(gcpause, "_live_bytes", rss[0])
    with gc_paused():
        node = _Node()
        node.data = bytearray(1 << 20)  # type: ignore[attr-defined]  # memory held by a cycle of few objects
        ref = weakref.ref(node)
        del node
    assert ref() is not None  # frozen
    rss[0] += 32 << 20
    with gc_paused():  # grown, but by less than FULL_MIN_BYTES: still frozen
        assert ref() is not None
    rss[0] += 64 << 20
    with gc_paused():  # grown by more than FULL_MIN_BYTES: collected at the start ...
        assert ref() is None
    assert gcpause._live_bytes == rss[0]  # ... and the new baseline is the memory after it


def test_resident_bytes_reads_the_process() -> None:
    assert gcpause.resident_bytes() > 1 << 20


def test_gc_paused_keeps_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            ref = weakref.ref(_Node())
        assert not gc.isenabled() and ref() is not None
    finally:
        gc.enable()
        gc.collect()


def _compile() -> None:
    compile_traced(matmul.trace(TensorSpec((256, 128), "float32"), TensorSpec((256, 512), "float32")))


def _objects_after_compiles(n: int) -> list[int]:
    gc.unfreeze()  # from an empty permanent generation: what earlier tests froze is not counted (nor collected below)
    gc.collect()
    gc.collect()  # what the first one's finalizers dropped
    base = len(gc.get_objects()) + gc.get_freeze_count()
    counts = []
    for _ in range(n):
        _compile()  # its result is dropped: cyclic garbage outside any pause
        counts.append(len(gc.get_objects()) + gc.get_freeze_count() - base)  # gc_paused freezes what it made
    return counts


def test_memory_stays_bounded_across_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    # Control: a compile makes cyclic garbage (with the collector off around it, gc_paused is a no-op) ...
    _compile()
    gc.collect()
    gc.disable()
    try:
        _compile()
        made = gc.collect()
    finally:
        gc.enable()
    assert made > 500
    # ... and without the full-collection rule the dropped results pile up, one per compile ...
    monkeypatch.setattr(gcpause, "FULL_MIN", 10**12)
    grows = _objects_after_compiles(8)
    assert all(b - a > 100 for a, b in zip(grows, grows[1:])), grows  # ~220 objects per compile (shared attributes)
    # ... while with it the heap stays within FULL_MIN (+ the compile after the check) of where it started.
    monkeypatch.setattr(gcpause, "FULL_MIN", 4 * made)
    monkeypatch.setattr(gcpause, "FULL_RATIO", 0.0)
    monkeypatch.setattr(gcpause, "_live", 0)
    bounded = _objects_after_compiles(12)
    # Growth over the lowest count so far (a drop is fine: caches of earlier tests in the worker may still evict).
    grown = [b - min(bounded[: i + 1]) for i, b in enumerate(bounded)]
    assert max(grown) < 5 * made + 2_000, bounded  # 12 compiles without the rule: ~11 * made


def test_verify_once_by_default_and_after_every_pass_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = ModuleOp.verify
    monkeypatch.setattr(ModuleOp, "verify", lambda self: (calls.append(1), real(self))[1])
    traced = matmul.trace(TensorSpec((256, 128), "float32"), TensorSpec((256, 512), "float32"))
    monkeypatch.delenv(VERIFY_EACH_PASS_ENV, raising=False)
    once = compile_traced(traced)
    assert len(calls) == 1 and [s.name for s in once.stages][-2:] == ["verify", "neff"]
    calls.clear()
    every = compile_traced(traced, verify_each_pass=True)
    assert len(calls) == len(pipeline_passes()) and "verify" not in [s.name for s in every.stages]
    calls.clear()
    monkeypatch.setenv(VERIFY_EACH_PASS_ENV, "1")
    assert compile_traced(traced).neff == once.neff == every.neff and len(calls) == len(pipeline_passes())


@nki.jit
def _same_names(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, name="t")
    nisa.dma_copy(dst=x, src=a)
    for name in ("t_2", "t", "t", "t", "t_3"):
        y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, name=name)
        nisa.tensor_copy(dst=y, src=x)
        x = y
    nisa.dma_copy(dst=out, src=x)
    return out


def test_names_take_the_smallest_free_suffix() -> None:
    text = str(_same_names.trace(TensorSpec((128, 64), "float32")).module)
    names = [n for n in ("t", "t_1", "t_2", "t_3", "t_4", "t_5", "t_3_1") if f'"{n}"' in text]
    # t; t_2 as asked; t -> t_1; t -> t_3 (t_2 taken); t -> t_4; t_3 taken -> t_3_1
    assert names == ["t", "t_1", "t_2", "t_3", "t_4", "t_3_1"]


def _scan_column(frame: object) -> int:  # the former implementation: scan co_positions on every call
    try:
        positions = frame.f_code.co_positions()  # type: ignore[attr-defined]
        pos = next(itertools.islice(positions, frame.f_lasti // 2, None))  # type: ignore[attr-defined]
    except (StopIteration, ValueError):
        return 0
    return pos[2] + 1 if pos[2] is not None else 0


def test_cached_columns_match_a_scan_of_co_positions() -> None:
    frame = sys._getframe()
    col = frame_column(frame)
    assert col == 11  # the call frame_column(frame) starts in column 11 of its line
    frame = frame.f_back  # the callers are paused at one instruction each (this frame moves on as it runs)
    while frame is not None:
        assert frame_column(frame) == _scan_column(frame)
        frame = frame.f_back


def test_cli_time_passes(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "nkic.tools.cli", "compile", f"{KERNELS / 'matmul.py'}:matmul",
           "--arg", "lhsT=float32[256,128]", "--arg", "rhs=float32[256,512]", "-o", "m.neff",
           "--time-passes", "--verify-each-pass"]  # fmt: skip
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert "Execution time report" in r.stderr and "Total Execution Time" in r.stderr
    stages = [ln.split()[-1] for ln in lines if "%)" in ln]
    assert stages[0] == "trace" and stages[-2:] == ["neff", "Total"] and "bir-to-isa" in stages
    ops = {ln.split()[-1]: int(ln.split()[-2]) for ln in lines if "%)" in ln and not ln.endswith("Total")}
    assert ops["bir-to-isa"] > 0 and ops["trace"] > 0


def test_fast_json_members_match_json_dumps() -> None:
    import json

    from nkic.kernels.flash_attention import flash_attention
    from nkic.runtime.neff import _dumps, _members, read_neff

    spec = TensorSpec((1, 256, 64), "bfloat16")
    members = _members(read_neff(compile_traced(flash_attention.trace(spec, spec, spec, scale=0.125)).neff))
    jsons = {k: v for k, v in members.items() if k.endswith(".json")}
    assert len(jsons) > 5
    for name, data in jsons.items():
        value = json.loads(data)
        assert data == (json.dumps(value, indent=1, sort_keys=True, allow_nan=False) + "\n").encode(), name
    odd = [{"b": [1, 2.5, True, None, "x\u00e9\n"], "a": {"z": [], "y": {}}}, [[[]]], {"k": -0.0, "g": 1.5e-7}, (1, 2),
           {1: "int key"}, {"n": float("nan")}]  # fmt: skip
    for value in odd[:-1]:
        assert _dumps(value) == (json.dumps(value, indent=1, sort_keys=True) + "\n").encode()
    with pytest.raises(ValueError):  # as json.dumps(allow_nan=False)
        _dumps(odd[-1])
