"""The framework front door: StableHLO programs (from JAX, or a ``.mlir`` file) lowered to penguin.

``nkic.dialects.stablehlo`` reads the program; ``router`` routes attention and NKI custom calls to kernel nodes, one
pass per rule; ``lower`` cuts the function into kernel nodes and ``tiles`` lowers the op-by-op segments through the
NKI frontend. This layer sits beside ``frontend/``: it may import ``dialects/`` and ``frontend/``, never the compiler
(``passes/``), the runtime, the library or the tools; nothing below it imports it. Running a program (compile and
simulate) is ``nkic.interop.framework``'s job.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass

from nkic.support.lazy import lazy_attr

# pass name -> (module under nkic.hlo, its class), loaded on first use as nkic.passes' table is
_PASSES: dict[str, tuple[str, str]] = {
    "route-attention-composite": ("router", "RouteAttentionComposite"),
    "route-attention": ("router", "RouteAttention"),
    "decompose-attention": ("router", "DecomposeAttention"),
    "route-matmul": ("route_matmul", "RouteMatmul"),
    "chlo-legalize": ("chlo_legalize", "ChloLegalize"),
    "decompose-hlo": ("decompose_hlo", "DecomposeHlo"),
    "stablehlo-to-penguin": ("lower", "StablehloToPenguin"),
}


def get_hlo_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """The front door's passes by name, loaded on first use (for ``nkic-opt``)."""
    return {name: lazy_attr(f"nkic.hlo.{m}", c) for name, (m, c) in _PASSES.items()}
