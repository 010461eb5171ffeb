"""A kernel call's arguments are bound and specialised once (``Kernel.bind``): the trace, the simulated inputs and the
NEFF cache all read the one ``BoundCall``."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

from nkic import api as nki
from nkic.frontend import TensorSpec

nl, nisa = nki.language, nki.isa


def double(a, scale=2.0):  # noqa: ANN001, ANN201
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.activation(dst=y, op=nl.copy, data=x, scale=scale)
    nisa.dma_copy(dst=out, src=y)
    return out


class _CountingSignature:
    """The kernel's signature, counting how often a call is bound to it."""

    def __init__(self, sig: inspect.Signature) -> None:
        self.sig, self.binds = sig, 0

    def bind(self, *args: object, **kwargs: object) -> inspect.BoundArguments:
        self.binds += 1
        return self.sig.bind(*args, **kwargs)


@pytest.mark.parametrize("cached", [False, True])
def test_a_simulated_call_binds_its_arguments_once(cached: bool, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    if cached:  # the NEFF cache's key is computed from the same bound call
        monkeypatch.setenv("NKIC_CACHE_DIR", str(tmp_path))
    kernel = nki.jit(double)
    counting = _CountingSignature(kernel.signature)
    kernel.signature = counting  # type: ignore[assignment]
    a = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    out = nki.simulate(kernel)(a, scale=3.0)
    np.testing.assert_allclose(out, 3.0 * a)
    assert counting.binds == 1


def test_the_bound_call_holds_the_arrays_and_the_key() -> None:
    kernel = nki.jit(double)
    spec = TensorSpec((128, 8), "float32")
    call = kernel.bind(spec, scale=0.5)
    assert call.array_arguments() == {"a": spec} == kernel.array_arguments(spec, scale=0.5)
    assert call.key == kernel.specialization(spec, scale=0.5) != kernel.bind(spec).key  # the constant keys it
    assert call.trace() is kernel.trace(spec, scale=0.5)  # one trace cache entry
