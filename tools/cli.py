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
import ast
import contextlib
import errno
import importlib.util
import json
import os
import re
import signal
import sys
import threading
import traceback
from pathlib import Path
from collections.abc import Iterator
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

from nkic.support import safeio

# numpy is imported inside the commands only, so that main() can still choose the BLAS threading (see below).
if TYPE_CHECKING:
    import numpy as np

    from nkic.compiler.driver import StageRecord

_SPEC = re.compile(r"^(?P<dtype>[A-Za-z_][A-Za-z0-9_]*)\[(?P<dims>[^\[\]]*)\]$")
_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")  # an unquoted string value (no brackets, commas, quotes)
# A message that starts with its own place, as an NkiError's "k.py:7: error: ..." does: printed without a prefix.
_LOCATED = re.compile(r"[^\n]*?:\d+(?::\d+)?: error: ")
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command Ctrl-C stopped
EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE, what a shell reports for `cat` or `seq` whose reader went away


class CliError(Exception):
    pass


def parse_arg(text: str) -> tuple[str, Any]:
    """``NAME=DTYPE[D0,D1]`` -> a TensorSpec placeholder; ``NAME=VALUE`` -> a Python literal, or the bare word
    itself (``mode=fast``). Anything else -- a spec with a missing bracket, a bad dimension, an unknown dtype, an
    expression -- is an error naming the argument, never silently a string."""
    from nkic.frontend import NkiError, TensorSpec

    if "=" not in text:
        raise CliError(f"--arg '{text}': expected NAME=DTYPE[D0,D1,...] or NAME=VALUE")
    name, value = text.split("=", 1)
    if not name.isidentifier():
        raise CliError(f"--arg '{text}': '{name}' is not a parameter name")
    value = value.strip()
    m = _SPEC.match(value)
    if m:
        text_dims = m.group("dims").strip()
        try:
            dims = tuple(int(d) for d in text_dims.split(",")) if text_dims else ()
        except ValueError:
            dims = (0,)
        if any(d <= 0 for d in dims):
            raise CliError(f"--arg {name}: '{value}': dimensions must be positive integers, as in float32[128,512]")
        try:
            return name, TensorSpec(dims, m.group("dtype"))
        except NkiError as e:
            raise CliError(f"--arg {name}: {e.what}") from None
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    if _BARE_WORD.fullmatch(value):
        return name, value
    raise CliError(f"--arg {name}: '{value}' is neither DTYPE[D0,D1,...] nor a Python literal "
                   "(quote a string: NAME=\"'text'\")")  # fmt: skip


def parse_args(texts: list[str]) -> dict[str, Any]:
    """Every ``--arg``; giving one name twice is an error (the last one would silently win)."""
    kwargs: dict[str, Any] = {}
    for text in texts:
        name, value = parse_arg(text)
        if name in kwargs:
            raise CliError(f"--arg {name}: given twice")
        kwargs[name] = value
    return kwargs


def load_kernel(target: str) -> Any:
    import nkic
    from nkic.frontend import Kernel

    if ":" not in target:
        raise CliError(f"'{target}': expected FILE.py:KERNEL")
    path, name = target.rsplit(":", 1)
    file = Path(path)
    if file.suffix != ".py":
        raise CliError(f"{_shown(path)}: expected a Python file (FILE.py:KERNEL)")
    try:
        if not file.is_file():
            raise CliError(f"{_shown(path)}: no such file")
    except (OSError, ValueError) as e:
        raise CliError(f"{_shown(path)}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
    nkic.install_nki_alias()
    spec = importlib.util.spec_from_file_location(f"nkic_user_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise CliError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    with user_code(f"importing {path}", source=path):
        spec.loader.exec_module(module)
    kernel = getattr(module, name, None)
    if not isinstance(kernel, Kernel):
        raise CliError(f"{path}: '{name}' is not an @nki.jit kernel")
    return kernel


@contextlib.contextmanager
def user_code(what: str, source: str | None = None) -> Iterator[None]:
    """Run the user's module code: any exception it raises (SystemExit included) is one error at the innermost line
    of the user's own file, not a traceback through nkic; a syntax error in ``source`` (the file being run) is at
    its own line."""
    from nkic.frontend import NkiError
    from nkic.frontend.errors import located_error

    try:
        yield
    except (NkiError, CliError):
        raise
    except (Exception, SystemExit, RecursionError) as e:  # noqa: B014 -- SystemExit is not an Exception
        raise located_error(e, context=what, source=source) from e


def _check_grid(grid: int) -> None:
    if grid < 1:
        raise CliError(f"--grid {grid}: the number of SPMD programs must be a positive integer")


def _check_arguments(kernel: Any, kwargs: dict[str, Any]) -> None:
    """Missing or unknown kernel arguments name the --arg to give, not a line of nkic."""
    import inspect

    params = inspect.signature(kernel.func).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = [k for k in kwargs if k not in params and not takes_any]
    if unknown:
        raise CliError(f"--arg {unknown[0]}: kernel '{kernel.name}' has no parameter '{unknown[0]}' "
                       f"(it takes {', '.join(params) or 'none'})")  # fmt: skip
    missing = [n for n, p in params.items() if n not in kwargs and p.default is inspect.Parameter.empty
               and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]  # fmt: skip
    if missing:
        raise CliError(f"kernel '{kernel.name}' needs {', '.join(f'--arg {n}=...' for n in missing)}")


def cmd_compile(args: argparse.Namespace) -> None:
    from nkic.compiler.driver import compile_kernel

    output = _file_path(args.output, "-o")
    dump_dir = _directory(args.dump_dir, "--dump-dir") if args.dump_dir else None
    if args.kernel.endswith(".mlir"):
        _compile_stablehlo(args, output, dump_dir)
        return
    _check_grid(args.grid)
    kwargs = parse_args(args.arg)
    kernel = load_kernel(args.kernel)
    _check_arguments(kernel, kwargs)
    if args.grid != 1:
        kernel = kernel[args.grid]
    traced_name = getattr(kernel, "name", "kernel")
    # A dump file that cannot be written is a safeio.OutputError naming it and why (main prints it).
    result = compile_kernel(kernel, (), kwargs, dump_dir=dump_dir, verify_each_pass=args.verify_each_pass or None,
                            metrics=args.metrics, debug_info=not args.no_source_info,
                            roll_loops=args.roll_loops)  # fmt: skip
    safeio.write_bytes(output, result.neff)
    how = "from the cache" if result.cached else f"{result.total_seconds:.2f} s"
    print(f"compiled {traced_name}: {len(result.neff)} bytes -> {args.output} ({how})")
    if args.dump_dir:
        print(f"IR after every stage: {args.dump_dir}")
    if args.time_passes:
        print(timing_report(result.stages), file=sys.stderr)


def _compile_stablehlo(args: argparse.Namespace, output: Path, dump_dir: Path | None) -> None:
    """``nkic compile model.mlir``: a StableHLO module (JAX's generic or pretty form) routed, lowered, compiled."""
    from nkic.interop.framework import compile_stablehlo

    if args.arg or args.grid != 1:
        raise CliError("a StableHLO module takes its shapes from its @main; --arg and --grid do not apply")
    try:
        text = Path(args.kernel).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot read {_shown(args.kernel)}: {e}") from None
    name = Path(args.kernel).stem
    program = compile_stablehlo(text, routing=not args.no_routing, dump_dir=dump_dir, name=_safe_stem(name),
                                verify_each_pass=args.verify_each_pass or None, filename=args.kernel,
                                debug_info=not args.no_source_info)  # fmt: skip
    safeio.write_bytes(output, program.result.neff)
    ins = ", ".join(f"{n}{list(s)}" for n, s, _ in program.inputs)
    outs = ", ".join(f"{n}{list(s)}" for n, s, _ in program.outputs)
    print(f"compiled {args.kernel}: {len(program.result.neff)} bytes -> {args.output} "
          f"({program.result.total_seconds:.2f} s); inputs {ins}; outputs {outs}")  # fmt: skip
    if args.dump_dir:
        print(f"IR after every stage: {args.dump_dir}")
    if args.time_passes:
        print(timing_report(program.result.stages), file=sys.stderr)


def _safe_stem(name: str) -> str:
    from nkic.target.names import safe_name

    return safe_name(name, "stablehlo")


def timing_report(stages: list[StageRecord]) -> str:
    """MLIR's ``-mlir-timing`` report: wall time, share of the total and op count after each stage."""
    total = sum(s.seconds for s in stages)
    rule = "===" + "-" * 73 + "==="
    title = "Execution time report".center(79).rstrip()
    lines = [rule, title, rule, f"  Total Execution Time: {total:.4f} seconds", "",
             "  ----Wall Time----  ----Ops----  ----Name----"]  # fmt: skip
    for s in stages:
        share = 100 * s.seconds / total if total else 0.0
        lines.append(f"  {s.seconds:8.4f} ({share:5.1f}%)  {s.ops:11d}  {s.name}")
    lines.append(f"  {total:8.4f} (100.0%)  {'':11s}  Total")
    return "\n".join(lines)


def _load_inputs(
    specs: list[str], neff: Any, cast: bool, required: bool = True, fill: bool = False
) -> dict[str, np.ndarray]:
    """The ``--input`` arrays; with ``fill``, an input not given is made up (seeded normal values: timing does not
    depend on them); without ``required``, one not given is left out."""
    import numpy as np

    from nkic.target.vocab import DTYPES

    declared = {v.name: v for v in neff.variables if v.kind == "input"}
    scalars = set(neff.metadata.get("scalars", ()))
    inputs: dict[str, np.ndarray] = {}
    for spec in specs:
        if "=" not in spec:
            raise CliError(f"--input '{spec}': expected NAME=FILE.npy")
        name, path = spec.split("=", 1)
        if name in inputs:
            raise CliError(f"--input {name}: given twice")
        if name not in declared:
            raise CliError(f"--input {name}: the kernel has no input '{name}' (it takes {sorted(declared)})")
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as e:
            raise CliError(f"--input {name}: cannot read {_shown(path)}: {getattr(e, 'strerror', None) or e}") from None
        var = declared[name]
        want = np.dtype(DTYPES[var.dtype])
        # .npy has no bfloat16/float8: those travel as float32 (the runtime casts them exactly, as on output).
        carrier = np.dtype(np.float32) if want.kind == "V" else want
        if array.dtype not in (want, carrier) and not cast:
            raise CliError(f"--input {name}: {path} holds {array.dtype}, the kernel takes {var.dtype} "
                           "(convert it, or pass --cast to cast it)")  # fmt: skip
        want = () if name in scalars else tuple(var.shape)  # a 0-d program input, held as one element (framework.py)
        if tuple(array.shape) != want:
            raise CliError(f"--input {name}: {path} has shape {list(array.shape)}, the kernel takes {list(want)}")
        array = array.reshape(var.shape)
        inputs[name] = array
    missing = sorted(set(declared) - set(inputs))
    if missing and fill:
        rng = np.random.default_rng(0)
        for name in missing:
            var = declared[name]
            inputs[name] = rng.standard_normal(var.shape).astype(np.float32).astype(DTYPES[var.dtype])
        missing = []
    if missing and required:
        raise CliError(f"missing --input for {', '.join(missing)} (each as --input NAME=FILE.npy)")
    return inputs


def cmd_run(args: argparse.Namespace) -> None:
    import numpy as np

    from nkic.compiler.driver import run_neff
    from nkic.runtime.neff import read_neff
    from nkic.runtime.simulator import unwritten_outputs
    from nkic.target.calibration import status_line

    data = _read(args.neff)
    neff = read_neff(data)
    profile = _file_path(args.profile, "--profile") if args.profile else None
    if args.output_dir is None and not args.timing_only:
        raise CliError("--output-dir is required (unless --timing-only)")
    if args.ranks != 1:
        _run_ranks(args, neff, profile)
        return
    inputs = _load_inputs(args.input, neff, args.cast, required=not args.timing_only)
    if args.timing_only:  # the timeline only: no numerics, so no outputs to write
        result = run_neff(neff, inputs, timing_only=True)  # for the generation it was compiled for
        print(result.profile.summary())
        print(status_line())  # how far the model is from published hardware latencies
        _write_profile(profile, args.profile, result)
        return
    out = _directory(args.output_dir, "--output-dir")
    paths = {v.name: output_path(out, v.name) for v in neff.variables if v.kind == "output"}  # before the run
    # The folder is opened before the run and the outputs are written relative to that handle, never through a
    # link: whatever is renamed or linked in --output-dir during the run, the files land in this folder.
    with safeio.Folder(out) as folder:
        result = run_neff(neff, inputs)
        unwritten = unwritten_outputs(result)  # elements no instruction wrote: they hold the NaN fill
        if unwritten and args.strict:  # a failed run writes nothing
            raise CliError(unwritten[0])
        scalars = set(neff.metadata.get("scalars", ()))
        for name, value in result.outputs.items():
            if name in scalars:  # a 0-d program output, held as one element (framework.py)
                value = value.reshape(())
            # .npy has no bfloat16/float8: such outputs are stored as float32, which holds them exactly.
            stored = value.astype(np.float32) if value.dtype.kind == "V" else value
            path = paths[name]
            folder.write_with(path.name, lambda f, stored=stored: np.save(f, stored))
            note = f" (stored as {stored.dtype})" if stored is not value else ""
            print(f"output {name}: {value.dtype}{list(value.shape)} -> {path}{note}")
    for line in unwritten:
        print(f"nkic: warning: {line}", file=sys.stderr)
    print(result.profile.summary())
    _write_profile(profile, args.profile, result)


def _rank_inputs(specs: list[str], ranks: int) -> list[list[str]]:
    """Each rank's ``--input`` specs: ``NAME=FILE.npy`` goes to every rank, ``NAME@R=FILE.npy`` to rank R only."""
    common = [s for s in specs if "@" not in s.split("=", 1)[0]]
    per_rank: list[list[str]] = [list(common) for _ in range(ranks)]
    for spec in specs:
        name, _, rest = spec.partition("=")
        if "@" not in name:
            continue
        base, _, rank = name.partition("@")
        if not rank.isdigit() or int(rank) >= ranks:
            raise CliError(f"--input '{spec}': the rank after '@' must be 0..{ranks - 1}")
        mine = per_rank[int(rank)]
        mine[:] = [s for s in mine if s.split("=", 1)[0] != base] + [f"{base}={rest}"]
    return per_rank


def _run_ranks(args: argparse.Namespace, neff: Any, profile: Path | None) -> None:
    """``--ranks N``: N ranks run the NEFF in one simulation (runtime/ranks.py), each with its own HBM and inputs;
    rank r's output NAME is written to ``NAME.rank<r>.npy``."""
    import numpy as np

    from nkic.runtime.ranks import MAX_RANKS, simulate_ranks
    from nkic.target.machine import DEFAULT_TARGET

    if not 1 <= args.ranks <= MAX_RANKS:
        raise CliError(f"--ranks {args.ranks}: from 1 to {MAX_RANKS} ranks")
    inputs = [_load_inputs(specs, neff, args.cast, required=not args.timing_only)
              for specs in _rank_inputs(args.input, args.ranks)]  # fmt: skip
    target = str(neff.metadata.get("target") or DEFAULT_TARGET)
    if args.timing_only:
        results = simulate_ranks([neff] * args.ranks, inputs, target=target, timing_only=True)
        print(results[0].profile.summary())
        _write_profile(profile, args.profile, results[0])
        return
    out = _directory(args.output_dir, "--output-dir")
    paths = [{v.name: output_path(out, f"{v.name}.rank{r}") for v in neff.variables if v.kind == "output"}
             for r in range(args.ranks)]  # fmt: skip
    with safeio.Folder(out) as folder:
        results = simulate_ranks([neff] * args.ranks, inputs, target=target)
        for r, result in enumerate(results):
            for name, value in result.outputs.items():
                stored = value.astype(np.float32) if value.dtype.kind == "V" else value
                folder.write_with(paths[r][name].name, lambda f, stored=stored: np.save(f, stored))
                print(f"rank {r} output {name}: {value.dtype}{list(value.shape)} -> {paths[r][name]}")
    print(results[0].profile.summary())
    _write_profile(profile, args.profile, results[0])


def _write_profile(path: Path | None, shown: str, result: Any) -> None:
    if path is not None:
        safeio.write_text(path, json.dumps(result.profile.to_chrome_trace()))
        print(f"profile (Chrome trace JSON, opens in Perfetto): {shown}")


def output_path(out: Path, name: str) -> Path:
    """``out/<name>.npy``, refused unless ``name`` is a safe name (target/names.py: a NEFF is untrusted, its names
    must not escape the folder) and nothing but a regular file is there (a symbolic link is never written through;
    checked here before the run, and again when writing)."""
    from nkic.target.names import is_safe_name

    if not is_safe_name(name):
        raise CliError(f"output name {name[:60]!r} is not a safe file name; refusing to write it")
    path = out / f"{name}.npy"
    safeio.check_destination(path)
    return path


def _shown(text: str) -> str:
    """A path or name for an error message: NUL and other control characters escaped, long ones cut."""
    shown = text if text.isprintable() else repr(text)
    return shown if len(shown) <= 80 else f"{shown[:60]}...({len(text)} characters)"


# safeio's errors whose reason is nkic's own sentence naming the culprit ("the directory nodir does not exist",
# "afile is not a directory", "it is a symbolic link ..."); any other is the OS's word for it.
_NAMED_REASONS = (0, errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EEXIST)


def _directory(text: str, option: str) -> Path:
    """Create the directory ``text`` names (with its parents); one-line errors name the option and the path."""
    path = Path(text)
    if "\0" in text:
        raise CliError(f"{option} {_shown(text)}: a path cannot contain NUL")
    try:
        safeio.make_dirs(path)
    except safeio.OutputError as e:
        reason = e.strerror if e.errno in _NAMED_REASONS else f"cannot create the directory ({e.strerror})"
        raise CliError(f"{option} {_shown(text)}: {reason}") from None
    return path


def _file_path(text: str, option: str) -> Path:
    """A file the command will write: checked before any work is done (its folder exists, nothing but a regular file
    is there: not a folder, not a symbolic link; the file system takes the name). The write checks again."""
    path = Path(text)
    if "\0" in text:
        raise CliError(f"{option} {_shown(text)}: a path cannot contain NUL")
    try:
        safeio.check_destination(path)
    except safeio.OutputError as e:
        if e.errno == errno.EISDIR:
            reason = "is a directory"
        else:
            reason = e.strerror if e.errno in _NAMED_REASONS else f"cannot write there ({e.strerror})"
        raise CliError(f"{option} {_shown(text)}: {reason}") from None
    return path


def cmd_info(args: argparse.Namespace) -> None:
    from nkic.runtime.neff import read_neff

    neff = read_neff(_read(args.neff))
    print(f"NEFF {neff.name}: {len(neff.subgraphs)} subgraph(s)")
    for k, v in sorted(neff.metadata.items()):
        print(f"  {k}: {v}")
    for var in neff.variables:
        print(f"  var {var.name}: {var.kind} {var.dtype}{list(var.shape)}")
    for sg in neff.subgraphs:
        counts = ", ".join(f"{e} {len(i)}" for e, i in sg.engines.items())
        print(f"  {sg.name}: {counts}")


def cmd_profile(args: argparse.Namespace) -> None:
    from nkic.compiler.driver import run_neff
    from nkic.runtime.neff import read_neff
    from nkic.runtime.timeline_png import png_bytes, render
    from nkic.target.calibration import status_line

    data = _read(args.neff)
    neff = read_neff(data)
    output = _file_path(args.output, "-o")
    trace = _file_path(args.trace, "--trace") if args.trace else None
    if args.width < 200:
        raise CliError(f"--width {args.width}: at least 200 pixels")
    inputs = _load_inputs(args.input, neff, args.cast, fill=True)
    result = run_neff(neff, inputs)  # for the generation it was compiled for
    profile = result.profile
    print(profile.summary())
    print(status_line())  # how far the model is from published hardware latencies
    if any(sg.sources for sg in neff.subgraphs):
        print("busiest kernel lines (every engine and queue):")
        for (loc, call), (count, busy) in list(profile.by_source().items())[: args.top]:
            print(f"  {busy:>12.1f} ns {count:>6} instrs  {loc}  {call}")
    png = png_bytes(render(profile, args.width, neff.name))
    safeio.write_bytes(output, png)
    print(f"timeline ({len(png)} bytes PNG): {args.output}")
    if trace is not None:
        safeio.write_text(trace, json.dumps(profile.to_chrome_trace()))
        print(f"profile (Chrome trace JSON, opens in Perfetto): {args.trace}")


def parse_space(texts: list[str]) -> dict[str, list[Any]]:
    """``--space NAME=V1,V2,...`` (each value a Python literal or a bare word), several, or ``--space FILE.json``
    (``{"NAME": [V1, V2]}``); a name given twice is an error."""
    space: dict[str, list[Any]] = {}
    for text in texts:
        if "=" in text:
            name, values = text.split("=", 1)
            if not name.isidentifier():
                raise CliError(f"--space '{_shown(text)}': '{_shown(name)}' is not a parameter name")
            part = {name: [_space_value(name, v) for v in values.split(",")]}
        else:
            part = _space_file(text)
        for name, values in part.items():
            if name in space:
                raise CliError(f"--space {name}: given twice")
            space[name] = values
    if not space:
        raise CliError("nkic tune needs --space NAME=V1,V2,... (or --space FILE.json)")
    return space


def _space_value(name: str, text: str) -> Any:
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    if _BARE_WORD.fullmatch(text):
        return text
    raise CliError(f"--space {name}: '{_shown(text)}' is not a Python literal (quote a string)")


def _space_file(path: str) -> dict[str, list[Any]]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:  # ValueError: not JSON, not UTF-8, an embedded NUL
        raise CliError(f"--space {_shown(path)}: expected NAME=V1,V2,... or a JSON file ({getattr(e, 'strerror', None) or e})") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise CliError(f"--space {_shown(path)}: the JSON file must be an object of lists, as {{\"TILES\": [1, 2]}}")
    return data


def cmd_tune(args: argparse.Namespace) -> None:
    """``nkic tune FILE.py:KERNEL --arg ... --space NAME=V1,V2``: compile and time (timing only) each configuration;
    the table sorted by latency, the best, and with ``--output-dir`` tune.json / tune.csv there."""
    from nkic.api import tuning as tune
    from nkic.frontend import NkiError

    _check_grid(args.grid)
    if args.jobs < 1 or args.workers < 1 or (args.trials is not None and args.trials < 1):
        raise CliError("--jobs, --workers and --trials take a positive integer")
    space = parse_space(args.space)
    kwargs = parse_args(args.arg)
    kernel = load_kernel(args.kernel)
    if set(kwargs) & set(space):
        raise CliError(f"--space {sorted(set(kwargs) & set(space))[0]}: also given as --arg")
    if args.grid != 1:
        kernel = kernel[args.grid]
    if args.output_dir:
        _directory(args.output_dir, "--output-dir")
    try:
        tune.check_space(kernel, space)
        _check_arguments(kernel, {**kwargs, **space})
        run = tune.tune(kernel, space, strategy=args.strategy, trials=args.trials, seed=args.seed,
                        executor=args.executor, jobs=args.jobs, address=args.address, workers=args.workers,
                        output_dir=args.output_dir, quiet=True)  # fmt: skip
        report = run(**kwargs)
    except NkiError as e:  # the space, the options or the executor: not a line of the user's file
        raise CliError(e.what) from None
    print(report.table())
    print(report.notes(), end="")
    print(report.summary())
    if args.output_dir:
        print(f"results: {os.path.join(args.output_dir, tune.RESULT_FILES[0])}, {tune.RESULT_FILES[1]}")


def cmd_demo(args: argparse.Namespace) -> None:
    from nkic.tools.demo import run_demo

    run_demo(_directory(args.out_dir, "--out-dir"))


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except (OSError, ValueError) as e:  # ValueError: an embedded NUL
        raise CliError(f"cannot read {_shown(path)}: {getattr(e, 'strerror', None) or e}") from None


def cmd_cache(args: argparse.Namespace) -> None:
    """``nkic cache info``: the folder, its entries and bytes against the limit; ``nkic cache clear``: remove every
    entry (and leftover temporary files)."""
    from nkic.compiler import cache

    directory = cache.cache_dir()
    if directory is None and args.action == "info":
        print(f"cache: off (set {cache.CACHE_DIR_ENV} to a folder to turn it on)")
        return
    if directory is None:
        raise CliError(f"the NEFF cache is off: set {cache.CACHE_DIR_ENV} to a folder")
    if args.action == "clear":
        try:
            removed = cache.clear(directory)
        except OSError as e:
            raise CliError(f"cannot clear {directory}: {e.strerror or e}") from None
        print(f"removed {removed} entries from {directory}")  # outside the try: a closed stdout is not a cache error
        return
    st = cache.stats(directory)
    print(f"cache: {directory}")
    print(f"entries: {st.entries}")
    print(f"bytes: {st.bytes} (limit {cache.max_bytes()}, {cache.MAX_BYTES_ENV})")
    if st.temporary:
        print(f"temporary files: {st.temporary} (writes in progress, or left by killed processes; removed after an hour)")


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
    c.set_defaults(func=cmd_compile)
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
    r.set_defaults(func=cmd_run)
    i = sub.add_parser("info", help="describe a NEFF")
    i.add_argument("neff")
    i.set_defaults(func=cmd_info)
    pr = sub.add_parser("profile", help="simulate a NEFF and draw its per-engine timeline as a PNG")
    pr.add_argument("neff")
    pr.add_argument("-o", "--output", required=True, help="the timeline PNG")
    pr.add_argument("--input", action="append", default=[], help="NAME=FILE.npy (inputs not given are made up)")
    pr.add_argument("--cast", action="store_true", help="cast inputs whose .npy dtype differs from the kernel's")
    pr.add_argument("--trace", help="also write the Chrome trace-event JSON profile")
    pr.add_argument("--width", type=int, default=1600, help="picture width in pixels")
    pr.add_argument("--top", type=int, default=10, help="kernel lines to list by busy time")
    pr.set_defaults(func=cmd_profile)
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
    t.set_defaults(func=cmd_tune)
    ca = sub.add_parser("cache", help="the NEFF cache (NKIC_CACHE_DIR): info, or clear it")
    ca.add_argument("action", choices=("info", "clear"))
    ca.set_defaults(func=cmd_cache)
    d = sub.add_parser("demo", help="compile, run and check a bundled kernel")
    d.add_argument("--out-dir", default="out/demo")
    d.set_defaults(func=cmd_demo)
    return p


def default_blas_threads() -> None:
    """Default ``OPENBLAS_NUM_THREADS`` to 1 for this process (a value already set wins).

    The simulator runs many small (<=128x512) matmuls; a threaded BLAS only adds contention there (measured 30x
    slower on 2 busy cores). OpenBLAS reads the variable once, when numpy is first imported, so this must run before
    that: it is the first thing ``main`` does, and this module imports numpy only inside the commands. When numpy is
    already loaded (``main`` called from Python) it has no effect on the running BLAS. Importing nkic itself never
    sets environment variables."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    """The ``nkic`` command; returns the exit status. Ctrl-C is one line and status 130, a closed stdout is quiet
    with status 141 (see the module docstring), whatever the command was doing, argument parsing included."""
    default_blas_threads()
    args: argparse.Namespace | None = None
    with Interrupts() as interrupts:
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


def _dispatch(args: argparse.Namespace, interrupts: Interrupts) -> int:
    if args.debug:
        args.func(args)
        return 0
    from xdsl.utils.exceptions import PassFailedException

    from nkic.frontend import NkiError
    from nkic.runtime.errors import SimulationError
    from nkic.runtime.neff import NeffFormatError

    try:
        args.func(args)
    except BrokenPipeError:  # an OSError, but not a failure of the command: main ends quietly
        raise
    except (CliError, NkiError, NeffFormatError, SimulationError, PassFailedException, safeio.OutputError,
            ValueError, TypeError, KeyError) as e:  # fmt: skip
        return _failed(error_line(e), e, interrupts)
    except Exception as e:  # any other failure is still one line unless --debug
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
