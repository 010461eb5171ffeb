"""The compiler driver: traced kernel -> penguin -> bir -> ISA -> NEFF bytes, and running a NEFF.

Everything stays in memory in one process: the pipeline applies passes to one module and only prints IR text when
a dump directory is asked for. The driver sits above the passes and the kernel library: it hands the passes the
library's kernel resolver (``nkic.passes.resolver``) for the kernels a module names but does not contain. Running a
*kernel* (trace, compile, simulate) is one level up, in ``nkic.api.execute``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from nkic.compiler import cache
from nkic.support import safeio
from nkic.dialects import bir, get_all_dialects
from nkic.dialects.common import module_target, stamp_target
from nkic.support.gcpause import gc_paused
from nkic.library import RESOLVER
from nkic.passes.bir_to_isa import BirToIsaPass
from nkic.passes.neff_assembly import isa_module_to_neff
from nkic.passes.options import CompileOptions
from nkic.passes.pipelines import backend, frontend_lowering
from nkic.passes.resolver import KernelResolver, use_resolver
from nkic.runtime.neff import Neff, read_neff, write_neff
from nkic.runtime.simulator import RunResult, simulate
from nkic.target.machine import DEFAULT_TARGET, get_target

if TYPE_CHECKING:
    from nkic.frontend import Kernel, TracedKernel
    from nkic.frontend.tracer import BoundCall

OPTION_FIELDS = frozenset(f.name for f in fields(CompileOptions))


def make_context() -> Context:
    """A context with every nkic dialect (and builtin) registered lazily."""
    ctx = Context()
    ctx.load_dialect(Builtin)
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx


@dataclass
class StageRecord:
    name: str
    seconds: float
    ops: int


@dataclass
class CompileResult:
    neff: bytes
    stages: list[StageRecord] = field(default_factory=list)
    module: ModuleOp | None = None
    cached: bool = False  # the NEFF came from the NKIC_CACHE_DIR cache (no trace, no passes ran)

    @property
    def total_seconds(self) -> float:
        return sum(s.seconds for s in self.stages)


def pipeline_passes(options: CompileOptions | None = None) -> list[ModulePass]:
    """The whole pipeline's passes for ``options`` (default: ``CompileOptions.build()``)."""
    options = CompileOptions.build() if options is None else options
    return [*frontend_lowering(options), *backend(options)]


def count_ops(module: ModuleOp) -> int:
    """Ops in the module, the module itself not counted. Runs after every stage: block by block rather than
    through ``walk``'s nested generators, which took twice as long (~25 ms per stage at 16K attention)."""
    n = 0
    stack: list[Operation] = [module]
    while stack:
        for region in stack.pop().regions:
            for block in region.blocks:
                for op in block.ops:
                    n += 1
                    if op.regions:
                        stack.append(op)
    return n


def source_map(module: ModuleOp) -> list[dict[int, tuple[str, str]]]:
    """Per BIR function, in order (``bir-to-isa`` makes function i core i): instruction id -> (file:line[:col],
    nki call) of every instruction that knows where it was traced."""
    out = []
    for fn in [f for f in module.ops if isinstance(f, bir.FunctionOp)]:
        out.append({i.inst_id: (i.loc.data, i.call.data if i.call is not None else "")
                    for i in fn.instructions() if i.loc is not None})  # fmt: skip
    return out


def compile_module(
    module: ModuleOp,
    *,
    name: str = "kernel",
    options: CompileOptions | None = None,
    dump_dir: str | Path | None = None,
    metadata: Mapping[str, Any] | None = None,
    on_stage: Callable[[StageRecord], None] | None = None,
    resolver: KernelResolver | None = None,
    **given: Any,
) -> CompileResult:
    """Run the whole pipeline on a penguin module (modified in place) and print the NEFF.

    ``options`` (a ``CompileOptions``; default: ``CompileOptions.build(**given)``, the environment and the given
    option fields, e.g. ``roll_loops=True``) says what the pipeline does; its ``target``, when given, is stamped on
    the module, which every pass reads (the tracer stamps the generation it traced for).
    The module is verified after the last pass; ``verify_each_pass`` (``NKIC_VERIFY_EACH_PASS=1``) verifies it after
    every pass instead, as nkic-opt does; the cost is then part of each stage's time. The cyclic garbage collector is
    paused for the compile (``gc_paused``).
    ``resolver`` resolves the library kernels the module names (internal kernel nodes, IT54 macros); the default is
    ``nkic.library.RESOLVER``. ``metrics`` prints the ``print-metrics`` report before ``bir-to-isa``.
    ``debug_info`` writes each instruction's source (file:line and nki call, ``source_map``) into the NEFF, for
    profiles; off by default, since the paths make the bytes depend on where the kernel lives.
    ``roll_loops`` (``NKIC_ROLL_LOOPS=1``) keeps uniform ``affine_range``/``sequential_range`` loops rolled
    (ARCHITECTURE.md "Rolled loops"); off, every loop unrolls.
    ``dump_dir`` gets the IR after every stage and the NEFF, each file written atomically inside it and never through
    a symbolic link (``nkic.support.safeio``; a failed write is an ``OutputError`` naming the file).
    """
    options = CompileOptions.build(**given) if options is None else options.override(**given)
    if options.target is not None:
        stamp_target(module, get_target(options.target).name)
    resolver = RESOLVER if resolver is None else resolver
    ctx = make_context()
    result = CompileResult(neff=b"", module=module)
    dump = Path(dump_dir) if dump_dir is not None else None
    if dump is not None:
        safeio.make_dirs(dump)
        safeio.write_text(dump / "00-penguin.mlir", str(module) + "\n", within=dump)

    def record(stage: str, t0: float) -> None:
        rec = StageRecord(stage, time.perf_counter() - t0, count_ops(module))
        result.stages.append(rec)
        if on_stage is not None:
            on_stage(rec)

    passes = pipeline_passes(options)
    verify_each_pass = options.verify_each_pass
    sources = None
    with gc_paused(), use_resolver(resolver):
        for i, p in enumerate(passes, start=1):
            t0 = time.perf_counter()
            if options.debug_info and isinstance(p, BirToIsaPass):
                sources = source_map(module)
            p.apply(ctx, module)
            if verify_each_pass:
                module.verify()
            record(p.name, t0)
            if dump is not None:
                safeio.write_text(dump / f"{i:02d}-{p.name}.mlir", str(module) + "\n", within=dump)
        if not verify_each_pass:
            t0 = time.perf_counter()
            module.verify()
            record("verify", t0)
        t0 = time.perf_counter()
        meta = {"kernel": name, "target": target_name(module), **(metadata or {})}
        result.neff = write_neff(isa_module_to_neff(module, name, meta, sources))
        record("neff", t0)
    if dump is not None:
        safeio.write_bytes(dump / f"{name}.neff", result.neff, within=dump)
    return result


def target_name(module: ModuleOp) -> str:
    """The generation ``module`` was compiled for (its ``nkic.target``, else the default): the NEFF records it."""
    return module_target(module) or DEFAULT_TARGET


def traced_metadata(traced: TracedKernel) -> dict[str, Any]:
    """What the NEFF records of a trace besides its code: its inputs, outputs and options."""
    return {
        "inputs": [list(i) for i in traced.inputs],
        "outputs": [list(o) for o in traced.outputs],
        "options": {k: v for k, v in vars(traced.options).items() if k != "extra"},
    }


def compile_traced(traced: TracedKernel, *, options: CompileOptions | None = None, **kw: Any) -> CompileResult:
    """Compile a ``TracedKernel`` (see ``nkic.frontend.tracer``); ``options`` default to ``trace_options(traced,
    **given)`` for the option fields among ``kw`` (the rest go to ``compile_module``)."""
    given = {k: kw.pop(k) for k in list(kw) if k in OPTION_FIELDS}
    options = trace_options(traced, **given) if options is None else options.override(**given)
    with gc_paused():  # around the clone too: its ops become the passes' garbage (see nkic.support.gcpause)
        return compile_module(traced.module.clone(), name=traced.name, options=options,
                              metadata=traced_metadata(traced), **kw)  # fmt: skip


def trace_options(traced: TracedKernel, **given: Any) -> CompileOptions:
    """The options of compiling ``traced``: its decorator's, the environment's, then ``given``."""
    return CompileOptions.build(traced.options, **given)


def compile_kernel(
    kernel: Kernel,
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    dump_dir: str | Path | None = None,
    resolver: KernelResolver | None = None,
    **given: Any,
) -> CompileResult:
    """``compile_call(kernel.bind(*args, **kwargs), ...)``."""
    return compile_call(kernel.bind(*args, **dict(kwargs or {})), dump_dir=dump_dir, resolver=resolver, **given)


def compile_call(
    call: BoundCall, *, dump_dir: str | Path | None = None, resolver: KernelResolver | None = None, **given: Any
) -> CompileResult:
    """Trace and compile one bound kernel call, through the NEFF cache when ``NKIC_CACHE_DIR`` is set.

    Always traces (a ``trace`` stage; the kernel's trace cache may answer). A hit then returns the cached NEFF (a
    ``cache`` stage) and runs no pass; a miss compiles and stores the NEFF. ``dump_dir`` and ``metrics`` ask for
    what only compiling makes, so they bypass the cache. See ``nkic.compiler.cache`` for the key: the traced module, the
    settings, the compiler."""
    t0 = time.perf_counter()
    traced = call.trace()
    stages = [StageRecord("trace", time.perf_counter() - t0, count_ops(traced.module))]
    options = trace_options(traced, **given)
    # another resolver's library kernels are not ours to key; dumps and metrics are what only compiling makes
    use_cache = dump_dir is None and not options.metrics and resolver is None
    t0 = time.perf_counter()  # the cache stage: the key (printing the module) and the read
    entry = _cache_entry(traced, options) if use_cache else None
    if entry is not None:
        neff = cache.load(*entry)
        if neff is not None:
            return CompileResult(neff, [*stages, StageRecord("cache", time.perf_counter() - t0, 0)], cached=True)
    result = compile_traced(traced, options=options, dump_dir=dump_dir, resolver=resolver)
    result.stages[:0] = stages
    if entry is not None:
        try:
            cache.store(*entry, result.neff)
        except OSError as e:  # a cache that cannot be written costs the next compile, not this one
            cache.unusable(entry[0], e)
    return result


def _cache_entry(traced: TracedKernel, options: CompileOptions) -> tuple[Path, str] | None:
    """(cache folder, key) of compiling ``traced`` with ``options``; None when the cache is off or the key cannot be
    computed (then the compile runs uncached)."""
    directory = cache.cache_dir()
    if directory is None:
        return None
    settings = {"name": traced.name, "metadata": traced_metadata(traced), **options.cache_settings()}
    try:
        return directory, cache.key(str(traced.module), settings)
    except cache.Uncacheable:
        return None


def run_neff(neff: bytes | Neff, inputs: Mapping[str, np.ndarray], *, target: str | None = None,
             timing_only: bool = False) -> RunResult:  # fmt: skip
    """Simulate a NEFF (its bytes, or as ``read_neff`` returns it) on ``target`` (default: the generation the NEFF was
    compiled for, as its metadata records); ``timing_only``: the timeline without numerics (inputs optional, outputs
    meaningless)."""
    program = read_neff(neff) if isinstance(neff, bytes) else neff
    name = target or str(program.metadata.get("target") or DEFAULT_TARGET)
    return simulate(program, dict(inputs), target=name, timing_only=timing_only)
