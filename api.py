"""The public NKI namespace: what ``import nki`` gives after ``nkic.install_nki_alias()``.

``jit``, ``simulate`` and the submodules ``language`` (nl), ``isa`` (nisa), ``compiler`` and ``typing``, plus
``Kernel``, ``TensorSpec``, ``dont_trace`` and ``NkiError``. It is assembled here, above the frontend, because
``simulate`` (and calling a kernel outside a trace) needs the compiler, which the frontend must not import. Kernels
that ship with nkic (``nkic.kernels``) use only this module: ``from nkic import api as nki``.
"""

from __future__ import annotations

from nkic.execute import simulate
from nkic.frontend import compiler, isa, language
from nkic.frontend import nki_typing as typing
from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import Kernel, TensorSpec, dont_trace, jit

__all__ = ["Kernel", "NkiError", "TensorSpec", "compiler", "dont_trace", "isa", "jit", "language", "simulate", "typing"]
