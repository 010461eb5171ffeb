"""Random-kernel fuzzing (issue 12, item 7): small random legal kernels, simulated and compared with numpy.

A seeded generator draws a shape (P partitions x F elements), a dtype (float32 or bfloat16) and a program of 1-8
steps over SBUF tiles of that shape -- ``nisa.tensor_tensor``, ``nisa.tensor_scalar`` (one or two stages),
``nisa.activation`` (with a scale), a row reduction (``nisa.tensor_reduce``) broadcast back through
``tensor_scalar``, ``nisa.tensor_copy``, the ``nl`` tile functions (``nl.add``, ``nl.multiply``, ``nl.maximum``,
``nl.exp``) -- and, for float32 kernels that fit one matmul, a final ``nisa.nc_matmul``. The same program runs as
the kernel (traced, compiled, simulated) and as a numpy model that computes each step in float32 and rounds to the
tile dtype on every store, as the engines do. Results must agree (float32: within 1e-5 relative; bfloat16: within
one bf16 rounding of the model). A compile error, a simulator error or a wrong number fails the test with the
program that caused it.

``make test`` runs ``QUICK`` kernels; ``NKIC_FUZZ=long`` (``make fuzz``) runs ``LONG`` and prints the counts recorded
in ``bench/README.md``; ``NKIC_FUZZ_KERNELS=N`` overrides either,
``NKIC_FUZZ_SEED=N`` the seed (12).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from typing import Any

import ml_dtypes
import numpy as np

from nkic import api as nki

nl = nki.language
nisa = nki.isa

LONG = os.environ.get("NKIC_FUZZ") == "long"
QUICK, LONG_KERNELS = 6, 200
KERNELS = int(os.environ.get("NKIC_FUZZ_KERNELS", LONG_KERNELS if LONG else QUICK))
SEED = int(os.environ.get("NKIC_FUZZ_SEED", 12))

ALU = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
       "minimum": np.minimum}  # fmt: skip
ACT = {"copy": lambda x: x, "exp": np.exp, "tanh": np.tanh, "relu": lambda x: np.maximum(x, np.float32(0)),
       "abs": np.abs, "square": np.square,
       "sigmoid": lambda x: np.float32(1) / (np.float32(1) + np.exp(-x))}  # fmt: skip
NL = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum}
REDUCE = {"add": lambda x: np.sum(x, axis=1, keepdims=True, dtype=np.float32),
          "maximum": lambda x: np.max(x, axis=1, keepdims=True)}  # fmt: skip
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}


def generate(rng: random.Random) -> dict[str, Any]:
    """One random program: shape, dtype and steps; every operand index names an existing tile."""
    p, f = rng.choice([1, 2, 7, 32, 64, 100, 128]), rng.choice([1, 3, 16, 64, 100, 128, 257, 512])
    dtype = rng.choice(list(DTYPES))
    steps: list[tuple[Any, ...]] = []
    tiles = 2  # the two inputs
    for _ in range(rng.randint(1, 8)):
        pick = lambda: rng.randrange(tiles)  # noqa: E731
        kind = rng.choice(["tt", "ts", "act", "row", "copy", "nl"])
        const = lambda: float(np.float32(round(rng.uniform(-2, 2), 3)))  # noqa: E731
        if kind == "tt":
            steps.append(("tt", rng.choice(list(ALU)), pick(), pick()))
        elif kind == "ts":
            two = rng.random() < 0.5
            op0, c0 = rng.choice(list(ALU)), const()
            op1 = rng.choice(list(ALU)) if two else None
            steps.append(("ts", op0, c0, op1, const(), pick()))
        elif kind == "act":
            steps.append(("act", rng.choice(list(ACT)), rng.choice([1.0, 0.5, -1.0]), pick()))
        elif kind == "row":
            steps.append(("row", rng.choice(list(REDUCE)), rng.choice(list(ALU)), pick(), pick()))
        elif kind == "copy":
            steps.append(("copy", pick()))
        else:
            steps.append(("nl", rng.choice(list(NL) + ["exp"]), pick(), pick()))
        tiles += 1
    matmul = dtype == "float32" and f <= 128 and rng.random() < 0.3
    return {"shape": (p, f), "dtype": dtype, "steps": steps, "matmul": matmul}


def make_kernel(prog: dict[str, Any]) -> Any:
    """The program as an NKI kernel of two (P, F) inputs."""
    shape, steps = prog["shape"], prog["steps"]

    def random_kernel(a, b):
        dt = a.dtype
        tiles = []
        for src in (a, b):
            t = nl.ndarray(shape, dtype=dt, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=src)
            tiles.append(t)
        for step in steps:
            tiles.append(_emit(step, tiles, shape, dt))
        last = tiles[-1]
        if prog["matmul"]:
            acc = nl.ndarray((shape[1], shape[1]), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=acc, stationary=tiles[-2] if len(tiles) > 2 else tiles[0], moving=last)
            last = nl.ndarray(acc.shape, dtype=dt, buffer=nl.sbuf)
            nisa.tensor_copy(dst=last, src=acc)
        out = nl.ndarray(last.shape, dtype=dt, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=last)
        return out

    return nki.jit(random_kernel)


def _emit(step: tuple[Any, ...], tiles: list[Any], shape: tuple[int, int], dt: Any) -> Any:
    kind = step[0]
    if kind == "nl":
        fn, i, j = step[1:]
        return nl.exp(tiles[i]) if fn == "exp" else getattr(nl, fn)(tiles[i], tiles[j])
    dst = nl.ndarray(shape, dtype=dt, buffer=nl.sbuf)
    if kind == "tt":
        nisa.tensor_tensor(dst=dst, data1=tiles[step[2]], data2=tiles[step[3]], op=getattr(nl, step[1]))
    elif kind == "ts":
        op0, c0, op1, c1, i = step[1:]
        extra = {} if op1 is None else {"op1": getattr(nl, op1), "operand1": c1}
        nisa.tensor_scalar(dst=dst, data=tiles[i], op0=getattr(nl, op0), operand0=c0, **extra)
    elif kind == "act":
        nisa.activation(dst=dst, op=getattr(nl, step[1]), data=tiles[step[3]], scale=step[2])
    elif kind == "row":
        red, op, i, j = step[1:]
        r = nl.ndarray((shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=getattr(nl, red), data=tiles[i], axis=1)
        nisa.tensor_scalar(dst=dst, data=tiles[j], op0=getattr(nl, op), operand0=r)
    else:
        nisa.tensor_copy(dst=dst, src=tiles[step[1]])
    return dst


def model(prog: dict[str, Any], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy: every step in float32, each result rounded to the tile dtype (the engines' store)."""
    dt = DTYPES[prog["dtype"]]
    store = lambda x: np.asarray(x, np.float32).astype(dt)  # noqa: E731
    tiles = [a, b]
    f32 = lambda i: tiles[i].astype(np.float32)  # noqa: E731
    for step in prog["steps"]:
        kind = step[0]
        with np.errstate(all="ignore"):
            if kind == "tt":
                tiles.append(store(ALU[step[1]](f32(step[2]), f32(step[3]))))
            elif kind == "ts":
                op0, c0, op1, c1, i = step[1:]
                v = ALU[op0](f32(i), np.float32(c0))
                tiles.append(store(v if op1 is None else ALU[op1](v, np.float32(c1))))
            elif kind == "act":
                tiles.append(store(ACT[step[1]](f32(step[3]) * np.float32(step[2]))))
            elif kind == "row":
                red, op, i, j = step[1:]
                tiles.append(store(ALU[op](f32(j), REDUCE[red](f32(i)))))
            elif kind == "copy":
                tiles.append(tiles[step[1]].copy())
            else:
                fn, i, j = step[1:]
                tiles.append(store(np.exp(f32(i)) if fn == "exp" else NL[fn](f32(i), f32(j))))
    last = tiles[-1]
    if prog["matmul"]:
        stationary = tiles[-2] if len(tiles) > 2 else tiles[0]
        last = store(stationary.astype(np.float32).T @ last.astype(np.float32))
    return last


def check(prog: dict[str, Any], seed: int) -> str:
    """Run one program both ways: "ok", or an AssertionError naming the program."""
    data = np.random.default_rng(seed)
    dt = DTYPES[prog["dtype"]]
    a, b = (data.uniform(-1, 1, prog["shape"]).astype(np.float32).astype(dt) for _ in range(2))
    with np.errstate(all="ignore"):
        got = np.asarray(nki.simulate(make_kernel(prog))(a, b))
    want = model(prog, a, b)
    rtol, atol = (1e-5, 1e-6) if prog["dtype"] == "float32" else (2**-7, 1e-3)
    if prog["matmul"]:
        rtol, atol = 1e-4, 1e-4 * float(np.abs(want).max(initial=1.0))
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=rtol, atol=atol, equal_nan=True,
                               err_msg=f"random kernel {prog}")  # fmt: skip
    return "ok"


def test_random_kernels() -> None:
    rng = random.Random(SEED)
    counts: Counter[str] = Counter()
    failures: list[str] = []
    for n in range(KERNELS):
        prog = generate(rng)
        counts["kernels"] += 1
        counts["steps"] += len(prog["steps"])
        try:
            counts[check(prog, n)] += 1
        except AssertionError as e:
            counts["wrong"] += 1
            failures.append(f"#{n}: {str(e)[:600]}")
        except Exception as e:  # a compile or simulation error on a legal kernel is a bug
            counts["error"] += 1
            failures.append(f"#{n}: {type(e).__name__}: {str(e)[:300]} in {prog}")
    print(f"\nrandom kernels: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for f in failures[:10]:
        print("  " + f)
    assert not failures, f"{len(failures)} of {KERNELS} random kernels failed: {failures[:3]}"
