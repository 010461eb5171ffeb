"""Kernels called with framework arrays: ``jax.Array`` (eagerly and inside ``jax.jit``) and ``torch.Tensor``,
and the framework programs nkic compiles (StableHLO text, a JAX function lowered by JAX).

A ``@nki.jit`` kernel called outside a trace runs through :func:`nkic.api.execute.run_kernel`; when an argument is a
framework array, that call lands in :func:`framework_call` here, which hands it to the framework's adapter. Neither
framework is a dependency: an adapter exists only for a framework the caller has already imported (looked up in
``sys.modules``), so plain numpy calls never import one.

* ``jax.py``: the JAX adapter (a host callback into the simulated NEFF; no derivative);
* ``torch.py``: the PyTorch adapter (a registered torch operator per kernel call, eager and under ``torch.compile``);
* ``common.py``: the argument plumbing both share;
* ``framework.py``: StableHLO / JAX *programs* (``compile_stablehlo``, ``from_jax``) through the ``hlo/`` front door.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

from nkic.frontend.tracer import Kernel
from nkic.interop.common import Call, is_torch
from nkic.interop.jax import call_jax, is_jax


def framework_call(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], run: Call) -> Any:
    """Run ``kernel`` on framework arrays through ``run`` (which takes numpy arrays); ``NotImplemented`` if no
    argument is a framework array."""
    values = (*args, *kwargs.values())
    if any(is_jax(v) for v in values):
        return call_jax(kernel, args, kwargs, run)
    if any(is_torch(v) for v in values):
        return _call_torch(kernel, args, kwargs, run)
    return NotImplemented


# -- PyTorch ---------------------------------------------------------------------------------------------------------
def _call_torch(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], run: Call) -> Any:
    # Deferred: interop.torch imports torch (an optional dependency). A module of its own: its first import (native
    # even under torch.compile, which does not trace imports) marks its entry points for dynamo before dynamo
    # reaches them.
    from nkic.interop.torch import call_torch

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
