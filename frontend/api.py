"""The module installed as ``nki`` by ``alias.install()``: ``nki.jit``, ``nki.simulate`` and the submodules."""

from __future__ import annotations

from nkic.frontend import compiler, isa, language
from nkic.frontend import nki_typing as typing
from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import Kernel, TensorSpec, dont_trace, jit, simulate

__all__ = ["Kernel", "NkiError", "TensorSpec", "compiler", "dont_trace", "isa", "jit", "language", "simulate", "typing"]
