"""Kernel tuning: ``nki.tune`` and ``nkic tune`` sweep a kernel's keyword parameters on the cost model.

A *space* names values for some of the kernel's keyword parameters (``{"TILES_IN_BLOCK_M": [1, 2, 4, 8]}``); a
*strategy* chooses configurations from it; an *executor* evaluates them. Evaluating one configuration is what
``nkic compile`` then ``nkic run --timing-only`` do (``driver.compile_kernel``, through the NEFF cache, then
``driver.run_neff(timing_only=True)``): the latency, each engine's busy share and the SBUF bytes per partition
live at once (``sbuf_peak``). A configuration that fails (it does not fit, the kernel's own check refuses it, a
documented rule is broken) is a ``Trial`` with its one-line reason, never an error of the sweep.

Executors (one small interface: ``width`` and ``map(jobs)`` yielding each ``Trial`` as it completes):

* ``LocalExecutor(jobs)``: processes on this machine (``jobs`` 1 evaluates in this process). Its workers are forked,
  so they already hold the kernel object: any kernel can be tuned, wherever it was defined.
* ``DaskExecutor(address)``: a Dask distributed cluster (``Client(address)``), or with no address a local cluster of
  ``workers`` processes (Dask's own ``LocalCluster``). Its workers load the kernel from its file, by path and name,
  so the file must be readable at the same path on every worker, and a script's own tune call must sit under
  ``if __name__ == "__main__":`` (the rule of multiprocessing's spawn start method).

Strategies (``ask(n)`` configurations, ``tell`` their trials): ``GridSearch`` (every configuration, in order),
``RandomSearch`` (a seeded sample without repetition), ``OptunaSearch`` (Optuna's TPE sampler, asked in batches
of the executor's width and told in the order asked, so any executor sees the same suggestions).

Results do not depend on the executor: a trial holds only what the compiler and the cost model decided (wall times
and cache hits are kept apart, in ``Trial.seconds`` and ``Trial.cached``, out of the table).
"""

from __future__ import annotations

import contextlib
import csv
import heapq
import importlib.util
import inspect
import io
import itertools
import json
import multiprocessing
import os
import random
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from xdsl.utils.exceptions import PassFailedException

import nkic
from nkic.compiler.cache import CACHE_DIR_ENV
from nkic.compiler.driver import compile_kernel, run_neff
from nkic.frontend.errors import NkiError, caller_location, located_error
from nkic.frontend.tracer import Kernel, TensorSpec
from nkic.runtime.neff import read_neff
from nkic.support import safeio
from nkic.target.isa import OPCODES
from nkic.target.machine import ENGINE_NAMES, get_target
from nkic.target.vocab import dtype_size

Config = dict[str, Any]
STRATEGIES = ("grid", "random", "optuna")
EXECUTORS = ("local", "dask")
RESULT_FILES = ("tune.json", "tune.csv")


# -- the space -------------------------------------------------------------------------------------------------------


def check_space(kernel: Kernel, space: Mapping[str, Sequence[Any]]) -> dict[str, tuple[Any, ...]]:
    """The space as ``{name: values}``: every name a keyword parameter of the kernel, every value list non-empty
    and without repeats; anything else is an ``NkiError`` at the caller's line."""
    if not isinstance(space, Mapping) or not space:
        raise _error("the space must name at least one parameter and its values, e.g. {'TILES_IN_BLOCK_M': [1, 2]}")
    params = inspect.signature(kernel.func).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    out: dict[str, tuple[Any, ...]] = {}
    for name, values in space.items():
        if name not in params and not takes_any:
            raise _error(f"kernel '{kernel.name}' has no parameter '{name}' to tune (it takes {', '.join(params)})")
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise _error(f"space '{name}': expected a list of values, got {values!r}")
        vals = tuple(values)
        if not vals:
            raise _error(f"space '{name}': no values")
        if len(set(map(repr, vals))) != len(vals):
            raise _error(f"space '{name}': a value is given twice")
        out[str(name)] = vals
    return out


def size(space: Mapping[str, Sequence[Any]]) -> int:
    n = 1
    for values in space.values():
        n *= len(values)
    return n


def grid(space: Mapping[str, Sequence[Any]]) -> list[Config]:
    """Every configuration, the last parameter varying fastest (as nested loops in the order given)."""
    names = list(space)
    return [dict(zip(names, combo)) for combo in itertools.product(*(space[n] for n in names))]


def _error(what: str) -> NkiError:
    return NkiError(what, where=caller_location())


# -- one configuration -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelRef:
    """How a worker finds the kernel: in its own memory when it was forked from the tuning process (``token``), else
    by loading ``path`` and taking ``name`` (a Dask worker)."""

    path: str
    name: str
    token: int = 0


@dataclass(frozen=True)
class Job:
    kernel: KernelRef
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    config: Config
    target: str
    grid: tuple[int, ...] | None
    cache_dir: str | None


@dataclass
class Trial:
    """One configuration's outcome. ``latency_us`` is None when it failed; ``error`` is then the one-line reason."""

    config: Config
    latency_us: float | None = None
    busy: dict[str, float] = field(default_factory=dict)  # engine -> percent of the latency it was busy
    sbuf_peak: int | None = None  # SBUF bytes per partition live at once, at most (``sbuf_peak``)
    sbuf_capacity: int | None = None
    instructions: int | None = None
    error: str = ""
    cached: bool = False  # the NEFF came from the cache (not part of the result: it depends on earlier runs)
    seconds: float = 0.0  # wall time of compile + simulation (not part of the result either)
    cpu_seconds: float = 0.0  # the worker's CPU time for it: what the sweep costs whatever else the machine runs
    # the compile's warnings (a spill to HBM, ...), one line each: only when it compiled, not on a cache hit
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.latency_us is not None

    def result(self) -> dict[str, Any]:
        """What the compiler and the cost model decided: equal whichever executor ran it."""
        return {"config": self.config, "latency_us": self.latency_us, "busy_percent": self.busy,
                "sbuf_peak_bytes": self.sbuf_peak, "sbuf_capacity_bytes": self.sbuf_capacity,
                "instructions": self.instructions, "error": self.error}  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {**self.result(), "cached": self.cached, "seconds": round(self.seconds, 3),
                "cpu_seconds": round(self.cpu_seconds, 3), "warnings": self.warnings}


_LOCAL_KERNELS: dict[int, Kernel] = {}  # token -> kernel, filled before forking (the children inherit it)
_LOADED: dict[tuple[str, str], Kernel] = {}  # (path, name) -> kernel, per worker process


def evaluate(job: Job) -> Trial:
    """Compile and time one configuration (in a worker); any failure is the trial's one-line reason."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    trial = Trial(dict(job.config))
    try:
        with _cache_dir(job.cache_dir), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _measure(job, trial)
    except Exception as e:  # noqa: BLE001 -- every failure of one configuration is recorded, never raised
        trial.error = one_line(e)
    else:
        trial.warnings = list(dict.fromkeys(_warning_line(w) for w in caught))
    trial.seconds, trial.cpu_seconds = time.perf_counter() - t0, time.process_time() - cpu0
    return trial


def _measure(job: Job, trial: Trial) -> None:
    kernel = _fresh(_resolve(job.kernel), job)
    compiled = compile_kernel(kernel, job.args, {**job.kwargs, **job.config})
    arrays = {k: v for k, v in kernel.array_arguments(*job.args, **{**job.kwargs, **job.config}).items()
              if not isinstance(v, TensorSpec)}  # fmt: skip
    profile = run_neff(compiled.neff, arrays, target=job.target, timing_only=True).profile
    neff = read_neff(compiled.neff)
    total = profile.total_ns or 1.0
    trial.latency_us = round(profile.total_ns / 1000.0, 3)
    trial.busy = {e: round(100.0 * profile.busy_ns.get(e, 0.0) / total, 1) for e in ENGINE_NAMES}
    trial.sbuf_peak = sbuf_peak(neff)
    trial.sbuf_capacity = get_target(job.target).sbuf_bytes_per_partition
    trial.instructions = sum(len(v) for sg in neff.subgraphs for v in sg.engines.values())
    trial.cached = compiled.cached


def _warning_line(w: warnings.WarningMessage) -> str:
    text = " ".join(str(w.message).split())
    return f"{w.filename}:{w.lineno}: {w.category.__name__}: {text}"


def _fresh(kernel: Kernel, job: Job) -> Kernel:
    """The kernel for this job's target and grid with a trace cache of its own: a sweep keeps no trace alive (each
    configuration is a new specialization, and a large kernel's trace holds hundreds of MB)."""
    options = kernel.options if kernel.options.target == job.target else kernel.with_options(target=job.target).options
    return Kernel(kernel.func, job.grid, options)


def sbuf_peak(neff: Any) -> int:
    """The SBUF bytes per partition live at once, at most (over the NEFF's programs). A byte range an instruction's
    static access pattern reaches is live from an instruction writing it to the last one touching it before the
    next write that does not also read it (a new tenant: the allocator reuses addresses); instructions in id order,
    the program order ``allocate-memory`` assigns live ranges in. The peak is the largest union of live ranges (a
    tile and a slice of it count once). Not the highest address: the default allocator rotates tiles through all of
    SBUF, so that is near the capacity for any kernel with more tiles than fit at once."""
    return max((_live_peak(_sbuf_ranges(sg)) for sg in neff.subgraphs), default=0)


def _sbuf_ranges(sg: Any) -> list[tuple[int, int, int, int]]:
    """(first id, last id, first byte, end byte) per partition of every live range of an SBUF byte range."""
    done: list[tuple[int, int, int, int]] = []
    open_: dict[tuple[int, int], list[int]] = {}
    program = sorted((i for instrs in sg.engines.values() for i in instrs), key=lambda i: i.inst_id)
    for instr in program:
        spec = OPCODES.get(instr.opcode)
        uses: dict[tuple[int, int], bool] = {}  # range -> written without being read by this instruction
        for slot, op in enumerate(instr.operands):
            if op is None or op.memory != "sbuf":
                continue
            last = sum(step * (num - 1) for step, num in op.pattern[1:] if step > 0)
            key = (op.address, op.address + (last + 1) * dtype_size(op.dtype))
            written = spec is not None and slot < len(spec.slots) and spec.slots[slot] in spec.writes
            uses[key] = written and uses.get(key, True)
        for key, fresh in uses.items():
            span = open_.get(key)
            if span is not None and fresh:  # a new value in these bytes: the previous one's range ends
                done.append((span[0], span[1], *key))
                span = None
            if span is None:
                open_[key] = [instr.inst_id, instr.inst_id]
            else:
                span[1] = instr.inst_id
    done.extend((first, last, *key) for key, (first, last) in open_.items())
    return done


def _live_peak(ranges: list[tuple[int, int, int, int]]) -> int:
    """The largest union of the byte ranges live together (a sweep in first-use order)."""
    active: list[tuple[int, int, int]] = []  # a heap of (last use, lo, hi)
    total = best = 0
    for first, last, lo, hi in sorted(ranges):
        while active and active[0][0] < first:
            _, a, b = heapq.heappop(active)
            total -= b - a
        heapq.heappush(active, (last, lo, hi))
        total += hi - lo
        if total > best:  # the union is at most the sum: only then can it beat the best
            best = max(best, _union_length([(a, b) for _, a, b in active]))
    return best


def _union_length(ranges: list[tuple[int, int]]) -> int:
    length, end = 0, -1
    for lo, hi in sorted(ranges):
        if hi > end:
            length += hi - max(lo, end)
            end = hi
    return length


def one_line(e: BaseException) -> str:
    """A failure as one line: nkic's located errors as they are, a kernel's own exception at its line."""
    if not isinstance(e, (NkiError, PassFailedException)):
        e = located_error(e)
    text = " ".join(str(e).split())
    return text or type(e).__name__


@contextlib.contextmanager
def _cache_dir(directory: str | None) -> Iterator[None]:
    """``NKIC_CACHE_DIR`` for the duration of one evaluation (a worker may serve other sweeps)."""
    if directory is None:
        yield
        return
    before = os.environ.get(CACHE_DIR_ENV)
    os.environ[CACHE_DIR_ENV] = directory
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CACHE_DIR_ENV, None)
        else:
            os.environ[CACHE_DIR_ENV] = before


def _resolve(ref: KernelRef) -> Kernel:
    kernel = _LOCAL_KERNELS.get(ref.token)
    if kernel is not None:
        return kernel
    key = (ref.path, ref.name)
    if key not in _LOADED:
        _LOADED[key] = load_kernel(ref.path, ref.name)
    return _LOADED[key]


def load_kernel(path: str, name: str) -> Kernel:
    """The kernel ``name`` of the Python file ``path``, imported under a name of its own (not ``__main__``, so a
    script's ``if __name__ == "__main__":`` part does not run)."""
    nkic.install_nki_alias()
    if not os.path.isfile(path):
        raise NkiError(f"{path}: no such file (the kernel's file must be readable at the same path on every worker)",
                       where=caller_location())  # fmt: skip
    module_name = f"nkic_tune_{abs(hash(path)):x}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise NkiError(f"{path} cannot be imported as a Python module", where=caller_location())
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 -- the user's module: one error at its line
        raise located_error(e, context=f"importing {path}", source=path) from e
    kernel = getattr(module, name, None)
    if not isinstance(kernel, Kernel):
        raise NkiError(f"'{name}' is not an @nki.jit kernel", where=(path, 0))
    return kernel


def kernel_ref(kernel: Kernel) -> KernelRef:
    """The kernel's file and its name in that file's module (empty when it has none: then only forked workers can
    run it); ``token`` finds it in forked workers."""
    token = id(kernel)
    _LOCAL_KERNELS[token] = kernel
    module = sys.modules.get(getattr(kernel.func, "__module__", "") or "")
    path = getattr(module, "__file__", None) or ""
    names = [n for n, v in vars(module).items() if v is kernel] if module is not None else []
    name = names[0] if names else kernel.func.__name__
    return KernelRef(os.path.abspath(path) if path else "", name, token)


# -- executors -------------------------------------------------------------------------------------------------------


class Executor(Protocol):
    """Evaluates jobs; ``width`` is how many run at once (a model-based strategy asks that many at a time)."""

    width: int

    def map(self, jobs: Sequence[Job]) -> Iterator[tuple[int, Trial]]:
        """(index into ``jobs``, its trial) for each job, in the order they complete."""
        ...

    def close(self) -> None: ...


class LocalExecutor:
    """Processes on this machine: ``jobs`` forked workers (the tuning process itself when ``jobs`` is 1)."""

    def __init__(self, jobs: int = 1) -> None:
        if jobs < 1:
            raise _error(f"jobs={jobs}: at least 1")
        self.width = jobs
        self._pool: Any = None

    def map(self, jobs: Sequence[Job]) -> Iterator[tuple[int, Trial]]:
        if self.width == 1:
            for i, job in enumerate(jobs):
                yield i, evaluate(job)
            return

        pending = dict(enumerate(jobs))
        alone = False  # after a worker died, one job at a time: the next death names its configuration
        while pending:
            pool = self._ensure_pool()
            batch = list(pending.items())[:1] if alone else list(pending.items())
            futures = {pool.submit(evaluate, job): i for i, job in batch}
            for future in as_completed(futures):
                i = futures[future]
                if isinstance(future.exception(), BrokenProcessPool) and not alone:
                    continue  # it, or a job beside it, killed the pool: run it again, alone
                del pending[i]
                yield i, _collect(future, jobs[i])
            if any(isinstance(f.exception(), BrokenProcessPool) for f in futures):
                self.close()
                alone = True

    def _ensure_pool(self) -> Any:
        if self._pool is None:
            # fork: the workers inherit the kernel object (and the arguments' arrays) instead of re-importing them
            self._pool = ProcessPoolExecutor(self.width, mp_context=multiprocessing.get_context("fork"))
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


class DaskExecutor:
    """A Dask distributed cluster: ``Client(address)``, or a ``LocalCluster`` of ``workers`` single-threaded worker
    processes when ``address`` is None. Needs ``pip install nkic[cluster]``."""

    def __init__(self, address: str | None = None, workers: int = 2) -> None:
        try:
            # deferred: Dask distributed is an optional dependency (nkic[cluster]), imported only for this executor
            from distributed import Client, LocalCluster, as_completed
        except ImportError:
            raise _error("the dask executor needs Dask distributed: pip install 'nkic[cluster]'") from None
        self._as_completed = as_completed
        self._cluster = None
        if address is None:
            # one thread per worker: the compiler and the simulator are CPU-bound Python (the GIL)
            self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                         dashboard_address=None)  # fmt: skip
            self._client = Client(self._cluster)
        else:
            self._client = Client(address)
        self.width = max(1, sum(self._client.nthreads().values()))

    def map(self, jobs: Sequence[Job]) -> Iterator[tuple[int, Trial]]:
        futures = {self._client.submit(evaluate, job, pure=False): i for i, job in enumerate(jobs)}
        for future in self._as_completed(list(futures)):
            i = futures[future]
            yield i, _collect(future, jobs[i])

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


def _collect(future: Any, job: Job) -> Trial:
    """A future's trial; a worker that died running it (killed, out of memory) fails that configuration only."""
    try:
        return future.result()
    except Exception as e:  # noqa: BLE001 -- evaluate() itself never raises: this is the worker process failing
        return Trial(dict(job.config), error=f"the worker running it failed: {type(e).__name__}: {e}".strip())


def make_executor(name: str, jobs: int = 1, address: str | None = None, workers: int = 2) -> Executor:
    if name == "local":
        return LocalExecutor(jobs)
    if name == "dask":
        return DaskExecutor(address, workers)
    raise _error(f"unknown executor '{name}' (expected one of: {', '.join(EXECUTORS)})")


# -- strategies ------------------------------------------------------------------------------------------------------


class Strategy(Protocol):
    def ask(self, n: int) -> list[Config]:
        """Up to ``n`` configurations to evaluate next (more is fine for a strategy that knows them all); [] ends."""
        ...

    def tell(self, config: Config, trial: Trial) -> None: ...


class GridSearch:
    """Every configuration of the space (or the first ``trials``), all at once."""

    def __init__(self, space: Mapping[str, Sequence[Any]], trials: int | None = None) -> None:
        self._todo = grid(space)[:trials]

    def ask(self, n: int) -> list[Config]:
        todo, self._todo = self._todo, []
        return todo

    def tell(self, config: Config, trial: Trial) -> None:
        pass


class RandomSearch(GridSearch):
    """``trials`` configurations drawn without repetition, seeded (the same seed, the same sample)."""

    def __init__(self, space: Mapping[str, Sequence[Any]], trials: int | None = None, seed: int = 0) -> None:
        everything = grid(space)
        self._todo = random.Random(seed).sample(everything, min(trials or len(everything), len(everything)))


class OptunaSearch:
    """Optuna's TPE sampler (a model-based search) over the space as categorical parameters, ``trials`` asks in
    batches; a failed configuration is a failed Optuna trial. A configuration suggested again is not re-run: its
    trial is told again (it still counts as one of the ``trials``). Needs ``pip install nkic[search]``."""

    def __init__(self, space: Mapping[str, Sequence[Any]], trials: int | None = None, seed: int = 0) -> None:
        try:
            import optuna  # deferred: Optuna is an optional dependency (nkic[search]), imported only for this strategy
        except ImportError:
            raise _error("the optuna strategy needs Optuna: pip install 'nkic[search]'") from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        # Optuna's categorical choices must be None, bool, int, float or str: other values go by their index
        self._space = {k: list(v) for k, v in space.items()}
        self._dists = {k: optuna.distributions.CategoricalDistribution(list(range(len(v)))) for k, v in space.items()}
        self._study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
        self._left = trials or size(space)
        self._asked: list[tuple[Config, Any]] = []
        self._seen: dict[str, Trial] = {}

    def ask(self, n: int) -> list[Config]:
        configs: list[Config] = []
        while self._left > 0 and len(configs) < n:
            self._left -= 1
            otrial = self._study.ask(self._dists)
            config = {k: self._space[k][otrial.params[k]] for k in self._space}
            known = self._seen.get(repr(config))
            if known is not None:
                self._finish(otrial, known)
                continue
            if all(asked != config for asked, _ in self._asked):  # else a twin in this batch: told with it
                configs.append(config)
            self._asked.append((config, otrial))
        return configs

    def tell(self, config: Config, trial: Trial) -> None:
        self._seen[repr(config)] = trial
        for asked, otrial in [x for x in self._asked if x[0] == config]:
            self._finish(otrial, trial)
        self._asked = [x for x in self._asked if x[0] != config]

    def _finish(self, otrial: Any, trial: Trial) -> None:
        if trial.ok:
            self._study.tell(otrial, trial.latency_us)
        else:
            self._study.tell(otrial, state=self._optuna.trial.TrialState.FAIL)


def make_strategy(name: str, space: Mapping[str, Sequence[Any]], trials: int | None, seed: int) -> Strategy:
    if trials is not None and trials < 1:
        raise _error(f"trials={trials}: at least 1")
    if name == "grid":
        return GridSearch(space, trials)
    if name == "random":
        return RandomSearch(space, trials, seed)
    if name == "optuna":
        return OptunaSearch(space, trials, seed)
    raise _error(f"unknown strategy '{name}' (expected one of: {', '.join(STRATEGIES)})")


# -- the sweep -------------------------------------------------------------------------------------------------------


@dataclass
class Report:
    """Every trial, fastest first, the failed ones last (``_sort``)."""

    kernel: str
    target: str
    space: dict[str, tuple[Any, ...]]
    trials: list[Trial]

    @property
    def best(self) -> Trial | None:
        return self.trials[0] if self.trials and self.trials[0].ok else None

    @property
    def failed(self) -> list[Trial]:
        return [t for t in self.trials if not t.ok]

    def table(self) -> str:
        """The results as a text table: rank, the configuration, latency, engine busy %, SBUF peak; then failures."""
        names = list(self.space)
        head = ["#", *names, "latency us", *(f"{e} %" for e in ENGINE_NAMES), "SBUF peak B/part"]
        rows = [head]
        for rank, t in enumerate((t for t in self.trials if t.ok), 1):
            rows.append([str(rank), *(str(t.config[n]) for n in names), f"{t.latency_us:.3f}",
                         *(f"{t.busy.get(e, 0.0):.1f}" for e in ENGINE_NAMES),
                         f"{t.sbuf_peak} ({100 * (t.sbuf_peak or 0) / (t.sbuf_capacity or 1):.0f}%)"])  # fmt: skip
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
        for t in self.failed:
            lines.append(f"failed {_shown(t.config)}: {t.error}")
        return "\n".join(lines)

    def notes(self) -> str:
        """The compile warnings of the configurations that ran, one line each (``config: file:line: ...``)."""
        return "".join(f"warning {_shown(t.config)}: {w}\n" for t in self.trials for w in t.warnings)

    def summary(self) -> str:
        ok = len(self.trials) - len(self.failed)
        head = f"tuned {self.kernel} on {self.target}: {len(self.trials)} configurations, {ok} ran, " \
               f"{len(self.failed)} failed"  # fmt: skip
        best = self.best
        if best is None:
            return f"{head}; no configuration ran"
        return f"{head}; best {_shown(best.config)}: {best.latency_us:.3f} us"

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "target": self.target, "space": {k: list(v) for k, v in self.space.items()},
                "best": self.best.to_json() if self.best else None, "trials": [t.to_json() for t in self.trials]}

    def to_csv(self) -> str:
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        names = list(self.space)
        w.writerow([*names, "latency_us", *(f"{e}_busy_percent" for e in ENGINE_NAMES), "sbuf_peak_bytes",
                    "sbuf_capacity_bytes", "instructions", "error", "cached", "seconds", "cpu_seconds"])  # fmt: skip
        for t in self.trials:
            w.writerow([*(t.config[n] for n in names), _blank(t.latency_us), *(_blank(t.busy.get(e)) for e in ENGINE_NAMES),
                        _blank(t.sbuf_peak), _blank(t.sbuf_capacity), _blank(t.instructions), t.error, t.cached,
                        round(t.seconds, 3), round(t.cpu_seconds, 3)])  # fmt: skip
        return out.getvalue()

    def write(self, folder: safeio.Folder) -> None:
        """``tune.json`` and ``tune.csv`` inside ``folder`` (atomically, never through a link: ``nkic.support.safeio``)."""
        folder.write_text("tune.json", json.dumps(self.to_json(), indent=1, default=repr) + "\n")
        folder.write_text("tune.csv", self.to_csv())


def _blank(value: Any) -> Any:
    return "" if value is None else value


def _shown(config: Config) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in config.items())


def _sort(trials: list[Trial]) -> list[Trial]:
    """Fastest first (ties by configuration), then the failures by configuration: the order the trials were asked
    in (the executor, the strategy, a space listed backwards) changes nothing."""
    ran = sorted((t for t in trials if t.ok), key=lambda t: (t.latency_us, _config_key(t.config)))
    return ran + sorted((t for t in trials if not t.ok), key=lambda t: _config_key(t.config))


def _config_key(config: Config) -> tuple[tuple[int, Any], ...]:
    """Numbers by value, anything else by its repr (values of one parameter may mix types)."""
    return tuple((0, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, repr(v))
                 for v in config.values())


class Progress:
    """``[#####     ] 12/32 best 6876.1 us`` on stderr, redrawn in place: only when stderr is a terminal."""

    def __init__(self, total: int, stream: Any = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.on = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total, self.done, self.best = total, 0, None

    def step(self, trial: Trial) -> None:
        self.done += 1
        if trial.ok and (self.best is None or trial.latency_us < self.best):  # type: ignore[operator]
            self.best = trial.latency_us
        if self.on:
            filled = 30 * self.done // max(self.total, self.done)
            best = f" best {self.best:.1f} us" if self.best is not None else ""
            self.stream.write(f"\r[{'#' * filled}{' ' * (30 - filled)}] {self.done}/{self.total}{best}")
            self.stream.flush()

    def end(self) -> None:
        if self.on:
            self.stream.write("\n")
            self.stream.flush()


def run(kernel: Kernel, args: tuple[Any, ...], kwargs: Mapping[str, Any], space: Mapping[str, Sequence[Any]],
        strategy: Strategy, executor: Executor, *, cache_dir: str | None = None,
        progress: Callable[[int], Progress] | None = None, total: int | None = None) -> Report:  # fmt: skip
    """Evaluate what ``strategy`` asks until it asks nothing more; the report of every trial."""
    ref = kernel_ref(kernel)
    target = kernel.options.target
    trials: list[Trial] = []
    bar = (progress or Progress)(total or size(space))
    try:
        while batch := strategy.ask(executor.width):
            jobs = [Job(ref, tuple(args), dict(kwargs), c, target, kernel.grid, cache_dir) for c in batch]
            done: dict[int, Trial] = {}
            for i, trial in executor.map(jobs):
                done[i] = trial
                bar.step(trial)
            for i, config in enumerate(batch):  # told in the order asked: the same suggestions on any executor
                strategy.tell(config, done[i])
                trials.append(done[i])
    finally:
        bar.end()
    return Report(kernel.name, target, dict(space), _sort(trials))


def tune(kernel: Any, space: Mapping[str, Sequence[Any]], *, strategy: str = "grid", trials: int | None = None,
         seed: int = 0, executor: str = "local", jobs: int = 1, address: str | None = None, workers: int = 2,
         output_dir: str | os.PathLike[str] | None = None, quiet: bool = False) -> Callable[..., Report]:  # fmt: skip
    """``nki.tune(kernel, space, ...)(*args, **kwargs)``: sweep ``space`` (``{parameter: [values]}``) for the kernel
    called with these arguments (arrays or ``TensorSpec``s; timing only) and return the ``Report``; it prints the
    table and the best configuration unless ``quiet``. ``output_dir``: write ``tune.json``/``tune.csv`` there, and
    keep the NEFF cache in its ``neff-cache`` folder when ``NKIC_CACHE_DIR`` is not set (a re-run compiles nothing)."""
    if not isinstance(kernel, Kernel):
        raise _error(f"nki.tune needs an @nki.jit kernel, got {type(kernel).__name__}")
    checked = check_space(kernel, space)
    make_strategy(strategy, checked, trials, seed)  # a bad strategy or count is an error here, at the caller's line
    total = min(trials or size(checked), size(checked))

    def call(*args: Any, **kwargs: Any) -> Report:
        clash = sorted(set(kwargs) & set(checked))
        if clash:
            raise _error(f"'{clash[0]}' is both an argument and a tuned parameter")
        if executor == "dask" and not kernel_ref(kernel).path:
            raise _error(f"the dask executor loads kernel '{kernel.name}' from its file, and it has none")
        folder = safeio.Folder(output_dir, create=True) if output_dir is not None else None
        cache_dir = None if folder is None or os.environ.get("NKIC_CACHE_DIR") else str(Path(folder.path, "neff-cache"))
        pool = make_executor(executor, jobs, address, workers)
        try:
            chosen = make_strategy(strategy, checked, trials, seed)  # each call sweeps afresh
            report = run(kernel, args, kwargs, checked, chosen, pool, cache_dir=cache_dir, total=total)
        finally:
            pool.close()
        if folder is not None:
            with folder:
                report.write(folder)
        if not quiet:
            print(report.table())
            print(report.notes(), end="")
            print(report.summary())
        return report

    return call
