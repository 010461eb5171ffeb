"""``@nki.jit`` kernels called with ``jax.Array``s, eagerly and inside ``jax.jit`` (``nkic.interop`` routes them here).

The kernel is first traced on the arguments' abstract shapes (``TensorSpec``): that gives the output shapes
and dtypes, and reports kernel errors at the user's line before JAX is involved. The run itself is a host callback
(``jax.pure_callback``) into the compiled NEFF on nkic's simulator, so the same code serves eager calls and calls
inside ``jax.jit`` (where the arrays are tracers). Differentiating through a kernel is an ``NkiError`` unless the
user gives the function that calls it a VJP (``jax.custom_vjp``): a simulator run has no derivative. JAX arrays are
immutable, so a kernel that writes one of its inputs is an error here rather than a silently lost write.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from nkic.frontend.errors import NkiError, caller_location
from nkic.frontend.tracer import Kernel
from nkic.interop.common import Call, abstract_trace, as_tuple, rebuild, split_arrays, unflatten
from nkic.target.vocab import numpy_dtype


def is_jax(value: Any) -> bool:
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.Array)  # tracers inside jax.jit are jax.Arrays too


def call_jax(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], run: Call) -> Any:
    import jax  # deferred: jax is an optional dependency, imported only for a call with jax arrays

    where = caller_location()  # the user's call of the kernel: the gradient error is reported there
    traced = abstract_trace(kernel, args, kwargs, is_jax)
    if traced.written_inputs:
        name = traced.written_inputs[0][0]
        raise NkiError(
            f"kernel '{kernel.name}' writes its input '{name}', but JAX arrays are immutable",
            "return the result from the kernel instead of writing an input",
        )
    shapes = tuple(jax.ShapeDtypeStruct(shape, numpy_dtype(dtype)) for _, shape, dtype in traced.outputs)

    def host(*arrays: Any) -> tuple[np.ndarray, ...]:
        call_args, call_kwargs = rebuild(args, kwargs, is_jax, [np.asarray(a) for a in arrays])
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
    return unflatten(traced, call(*split_arrays(args, kwargs, is_jax)))
