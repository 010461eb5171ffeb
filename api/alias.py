"""``install()``: make ``import nki`` (and ``nki.language``, ``nki.isa``, ``nki.compiler``, ``nki.typing``,
``nki.collectives``) resolve to nkic's modules. nkic never installs a top-level ``nki`` package by itself; only this does.

The legacy spelling ``neuronxcc.nki[.language|.isa|.compiler|.typing]`` resolves to the legacy surface
(``frontend/legacy``): one tracer, two API surfaces. ``neuronxcc.nki`` is ``nki`` with the legacy ``language``,
``isa`` and ``compiler``; ``neuronxcc.nki.language``, ``.isa`` and ``.compiler`` are the legacy modules; the rest are
shared. ``neuronxcc`` itself is
an empty namespace module made here; no real package of that name is ever installed.
"""

from __future__ import annotations

import sys
from types import ModuleType

from nkic import api as nki
from nkic.frontend import collectives, compiler, isa, language, nki_typing
from nkic.frontend.legacy import compiler as legacy_compiler
from nkic.frontend.legacy import isa as legacy_isa
from nkic.frontend.legacy import language as legacy_language
from nkic.frontend.legacy.migration import legacy_jit

MODULES: dict[str, ModuleType] = {
    "nki": nki,
    "nki.language": language,
    "nki.isa": isa,
    "nki.isa.constants": isa,  # nki-library imports oob_mode / dge_mode / matmul_perf_mode from here
    "nki.compiler": compiler,
    "nki.collectives": collectives,
    "nki.typing": nki_typing,
}


def _legacy_nki() -> ModuleType:
    """``neuronxcc.nki``: every name of ``nki``, with the legacy ``language`` and ``isa`` as its attributes."""
    module = ModuleType("neuronxcc.nki", nki.__doc__)
    module.__dict__.update({k: v for k, v in vars(nki).items() if not k.startswith("__")})
    module.__getattr__ = getattr(nki, "__getattr__")  # type: ignore[attr-defined]  # placeholders, as in nki
    module.language, module.isa = legacy_language, legacy_isa  # type: ignore[attr-defined]
    module.compiler = legacy_compiler  # type: ignore[attr-defined]  # with the legacy sbuf / psum allocations
    module.jit = legacy_jit(nki.jit)  # type: ignore[attr-defined]  # warns for a legacy mode=
    module.tensor = nki_typing.tensor  # type: ignore[attr-defined]  # legacy annotations: `a: nki.tensor[128, 64]`
    module.__path__ = []  # type: ignore[attr-defined]  # a package: submodules resolve through sys.modules
    return module


LEGACY_NKI = _legacy_nki()
_LEGACY = {"neuronxcc.nki" + name[3:]: module for name, module in MODULES.items()}
_LEGACY.update({"neuronxcc.nki": LEGACY_NKI, "neuronxcc.nki.language": legacy_language, "neuronxcc.nki.isa": legacy_isa,
                "neuronxcc.nki.compiler": legacy_compiler})


def _namespace() -> ModuleType:
    neuronxcc = ModuleType("neuronxcc", "nkic's alias namespace for the legacy ``neuronxcc.nki`` spelling")
    neuronxcc.__path__ = []  # a package, so ``import neuronxcc.nki.typing`` looks the submodules up in sys.modules
    neuronxcc.nki = LEGACY_NKI  # type: ignore[attr-defined]
    return neuronxcc


def install() -> None:
    """Register the alias modules in ``sys.modules`` (idempotent)."""
    for name, module in MODULES.items():
        sys.modules[name] = module
    if getattr(sys.modules.get("neuronxcc"), "nki", None) is not LEGACY_NKI:
        sys.modules["neuronxcc"] = _namespace()
    sys.modules.update(_LEGACY)
    isa.constants = isa  # type: ignore[attr-defined]  # so attribute access nki.isa.constants works too


def uninstall() -> None:
    """Remove the aliases again (tests)."""
    for name, module in (*MODULES.items(), *_LEGACY.items()):
        if sys.modules.get(name) is module:
            del sys.modules[name]
    if getattr(sys.modules.get("neuronxcc"), "nki", None) is LEGACY_NKI:
        del sys.modules["neuronxcc"]
