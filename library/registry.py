"""The library-kernel registry and its resolver (``_resolve_kernel_config`` in the Neuron compiler's terms).

A library kernel is one of the ``@nki.jit`` kernels of ``nkic.kernels``, traced on demand for the concrete shapes,
dtypes and attributes of the node that names it, and lowered to a BIR function for IT54 nodes. Both results are
cached per (name, shapes, attributes); callers always get a fresh clone they may splice into their module.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir, penguin
from nkic.passes.penguin_to_bir import kernel_functions

if TYPE_CHECKING:
    from nkic.frontend import Kernel, TensorSpec

Shape = tuple[int, ...]
# (input TensorSpecs in order, node attributes) -> keyword arguments of Kernel.trace
ArgumentMap = Callable[[Sequence["TensorSpec"], Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class LibraryKernel:
    """Where a library kernel lives and how a node's inputs and attributes become its arguments."""

    module: str  # a module of nkic.kernels, imported on first use so that the registry itself stays cheap
    function: str
    arguments: ArgumentMap

    def load(self) -> Kernel:
        return getattr(importlib.import_module(f"nkic.kernels.{self.module}"), self.function)


def _named(*names: str) -> ArgumentMap:
    return lambda specs, attrs: dict(zip(names, specs))


def _rmsnorm_args(specs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {**dict(zip(("x", "w"), specs)), "eps": float(attrs.get("eps", 1e-6))}


def _attention_args(specs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **dict(zip(("q", "k", "v"), specs)),
        "scale": float(attrs.get("scale", 1.0)),
        "causal_mask": bool(attrs.get("is_causal", True)),
        "sliding_window": int(attrs.get("sliding_window", 0)),
    }


REGISTRY: dict[str, LibraryKernel] = {
    "softmax": LibraryKernel("softmax", "softmax", _named("x")),
    "rmsnorm": LibraryKernel("rmsnorm", "rmsnorm", _rmsnorm_args),
    "matmul": LibraryKernel("matmul", "matmul", _named("lhsT", "rhs")),
    "tensor_add": LibraryKernel("tensor_add", "tensor_add", _named("a", "b")),
    "flash_attention": LibraryKernel("flash_attention", "flash_attention", _attention_args),
}


def _key(*parts: Any) -> str:
    return json.dumps(parts, sort_keys=True, default=list)


@dataclass
class LibraryResolver:
    """A ``nkic.passes.resolver.KernelResolver`` over ``registry`` that traces with nkic's frontend."""

    registry: Mapping[str, LibraryKernel] = field(default_factory=lambda: REGISTRY)
    _penguin: dict[str, penguin.KernelOp] = field(default_factory=dict, repr=False)
    _bir: dict[str, bir.FunctionOp] = field(default_factory=dict, repr=False)

    def entry(self, name: str) -> LibraryKernel:
        if name not in self.registry:
            known = ", ".join(sorted(self.registry))
            raise PassFailedException(f"unknown library kernel '{name}' (known: {known})")
        return self.registry[name]

    def resolve_penguin(
        self, name: str, inputs: Sequence[tuple[Shape, str]], attrs: Mapping[str, Any]
    ) -> penguin.KernelOp:
        # Deferred: the frontend (the tracer, a third of a second to import) is needed only when a library kernel is
        # traced, and nkic-opt, started once per lit RUN line, loads this module for every pipeline.
        from nkic.frontend import TensorSpec

        entry = self.entry(name)
        key = _key(name, [[list(shape), dtype] for shape, dtype in inputs], dict(attrs))
        if key not in self._penguin:
            specs = [TensorSpec(tuple(shape), dtype) for shape, dtype in inputs]
            traced = entry.load().trace(**entry.arguments(specs, attrs))
            self._penguin[key] = next(op for op in traced.module.ops if isinstance(op, penguin.KernelOp))
        return self._penguin[key].clone()

    def resolve_bir(
        self, name: str, srcs_shape: Sequence[Shape], dsts_shape: Sequence[Shape], attrs: Mapping[str, Any]
    ) -> bir.FunctionOp:
        self.entry(name)
        # An IT54 node carries shapes only; its one element type travels in the attributes.
        dtype = str(attrs.get("dtype", "float32"))
        key = _key(name, [list(s) for s in srcs_shape], [list(s) for s in dsts_shape], dict(attrs))
        if key not in self._bir:
            kernel = self.resolve_penguin(name, [(tuple(s), dtype) for s in srcs_shape], attrs)
            got = [tuple(t.dims) for t in kernel.function_type.outputs.data]
            if got != [tuple(s) for s in dsts_shape]:
                raise PassFailedException(
                    f"library kernel '{name}' produces {got}, the node expects {[tuple(s) for s in dsts_shape]}"
                )
            self._bir[key] = kernel_functions(kernel)[0]
        return self._bir[key].clone()

    def parameters(self, name: str) -> list[str]:
        """The kernel's parameter names in order (the keys of an IT54 node's ``func_args``)."""
        return list(inspect.signature(self.entry(name).load().func).parameters)


# One shared instance, so that every compilation in the process reuses the traces.
RESOLVER = LibraryResolver()
