"""``inline-nki-kernel`` (InlineNKIKernel): splice each IT55 call-site's function into its caller.

Operands are rebound through the call-site's argument maps, the kernel's internal memlocs are renamed into the
caller, instruction ids are shifted to stay unique; the IT55 and (once unused) the kernel function are removed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.passes.kernel_inlining import inline_function


@dataclass(frozen=True)
class InlineNkiKernelPass(ModulePass):
    name = "inline-nki-kernel"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        functions = {f.sym_name.data: f for f in op.ops if isinstance(f, bir.FunctionOp)}
        inlined: set[str] = set()
        calls = _kernel_calls(op)
        count = Counter(c.func.root_reference.data for c in calls)
        for call in calls:
            callee = functions.get(call.func.root_reference.data)
            if callee is None:
                raise PassFailedException(f"bir.nki_kernel calls unknown function @{call.func.root_reference.data}")
            # a function called once is removed below: its ops can move instead of being cloned
            inline_function(call, callee, call.arg_map, call.out_map, move=count[callee.sym_name.data] == 1)
            inlined.add(callee.sym_name.data)
        still_called = {c.func.root_reference.data for c in _kernel_calls(op)}
        for name in inlined - still_called:
            functions[name].detach()
            functions[name].erase()


def _kernel_calls(module: ModuleOp) -> list[bir.NkiKernelOp]:
    """Every IT55 in ``module``, in ``walk`` order (pre-order), descending only into ops with regions: the kernel
    functions' instructions (all but a few ops of the module) are looked at once, without walk's nested
    generators."""
    out: list[bir.NkiKernelOp] = []
    stack: list[Operation] = list(reversed(list(module.ops)))
    while stack:
        o = stack.pop()
        if isinstance(o, bir.NkiKernelOp):
            out.append(o)
        if o.regions:
            stack.extend(reversed([c for r in o.regions for b in r.blocks for c in b.ops]))
    return out
