"""``install()``: make ``import nki`` (and ``nki.language``, ``nki.isa``, ``nki.compiler``, ``nki.typing``,
``nki.collectives``) resolve to nkic's modules. nkic never installs a top-level ``nki`` package by itself; only this does.

The legacy spelling ``neuronxcc.nki[.language|.isa|.compiler|.typing]`` resolves to the same modules: one tracer, one
API surface. Names only the legacy generation has (``nl.mgrid``, ``nl.par_dim``, ...) are placeholders there, an
``NkiError`` at the calling line, until the legacy surface exists. ``neuronxcc`` itself is an empty namespace module
made here; no real package of that name is ever installed.
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
_LEGACY = {"neuronxcc.nki" + name[3:]: module for name, module in MODULES.items()}


def _namespace() -> ModuleType:
    neuronxcc = ModuleType("neuronxcc", "nkic's alias namespace for the legacy ``neuronxcc.nki`` spelling")
    neuronxcc.__path__ = []  # a package, so ``import neuronxcc.nki.typing`` looks the submodules up in sys.modules
    neuronxcc.nki = nki  # type: ignore[attr-defined]
    return neuronxcc


def install() -> None:
    """Register the alias modules in ``sys.modules`` (idempotent)."""
    for name, module in MODULES.items():
        sys.modules[name] = module
    if getattr(sys.modules.get("neuronxcc"), "nki", None) is not nki:
        sys.modules["neuronxcc"] = _namespace()
    sys.modules.update(_LEGACY)
    isa.constants = isa  # type: ignore[attr-defined]  # so attribute access nki.isa.constants works too


def uninstall() -> None:
    """Remove the aliases again (tests)."""
    for name, module in (*MODULES.items(), *_LEGACY.items()):
        if sys.modules.get(name) is module:
            del sys.modules[name]
    if getattr(sys.modules.get("neuronxcc"), "nki", None) is nki:
        del sys.modules["neuronxcc"]
