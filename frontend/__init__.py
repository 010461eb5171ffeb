"""The NKI frontend: trace ``@nki.jit`` Python kernels into penguin IR.

Public entry points: ``jit``, ``Kernel``, ``TensorSpec``, ``TracedKernel``, ``dont_trace``, ``NkiError``; the NKI
namespaces are ``nkic.frontend.language`` (nl), ``nkic.frontend.isa`` (nisa), ``nkic.frontend.compiler`` and
``nkic.frontend.nki_typing``. The frontend is the language surface only: it never imports the compiler, so running a
kernel (``nki.simulate``, a call outside a trace) lives one level up in ``nkic.api.execute``, and the public ``nki``
module is assembled there too (``nkic.api``; ``nkic.install_nki_alias()`` makes ``import nki`` resolve to it).
"""

from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import Kernel, TensorSpec, TracedKernel, dont_trace, jit

# The layers above the tensor model lend it what it records (tensor.ASSIGN, tensor.BROADCAST_TO) when they load:
# loading the nl surface here loads them all, whichever frontend module is imported first.
from nkic.frontend import language as _language  # noqa: E402,F401

__all__ = ["Kernel", "NkiError", "TensorSpec", "TracedKernel", "dont_trace", "jit"]
