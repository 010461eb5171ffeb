"""``nkic.install_nki_alias()``: ``nki.*`` and the legacy ``neuronxcc.nki.*`` spellings name nkic's modules."""

from __future__ import annotations

import importlib
import sys

import pytest

import nkic
from nkic.api import alias
from nkic import api
from nkic.frontend import isa, language, nki_typing
from nkic.frontend.errors import NkiError


@pytest.fixture
def aliased():
    alias.install()  # other test modules install it at import and keep it: never uninstall behind their back


def test_modern_spelling_resolves_to_nkic_modules(aliased) -> None:
    assert importlib.import_module("nki") is api
    assert importlib.import_module("nki.language") is language
    assert importlib.import_module("nki.isa") is isa
    assert importlib.import_module("nki.typing") is nki_typing


def test_legacy_spelling_resolves_to_the_legacy_surface(aliased) -> None:
    from nkic.frontend.legacy import isa as legacy_isa
    from nkic.frontend.legacy import language as legacy_language

    from nkic.frontend.legacy import compiler as legacy_compiler

    legacy = importlib.import_module("neuronxcc.nki")
    assert legacy.jit.__name__ == "jit" and legacy.simulate_kernel is api.simulate_kernel  # jit: warns for mode=
    assert importlib.import_module("neuronxcc.nki.language") is legacy.language is legacy_language
    assert importlib.import_module("neuronxcc.nki.isa") is legacy.isa is legacy_isa
    assert importlib.import_module("neuronxcc.nki.compiler") is legacy.compiler is legacy_compiler
    assert importlib.import_module("neuronxcc.nki.typing") is nki_typing
    assert legacy_language.add is language.add and legacy_language.float32 is language.float32


def test_legacy_annotations_and_placeholders(aliased) -> None:
    import neuronxcc.nki.typing as nt
    from neuronxcc import nki

    assert nt.tensor[128, 512] is nt.tensor and nt.mutable_tensor is nt.tensor
    assert nki.tensor[128, 512] is nt.tensor  # the legacy annotation spelling
    with pytest.raises(NkiError, match="neuronxcc.nki.language.no_such_name is not supported by nkic"):
        nki.language.no_such_name()  # a name nkic lacks: a placeholder, an error only when called


def test_install_is_idempotent_and_uninstall_removes_everything() -> None:
    nkic.install_nki_alias()
    first = sys.modules["neuronxcc"]
    nkic.install_nki_alias()
    assert sys.modules["neuronxcc"] is first
    try:
        alias.uninstall()
        assert not any(n == "nki" or n.startswith(("nki.", "neuronxcc")) for n in sys.modules)
    finally:
        alias.install()
