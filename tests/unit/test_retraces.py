"""Re-tracing to unroll loops: every re-trace unrolls a loop it had not, so the number a kernel needs is bounded by
its loop lines (two each at most); ``NKIC_MAX_RETRACES`` only caps the time. nki-library's
``allgather_compute_matmul`` on its SBUF path under an LNC=2 grid needs 74, more than the former fixed bound of 64."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.target.limits import DEFAULT_MAX_RETRACES, RETRACES_VAR, max_retraces  # noqa: E402

SCALES = [1.0, 2.0, 3.0, 4.0]


@nki.jit
def three_scaled_copies(x):
    """Three loops whose bodies index a Python list with the loop index: each needs the index as a number, so each
    is traced rolled first and unrolled by one re-trace (three in all)."""
    out = nl.ndarray((3, 4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    src = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    for k in range(3):
        t = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
        if k == 0:
            for i in nl.affine_range(4):
                nisa.activation(dst=t[i : i + 1, :], op=nl.copy, data=src[i : i + 1, :], scale=SCALES[i])
        elif k == 1:
            for i in nl.affine_range(4):
                nisa.activation(dst=t[i : i + 1, :], op=nl.copy, data=src[i : i + 1, :], scale=-SCALES[i])
        else:
            for i in nl.affine_range(4):
                nisa.activation(dst=t[i : i + 1, :], op=nl.copy, data=src[i : i + 1, :], scale=2 * SCALES[i])
        nisa.dma_copy(dst=out[k], src=t)
    return out


def _want(x: np.ndarray) -> np.ndarray:
    s = np.array(SCALES, np.float32)[:, None]
    return np.stack([x * s, -x * s, 2 * x * s])


def test_the_bound_counts_re_traces_and_names_its_variable(monkeypatch) -> None:
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    monkeypatch.setenv(RETRACES_VAR, "2")
    with pytest.raises(NkiError, match=f"needed more than 2 re-traces.*{RETRACES_VAR}=N"):
        three_scaled_copies.trace(x)
    monkeypatch.setenv(RETRACES_VAR, "3")
    np.testing.assert_array_equal(three_scaled_copies(x), _want(x))


def test_the_default_bound() -> None:
    assert max_retraces() == DEFAULT_MAX_RETRACES >= 2 * 42  # fgcc's 42 loop lines, two re-traces each at most


def test_fgcc_sbuf_path_on_an_lnc2_grid(nkilib: Callable[[str], ModuleType]) -> None:
    """``allgather_compute_matmul[2]`` with ``force_hbm=False`` on 4 ranks (one replica group): rank r's result is
    every rank's lhs, in rank order, times its own rhs."""
    m = nkilib("nkilib.experimental.collectives.fgcc")
    lhs = [np.random.default_rng(30 + r).standard_normal((128, 128)).astype(np.float32) for r in range(4)]
    rhs = [np.random.default_rng(40 + r).standard_normal((128, 256)).astype(np.float32) for r in range(4)]
    outs = nki.simulate(m.allgather_compute_matmul[2], ranks=4)(lhs, rhs, 4, 1, False)
    for r, out in enumerate(outs):
        want = np.stack([x @ rhs[r] for x in lhs])
        np.testing.assert_allclose(out.reshape(want.shape), want, rtol=1e-4, atol=1e-4)
