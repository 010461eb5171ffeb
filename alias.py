"""``install()``: make ``import nki`` (and ``nki.language``, ``nki.isa``, ``nki.compiler``, ``nki.typing``,
``nki.collectives``) resolve to nkic's modules. nkic never installs a top-level ``nki`` package by itself; only this does.
"""

from __future__ import annotations

import sys
from types import ModuleType

from nkic import api as nki
from nkic.frontend import collectives, compiler, isa, language, nki_typing

MODULES: dict[str, ModuleType] = {
    "nki": nki,
    "nki.language": language,
    "nki.isa": isa,
    "nki.isa.constants": isa,  # nki-library imports oob_mode / dge_mode / matmul_perf_mode from here
    "nki.compiler": compiler,
    "nki.collectives": collectives,
    "nki.typing": nki_typing,
}


def install() -> None:
    """Register the alias modules in ``sys.modules`` (idempotent)."""
    for name, module in MODULES.items():
        sys.modules[name] = module
    isa.constants = isa  # type: ignore[attr-defined]  # so attribute access nki.isa.constants works too


def uninstall() -> None:
    """Remove the aliases again (tests)."""
    for name, module in MODULES.items():
        if sys.modules.get(name) is module:
            del sys.modules[name]
