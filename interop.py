"""Kernels called with framework arrays: ``jax.Array`` (eagerly and inside ``jax.jit``) and ``torch.Tensor``.

A ``@nki.jit`` kernel called outside a trace runs through :func:`nkic.api.execute.run_kernel`; when an argument is a
framework array, that call lands here instead. Neither framework is a dependency: an adapter exists only for a
framework the caller has already imported (looked up in ``sys.modules``), so plain numpy calls never import one.

JAX. The kernel is first traced on the arguments' abstract shapes (``TensorSpec``): that gives the output shapes
and dtypes, and reports kernel errors at the user's line before JAX is involved. The run itself is a host callback
(``jax.pure_callback``) into the compiled NEFF on nkic's simulator, so the same code serves eager calls and calls
inside ``jax.jit`` (where the arrays are tracers). Differentiating through a kernel is an ``NkiError`` unless the
user gives the function that calls it a VJP (``jax.custom_vjp``): a simulator run has no derivative. JAX arrays are
immutable, so a kernel that writes one of its inputs is an error here rather than a silently lost write.

PyTorch: tensors in, tensors out, a written input tensor is updated in place, as on a Neuron device; eagerly and
under ``torch.compile(fullgraph=True)`` each call is a registered torch operator (``nkic.interop_torch``).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

import numpy as np

from nkic.frontend.errors import NkiError, caller_location
from nkic.frontend.tracer import Kernel
from nkic.interop_common import Call, abstract_trace, as_tuple, is_torch, rebuild, split_arrays, unflatten
from nkic.target.vocab import numpy_dtype

def framework_call(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], run: Call) -> Any:
    """Run ``kernel`` on framework arrays through ``run`` (which takes numpy arrays); ``NotImplemented`` if no
    argument is a framework array."""
    values = (*args, *kwargs.values())
    if any(_is_jax(v) for v in values):
        return _call_jax(kernel, args, kwargs, run)
    if any(is_torch(v) for v in values):
        return _call_torch(kernel, args, kwargs, run)
    return NotImplemented


# -- JAX -------------------------------------------------------------------------------------------------------------
def _is_jax(value: Any) -> bool:
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.Array)  # tracers inside jax.jit are jax.Arrays too


def _call_jax(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], run: Call) -> Any:
    import jax  # deferred: jax is an optional dependency, imported only for a call with jax arrays

    where = caller_location()  # the user's call of the kernel: the gradient error is reported there
    traced = abstract_trace(kernel, args, kwargs, _is_jax)
    if traced.written_inputs:
        name = traced.written_inputs[0][0]
        raise NkiError(
            f"kernel '{kernel.name}' writes its input '{name}', but JAX arrays are immutable",
            "return the result from the kernel instead of writing an input",
        )
    shapes = tuple(jax.ShapeDtypeStruct(shape, numpy_dtype(dtype)) for _, shape, dtype in traced.outputs)

    def host(*arrays: Any) -> tuple[np.ndarray, ...]:
        call_args, call_kwargs = rebuild(args, kwargs, _is_jax, [np.asarray(a) for a in arrays])
        results = as_tuple(run(kernel, call_args, call_kwargs))
        return tuple(np.asarray(r, dtype=s.dtype).reshape(s.shape) for r, s in zip(results, shapes))

    @jax.custom_vjp
    def call(*arrays: Any) -> tuple[Any, ...]:
        return jax.pure_callback(host, shapes, *arrays, vmap_method="sequential")

    def forward(*arrays: Any) -> tuple[tuple[Any, ...], None]:
        return call(*arrays), None

    def backward(_: None, __: Any) -> tuple[Any, ...]:
        raise NkiError(
            f"cannot differentiate through NKI kernel '{kernel.name}': a simulated kernel has no derivative",
            "give the function that calls the kernel a VJP with jax.custom_vjp",
            where=where,
        )

    call.defvjp(forward, backward)
    return unflatten(traced, call(*split_arrays(args, kwargs, _is_jax)))


# -- PyTorch ---------------------------------------------------------------------------------------------------------
def _call_torch(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], run: Call) -> Any:
    # Deferred: interop_torch imports torch (an optional dependency). A module of its own: its first import (native
    # even under torch.compile, which does not trace imports) marks its entry points for dynamo before dynamo
    # reaches them.
    from nkic.interop_torch import call_torch

    return call_torch(kernel, args, kwargs, run)


def install_torch_xla_standin() -> bool:
    """Where torch is installed and torch_xla is not, make ``import torch_xla`` give a CPU stand-in, so scripts
    written for a Neuron device (the NKI docs' PyTorch examples) run unchanged: ``torch_xla.device()`` and
    ``torch_xla.core.xla_model.xla_device()`` are the CPU, ``xm.mark_step()`` / ``torch_xla.sync()`` do nothing
    (kernels run eagerly on nkic's simulator). True when installed. torch itself is imported only when used."""
    if "torch_xla" in sys.modules or importlib.util.find_spec("torch") is None:
        return False
    if importlib.util.find_spec("torch_xla") is not None:
        return False  # the real one

    def device(*_: Any, **__: Any) -> Any:
        import torch  # deferred: torch is an optional dependency, imported only when a script asks for a device

        return torch.device("cpu")

    def nothing(*_: Any, **__: Any) -> None:
        return None

    root = types.ModuleType("torch_xla", "nkic's CPU stand-in for torch_xla (nkic.interop.install_torch_xla_standin)")
    core = types.ModuleType("torch_xla.core")
    xm = types.ModuleType("torch_xla.core.xla_model")
    root.device, root.sync = device, nothing  # type: ignore[attr-defined]
    xm.xla_device, xm.mark_step, xm.wait_device_ops = device, nothing, nothing  # type: ignore[attr-defined]
    root.core, core.xla_model = core, xm  # type: ignore[attr-defined]
    sys.modules.update({"torch_xla": root, "torch_xla.core": core, "torch_xla.core.xla_model": xm})
    return True
