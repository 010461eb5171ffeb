"""The public NKI namespace: what ``import nki`` gives after ``nkic.install_nki_alias()``.

``jit``, ``simulate`` and the submodules ``language`` (nl), ``isa`` (nisa), ``compiler`` and ``typing``, plus
``Kernel``, ``TensorSpec``, ``dtype``, ``dont_trace`` and ``NkiError``; ``collectives`` holds only placeholders. Any
other name is a placeholder that raises ``NkiError`` when called (``frontend/unsupported.py``). It is assembled here, above the frontend, because
``simulate`` (and calling a kernel outside a trace) needs the compiler, which the frontend must not import. Kernels
that ship with nkic (``nkic.kernels``) use only this module: ``from nkic import api as nki``.
"""

from __future__ import annotations

from nkic.execute import simulate
from nkic.frontend import collectives, compiler, isa, language
from nkic.frontend import nki_typing as typing
from nkic.frontend.dtypes import dtype
from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import Kernel, TensorSpec, dont_trace, jit
from nkic.frontend.unsupported import missing_names

__all__ = [
    "Kernel", "NkiError", "TensorSpec", "collectives", "compiler", "dont_trace", "dtype", "isa", "jit", "language",
    "simulate", "typing",
]  # fmt: skip

__getattr__ = missing_names("nki")
