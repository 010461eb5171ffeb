"""``@nki.jit`` kernels called with ``torch.Tensor``s (``nkic/interop/torch.py``). torch is optional and not installed in CI:
without it these tests skip."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nkic  # noqa: E402
from nkic import api as nki  # noqa: E402
from nkic.frontend import language as nl  # noqa: E402
from nkic.frontend.errors import NkiError  # noqa: E402
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


@nki.jit
def sum_and_scaled(a, b, scale):
    s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    d = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    nl.store(s, value=nl.add(x, y))
    nl.store(d, value=nl.multiply(x, scale))
    return s, d


def _compile(f):
    """``torch.compile(f, fullgraph=True)`` (an error on any graph break) with AOT autograd's eager backend (fast),
    recording the aten graphs AOT autograd made."""
    from torch._dynamo.testing import AotEagerAndRecordGraphs

    torch._dynamo.reset()
    backend = AotEagerAndRecordGraphs()
    return torch.compile(f, backend=backend, fullgraph=True), backend


def _ops(backend) -> list[str]:
    """The aten graphs' calls; a mutating operator appears wrapped (``auto_functionalized``): its operator too."""
    calls = [n for g in backend.fw_graphs for n in g.graph.nodes if n.op == "call_function"]
    return [str(n.target) for n in calls] + [str(n.args[0]) for n in calls if "functionalized" in str(n.target)]


def test_eager_calls_go_through_one_registered_operator_per_static_arguments() -> None:
    a, b = _inputs()
    s, d = sum_and_scaled(a, b, 3.0)
    np.testing.assert_allclose(d.numpy(), a.numpy() * 3.0)
    s2, d2 = sum_and_scaled(a, b, scale=4.0)  # another static argument: another operator
    np.testing.assert_allclose(d2.numpy(), a.numpy() * 4.0)
    np.testing.assert_allclose(s2.numpy(), s.numpy())
    names = [n for n in dir(torch.ops.nkic) if n.startswith("k_sum_and_scaled_")]
    assert len(names) == 2


def test_torch_compile_fullgraph_puts_the_kernel_operator_in_the_graph() -> None:
    def f(x, y):
        s, d = sum_and_scaled(x * 2, y, 0.5)
        return s * d + 1

    a, b = _inputs()
    compiled, backend = _compile(f)
    x = a.numpy() * 2
    expected = (x + 0.5) * (x * 0.5) + 1
    np.testing.assert_allclose(compiled(a, b).numpy(), expected)
    np.testing.assert_allclose(compiled(a, b).numpy(), f(a, b).numpy())  # the same as eager
    assert any(t.startswith("nkic.k_sum_and_scaled_") for t in _ops(backend)), _ops(backend)
    assert "aten.mul.Tensor" in _ops(backend)  # the torch ops around the kernel are in the same graph
    # another shape: traced again (kernels are shape-specialized), still one graph per compile
    np.testing.assert_allclose(compiled(a[:2], b[:2]).numpy(), expected[:2])


def test_torch_compile_of_a_kernel_writing_its_input() -> None:
    def g(x):
        y = x + 1
        double_in_place(y)
        return y * 3

    a, _ = _inputs()
    compiled, backend = _compile(g)
    np.testing.assert_allclose(compiled(a).numpy(), (a.numpy() + 1) * 6)
    assert any(t.startswith("nkic.k_double_in_place_") for t in _ops(backend)), _ops(backend)


def test_torch_compile_bf16_matches_eager() -> None:
    a, b = _inputs(torch.bfloat16)
    compiled, _ = _compile(lambda x, y: add(x, y) * 2)
    out = compiled(a, b)
    assert out.dtype == torch.bfloat16
    np.testing.assert_array_equal(out.float().numpy(), (add(a, b) * 2).float().numpy())


@nki.jit
def add_rows(a, b):
    """Under a grid of 2, program i adds row block i."""
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    rows = a.shape[0] // 2
    nl.store(c[i * rows:(i + 1) * rows], value=nl.add(nl.load(a[i * rows:(i + 1) * rows]),
                                                       nl.load(b[i * rows:(i + 1) * rows])))
    return c


def test_a_grid_launch_is_one_operator_eagerly_and_compiled() -> None:
    from nkic.interop import torch as interop_torch

    a, b = _inputs()
    before = len(interop_torch._OPS)
    np.testing.assert_allclose(add_rows[2](a, b).numpy(), a.numpy() + 0.5)
    np.testing.assert_allclose(add_rows[2](a, b).numpy(), a.numpy() + 0.5)  # kernel[2] is a new object per call
    assert len(interop_torch._OPS) == before + 1
    compiled, backend = _compile(lambda x, y: add_rows[2](x, y) - 1)
    np.testing.assert_allclose(compiled(a, b).numpy(), a.numpy() - 0.5)
    assert len(interop_torch._OPS) == before + 1  # the compiled graph calls the same operator


def test_backward_through_a_kernel_is_an_nki_error() -> None:
    a, b = _inputs()
    a.requires_grad_(True)
    out = add(a, b)
    with pytest.raises(NkiError, match="cannot differentiate through NKI kernel 'add'"):
        out.sum().backward()


@pytest.mark.parametrize(
    "example", ["getting_started_torch.py", "average_pool2d/average_pool2d_torch.py", "transpose2d/transpose2d_torch.py"]
)  # matrix_multiplication_torch.py runs too, but a 4096x1024x2048 bf16 matmul takes minutes in the simulator
def test_docs_torch_examples_run_verbatim(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Through ``python -m nkic``; without torch_xla, its CPU stand-in gives the tensors' device."""
    path = os.path.join(EXAMPLES, example)
    if not os.path.exists(path):
        pytest.skip("the NKI docs' examples are not present")
    nkic.install_nki_alias()
    assert script.main([path]) == 0
    out = capsys.readouterr().out
    if example == "getting_started_torch.py":
        assert "tensor([[2., 2., 2.]" in out
    else:
        assert "match" in out.lower() and "differ" not in out, out
