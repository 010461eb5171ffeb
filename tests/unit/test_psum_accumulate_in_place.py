"""``psum_tile += nisa.nc_matmul(a, b)`` (and ``+= nl.matmul(...)``) in a legacy kernel is the matmul accumulating
into the PSUM tile, as on the device (``recorders/psum_accumulate.py``): eight one-bank accumulators fill
PSUM's eight banks and still compile, the numbers are the VectorE add's bit for bit, and a matmul result that a name
keeps is still added (it may be read again)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402
import nki as modern_nki  # noqa: E402
import nki.isa as mnisa  # noqa: E402
import nki.language as mnl  # noqa: E402

from xdsl.utils.exceptions import PassFailedException  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.frontend.legacy import language as legacy_language  # noqa: E402
from nkic.frontend.legacy import migration  # noqa: E402

RNG = np.random.default_rng(24)
ACCS, N = 8, 512  # eight (128, 512) fp32 accumulators: 2 KiB per partition each, one PSUM bank each
STEPS, K = 2, 256  # two accumulation steps, the second's stationary read from the first's last accumulator


@pytest.fixture(autouse=True)
def quiet_legacy() -> Iterator[None]:
    migration.set_action("ignore")
    migration.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    migration.set_action(None)
    migration.reset()


def eight_nc_matmul(a, b):
    out = nl.ndarray((ACCS, 128, N), dtype=nl.float32, buffer=nl.shared_hbm)
    accs = [nl.zeros((128, N), nl.float32, buffer=nl.psum) for _ in range(ACCS)]
    lhs = nl.load(a)
    for k in range(STEPS):
        for j in range(ACCS):
            accs[j] += nisa.nc_matmul(lhs, nl.load(b[k * 128:(k + 1) * 128, j * N:(j + 1) * N]))
        lhs = nl.copy(accs[ACCS - 1][:, 0:128])  # the next step waits for every accumulator's: all eight live
    for j in range(ACCS):
        nl.store(out[j], accs[j])
    return out


def eight_nl_matmul(a, b):
    out = nl.ndarray((ACCS, 128, N), dtype=nl.float32, buffer=nl.shared_hbm)
    accs = [nl.zeros((128, N), nl.float32, buffer=nl.psum) for _ in range(ACCS)]
    lhs = nl.load(a)
    for k in range(STEPS):
        for j in range(ACCS):
            accs[j] += nl.matmul(lhs, nl.load(b[k * 128:(k + 1) * 128, j * N:(j + 1) * N]), transpose_x=True)
        lhs = nl.copy(accs[ACCS - 1][:, 0:128])
    for j in range(ACCS):
        nl.store(out[j], accs[j])
    return out


def eight_modern(a, b):
    """The same accumulations in NKI 0.3: nc_matmul into each accumulator, the first write overwriting."""
    out = mnl.ndarray((ACCS, 128, N), dtype=mnl.float32, buffer=mnl.shared_hbm)
    accs = [mnl.ndarray((128, N), dtype=mnl.float32, buffer=mnl.psum) for _ in range(ACCS)]
    lhs = mnl.ndarray((128, 128), dtype=mnl.float32, buffer=mnl.sbuf)
    mnisa.dma_copy(dst=lhs, src=a)
    for k in range(STEPS):
        for j in range(ACCS):
            rhs = mnl.ndarray((128, N), dtype=mnl.float32, buffer=mnl.sbuf)
            mnisa.dma_copy(dst=rhs, src=b[k * 128:(k + 1) * 128, j * N:(j + 1) * N])
            mnisa.nc_matmul(dst=accs[j], stationary=lhs, moving=rhs)
        lhs = mnl.ndarray((128, 128), dtype=mnl.float32, buffer=mnl.sbuf)
        mnisa.tensor_copy(dst=lhs, src=accs[ACCS - 1][:, 0:128])
    for j in range(ACCS):
        res = mnl.ndarray((128, N), dtype=mnl.float32, buffer=mnl.sbuf)
        mnisa.tensor_copy(dst=res, src=accs[j])
        mnisa.dma_copy(dst=out[j], src=res)
    return out


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    a = RNG.standard_normal((128, 128)).astype(np.float32)
    b = RNG.standard_normal((STEPS * 128, ACCS * N)).astype(np.float32)
    return a, b


def _want(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    acc = np.zeros((ACCS, 128, N), np.float64)
    lhs = a.astype(np.float64)
    for k in range(STEPS):
        for j in range(ACCS):
            acc[j] += lhs.T @ b[k * 128:(k + 1) * 128, j * N:(j + 1) * N]
        lhs = acc[ACCS - 1][:, :128].copy()
    return acc


@pytest.mark.parametrize("kernel", [eight_nc_matmul, eight_nl_matmul])
def test_eight_one_bank_accumulators_fit_and_match_numpy_and_the_modern_kernel(kernel) -> None:
    a, b = _inputs()
    got = nki.jit(kernel)(a, b)
    np.testing.assert_allclose(got, _want(a, b), rtol=1e-4, atol=1e-2)
    modern = modern_nki.simulate(modern_nki.jit(eight_modern))(a, b)
    np.testing.assert_array_equal(got, modern)  # the same matmuls accumulating in PSUM: the same bits


def test_eight_accumulators_need_the_in_place_accumulation(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the add (a ninth PSUM tile per matmul, live while all eight accumulators are) PSUM's eight banks do not
    hold them: what makes the test above one the in-place accumulation alone passes."""
    monkeypatch.setattr(legacy_language, "_accumulate_in_place", lambda ctx, acc, value: False)
    with pytest.raises((NkiError, PassFailedException), match="does not fit in PSUM"):
        nki.jit(eight_nc_matmul)(*_inputs())


def test_ir_has_no_temporary_psum_tile_copy_or_add() -> None:
    a, b = _inputs()
    text = str(nki.jit(eight_nc_matmul).trace(a, b).module)
    assert text.count('penguin.alloc "psum') == ACCS  # the accumulators only
    assert text.count("accumulate = true") == text.count("penguin.matmul") == STEPS * ACCS
    assert "penguin.tensor_tensor" not in text
    assert text.count("penguin.tensor_copy") == ACCS + STEPS  # the stores' and nl.copy's PSUM -> SBUF copies


def legacy_sum(a, b, named):
    out = nl.ndarray((128, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        if named:  # a name keeps the result: it is added (it may be read again)
            t = nisa.nc_matmul(nl.load(a[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, 0:N]))
            acc += t
        else:
            acc += nisa.nc_matmul(nl.load(a[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, 0:N]))
    nl.store(out, acc)
    return out


def test_in_place_matches_the_add_bit_for_bit() -> None:
    a, b = RNG.standard_normal((K, 128)).astype(np.float32), RNG.standard_normal((K, N)).astype(np.float32)
    a[0, :5] = [np.inf, -0.0, 1e-45, np.nan, 3e38]
    in_place = nki.jit(legacy_sum)(a, b, False)
    added = nki.jit(legacy_sum)(a, b, True)
    assert "accumulate = true" in str(nki.jit(legacy_sum).trace(a, b, False).module)
    assert "accumulate = true" not in str(nki.jit(legacy_sum).trace(a, b, True).module)
    np.testing.assert_array_equal(in_place.view(np.uint32), added.view(np.uint32))


def test_a_named_result_read_again_is_still_its_own_tile() -> None:
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((2, 128, N), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, N), nl.float32, buffer=nl.psum)
        t = nisa.nc_matmul(nl.load(a[0:128, :]), nl.load(b[0:128, 0:N]))
        acc += t
        acc += t
        nl.store(out[0], acc)
        nl.store(out[1], t)
        return out

    a, b = RNG.standard_normal((128, 128)).astype(np.float32), RNG.standard_normal((128, N)).astype(np.float32)
    got = kernel(a, b)
    p = a.T @ b
    np.testing.assert_allclose(got[0], 2 * p, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got[1], p, rtol=1e-4, atol=1e-3)


def test_a_block_accumulator_indexed_in_place_matches_numpy() -> None:
    """``acc[m, :, :] += ...``: Python assigns the updated view back to itself, which records no copy."""

    @nki.jit
    def kernel(a, b):
        acc = nl.zeros((2, nl.par_dim(128), N), nl.float32, buffer=nl.psum)
        out = nl.ndarray((2, 128, N), dtype=nl.float32, buffer=nl.shared_hbm)
        for m in nl.affine_range(2):
            for k in nl.affine_range(K // 128):
                acc[m, :, :] += nisa.nc_matmul(nl.load(a[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128]),
                                               nl.load(b[k * 128:(k + 1) * 128, :]))
            nl.store(out[m], acc[m])
        return out

    a, b = RNG.standard_normal((K, 256)).astype(np.float32), RNG.standard_normal((K, N)).astype(np.float32)
    text = str(kernel.trace(a, b).module)
    assert text.count("penguin.tensor_copy") == 1 and "tensor_tensor" not in text  # the store's copy alone
    np.testing.assert_allclose(kernel(a, b), np.stack([a[:, :128].T @ b, a[:, 128:].T @ b]), rtol=1e-4, atol=1e-3)
