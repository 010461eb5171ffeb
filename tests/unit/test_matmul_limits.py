"""Matmul limits come from the compile target: gen4 accepts N up to 4096 (a result spanning PSUM banks), gen2/gen3
stop at 512 with an error at the user's line, and no IR level restates a smaller limit."""

from __future__ import annotations

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402


def wide_matmul(x, w):
    k, n = x.shape
    out = nl.ndarray((w.shape[1], n), dtype=nl.float32, buffer=nl.shared_hbm)
    xs = nl.ndarray((k, n), dtype=x.dtype, buffer=nl.sbuf)
    ws = nl.ndarray(w.shape, dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    nisa.dma_copy(dst=ws, src=w)
    acc = nl.ndarray((w.shape[1], n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=ws, moving=xs)  # E-wide
    res = nl.ndarray((w.shape[1], n), dtype=nl.float32, buffer=nl.sbuf)
    for c in nl.static_range(n // 512):  # PSUM is read back one 2 KiB bank at a time
        nisa.tensor_copy(dst=res[:, nl.ds(c * 512, 512)], src=acc[:, nl.ds(c * 512, 512)])
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize("n", [1024, 2048])
def test_gen4_matmul_spans_psum_banks(n: int) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((128, n)).astype(np.float32)
    w = rng.standard_normal((128, 64)).astype(np.float32)
    out = nki.simulate(nki.jit(wide_matmul, platform_target="trn3"))(x, w)
    np.testing.assert_allclose(out, w.astype(np.float64).T @ x, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_wide_matmul_is_a_user_error_before_gen4(target: str) -> None:
    x, w = np.zeros((128, 1024), np.float32), np.zeros((128, 64), np.float32)
    with pytest.raises(NkiError, match=r"N=1024 \(max 512\)") as e:
        nki.jit(wide_matmul, platform_target=target).trace(x, w)
    marker = next(n for n, t in enumerate(open(__file__), 1) if t.rstrip().endswith("# E-wide"))
    assert (e.value.file, e.value.line) == (__file__, marker)
