"""The compile loop tests share: a traced kernel through the pipeline's passes, one at a time, so that a test can
look at the module between passes, change a pass's options or stop early."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nkic.compiler.driver import make_context
from nkic.library import RESOLVER
from nkic.passes.neff_assembly import isa_module_to_neff
from nkic.passes.options import CompileOptions
from nkic.passes.pipelines import backend, frontend_lowering
from nkic.passes.resolver import use_resolver
from nkic.runtime.neff import write_neff


def passes_on(traced: Any, **options: Any) -> Iterator[tuple[ModulePass, ModuleOp, Context]]:
    """Each pass of the whole pipeline for ``CompileOptions(**options)`` with the one module it runs on (a clone of
    the trace's) and its context, under the library's kernel resolver; the caller applies it (or replaces it,
    skips it, stops)."""
    opts = CompileOptions(**options)
    module, ctx = traced.module.clone(), make_context()
    with use_resolver(RESOLVER):
        for p in (*frontend_lowering(opts), *backend(opts)):
            yield p, module, ctx


def neff_bytes(module: ModuleOp) -> bytes:
    """The NEFF of an ISA-level module."""
    return write_neff(isa_module_to_neff(module, "k"))


def random_inputs(traced: Any, seed: int = 7) -> dict[str, np.ndarray]:
    """Standard-normal values for each input of a traced kernel, in its dtype (bfloat16 through ml_dtypes)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, dtype in traced.inputs:
        np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
        out[name] = rng.standard_normal(shape).astype(np_dtype)
    return out
