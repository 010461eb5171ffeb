"""nkic's dialects by name, as factories: a ``Context`` loads a dialect only when it first meets one of its ops, so a
tool that reads penguin never imports the ISA dialects (importing a dialect module defines all of its op classes).
The table is the same lazy registry as ``nkic.passes``' (module, attribute), loaded by one factory."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.ir import Dialect

from nkic.target.machine import ENGINE_NAMES

# dialect name -> (module under nkic.dialects, its Dialect); the ISA dialects live in one table of nkic.dialects.isa
_DIALECTS: dict[str, tuple[str, str]] = {
    "penguin": ("penguin", "Penguin"),
    "bir": ("bir", "Bir"),
    "nkic": ("common", "NkicAttrs"),
    "stablehlo": ("stablehlo", "StableHLO"),
    "chlo": ("stablehlo", "Chlo"),
}


def _factory(module: str, name: str, isa: bool = False) -> Callable[[], Dialect]:
    def load() -> Dialect:
        loaded = importlib.import_module(f"nkic.dialects.{module}")
        return loaded.DIALECTS[name] if isa else getattr(loaded, name)

    return load


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    isa = {n: _factory("isa", n, isa=True) for n in ("isa", *(f"isa_{e}" for e in ENGINE_NAMES))}
    return {**{name: _factory(m, a) for name, (m, a) in _DIALECTS.items()}, **isa}
