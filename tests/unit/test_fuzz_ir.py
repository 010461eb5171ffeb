"""IR mutation fuzzing (issue 12, item 7): stage dumps of real kernels, mutated, through the rest of the pipeline.

Three bundled kernels (``tensor_add``, ``matmul``, ``softmax``) are compiled with ``dump_dir``; every stage dump is
the input of the passes after it. A mutant is one dump with a few seeded edits -- a token replaced by another of the
file's tokens, a number changed (0, -1, off by one, doubled, 2^32, 2^63...), a line deleted or duplicated, two
symbol operands swapped -- run through ``nkic-opt`` (in-process, ``tools.opt.main``) with the remaining stages of
the pipeline and ``-t neff``. Outcomes: *diagnostic* (exit 1, one diagnostic, no traceback), *success* (exit 0: the
mutant was still a valid program), *crash* (any Python exception other than a diagnostic) or *hang* (over
``SECONDS_PER_MUTANT``). Crashes and hangs fail the test, each named by its exception and the innermost nkic frame.

``make test`` runs a fixed-seed slice (``QUICK`` mutants); ``NKIC_FUZZ=long`` (``make fuzz``) runs ``LONG``
mutants and prints the counts recorded in ``bench/README.md``; ``NKIC_FUZZ_IR_MUTANTS=N`` overrides either,
``NKIC_FUZZ_SEED=N`` the seed (12).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from time_limits import Hang, time_limit

from nkic.compiler.driver import compile_kernel
from nkic.kernels.matmul import matmul
from nkic.kernels.softmax import softmax
from nkic.kernels.tensor_add import tensor_add
from nkic.frontend.tracer import TensorSpec
from nkic.target.limits import INSTRUCTIONS_VAR
from nkic.tools.opt import main as opt_main

LONG = os.environ.get("NKIC_FUZZ") == "long"
QUICK, LONG_MUTANTS = 50, 2000
MUTANTS = int(os.environ.get("NKIC_FUZZ_IR_MUTANTS", LONG_MUTANTS if LONG else QUICK))
SECONDS_PER_MUTANT = 20
SEED = int(os.environ.get("NKIC_FUZZ_SEED", 12))
MAX_INSTRUCTIONS = 4096

KERNELS = {
    "tensor_add": (tensor_add, (TensorSpec((256, 512), "float32"), TensorSpec((256, 512), "float32"))),
    "matmul": (matmul, (TensorSpec((256, 128), "float32"), TensorSpec((256, 512), "float32"))),
    "softmax": (softmax, (TensorSpec((128, 512), "float32"),)),
}
TOKEN = re.compile(r"-?\d+|[A-Za-z_][\w.]*|@[\w.]+|\S")
NUMBER = re.compile(r"(?<![\w.])-?\d+(?![\w.])")
SYMBOL = re.compile(r"@[\w.]+")
NUMBERS = (0, 1, -1, 2, 3, 127, 128, 129, 512, 2**16, 2**31, 2**32, 2**63 - 1, 2**64)


def stage_dumps(root: Path) -> list[tuple[str, str, list[str]]]:
    """(name, text, passes after it) for every stage dump of every kernel; the last stage is followed by none."""
    out = []
    for name, (kernel, specs) in KERNELS.items():
        folder = root / name
        compile_kernel(kernel, specs, dump_dir=folder)
        files = sorted(folder.glob("*.mlir"))
        stages = [f.stem.split("-", 1)[1] for f in files]
        for i, f in enumerate(files):
            # the ISA dump is followed by isa-verify again: what it accepts, -t neff must write
            out.append((f"{name}/{f.name}", f.read_text(), stages[i + 1 :] or stages[-1:]))
    return out


def mutate(text: str, rng: random.Random) -> str:
    """One to three seeded edits of ``text``."""
    lines = text.split("\n")
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        kind = rng.choice(("token", "number", "number", "delete", "duplicate", "swap"))
        if kind == "delete" and len(lines) > 1:
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "number":
            lines[i] = _replace_one(lines[i], NUMBER, rng, lambda m: str(_number(int(m.group()), rng)))
        elif kind == "swap":
            lines[i] = _swap_symbols(lines[i], rng)
        else:
            tokens = TOKEN.findall(text)
            lines[i] = _replace_one(lines[i], TOKEN, rng, lambda m: rng.choice(tokens))
    return "\n".join(lines)


def _number(n: int, rng: random.Random) -> int:
    return rng.choice((n + 1, n - 1, 2 * n, -n, rng.choice(NUMBERS), rng.choice(NUMBERS)))


def _replace_one(line: str, pattern: re.Pattern[str], rng: random.Random, new: Any) -> str:
    found = list(pattern.finditer(line))
    if not found:
        return line
    m = rng.choice(found)
    return line[: m.start()] + new(m) + line[m.end() :]


def _swap_symbols(line: str, rng: random.Random) -> str:
    found = list(SYMBOL.finditer(line))
    if len(found) < 2:
        return line
    a, b = sorted(rng.sample(found, 2), key=lambda m: m.start())
    return line[: a.start()] + b.group() + line[a.end() : b.start()] + a.group() + line[b.end() :]


def run_opt(path: Path, passes: list[str], out: Path) -> tuple[str, str]:
    """Run nkic-opt in-process on one file: (outcome, detail). A crash's detail is its exception type and the
    innermost nkic frame, so crashes group into classes."""
    args = [str(path), "-t", "neff", "-o", str(out)] + (["-p", ",".join(passes)] if passes else [])
    err = io.StringIO()
    os.environ["NKIC_TRACEBACK"] = "1"  # main() re-raises an internal error: the frame names the crash class
    try:
        with time_limit(SECONDS_PER_MUTANT), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            opt_main(args)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (1 if e.code else 0)
        if code == 1 and "Traceback" not in err.getvalue() and err.getvalue().strip():
            return "diagnostic", err.getvalue().strip().split("\n")[0]
        return ("success", "") if code == 0 else ("crash", f"exit {code}: {err.getvalue()[-300:]}")
    except Hang as e:
        return "hang", str(e)
    except Exception as e:
        frames = [f for f in traceback.extract_tb(e.__traceback__)
                  if "/nkic/" in f.filename and "/tests/" not in f.filename]  # fmt: skip
        where = f"{Path(frames[-1].filename).name}:{frames[-1].name}" if frames else "?"
        return "crash", f"{type(e).__name__} in {where}: {str(e)[:120]}"
    finally:
        os.environ.pop("NKIC_TRACEBACK", None)
    return "success", ""


def campaign(tmp: Path, mutants: int, seed: int = SEED) -> tuple[Counter[str], dict[str, list[str]]]:
    dumps = stage_dumps(tmp / "dumps")
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    crashes: dict[str, list[str]] = {}
    for n in range(mutants):
        name, text, passes = rng.choice(dumps)
        mutant = mutate(text, rng)
        path = tmp / "mutant.mlir"
        path.write_text(mutant)
        outcome, detail = run_opt(path, passes, tmp / "mutant.neff")
        counts[outcome] += 1
        if outcome in ("crash", "hang"):
            key = detail.split(":")[0] + ":" + detail.split(":")[1] if ":" in detail else detail
            crashes.setdefault(key, []).append(f"#{n} {name}: {detail}")
            (tmp / f"crash-{n}.mlir").write_text(mutant)  # reproduce: nkic-opt crash-N.mlir -p <passes> -t neff
            (tmp / f"crash-{n}.txt").write_text(f"{name}\n-p {','.join(passes)}\n{detail}\n")
    return counts, crashes


def test_ir_mutants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A mutated trip count may ask for legitimately large work (0 to 16384 unrolls to 100k instructions, which the
    # default limit allows): the campaign bounds the work per mutant with the documented limit instead.
    monkeypatch.setenv(INSTRUCTIONS_VAR, str(MAX_INSTRUCTIONS))
    counts, crashes = campaign(tmp_path, MUTANTS)
    print(f"\nIR mutants: {MUTANTS}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for key, cases in crashes.items():
        print(f"  {len(cases)} x {key}\n    " + "\n    ".join(cases[:3]))
    assert not crashes, f"{sum(map(len, crashes.values()))} crashes/hangs in {len(crashes)} classes: {list(crashes)}"
