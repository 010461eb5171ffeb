"""``inline-bir-kernel`` (InlineBIRKernel): expand IT54 library-kernel nodes.

An IT54 (``bir.bir_kernel``) names a pre-compiled library kernel and describes it by shapes and attributes; its
body is already BIR, so expansion is a lookup through the kernel resolver the layer above provided
(``passes/resolver.py``; nkic's is ``nkic.library``, cached) followed by the same splice as ``inline-nki-kernel`` —
no JSON round trip, no AST walk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.passes.kernel_inlining import inline_function
from nkic.passes.resolver import resolver_for


def _shapes(attr: object) -> list[tuple[int, ...]]:
    return [tuple(int(d) for d in a.get_values()) for a in attr.data]  # type: ignore[attr-defined]


@dataclass(frozen=True)
class InlineBirKernelPass(ModulePass):
    name = "inline-bir-kernel"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        nodes = [n for n in op.walk() if isinstance(n, bir.BirKernelOp)]
        if not nodes:
            return
        for node in nodes:
            name = node.kernel_name.data
            try:
                attrs = json.loads(node.kernel_attrs.data or "{}")
            except json.JSONDecodeError as e:
                raise PassFailedException(f"bir.bir_kernel '{name}': bad kernel_attrs: {e}") from e
            if node.is_causal is not None:
                attrs["is_causal"] = bool(node.is_causal.value.data)
            resolver = resolver_for(name, self.name)
            fn = resolver.resolve_bir(name, _shapes(node.srcs_shape), _shapes(node.dsts_shape), attrs)
            inline_function(node, fn, node.arg_map, node.out_map)
