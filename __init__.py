"""nkic: an open compiler for NKI kernels built on xDSL.

Importing nkic sets no environment variables and imports no sub-package. It does one thing: it records the
modification time and size of each of nkic's own source files (``SOURCE_STATS``, about a millisecond). The NEFF
cache's build identity (``nkic.cache.compiler_digest``) hashes the files on disk and is valid only while they are
still the ones this process loaded its code from; after an edit or a ``git pull`` under a running process, that
process compiles uncached.
"""

import os

from nkic.version import __version__

__all__ = ["__version__", "NOT_PACKAGE", "SOURCE_STATS", "source_stats", "install_nki_alias"]

# Folders at the package root that are not the compiler (an editable checkout's tests, benchmarks, build outputs).
NOT_PACKAGE = ("tests", "bench", "build", "out")


def source_stats() -> dict[str, tuple[int, int]]:
    """Relative path -> (mtime_ns, size) of every ``.py`` file of the compiler (``NOT_PACKAGE`` and hidden or
    ``.egg-info`` folders excluded)."""
    root = os.path.dirname(os.path.abspath(__file__))
    stats: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        top = folder == root
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith(".")
                         and not (top and (d in NOT_PACKAGE or d.endswith(".egg-info"))))  # fmt: skip
        for f in files:
            if f.endswith(".py"):
                st = os.stat(os.path.join(folder, f))
                stats[os.path.relpath(os.path.join(folder, f), root)] = (st.st_mtime_ns, st.st_size)
    return stats


SOURCE_STATS = source_stats()


def install_nki_alias() -> None:
    """Make ``import nki`` / ``nki.language`` / ``nki.isa`` / ``nki.compiler`` / ``nki.typing`` resolve to nkic's
    public NKI modules (``nkic.api`` and the frontend namespaces)."""
    from nkic.alias import install  # deferred: importing nkic imports no sub-package (see the docstring)

    install()
