"""``nkic``: compile an NKI kernel file to a NEFF, run a NEFF in the simulator, describe a NEFF.

    nkic compile kernel.py:my_kernel --arg a=float32[256,512] --arg scale=0.5 [--grid 2] -o k.neff --dump-dir ir/
                 [--time-passes] [--verify-each-pass]
    nkic run k.neff --input a=a.npy --output-dir out/ --profile trace.json
    nkic info k.neff
    nkic demo [--out-dir DIR]

Errors print one message and exit non-zero; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

# numpy is imported inside the commands only, so that main() can still choose the BLAS threading (see below).
if TYPE_CHECKING:
    import numpy as np

    from nkic.driver import StageRecord

_SPEC = re.compile(r"^(?P<dtype>[A-Za-z_][A-Za-z0-9_]*)\[(?P<dims>[0-9,\s]*)\]$")


class CliError(Exception):
    pass


def parse_arg(text: str) -> tuple[str, Any]:
    """``NAME=DTYPE[D0,D1]`` -> a TensorSpec placeholder; ``NAME=VALUE`` -> a Python literal (else the string)."""
    from nkic.frontend import TensorSpec

    if "=" not in text:
        raise CliError(f"--arg '{text}': expected NAME=DTYPE[D0,D1,...] or NAME=VALUE")
    name, value = text.split("=", 1)
    m = _SPEC.match(value.strip())
    if m:
        dims = tuple(int(d) for d in m.group("dims").split(",") if d.strip())
        return name, TensorSpec(dims, m.group("dtype"))
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def load_kernel(target: str) -> Any:
    import nkic
    from nkic.frontend import Kernel

    if ":" not in target:
        raise CliError(f"'{target}': expected FILE.py:KERNEL")
    path, name = target.rsplit(":", 1)
    file = Path(path)
    if not file.is_file():
        raise CliError(f"{path}: no such file")
    nkic.install_nki_alias()
    spec = importlib.util.spec_from_file_location(f"nkic_user_{file.stem}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    kernel = getattr(module, name, None)
    if not isinstance(kernel, Kernel):
        raise CliError(f"{path}: '{name}' is not an @nki.jit kernel")
    return kernel


def cmd_compile(args: argparse.Namespace) -> None:
    from nkic.driver import compile_kernel

    kernel = load_kernel(args.kernel)
    if args.grid != 1:
        kernel = kernel[args.grid]
    kwargs = dict(parse_arg(a) for a in args.arg)
    result = compile_kernel(kernel, (), kwargs, dump_dir=args.dump_dir, verify_each_pass=args.verify_each_pass or None)
    Path(args.output).write_bytes(result.neff)
    how = "from the cache" if result.cached else f"{result.total_seconds:.2f} s"
    print(f"compiled {kernel.name}: {len(result.neff)} bytes -> {args.output} ({how})")
    if args.dump_dir:
        print(f"IR after every stage: {args.dump_dir}")
    if args.time_passes:
        print(timing_report(result.stages), file=sys.stderr)


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


def _load_inputs(specs: list[str]) -> dict[str, np.ndarray]:
    import numpy as np

    inputs = {}
    for spec in specs:
        if "=" not in spec:
            raise CliError(f"--input '{spec}': expected NAME=FILE.npy")
        name, path = spec.split("=", 1)
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise CliError(f"--input {name}: cannot read {path}: {e}") from e
    return inputs


def cmd_run(args: argparse.Namespace) -> None:
    import numpy as np

    from nkic.driver import run_neff
    from nkic.runtime.neff import read_neff

    data = _read(args.neff)
    target = read_neff(data).metadata.get("target", "gen3")
    result = run_neff(data, _load_inputs(args.input), target=str(target))
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, value in result.outputs.items():
        # .npy has no bfloat16/float8: such outputs are stored as float32, which holds them exactly.
        stored = value.astype(np.float32) if value.dtype.kind == "V" else value
        np.save(out / f"{name}.npy", stored)
        note = f" (stored as {stored.dtype})" if stored is not value else ""
        print(f"output {name}: {value.dtype}{list(value.shape)} -> {out / (name + '.npy')}{note}")
    print(result.profile.summary())
    if args.profile:
        result.profile.write_chrome_trace(args.profile)
        print(f"profile (Chrome trace JSON, opens in Perfetto): {args.profile}")


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


def cmd_demo(args: argparse.Namespace) -> None:
    from nkic.tools.demo import run_demo

    run_demo(Path(args.out_dir))


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror}") from e


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nkic", description="The nkic NKI compiler and NeuronCore simulator.")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="compile FILE.py:KERNEL to a NEFF")
    c.add_argument("kernel")
    c.add_argument("--arg", action="append", default=[], help="NAME=DTYPE[D0,D1,...] or NAME=VALUE")
    c.add_argument("--grid", type=int, default=1, help="SPMD programs to launch (kernel[N])")
    c.add_argument("-o", "--output", required=True)
    c.add_argument("--dump-dir", help="write the IR after every stage here")
    c.add_argument("--time-passes", action="store_true",
                   help="print the wall time and op count of every stage (as MLIR's -mlir-timing)")  # fmt: skip
    c.add_argument("--verify-each-pass", action="store_true",
                   help="verify the IR after every pass (default: once, after the last pass; "
                        "NKIC_VERIFY_EACH_PASS=1 does the same)")  # fmt: skip
    c.set_defaults(func=cmd_compile)
    r = sub.add_parser("run", help="run a NEFF in the simulator")
    r.add_argument("neff")
    r.add_argument("--input", action="append", default=[], help="NAME=FILE.npy")
    r.add_argument("--output-dir", required=True)
    r.add_argument("--profile", help="write a Chrome trace-event JSON profile")
    r.set_defaults(func=cmd_run)
    i = sub.add_parser("info", help="describe a NEFF")
    i.add_argument("neff")
    i.set_defaults(func=cmd_info)
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
    default_blas_threads()
    args = build_parser().parse_args(argv)
    if args.debug:
        args.func(args)
        return 0
    from nkic.frontend import NkiError
    from nkic.runtime.neff import NeffFormatError

    try:
        args.func(args)
    except (CliError, NkiError, NeffFormatError, ValueError, TypeError, KeyError) as e:
        print(f"nkic: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # any other failure is still one line unless --debug
        print(f"nkic: error: {type(e).__name__}: {e} (rerun with --debug for the traceback)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
