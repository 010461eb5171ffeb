"""``python -m nkic SCRIPT.py [ARGS]``: run a Python script whose ``import nki`` is nkic.

The script runs as ``__main__`` (``runpy``) with ``sys.argv = [SCRIPT.py, *ARGS]`` and its folder first on
``sys.path``, exactly as ``python SCRIPT.py`` would, after the ``nki`` alias is installed: a ``@nki.jit`` kernel called
on numpy arrays compiles and simulates on the CPU (where torch is installed without torch_xla, ``import torch_xla`` is a CPU
stand-in, ``nkic.interop.install_torch_xla_standin``). An ``NkiError`` escaping the script is printed as its one line
(``file:line: error: ...``) and exits 1, as is a syntax error in the script; any other exception is the script's own
and keeps Python's traceback.
``python -m nkic compile|run|info|demo ...`` is the ``nkic`` command. ``-W nki-legacy=default|ignore|error`` before the
script chooses what the legacy ``neuronxcc.nki`` constructs do (``frontend/legacy/migration.py``).
"""

from __future__ import annotations

import os
import runpy
import sys

import nkic
from nkic.frontend.errors import NkiError, located_error
from nkic.frontend.legacy import migration
from nkic.interop import install_torch_xla_standin
from nkic.tools.cli import build_parser, default_blas_threads
from nkic.tools.cli import main as cli_main

USAGE = ("usage: python -m nkic [-W nki-legacy=default|ignore|error] SCRIPT.py [ARGS...]   "
         "(or: python -m nkic {compile,run,profile,info,demo} ...)")


def _cli_commands() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")  # noqa: SLF001 — argparse keeps them here
    return set(sub.choices)  # type: ignore[arg-type]


def _warning_switches(args: list[str]) -> tuple[list[str], str | None]:
    """Strip leading ``-W nki-legacy=ACTION`` / ``-Wnki-legacy=ACTION`` switches; the last ACTION wins."""
    action = None
    while args and args[0].startswith("-W"):
        spec = args[0][2:] if len(args[0]) > 2 else (args[1] if len(args) > 1 else "")
        args = args[1:] if len(args[0]) > 2 else args[2:]
        action = migration.parse_switch(spec)
    return args, action


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        args, legacy_action = _warning_switches(args)
    except ValueError as e:
        print(f"nkic: error: {e}", file=sys.stderr)
        return 2
    if legacy_action is not None:
        migration.set_action(legacy_action)
        os.environ[migration.ENV] = legacy_action  # for the script's own subprocesses
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    if args[0] in _cli_commands() or args[0] == "--debug":
        return cli_main(args)
    script = args[0]
    if not os.path.isfile(script):
        print(f"nkic: error: cannot open script '{script}'", file=sys.stderr)
        return 2
    default_blas_threads()  # in case main is called from Python: python -m nkic has set it before numpy loaded
    nkic.install_nki_alias()
    install_torch_xla_standin()  # the docs' PyTorch examples put their tensors on torch_xla.device()
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [script, *args[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except NkiError as e:
        print(str(e), file=sys.stderr)
        return 1
    except SyntaxError as e:
        # The script itself does not compile: nothing of it ran, so there is no traceback of the script's to keep,
        # only runpy's; say where, as every other error about the user's file is said. (A syntax error in a module
        # the script imports is raised by the script's import line and keeps Python's traceback.)
        if e.filename is None or os.path.abspath(e.filename) != os.path.abspath(script):
            raise
        print(str(located_error(e, source=script)), file=sys.stderr)
        return 1
    finally:
        sys.argv = saved_argv
        if sys.path and sys.path[0] != saved_path0:
            del sys.path[0]
    return 0
