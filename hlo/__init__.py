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


def get_hlo_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """The front door's passes by name, loaded on first use (for ``nkic-opt``)."""

    def router(name: str) -> Callable[[], type[ModulePass]]:
        def load() -> type[ModulePass]:
            from nkic.hlo import router

            return {p.name: p for p in (router.RouteAttentionComposite, router.RouteAttention,
                                        router.DecomposeAttention)}[name]  # fmt: skip

        return load

    def chlo() -> type[ModulePass]:
        from nkic.hlo.chlo_legalize import ChloLegalize

        return ChloLegalize

    def decompose() -> type[ModulePass]:
        from nkic.hlo.decompose_hlo import DecomposeHlo

        return DecomposeHlo

    def lowering() -> type[ModulePass]:
        from nkic.hlo.lower import StablehloToPenguin

        return StablehloToPenguin

    return {
        **{n: router(n) for n in ("route-attention-composite", "route-attention", "decompose-attention")},
        "chlo-legalize": chlo,
        "decompose-hlo": decompose,
        "stablehlo-to-penguin": lowering,
    }
