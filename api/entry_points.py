"""The NKI entry points of the legacy generation, with their documented meaning on a CPU.

Each compiles the kernel to a NEFF and runs it on nkic's simulator; nothing here needs a device:

* ``simulate_kernel(kernel, *args, **kwargs)``: run it; numpy in, numpy out (``kernel`` may be ``k[grid]``).
* ``baremetal(kernel, save_neff_name=, save_trace_name=, ...)``: a kernel that runs when called, writing its NEFF and
  its profile (Chrome trace-event JSON, which Perfetto opens) when those names are given.
* ``benchmark(kernel, warmup=, iters=, save_neff_name=, save_trace_name=, ...)``: runs it, records the latency in
  ``.benchmark_result.nc_latency`` and prints the latency percentiles (as the SDK prints neuron-bench's statistics).
  The latency is the simulator's cost model, stated as simulated: a run is deterministic, so every percentile is the
  same value, and ``warmup``/``iters`` change nothing.
* ``profile(func, working_directory=, save_neff_name=, save_trace_name=, overwrite=, profile_nth=)``: writes the NEFF
  and the profile of the ``profile_nth`` call into ``working_directory``.
* ``trace(kernel)``: the sub-kernel decorator (``mode="trace"``); the kernel traces, and runs when called.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nkic.api.execute import neff_of, run_kernel_with_profile, simulate
from nkic.compiler.driver import compile_call, run_neff
from nkic.frontend.context import active_context
from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import Kernel, TensorSpec, jit
from nkic.runtime.simulator import RunResult
from nkic.support import safeio
from nkic.target.calibration import status_line

__all__ = ["baremetal", "benchmark", "profile", "simulate_kernel", "trace"]

_PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``kernel`` (a kernel, ``kernel[grid]``, ``baremetal(k)[grid]``, or a plain function) on ``args`` in the
    simulator."""
    if isinstance(kernel, _Runner):
        return kernel(*args, **kwargs)
    return simulate(kernel)(*args, **kwargs)


def trace(kernel: Callable[..., Any] | None = None, **options: Any) -> Any:
    """``@nki.trace``: a kernel that other kernels call, or that runs (traced, compiled, simulated) when called."""
    return jit(kernel, **options)


@dataclass(frozen=True)
class Latency:
    """Simulated latency of one run in microseconds: every percentile is that one value (a run is deterministic)."""

    us: float

    def get_latency_percentile(self, percentile: int) -> float:
        if percentile not in _PERCENTILES:
            raise NkiError(f"latency percentile {percentile} is not one of {_PERCENTILES}")
        return self.us


@dataclass(frozen=True)
class BenchmarkResult:
    nc_latency: Latency
    simulated: bool = True


class _Runner(Kernel):
    """A kernel wrapper that runs on call and keeps what the run produced; ``runner[grid]`` keeps the options.

    It is itself a ``Kernel`` of the same function, so the legacy decorators stack as the repositories stack them:
    ``@nki.jit`` (no options) over ``@nki.baremetal`` keeps the runner, ``nki.simulate``/``simulate_kernel`` run it,
    a kernel calling it inlines it, and ``@nki.baremetal`` over ``@nki.benchmark(...)`` is one runner with both
    sets of artifacts (the outer decorator's win where both name one)."""

    def __init__(self, kernel: Any, artifacts: dict[str, Any]) -> None:
        if isinstance(kernel, _Runner):
            artifacts = {**kernel.artifacts, **artifacts}
            kernel = kernel.kernel
        self.kernel: Kernel = kernel if isinstance(kernel, Kernel) else jit(kernel)
        super().__init__(self.kernel.func, self.kernel.grid, self.kernel.options, self.kernel.cache)
        self.artifacts = artifacts
        self.benchmark_result: BenchmarkResult | None = None
        self.calls = 0

    def __getitem__(self, grid: Any) -> _Runner:
        return type(self)(self.kernel[grid], self.artifacts)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if active_context() is not None:  # called by a kernel being traced: a sub-kernel, inlined
            return super().__call__(*args, **kwargs)
        if self.artifacts.get("timing_only"):
            return self._time_only(args, kwargs)
        debug = bool(self.artifacts.get("save_trace_name"))  # a profile names each instruction's kernel line
        value, traced, run = run_kernel_with_profile(self.kernel, args, kwargs, debug_info=debug)
        self.calls += 1
        if self.calls == self.artifacts.get("_save_on_call", self.calls):  # nki.profile(profile_nth=): that run only
            self._save(neff_of(traced, debug_info=debug), run)
        self.benchmark_result = BenchmarkResult(Latency(run.profile.total_ns / 1000.0))
        if self.artifacts.get("_report"):
            print(self._report(), flush=True)
        return value

    def _report(self) -> str:
        """What ``nki.benchmark`` prints after a run (the SDK prints neuron-bench's latency statistics): the
        percentiles of the simulated latency, said to be simulated; then the model's calibration status (its median
        error on the public measurements of ``target/calibration.py``), one line."""
        assert self.benchmark_result is not None
        latency = self.benchmark_result.nc_latency
        cells = ", ".join(f"p{p}={latency.get_latency_percentile(p):.3f}" for p in _PERCENTILES)
        warmup, iters = self.artifacts.get("_warmup"), self.artifacts.get("_iters")
        return (f"nki.benchmark {self.kernel.name}: simulated NeuronCore latency (nkic cost model, not a device "
                f"measurement; warmup={warmup}, iters={iters} change nothing) in us: {cells}\n"
                f"{status_line()}")  # fmt: skip

    def _time_only(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``timing_only=True``: compile, then simulate the timeline without numerics; arguments may be
        ``TensorSpec`` placeholders (or arrays, which are only read by registers loaded from memory). Returns None:
        no outputs are computed; the latency is in ``benchmark_result`` and the trace in ``save_trace_name``."""
        call = self.kernel.bind(*args, **kwargs)  # bound and specialised once
        traced = call.trace()
        neff = neff_of(traced, lambda: compile_call(call).neff)
        arrays = {name: value for name, value in call.arrays if not isinstance(value, TensorSpec)}
        run = run_neff(neff, arrays, target=traced.options.target, timing_only=True)
        self._save(neff, run)
        self.benchmark_result = BenchmarkResult(Latency(run.profile.total_ns / 1000.0))
        if self.artifacts.get("_report"):
            print(self._report(), flush=True)
        return None

    def _save(self, neff: bytes, run: RunResult) -> None:
        """Write the NEFF and the profile that were asked for, each atomically and never through a symbolic link
        (``nkic.support.safeio``); a failure is one ``NkiError`` naming the file and why."""
        folder = Path(self.artifacts.get("working_directory") or self.artifacts.get("artifacts_dir") or ".")
        overwrite = self.artifacts.get("overwrite", True)
        for key, write in (("save_neff_name", lambda p: safeio.write_bytes(p, neff)),
                           ("save_trace_name", lambda p: run.profile.write_chrome_trace(p))):  # fmt: skip
            name = self.artifacts.get(key)
            if not name:
                continue
            path = folder / os.fspath(name)
            if os.path.lexists(path) and not overwrite:  # a link counts: it is there, even when it leads nowhere
                raise NkiError(f"{path} exists", "pass overwrite=True to replace it")
            try:
                safeio.make_dirs(path.parent)
                write(path)
            except safeio.OutputError as e:
                raise NkiError(str(e)) from None


def _runner(kernel: Any, artifacts: dict[str, Any]) -> Any:
    """``_Runner(kernel)``, or the decorator making one when no kernel is given (``@nki.baremetal(...)``)."""
    if kernel is None:
        return lambda k: _Runner(k, artifacts)
    return _Runner(kernel, artifacts)


def baremetal(kernel: Any = None, **artifacts: Any) -> Any:
    """``nki.baremetal(kernel)(*arrays)``: compile and run, writing ``save_neff_name`` / ``save_trace_name``.
    ``timing_only=True`` (nkic's, as for benchmark and profile): no numerics, arguments may be TensorSpecs."""
    return _runner(kernel, artifacts)


def benchmark(kernel: Any = None, warmup: int = 10, iters: int = 100, **artifacts: Any) -> Any:
    """``nki.benchmark``: compile and run once; ``.benchmark_result.nc_latency.get_latency_percentile(p)`` is the
    simulated latency in µs (``warmup``/``iters`` are accepted: every simulated run takes the same time).

    ``timing_only=True`` (an nkic option): simulate the timeline only, for kernels too large to compute on a CPU;
    the kernel may be called with ``TensorSpec`` placeholders and returns None."""
    if warmup < 0 or iters < 1:
        raise NkiError(f"benchmark needs warmup >= 0 and iters >= 1, got warmup={warmup}, iters={iters}")
    return _runner(kernel, {**artifacts, "_report": True, "_warmup": warmup, "_iters": iters})


def profile(func: Any = None, working_directory: str | os.PathLike[str] = ".", save_neff_name: str = "file.neff",
            save_trace_name: str = "profile.ntff", overwrite: bool = False, profile_nth: int = 1,
            **_: Any) -> Any:  # fmt: skip
    """``nki.profile``: compile and run, writing the NEFF and the profile into ``working_directory`` (the profile is
    nkic's Chrome trace-event JSON, under the name given) for the ``profile_nth`` call of the kernel (the SDK profiles
    that execution); the other calls just run."""
    if int(profile_nth) < 1:
        raise NkiError(f"nki.profile: profile_nth must be >= 1, got {profile_nth}")
    artifacts = {"working_directory": working_directory, "save_neff_name": save_neff_name,
                 "save_trace_name": save_trace_name, "overwrite": overwrite,
                 "_save_on_call": int(profile_nth)}  # fmt: skip
    return _runner(func, artifacts)
