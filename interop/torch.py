"""``@nki.jit`` kernels called with ``torch.Tensor``s, eagerly and under ``torch.compile`` (``nkic.interop`` routes them here).

Tensors in, tensors out; a written input tensor is updated in place, as on a Neuron device. Every call goes through
one registered operator per (kernel, non-tensor arguments, written inputs, output count),
``torch.ops.nkic.k_<kernel>_<digest>``: its real implementation runs the kernel on nkic's simulator, its fake (shape)
implementation is the kernel's abstract trace on the tensors' shapes (the one the JAX path uses), and its autograd
formula is an ``NkiError`` (a simulated kernel has no derivative). Eager calls and compiled graphs run the same
operator.

``torch.compile(fullgraph=True)`` reaches the operator without inlining nkic: dynamo inlines the kernel's call up to
:func:`call_torch`, where ``_register`` (``assume_constant_result``: dynamo runs it natively at trace time) turns the
kernel and the call's non-tensor arguments into an int handle, and ``_dispatch`` (``allow_in_graph``) goes into the
graph as a call of that constant handle and the tensors. AOT autograd then runs ``_dispatch`` on fake tensors, which
records the operator in the aten graph. This module imports torch; ``nkic.interop`` imports it only for a call with
a tensor, so its first import (which dynamo runs natively too) marks both functions before dynamo reaches them.
"""

from __future__ import annotations

import hashlib
import marshal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import CompileOptions, Kernel, TensorSpec, TraceCache, TracedKernel
from nkic.interop.common import Call, as_tuple, is_torch, split_arrays, unflatten
from nkic.target.vocab import numpy_dtype

__all__ = ["call_torch"]


@dataclass(frozen=True)
class _Call:
    """A kernel with the non-tensor arguments of a call (``None`` in the slots ``mask`` marks as tensors)."""

    kernel: Kernel
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    mask: tuple[bool, ...]  # per positional-then-keyword argument: is it a tensor
    run: Call  # runs the kernel on numpy arrays

    def bind(self, tensors: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The call's arguments with ``tensors`` (in order) in the tensor slots."""
        it = iter(tensors)
        values = [next(it) if m else v for m, v in zip(self.mask, (*self.args, *self.kwargs.values()))]
        return tuple(values[: len(self.args)]), dict(zip(self.kwargs, values[len(self.args) :]))


_CALLS: list[_Call] = []  # a handle is an index here
_HANDLES: dict[Any, int] = {}
_OPS: dict[tuple[int, tuple[int, ...], int], Any] = {}  # (handle, written tensor slots, outputs) -> operator
_OP_NAMES: set[str] = set()
_TRACES: dict[Callable[..., Any], TraceCache] = {}
# Guards the registries above: a handle is the index its call gets in _CALLS, and an operator name must be unique, so
# two threads registering at once must not interleave (the handles read a length another thread is about to change).
_LOCK = threading.RLock()


def call_torch(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], run: Call) -> Any:
    """Run ``kernel`` on tensors (eagerly, or traced by torch.compile): the call's handle, then its operator."""
    mask = tuple(is_torch(v) for v in (*args, *kwargs.values()))
    static_args = tuple(None if is_torch(v) else v for v in args)
    static_kwargs = {k: None if is_torch(v) else v for k, v in kwargs.items()}
    # The kernel as its function, grid and options: ``kernel[2]`` is a new Kernel object per call (one dynamo made
    # while tracing, even), but its parts are the same objects every time.
    handle = _register(kernel.func, kernel.grid, kernel.options, static_args, static_kwargs, mask, run)
    return _dispatch(handle, *split_arrays(args, kwargs, is_torch))


@torch._dynamo.assume_constant_result
def _register(
    func: Callable[..., Any], grid: tuple[int, ...] | None, options: CompileOptions, args: tuple[Any, ...],
    kwargs: dict[str, Any], mask: tuple[bool, ...], run: Call,
) -> int:  # fmt: skip
    """The handle of a kernel and a call's non-tensor arguments (a constant in a compiled graph)."""
    key = (func, grid, repr(options), run, repr((args, kwargs, mask)))
    with _LOCK:
        if key not in _HANDLES:
            traces = _TRACES.setdefault(func, TraceCache())  # one trace cache per kernel function
            _HANDLES[key] = len(_CALLS)
            _CALLS.append(_Call(Kernel(func, grid, options, traces), args, kwargs, mask, run))
        return _HANDLES[key]


@torch._dynamo.allow_in_graph
def _dispatch(handle: int, *tensors: Any) -> Any:
    """Call the operator of ``handle`` on these tensors (real ones eagerly, fake ones while torch traces)."""
    call = _CALLS[handle]
    traced, names = _trace(call, tensors)
    written = {name for name, _ in traced.written_inputs}
    op = _operator(handle, tuple(i for i, n in enumerate(names) if n in written), len(traced.outputs))
    result = op(*tensors)
    outputs = () if not traced.outputs else (result,) if len(traced.outputs) == 1 else tuple(result)
    return unflatten(traced, outputs)


def _trace(call: _Call, tensors: tuple[Any, ...]) -> tuple[TracedKernel, list[str]]:
    """The kernel traced on the tensors' shapes and dtypes, and the kernel parameter each tensor is. A symbolic size
    is specialized (``int``): a kernel is traced per shape."""
    specs = [TensorSpec(tuple(int(d) for d in t.shape), str(t.dtype).removeprefix("torch.")) for t in tensors]
    args, kwargs = call.bind(specs)
    by_id = {id(v): name for name, v in call.kernel.array_arguments(*args, **kwargs).items()}
    return call.kernel.trace(*args, **kwargs), [by_id.get(id(s), "") for s in specs]


def _operator(handle: int, written: tuple[int, ...], n_out: int) -> Any:
    key = (handle, written, n_out)
    with _LOCK:  # one operator per key, each with a name of its own (_op_name)
        if key not in _OPS:
            _OPS[key] = _define(_CALLS[handle], written, n_out)
        return _OPS[key]


def _define(call: _Call, written: tuple[int, ...], n_out: int) -> Any:
    """``torch.ops.nkic.k_<kernel>_<digest>``: the call's tensors in (the written ones mutable), ``n_out`` out."""
    n_in = sum(call.mask)
    params = ", ".join(f"Tensor{f'(a{i}!)' if i in written else ''} t{i}" for i in range(n_in))
    returns = "()" if n_out == 0 else "Tensor" if n_out == 1 else "(" + ", ".join(["Tensor"] * n_out) + ")"

    def pack(outputs: list[Any]) -> Any:
        return None if n_out == 0 else outputs[0] if n_out == 1 else tuple(outputs)

    def real(*tensors: Any) -> Any:
        return pack(_run(call, tensors))

    def fake(*tensors: Any) -> Any:
        traced, _ = _trace(call, tensors)
        return pack([tensors[0].new_empty(shape, dtype=_torch_dtype(dt)) for _, shape, dt in traced.outputs])

    def backward(ctx: Any, *grads: Any) -> Any:
        raise NkiError(
            f"cannot differentiate through NKI kernel '{call.kernel.name}': a simulated kernel has no derivative",
            "wrap the call in a torch.autograd.Function with a backward",
        )

    op = torch.library.custom_op(
        f"nkic::{_op_name(call, written, n_out)}", real, mutates_args=tuple(f"t{i}" for i in written),
        schema=f"({params}) -> {returns}",
    )  # fmt: skip
    op.register_fake(fake)
    if not written:  # torch takes an autograd formula for a functional operator only
        op.register_autograd(backward)
    return op


def _op_name(call: _Call, written: tuple[int, ...], n_out: int) -> str:
    """``k_<kernel>_<digest>``: the digest covers the kernel's code, grid and options and the call's non-tensor
    arguments, so a name means the same operator in every process (inductor's caches key on it)."""
    func = call.kernel.func
    h = hashlib.sha256()
    for part in (func.__module__, func.__qualname__, call.kernel.grid, call.kernel.options,
                 (call.args, call.kwargs, call.mask), written, n_out):  # fmt: skip
        h.update(repr(part).encode())
    h.update(marshal.dumps(func.__code__))
    base = f"k_{''.join(c if c.isalnum() else '_' for c in call.kernel.name)}_{h.hexdigest()[:12]}"
    name, n = base, 1
    while name in _OP_NAMES:  # the same code and arguments in a second kernel object (other closures, say)
        name, n = f"{base}_{n}", n + 1
    _OP_NAMES.add(name)
    return name


def _run(call: _Call, tensors: tuple[Any, ...]) -> list[Any]:
    """The operator's real implementation: the kernel on the simulator; a written input tensor is updated in place."""
    arrays = [_to_numpy(t) for t in tensors]
    args, kwargs = call.bind(arrays)
    result = call.run(call.kernel, args, kwargs)
    for tensor, array in zip(tensors, arrays):
        if tensor.device.type != "cpu":  # a CPU tensor shares its memory with the array the kernel wrote
            tensor.copy_(_from_numpy(array).to(tensor.device))
    device = tensors[0].device if tensors else torch.device("cpu")
    return [_from_numpy(r).to(device) for r in as_tuple(result)]


def _to_numpy(t: Any) -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: reinterpret the bits as ml_dtypes' bfloat16
        return t.view(torch.int16).numpy().view(numpy_dtype("bfloat16"))
    return t.numpy()


def _from_numpy(a: np.ndarray) -> Any:
    a = np.ascontiguousarray(a)
    if a.dtype == numpy_dtype("bfloat16"):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _torch_dtype(name: str) -> Any:
    """The torch dtype of an nkic dtype name (numpy's spelling, which torch shares for the types both have)."""
    dtype = getattr(torch, numpy_dtype(name).name, None)
    if not isinstance(dtype, torch.dtype):
        raise NkiError(f"a kernel output of dtype {name} has no torch dtype")
    return dtype
