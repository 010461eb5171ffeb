"""Shared SBUF/PSUM ports (``costs.shared_ports``, ``timeline.SharedPorts``): VectorE and GpSimd share SBUF access on
trn1 (A2), so two independent elementwise instructions, one on each, serialize there and overlap on trn2 (A3), and
the profile says who waited for whom."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nkic.compiler.driver import compile_kernel, run_neff
from nkic.target.costs import PORT_NAMES, occupancy_ns, shared_ports
from nkic.target.isa import Instr, Operand


def _kernel():
    import nkic

    nkic.install_nki_alias()
    import nki
    import nki.isa as nisa
    import nki.language as nl

    def two_engines(a, b):
        """One tensor_tensor on VectorE and an independent one on GpSimd, both reading SBUF only."""
        out = nl.ndarray((2, *a.shape), a.dtype, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        s = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        p = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=x, data2=y, op=nl.add, engine=nisa.engine.vector)
        nisa.tensor_tensor(dst=p, data1=x, data2=y, op=nl.multiply, engine=nisa.engine.gpsimd)
        nl.store(out[0], s)
        nl.store(out[1], p)
        return out

    return nki, two_engines


def _run(target: str):
    nki, fn = _kernel()
    a = np.arange(128 * 2048, dtype=np.float32).reshape(128, 2048) / 1000
    neff = compile_kernel(nki.jit(fn, target=target), (a, a)).neff
    result = run_neff(neff, {"a": a, "b": a}, target=target)
    np.testing.assert_allclose(result.outputs["out"], np.stack([a + a, a * a]), rtol=1e-6)
    return result.profile


def _tt(engine: str) -> Instr:
    sb = Operand("sbuf", "float32", ((1, 128), (1, 2048)))
    return Instr("TENSOR_TENSOR", engine, (sb, sb, sb))


def test_declared_ports_follow_the_generation() -> None:
    assert shared_ports(_tt("dve"), "gen2") == shared_ports(_tt("pool"), "gen2") == ("sbuf-dve-pool",)
    assert shared_ports(_tt("dve"), "gen3") == ()  # v3 removed the conflict; fp32 runs in no performance mode
    assert shared_ports(_tt("pool"), "gen3") == ("pool-bus",)
    assert set(PORT_NAMES) >= {"sbuf-dve-pool", "psum-dve-act", "pool-bus"}


def test_dve_and_pool_serialize_on_trn1_and_overlap_on_trn2() -> None:
    gen2, gen3 = _run("gen2"), _run("gen3")
    for profile, target in ((gen2, "gen2"), (gen3, "gen3")):
        tt = {ev.track: ev for ev in profile.events if ev.mnemonic == "TENSOR_TENSOR"}
        assert set(tt) == {"dve", "pool"}
    dve, pool = (next(ev for ev in gen2.events if ev.mnemonic == "TENSOR_TENSOR" and ev.track == e)
                 for e in ("dve", "pool"))  # fmt: skip
    first, second = sorted((dve, pool), key=lambda ev: ev.start_ns)
    assert second.start_ns >= first.end_ns - 1e-6  # one after the other on the shared port
    waits = gen2.port_contention()
    assert list(waits) == [(second.track, first.track, "sbuf-dve-pool")]
    assert waits[(second.track, first.track, "sbuf-dve-pool")] > 0.5 * first.dur_ns
    assert f"port contention: {second.track} waited" in gen2.summary()
    trace = gen2.to_chrome_trace()["traceEvents"]
    assert [e["cat"] for e in trace if e.get("cat") == "port-wait"] == ["port-wait"]
    json.dumps(trace)
    # trn2: no shared SBUF port for fp32 work, the two run at once
    d3, p3 = (next(ev for ev in gen3.events if ev.mnemonic == "TENSOR_TENSOR" and ev.track == e)
              for e in ("dve", "pool"))  # fmt: skip
    assert max(d3.start_ns, p3.start_ns) < min(d3.end_ns, p3.end_ns)
    assert not gen3.port_waits


@pytest.mark.parametrize("engine", ["dve", "pool"])
def test_port_wait_does_not_count_as_busy(engine: str) -> None:
    profile = _run("gen2")
    busy = sum(ev.dur_ns for ev in profile.events if ev.track == engine)
    assert profile.busy_ns[engine] == pytest.approx(busy)
    assert occupancy_ns(_tt(engine), "gen2") > 0
