"""nki-library's ``experimental/loss/cross_entropy.py``, unmodified, traced, compiled and simulated by nkic.

``cross_entropy_backward``: ``grad = scale * (exp(logits - lse) - onehot(target))`` (``scale`` 1/num_positions for
``reduction='mean'``, 1 for ``'sum'``), over vocabulary chunks padded with -inf, positions split contiguously over
the cores (the last core takes the remainder), written to a new output or over the logits (``inplace=True``: the
kernel returns its input ``logits_hbm``, under LNC2 too). Reference: ``cross_entropy_torch.py``'s
``cross_entropy_backward_torch_ref`` (torch autograd of ``F.cross_entropy``), whose closed form is the softmax minus
the one-hot target, translated to numpy in float64 with the forward pass's log-sum-exp as the saved state.

Numerics. Each step of the kernel is one operation rounded to its ``dtype`` tile (subtract the fp32 lse, exp,
times the scale, the scaled one-hot mask, the difference); the emulation repeats them and matches bit for bit.

``cross_entropy_forward`` gathers each position's target logit with a DMA whose access pattern takes a
``scalar_offset`` read from SBUF at run time (cross_entropy.py:276, ``logits_hbm.ap(...,
scalar_offset=batch_targets.ap(...), indirect_dim=1)``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki.language as nl  # noqa: E402

RNG = np.random.default_rng(13)
BF16 = ml_dtypes.bfloat16
F32 = np.float32
NL_DTYPES = {F32: nl.float32, BF16: nl.bfloat16}


def log_sum_exp(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    m = x.max(axis=1)
    return m + np.log(np.exp(x - m[:, None]).sum(axis=1))


def grad_ref(logits: np.ndarray, targets: np.ndarray, reduction: str) -> np.ndarray:
    """d/dlogits of F.cross_entropy(logits, targets, reduction): (softmax - onehot) [/ n]."""
    n = len(targets)
    g = np.exp(logits.astype(np.float64) - log_sum_exp(logits)[:, None])
    g[np.arange(n), targets] -= 1
    return g / n if reduction == "mean" else g


def grad_emulated(logits, targets, lse, reduction: str, dtype: type) -> np.ndarray:
    """The kernel's steps in ``dtype`` tiles: r(exp(r(x - lse))) * scale, minus r(mask * scale)."""
    n, v = logits.shape
    scale = 1.0 / n if reduction == "mean" else 1.0
    r = lambda a: np.asarray(a, F32).astype(dtype).astype(F32)  # noqa: E731
    x = r(logits.astype(F32))
    soft = r(np.exp(r(x - lse.astype(F32)[:, None]).astype(np.float64)).astype(F32))
    grad = r(soft * F32(scale))
    mask = (np.arange(v)[None, :] == targets[:, None]).astype(F32)
    return r(grad - r(mask * F32(scale)))


@pytest.mark.parametrize("n,vocab,per_batch,chunk,dtype,lnc", [
    (8, 2048, 8, 2048, F32, 1),  # one batch, one chunk
    (20, 5000, 8, 2048, F32, 2),  # 10 positions per core (batches of 8 + 2), chunks 2048 + 2048 + a padded 904
    (16, 4096, 16, 2048, BF16, 2),
])  # fmt: skip
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("inplace", [False, True])
def test_cross_entropy_backward(nkilib, n, vocab, per_batch, chunk, dtype, lnc, reduction, inplace) -> None:
    backward = nkilib("nkilib.experimental.loss.cross_entropy").cross_entropy_backward
    logits = (RNG.standard_normal((n, vocab)) * 2).astype(dtype)
    targets = RNG.integers(0, vocab, n).astype(np.int32)
    lse = log_sum_exp(logits).astype(dtype)
    given = logits.copy()
    kernel = backward if lnc == 1 else backward[lnc]
    got = kernel(given, targets, lse, reduction=reduction, positions_per_batch=per_batch, chunk_size=chunk,
                 dtype=NL_DTYPES[dtype], inplace=inplace)  # fmt: skip
    assert got.shape == (n, vocab) and got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.astype(F32), grad_emulated(logits, targets, lse, reduction, dtype))
    if inplace:
        np.testing.assert_array_equal(given, got)  # the gradients were written over the logits
    else:
        np.testing.assert_array_equal(given, logits)
    exact = grad_ref(logits, targets, reduction)
    scale = 1.0 / n if reduction == "mean" else 1.0
    tol = 1e-6 if dtype is F32 else 2.0**-6  # bf16: the rounded lse and logits shift exp by up to ~1 %
    np.testing.assert_allclose(got.astype(np.float64), exact, atol=tol * scale, rtol=tol)


def test_cross_entropy_forward(nkilib) -> None:
    forward = nkilib("nkilib.experimental.loss.cross_entropy").cross_entropy_forward
    n, vocab = 8, 2048
    logits = (RNG.standard_normal((n, vocab)) * 2).astype(F32)
    targets = RNG.integers(0, vocab, n).astype(np.int32)
    loss, lse = forward(logits, targets, positions_per_batch=8, chunk_size=2048, dtype=nl.float32)
    want_lse = log_sum_exp(logits)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5)
    np.testing.assert_allclose(loss, want_lse - logits[np.arange(n), targets], rtol=1e-5, atol=1e-5)
