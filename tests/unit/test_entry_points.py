"""The legacy entry points (``nki.simulate_kernel``, ``baremetal``, ``benchmark``, ``profile``, ``trace``,
``jit(mode=...)``): each compiles and simulates, as documented for a CPU."""

from __future__ import annotations

import json

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()

import nki  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.runtime.neff import read_neff  # noqa: E402

RNG = np.random.default_rng(3)


def double(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(a), nl.load(a)))
    return out


def halves(a):
    """Each program of a [2] launch doubles its half of the rows."""
    pid = nl.program_id(0)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    rows = a.shape[0] // 2
    t = nl.load(a[pid * rows : (pid + 1) * rows, :])
    nl.store(out[pid * rows : (pid + 1) * rows, :], nl.add(t, t))
    return out


def test_simulate_kernel_plain_jitted_and_gridded() -> None:
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate_kernel(double, a), 2 * a)
    np.testing.assert_array_equal(nki.simulate_kernel(nki.jit(double), a), 2 * a)
    np.testing.assert_array_equal(nki.simulate_kernel(nki.baremetal(halves)[2], a), 2 * a)


def test_jit_modes_all_compile_and_simulate() -> None:
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    for mode in ("simulation", "baremetal", "trace", "auto"):
        np.testing.assert_array_equal(nki.jit(double, mode=mode)(a), 2 * a)
    np.testing.assert_array_equal(nki.trace(double)(a), 2 * a)


def test_baremetal_writes_the_neff_and_the_profile(tmp_path) -> None:
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    neff, trace = tmp_path / "k.neff", tmp_path / "sub" / "k.json"
    kernel = nki.baremetal(save_neff_name=str(neff), save_trace_name=str(trace))(double)
    np.testing.assert_array_equal(kernel(a), 2 * a)
    assert read_neff(neff.read_bytes()).name == "double"
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)


def test_benchmark_reports_the_simulated_latency(tmp_path, capsys) -> None:
    a = RNG.standard_normal((128, 512)).astype(np.float32)
    bench = nki.benchmark(warmup=2, iters=5, save_neff_name=str(tmp_path / "b.neff"))(double)
    np.testing.assert_array_equal(bench(a), 2 * a)
    latency = bench.benchmark_result.nc_latency
    p50, p99 = latency.get_latency_percentile(50), latency.get_latency_percentile(99)
    printed = capsys.readouterr().out  # the statistics are printed, as the SDK's neuron-bench run prints them
    assert "simulated" in printed and f"p99={p99:.3f}" in printed and "warmup=2, iters=5" in printed
    assert p50 == p99 > 0.5  # µs: two DMAs of 256 KiB alone take more than that in the cost model
    assert bench.benchmark_result.simulated
    with pytest.raises(nki.NkiError, match="percentile 42"):
        latency.get_latency_percentile(42)
    assert (tmp_path / "b.neff").is_file()
    by_mode = nki.jit(mode="benchmark")(double)
    by_mode(a)
    assert by_mode.benchmark_result.nc_latency.get_latency_percentile(50) == p50


def test_profile_writes_into_its_folder_and_respects_overwrite(tmp_path) -> None:
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    kernel = nki.profile(working_directory=tmp_path, save_neff_name="p.neff", save_trace_name="p.ntff")(double)
    kernel(a)
    assert (tmp_path / "p.neff").is_file() and json.loads((tmp_path / "p.ntff").read_text())["traceEvents"]
    kernel(a)  # profile_nth=1: only the first call is profiled, the second just runs
    again = nki.profile(working_directory=tmp_path, save_neff_name="p.neff", save_trace_name="p.ntff")(double)
    with pytest.raises(nki.NkiError, match="exists.*overwrite=True"):
        again(a)
    second = nki.profile(working_directory=tmp_path / "nth", save_neff_name="q.neff", profile_nth=2)(double)
    second(a)
    assert not (tmp_path / "nth").exists()
    second(a)
    assert (tmp_path / "nth" / "q.neff").is_file()
    nki.profile(working_directory=tmp_path, save_neff_name="p.neff", save_trace_name="p.ntff", overwrite=True)(
        double
    )(a)
