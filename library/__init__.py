"""nkic's kernel library: kernels named by IR nodes rather than traced from user code.

* ``registry.py``: ``REGISTRY`` (name -> a ``kernels/`` kernel plus how node attributes become its arguments) and
  ``LibraryResolver``, the ``passes.resolver.KernelResolver`` that traces and lowers those kernels on demand;
  ``RESOLVER`` is the process's shared, caching instance, which ``nkic.compiler.driver`` and ``nkic-opt`` hand to the passes.
* ``macros.py``: ``macro_module(...)`` builds a host BIR module around one IT54 (``bir.bir_kernel``) node, the form in
  which a pre-compiled library ("macro") kernel reaches the backend.

The library sits above the frontend, ``kernels/`` and the passes (it traces kernels and lowers them with
``penguin-to-bir``'s ``kernel_functions``); the passes reach it only through the resolver protocol.
"""

from nkic.library.macros import macro_module
from nkic.library.registry import REGISTRY, RESOLVER, LibraryKernel, LibraryResolver

__all__ = ["REGISTRY", "RESOLVER", "LibraryKernel", "LibraryResolver", "macro_module"]
