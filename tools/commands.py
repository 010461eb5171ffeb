"""The ``nkic`` subcommands (``cmd_<name>``, which ``nkic.tools.cli`` dispatches to) and the helpers they share:
reading ``--arg``/``--space`` values, loading a kernel from its file, checking output paths.

The command line's own module (``cli.py``) parses the arguments and handles Ctrl-C, a closed stdout and errors; it
imports this one only to run a command, after choosing the BLAS threading, since this module loads numpy and the
compiler.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import errno
import importlib.util
import inspect
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.utils.exceptions import PassFailedException

import nkic
from nkic.api import tuning as tune
from nkic.compiler.driver import StageRecord, compile_kernel, run_neff
from nkic.frontend import Kernel, NkiError, TensorSpec
from nkic.frontend.errors import located_error
from nkic.interop.framework import compile_stablehlo
from nkic.runtime.errors import SimulationError
from nkic.runtime.neff import NeffFormatError, read_neff
from nkic.runtime.ranks import MAX_RANKS, simulate_ranks
from nkic.runtime.simulator import unwritten_outputs
from nkic.runtime.timeline_png import png_bytes, render
from nkic.support import safeio
from nkic.target.calibration import status_line
from nkic.target.machine import DEFAULT_TARGET
from nkic.target.names import is_safe_name, safe_name
from nkic.target.vocab import DTYPES
from nkic.tools.cli import CliError
from nkic.tools.demo import run_demo
from nkic.tools.info import read_input, shown

# The errors a command reports as its one line (``cli.error_line``); any other exception is reported with its type.
REPORTED = (CliError, NkiError, NeffFormatError, SimulationError, PassFailedException, safeio.OutputError,
            ValueError, TypeError, KeyError)  # fmt: skip

_SPEC = re.compile(r"^(?P<dtype>[A-Za-z_][A-Za-z0-9_]*)\[(?P<dims>[^\[\]]*)\]$")
_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")  # an unquoted string value (no brackets, commas, quotes)


def parse_arg(text: str) -> tuple[str, Any]:
    """``NAME=DTYPE[D0,D1]`` -> a TensorSpec placeholder; ``NAME=VALUE`` -> a Python literal, or the bare word
    itself (``mode=fast``). Anything else -- a spec with a missing bracket, a bad dimension, an unknown dtype, an
    expression -- is an error naming the argument, never silently a string."""
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
    if ":" not in target:
        raise CliError(f"'{target}': expected FILE.py:KERNEL")
    path, name = target.rsplit(":", 1)
    file = Path(path)
    if file.suffix != ".py":
        raise CliError(f"{shown(path)}: expected a Python file (FILE.py:KERNEL)")
    try:
        if not file.is_file():
            raise CliError(f"{shown(path)}: no such file")
    except (OSError, ValueError) as e:
        raise CliError(f"{shown(path)}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
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
    if args.arg or args.grid != 1:
        raise CliError("a StableHLO module takes its shapes from its @main; --arg and --grid do not apply")
    try:
        text = Path(args.kernel).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot read {shown(args.kernel)}: {e}") from None
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
            raise CliError(f"--input {name}: cannot read {shown(path)}: {getattr(e, 'strerror', None) or e}") from None
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
    data = read_input(args.neff)
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
    if not is_safe_name(name):
        raise CliError(f"output name {name[:60]!r} is not a safe file name; refusing to write it")
    path = out / f"{name}.npy"
    safeio.check_destination(path)
    return path


# safeio's errors whose reason is nkic's own sentence naming the culprit ("the directory nodir does not exist",
# "afile is not a directory", "it is a symbolic link ..."); any other is the OS's word for it.
_NAMED_REASONS = (0, errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EEXIST)


def _directory(text: str, option: str) -> Path:
    """Create the directory ``text`` names (with its parents); one-line errors name the option and the path."""
    path = Path(text)
    if "\0" in text:
        raise CliError(f"{option} {shown(text)}: a path cannot contain NUL")
    try:
        safeio.make_dirs(path)
    except safeio.OutputError as e:
        reason = e.strerror if e.errno in _NAMED_REASONS else f"cannot create the directory ({e.strerror})"
        raise CliError(f"{option} {shown(text)}: {reason}") from None
    return path


def _file_path(text: str, option: str) -> Path:
    """A file the command will write: checked before any work is done (its folder exists, nothing but a regular file
    is there: not a folder, not a symbolic link; the file system takes the name). The write checks again."""
    path = Path(text)
    if "\0" in text:
        raise CliError(f"{option} {shown(text)}: a path cannot contain NUL")
    try:
        safeio.check_destination(path)
    except safeio.OutputError as e:
        if e.errno == errno.EISDIR:
            reason = "is a directory"
        else:
            reason = e.strerror if e.errno in _NAMED_REASONS else f"cannot write there ({e.strerror})"
        raise CliError(f"{option} {shown(text)}: {reason}") from None
    return path


def cmd_profile(args: argparse.Namespace) -> None:
    data = read_input(args.neff)
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
                raise CliError(f"--space '{shown(text)}': '{shown(name)}' is not a parameter name")
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
    raise CliError(f"--space {name}: '{shown(text)}' is not a Python literal (quote a string)")


def _space_file(path: str) -> dict[str, list[Any]]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:  # ValueError: not JSON, not UTF-8, an embedded NUL
        raise CliError(f"--space {shown(path)}: expected NAME=V1,V2,... or a JSON file ({getattr(e, 'strerror', None) or e})") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise CliError(f"--space {shown(path)}: the JSON file must be an object of lists, as {{\"TILES\": [1, 2]}}")
    return data


def cmd_tune(args: argparse.Namespace) -> None:
    """``nkic tune FILE.py:KERNEL --arg ... --space NAME=V1,V2``: compile and time (timing only) each configuration;
    the table sorted by latency, the best, and with ``--output-dir`` tune.json / tune.csv there."""
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
    run_demo(_directory(args.out_dir, "--out-dir"))
