"""``penguin-to-bir`` (the spec's BirCodeGenLoop, Stage 3).

Each program of each traced kernel becomes a BIR function: tensors become memory locations, loops become loop
axes, every instruction is stamped with an id, an engine (from the NKI hint, or ``unassigned``) and its
flow/output/anti dependency edges. The host graph becomes the host BIR function ``@main`` (``@main.pN`` for SPMD
program N), and each kernel node becomes an IT56 carrier (``bir.nki_klir_kernel``) holding the kernel function —
as embedded BIR JSON (FORM B, ``kernel_format = "bir"``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir, bir_json, klir_binary, penguin
from nkic.dialects.common import dense_i64_attr, i64_attr, names_attr, string_attr
from nkic.dialects.traits import AccumulatesDst, ReadsDst
from nkic.passes.resolver import resolver_for
from nkic.target.machine import ENGINE_OF_HINT, NUM_PARTITIONS
from nkic.target.vocab import ON_CHIP
from nkic.version import __version__

NKI_BINARY_VERSION = f"nkic-{__version__}"


class _Deps:
    """Name-level dependency tracking in program order (loops are walked once, as written)."""

    def __init__(self) -> None:
        self.last_writer: dict[str, int] = {}
        self.readers: dict[str, list[int]] = {}

    def edges(self, reads: set[str], writes: set[str]) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for n in sorted(reads):
            if n in self.last_writer:
                out.append(("flow", self.last_writer[n]))
        for n in sorted(writes):
            if n in self.last_writer:
                out.append(("output", self.last_writer[n]))
            out.extend(("anti", r) for r in self.readers.get(n, []))
        seen: set[tuple[str, int]] = set()
        return [e for e in out if not (e in seen or seen.add(e))]

    def record(self, inst_id: int, reads: set[str], writes: set[str]) -> None:
        for n in reads:
            self.readers.setdefault(n, []).append(inst_id)
        for n in writes:
            self.last_writer[n] = inst_id
            self.readers[n] = []


@dataclass
class _ProgramLowering:
    """Lowers one program region of a penguin.kernel to a bir.function."""

    fn_name: str
    program: Region

    def run(self, input_names: list[str]) -> bir.FunctionOp:
        self.names: dict[SSAValue, str] = {}
        self.used: set[str] = set()
        self.memlocs: list[bir.MemLocOp] = []
        self.next_id = 0
        self.loops = 0
        self.deps = _Deps()
        block = self.program.block
        for arg, name in zip(block.args, input_names):
            self._declare(arg, name, "input")
        ret = block.last_op
        assert isinstance(ret, penguin.ReturnOp)
        self.outputs = {v: None for v in ret.values}
        # The instructions go straight into the function's block (not into a scratch block, detached and moved
        # one by one); the memlocs, known only at the end, are put in front of them.
        body = Block()
        fn = bir.FunctionOp(self.fn_name, [], [], Region(body))
        self._lower_block(block, body, scope=None)
        fn.properties["inputs"] = names_attr([self.names[a] for a in block.args])
        fn.properties["outputs"] = names_attr([self.names[v] for v in ret.values])
        if body.first_op is None:
            body.add_ops(self.memlocs)
        else:
            body.insert_ops_before(self.memlocs, body.first_op)
        return fn

    def _declare(self, value: SSAValue, hint: str, kind: str, scope: str | None = None) -> None:
        name, i = hint, 1
        while name in self.used:
            name, i = f"{hint}_{i}", i + 1
        self.used.add(name)
        self.names[value] = name
        t = penguin.tensor_type(value)
        # bir.MemLocOp(name, t.mem, t.dims, t.dtype, kind) with shared attributes, less IRDL's generic builder
        # (its argument lists): one memloc per tile of an unrolled kernel.
        props: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "memory": string_attr(t.mem),
            "shape": dense_i64_attr(t.dims),
            "dtype": string_attr(t.dtype),
            "kind": string_attr(kind),
        }
        alloc = value.owner
        if isinstance(alloc, penguin.AllocOp):
            if alloc.address is not None:
                props["address"] = alloc.address
            if alloc.data is not None:
                props["data"] = alloc.data
            if alloc.loc is not None and t.mem in ON_CHIP:
                props["loc"] = alloc.loc  # where a capacity error points (allocate-memory)
        if scope is not None:
            props["scope"] = StringAttr(scope)
        self.memlocs.append(bir.MemLocOp.create(properties=props))

    def _lower_block(self, src: Block, dst: Block, scope: str | None) -> None:
        for op in src.ops:
            if isinstance(op, penguin.AllocOp):
                kind = "output" if op.result in self.outputs else "internal" if op.data is None else "constant"
                if kind == "output" and op.data is not None:
                    raise PassFailedException(f"constant '{op.tensor_name.data}' cannot be a kernel output")
                if kind != "internal" and scope is not None:
                    raise PassFailedException(f"kernel {kind} '{op.tensor_name.data}' is allocated inside a loop")
                self._declare(op.result, op.tensor_name.data, kind, scope)
            elif isinstance(op, penguin.LoopOp):
                axis = f"L{self.loops}"
                self.loops += 1
                loop = bir.LoopOp(axis, op.kind.data, op.start.value.data, op.stop.value.data, op.step.value.data)
                self._lower_block(op.body.block, loop.body.block, axis)
                dst.add_op(loop)
            elif isinstance(op, penguin.PenguinInst):
                dst.add_op(self._lower_inst(op))
            elif not isinstance(op, penguin.ReturnOp):
                raise PassFailedException(f"penguin-to-bir cannot lower '{op.name}'")

    def _lower_inst(self, op: penguin.PenguinInst) -> bir.BirInst:
        names = self.names
        refs = [names[v] for v in op.operands]  # the tensors: an instruction's only operands
        props = dict(op.properties)
        hint = props.pop("engine", None)
        engine = ENGINE_OF_HINT.get(hint.data, "unassigned") if isinstance(hint, StringAttr) else "unassigned"
        kind = _inst_kind(type(op))
        if kind.is_dma:
            engine = ENGINE_OF_HINT["dma"]
        inst_id = self.next_id
        self.next_id += 1
        roles = props["roles"]
        written = _written_roles(roles, kind.write_roles)
        reads = {n for n, w in zip(refs, written) if not w}
        writes = {n for n, w in zip(refs, written) if w}
        if kind.reads_dst is not False and _reads_dst(kind, props):
            reads.add(refs[[r.data for r in roles.data].index("dst")])
        edges = self.deps.edges(reads, writes)
        self.deps.record(inst_id, reads, writes)
        props.update(
            refs=names_attr(refs),
            id=i64_attr(inst_id),
            engine=string_attr(engine),
        )
        if edges:
            props["deps"] = bir.deps_attr(edges)
        return kind.bir_op.create(properties=props)


@dataclass(frozen=True)
class _InstKind:
    """What lowering needs of a penguin instruction class, looked up once per class (not per instruction)."""

    bir_op: type[bir.BirInst]
    is_dma: bool
    write_roles: frozenset[str]
    reads_dst: bool | None  # True: always (ReadsDst); None: unless ``accumulate = 0`` (AccumulatesDst); False: never


_KINDS: dict[type[penguin.PenguinInst], _InstKind] = {}


def _inst_kind(cls: type[penguin.PenguinInst]) -> _InstKind:
    kind = _KINDS.get(cls)
    if kind is None:
        reads: bool | None = True if cls.has_trait(ReadsDst) else None if cls.has_trait(AccumulatesDst) else False
        kind = _KINDS[cls] = _InstKind(bir.INSTRUCTION_OPS[cls.OPNAME], cls.SPEC.is_dma,
                                       frozenset(cls.SPEC.write_roles), reads)  # fmt: skip
    return kind


def _reads_dst(kind: _InstKind, props: dict[str, Attribute]) -> bool:
    """``dialects.instructions.reads_dst`` from the class's traits looked up once: a predicated copy, or PSUM
    accumulation unless ``accumulate = false``."""
    if kind.reads_dst:
        return True
    acc = props.get("accumulate")
    return not (isinstance(acc, IntegerAttr) and acc.value.data == 0)


_WRITTEN: dict[tuple[int, frozenset[str]], tuple[ArrayAttr[StringAttr], tuple[bool, ...]]] = {}


def _written_roles(roles: ArrayAttr[StringAttr], write_roles: frozenset[str]) -> tuple[bool, ...]:
    """Whether each role is written, by the roles attribute (shared between instructions: names_attr)."""
    key = (id(roles), write_roles)
    hit = _WRITTEN.get(key)
    if hit is None or hit[0] is not roles:  # the attribute is kept in the entry, so its id is not reused
        hit = _WRITTEN[key] = (roles, tuple(r.data in write_roles for r in roles.data))
    return hit[1]


def _internal_kernel(node: penguin.KernelNodeOp) -> penguin.KernelOp:
    """An ``internal`` node names a library kernel (InternalMaterializedNkiKernel), traced now by the resolver
    the layer above provided (``passes/resolver.py``)."""
    name = node.callee.root_reference.data
    if node.kind.data != "internal":
        raise PassFailedException(f"kernel node calls @{name}, which is not in the module")
    attrs = json.loads(node.kernel_attrs.data) if node.kernel_attrs is not None else {}
    shapes = [(penguin.tensor_type(a).dims, penguin.tensor_type(a).dtype) for a in node.args]
    return resolver_for(name, PenguinToBirPass.name).resolve_penguin(name, shapes, attrs)


def _buf_shapes(fn: bir.FunctionOp) -> dict[str, DenseArrayBase]:
    """The SBUF and PSUM buffer shapes of a carrier: every memloc's bytes per partition, summed per memory."""
    per_part = {"sbuf": 0, "psum": 0}
    for m in fn.memlocs().values():
        if m.mem in per_part:
            per_part[m.mem] += m.bytes_per_partition
    return {mem: DenseArrayBase.from_list(i64, [NUM_PARTITIONS, n]) for mem, n in per_part.items()}


def kernel_functions(kernel: penguin.KernelOp) -> list[bir.FunctionOp]:
    """One BIR function per SPMD program of ``kernel``."""
    first = kernel.programs[0].block.args
    input_names = [a.name_hint or f"arg{i}" for i, a in enumerate(first)]
    fns = []
    for pid, region in enumerate(kernel.programs):
        name = kernel.sym_name.data if pid == 0 else f"{kernel.sym_name.data}.p{pid}"
        fn = _ProgramLowering(name, region).run(input_names)
        if kernel.grid > 1:
            fn.properties["grid"] = IntegerAttr(kernel.grid, i64)
            fn.properties["program_id"] = IntegerAttr(pid, i64)
        fns.append(fn)
    return fns


def make_klir_carrier(
    fn: bir.FunctionOp,
    arg_map: dict[str, str],
    out_map: dict[str, str],
    grid: int,
    pid: int,
    fmt: str,
    kernel: penguin.KernelOp | None = None,
) -> bir.NkiKlirKernelOp:
    """An IT56 holding ``fn`` as BIR JSON (FORM B), or ``kernel`` as an NKAB kernel-AST binary (FORM A)."""
    if fmt == "bir":
        payload = bir_json.function_text(fn)  # = dumps(function_to_json(fn)), without the document
        bir_json.remember_function(payload, fn)  # translate-nki-ast-to-bir takes it back (no rebuild)
    else:
        assert kernel is not None
        payload = klir_binary.to_carrier_string(klir_binary.encode_kernel(kernel))
    shapes = _buf_shapes(fn)
    props: dict[str, Attribute] = {
        "kernel_name": StringAttr(fn.sym_name.data),
        "kernel_format": StringAttr(fmt),
        "klir_binary": StringAttr(payload),
        "func_args": bir.str_map(arg_map),
        "func_outs": bir.str_map(out_map),
        "grid": IntegerAttr(grid, i64),
        "sb_buf_shape": shapes["sbuf"],
        "psum_buf_shape": shapes["psum"],
        "nki_binary_version_identifier": StringAttr(NKI_BINARY_VERSION),
    }
    if grid > 1:
        props["program_id"] = IntegerAttr(pid, i64)
    return bir.NkiKlirKernelOp.create(properties=props)


def _host_function(
    graph: penguin.GraphOp,
    kernels: dict[str, penguin.KernelOp],
    lowered: dict[str, list[bir.FunctionOp]],
    pid: int,
    grid: int,
    fmt: str,
    node_kernel: dict[penguin.KernelNodeOp, str] | None = None,
) -> bir.FunctionOp:
    block = graph.body.block
    names: dict[SSAValue, str] = {a: a.name_hint or f"in{i}" for i, a in enumerate(block.args)}
    memlocs: list[Operation] = []
    for a in block.args:
        t = penguin.tensor_type(a)
        memlocs.append(bir.MemLocOp(names[a], t.mem, t.dims, t.dtype, "input"))
    ret = block.last_op
    assert isinstance(ret, penguin.GraphReturnOp)
    returned = set(ret.values)
    carriers: list[Operation] = []
    for node in block.ops:
        if isinstance(node, penguin.KernelNodeOp):
            name = (node_kernel or {}).get(node, node.callee.root_reference.data)
            fn = lowered[name][pid]
            host_names = [n.data for n in node.result_names.data] if node.result_names else fn.output_names
            for res, out_name in zip(node.outs, host_names):
                names[res] = out_name
                t = penguin.tensor_type(res)
                # a result a later node reads and the graph does not return is an HBM scratch tensor
                kind = "internal" if res.uses and res not in returned else "output"
                memlocs.append(bir.MemLocOp(out_name, t.mem, t.dims, t.dtype, kind))
            arg_map = dict(zip(fn.input_names, (names[a] for a in node.args)))
            out_map = dict(zip(fn.output_names, host_names))
            carriers.append(make_klir_carrier(fn, arg_map, out_map, grid, pid, fmt, kernels[name]))
    name = graph.sym_name.data if pid == 0 else f"{graph.sym_name.data}.p{pid}"
    host = bir.FunctionOp(name, [names[a] for a in block.args], [names[v] for v in ret.values])
    if grid > 1:
        host.properties["grid"] = IntegerAttr(grid, i64)
        host.properties["program_id"] = IntegerAttr(pid, i64)
    host.body.block.add_ops([*memlocs, *carriers])
    return host


@dataclass(frozen=True)
class PenguinToBirPass(ModulePass):
    """Lower the host graph and its traced kernels to BIR, each kernel node becoming an IT56 carrier."""

    name = "penguin-to-bir"

    # "bir": the carrier embeds BIR JSON (FORM B); "klir": an NKAB kernel-AST binary (FORM A).
    kernel_format: str = "bir"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.kernel_format not in ("bir", "klir"):
            raise PassFailedException(f"kernel_format must be 'bir' or 'klir', not '{self.kernel_format}'")
        graphs = [g for g in op.ops if isinstance(g, penguin.GraphOp)]
        if not graphs and not any(isinstance(k, penguin.KernelOp) for k in op.ops):
            return  # nothing at penguin level (e.g. a module that starts in BIR)
        if len(graphs) != 1:
            raise PassFailedException("penguin-to-bir expects exactly one penguin.graph")
        graph = graphs[0]
        kernels = {k.sym_name.data: k for k in op.ops if isinstance(k, penguin.KernelOp)}
        node_kernel = self._resolve_internal(graph, kernels)
        grid = max((k.grid for k in kernels.values()), default=1)
        lowered = {name: kernel_functions(k) for name, k in kernels.items()}
        hosts = [
            _host_function(graph, kernels, lowered, pid, grid, self.kernel_format, node_kernel) for pid in range(grid)
        ]
        for old in [graph, *(k for k in kernels.values() if k.parent is not None)]:
            old.detach()
            old.erase()
        op.body.block.add_ops(hosts)

    @staticmethod
    def _resolve_internal(
        graph: penguin.GraphOp, kernels: dict[str, penguin.KernelOp]
    ) -> dict[penguin.KernelNodeOp, str]:
        """Trace each internal node's library kernel; nodes naming one kernel for other shapes or attributes get
        their own copy (``flash_attention``, ``flash_attention_1``, ...)."""
        node_kernel: dict[penguin.KernelNodeOp, str] = {}
        seen: dict[str, str] = {}
        for node in graph.body.block.ops:
            if not isinstance(node, penguin.KernelNodeOp):
                continue
            callee = node.callee.root_reference.data
            if callee in kernels and callee not in seen.values():
                continue
            key = json.dumps([callee, [str(a.type) for a in node.args], node.kernel_attrs.data if node.kernel_attrs
                              else ""])  # fmt: skip
            if key not in seen:
                name, i = callee, 1
                while name in kernels:
                    name, i = f"{callee}_{i}", i + 1
                kernel = _internal_kernel(node)
                kernel.properties["sym_name"] = StringAttr(name)
                kernels[name] = kernel
                seen[key] = name
            node_kernel[node] = seen[key]
        return node_kernel
