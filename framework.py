"""Running framework programs: a StableHLO module (text, or a JAX function lowered by JAX) compiled by nkic and run
in the simulator. ``compile_stablehlo`` is what ``nkic compile model.mlir`` runs; ``from_jax(fn)(*args)`` the
Python form: JAX lowers ``fn`` for the arguments' shapes, nkic parses, routes, compiles (once per signature) and
simulates it, and the results come back as numpy arrays (jax arrays when any argument is one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nkic import safeio

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from nkic.driver import CompileResult
    from nkic.frontend import Kernel


@dataclass
class CompiledProgram:
    """A compiled StableHLO program: the NEFF and its inputs/outputs (name, shape, numpy dtype) in function order."""

    result: CompileResult
    inputs: list[tuple[str, tuple[int, ...], np.dtype]]
    outputs: list[tuple[str, tuple[int, ...], np.dtype]]

    def run(self, *arrays: Any, target: str | None = None) -> list[np.ndarray]:
        from nkic.driver import run_neff
        from nkic.hlo.tiles import dims

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


def route(module: ModuleOp, routing: bool = True) -> None:
    """Apply the attention routers (composite first, then the idiom) to a parsed StableHLO module."""
    from nkic.driver import make_context
    from nkic.hlo.router import ROUTING

    if routing:
        ctx = make_context()
        for p in ROUTING:
            p.apply(ctx, module)


def compile_stablehlo(
    source: str | ModuleOp,
    *,
    routing: bool = True,
    dump_dir: str | Path | None = None,
    nki_kernels: Mapping[str, Kernel] | None = None,
    name: str = "stablehlo",
    **kw: Any,
) -> CompiledProgram:
    """Parse (when given text), route, lower to penguin and compile a StableHLO module."""
    from nkic.dialects import stablehlo as hlo
    from nkic.driver import compile_module
    from nkic.hlo.lower import lower_module, main_function

    module = hlo.parse_stablehlo(source) if isinstance(source, str) else source
    module.verify()
    dump = Path(dump_dir) if dump_dir is not None else None
    if dump is not None:
        safeio.make_dirs(dump)  # every dump file atomic and inside dump_dir (nkic.safeio), as compile_module's
        safeio.write_text(dump / "00-stablehlo.mlir", str(module) + "\n", within=dump)
    route(module, routing)
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
    import jax

    jitted = jax.jit(fn, keep_unused=True)
    cache: dict[Any, tuple[CompiledProgram, Any]] = {}

    def call(*args: Any) -> Any:
        leaves = jax.tree_util.tree_leaves(args)
        key = (jax.tree_util.tree_structure(args), tuple((np.shape(a), str(np.asarray(a).dtype)) for a in leaves))
        if key not in cache:
            lowered = jitted.lower(*args)
            text = lowered.compiler_ir("stablehlo").operation.get_asm(print_generic_op_form=True)
            name = getattr(fn, "__name__", "jax_fn")
            prog = compile_stablehlo(text, routing=routing, dump_dir=dump_dir, name=_safe(name), target=target)
            cache[key] = (prog, lowered.out_tree)
        prog, out_tree = cache[key]
        outs = prog.run(*leaves, target=target)
        if any(isinstance(a, jax.Array) for a in leaves):
            outs = [jax.numpy.asarray(o) for o in outs]
        return jax.tree_util.tree_unflatten(out_tree, outs)

    return call


def _safe(name: str) -> str:
    from nkic.target.names import safe_name

    return safe_name(name, "jax_fn")
