"""The internal-kernel registry: library kernels resolved by name (the spec's ``_resolve_kernel_config``).

A library kernel is an nkic kernel traced on demand for concrete shapes and lowered to a BIR function, cached
by (name, shapes, attributes). ``inline-bir-kernel`` expands IT54 nodes from here, and
``penguin.kernel_node``s of kind ``internal`` name these kernels.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir

Shape = tuple[int, ...]


@dataclass(frozen=True)
class LibraryKernel:
    load: Callable[[], Any]  # -> the @nki.jit Kernel (imported lazily)
    # (source shapes, attrs) -> kwargs for Kernel.trace
    arguments: Callable[[Sequence[Shape], dict[str, Any]], dict[str, Any]]


def _spec(shape: Shape, attrs: dict[str, Any]) -> Any:
    from nkic.frontend import TensorSpec

    return TensorSpec(tuple(shape), attrs.get("dtype", "float32"))


def _load(module: str, name: str) -> Callable[[], Any]:
    def load() -> Any:
        import importlib

        return getattr(importlib.import_module(f"nkic.kernels.{module}"), name)

    return load


REGISTRY: dict[str, LibraryKernel] = {
    "softmax": LibraryKernel(_load("softmax", "softmax"), lambda s, a: {"x": _spec(s[0], a)}),
    "rmsnorm": LibraryKernel(
        _load("rmsnorm", "rmsnorm"),
        lambda s, a: {"x": _spec(s[0], a), "w": _spec(s[1], a), "eps": float(a.get("eps", 1e-6))},
    ),
    "matmul": LibraryKernel(_load("matmul", "matmul"), lambda s, a: {"lhsT": _spec(s[0], a), "rhs": _spec(s[1], a)}),
    "tensor_add": LibraryKernel(
        _load("tensor_add", "tensor_add"), lambda s, a: {"a": _spec(s[0], a), "b": _spec(s[1], a)}
    ),
}

_CACHE: dict[str, bir.FunctionOp] = {}


def resolve(
    name: str, srcs_shape: Sequence[Shape], dsts_shape: Sequence[Shape], attrs: dict[str, Any]
) -> bir.FunctionOp:
    """The BIR function of library kernel ``name`` for these shapes (a fresh clone; the cache keeps its own)."""
    from nkic.passes.penguin_to_bir import kernel_functions
    from nkic.dialects import penguin

    if name not in REGISTRY:
        raise PassFailedException(f"unknown library kernel '{name}' (known: {', '.join(sorted(REGISTRY))})")
    key = json.dumps([name, [list(s) for s in srcs_shape], [list(s) for s in dsts_shape], attrs], sort_keys=True)
    if key not in _CACHE:
        entry = REGISTRY[name]
        traced = entry.load().trace(**entry.arguments(srcs_shape, attrs))
        got = [tuple(o[1]) for o in traced.outputs]
        if got != [tuple(s) for s in dsts_shape]:
            raise PassFailedException(f"library kernel '{name}' produces {got}, the node expects {list(dsts_shape)}")
        kernel = next(op for op in traced.module.ops if isinstance(op, penguin.KernelOp))
        _CACHE[key] = kernel_functions(kernel)[0]
    return _CACHE[key].clone()
