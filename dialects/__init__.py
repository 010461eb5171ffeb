"""nkic's dialects by name, as factories: a ``Context`` loads a dialect only when it first meets one of its ops, so a
tool that reads penguin never imports the ISA dialects (importing a dialect module defines all of its op classes)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Dialect

from nkic.target.machine import ENGINE_NAMES


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    def penguin() -> Dialect:
        from nkic.dialects.penguin import Penguin

        return Penguin

    def bir() -> Dialect:
        from nkic.dialects.bir import Bir

        return Bir

    def stablehlo() -> Dialect:
        from nkic.dialects.stablehlo import StableHLO

        return StableHLO

    def chlo() -> Dialect:
        from nkic.dialects.stablehlo import Chlo

        return Chlo

    def nkic_attrs() -> Dialect:
        from nkic.dialects.common import NkicAttrs

        return NkicAttrs

    def isa(name: str) -> Callable[[], Dialect]:
        def load() -> Dialect:
            from nkic.dialects import isa as isa_pkg

            return isa_pkg.DIALECTS[name]

        return load

    return {
        "penguin": penguin,
        "bir": bir,
        "nkic": nkic_attrs,
        "stablehlo": stablehlo,
        "chlo": chlo,
        **{n: isa(n) for n in ("isa", *(f"isa_{e}" for e in ENGINE_NAMES))},
    }
