"""``nkic.install_nki_alias()``: ``nki.*`` and the legacy ``neuronxcc.nki.*`` spellings name nkic's modules."""

from __future__ import annotations

import importlib
import sys

import pytest

import nkic
from nkic import alias, api
from nkic.frontend import isa, language, nki_typing
from nkic.frontend.errors import NkiError


@pytest.fixture
def aliased():
    alias.install()  # other test modules install it at import and keep it: never uninstall behind their back


@pytest.mark.parametrize("prefix", ["nki", "neuronxcc.nki"])
def test_both_spellings_resolve_to_the_same_modules(aliased, prefix: str) -> None:
    assert importlib.import_module(prefix) is api
    assert importlib.import_module(f"{prefix}.language") is language
    assert importlib.import_module(f"{prefix}.isa") is isa
    assert importlib.import_module(f"{prefix}.typing") is nki_typing


def test_legacy_annotations_and_placeholders(aliased) -> None:
    import neuronxcc.nki.typing as nt
    from neuronxcc import nki

    assert nt.tensor[128, 512] is nt.tensor and nt.mutable_tensor is nt.tensor
    assert nki.jit is api.jit
    with pytest.raises(NkiError, match="not supported by nkic"):
        nki.language.mgrid()  # a legacy-only name: a placeholder until the legacy surface exists


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
