"""nkic: an open compiler for NKI kernels built on xDSL.

Importing nkic sets no environment variables and imports no sub-package. It does one thing: it records the
modification time and size of each of nkic's own source files (``SOURCE_STATS``, about a millisecond). The NEFF
cache's build identity (``nkic.compiler.cache.compiler_digest``) hashes the files on disk and is valid only while they are
still the ones this process loaded its code from; after an edit or a ``git pull`` under a running process, that
process compiles uncached.
"""

from nkic.sources import NOT_PACKAGE, SOURCE_STATS, source_stats
from nkic.version import __version__

__all__ = ["__version__", "NOT_PACKAGE", "SOURCE_STATS", "source_stats", "install_nki_alias"]


def install_nki_alias() -> None:
    """Make ``import nki`` / ``nki.language`` / ``nki.isa`` / ``nki.compiler`` / ``nki.typing`` resolve to nkic's
    public NKI modules (``nkic.api`` and the frontend namespaces)."""
    from nkic.api.alias import install  # deferred: importing nkic imports no sub-package (see the docstring)

    install()
