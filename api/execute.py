"""Running kernels: ``nki.simulate`` and calling a ``@nki.jit`` kernel outside a trace.

This module sits above both the frontend (which only traces) and the driver (which only compiles and runs NEFFs):
running a kernel is *trace, compile once, simulate*. Importing it registers :func:`run_kernel` as the frontend's
executor (``nkic.frontend.tracer.set_executor``), which is what makes ``kernel(*arrays)`` compile and simulate;
``nkic.api``, the public NKI module that ``import nki`` gives after the alias, imports it for that reason.

* ``simulate(kernel)(*args, **kwargs)``: the NKI ``nki.simulate``; numpy arrays in, numpy arrays out. Output
  elements the kernel never wrote (they hold the simulator's NaN fill) are one ``NkiWarning`` line per output at the
  caller's line; ``simulate(kernel, strict=True)`` makes that an ``NkiError``.
* ``run_kernel(kernel, args, kwargs)``: the executor behind both; inputs the kernel writes are copied back into the
  caller's arrays; the NEFF goes through the ``NKIC_CACHE_DIR`` cache (``nkic.compiler.cache``) when it is set.
* ``run_traced(traced, arrays)``: compile a ``TracedKernel`` (cached per trace) and simulate it on named inputs.
"""

from __future__ import annotations

import functools
import threading
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from nkic.compiler.driver import compile_call, compile_traced, run_neff
from nkic.frontend.errors import NkiError, NkiWarning, user_location
from nkic.frontend.tracer import Kernel, TensorSpec, TracedKernel, jit, set_executor
from nkic.interop import framework_call
from nkic.runtime.neff import read_neff
from nkic.runtime.ranks import MAX_RANKS, simulate_ranks
from nkic.runtime.simulator import RunResult, unwritten_outputs
from nkic.target.collectives import COLLECTIVE_OPCODES, parse_groups, parse_pairs
from nkic.target.instructions import INSTRUCTIONS

__all__ = ["run_kernel", "run_traced", "simulate", "run_ranks"]

# id(traced) -> NEFF bytes. Keyed by identity because a TracedKernel is already the per-specialization cache entry of
# its Kernel; the NEFF is dropped when the trace dies.
_NEFFS: dict[tuple[int, bool], bytes] = {}
# Threads running one trace at once (the kernel's trace cache hands them the same TracedKernel) compile it once: the
# first holds the key's lock while it builds, the others wait for its NEFF. _BUILDS_LOCK guards _BUILDS.
_BUILDS: dict[tuple[int, bool], threading.RLock] = {}
_BUILDS_LOCK = threading.Lock()


def run_traced(traced: TracedKernel, arrays: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Compile ``traced`` (once per traced kernel) and simulate it; the outputs in the kernel's return order."""
    outputs = _simulate_traced(traced, arrays)
    return [outputs[name].reshape(shape) for name, shape, _ in traced.outputs]


def _simulate_traced(traced: TracedKernel, arrays: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    """Every output variable of one simulated run (the returned ones and the final contents of written inputs)."""
    return _run(traced, arrays)[0]


def neff_of(traced: TracedKernel, build: Callable[[], bytes] | None = None, debug_info: bool = False) -> bytes:
    """The NEFF of ``traced``, made once per trace (and per ``debug_info``: with each instruction's source, for
    profiles): by ``build`` on the first call (default: compile it)."""
    key = (id(traced), debug_info)
    neff = _NEFFS.get(key)  # a hit takes no lock (a dict read is atomic)
    if neff is not None:
        return neff
    with _BUILDS_LOCK:
        building = _BUILDS.setdefault(key, threading.RLock())
    try:
        with building:
            neff = _NEFFS.get(key)
            if neff is None:
                neff = build() if build is not None else compile_traced(traced, debug_info=debug_info).neff
                _NEFFS[key] = neff
                # Drop the entry when the trace dies, so a recycled id never finds a stale NEFF.
                weakref.finalize(traced, _NEFFS.pop, key, None)
            return neff
    finally:
        with _BUILDS_LOCK:
            if _BUILDS.get(key) is building:  # a build that failed: a later thread may have put its own
                del _BUILDS[key]


def _run(
    traced: TracedKernel, arrays: Mapping[str, np.ndarray], build: Callable[[], bytes] | None = None,
    debug_info: bool = False,
) -> tuple[Mapping[str, np.ndarray], RunResult]:
    result = run_neff(neff_of(traced, build, debug_info), arrays, target=traced.options.target)
    # Under a grid a written or returned input is read from the input itself after the run (TracedKernel).
    return ({**result.inputs, **result.outputs} if traced.grid > 1 else result.outputs), result


def run_kernel(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], strict: bool = False) -> Any:
    """Trace ``kernel`` for these arguments (cached), compile, simulate; a tuple if the kernel returns one.

    An input the kernel writes is copied back into the caller's array afterwards, as NKI's simulator does. JAX and
    PyTorch arrays are accepted too (``nkic/interop/``). ``strict``: an output element the kernel never wrote is
    an error, not a warning (:func:`check_outputs_written`)."""
    run = functools.partial(_run_numpy, strict=strict) if strict else _run_numpy
    result = framework_call(kernel, args, kwargs, run)
    return run(kernel, args, kwargs) if result is NotImplemented else result


def _run_numpy(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], strict: bool = False) -> Any:
    return run_kernel_with_profile(kernel, args, kwargs, strict=strict)[0]


# One coverage warning per (message, line) for the process, as Python's "default" action: a kernel called in a loop
# would otherwise repeat it on every call.
_WARNED: dict[Any, Any] = {}


def check_outputs_written(run: RunResult, strict: bool = False, names: Mapping[str, str] | None = None) -> None:
    """The output-coverage check after a simulation: each output with elements no instruction wrote (they come back
    as the simulator's NaN fill) is one ``NkiWarning`` line at the user's call (``output 'out' rows 256..511 were
    never written``); ``strict``: the first is an ``NkiError`` instead. ``names``: the kernel's names of the output
    variables (``TracedKernel.labels``)."""
    problems = unwritten_outputs(run, names)
    if problems and strict:
        raise NkiError(problems[0], "write every element of each output, or return a smaller one")
    file, line, _ = user_location()
    for text in problems:
        warnings.warn_explicit(text, NkiWarning, file, line, registry=_WARNED)


def run_kernel_with_profile(
    kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], debug_info: bool = False, strict: bool = False
) -> tuple[Any, TracedKernel, RunResult]:
    """:func:`run_kernel`, also returning the trace (its NEFF is :func:`neff_of`) and the run (its profile);
    ``debug_info`` puts each instruction's source into the NEFF, so the profile names the kernel lines; ``strict``
    as for :func:`run_kernel`."""
    call = kernel.bind(*args, **kwargs)  # bound and specialised once: the trace, the inputs, the NEFF cache
    traced = call.trace()
    inputs: dict[str, np.ndarray] = {}
    for name, value in call.arrays:
        if isinstance(value, TensorSpec):
            raise NkiError(f"cannot run kernel '{kernel.name}' on a TensorSpec placeholder ('{name}')")
        inputs[name] = value

    # Through compile_call for the NEFF cache (NKIC_CACHE_DIR); its trace is the one above, from the trace cache.
    build = lambda: compile_call(call, debug_info=debug_info).neff  # noqa: E731
    outputs, run = _run(traced, inputs, build, debug_info=True) if debug_info else _run(traced, inputs, build)
    check_outputs_written(run, strict, traced.labels)
    for name, output in traced.written_inputs:
        if inputs[name].flags.writeable:  # a read-only array keeps its values
            np.copyto(inputs[name], outputs[output], casting="unsafe")
    results = [outputs[name].reshape(shape) for name, shape, _ in traced.outputs]
    value = tuple(results) if traced.returns_tuple else results[0] if results else None
    return value, traced, run


def simulate(kernel: Any, strict: bool = False, ranks: int | None = None) -> Callable[..., Any]:
    """``nki.simulate(kernel)(*arrays, **kwargs)``: trace, compile to a NEFF and run it on nkic's simulator.

    ``kernel`` is a ``@nki.jit`` kernel (``kernel[2]`` for a grid) or a plain function, which is jitted first.
    ``strict=True``: output elements the kernel never wrote are an ``NkiError`` (by default a warning).
    ``ranks=N``: launch N ranks (:func:`run_ranks`); the call returns a list of N per-rank results."""
    k = kernel if isinstance(kernel, Kernel) else jit(kernel)
    if ranks is not None:
        return lambda *args, **kwargs: run_ranks(k, args, kwargs, ranks, strict=strict)
    return lambda *args, **kwargs: run_kernel(k, args, kwargs, strict=strict)


# -- multi-rank launches (nki.collectives; runtime/ranks.py) ------------------------------------------------------
def _per_rank(value: Any, n: int) -> list[Any] | None:
    """A list (or tuple) of n arrays is one argument per rank; anything else is given to every rank."""
    if isinstance(value, (list, tuple)) and len(value) == n and value and all(hasattr(v, "shape") for v in value):
        return list(value)
    return None


def rank_arguments(args: tuple[Any, ...], kwargs: dict[str, Any], n: int) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Each rank's (args, kwargs): a per-rank list gives rank r its r-th array, a single value goes to every rank."""
    def pick(value: Any, r: int) -> Any:
        split = _per_rank(value, n)
        return split[r] if split is not None else value

    return [(tuple(pick(a, r) for a in args), {k: pick(v, r) for k, v in kwargs.items()}) for r in range(n)]


def run_ranks(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any], ranks: int, strict: bool = False,
              timing_only: bool = False) -> list[Any]:
    """Launch ``kernel`` on ``ranks`` ranks, each with its own HBM and arguments (:func:`rank_arguments`), in one
    simulation (``runtime/ranks.py``); returns each rank's result, in rank order. Each distinct argument signature
    is traced and compiled once; ranks whose traces differ must still agree on every collective they both reach
    (kind, replica group, shapes), else an ``NkiError`` at the kernel line of the first that differs."""
    if isinstance(ranks, bool) or not isinstance(ranks, int) or not 1 <= ranks <= MAX_RANKS:
        raise NkiError(f"ranks must be an int from 1 to {MAX_RANKS}, got {ranks!r}")
    per_rank = rank_arguments(args, kwargs, ranks)
    traces = [kernel.trace(*a, **kw) for a, kw in per_rank]
    _check_collectives(traces, ranks)
    # with each instruction's source, so a deadlock names the kernel line of the collective some rank never reached
    neffs = {id(t): read_neff(neff_of(t, debug_info=True)) for t in traces}
    inputs = [_rank_inputs(kernel, a, kw) for a, kw in per_rank]
    runs = simulate_ranks([neffs[id(t)] for t in traces], inputs, target=traces[0].options.target,
                          timing_only=timing_only)  # fmt: skip
    return [_rank_result(t, run, inp, strict) for t, run, inp in zip(traces, runs, inputs)]


def _rank_inputs(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, np.ndarray]:
    inputs = {}
    for name, value in kernel.bind(*args, **kwargs).arrays:
        if isinstance(value, TensorSpec):
            raise NkiError(f"cannot run kernel '{kernel.name}' on a TensorSpec placeholder ('{name}')")
        inputs[name] = value
    return inputs


def _rank_result(traced: TracedKernel, run: RunResult, inputs: Mapping[str, np.ndarray], strict: bool) -> Any:
    outputs = {**run.inputs, **run.outputs} if traced.grid > 1 else run.outputs
    check_outputs_written(run, strict, traced.labels)
    for name, output in traced.written_inputs:
        if inputs[name].flags.writeable:
            np.copyto(inputs[name], outputs[output], casting="unsafe")
    results = [outputs[name].reshape(shape) for name, shape, _ in traced.outputs]
    return tuple(results) if traced.returns_tuple else results[0] if results else None


def _collective_calls(traced: TracedKernel) -> list[tuple[str, str, tuple[str, ...], tuple[str, int]]]:
    """Each collective of ``traced``'s first program in order: (instruction, group or pairs, operand types, where)."""
    names = {f"penguin.{n}" for n, s in INSTRUCTIONS.items() if s.opcode in COLLECTIVE_OPCODES}
    calls = []
    for op in traced.module.walk():
        if op.name in names:
            props = op.properties
            group = props.get("replica_groups") or props.get("source_target_pairs")
            file, _, rest = str(props["loc"].data).rpartition(":")  # type: ignore[attr-defined]
            if rest.isdigit() and ":" in file and file.rpartition(":")[2].isdigit():  # file:line:col
                file, _, rest = file.rpartition(":")
            where = (file, int(rest) if rest.isdigit() else 0)
            calls.append((op.name[len("penguin."):], str(getattr(group, "data", group)),
                          tuple(str(o.type) for o in op.operands), where))
    return calls


def _check_collectives(traces: list[TracedKernel], ranks: int) -> None:
    """Every replica group names launched ranks; ranks with different traces agree on the collectives they share."""
    seen: dict[int, list] = {}
    for t in traces:
        if id(t) not in seen:
            seen[id(t)] = _collective_calls(t)
    for calls in seen.values():
        for name, group, _, where in calls:
            ranks_named = [r for p in parse_pairs(group) for r in p] if ">" in group else \
                [r for g in parse_groups(group) for r in g]  # fmt: skip
            if any(r >= ranks for r in ranks_named):
                raise NkiError(f"{name}: its replica group [{group}] names rank {max(ranks_named)}, but the launch "
                               f"has {ranks} rank(s)", "launch more ranks, or name ranks 0..N-1", where)
            left = sorted(set(range(ranks)) - set(ranks_named))
            if ">" not in group and left:  # every rank runs the program, so every rank must have a list to meet
                raise NkiError(f"{name}: rank {left[0]} is in no list of its replica group [{group}] (the launch has "
                               f"{ranks} ranks)", "give every rank of the launch a list, or launch fewer ranks", where)
    first, *others = [seen[id(t)] for t in traces]
    for r, calls in enumerate(others, 1):
        for a, b in zip(first, calls):
            if a[:3] != b[:3]:
                raise NkiError(f"collective mismatch across ranks: rank 0 runs {a[0]} over [{a[1]}] on "
                               f"{', '.join(a[2])}, rank {r} runs {b[0]} over [{b[1]}] on {', '.join(b[2])}",
                               "every rank of a replica group must reach the same collectives with the same shapes",
                               b[3])  # fmt: skip


set_executor(run_kernel)
