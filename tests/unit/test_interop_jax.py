"""``@nki.jit`` kernels called with ``jax.Array``s (``nkic/interop/jax.py``): eagerly, inside ``jax.jit``, and the docs'
JAX examples run verbatim through ``python -m nkic``."""

from __future__ import annotations

import os

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import nkic  # noqa: E402
from nkic import api as nki  # noqa: E402
from nkic.frontend import language as nl  # noqa: E402
from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.tools import script  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "corpus", "aws-neuron-sdk", "nki",
                        "examples")


@nki.jit
def add_scaled(a, b, scale):
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(c, value=nl.multiply(nl.add(nl.load(a), nl.load(b)), scale))
    return c


@nki.jit
def sum_and_diff(a, b):
    s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    d = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    nl.store(s, value=nl.add(x, y))
    nl.store(d, value=nl.subtract(x, y))
    return s, d


@nki.jit
def scale_in_place(a):
    nl.store(a, value=nl.multiply(nl.load(a), 2.0))


def _inputs(dtype=jnp.float32):
    a = jnp.arange(12, dtype=jnp.float32).reshape(4, 3).astype(dtype)
    b = jnp.full((4, 3), 0.5, dtype=jnp.float32).astype(dtype)
    return a, b


def test_eager_call_returns_a_jax_array() -> None:
    a, b = _inputs()
    c = add_scaled(a, b, scale=3.0)
    assert isinstance(c, jax.Array) and c.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(c), (np.asarray(a) + 0.5) * 3.0)


def test_bf16_arrays_keep_their_dtype() -> None:
    a, b = _inputs(jnp.bfloat16)
    c = add_scaled(a, b, scale=2.0)
    assert c.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(c, np.float32), (np.asarray(a, np.float32) + 0.5) * 2.0)


def test_inside_jax_jit_with_other_jax_ops_and_tuple_results() -> None:
    @jax.jit
    def f(x, y):
        s, d = sum_and_diff(x * 2, y)
        return s * d + 1

    a, b = _inputs()
    out = f(a, b)
    x, y = np.asarray(a) * 2, np.asarray(b)
    np.testing.assert_allclose(np.asarray(out), (x + y) * (x - y) + 1)
    # a second shape is a second trace; the same shape again reuses the compiled kernel
    np.testing.assert_allclose(np.asarray(f(a[:2], b[:2])), ((x + y) * (x - y) + 1)[:2])


def test_grad_through_a_kernel_is_an_error_at_the_call() -> None:
    a, b = _inputs()
    line = None

    def loss(x):
        nonlocal line
        import inspect

        line = inspect.currentframe().f_lineno + 1
        return add_scaled(x, b, scale=1.0).sum()

    with pytest.raises(NkiError, match="cannot differentiate through NKI kernel 'add_scaled'") as info:
        jax.grad(loss)(a)
    assert info.value.file == __file__ and info.value.line == line


def test_a_user_vjp_makes_the_kernel_differentiable() -> None:
    @jax.custom_vjp
    def kernel_add(x, y):
        return add_scaled(x, y, scale=1.0)

    kernel_add.defvjp(lambda x, y: (kernel_add(x, y), None), lambda _, g: (g, g))
    a, b = _inputs()
    grad = jax.grad(lambda x: kernel_add(x, b).sum())(a)
    np.testing.assert_array_equal(np.asarray(grad), np.ones((4, 3), np.float32))


def test_a_kernel_writing_its_input_is_an_error_for_immutable_jax_arrays() -> None:
    a, _ = _inputs()
    with pytest.raises(NkiError, match="writes its input 'a', but JAX arrays are immutable"):
        scale_in_place(a)


@pytest.mark.parametrize(
    "example", ["getting_started_jax.py", "average_pool2d/average_pool2d_jax.py", "transpose2d/transpose2d_jax.py"]
)
def test_docs_jax_examples_run_verbatim(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = os.path.join(EXAMPLES, example)
    if not os.path.exists(path):
        pytest.skip("the NKI docs' examples are not present")
    nkic.install_nki_alias()
    assert script.main([path]) == 0
    out = capsys.readouterr().out
    if example == "getting_started_jax.py":
        assert "[[2. 2. 2.]" in out
    else:
        assert "NKI and JAX match" in out and "differ" not in out
