"""``nisa.core_barrier`` (CORE_BARRIER, a control instruction between the cores of an SPMD launch) and the one
``nl.shared_hbm`` scratch tensor that all programs of a grid share, checked by simulating real kernels."""

from __future__ import annotations

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.api.execute import simulate  # noqa: E402
from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.frontend.tracer import jit  # noqa: E402
from nkic.runtime.errors import SimulationDeadlock  # noqa: E402

RNG = np.random.default_rng(7)


def _exchange(a, barrier: bool, cores=(0, 1)):
    """Each program writes exp() of its half of ``a`` into a shared scratch tensor, then copies the *other*
    program's half to its half of the output: right only if the other core's writes landed first."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    scratch = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    n = a.shape[0] // 2
    t = nl.ndarray((n, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[pid * n : (pid + 1) * n, :])
    nisa.activation(dst=t, op=nl.exp, data=t)
    nisa.dma_copy(dst=scratch[pid * n : (pid + 1) * n, :], src=t)
    if barrier:
        nisa.core_barrier(scratch, cores)
    u = nl.ndarray((n, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=u, src=scratch[(1 - pid) * n : (2 - pid) * n, :])
    nisa.dma_copy(dst=out[pid * n : (pid + 1) * n, :], src=u)
    return out


def _swapped_exp(a: np.ndarray) -> np.ndarray:
    e = np.exp(a.astype(np.float64))
    n = a.shape[0] // 2
    return np.concatenate([e[n:], e[:n]])


def test_barrier_orders_the_other_cores_writes() -> None:
    a = RNG.standard_normal((256, 512)).astype(np.float32)
    out = simulate(jit(_exchange)[2])(a, True)
    np.testing.assert_allclose(out, _swapped_exp(a), rtol=1e-5)


def test_without_the_barrier_the_other_half_is_not_written_yet() -> None:
    a = RNG.standard_normal((256, 512)).astype(np.float32)
    out = simulate(jit(_exchange)[2])(a, False)
    assert not np.allclose(out, _swapped_exp(a), rtol=1e-3, equal_nan=False)


def test_one_core_waits_for_nobody() -> None:
    """Under LNC1 nki-library still calls core_barrier(t, (0, 1)): core 1 is not in the launch, nothing to wait for."""

    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        nisa.core_barrier(out, (0, 1))
        nisa.core_barrier(out, [0])
        return out

    a = RNG.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(simulate(k)(a), a)


def test_a_core_that_never_arrives_is_a_deadlock() -> None:
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((64, a.shape[1]), a.dtype, buffer=nl.sbuf)
        pid = nl.program_id(0)
        nisa.dma_copy(dst=t, src=a[pid * 64 : (pid + 1) * 64, :])
        nisa.dma_copy(dst=out[pid * 64 : (pid + 1) * 64, :], src=t)
        if pid == 0:  # program ids are known at trace time
            nisa.core_barrier(out, (0, 1))
        return out

    with pytest.raises(SimulationDeadlock):
        simulate(jit(k)[2])(RNG.standard_normal((128, 64)).astype(np.float32))


@pytest.mark.parametrize("cores,message", [((0, 2), "must be 0 or 1"), ((), "cores must be"),
                                           ("01", "cores must be")])  # fmt: skip
def test_bad_cores(cores, message: str) -> None:
    a = RNG.standard_normal((256, 512)).astype(np.float32)
    with pytest.raises(NkiError, match=message):
        simulate(jit(_exchange)[2])(a, True, cores)


def _barrier_on(buffer):
    def on_chip(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        anchor = nl.ndarray(a.shape, a.dtype, buffer=buffer)
        nisa.tensor_copy(dst=anchor, src=t)
        nisa.core_barrier(anchor, (0, 1))
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    return on_chip


def test_data_in_sbuf_is_accepted() -> None:
    """nki-library's router_topk barriers on an SBUF tensor (moe_block_tkg's selective path): the barrier never
    touches its data, so nkic accepts HBM or SBUF."""
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(simulate(jit(_barrier_on(nl.sbuf))[2])(a), a)


def test_data_must_not_be_in_psum_and_the_target_gen3() -> None:
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    with pytest.raises(NkiError, match="'data' must be a tensor in HBM or SBUF, not psum"):
        simulate(_barrier_on(nl.psum))(a)
    with pytest.raises(NkiError, match="not available on gen2"):
        simulate(jit(_exchange, target="gen2")[2])(RNG.standard_normal((256, 64)).astype(np.float32), True)
