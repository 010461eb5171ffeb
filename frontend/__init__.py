"""The NKI frontend: trace ``@nki.jit`` Python kernels into penguin IR.

Public entry points: ``jit``, ``simulate``, ``Kernel``, ``TensorSpec``, ``dont_trace``, ``NkiError``; the NKI
namespaces are ``nkic.frontend.language`` (nl) and ``nkic.frontend.isa`` (nisa). ``nkic.install_nki_alias()``
makes ``import nki`` resolve to them.
"""

from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import Kernel, TensorSpec, TracedKernel, dont_trace, jit, simulate

__all__ = ["Kernel", "NkiError", "TensorSpec", "TracedKernel", "dont_trace", "jit", "simulate"]
