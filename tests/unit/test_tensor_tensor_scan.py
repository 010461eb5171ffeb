"""``nisa.tensor_tensor_scan`` end to end against the documented numpy recurrence."""

from __future__ import annotations

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402

NP = {"add": np.add, "multiply": np.multiply, "subtract": np.subtract, "maximum": np.maximum}


def reference(d0, d1, initial, op0, op1, reverse0=False, reverse1=False):
    """The API reference's loop, in float32, with the operands of a reversed op swapped."""
    def apply(op, a, b, rev):
        return NP[op](b, a) if rev else NP[op](a, b)

    out = np.empty_like(d0, dtype=np.float32)
    state = np.broadcast_to(np.asarray(initial, np.float32), (d0.shape[0],)).astype(np.float32)
    for i in range(d0.shape[1]):
        state = apply(op1, apply(op0, d0[:, i], state, reverse0).astype(np.float32), d1[:, i], reverse1)
        out[:, i] = state
    return out


def scan_kernel(op0: str, op1: str, initial, reverse0: bool, reverse1: bool, chunks: int):
    """The scan over ``chunks`` free-dim pieces, each seeded with the last column of the previous one (mamba v3)."""

    @nki.jit
    def kernel(a, b):
        p, f = a.shape
        w = f // chunks
        out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
        sa = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.sbuf)
        sb = nl.ndarray((p, f), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=sa, src=a)
        nisa.dma_copy(dst=sb, src=b)
        res = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
        seed = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=seed, value=float(initial))
        for c in nl.static_range(chunks):
            piece = nl.ds(c * w, w)
            start = seed if chunks > 1 else float(initial)
            nisa.tensor_tensor_scan(dst=res[:, piece], data0=sa[:, piece], data1=sb[:, piece], initial=start,
                                    op0=getattr(nl, op0), op1=getattr(nl, op1), reverse0=reverse0, reverse1=reverse1)
            nisa.tensor_copy(dst=seed, src=res[:, nl.ds(c * w + w - 1, 1)])
        nisa.dma_copy(dst=out, src=res)
        return out

    return kernel


@pytest.mark.parametrize(
    "op0,op1,initial,reverse0,reverse1,chunks",
    [("multiply", "add", 0.0, False, False, 1), ("multiply", "add", 0.5, False, False, 2),
     ("add", "maximum", -1.0, False, False, 1), ("subtract", "subtract", 2.0, True, True, 1)],
)  # fmt: skip
def test_tensor_tensor_scan_matches_numpy(op0, op1, initial, reverse0, reverse1, chunks) -> None:
    rng = np.random.default_rng(5)
    a = rng.uniform(0.5, 1.0, (128, 96)).astype(np.float32)  # decays < 1 keep the recurrence bounded
    b = rng.standard_normal((128, 96)).astype(np.float32)
    out = nki.simulate(scan_kernel(op0, op1, initial, reverse0, reverse1, chunks))(a, b)
    np.testing.assert_allclose(out, reference(a, b, initial, op0, op1, reverse0, reverse1), rtol=1e-6, atol=1e-6)


def test_tensor_tensor_scan_rejects_two_psum_inputs() -> None:
    @nki.jit
    def bad(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        p0 = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum)
        d = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=d, data0=p0, data1=p0, initial=0.0, op0=nl.multiply, op1=nl.add)  # E-psum
        return out

    with pytest.raises(NkiError, match="cannot both be in PSUM") as e:
        bad.trace(np.zeros((128, 8), np.float32))
    marker = next(n for n, t in enumerate(open(__file__), 1) if t.rstrip().endswith("# E-psum"))
    assert (e.value.file, e.value.line) == (__file__, marker)
