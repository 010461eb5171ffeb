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
    # (input TensorSpecs in order, attrs) -> kwargs for Kernel.trace
    arguments: Callable[[Sequence[Any], dict[str, Any]], dict[str, Any]]


def _load(module: str, name: str) -> Callable[[], Any]:
    def load() -> Any:
        import importlib

        return getattr(importlib.import_module(f"nkic.kernels.{module}"), name)

    return load


def _named(*names: str) -> Callable[[Sequence[Any], dict[str, Any]], dict[str, Any]]:
    return lambda specs, attrs: dict(zip(names, specs))


def _attention_args(specs: Sequence[Any], attrs: dict[str, Any]) -> dict[str, Any]:
    return {
        **dict(zip(("q", "k", "v"), specs)),
        "scale": float(attrs.get("scale", 1.0)),
        "causal_mask": bool(attrs.get("is_causal", True)),
        "sliding_window": int(attrs.get("sliding_window", 0)),
    }


REGISTRY: dict[str, LibraryKernel] = {
    "softmax": LibraryKernel(_load("softmax", "softmax"), _named("x")),
    "rmsnorm": LibraryKernel(
        _load("rmsnorm", "rmsnorm"), lambda s, a: {**_named("x", "w")(s, a), "eps": float(a.get("eps", 1e-6))}
    ),
    "matmul": LibraryKernel(_load("matmul", "matmul"), _named("lhsT", "rhs")),
    "tensor_add": LibraryKernel(_load("tensor_add", "tensor_add"), _named("a", "b")),
    "flash_attention": LibraryKernel(_load("flash_attention", "flash_attention"), _attention_args),
}

_PENGUIN: dict[str, Any] = {}
_BIR: dict[str, bir.FunctionOp] = {}


def _key(*parts: Any) -> str:
    return json.dumps(parts, sort_keys=True, default=list)


def resolve_penguin(name: str, inputs: Sequence[tuple[Shape, str]], attrs: dict[str, Any]) -> Any:
    """The traced ``penguin.kernel`` of library kernel ``name`` for these (shape, dtype) inputs (cached)."""
    from nkic.dialects import penguin
    from nkic.frontend import TensorSpec

    if name not in REGISTRY:
        raise PassFailedException(f"unknown library kernel '{name}' (known: {', '.join(sorted(REGISTRY))})")
    key = _key(name, [[list(s), d] for s, d in inputs], attrs)
    if key not in _PENGUIN:
        entry = REGISTRY[name]
        specs = [TensorSpec(tuple(shape), dtype) for shape, dtype in inputs]
        traced = entry.load().trace(**entry.arguments(specs, attrs))
        _PENGUIN[key] = next(op for op in traced.module.ops if isinstance(op, penguin.KernelOp))
    return _PENGUIN[key].clone()


def resolve(
    name: str, srcs_shape: Sequence[Shape], dsts_shape: Sequence[Shape], attrs: dict[str, Any]
) -> bir.FunctionOp:
    """The BIR function of library kernel ``name`` for an IT54 node (a fresh clone; the cache keeps its own)."""
    from nkic.passes.penguin_to_bir import kernel_functions

    dtype = str(attrs.get("dtype", "float32"))
    key = _key(name, [list(s) for s in srcs_shape], [list(s) for s in dsts_shape], attrs)
    if key not in _BIR:
        kernel = resolve_penguin(name, [(tuple(s), dtype) for s in srcs_shape], attrs)
        got = [tuple(t.dims) for t in kernel.function_type.outputs.data]
        if got != [tuple(s) for s in dsts_shape]:
            raise PassFailedException(f"library kernel '{name}' produces {got}, the node expects {list(dsts_shape)}")
        _BIR[key] = kernel_functions(kernel)[0]
    return _BIR[key].clone()


def macro_module(
    name: str, inputs: Sequence[tuple[str, Shape, str]], outputs: Sequence[tuple[str, Shape, str]], **attrs: Any
) -> Any:
    """A host BIR module whose only node is an IT54 ``bir.bir_kernel`` calling library kernel ``name``.

    This is how a pre-compiled library ("macro") kernel reaches the backend: already BIR, expanded by
    ``inline-bir-kernel`` — in contrast with a traced kernel riding IT56 -> IT55.
    """
    from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, i64

    params = _load_params(name)
    attrs.setdefault("dtype", inputs[0][2])
    fn = bir.FunctionOp("main", [n for n, *_ in inputs], [n for n, *_ in outputs])
    for (n, shape, dtype), kind in [*((i, "input") for i in inputs), *((o, "output") for o in outputs)]:
        fn.body.block.add_op(bir.MemLocOp(n, "shared_hbm", shape, dtype, kind))
    props: dict[str, Any] = {
        "kernel_name": StringAttr(name),
        "srcs_shape": ArrayAttr([DenseArrayBase.from_list(i64, list(s)) for _, s, _ in inputs]),
        "dsts_shape": ArrayAttr([DenseArrayBase.from_list(i64, list(s)) for _, s, _ in outputs]),
        "kernel_attrs": StringAttr(json.dumps({k: v for k, v in attrs.items() if k != "is_causal"}, sort_keys=True)),
        "func_args": bir.str_map(dict(zip(params, (n for n, *_ in inputs)))),
        "func_outs": bir.str_map({"out": outputs[0][0]} if len(outputs) == 1 else {}),
        "grid": IntegerAttr(1, i64),
        "lnc_size": IntegerAttr(1, i64),
    }
    if "is_causal" in attrs:
        props["is_causal"] = IntegerAttr(int(bool(attrs["is_causal"])), i64)
    fn.body.block.add_op(bir.BirKernelOp.create(properties=props))
    return ModuleOp([fn])


def _load_params(name: str) -> list[str]:
    import inspect

    return list(inspect.signature(REGISTRY[name].load().func).parameters)
