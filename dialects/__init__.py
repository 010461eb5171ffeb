"""nkic's dialects by name, as factories: a ``Context`` loads a dialect only when it first meets one of its ops, so a
tool that reads penguin never imports the ISA dialects (importing a dialect module defines all of its op classes).
The table is the same lazy registry as ``nkic.passes``' (module, attribute), loaded by ``nkic.support.lazy``."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Dialect

from nkic.support.lazy import lazy_attr
from nkic.target.machine import ENGINE_NAMES

# dialect name -> (module under nkic.dialects, its Dialect); the ISA dialects live in one table of nkic.dialects.isa
_DIALECTS: dict[str, tuple[str, str]] = {
    "penguin": ("penguin", "Penguin"),
    "bir": ("bir", "Bir"),
    "nkic": ("common", "NkicAttrs"),
    "stablehlo": ("stablehlo", "StableHLO"),
    "chlo": ("stablehlo", "Chlo"),
}


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    isa = {n: lazy_attr("nkic.dialects.isa", "DIALECTS", n) for n in ("isa", *(f"isa_{e}" for e in ENGINE_NAMES))}
    return {**{name: lazy_attr(f"nkic.dialects.{m}", a) for name, (m, a) in _DIALECTS.items()}, **isa}
