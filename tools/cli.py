"""``nkic``: compile an NKI kernel file to a NEFF, run a NEFF in the simulator, describe a NEFF.

    nkic compile kernel.py:my_kernel --arg a=float32[256,512] --arg scale=0.5 [--grid 2] -o k.neff --dump-dir ir/
                 [--time-passes] [--verify-each-pass] [--roll-loops | --unroll-all]
    nkic run k.neff --input a=a.npy --output-dir out/ --profile trace.json
    nkic profile k.neff -o timeline.png [--input a=a.npy] [--trace trace.json]
    nkic info k.neff
    nkic tune kernel.py:my_kernel --arg a=bfloat16[4096,8192] --space TILES=1,2,4 --jobs 2 --output-dir tune/
    nkic demo [--out-dir DIR]

Errors print one message and exit non-zero; ``--debug`` shows the traceback. A message that already names its place
(``k.py:7: error: ...``) is printed as it is, else after ``nkic: error:``.

Every file written goes through ``nkic.support.safeio``: atomically (a temporary file beside it, fsynced, renamed into
place), never through a symbolic link, and for ``nkic run`` into the ``--output-dir`` folder opened before the run.
Ctrl-C (SIGINT) prints ``nkic: interrupted`` and exits 130 (128 + SIGINT), leaving no partial file. When stdout is
closed early (``nkic info k.neff | head -1``) the command ends quietly with status 141 (128 + SIGPIPE), which is what
a shell shows for ``cat`` or ``seq`` in the same place.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator
from types import FrameType, TracebackType
from typing import Any

# A message that starts with its own place, as an NkiError's "k.py:7: error: ..." does: printed without a prefix.
_LOCATED = re.compile(r"[^\n]*?:\d+(?::\d+)?: error: ")
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command Ctrl-C stopped
EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE, what a shell reports for `cat` or `seq` whose reader went away


class CliError(Exception):
    pass



class _Parser(argparse.ArgumentParser):
    """argparse, except that a closed stdout while printing ``--help`` or usage is not swallowed: argparse ignores
    the OSError, which would make ``nkic --help | head -1`` exit 0 or 141 depending on whether stdout happens to be
    buffered; raised, it reaches ``main``'s handler like every other command's output."""

    def _print_message(self, message: str, file: Any = None) -> None:
        if message:
            (file or sys.stderr).write(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="nkic", description="The nkic NKI compiler and NeuronCore simulator.")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="compile FILE.py:KERNEL (or a StableHLO module FILE.mlir) to a NEFF")
    c.add_argument("kernel")
    c.add_argument("--no-routing", action="store_true",
                   help="StableHLO: lower attention op by op instead of routing it to flash_attention")
    c.add_argument("--arg", action="append", default=[], help="NAME=DTYPE[D0,D1,...] or NAME=VALUE")
    c.add_argument("--grid", type=int, default=1, help="SPMD programs to launch (kernel[N])")
    c.add_argument("-o", "--output", required=True)
    c.add_argument("--dump-dir", help="write the IR after every stage here")
    c.add_argument("--time-passes", action="store_true",
                   help="print the wall time and op count of every stage (as MLIR's -mlir-timing)")  # fmt: skip
    c.add_argument("--no-source-info", action="store_true",
                   help="leave out each instruction's kernel file:line and nki call (which profiles show)")
    c.add_argument("--metrics", action="store_true",
                   help="print per-engine counts, busy time, critical path and SBUF/PSUM high-water (print-metrics)")
    c.add_argument("--verify-each-pass", action="store_true",
                   help="verify the IR after every pass (default: once, after the last pass; "
                        "NKIC_VERIFY_EACH_PASS=1 does the same)")  # fmt: skip
    roll = c.add_mutually_exclusive_group()
    roll.add_argument("--roll-loops", dest="roll_loops", action="store_true", default=None,
                      help="keep uniform affine_range/sequential_range loops rolled (default: NKIC_ROLL_LOOPS=1)")
    roll.add_argument("--unroll-all", dest="roll_loops", action="store_false",
                      help="unroll every loop, whatever NKIC_ROLL_LOOPS says")  # fmt: skip
    r = sub.add_parser("run", help="run a NEFF in the simulator")
    r.add_argument("neff")
    r.add_argument("--input", action="append", default=[], help="NAME=FILE.npy")
    r.add_argument("--output-dir", help="where the outputs are written (required unless --timing-only)")
    r.add_argument("--profile", help="write a Chrome trace-event JSON profile")
    r.add_argument("--timing-only", action="store_true",
                   help="simulate the timeline without numerics (inputs optional, no outputs): for kernels too "
                        "large to compute on a CPU")  # fmt: skip
    r.add_argument("--cast", action="store_true", help="cast inputs whose .npy dtype differs from the kernel's")
    r.add_argument("--ranks", type=int, default=1, help="ranks running the NEFF, each with its own HBM "
                   "(nki.collectives); --input NAME@R=FILE.npy gives rank R its own input")
    r.add_argument("--strict", action="store_true",
                   help="output elements the kernel never wrote are an error (default: a warning)")  # fmt: skip
    i = sub.add_parser("info", help="describe a NEFF")
    i.add_argument("neff")
    pr = sub.add_parser("profile", help="simulate a NEFF and draw its per-engine timeline as a PNG")
    pr.add_argument("neff")
    pr.add_argument("-o", "--output", required=True, help="the timeline PNG")
    pr.add_argument("--input", action="append", default=[], help="NAME=FILE.npy (inputs not given are made up)")
    pr.add_argument("--cast", action="store_true", help="cast inputs whose .npy dtype differs from the kernel's")
    pr.add_argument("--trace", help="also write the Chrome trace-event JSON profile")
    pr.add_argument("--width", type=int, default=1600, help="picture width in pixels")
    pr.add_argument("--top", type=int, default=10, help="kernel lines to list by busy time")
    t = sub.add_parser("tune", help="sweep FILE.py:KERNEL's keyword parameters on the cost model (timing only)")
    t.add_argument("kernel")
    t.add_argument("--arg", action="append", default=[], help="NAME=DTYPE[D0,D1,...] or NAME=VALUE")
    t.add_argument("--space", action="append", default=[], help="NAME=V1,V2,... (several), or FILE.json")
    t.add_argument("--grid", type=int, default=1, help="SPMD programs to launch (kernel[N])")
    t.add_argument("--strategy", choices=("grid", "random", "optuna"), default="grid",
                   help="every configuration, a seeded random sample, or Optuna's TPE (pip install nkic[search])")
    t.add_argument("--trials", type=int, help="configurations to evaluate (default: all of the space)")
    t.add_argument("--seed", type=int, default=0, help="seed of the random and optuna strategies")
    t.add_argument("--executor", choices=("local", "dask"), default="local",
                   help="processes on this machine, or a Dask cluster (pip install nkic[cluster])")
    t.add_argument("--jobs", type=int, default=1, help="local: configurations evaluated at once")
    t.add_argument("--address", help="dask: the scheduler's address (default: a local cluster of --workers)")
    t.add_argument("--workers", type=int, default=2, help="dask: worker processes of the local cluster")
    t.add_argument("--output-dir", help="write tune.json and tune.csv here (and the NEFF cache, unless NKIC_CACHE_DIR)")
    ca = sub.add_parser("cache", help="the NEFF cache (NKIC_CACHE_DIR): info, or clear it")
    ca.add_argument("action", choices=("info", "clear"))
    d = sub.add_parser("demo", help="compile, run and check a bundled kernel")
    d.add_argument("--out-dir", default="out/demo")
    return p


def default_blas_threads() -> None:
    """Default ``OPENBLAS_NUM_THREADS`` to 1 for this process (a value already set wins).

    The simulator runs many small (<=128x512) matmuls; a threaded BLAS only adds contention there (measured 30x
    slower on 2 busy cores). OpenBLAS reads the variable once, when numpy is first imported, so this must run before
    that: it is the first thing ``main`` does, and numpy comes only with the commands (``tools/commands.py``). When
    numpy is already loaded (``main`` called from Python) it has no effect on the running BLAS. Importing nkic itself never
    sets environment variables."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    """The ``nkic`` command; returns the exit status. Ctrl-C is one line and status 130, a closed stdout is quiet
    with status 141 (see the module docstring), whatever the command was doing, argument parsing included."""
    default_blas_threads()
    args: argparse.Namespace | None = None
    with Interrupts() as interrupts, one_line_cache_warnings():
        try:
            try:
                args = build_parser().parse_args(argv)
                status = _dispatch(args, interrupts)
            except SystemExit:  # argparse's --help and usage errors: their output must reach a closed pipe here too
                sys.stdout.flush()
                raise
            sys.stdout.flush()  # a reader that went away shows here, inside the handlers, not in Python's exit
            return status
        except KeyboardInterrupt:
            return interrupted(args)
        except BrokenPipeError:
            return stdout_closed()
        except Exception:
            if interrupts.seen:  # Ctrl-C that a library reported as another exception (see Interrupts)
                return interrupted(args)
            raise


@contextlib.contextmanager
def one_line_cache_warnings() -> Iterator[None]:
    """The NEFF cache's warning (a folder it cannot use, once per process) as one line, ``nkic: warning: ...``, as
    the command's other warnings are: Python's format adds nkic's own file, line and source line, which say nothing
    to the user. Other warnings keep Python's format (a legacy kernel's names its line)."""
    with warnings.catch_warnings():  # restores showwarning on the way out
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                 line: str | None = None) -> None:  # fmt: skip
            cache = sys.modules.get("nkic.compiler.cache")  # loaded if it warned: --help need not load it
            if cache is not None and issubclass(category, cache.CacheWarning):
                print(f"nkic: warning: {message}", file=sys.stderr)
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def interrupted(args: argparse.Namespace | None) -> int:
    """``nkic: interrupted``, status 130. safeio removes the temporary file of a write in progress, so no partial
    output is left behind."""
    with contextlib.suppress(OSError):
        if args is not None and args.debug:
            traceback.print_exc()
        print("nkic: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


class Interrupts:
    """While a command runs: SIGINT raises KeyboardInterrupt as Python's own handler does
    (``signal.default_int_handler``), and is remembered. A library may turn the KeyboardInterrupt raised inside it
    into another exception: numpy's C-extension import, interrupted, raises ``ImportError: numpy._core.multiarray
    failed to import`` (status 1 and a 70-line traceback, found by sending SIGINT at random moments). Whatever it
    became, a command that received SIGINT ends as interrupted. Such an extension also prints the exception
    itself (numpy's ``import_array()`` calls ``PyErr_Print``, which prints through ``sys.excepthook``), so after a
    SIGINT the hook prints nothing. Installed only over Python's default handler, from the main thread
    (``signal.signal`` works there only): an ignored SIGINT (a background job) stays ignored, and a host program's
    own handler is left alone."""

    def __init__(self) -> None:
        self.seen = False
        self._installed = False
        self._hook = sys.excepthook

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread() and (
            signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            signal.signal(signal.SIGINT, self._handler)
            sys.excepthook = self._excepthook
            self._installed = True
        return self

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.seen = True
        signal.default_int_handler(signum, frame)

    def _excepthook(self, kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if not self.seen:  # after Ctrl-C, what a library prints is what became of the interrupt
            self._hook(kind, value, tb)

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            sys.excepthook = self._hook


def stdout_closed() -> int:
    """End quietly after the reader of stdout went away (``| head -1``): the Python documentation's recipe (the
    signal module's note on SIGPIPE) points stdout at /dev/null, so that flushing what is still buffered when the
    interpreter exits cannot fail again and print ``Exception ignored ... BrokenPipeError``; the status is the one a
    shell shows for a Unix tool killed by SIGPIPE."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no real stdout (an embedding host): nothing to do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_STDOUT_CLOSED


def error_line(e: BaseException) -> str:
    """``nkic: error: MESSAGE``, or MESSAGE alone when it already starts with its place (``k.py:7: error: ...``)."""
    text = str(e)
    return text if _LOCATED.match(text) else f"nkic: error: {text}"


# The module of each subcommand (``cmd_<name>``, with the errors it reports as its one line, ``REPORTED``), loaded
# when the command runs and nowhere else: numpy must load after default_blas_threads (OpenBLAS reads its thread
# count when numpy is first imported), and `nkic --help` or a usage error needs none of them. info and cache read
# without compiling, so their module loads neither xDSL nor the compiler.
_MODULES = {"info": "nkic.tools.info", "cache": "nkic.tools.info"}
_COMPILING = "nkic.tools.commands"  # every other subcommand


def _module(command: str) -> Any:
    return importlib.import_module(_MODULES.get(command, _COMPILING))


def _dispatch(args: argparse.Namespace, interrupts: Interrupts) -> int:
    if args.debug:
        getattr(_module(args.command), f"cmd_{args.command}")(args)
        return 0
    module = None
    try:
        module = _module(args.command)
        getattr(module, f"cmd_{args.command}")(args)
    except BrokenPipeError:  # an OSError, but not a failure of the command: main ends quietly
        raise
    except Exception as e:  # the command's one error line; any other failure is still one line unless --debug
        if isinstance(e, (CliError, ValueError, TypeError, KeyError, *getattr(module, "REPORTED", ()))):
            return _failed(error_line(e), e, interrupts)
        return _failed(f"nkic: error: {type(e).__name__}: {e} (rerun with --debug for the traceback)", e, interrupts)
    return 0


def _failed(line: str, e: Exception, interrupts: Interrupts) -> int:
    """Print the command's one error line, status 1; unless Ctrl-C came first and ``e`` is what became of it."""
    if interrupts.seen:
        raise KeyboardInterrupt from e
    print(line, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
