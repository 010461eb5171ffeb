"""The compiler driver: traced kernel -> penguin -> bir -> ISA -> NEFF bytes, and running a NEFF.

Everything stays in memory in one process: the pipeline applies passes to one module and only prints IR text when
a dump directory is asked for. The driver sits above the passes and the kernel library: it hands the passes the
library's kernel resolver (``nkic.passes.resolver``) for the kernels a module names but does not contain. Running a
*kernel* (trace, compile, simulate) is one level up, in ``nkic.execute``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from nkic import safeio
from nkic.gcpause import gc_paused

if TYPE_CHECKING:
    from nkic.frontend import Kernel, TracedKernel
    from nkic.passes.resolver import KernelResolver
    from nkic.runtime.simulator import RunResult


def make_context() -> Context:
    """A context with every nkic dialect (and builtin) registered lazily."""
    from xdsl.dialects.builtin import Builtin

    from nkic.dialects import get_all_dialects

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


def pipeline_passes(
    target: str = "gen3",
    num_queues: int = 4,
    kernel_format: str = "bir",
    alloc_policy: str = "rotate",
    metrics: bool = False,
    roll_loops: bool = False,
) -> list[ModulePass]:
    from nkic.passes.pipelines import backend, frontend_lowering

    return [*frontend_lowering(kernel_format), *backend(target, num_queues, alloc_policy, metrics, roll_loops)]


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


VERIFY_EACH_PASS_ENV = "NKIC_VERIFY_EACH_PASS"


def verify_each_pass_default() -> bool:
    """Whether ``compile_module`` verifies after every pass when not told: ``NKIC_VERIFY_EACH_PASS=1`` (the test
    suite sets it); otherwise the module is verified once, after the last pass."""
    return os.environ.get(VERIFY_EACH_PASS_ENV, "") not in ("", "0")




def source_map(module: ModuleOp) -> list[dict[int, tuple[str, str]]]:
    """Per BIR function, in order (``bir-to-isa`` makes function i core i): instruction id -> (file:line[:col],
    nki call) of every instruction that knows where it was traced."""
    from nkic.dialects import bir

    out = []
    for fn in [f for f in module.ops if isinstance(f, bir.FunctionOp)]:
        out.append({i.inst_id: (i.loc.data, i.call.data if i.call is not None else "")
                    for i in fn.instructions() if i.loc is not None})  # fmt: skip
    return out


def compile_module(
    module: ModuleOp,
    *,
    name: str = "kernel",
    target: str = "gen3",
    dump_dir: str | Path | None = None,
    metadata: Mapping[str, Any] | None = None,
    on_stage: Callable[[StageRecord], None] | None = None,
    verify_each_pass: bool | None = None,
    kernel_format: str = "bir",
    alloc_policy: str = "rotate",
    resolver: KernelResolver | None = None,
    metrics: bool = False,
    debug_info: bool = False,
    roll_loops: bool | None = None,
) -> CompileResult:
    """Run the whole pipeline on a penguin module (modified in place) and print the NEFF.

    The module is verified after the last pass; ``verify_each_pass`` (default: ``verify_each_pass_default()``)
    verifies it after every pass instead, as nkic-opt does; the cost is then part of each stage's time. The cyclic
    garbage collector is paused for the compile (``gc_paused``).
    ``resolver`` resolves the library kernels the module names (internal kernel nodes, IT54 macros); the default is
    ``nkic.library.RESOLVER``. ``metrics`` prints the ``print-metrics`` report before ``bir-to-isa``.
    ``debug_info`` writes each instruction's source (file:line and nki call, ``source_map``) into the NEFF, for
    profiles; off by default, since the paths make the bytes depend on where the kernel lives.
    ``roll_loops`` (default: ``NKIC_ROLL_LOOPS=1``, see ``nkic.passes.loop_rolling.roll_default``) keeps uniform
    ``affine_range``/``sequential_range`` loops rolled (ARCHITECTURE.md "Rolled loops"); off, every loop unrolls.
    ``dump_dir`` gets the IR after every stage and the NEFF, each file written atomically inside it and never through
    a symbolic link (``nkic.safeio``; a failed write is an ``OutputError`` naming the file).
    """
    from nkic.passes.bir_to_isa import BirToIsaPass
    from nkic.passes.resolver import use_resolver
    from nkic.runtime.neff import write_neff
    from nkic.tools.targets import isa_module_to_neff

    if resolver is None:
        from nkic.library import RESOLVER

        resolver = RESOLVER

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

    if verify_each_pass is None:
        verify_each_pass = verify_each_pass_default()
    if roll_loops is None:
        from nkic.passes.loop_rolling import roll_default

        roll_loops = roll_default()
    passes = pipeline_passes(target, kernel_format=kernel_format, alloc_policy=alloc_policy, metrics=metrics,
                             roll_loops=roll_loops)  # fmt: skip
    sources = None
    with gc_paused(), use_resolver(resolver):
        for i, p in enumerate(passes, start=1):
            t0 = time.perf_counter()
            if debug_info and isinstance(p, BirToIsaPass):
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
        meta = {"kernel": name, "target": target, **(metadata or {})}
        result.neff = write_neff(isa_module_to_neff(module, name, meta, sources))
        record("neff", t0)
    if dump is not None:
        safeio.write_bytes(dump / f"{name}.neff", result.neff, within=dump)
    return result


def traced_metadata(traced: TracedKernel) -> dict[str, Any]:
    """What the NEFF records of a trace besides its code: its inputs, outputs and options."""
    return {
        "inputs": [list(i) for i in traced.inputs],
        "outputs": [list(o) for o in traced.outputs],
        "options": {k: v for k, v in vars(traced.options).items() if k != "extra"},
    }


def compile_traced(traced: TracedKernel, *, dump_dir: str | Path | None = None, **kw: Any) -> CompileResult:
    """Compile a ``TracedKernel`` (see ``nkic.frontend.tracer``)."""
    meta = traced_metadata(traced)
    options = traced.options
    with gc_paused():  # around the clone too: its ops become the passes' garbage (see nkic.gcpause)
        return compile_module(
            traced.module.clone(),
            name=traced.name,
            target=getattr(options, "target", "gen3"),
            kernel_format=getattr(options, "carrier_format", "bir"),
            alloc_policy="stack" if getattr(options, "enable_stack_allocator", False) else "rotate",
            dump_dir=dump_dir,
            metadata=meta,
            **kw,
        )


def _variant(roll_loops: bool) -> str:
    """The cache key's name for the compiler settings that change code and are not kernel options: rolling, and the
    iterations per rolled body (``NKIC_ROLL_INTERLEAVE``), which changes a rolled program's bytes."""
    from nkic.passes.loop_rolling import interleave_default

    if not roll_loops:
        return ""
    n = interleave_default()
    return "roll-loops" if n == 1 else f"roll-loops-interleave-{n}"


def compile_kernel(
    kernel: Kernel,
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    dump_dir: str | Path | None = None,
    **kw: Any,
) -> CompileResult:
    """Trace and compile ``kernel(*args, **kwargs)``, through the NEFF cache when ``NKIC_CACHE_DIR`` is set.

    Always traces (a ``trace`` stage). A hit then returns the cached NEFF (a ``cache`` stage) and runs no pass; a
    miss compiles and stores the NEFF. ``dump_dir`` and ``metrics`` ask for what only compiling makes, so they
    bypass the cache. See ``nkic.cache`` for the key: the traced module, the settings, the compiler."""
    from nkic import cache
    from nkic.passes.loop_rolling import roll_default

    if kw.get("roll_loops") is None:
        kw["roll_loops"] = roll_default()
    t0 = time.perf_counter()
    traced = kernel.trace(*args, **dict(kwargs or {}))
    stages = [StageRecord("trace", time.perf_counter() - t0, count_ops(traced.module))]
    use_cache = dump_dir is None and not kw.get("metrics")
    t0 = time.perf_counter()  # the cache stage: the key (printing the module) and the read
    entry = _cache_entry(traced, kw) if use_cache else None
    if entry is not None:
        neff = cache.load(*entry)
        if neff is not None:
            return CompileResult(neff, [*stages, StageRecord("cache", time.perf_counter() - t0, 0)], cached=True)
    result = compile_traced(traced, dump_dir=dump_dir, **kw)
    result.stages[:0] = stages
    if entry is not None:
        try:
            cache.store(*entry, result.neff)
        except OSError as e:  # a cache that cannot be written costs the next compile, not this one
            cache.unusable(entry[0], e)
    return result


def _cache_entry(traced: TracedKernel, kw: Mapping[str, Any]) -> tuple[Path, str] | None:
    """(cache folder, key) of compiling ``traced`` with the compile settings ``kw``; None when the cache is off or
    the key cannot be computed (then the compile runs uncached)."""
    from nkic import cache

    directory = cache.cache_dir()
    if directory is None or kw.get("resolver") is not None:  # another resolver's library kernels: not ours to key
        return None
    settings = {
        "name": traced.name,
        "metadata": traced_metadata(traced),
        "variant": _variant(bool(kw.get("roll_loops"))),
        "debug_info": bool(kw.get("debug_info")),  # the same code, other bytes: its own entry
    }
    try:
        return directory, cache.key(str(traced.module), settings)
    except cache.Uncacheable:
        return None


def run_neff(neff: bytes, inputs: Mapping[str, np.ndarray], *, target: str = "gen3",
             timing_only: bool = False) -> RunResult:  # fmt: skip
    """Simulate a NEFF; ``timing_only``: the timeline without numerics (inputs optional, outputs meaningless)."""
    from nkic.runtime.simulator import run_neff_bytes

    return run_neff_bytes(neff, dict(inputs), target=target, timing_only=timing_only)
