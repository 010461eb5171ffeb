"""nkic: an open compiler for NKI kernels built on xDSL."""

import os as _os

# The simulator runs many small (<=128x512) matmuls; a threaded BLAS only adds contention there (measured 30x
# slower on 2 busy cores). A default only: set OPENBLAS_NUM_THREADS yourself to override; it works when nkic is
# imported before numpy.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"


def install_nki_alias() -> None:
    """Make ``import nki`` / ``nki.language`` / ``nki.isa`` / ``nki.compiler`` / ``nki.typing`` resolve to nkic's
    public NKI modules (``nkic.api`` and the frontend namespaces)."""
    from nkic.alias import install

    install()
