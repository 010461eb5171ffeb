"""The compile options: one frozen object, built once from the decorator, the environment and the caller.

``CompileOptions.build`` reads, lowest precedence first:

* the kernel's decorator options (``@nki.jit(platform_target=..., carrier_format=..., enable_stack_allocator=...)``,
  the trace's ``options``): target, kernel format, allocation policy;
* the environment: ``NKIC_ROLL_LOOPS``, ``NKIC_ROLL_INTERLEAVE``, ``NKIC_VERIFY_EACH_PASS``;
* what the caller gives (``nkic compile`` flags, ``compile_module(roll_loops=True)``, ...); ``None`` means "not
  given".

The pipeline (``nkic.passes.pipelines.backend``) builds its passes from it; the driver stamps its target on the
module, where every pass reads it (``nkic.passes.targeting.target_of``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from nkic.passes.loop_rolling import INTERLEAVE, INTERLEAVE_ENV, ROLL_ENV

# DMA queues the compiler spreads a kernel's transfers over (of the hardware's NUM_DMA_QUEUES): a compiler choice,
# not a published figure; every pass with a num_queues option defaults to it.
DEFAULT_NUM_QUEUES = 4
VERIFY_EACH_PASS_ENV = "NKIC_VERIFY_EACH_PASS"
KERNEL_FORMATS = ("bir", "klir")


@dataclass(frozen=True)
class CompileOptions:
    """Everything that changes what the pipeline does to a module (the module and the resolver aside)."""

    target: str | None = None  # None: the module's nkic.target (the tracer stamps it)
    num_queues: int = DEFAULT_NUM_QUEUES
    kernel_format: str = "bir"  # the carrier of internal kernels (penguin-to-bir)
    alloc_policy: str = "rotate"  # allocate-memory's policy
    roll_loops: bool = False  # keep uniform loops rolled (ARCHITECTURE.md "Rolled loops")
    roll_interleave: int = INTERLEAVE  # iterations per rolled body
    verify_each_pass: bool = False  # verify after every pass, not only after the last
    metrics: bool = False  # print-metrics before bir-to-isa
    debug_info: bool = False  # each instruction's source in the NEFF
    post_schedule: bool = True
    coalesce_dma: bool = True
    dma_transpose: bool = False

    @classmethod
    def build(cls, decorator: Any = None, env: Mapping[str, str] | None = None, **given: Any) -> CompileOptions:
        """The options of a compile: ``decorator`` (a trace's options object, or None), then ``env`` (default:
        ``os.environ``), then ``given`` (field names; None values are "not given")."""
        values = {**from_decorator(decorator), **from_env(os.environ if env is None else env)}
        return cls(**values).override(**given)

    def override(self, **given: Any) -> CompileOptions:
        """These options with the ``given`` fields changed (None values are "not given")."""
        unknown = sorted(set(given) - {f.name for f in fields(self)})
        if unknown:
            raise TypeError(f"unknown compile option(s): {', '.join(unknown)}")
        return replace(self, **{k: v for k, v in given.items() if v is not None})

    def cache_settings(self) -> dict[str, Any]:
        """The options that change the NEFF's bytes beyond the traced module's own (the NEFF cache keys on them)."""
        variant = ""
        if self.roll_loops:  # the iterations per rolled body change a rolled program's bytes
            n = self.roll_interleave
            variant = "roll-loops" if n == 1 else f"roll-loops-interleave-{n}"
        return {"variant": variant, "debug_info": self.debug_info}  # debug_info: the same code, other bytes


def from_decorator(options: Any) -> dict[str, Any]:
    """What a trace's decorator options say (``frontend.tracer.TraceOptions``; read by name, passes sit below the
    frontend)."""
    if options is None:
        return {}
    return {  # the decorator's option names, frontend/trace_context.py CompileOptions
        "target": options.target,
        "kernel_format": options.carrier_format,
        "alloc_policy": "stack" if options.enable_stack_allocator else "rotate",
    }


def from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """What the environment says; unset variables say nothing."""
    values: dict[str, Any] = {}
    if env.get(ROLL_ENV, "") != "":
        values["roll_loops"] = env[ROLL_ENV] != "0"
    interleave = env.get(INTERLEAVE_ENV, "").strip()
    if interleave.isdigit():
        values["roll_interleave"] = max(1, int(interleave))
    if env.get(VERIFY_EACH_PASS_ENV, "") != "":
        values["verify_each_pass"] = env[VERIFY_EACH_PASS_ENV] != "0"
    return values
