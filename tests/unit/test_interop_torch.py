"""``@nki.jit`` kernels called with ``torch.Tensor``s (``nkic/interop.py``). torch is optional and not installed in CI:
without it these tests skip."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nkic  # noqa: E402
from nkic import api as nki  # noqa: E402
from nkic.frontend import language as nl  # noqa: E402
from nkic.tools import script  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "corpus", "aws-neuron-sdk", "nki",
                        "examples")


@nki.jit
def add(a, b):
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(c, value=nl.add(nl.load(a), nl.load(b)))
    return c


@nki.jit
def double_in_place(a):
    nl.store(a, value=nl.multiply(nl.load(a), 2.0))


def _inputs(dtype=torch.float32):
    return torch.arange(12, dtype=torch.float32).reshape(4, 3).to(dtype), torch.full((4, 3), 0.5).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tensors_in_tensors_out(dtype) -> None:
    a, b = _inputs(dtype)
    c = add(a, b)
    assert isinstance(c, torch.Tensor) and c.dtype == dtype
    np.testing.assert_allclose(c.float().numpy(), a.float().numpy() + 0.5)


def test_a_written_input_tensor_is_updated_in_place() -> None:
    a, _ = _inputs()
    expected = a.numpy() * 2
    double_in_place(a)
    np.testing.assert_allclose(a.numpy(), expected)


def test_under_torch_compile_the_kernel_runs_outside_the_graph() -> None:
    def f(x, y):
        return add(x * 2, y) + 1

    a, b = _inputs()
    np.testing.assert_allclose(torch.compile(f)(a, b).numpy(), a.numpy() * 2 + 0.5 + 1)


@pytest.mark.parametrize(
    "example", ["getting_started_torch.py", "average_pool2d/average_pool2d_torch.py", "transpose2d/transpose2d_torch.py"]
)
def test_docs_torch_examples_run_verbatim(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch_xla", reason="the docs' torch examples put their tensors on torch_xla.device()")
    path = os.path.join(EXAMPLES, example)
    if not os.path.exists(path):
        pytest.skip("the NKI docs' examples are not present")
    nkic.install_nki_alias()
    assert script.main([path]) == 0
    out = capsys.readouterr().out
    assert "differ" not in out
