"""Kernels and tracing: ``@nki.jit`` → ``Kernel`` → (specialize, cached) → ``TraceContext`` re-executes the body.

Tracing is re-execution of the Python kernel body under an ambient ``TraceContext`` (``context.py``). Python cannot
intercept every call without rewriting the AST, so the official ``TraceContext.call`` dispatch is applied where it
is observable:

* nki ops (``nl.*`` / ``nisa.*``, marked by ``context.nki_op``) route through ``TraceContext.call`` and are recorded;
  called with no running trace they raise "nki API called outside of an NKI kernel".
* a function marked ``__nki_dont_trace__`` and wrapped by :func:`dont_trace` runs concretely: loop-variable
  arguments are made concrete (their loops unroll) and loops inside run as plain Python loops.
* calling a ``Kernel`` (a nested ``@nki.jit``) during a trace traces its body inline into the current kernel, and
  enforces "function without nki data as input should not return nki data".
* excluded modules (nkic.frontend, numpy, math) are library code that simply runs; any symbolic loop variable they
  need as a number (``math.ceil(i / 2)``) makes its loop unroll.
* every other user helper is just executed — that is inline tracing. The "function without nki data" rule is not
  applied to them: public nki-library kernels that NKI runs break it (``attention_cte`` takes its tiles from
  ``ModularAllocator.alloc_sbuf_tensor(shape, dtype, ...)``, which receives no tensor and returns a fresh one), and
  observing every helper return with ``sys.setprofile`` made tracing ``attention_cte`` 4.3x slower.

Control flow is resolved at trace time: Python ``if``/``while`` on a tensor raise the dynamic-control-flow error;
``affine_range``/``sequential_range`` become symbolic loops traced once unless the body needs the induction value, in
which case the internal ``NeedsUnroll`` makes the tracer mark the loop site unrolled and re-trace the whole kernel
(kernels are pure). A tensor allocated in a symbolic loop body and used after the loop closed is one tensor per
iteration, so that loop unrolls too, as does a loop whose body hands a tensor of its own to the next iteration
(``acc = t`` where the body reads ``acc`` before assigning it); an ``IndexError``/``KeyError`` escaping a trace that rolled loops re-traces with
them unrolled (a list appended to in a rolled body has one entry). ``static_range`` and ``range`` unroll. A grid
launch of any rank (``kernel[4]``, ``kernel[2, 2]``) traces the body once per program, in row-major grid order; the
k-th ``shared_hbm`` allocation of every program is the same tensor. Inputs the kernel writes or returns are copied
into outputs of their own at the end of the program (an input cannot also be an output variable).

The frontend only traces: a ``Kernel`` called outside a trace hands itself to the executor that the layer above
registered with :func:`set_executor` (``nkic.api.execute``: compile, then simulate); without one the call is an
``NkiError``.

Threads may trace at the same time: the running ``TraceContext`` is per thread (``context.py``), everything else a
trace changes lives in it, and a kernel's ``TraceCache`` is locked (one thread traces a specialization, the others
wait for it).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import operator
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from nkic.frontend.context import active_context
from nkic.frontend.emit import PenguinEmitter
from nkic.frontend.errors import NeedsUnroll, NkiError, located_error
from nkic.frontend.tensor import NkiTensor
from nkic.frontend.trace_context import (
    CompileOptions,
    TensorSpec,
    TraceContext,
    TracedKernel,
    _array_dtype,
    param_name,
)
from nkic.support.gcpause import gc_paused
from nkic.target.limits import RETRACES_VAR, max_retraces
from nkic.target.machine import DEFAULT_TARGET, TARGET_ALIASES

# Replaced by tests to record instead of building penguin IR: factory(kernel_name, grid, kind) -> emitter.
emitter_factory: Callable[[str, int, str], Any] | None = None

# How a Kernel called outside a trace runs: executor(kernel, args, kwargs) -> results. The frontend only traces;
# compiling and simulating live above it (``nkic.api.execute`` registers itself here on import), so the language
# surface never imports the compiler.
Executor = Callable[["Kernel", tuple[Any, ...], dict[str, Any]], Any]
_executor: Executor | None = None


def set_executor(executor: Executor | None) -> Executor | None:
    """Register what runs ``kernel(*arrays)`` outside a trace (``None`` unregisters); returns the previous one."""
    global _executor
    previous, _executor = _executor, executor
    return previous


class TraceCache(dict[Any, TracedKernel]):
    """A kernel's traces by specialization (``Kernel.specialization``), shared by the kernel's grid and option clones
    (``kernel[2]``, ``with_options``) and safe to use from several threads at once.

    :meth:`get_or_trace` builds a missing trace once: a thread asking for a specialization another thread is tracing
    waits for that trace rather than making its own, so every caller gets the same ``TracedKernel`` (and the NEFF
    ``nkic.api.execute`` keeps per trace is compiled once). A trace that fails is not stored: a waiting thread then
    traces itself (and gets the same error, as a single thread would)."""

    def __init__(self, entries: Any = ()):
        super().__init__(entries)
        self._lock = threading.Lock()  # guards _building
        # specialization -> the lock its tracing thread holds. Re-entrant: a thread that needs the trace it is
        # building (a kernel calling itself for the same arguments) recurses as it always did instead of deadlocking.
        self._building: dict[Any, threading.RLock] = {}

    def get_or_trace(self, key: Any, make: Callable[[], TracedKernel]) -> TracedKernel:
        """The trace stored under ``key``, else ``make()``'s, stored (one thread makes it; the others wait)."""
        traced = self.get(key)  # the common case, a hit, takes no lock (a dict read is atomic)
        if traced is not None:
            return traced
        with self._lock:
            building = self._building.setdefault(key, threading.RLock())
        try:
            with building:
                traced = self.get(key)
                if traced is None:
                    traced = make()
                    self[key] = traced
                return traced
        finally:
            with self._lock:
                if self._building.get(key) is building:  # a later thread may have put its own after a failure
                    del self._building[key]


class Kernel:
    """A ``@nki.jit`` function: the callable, its signature, grid and compile options, plus the trace cache."""

    __nki_kernel__ = True  # a call of it inside a trace inlines its body (TraceContext.call)

    def __init__(
        self,
        func: Callable[..., Any],
        grid: tuple[int, ...] | None = None,
        options: CompileOptions | None = None,
        cache: TraceCache | dict[Any, TracedKernel] | None = None,
    ):
        self.func = func
        self.signature = inspect.signature(func)
        self.grid = grid
        self.options = options or CompileOptions()
        # Shared by grid/option clones (they pass theirs on). A plain dict is copied into a TraceCache of its own:
        # the lock that guards the entries must be the entries' own, whichever Kernel object reaches them.
        self.cache: TraceCache = cache if isinstance(cache, TraceCache) else TraceCache(cache or ())
        functools.update_wrapper(self, func)

    @property
    def name(self) -> str:
        return self.func.__name__

    def __repr__(self) -> str:
        return f"Kernel({self.name}, grid={self.grid})"

    def __getitem__(self, grid: Any) -> Kernel:
        """``kernel[4]``, ``kernel[2, 2]``, ``kernel[nl.spmd_dim(2, nl.nc(2))]``: a launch grid of any rank and size."""
        dims = grid if isinstance(grid, tuple) else (grid,)
        try:
            shape = tuple(operator.index(d) for d in dims)
        except TypeError:
            shape = ()
        if not shape or any(d <= 0 for d in shape):
            raise NkiError(f"unsupported launch grid {grid!r}", "launch with positive ints: kernel[4], kernel[2, 2]")
        return Kernel(self.func, shape, self.options, self.cache)

    @property
    def num_programs(self) -> int:
        """The number of SPMD programs the launch grid runs (1 without a grid)."""
        return math.prod(self.grid) if self.grid else 1

    def with_options(self, **changes: Any) -> Kernel:
        return Kernel(self.func, self.grid, dataclasses.replace(self.options, **changes), self.cache)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        ctx = active_context()
        if ctx is not None:
            return ctx.call(self, *args, **kwargs)
        if _executor is None:
            raise NkiError(
                f"kernel '{self.name}' was called outside a trace, but no executor is registered",
                "import nkic.api (the public NKI module) or nkic.api.execute to compile and simulate calls, "
                "or use kernel.trace(...) to only trace",
            )
        return _executor(self, args, kwargs)

    def bind(self, *args: Any, **kwargs: Any) -> BoundCall:
        """This call's arguments bound to the kernel's parameters and specialised, once: what tracing it, running
        it (its array inputs) and caching its NEFF all read."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise NkiError(f"cannot call kernel '{self.name}': {e}") from None
        bound.apply_defaults()
        arrays, key = _specialize(bound)
        return BoundCall(self, bound, tuple(arrays), (self.grid, self.options, key))

    def trace(self, *args: Any, **kwargs: Any) -> TracedKernel:
        """Trace for these arguments (arrays/TensorSpecs become params, the rest constants); cached."""
        return self.bind(*args, **kwargs).trace()

    def specialization(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``bind(*args, **kwargs).key``."""
        return self.bind(*args, **kwargs).key

    def array_arguments(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """``bind(*args, **kwargs).array_arguments()``."""
        return self.bind(*args, **kwargs).array_arguments()


@dataclass(frozen=True)
class BoundCall:
    """One call of a kernel, bound and specialised once (``Kernel.bind``)."""

    kernel: Kernel
    bound: inspect.BoundArguments
    arrays: tuple[tuple[str, Any], ...]  # the array arguments by parameter name (``*args`` entries as ``name_i``)
    # What a trace depends on besides the source: (grid, options, per-argument key: each array's name, shape and
    # dtype, each constant's ``constant_key``). ``trace`` caches on it.
    key: tuple[Any, ...]

    def trace(self) -> TracedKernel:
        """The trace for these arguments, from the kernel's trace cache (traced on a miss)."""
        def make() -> TracedKernel:
            with gc_paused():  # see nkic.support.gcpause: a trace builds IR objects by the hundred thousand
                return _trace(self.kernel, self.bound, list(self.arrays))

        return self.kernel.cache.get_or_trace(self.key, make)

    def array_arguments(self) -> dict[str, Any]:
        """The array arguments by kernel parameter name: the inputs of the traced kernel."""
        return dict(self.arrays)


def jit(fn: Callable[..., Any] | None = None, **opts: Any) -> Any:
    """``@nki.jit`` / ``@nki.jit(**options)`` → Kernel."""
    if fn is None:
        return lambda f: jit(f, **opts)
    if isinstance(fn, Kernel):
        return Kernel(fn.func, fn.grid, _options(opts), fn.cache) if opts else fn
    return Kernel(fn, None, _options(opts))


def _options(opts: dict[str, Any]) -> CompileOptions:
    known = {f.name for f in dataclasses.fields(CompileOptions)} - {"extra"}
    values = {k: v for k, v in opts.items() if k in known}
    if "platform_target" in opts:  # NKI 0.2 spelling; the target normally comes from the environment
        values.setdefault("target", TARGET_ALIASES.get(str(opts["platform_target"]), DEFAULT_TARGET))
    extra = tuple(sorted((k, v) for k, v in opts.items() if k not in known and k != "platform_target"))
    return CompileOptions(**values, extra=extra)


def dont_trace(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a helper to run concretely during a trace (``__nki_dont_trace__``)."""
    fn.__nki_dont_trace__ = True  # type: ignore[attr-defined]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = active_context()
        return fn(*args, **kwargs) if ctx is None else ctx.call(fn, *args, **kwargs)

    return wrapper


# ------------------------------------------------------------------------------------------------------------
# Specialization: which arguments are kernel params, and the cache key
# ------------------------------------------------------------------------------------------------------------
def _specialize(bound: inspect.BoundArguments) -> tuple[list[tuple[str, Any]], tuple[Any, ...]]:
    arrays: list[tuple[str, Any]] = []
    key: list[Any] = []
    for name, value in _flat_arguments(bound):
        if isinstance(value, (np.ndarray, TensorSpec)):
            arrays.append((name, value))
            key.append((name, "array", tuple(value.shape), _array_dtype(name, value)))
        else:
            key.append((name, "const", constant_key(value)))
    return arrays, tuple(key)


def _flat_arguments(bound: inspect.BoundArguments) -> Iterator[tuple[str, Any]]:
    params = bound.signature.parameters
    for name, value in bound.arguments.items():
        kind = params[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            yield from ((param_name(f"{name}_{i}"), v) for i, v in enumerate(value))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            yield from ((param_name(k), v) for k, v in value.items())
        else:
            yield param_name(name), value


def constant_key(value: Any) -> Any:
    """A hashable, value-based key for a compile-time constant argument."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, Enum):
        return ("enum", type(value), value.name)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(constant_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), constant_key(v)) for k, v in value.items())))
    if isinstance(value, (np.ndarray, TensorSpec, NkiTensor)):
        raise NkiError("array arguments must be top-level kernel parameters", "pass each array as its own argument")
    if isinstance(value, np.generic):
        return ("np", value.dtype.str, value.item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = tuple((f.name, constant_key(getattr(value, f.name))) for f in dataclasses.fields(value))
        return ("object", type(value), fields)
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return ("hashable", type(value), value)


# ------------------------------------------------------------------------------------------------------------
# The trace driver: retry with more loops unrolled until the body no longer needs a concrete induction value
# ------------------------------------------------------------------------------------------------------------
def _trace(kernel: Kernel, bound: inspect.BoundArguments, arrays: list[tuple[str, Any]]) -> TracedKernel:
    """Trace ``kernel``; any exception its code raises -- Python's, the user's own ``raise``, ``sys.exit`` -- is an
    NkiError at the innermost line of the user's code (KeyboardInterrupt and nkic's internal signals pass)."""
    try:
        return _trace_attempts(kernel, bound, arrays)
    except NkiError:
        raise
    except (Exception, SystemExit) as e:  # noqa: B014 -- SystemExit is not an Exception
        raise located_error(e, context=f"while tracing kernel '{kernel.name}'") from e


def _trace_attempts(kernel: Kernel, bound: inspect.BoundArguments, arrays: list[tuple[str, Any]]) -> TracedKernel:
    unrolled: set[tuple[str, int, int]] = set()
    limit = max_retraces()  # target/limits.py: every re-trace unrolls a new loop, so this only caps the time
    for _ in range(limit + 1):
        factory = emitter_factory or PenguinEmitter
        ctx = TraceContext(kernel, factory(kernel.name, kernel.num_programs, "external"), unrolled)
        try:
            traced = ctx.run(bound, arrays)
        except NeedsUnroll as e:
            _mark_unrolled(unrolled, e.sites, kernel)
            continue
        except (IndexError, KeyError, StopIteration):
            # A rolled loop ran its body once, so a Python container filled in the body has one entry instead of
            # one per iteration (``tiles.append(t)`` in the loop, ``tiles[1]`` after it). The unrolled program is
            # the kernel's meaning: re-trace with the loops that were rolled unrolled; a real error stays one.
            rolled = ctx.rolled_sites - unrolled
            if not rolled:
                raise
            _mark_unrolled(unrolled, rolled, kernel)
            continue
        if ctx.pending_unroll:
            _mark_unrolled(unrolled, ctx.pending_unroll, kernel)
            continue
        return traced
    raise NkiError(f"kernel '{kernel.name}' needed more than {limit} re-traces to unroll its loops",
                   f"each unrolls one more loop (at most two per loop line); raise the bound with {RETRACES_VAR}=N")


def _mark_unrolled(unrolled: set[tuple[str, int, int]], sites: Any, kernel: Kernel) -> None:
    """Add ``sites`` to the loops to unroll. A re-trace that would unroll nothing new would repeat forever, so it is
    an error (an internal one: a loop that asked to be unrolled was)."""
    before = len(unrolled)
    for file, line, occ in sites:
        # The same loop line needing unrolling at a second occurrence (a loop nested in an unrolled loop): unroll
        # every occurrence at once instead of re-tracing once per occurrence.
        if any(s[:2] == (file, line) for s in unrolled):
            unrolled.add((file, line, -1))
        unrolled.add((file, line, occ))
    if len(unrolled) == before:
        raise NkiError(f"internal error: re-tracing kernel '{kernel.name}' would unroll no new loop",
                       f"the loops at {sorted(sites)} were already unrolled; please report this kernel")
