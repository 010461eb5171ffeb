"""Running framework programs: a StableHLO module (text, or a JAX function lowered by JAX) compiled by nkic and run
in the simulator. ``compile_stablehlo`` is what ``nkic compile model.mlir`` runs; ``from_jax(fn)(*args)`` the
Python form: JAX lowers ``fn`` for the arguments' shapes, nkic parses, routes, compiles (once per signature) and
simulates it, and the results come back as numpy arrays (jax arrays when any argument is one).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import ParseError, PassFailedException, VerifyException

from nkic.compiler.driver import CompileResult, compile_module, make_context, run_neff
from nkic.dialects import stablehlo as hlo
from nkic.frontend import Kernel
from nkic.frontend.errors import NkiError
from nkic.hlo.locations import describe, site
from nkic.hlo.lower import lower_module, main_function
from nkic.hlo.route_matmul import RouteMatmul, program_cost
from nkic.hlo.router import ROUTING
from nkic.hlo.tiles import dims
from nkic.support import safeio
from nkic.target.names import safe_name


@dataclass
class CompiledProgram:
    """A compiled StableHLO program: the NEFF and its inputs/outputs (name, shape, numpy dtype) in function order."""

    result: CompileResult
    inputs: list[tuple[str, tuple[int, ...], np.dtype]]
    outputs: list[tuple[str, tuple[int, ...], np.dtype]]

    def run(self, *arrays: Any, target: str | None = None) -> list[np.ndarray]:
        if len(arrays) != len(self.inputs):
            raise TypeError(f"the program takes {len(self.inputs)} arguments, got {len(arrays)}")
        feed = {}
        for (name, shape, dtype), a in zip(self.inputs, arrays):
            arr = np.asarray(a)
            if arr.shape != shape:
                raise ValueError(f"argument {name}: shape {arr.shape}, the program was compiled for {shape}")
            store = np.uint8 if dtype == np.bool_ else dtype
            feed[name] = np.ascontiguousarray(arr.astype(store).reshape(dims(shape)))
        out = run_neff(self.result.neff, feed, target=target).outputs
        return [out[name].reshape(shape).astype(dtype) for name, shape, dtype in self.outputs]


def route(module: ModuleOp, routing: bool = True, **compile_kw: Any) -> None:
    """Apply the attention routers (composite first, then the idiom), then the matmul router (each plain matmul
    routed to the library kernel when that makes the program, compiled with ``compile_kw``, faster on the timing
    model) to a parsed StableHLO module."""
    if routing:
        ctx = make_context()
        for p in ROUTING:
            p.apply(ctx, module)
        with program_cost(lambda trial: program_ns(trial, **compile_kw)):
            RouteMatmul().apply(ctx, module)


def program_ns(module: ModuleOp, **compile_kw: Any) -> float:
    """``module`` (consumed) compiled without routing and simulated timing-only on its target: its total ns, NEFF
    launch and teardown included (they cancel when two programs are compared); infinite when it does not compile
    (a routing that breaks the program is never chosen). A trial's warnings are not the program's: not shown."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prog = compile_stablehlo(module, routing=False, name="route_trial", **compile_kw)
    except (NkiError, PassFailedException):
        return math.inf
    return run_neff(prog.result.neff, {}, target=compile_kw.get("target"), timing_only=True).profile.total_ns


def compile_stablehlo(
    source: str | ModuleOp,
    *,
    routing: bool = True,
    dump_dir: str | Path | None = None,
    nki_kernels: Mapping[str, Kernel] | None = None,
    name: str = "stablehlo",
    filename: str = "<stablehlo>",
    **kw: Any,
) -> CompiledProgram:
    """Parse (when given text, named ``filename`` in locations and errors), route, lower to penguin and compile a
    StableHLO module. A 0-d input or output keeps shape () (the NEFF holds it as one element; its metadata lists it
    under ``scalars``, so ``nkic run`` reads and writes it as 0-d too)."""
    module = parse_program(source, filename) if isinstance(source, str) else source
    verify_program(module)
    dump = Path(dump_dir) if dump_dir is not None else None
    if dump is not None:
        safeio.make_dirs(dump)  # every dump file atomic and inside dump_dir (nkic.support.safeio), as compile_module's
        safeio.write_text(dump / "00-stablehlo.mlir", str(module) + "\n", within=dump)
    route(module, routing, **{k: v for k, v in kw.items() if k != "metadata"})
    if dump is not None:
        safeio.write_text(dump / "00-stablehlo-routed.mlir", str(module) + "\n", within=dump)
    fn = main_function(module)
    arg_types = [a.type for a in fn.body.block.args]
    ret = fn.body.block.last_op
    assert ret is not None
    res_types = [v.type for v in ret.operands]
    penguin_module = lower_module(module, dict(nki_kernels or {}))
    graph = penguin_module.ops.first
    in_names = [str(a.name_hint) for a in graph.body.block.args]  # type: ignore[union-attr]
    out_names = [str(r.name_hint) for r in graph.body.block.last_op.operands]  # type: ignore[union-attr]
    scalars = [n for n, t in [*zip(in_names, arg_types), *zip(out_names, res_types)] if not t.get_shape()]
    kw["metadata"] = {**kw.get("metadata", {}), **({"scalars": scalars} if scalars else {})}
    result = compile_module(penguin_module, name=name, dump_dir=dump_dir, **kw)

    def info(t: Any) -> tuple[tuple[int, ...], np.dtype]:
        return tuple(t.get_shape()), hlo.numpy_dtype(t.element_type)

    return CompiledProgram(
        result,
        [(n, *info(t)) for n, t in zip(in_names, arg_types)],
        [(n, *info(t)) for n, t in zip(out_names, res_types)],
    )


def from_jax(fn: Callable[..., Any], *, routing: bool = True, dump_dir: str | Path | None = None,
             target: str | None = None) -> Callable[..., Any]:  # fmt: skip
    """``from_jax(fn)(*args)``: ``fn`` lowered by JAX to StableHLO, compiled by nkic (once per argument signature)
    and simulated; the outputs in ``fn``'s output structure, as jax arrays when an argument is one."""
    import jax  # deferred: jax is an optional dependency, imported only when a JAX function is compiled

    jitted = jax.jit(fn, keep_unused=True)
    cache: dict[Any, tuple[CompiledProgram, Any]] = {}

    def call(*args: Any) -> Any:
        leaves = jax.tree_util.tree_leaves(args)
        key = (jax.tree_util.tree_structure(args), tuple((np.shape(a), str(np.asarray(a).dtype)) for a in leaves))
        if key not in cache:
            lowered = jitted.lower(*args)
            # JAX's default text (pretty form, chlo included) with its source locations: errors and profiles name
            # the user's lines.
            text = lowered.as_text(debug_info=True)
            name = getattr(fn, "__name__", "jax_fn")
            prog = compile_stablehlo(text, routing=routing, dump_dir=dump_dir, name=_safe(name), target=target,
                                     filename=f"jit({name}).mlir")  # fmt: skip
            cache[key] = (prog, lowered.out_tree)
        prog, out_tree = cache[key]
        outs = prog.run(*leaves, target=target)
        if any(isinstance(a, jax.Array) for a in leaves):
            outs = [jax.numpy.asarray(o) for o in outs]
        return jax.tree_util.tree_unflatten(out_tree, outs)

    return call


def _safe(name: str) -> str:
    return safe_name(name, "jax_fn")


def parse_program(text: str, filename: str = "<stablehlo>") -> ModuleOp:
    """``text`` parsed; a syntax error, or an op nkic does not read, is one ``NkiError`` at its line of the text."""


    try:
        return hlo.parse_stablehlo(text, filename=filename)
    except ParseError as e:
        where = e.span.get_location()
        line = text.splitlines()[where.line - 1].strip() if 0 < where.line <= len(text.splitlines()) else ""
        shown = line if len(line) <= 100 else line[:97] + "..."
        unknown = re.fullmatch(r"Operation (\S+) is not registered", e.msg)
        if unknown:  # the op's name first, as for an op that is read but not lowered
            raise NkiError(f"{unknown.group(1)}: not an op nkic reads, at '{shown}'",
                           "the README's StableHLO table lists the ops nkic reads", where=(filename, where.line))  # fmt: skip
        raise NkiError(f"cannot read the StableHLO: {e.msg}, at '{shown}'", where=(filename, where.line)) from None


def verify_program(module: ModuleOp) -> None:
    """``module`` verified; a broken rule is one ``NkiError`` at the op's line (its JAX line when it has one)."""

    try:
        module.verify()
    except VerifyException as e:
        for op in module.walk():
            try:
                op.verify(verify_nested_ops=False)
            except VerifyException as inner:
                where = site(op)
                if where is None:
                    raise NkiError(str(inner).splitlines()[0]) from None
                raise NkiError(f"{str(inner).splitlines()[0]} ({describe(op)})", where=where[:2]) from None
        raise NkiError(str(e).splitlines()[0]) from None
