"""nkic's own source files as this process loaded them: a leaf module (no imports from nkic), read by the NEFF
cache's build identity (``nkic.compiler.cache.compiler_digest``) and re-exported by the package root, whose import records
``SOURCE_STATS``."""

import os

# Folders at the package root that are not the compiler (an editable checkout's tests, benchmarks, build outputs).
NOT_PACKAGE = ("tests", "bench", "build", "out")


def source_stats() -> dict[str, tuple[int, int]]:
    """Relative path -> (mtime_ns, size) of every ``.py`` file of the compiler (``NOT_PACKAGE`` and hidden or
    ``.egg-info`` folders excluded)."""
    root = os.path.dirname(os.path.abspath(__file__))  # the package root: this module sits in it
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
