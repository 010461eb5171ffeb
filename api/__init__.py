"""The public NKI namespace: what ``import nki`` gives after ``nkic.install_nki_alias()``.

``jit``, ``simulate`` and the submodules ``language`` (nl), ``isa`` (nisa), ``compiler`` and ``typing``, plus
``Kernel``, ``TensorSpec``, ``dtype``, ``dont_trace`` and ``NkiError``, and the legacy entry points
``simulate_kernel``, ``baremetal``, ``benchmark``, ``profile`` and ``trace`` (``api/entry_points.py``), and nkic's
``tune`` (``api/tuning.py``: sweep a kernel's keyword parameters on the cost model); ``collectives``
imports, and calling it raises. Any
other name is a placeholder that raises ``NkiError`` when called (``frontend/unsupported.py``). It is assembled here, above the frontend, because
``simulate`` (and calling a kernel outside a trace) needs the compiler, which the frontend must not import. Kernels
that ship with nkic (``nkic.kernels``) use only this module: ``from nkic import api as nki``.
"""

from __future__ import annotations

import importlib as _importlib
from typing import Any

from nkic.api.entry_points import baremetal, benchmark, profile, simulate_kernel, trace
from nkic.api.execute import simulate
from nkic.frontend import era02 as _era02
from nkic.frontend import collectives, compiler, isa, language
from nkic.frontend import nki_typing as typing
from nkic.frontend.dtypes import dtype
from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import Kernel, TensorSpec, dont_trace
from nkic.frontend.tracer import jit as _jit
from nkic.frontend.unsupported import missing_names
from nkic.api.tuning import tune

__all__ = [
    "Kernel", "NkiError", "TensorSpec", "baremetal", "benchmark", "collectives", "compiler", "dont_trace", "dtype",
    "isa", "jit", "language", "profile", "simulate", "simulate_kernel", "trace", "tune", "typing",
]  # fmt: skip


def jit(fn: Any = None, **options: Any) -> Any:
    """``@nki.jit`` / ``@nki.jit(**options)``: a Kernel. Every ``mode`` compiles and simulates when the kernel is
    called; ``mode="benchmark"`` also records ``.benchmark_result`` (``nki.benchmark``); NKI 0.2's
    ``mode="torchxla"`` warns (``frontend/era02.py``)."""
    _era02.torchxla_mode(options)
    if options.get("mode") == "benchmark":
        rest = {k: v for k, v in options.items() if k != "mode"}
        return benchmark(None if fn is None else _jit(fn), **rest)
    return _jit(fn, **options)

__getattr__ = missing_names("nki")

# Every module of this package is bound as an attribute by the time this namespace is imported, so that ``from
# nkic.api import alias`` finds the module: a package whose __getattr__ answers every name never imports a submodule
# that is not yet an attribute. alias reads this namespace (its __getattr__ too), so it comes last; about 10 ms.
_importlib.import_module("nkic.api.alias")
