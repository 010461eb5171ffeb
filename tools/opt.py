"""``nkic-opt``: xdsl-opt with every nkic dialect, pass and target (``-p`` pipelines, ``-t neff -o k.neff``); the
tool itself is ``tools/opt_tool.py``.

This module is the command's entry point and imports nothing heavy: the tool imports xDSL and every nkic dialect,
pass and target (over a second of CPU), and Ctrl-C during that import printed Python's traceback, or numpy's
``ImportError: numpy._core.multiarray failed to import``, with status 1 or -2 (all of 12 SIGINTs sent in the first
3 s of ``nkic-opt k.mlir`` on a loaded machine). Here the import runs under ``nkic``'s guard (``tools/cli.py``'s
``Interrupts``), so Ctrl-C at any moment after this module loads prints ``nkic-opt: interrupted`` and exits 130.
"""

from __future__ import annotations

import contextlib
import sys

from nkic.tools.cli import EXIT_INTERRUPTED, Interrupts


def main(args: list[str] | None = None) -> None:
    """The ``nkic-opt`` command; ``args`` replaces ``sys.argv[1:]`` (the IR fuzzer runs it in-process). Exits with
    ``SystemExit``: 1 for bad input, 2 for an internal error, 130 when interrupted, 141 when stdout was closed."""
    with Interrupts() as interrupts:
        try:
            from nkic.tools import opt_tool  # under the guard: see the module docstring

            opt_tool.main(args)
        except KeyboardInterrupt:  # during the import (the tool reports its own run's)
            raise SystemExit(interrupted()) from None
        except Exception:
            if interrupts.seen:  # Ctrl-C that a library reported as another exception
                raise SystemExit(interrupted()) from None
            raise


def interrupted() -> int:
    with contextlib.suppress(OSError):
        print("nkic-opt: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


if __name__ == "__main__":
    main()
