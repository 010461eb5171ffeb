"""The argument plumbing the framework adapters share (``nkic.interop.jax`` for JAX, ``nkic.interop.torch`` for
PyTorch): which arguments are framework arrays, the abstract trace that gives the outputs' shapes, and the results
in the kernel's return form. Imports no framework."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from nkic.frontend.tracer import Kernel, TensorSpec, TracedKernel

# Runs a kernel on numpy arrays: (kernel, args, kwargs) -> its result.
Call = Callable[[Kernel, tuple[Any, ...], dict[str, Any]], Any]


def split_arrays(args: tuple[Any, ...], kwargs: dict[str, Any], is_array: Callable[[Any], bool]) -> list[Any]:
    """The framework arrays among the arguments, in call order (positional, then keyword)."""
    return [v for v in (*args, *kwargs.values()) if is_array(v)]


def rebuild(
    args: tuple[Any, ...], kwargs: dict[str, Any], is_array: Callable[[Any], bool], arrays: list[Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments with each framework array replaced, in order, by the next of ``arrays``."""
    it = iter(arrays)
    new_args = tuple(next(it) if is_array(v) else v for v in args)
    new_kwargs = {k: next(it) if is_array(v) else v for k, v in kwargs.items()}
    return new_args, new_kwargs


def abstract_trace(
    kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], is_array: Callable[[Any], bool]
) -> TracedKernel:
    """The trace of ``kernel`` on the framework arrays' shapes and dtypes (``TensorSpec`` placeholders)."""
    specs = [TensorSpec(tuple(v.shape), _dtype_name(v.dtype)) for v in split_arrays(args, kwargs, is_array)]
    spec_args, spec_kwargs = rebuild(args, kwargs, is_array, specs)
    return kernel.trace(*spec_args, **spec_kwargs)


def _dtype_name(dtype: Any) -> str:
    return np.dtype(dtype).name if not isinstance(dtype, str) else dtype


def as_tuple(value: Any) -> tuple[Any, ...]:
    """A kernel's result as a tuple of outputs."""
    if value is None:
        return ()
    return value if isinstance(value, tuple) else (value,)


def unflatten(traced: TracedKernel, outputs: tuple[Any, ...] | list[Any]) -> Any:
    """The outputs in the kernel's return form (a tuple, one value, or None)."""
    if traced.returns_tuple:
        return tuple(outputs)
    return outputs[0] if outputs else None


def is_torch(value: Any) -> bool:
    """Whether ``value`` is a torch tensor (torch is looked up, never imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)
