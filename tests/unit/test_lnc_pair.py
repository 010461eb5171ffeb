"""The LNC=2 pair: ``nisa.sendrecv`` and ``nisa.core_barrier`` between the two cores of a ``kernel[2]`` launch,
simulated concurrently (two SBUFs, one HBM), against numpy; deadlocks and user errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.compiler.driver import compile_traced, run_neff  # noqa: E402
from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.runtime.errors import SimulationDeadlock, SimulationError  # noqa: E402

RNG = np.random.default_rng(5)


def _data(shape: tuple[int, ...], dtype: object) -> np.ndarray:
    if np.issubdtype(np.dtype(dtype), np.integer):
        return RNG.integers(-100, 100, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _load(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


# -- sendrecv ------------------------------------------------------------------------------------------------
@nki.jit
def exchange(a, mode):
    """Each core loads its half of ``a`` and swaps it with the other core's; out[r] = what core r received."""
    pid = nl.program_id(0)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    mine = _load(a[pid])
    got = nl.ndarray(mine.shape, dtype=a.dtype, buffer=nl.sbuf)
    engine = nisa.dma_engine.gpsimd_dma if mode == "gpsimd" else nisa.dma_engine.dma
    nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0, dma_engine=engine)
    nisa.dma_copy(dst=out[pid], src=got)
    return out


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16, np.int32, np.int8, np.uint16,
                                   ml_dtypes.float8_e4m3])  # fmt: skip
@pytest.mark.parametrize("mode", ["dma", "gpsimd"])
def test_sendrecv_swaps_the_cores_tiles(dtype: object, mode: str) -> None:
    a = _data((2, 128, 64), dtype)
    out = nki.simulate(exchange[2])(a, mode)
    np.testing.assert_array_equal(out.view(np.uint8), a[::-1].view(np.uint8))  # bit-exact, no cast


def test_sendrecv_3d_tiles_and_partial_partitions() -> None:
    @nki.jit
    def kernel(a):
        pid = nl.program_id(0)
        out = nl.ndarray((2, 32, 4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        mine = _load(a[pid])
        got = nl.ndarray((32, 4, 8), dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=mine[:, :, 0:8], dst=got, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=1)
        nisa.dma_copy(dst=out[pid], src=got)
        return out

    a = _data((2, 32, 4, 16), np.float32)
    out = nki.simulate(kernel[2])(a)
    np.testing.assert_array_equal(out, a[::-1, :, :, 0:8])


def test_sendrecv_in_place_swaps() -> None:
    """src and dst the same tile on both cores: every src is read before any dst is written."""

    @nki.jit
    def kernel(a):
        pid = nl.program_id(0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = _load(a[pid])
        nisa.sendrecv(src=t, dst=t, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
        nisa.dma_copy(dst=out[pid], src=t)
        return out

    a = _data((2, 128, 32), np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel[2])(a), a[::-1])


def test_sendrecv_pairs_each_pipe_in_program_order() -> None:
    """Three exchanges: two on pipe 0 and one on pipe 5 in between, each a different tile; the k-th of a pipe on
    core 0 meets the k-th of that pipe on core 1, then the received tiles are reduced as nki-library's LNC
    all-reduce does (local + remote)."""

    @nki.jit
    def kernel(a):
        pid = nl.program_id(0)
        out = nl.ndarray((2, 3, 128, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        for k, pipe in enumerate((0, 5, 0)):
            mine = _load(a[pid, k])
            got = nl.ndarray((128, 16), dtype=a.dtype, buffer=nl.sbuf)
            nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=pipe)
            total = nl.ndarray((128, 16), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=total, data1=mine, data2=got, op=nl.add)
            nisa.dma_copy(dst=out[pid, k], src=total)
        return out

    a = _data((2, 3, 128, 16), np.float32)
    out = nki.simulate(kernel[2])(a)
    np.testing.assert_array_equal(out[0], a[0] + a[1])
    np.testing.assert_array_equal(out[1], a[0] + a[1])


def test_sendrecv_to_itself_is_a_local_copy() -> None:
    """A rank may be the core itself, also in a one-program launch."""

    @nki.jit
    def kernel(a):
        t = _load(a)
        got = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=got, send_to_rank=0, recv_from_rank=0, pipe_id=2)
        return _out(got)

    a = _data((64, 40), ml_dtypes.bfloat16)
    np.testing.assert_array_equal(nki.simulate(kernel)(a), a)


def _out(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_sendrecv_costs_a_transfer_and_both_cores_finish_together() -> None:
    traced = exchange[2].trace(np.zeros((2, 128, 512), np.float32), "dma")
    profile = run_neff(compile_traced(traced).neff, {"a": np.ones((2, 128, 512), np.float32)}).profile
    spans = [ev for ev in profile.events if ev.mnemonic == "SENDRECV"]
    assert sorted(ev.core for ev in spans) == [0, 1]
    assert spans[0].start_ns == spans[1].start_ns and spans[0].dur_ns == spans[1].dur_ns
    assert spans[0].dur_ns > 1300  # at least a DMA's fixed cost: 256 KiB between the SBUFs
    gpsimd = exchange[2].trace(np.zeros((2, 128, 64), np.float32), "gpsimd")
    fast = run_neff(compile_traced(gpsimd).neff, {"a": np.ones((2, 128, 64), np.float32)}).profile
    [ev, _] = [e for e in fast.events if e.mnemonic == "SENDRECV"]
    assert ev.track == "pool" and ev.dur_ns < 500  # GpSimd's own DMA skips the descriptors and queues


def test_sendrecv_pairing_mismatch_is_a_simulation_error() -> None:
    @nki.jit
    def kernel(a):
        pid = nl.program_id(0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = _load(a[pid])
        got = nl.ndarray(t.shape, dtype=a.dtype, buffer=nl.sbuf)
        # core 0 swaps with core 1, but core 1 sends to itself while receiving from core 0
        nisa.sendrecv(src=t, dst=got, send_to_rank=1, recv_from_rank=1 - pid, pipe_id=0)
        nisa.dma_copy(dst=out[pid], src=got)
        return out

    with pytest.raises(SimulationError, match=r"core 1 sends to core 1 on pipe 0 \(exchange #0\), but core 1 "
                                              r"receives from core 0"):  # fmt: skip
        nki.simulate(kernel[2])(_data((2, 128, 8), np.float32))


# -- core_barrier ----------------------------------------------------------------------------------------------
@nki.jit
def halves(a, busy):
    """The API reference's example: each core writes its half of a shared HBM tensor, both meet at the barrier,
    then each reads the other's half. Core 1 first does ``busy`` rounds of work, so it arrives much later."""
    pid = nl.program_id(0)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    shared = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = _load(a[pid])
    if pid == 1:
        for _ in range(busy):
            nisa.activation(dst=t, data=t, op=nl.copy)
    nisa.dma_copy(dst=shared[pid], src=t)
    nisa.core_barrier(data=shared, cores=(0, 1))
    other = _load(shared[1 - pid])
    nisa.dma_copy(dst=out[pid], src=other)
    return out


@pytest.mark.parametrize("busy", [0, 12])
def test_core_barrier_orders_the_cores_shared_hbm_writes_before_their_reads(busy: int) -> None:
    a = _data((2, 128, 256), np.float32)
    np.testing.assert_array_equal(nki.simulate(halves[2])(a, busy), a[::-1])


def test_core_barrier_waits_for_the_later_core() -> None:
    a = _data((2, 128, 256), np.float32)
    traced = halves[2].trace(a, 12)
    profile = run_neff(compile_traced(traced).neff, {"a": a}).profile
    core1_busy_until = max(ev.start_ns + ev.dur_ns for ev in profile.events if ev.core == 1 and ev.mnemonic == "ACTIVATE")
    barriers = [ev for ev in profile.events if ev.mnemonic == "CORE_BARRIER"]
    assert {ev.core for ev in barriers} == {0, 1} and len(barriers) == 10  # every engine of both cores
    assert all(ev.start_ns >= core1_busy_until for ev in barriers)
    after = [ev for ev in profile.events if ev.core == 0 and ev.mnemonic == "DMA_COPY" and ev.track.startswith("q")]
    assert sorted(ev.start_ns for ev in after)[-1] > core1_busy_until  # core 0's read of core 1's half waited


def test_core_barrier_of_one_core() -> None:
    """nki-library writes core_barrier(t, (0,)) for a single shard: in a one-program launch it orders the core."""

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=_load(a))
        nisa.core_barrier(out, (0,))
        t = _load(out)
        nisa.activation(dst=t, data=t, op=nl.exp)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = _data((128, 32), np.float32)
    np.testing.assert_allclose(nki.simulate(kernel)(a), np.exp(a), rtol=1e-6)


def test_barrier_and_sendrecv_together() -> None:
    """A sendrecv after a barrier, in a runtime-free pipeline: reduce both halves across the pair, twice."""

    @nki.jit
    def kernel(a):
        pid = nl.program_id(0)
        out = nl.ndarray((2, 128, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        shared = nl.ndarray((2, 128, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=shared[pid], src=_load(a[pid]))
        nisa.core_barrier(data=shared, cores=(1, 0))
        theirs = _load(shared[1 - pid])
        got = nl.ndarray((128, 16), dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=theirs, dst=got, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
        nisa.dma_copy(dst=out[pid], src=got)  # got = what the other core read = my own half
        return out

    a = _data((2, 128, 16), np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel[2])(a), a)


# -- deadlocks: a clean SimulationError naming the meeting, never a hang -------------------------------------------
def test_a_core_that_never_reaches_the_barrier_is_a_deadlock() -> None:
    @nki.jit
    def kernel(a):
        pid = nl.program_id(0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[pid], src=_load(a[pid]))
        if pid == 0:
            nisa.core_barrier(data=out, cores=(0, 1))
        return out

    with pytest.raises(SimulationDeadlock) as e:
        nki.simulate(kernel[2])(_data((2, 128, 8), np.float32))
    assert isinstance(e.value, SimulationError)
    assert "core 0 CORE_BARRIER" in str(e.value)
    assert "waits at its core_barrier #0 for core 1, which has finished its streams" in str(e.value)


def test_an_unanswered_sendrecv_is_a_deadlock() -> None:
    @nki.jit
    def kernel(a):
        pid = nl.program_id(0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = _load(a[pid])
        got = nl.ndarray(t.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=got, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=pid)  # pipes differ
        nisa.dma_copy(dst=out[pid], src=got)
        return out

    with pytest.raises(SimulationDeadlock, match=r"core 0 SENDRECV \(inst_id \d+\) waits at its sendrecv #0 on pipe 0 "
                                                 r"for core 1, which is stuck elsewhere"):  # fmt: skip
        nki.simulate(kernel[2])(_data((2, 128, 8), np.float32))


def test_cores_waiting_for_each_other_in_crossed_order_deadlock() -> None:
    """Core 0 waits at the barrier while core 1 waits in a sendrecv: each meeting misses the other core."""

    @nki.jit
    def kernel(a):
        pid = nl.program_id(0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = _load(a[pid])
        got = nl.ndarray(t.shape, dtype=a.dtype, buffer=nl.sbuf)
        if pid == 0:
            nisa.core_barrier(data=out, cores=(0, 1))
        nisa.sendrecv(src=t, dst=got, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
        if pid == 1:
            nisa.core_barrier(data=out, cores=(0, 1))
        nisa.dma_copy(dst=out[pid], src=got)
        return out

    with pytest.raises(SimulationDeadlock) as e:
        nki.simulate(kernel[2])(_data((2, 128, 8), np.float32))
    text = str(e.value)
    assert "core 0 CORE_BARRIER" in text and "core 1 SENDRECV" in text


# -- errors at the user's line ---------------------------------------------------------------------------------
def _line_of(kernel, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(kernel.func)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _sendrecv_kernel(**kw):
    @nki.jit
    def kernel(a):
        pid = nl.program_id(0)
        t = _load(a[pid])
        args = dict(src=t, dst=nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf), send_to_rank=1 - pid,
                    recv_from_rank=1 - pid, pipe_id=0)  # fmt: skip
        args.update({k: (v(t) if callable(v) else v) for k, v in kw.items()})
        nisa.sendrecv(**args)  # the error line
        return a

    return kernel


@pytest.mark.parametrize("kw,grid,message", [
    ({"send_to_rank": 2}, 2, r"sendrecv: send_to_rank must be 0 or 1 \(a core of the LNC=2 pair\), got 2"),
    ({"recv_from_rank": -1}, 2, r"sendrecv: recv_from_rank must be 0 or 1"),
    ({"send_to_rank": 1, "recv_from_rank": 0}, 1,
     r"sendrecv: send_to_rank = 1 names no core of this launch, which runs 1 program\(s\)\. launch the kernel"),
    ({"pipe_id": -1}, 2, r"sendrecv: pipe_id must be >= 0"),
    ({"pipe_id": 1.5}, 2, r"sendrecv: pipe_id must be an int32 number"),
    ({"dst": lambda t: nl.ndarray(t.shape, dtype=nl.bfloat16, buffer=nl.sbuf)}, 2,
     r"sendrecv: src is float32 but dst is bfloat16"),
    ({"dst": lambda t: nl.ndarray((64, 8), dtype=t.dtype, buffer=nl.sbuf)}, 2, r"partition count mismatch"),
    ({"dst": lambda t: nl.ndarray((128, 4), dtype=t.dtype, buffer=nl.sbuf)}, 2,
     r"'dst' has 4 elements per partition but 'src' has 8"),
    ({"dst": lambda t: nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)}, 2,
     r"sendrecv: 'dst' must be in SBUF, not shared_hbm"),
    ({"dst": lambda t: nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.psum)}, 2, r"sendrecv: 'dst' must be in SBUF"),
    ({"dma_engine": "fast"}, 2, r"invalid dma_engine 'fast'"),
])  # fmt: skip
def test_sendrecv_errors_name_the_kernel_line(kw: dict, grid: int, message: str) -> None:
    kernel = _sendrecv_kernel(**kw)
    a = np.zeros((2, 128, 8), np.float32)
    with pytest.raises(NkiError, match=message) as e:
        (kernel[grid] if grid > 1 else kernel).trace(a)
    assert (e.value.file, e.value.line) == (__file__, _line_of(kernel, "the error line"))


def test_sendrecv_gpsimd_dma_size_limit() -> None:
    @nki.jit
    def kernel(a):
        pid = nl.program_id(0)
        t = _load(a[pid])
        got = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=got, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0,
                      dma_engine=nisa.dma_engine.gpsimd_dma)  # fmt: skip
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[pid], src=got)
        return out

    for dtype, fits in ((np.float32, 256), (ml_dtypes.bfloat16, 256), (np.int8, 256)):
        kernel[2].trace(np.zeros((2, 128, fits), dtype))  # at the limit: 1024 / 512 / 256 bytes
    with pytest.raises(NkiError, match=r"gpsimd_dma moves at most 512 bytes per partition of a 2-byte dtype, got "
                                       r"514\. use dma_engine=nisa.dma_engine.dma") as e:  # fmt: skip
        kernel[2].trace(np.zeros((2, 128, 257), ml_dtypes.bfloat16))
    assert e.value.file == __file__


def test_the_pair_is_gen3_or_newer() -> None:
    with pytest.raises(NkiError, match=r"nisa.sendrecv is not available on gen2.*gen3 or newer") as e:
        nki.jit(_sendrecv_kernel().func, platform_target="trn1")[2].trace(np.zeros((2, 128, 8), np.float32))
    assert e.value.file == __file__


def _barrier_kernel(data: str = "hbm", cores=(0, 1), engine=None):
    @nki.jit
    def kernel(a):
        pid = nl.program_id(0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = _load(a[pid])
        nisa.dma_copy(dst=out[pid], src=t)
        nisa.core_barrier(t if data == "sbuf" else out, cores, engine=engine)  # the error line
        return out

    return kernel


@pytest.mark.parametrize("kw,grid,message", [
    ({"cores": (1,)}, 1, r"core_barrier: cores \(1,\) does not include this core \(program 0\)"),
    ({"cores": (0, 0)}, 2, r"core_barrier: cores \(0, 0\) names a core twice"),
    ({"cores": (1,)}, 2, r"core_barrier: cores \(1,\) does not include this core \(program 0\)"),
    ({"cores": 1}, 2, r"core_barrier: cores must be a tuple of core ranks"),
    ({"cores": (0, 2)}, 2, r"core_barrier: cores\[1\] must be 0 or 1"),
    ({"engine": "warp"}, 2, r"invalid engine 'warp'"),
])  # fmt: skip
def test_core_barrier_errors_name_the_kernel_line(kw: dict, grid: int, message: str) -> None:
    kernel = _barrier_kernel(**kw)
    with pytest.raises(NkiError, match=message) as e:
        (kernel[grid] if grid > 1 else kernel).trace(np.zeros((2, 128, 8), np.float32))
    assert (e.value.file, e.value.line) == (__file__, _line_of(kernel, "the error line"))


@pytest.mark.parametrize("engine", [None, nisa.engine.gpsimd, nisa.engine.vector, nisa.engine.scalar])
def test_core_barrier_engine_is_accepted(engine) -> None:
    a = _data((2, 128, 8), np.float32)
    np.testing.assert_array_equal(nki.simulate(_barrier_kernel(engine=engine)[2])(a), a)
