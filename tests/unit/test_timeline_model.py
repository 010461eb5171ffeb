"""The simulator's calibrated timeline (target/costs.py "timeline model", runtime/timeline.py) and timing-only runs.

Each effect is checked on a hand-built NEFF whose expected timing follows from the model's published constants:
dependent-instruction latency (ScalarE's ~264-cycle initiation interval for tiny dependent activations), the MIN_II
floor, the VectorE fast modes, TensorE throttling, DMA descriptor pipelining and the per-core DMA bandwidth cap.
A timing-only run must give the very same timeline as a full run (the timeline never reads data).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nkic.runtime.encoding import Instr, Operand, engine_sem, f32_bits, queue_sem
from nkic.runtime.neff import Neff, Subgraph, Variable, write_neff
from nkic.runtime.simulator import simulate
from nkic.target.costs import (
    DEPENDENT_LATENCY_CYCLES,
    DMA_DESCRIPTOR_NS,
    DMA_FIXED_NS,
    DMA_LATENCY_NS,
    MIN_II,
    dma_core_bytes_per_ns,
    dma_descriptor_ns,
    dma_transfer,
    instr_cycles,
    neff_launch_ns,
    neff_teardown_ns,
    occupancy_cycles,
    occupancy_ns,
)
from nkic.target.machine import get_target
from nkic.target.vocab import ACT_FUNCS, ALU_OPS

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def sbuf(shape: tuple[int, int], addr: int = 0, dtype: str = "float32") -> Operand:
    return Operand("sbuf", dtype, ((1, shape[0]), (1, shape[1])), address=addr)


def hbm(var: int, shape: tuple[int, int], dtype: str = "float32", offset: int = 0) -> Operand:
    return Operand("hbm", dtype, ((shape[1], shape[0]), (1, shape[1])), address=offset, var_id=var)


def _neff(engines: dict[str, list[Instr]], variables: list[Variable] | None = None) -> Neff:
    return Neff("t", variables or [], [Subgraph("sg00", engines)])


def _exp(dst: Operand, src: Operand, inst_id: int, **kw: object) -> Instr:
    imms = (ACT_FUNCS.code("exp"), f32_bits(1.0))
    return Instr("ACTIVATE", "act", (dst, src), imms, inst_id=inst_id, **kw)  # type: ignore[arg-type]


# -- dependent latency -----------------------------------------------------------------------------------------


def test_dependent_tiny_activations_issue_every_264_cycles() -> None:
    """PG: RAW-dependent 1-element activations run one every 189 ns on trn1 (264 ScalarE cycles at 1.4 GHz);
    independent ones issue every MIN_II."""
    a, b = sbuf((128, 1)), sbuf((128, 1), addr=64)
    chain = [_exp(b if i % 2 else a, a if i % 2 else b, i + 1) for i in range(8)]  # each reads the previous one
    free = [_exp(sbuf((128, 1), addr=128 + 8 * i), a, i + 1) for i in range(8)]  # all read a, none is read
    for instrs, cycles in ((chain, 264), (free, MIN_II)):
        prof = simulate(_neff({"act": instrs}), {}, target="gen2", timing_only=True).profile
        starts = [ev.start_ns for ev in prof.events_for("act")]
        assert np.diff(starts) == pytest.approx([cycles / 1.4] * 7)
    assert MIN_II + DEPENDENT_LATENCY_CYCLES["act"] == 264


def test_a_semaphore_signals_after_the_dependent_latency() -> None:
    """A consumer on another engine sees the producer's result its engine's latency after the producer ends."""
    t, u = sbuf((128, 512)), sbuf((128, 512), addr=4096)
    act = [_exp(u, t, 1, signal_sem=engine_sem("act"))]
    dve = [Instr("TENSOR_COPY", "dve", (t, u), wait_sem=engine_sem("act"), wait_value=1, inst_id=2)]
    prof = simulate(_neff({"act": act, "dve": dve}), {}, target="gen3", timing_only=True).profile
    (a,), (d,) = prof.events_for("act"), prof.events_for("dve")
    assert d.start_ns == pytest.approx(a.end_ns + DEPENDENT_LATENCY_CYCLES["act"] / 1.2)


# -- occupancy: floors and fast modes ----------------------------------------------------------------------------


def test_small_instructions_cost_at_least_min_ii() -> None:
    """A (128, 4) reduce is N = 4 cycles by the published formula, but no instruction issues faster than MIN_II."""
    src, dst = sbuf((128, 4)), sbuf((128, 1), addr=64)
    reduce = Instr("TENSOR_REDUCE", "dve", (dst, src), (ALU_OPS.code("add"), 1), inst_id=1)
    assert instr_cycles(reduce) == 4
    assert occupancy_cycles(reduce) == MIN_II


@pytest.mark.parametrize(
    "dtype,src_mem,target,divisor",
    [("bfloat16", "sbuf", "gen3", 4), ("bfloat16", "psum", "gen3", 2), ("float32", "sbuf", "gen3", 1),
     ("bfloat16", "sbuf", "gen2", 1), ("float16", "sbuf", "gen4", 4)],
)  # fmt: skip
def test_vector_fast_modes(dtype: str, src_mem: str, target: str, divisor: int) -> None:
    """A3/A4: 2-byte copies run 4x on gen3+ VectorE, 2x with a PSUM side; fp32 and gen2 at 1x."""
    src = Operand(src_mem, dtype, ((1, 128), (1, 2048)))
    copy = Instr("TENSOR_COPY", "dve", (sbuf((128, 2048), addr=8192, dtype=dtype), src), inst_id=1)
    assert occupancy_cycles(copy, target) == 2048 // divisor


def test_bf16_tensor_tensor_fast_mode() -> None:
    """A3: a bf16 SBUF tensor_tensor streams at one element per cycle on gen3 (2N on gen2 for max)."""
    ops = (sbuf((128, 1024), 0, "bfloat16"), sbuf((128, 1024), 4096, "bfloat16"), sbuf((128, 1024), 8192, "bfloat16"))
    tt = Instr("TENSOR_TENSOR", "dve", ops, (ALU_OPS.code("maximum"),), inst_id=1)
    assert occupancy_cycles(tt, "gen2") == 2048
    assert occupancy_cycles(tt, "gen3") == 1024


# -- TensorE throttling ------------------------------------------------------------------------------------------


def _matmuls(n: int) -> list[Instr]:
    stat, mov, dst = sbuf((128, 128), 0, "bfloat16"), sbuf((128, 512), 4096, "bfloat16"), \
        Operand("psum", "float32", ((1, 128), (1, 512)))  # fmt: skip
    return [Instr("MATMUL", "pe", (dst, stat, mov), inst_id=i + 1) for i in range(n)]


def test_pe_starts_throttled_on_gen3_and_ramps_up() -> None:
    """THR: after a quiet window the PE runs at ~50% and ramps to full over ~3 µs; trn1 is not throttled."""
    gen3 = simulate(_neff({"pe": _matmuls(64)}), {}, target="gen3", timing_only=True).profile.events_for("pe")
    full = 512 / 2.4
    assert gen3[0].dur_ns == pytest.approx(2 * full)
    assert gen3[-1].dur_ns == pytest.approx(full)  # 64 back-to-back matmuls: well past the ramp
    assert all(b.dur_ns <= a.dur_ns + 1e-9 for a, b in zip(gen3, gen3[1:]))
    gen2 = simulate(_neff({"pe": _matmuls(4)}), {}, target="gen2", timing_only=True).profile.events_for("pe")
    assert [ev.dur_ns for ev in gen2] == pytest.approx([512 / 2.8] * 4)


def test_accumulating_matmuls_do_not_wait_for_their_psum_tile() -> None:
    """A2: PSUM accumulates near memory and TensorE only writes PSUM, so a matmul accumulating into the tile the
    previous one wrote issues right behind it (the K loop streams); VectorE reading what it just wrote waits its
    dependent latency."""
    acc = [Instr(ins.opcode, "pe", ins.operands, flags=1 if i else 0, inst_id=ins.inst_id)
           for i, ins in enumerate(_matmuls(4))]  # fmt: skip
    assert all(ins.flag("accumulate") for ins in acc[1:])
    pe = simulate(_neff({"pe": acc}), {}, target="gen2", timing_only=True).profile.events_for("pe")
    assert [b.start_ns for b in pe[1:]] == pytest.approx([a.end_ns for a in pe[:-1]])
    t, u = sbuf((128, 512)), sbuf((128, 512), addr=4096)
    chain = [Instr("TENSOR_COPY", "dve", (u, t), inst_id=1), Instr("TENSOR_COPY", "dve", (t, u), inst_id=2)]
    first, second = simulate(_neff({"dve": chain}), {}, target="gen2", timing_only=True).profile.events_for("dve")
    assert second.start_ns == pytest.approx(first.end_ns + DEPENDENT_LATENCY_CYCLES["dve"] / 1.12)


# -- DMA ---------------------------------------------------------------------------------------------------------


def _loads(n: int, queues: int, cols: int, dynamic: bool = False) -> tuple[Neff, list[Instr]]:
    """n HBM -> SBUF loads of [128, cols] fp32; ``dynamic``: the HBM address adds register 0 at run time."""
    dyn = {"dyn": "reg", "dyn_ref": 0, "dyn_scale": 1} if dynamic else {}
    sp = [Instr("DMA_COPY", "sp", (sbuf((128, cols), addr=0),
                                   Operand("hbm", "float32", ((cols, 128), (1, cols)), address=i * 128 * cols * 4,
                                           var_id=0, **dyn)),  # type: ignore[arg-type]
                (i % queues,), signal_sem=queue_sem(i % queues), inst_id=i + 1) for i in range(n)]  # fmt: skip
    return _neff({"sp": sp}, [Variable("x", 0, "input", (n * 128 + 128, cols), "float32")]), sp


def test_run_time_descriptors_pipeline_on_one_queue() -> None:
    """DGE: a transfer with a dynamic address has its descriptors generated at run time, ~600 ns each, one after
    another on its queue: small ones start one every DMA_DESCRIPTOR_NS, overlapping their ~1.3 µs latency."""
    neff, sp = _loads(8, 1, 16, dynamic=True)
    prof = simulate(neff, {}, target="gen3", timing_only=True).profile
    starts = [ev.start_ns for ev in prof.events_for("q0")]
    work, rate = dma_transfer(sp[0], "gen3")
    assert work / rate < DMA_DESCRIPTOR_NS == dma_descriptor_ns(sp[0])  # so the descriptors are the bottleneck
    assert np.diff(starts) == pytest.approx([DMA_DESCRIPTOR_NS] * 7)
    assert starts[0] == pytest.approx(prof.events_for("sp")[0].end_ns + DMA_LATENCY_NS)


def test_static_descriptors_do_not_wait_for_generation() -> None:
    """DGE, mode none: static descriptors were built before the run, so the same transfers with static addresses
    follow each other as fast as their triggers and data allow."""
    neff, sp = _loads(8, 1, 16)
    prof = simulate(neff, {}, target="gen3", timing_only=True).profile
    starts = [ev.start_ns for ev in prof.events_for("q0")]
    work, rate = dma_transfer(sp[0], "gen3")
    assert dma_descriptor_ns(sp[0]) == 0.0
    assert starts[0] == pytest.approx(prof.events_for("sp")[0].end_ns + DMA_LATENCY_NS)
    assert np.diff(starts) == pytest.approx([work / rate] * 7)  # back to back on the queue's data FIFO
    assert work / rate < DMA_DESCRIPTOR_NS


@pytest.mark.parametrize("target", ["gen2", "gen3", "gen4"])
def test_queues_share_the_per_core_bandwidth(target: str) -> None:
    """Sixteen queues moving large transfers at once together reach the per-core figure (272/368/528 GB/s), not
    16 times one transfer's rate."""
    neff, sp = _loads(32, 16, 4096)
    prof = simulate(neff, {}, target=target, timing_only=True).profile
    events = [ev for q in range(16) for ev in prof.events_for(f"q{q}")]
    span = max(ev.end_ns for ev in events) - min(ev.start_ns for ev in events)
    work = sum(dma_transfer(ins, target)[0] for ins in sp)
    cap = dma_core_bytes_per_ns(target)
    assert cap == pytest.approx(16 * get_target(target).dma_bytes_per_ns)
    # every transfer is triggered within ~1.5 µs (SP issue): the span is the capped data time, within that slack
    assert work / cap * (1 - 1e-9) <= span <= work / cap + 2000.0


# -- NEFF launch and teardown ------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["gen2", "gen3", "gen4"])
def test_a_one_instruction_kernel_pays_launch_and_teardown(target: str) -> None:
    """No engine issues before its first instruction fetch has landed (one DMA: ~1.3 µs fixed cost plus a 64-byte
    record at the per-engine rate), and the run ends with the completion write (one DMA of 4 bytes)."""
    exp = _exp(sbuf((128, 512), addr=4096), sbuf((128, 512)), 1)
    prof = simulate(_neff({"act": [exp]}), {}, target=target, timing_only=True).profile
    (ev,) = prof.events_for("act")
    bw = get_target(target).dma_bytes_per_ns
    assert prof.launch_ns == neff_launch_ns(target) == pytest.approx(DMA_FIXED_NS + 64 / bw)
    assert prof.teardown_ns == neff_teardown_ns(target) == pytest.approx(DMA_FIXED_NS + 4 / bw)
    assert ev.start_ns == pytest.approx(prof.launch_ns) and ev.dur_ns == pytest.approx(occupancy_ns(exp, target))
    assert prof.total_ns == pytest.approx(prof.launch_ns + ev.dur_ns + prof.teardown_ns)
    # an empty NEFF still launches and tears down
    assert simulate(_neff({}), {}, target=target, timing_only=True).profile.total_ns == \
        pytest.approx(prof.launch_ns + prof.teardown_ns)  # fmt: skip


# -- timing-only runs --------------------------------------------------------------------------------------------


def test_timing_only_gives_the_same_timeline_as_a_full_run() -> None:
    from nkic.compiler.driver import compile_traced, run_neff
    from nkic.kernels.softmax import softmax

    x = np.random.default_rng(0).standard_normal((256, 1000)).astype(np.float32)
    neff = compile_traced(softmax.trace(x)).neff
    full = run_neff(neff, {"x": x}, target="gen3").profile
    timed = run_neff(neff, {}, target="gen3", timing_only=True).profile
    assert timed.total_ns == full.total_ns and timed.events == full.events


def test_benchmark_timing_only_takes_tensor_specs() -> None:
    import nkic.api as nki
    from nkic.frontend import TensorSpec
    from nkic.kernels.matmul import matmul

    bench = nki.benchmark(matmul, timing_only=True)
    assert bench(TensorSpec((256, 128), "bfloat16"), TensorSpec((256, 512), "bfloat16")) is None
    us = bench.benchmark_result.nc_latency.get_latency_percentile(50)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((256, 128)).astype(np.float32), rng.standard_normal((256, 512)).astype(np.float32)
    import ml_dtypes

    full = nki.benchmark(matmul)
    full(a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16))
    assert us == full.benchmark_result.nc_latency.get_latency_percentile(50) > 0


def test_cli_run_timing_only(tmp_path: Path) -> None:
    def nkic(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "nkic.tools.cli", *args], cwd=tmp_path, capture_output=True,
                              text=True)  # fmt: skip

    r = nkic("compile", f"{KERNELS / 'matmul.py'}:matmul", "--arg", "lhsT=bfloat16[256,128]",
             "--arg", "rhs=bfloat16[256,512]", "-o", "mm.neff")  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = nkic("run", "mm.neff", "--timing-only", "--profile", "trace.json")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("target gen3: ") and " ns = " in r.stdout and "\n   0 pe " in r.stdout
    assert (tmp_path / "trace.json").is_file() and not (tmp_path / "out").exists()
    r = nkic("run", "mm.neff")
    assert r.returncode == 1 and "--output-dir is required (unless --timing-only)" in r.stderr
