"""IT54 macros: a library kernel called from a host BIR module as a ``bir.bir_kernel`` node.

This is how a pre-compiled library ("macro") kernel reaches the backend: already BIR, described only by its name,
shapes and attributes, and expanded by ``inline-bir-kernel`` — in contrast with a traced kernel, which rides an
IT56 carrier that ``translate-nki-ast-to-bir`` turns into an IT55 call-site.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, i64

from nkic.dialects import bir
from nkic.library.registry import RESOLVER, LibraryResolver

Shape = tuple[int, ...]
# (name, shape, dtype) of a host tensor
TensorDecl = tuple[str, Shape, str]


def macro_module(
    name: str,
    inputs: Sequence[TensorDecl],
    outputs: Sequence[TensorDecl],
    *,
    resolver: LibraryResolver = RESOLVER,
    **attrs: Any,
) -> ModuleOp:
    """A host ``bir.function @main`` whose only node is an IT54 calling library kernel ``name``.

    ``inputs`` bind the kernel's parameters in order; ``attrs`` become the node's ``kernel_attrs`` (``dtype``
    defaults to the first input's), except ``is_causal``, which IT54 carries as its own property.
    """

    params = resolver.parameters(name)
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
        # Library kernels name their single output "out"; a multi-output macro has no fixed names to map.
        "func_outs": bir.str_map({"out": outputs[0][0]} if len(outputs) == 1 else {}),
        "grid": IntegerAttr(1, i64),
        "lnc_size": IntegerAttr(1, i64),
    }
    if "is_causal" in attrs:
        props["is_causal"] = IntegerAttr(int(bool(attrs["is_causal"])), i64)
    fn.body.block.add_op(bir.BirKernelOp.create(properties=props))
    return ModuleOp([fn])
