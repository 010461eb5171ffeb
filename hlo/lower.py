"""StableHLO module -> penguin module (host graph of kernel nodes), the framework front door's lowering.

0. ``chlo-legalize`` (``nkic.hlo.chlo_legalize``) decomposes the chlo ops into StableHLO.
1. ``inline_calls``: every ``func.call`` in ``@main`` is replaced by the callee's body (JAX outlines ``tril``,
   ``_where``, ... as private functions); an unrouted ``stablehlo.composite`` is replaced by its decomposition;
   ``decompose-hlo`` (``nkic.hlo.decompose_hlo``) rewrites clamp and case into lowered ops.
2. Constant folding (``tiles.fold``) finds every compile-time value.
3. ``@main``'s ops are cut into *segments* at each ``stablehlo.custom_call``: a segment is traced into one
   ``external`` kernel by ``tiles.SegmentInterpreter``; a custom call becomes a kernel node of its own:
   ``Attention*`` (the attention routers' output, ``nkic.hlo.router``) an ``internal`` node of the library's
   ``flash_attention`` with the backend_config's scale / causal / window as its arguments, ``AwsNeuronMLPNKI``
   (``nkic.hlo.route_matmul``) an ``internal`` node of the library's ``matmul`` (lhsT, rhs), and
   ``AwsNeuronCustomNativeKernel`` whose backend_config names an ``@nki.jit`` kernel (``"module:function"``) an
   ``external`` node holding that kernel's trace.
4. The graph's inputs are ``arg0, arg1, ...`` and its outputs ``out0, ...`` in function order, unless the module
   names them (``jax.result_info``/``mhlo.sharding``-free names in ``arg_attrs``/``res_attrs``: ``nkic.name``).
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr, SymbolRefAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from nkic.dialects import penguin
from nkic.dialects import stablehlo as hlo
from nkic.dialects.common import element_type
from nkic.frontend.errors import NkiError, pinned_note, without_note
from nkic.frontend.tracer import Kernel, TensorSpec
from nkic.hlo import tiles
from nkic.hlo.chlo_legalize import legalize_chlo
from nkic.hlo.decompose_hlo import decompose_hlo
from nkic.hlo.locations import inlined_location, located

ATTENTION_TARGETS = ("AttentionMMSoftmaxMM", "AttentionMMSoftmaxMMWithoutSwap", "CausalAttentionMMSoftmaxMMWithoutSwap")
NKI_TARGET = "AwsNeuronCustomNativeKernel"
MATMUL_TARGET = "AwsNeuronMLPNKI"  # the Neuron compiler's MLP router's custom call (nkic.hlo.route_matmul)


def main_function(module: ModuleOp) -> func.FuncOp:
    funcs = {f.sym_name.data: f for f in module.walk() if isinstance(f, func.FuncOp)}
    if "main" in funcs:
        return funcs["main"]
    public = [f for f in funcs.values() if f.sym_visibility is None or f.sym_visibility.data == "public"]
    if len(public) != 1:
        raise NkiError("the StableHLO module needs a @main function (or exactly one public function)")
    return public[0]


def _clone_body_before(op: Operation, body: Region, args: Sequence[SSAValue]) -> list[SSAValue]:
    """Clone ``body``'s single block before ``op`` with its arguments bound to ``args``; the returned values."""
    block = body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, args))
    results: list[SSAValue] = []
    for inner in block.ops:
        if isinstance(inner, (func.ReturnOp, hlo.ReturnOp)):
            results = [mapping.get(v, v) for v in inner.operands]
            break
        new = inner.clone(value_mapper=mapping)  # type: ignore[arg-type]
        for a, b in zip(inner.walk(), new.walk()):  # called from op's place, as MLIR's inliner records
            b.location = inlined_location(a, op)
        Rewriter.insert_op(new, _before(op))
        for a, b in zip(inner.results, new.results):
            mapping[a] = b
    return results


def _before(op: Operation) -> InsertPoint:
    return InsertPoint.before(op)


def inline_calls(module: ModuleOp) -> None:
    """Inline every ``func.call`` (and every unrouted composite) into the functions that call them, transitively."""
    funcs = {f.sym_name.data: f for f in module.walk() if isinstance(f, func.FuncOp)}
    changed = True
    while changed:
        changed = False
        for op in list(module.walk()):
            if isinstance(op, func.CallOp):
                callee = funcs[op.callee.root_reference.data]
            elif isinstance(op, hlo.CompositeOp):
                ref = op.decomposition
                assert isinstance(ref, SymbolRefAttr)
                callee = funcs[ref.root_reference.data]
            else:
                continue
            results = _clone_body_before(op, callee.body, list(op.operands))
            for old, new in zip(op.results, results):
                old.replace_all_uses_with(new)
            Rewriter.erase_op(op)
            changed = True
            break
    main = main_function(module)
    for f in funcs.values():  # nothing refers to the other functions any more
        if f is not main and f.sym_visibility is not None and f.sym_visibility.data == "private":
            Rewriter.erase_op(f)


def _name_attr(attrs: ArrayAttr | None, i: int) -> str | None:
    if attrs is None or i >= len(attrs.data):
        return None
    d = attrs.data[i]
    if isinstance(d, DictionaryAttr) and isinstance(d.data.get("nkic.name"), StringAttr):
        return d.data["nkic.name"].data  # type: ignore[union-attr]
    return None


def _penguin_type(value: SSAValue | Any) -> penguin.TensorType:
    t = hlo.ttype(value)
    dtype = tiles.nki_dtype(hlo.numpy_dtype(t.element_type))
    return penguin.TensorType("shared_hbm", tiles.dims(tuple(t.get_shape())), element_type(dtype))


@dataclass
class _Segment:
    ops: list[Operation] = field(default_factory=list)


@dataclass
class _Lowering:
    main: func.FuncOp
    nki_kernels: dict[str, Kernel] = field(default_factory=dict)
    consts: dict[SSAValue, np.ndarray] = field(default_factory=dict)
    names: dict[SSAValue, str] = field(default_factory=dict)  # host names of graph values
    graph_values: dict[SSAValue, SSAValue] = field(default_factory=dict)  # StableHLO value -> penguin graph value
    kernels: list[penguin.KernelOp] = field(default_factory=list)
    counter: int = 0

    def run(self) -> ModuleOp:
        block = self.main.body.block
        ret = block.last_op
        assert ret is not None
        for op in block.ops:
            value = tiles.fold(op, self.consts) if op is not ret else None
            if value is not None:  # numpy folds a 0-d op to a scalar (np.bool_, np.float32): keep it an array
                self.consts[op.results[0]] = np.asarray(value)
        arg_attrs = self.main.arg_attrs
        graph_block = Block(arg_types=[_penguin_type(a) for a in block.args])
        for i, (a, g) in enumerate(zip(block.args, graph_block.args)):
            name = _name_attr(arg_attrs, i) or f"arg{i}"
            g.name_hint = name
            self.names[a] = name
            self.graph_values[a] = g
        returned = list(ret.operands)
        res_names = [_name_attr(self.main.res_attrs, i) or f"out{i}" for i in range(len(returned))]
        # A returned value a node produces is that node's result, named after its first position; the other
        # positions (an input, a constant, a value returned again) are copies made by the last segment.
        out_name: dict[SSAValue, str] = {}
        tail: list[tuple[SSAValue, str]] = []
        for v, n in zip(returned, res_names):
            if isinstance(v.owner, Operation) and v not in self.consts and v not in out_name:
                out_name[v] = n
            else:
                tail.append((v, n))
        items: list[_Segment | hlo.CustomCallOp] = []
        for op in block.ops:
            if op is ret or (op.results and all(r in self.consts for r in op.results)):
                continue
            if isinstance(op, hlo.CustomCallOp):
                items.append(op)
            else:
                if not items or not isinstance(items[-1], _Segment):
                    items.append(_Segment())
                items[-1].ops.append(op)  # type: ignore[union-attr]
        if tail and (not items or not isinstance(items[-1], _Segment)):
            items.append(_Segment())
        graph_ops: list[Operation] = []
        for index, item in enumerate(items):
            later = items[index + 1 :]
            if isinstance(item, _Segment):
                graph_ops.append(self._segment(item, later, out_name, tail if item is items[-1] else []))
            else:
                with located(item):  # its kernel's instructions and errors are at the call's JAX / MLIR line
                    graph_ops.append(self._custom_call(item, out_name))
        outs: list[SSAValue] = []
        finals: dict[str, SSAValue] = {}
        for node in graph_ops:
            for r, n in zip(node.results, node.result_names.data):  # type: ignore[attr-defined]
                finals[n.data] = r
        outs = [finals[n] for n in res_names]
        graph_block.add_ops([*graph_ops, penguin.GraphReturnOp(outs)])
        graph = penguin.GraphOp("main", Region(graph_block))
        return ModuleOp([graph, *self.kernels])

    def _fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def _uses_after(self, value: SSAValue, later: Sequence[_Segment | hlo.CustomCallOp]) -> bool:
        for item in later:
            ops = item.ops if isinstance(item, _Segment) else [item]
            if any(value in o.operands for op in ops for o in op.walk()):
                return True
        return False

    def _segment(
        self,
        seg: _Segment,
        later: Sequence[_Segment | hlo.CustomCallOp],
        out_name: dict[SSAValue, str],
        tail: list[tuple[SSAValue, str]],
    ) -> penguin.KernelNodeOp:
        defined = {r for op in seg.ops for r in op.results}
        inputs: list[SSAValue] = []
        for op in seg.ops:
            for inner in op.walk():
                for v in inner.operands:
                    if v not in defined and v not in self.consts and v not in inputs and v in self.graph_values:
                        inputs.append(v)
        for v, _ in tail:
            if v not in defined and v not in self.consts and v not in inputs and v in self.graph_values:
                inputs.append(v)
        outputs: list[tuple[SSAValue, str]] = []
        for op in seg.ops:
            for r in op.results:
                if r in self.consts:
                    continue
                if r in out_name:
                    outputs.append((r, out_name[r]))
                elif self._uses_after(r, later):
                    outputs.append((r, self._fresh()))
        outputs += tail
        name = f"hlo_segment_{len(self.kernels)}"
        params = [self.names[v] for v in inputs]
        consts, ops = self.consts, seg.ops

        def body(*arrays: Any) -> Any:
            first = {}  # a value's shared tensor is its first output; other outputs of it are copies
            for v, n in outputs:
                first.setdefault(v, n)
            interp = tiles.SegmentInterpreter(consts, {v: n for v, n in first.items() if v in defined})
            for v, a in zip(inputs, arrays):
                interp.values[v] = tiles.Hbm(a, hlo.shape_of(v), a.dtype)
            interp.run(ops)
            return tuple(interp.finish(outputs))

        body.__name__ = name
        body.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params]
        )
        specs = [TensorSpec(tiles.dims(hlo.shape_of(v)), tiles.nki_dtype(tiles.result_dtype(v))) for v in inputs]
        return self._insert_traced(Kernel(body), specs, inputs, outputs, name)

    def _insert_traced(
        self, kernel: Kernel, specs: list[TensorSpec], inputs: list[SSAValue], outputs: list[tuple[SSAValue, str]],
        name: str, kwargs: dict[str, Any] | None = None,
    ) -> penguin.KernelNodeOp:  # fmt: skip
        with without_note():  # the trace is cached per kernel and specialisation, so it must not hold this site's note
            traced = kernel.trace(*specs, **(kwargs or {}))
        kop = next(op for op in traced.module.ops if isinstance(op, penguin.KernelOp)).clone()
        note = pinned_note()
        if note:  # this copy's instructions are noted with the custom call that traced them (profiles name it)
            for inst in kop.walk():
                call = inst.properties.get("call")
                if isinstance(call, StringAttr):
                    inst.properties["call"] = StringAttr(f"{note} {call.data}")
        kop.properties["sym_name"] = StringAttr(name)
        self.kernels.append(kop)
        out_types = list(kop.function_type.outputs.data)
        if len(out_types) != len(outputs):
            raise NkiError(f"kernel '{name}' returns {len(out_types)} tensors, the program expects {len(outputs)}")
        node = penguin.KernelNodeOp(name, [self.graph_values[v] for v in inputs], out_types, "external", traced.grid)
        self._bind(node, outputs)
        return node

    def _bind(self, node: penguin.KernelNodeOp, outputs: list[tuple[SSAValue, str]]) -> None:
        node.properties["result_names"] = ArrayAttr([StringAttr(n) for _, n in outputs])
        for (v, n), r in zip(outputs, node.outs):
            r.name_hint = n
            self.graph_values[v] = r
            self.names[v] = n

    def _custom_call(self, op: hlo.CustomCallOp, out_name: dict[SSAValue, str]) -> penguin.KernelNodeOp:
        target = op.call_target_name.data
        cfg = op.config()
        outputs = [(r, out_name.get(r) or self._fresh()) for r in op.outs]
        inputs = list(op.inputs)
        missing = [v for v in inputs if v not in self.graph_values]
        if missing:
            raise NkiError(f"custom_call @{target}: an operand is a compile-time constant; pass it as an input")
        if target in ATTENTION_TARGETS:
            kernel = str(cfg.get("kernel_name", "flash_attention"))
            attrs = {"scale": float(cfg.get("scale", 1.0)), "is_causal": bool(cfg.get("is_causal", False)),
                     "sliding_window": int(cfg.get("sliding_window", 0))}  # fmt: skip
            node = penguin.KernelNodeOp(
                kernel, [self.graph_values[v] for v in inputs], [_penguin_type(r) for r in op.outs], "internal", 1
            )
            node.properties["kernel_attrs"] = StringAttr(json.dumps(attrs, sort_keys=True))
            self._bind(node, outputs)
            return node
        if target == MATMUL_TARGET:
            node = penguin.KernelNodeOp(str(cfg.get("kernel_name", "matmul")), [self.graph_values[v] for v in inputs],
                                        [_penguin_type(r) for r in op.outs], "internal", 1)  # fmt: skip
            node.properties["kernel_attrs"] = StringAttr("{}")
            self._bind(node, outputs)
            return node
        if target == NKI_TARGET:
            ref = str(cfg.get("kernel_name", ""))
            kernel = self.nki_kernels.get(ref) or _import_kernel(ref)
            specs = [TensorSpec(tiles.dims(hlo.shape_of(v)), tiles.nki_dtype(tiles.result_dtype(v))) for v in inputs]
            kwargs = cfg.get("kernel_kwargs", {})
            assert isinstance(kwargs, dict)
            return self._insert_traced(kernel, specs, inputs, outputs, f"nki_{kernel.name}_{len(self.kernels)}",
                                       kwargs)  # fmt: skip
        known = f"attention variants {', '.join(ATTENTION_TARGETS)}, {MATMUL_TARGET} or {NKI_TARGET}"
        raise NkiError(f"custom_call @{target} is not a kernel nkic knows", known)


def _import_kernel(ref: str) -> Kernel:
    """``"package.module:function"`` -> the ``@nki.jit`` kernel it names."""
    module, _, name = ref.partition(":")
    if not module or not name:
        raise NkiError(f"{NKI_TARGET}: backend_config kernel_name '{ref}' must be 'module:function'")
    kernel = getattr(importlib.import_module(module), name, None)
    if not isinstance(kernel, Kernel):
        raise NkiError(f"{NKI_TARGET}: '{ref}' is not an @nki.jit kernel")
    return kernel


def lower_module(module: ModuleOp, nki_kernels: dict[str, Kernel] | None = None) -> ModuleOp:
    """A (routed) StableHLO module -> a penguin module; ``module`` is modified (chlo decomposed, calls inlined, clamp
    and case decomposed)."""
    legalize_chlo(module)
    inline_calls(module)
    decompose_hlo(module)
    return _Lowering(main_function(module), dict(nki_kernels or {})).run()


@dataclass(frozen=True)
class StablehloToPenguin(ModulePass):
    """``stablehlo-to-penguin``: the module's StableHLO replaced by the penguin host graph and its kernels."""

    name = "stablehlo-to-penguin"

    def apply(self, ctx: Any, op: ModuleOp) -> None:
        lowered = lower_module(op)
        for old in list(op.ops):
            Rewriter.erase_op(old, safe_erase=False)
        for new in list(lowered.ops):
            new.detach()
            op.body.block.add_op(new)
