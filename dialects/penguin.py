"""The ``penguin`` dialect: traced NKI kernels at tile level.

A module holds a host graph (``penguin.graph``) whose ``penguin.kernel_node`` ops call traced kernels
(``penguin.kernel``, one region per SPMD program). Kernel bodies allocate tensors in memory spaces
(``penguin.alloc``) and run one op per traced NKI instruction, destination first, each operand an access pattern
over a tensor. ``affine_range``/``sequential_range`` loops stay loops (``penguin.loop``); access patterns refer to
their induction variables by nesting depth (``i0`` = outermost).

    %t = penguin.alloc "t" : !penguin.tensor<sbuf, 128x512xf32>
    penguin.loop "affine" 0 to 4 step 1 {
      penguin.dma_copy dst %t[0 : [512, 128], [1, 512]], src %a[0 + 65536*i0 : [512, 128], [1, 512]]
    }
"""

from __future__ import annotations

import math

from collections.abc import Sequence
from typing import ClassVar, Self

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    I64,
    FunctionType,
    IntAttr,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    i64,
)
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, Region, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_region_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, NoTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from nkic.dialects import instructions as fields
from nkic.dialects.common import (
    MEMORIES,
    check_member,
    constant_attr,
    constant_bytes,
    dtype_of_element_type,
    int_attr,
    module_target,
    string_attr,
)
from nkic.dialects.fastverify import fast_verify
from nkic.dialects.inst import RoleOperandOp
from nkic.target.machine import MAX_PSUM_BYTES, NUM_PARTITIONS, TARGET_ALIASES, get_target
from nkic.target.rules import RULES, Call, Operand, problems
from nkic.target.rules import message as rule_message
from nkic.target.vocab import ON_CHIP, dtype_size



@irdl_attr_definition
class TensorType(ParametrizedAttribute, TypeAttribute):
    """``!penguin.tensor<sbuf, 128x512xbf16>``: a tensor's memory space, shape and dtype."""

    name = "penguin.tensor"
    memory: StringAttr
    shape: ArrayAttr[IntAttr]
    element_type: Attribute

    def __init__(self, memory: str, shape: Sequence[int], element_type: Attribute):
        super().__init__(string_attr(memory), ArrayAttr([int_attr(d) for d in shape]), element_type)

    @property
    def mem(self) -> str:
        return self.memory.data

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)

    @property
    def dtype(self) -> str:
        return dtype_of_element_type(self.element_type)

    def verify(self) -> None:
        check_member("memory space", self.mem, MEMORIES)
        dtype_of_element_type(self.element_type)
        if self.mem in ON_CHIP and self.dims and self.dims[0] > NUM_PARTITIONS:
            raise VerifyException(
                f"partition dimension {self.dims[0]} exceeds the architecture limit of {NUM_PARTITIONS}"
            )
        if self.mem == "psum":
            # a [P, B, ...] tensor may be B blocks (split-blocks allocates the live ones): one block must fit
            per_part = dtype_size(self.dtype)
            for d in self.dims[1 if len(self.dims) < 3 else 2 :]:
                per_part *= d
            if per_part > MAX_PSUM_BYTES:
                raise VerifyException(f"PSUM tensor needs {per_part} bytes per partition, PSUM has {MAX_PSUM_BYTES}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            mem = parser.parse_identifier()
            parser.parse_punctuation(",")
            dims, elt = parser.parse_ranked_shape()
        return StringAttr(mem), ArrayAttr([IntAttr(d) for d in dims]), elt

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.mem + ", ")
            printer.print_dimension_list(list(self.dims))
            printer.print_string("x")
            printer.print_attribute(self.element_type)


def tensor_type(value: SSAValue) -> TensorType:
    assert isinstance(value.type, TensorType)
    return value.type


# ------------------------------------------------------------------------------------------------------------------
# Structure: host graph, kernel node, kernel, loops, allocation
# ------------------------------------------------------------------------------------------------------------------


@irdl_op_definition
class GraphOp(IRDLOperation):
    """The host graph: its entry block arguments are the graph inputs."""

    name = "penguin.graph"
    sym_name = prop_def(SymbolNameConstraint())
    body = region_def("single_block")
    traits = traits_def(SymbolOpInterface())

    def __init__(self, name: str, body: Region):
        super().__init__(properties={"sym_name": StringAttr(name)}, regions=[body])

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        name = parser.parse_symbol_name()
        return cls(name.data, parser.parse_region())


@irdl_op_definition
class GraphReturnOp(IRDLOperation):
    name = "penguin.graph_return"
    values = var_operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(GraphOp)))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])


@irdl_op_definition
class KernelNodeOp(IRDLOperation):
    """A traced NKI kernel inserted into the host graph (the spec's ``insert_nki_kernel`` output).

    ``kind`` is ``external`` (a user ``@nki.jit`` trace) or ``internal`` (a registry kernel resolved by name).
    """

    name = "penguin.kernel_node"
    callee = prop_def(SymbolRefAttr)
    kind = prop_def(StringAttr)
    grid = prop_def(IntegerAttr)
    # internal kernels: compile-time arguments for the registry kernel, as JSON
    kernel_attrs = opt_prop_def(StringAttr)
    # the host-level names of the results (a graph of several nodes: NEFF outputs and intermediate HBM tensors);
    # without it a result takes the kernel's output name
    result_names = opt_prop_def(ArrayAttr[StringAttr])
    args = var_operand_def(TensorType)
    outs = var_result_def(TensorType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$callee `(` $args `)` attr-dict `:` functional-type($args, $outs)"

    def __init__(
        self, callee: str, args: Sequence[SSAValue], out_types: Sequence[Attribute], kind: str, grid: int
    ):
        super().__init__(
            operands=[args],
            result_types=[out_types],
            properties={
                "callee": SymbolRefAttr(callee),
                "kind": StringAttr(kind),
                "grid": IntegerAttr(grid, i64),
            },
        )

    def verify_(self) -> None:
        check_member("kernel kind", self.kind.data, ("external", "internal"))
        if self.result_names is not None and len(self.result_names.data) != len(self.outs):
            raise VerifyException("result_names must name every result")
        for v in [*self.args, *self.outs]:
            if tensor_type(v).mem != "shared_hbm":
                raise VerifyException(
                    "The input and output tensor of a NKI kernel must be in shared_hbm address space"
                )


@irdl_op_definition
class KernelOp(IRDLOperation):
    """A traced kernel: one single-block region per SPMD program; block arguments are the shared_hbm inputs."""

    name = "penguin.kernel"
    sym_name = prop_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)
    programs = var_region_def("single_block")
    traits = traits_def(SymbolOpInterface())

    def __init__(self, name: str, function_type: FunctionType, programs: Sequence[Region]):
        super().__init__(
            properties={"sym_name": StringAttr(name), "function_type": function_type}, regions=[programs]
        )

    @property
    def grid(self) -> int:
        return len(self.programs)

    def verify_(self) -> None:
        if not self.programs:
            raise VerifyException("penguin.kernel needs at least one program region")
        ins = list(self.function_type.inputs.data)
        for region in self.programs:
            if [a.type for a in region.block.args] != ins:
                raise VerifyException("program arguments must match the kernel's input types")
        for t in [*ins, *self.function_type.outputs.data]:
            if not isinstance(t, TensorType) or t.mem != "shared_hbm":
                raise VerifyException(
                    "The input and output tensor of a NKI kernel must be in shared_hbm address space"
                )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(" : ")
        printer.print_attribute(self.function_type)
        for i, region in enumerate(self.programs):
            printer.print_string(" program " if i == 0 else ", program ")
            printer.print_region(region, print_entry_block_args=True)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        name = parser.parse_symbol_name()
        parser.parse_punctuation(":")
        ftype = parser.parse_function_type()
        regions = []
        while parser.parse_optional_keyword("program") is not None:
            regions.append(parser.parse_region())
            if parser.parse_optional_punctuation(",") is None:
                break
        return cls(name.data, ftype, regions)


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Ends a kernel program, naming the returned shared_hbm tensors."""

    name = "penguin.return"
    values = var_operand_def(TensorType)
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(KernelOp)))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])


@fast_verify  # one per tensor a kernel allocates: the compiled IRDL check (same verdict and diagnostics)
@irdl_op_definition
class AllocOp(IRDLOperation):
    """``nl.ndarray``: a fresh tensor. ``address`` = ``(partition, byte offset)`` when the user placed it; ``data``
    = the contents of an ``nl.shared_constant`` (HBM only: "0x" + its little-endian bytes, row-major)."""

    name = "penguin.alloc"
    tensor_name = prop_def(StringAttr)
    address = opt_prop_def(DenseArrayBase[I64])
    data = opt_prop_def(StringAttr)
    loc = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$tensor_name attr-dict `:` type($result)"

    def __init__(
        self,
        name: str,
        type: TensorType,
        address: tuple[int, int] | None = None,
        loc: str | None = None,
        data: bytes | None = None,
    ):
        props: dict[str, Attribute] = {"tensor_name": StringAttr(name)}
        if address is not None:
            props["address"] = DenseArrayBase.from_list(i64, list(address))
        if data is not None:
            props["data"] = constant_attr(data)
        if loc is not None:
            props["loc"] = StringAttr(loc)
        super().__init__(result_types=[type], properties=props)

    def verify_(self) -> None:
        t = tensor_type(self.result)
        if self.address is not None:
            if t.mem not in ON_CHIP:
                raise VerifyException("only sbuf and psum tensors take an explicit address")
            if len(self.address.get_values()) != 2:
                raise VerifyException("address must be (partition, byte offset)")
        if self.data is not None:
            if t.mem in ON_CHIP:
                raise VerifyException("a constant (data) lives in HBM")
            constant_bytes(self.data, math.prod(t.dims) * dtype_size(t.dtype))


@irdl_op_definition
class LoopOp(IRDLOperation):
    """``affine_range`` / ``sequential_range``: the body is traced once; ``iN`` in access patterns is its index."""

    name = "penguin.loop"
    kind = prop_def(StringAttr)
    start = prop_def(IntegerAttr[I64])
    stop = prop_def(IntegerAttr[I64])
    step = prop_def(IntegerAttr[I64])
    loc = opt_prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$kind $start `to` $stop `step` $step $body attr-dict"

    def __init__(self, kind: str, start: int, stop: int, step: int, body: Region, loc: str | None = None):
        props: dict[str, Attribute] = {
            "kind": StringAttr(kind),
            "start": IntegerAttr(start, i64),
            "stop": IntegerAttr(stop, i64),
            "step": IntegerAttr(step, i64),
        }
        if loc is not None:
            props["loc"] = StringAttr(loc)
        super().__init__(properties=props, regions=[body])

    @property
    def trip_count(self) -> int:
        return len(range(self.start.value.data, self.stop.value.data, self.step.value.data))

    def verify_(self) -> None:
        check_member("loop kind", self.kind.data, ("affine", "sequential"))
        if self.step.value.data == 0:
            raise VerifyException("loop step must not be zero")


def loop_depth(op: IRDLOperation) -> int:
    depth, parent = 0, op.parent_op()
    while parent is not None and not isinstance(parent, KernelOp):
        depth += isinstance(parent, LoopOp)
        parent = parent.parent_op()
    return depth


# ------------------------------------------------------------------------------------------------------------------
# Instructions
# ------------------------------------------------------------------------------------------------------------------

class PenguinInst(RoleOperandOp):
    """A traced instruction: operands are SSA tensors, each with an access pattern."""

    OPNAME: ClassVar[str] = ""
    tensors = var_operand_def(TensorType)
    loc = opt_prop_def(StringAttr)
    call = opt_prop_def(StringAttr)  # the nki API call traced here (nl.exp, nisa.activation): for profiles
    # Explicit ordering (nisa.NkiInstruction.depends_on): ``tag`` names this instruction as a producer, ``after``
    # the producers it runs after. Unrolled copies keep both: a consumer runs after the latest earlier instruction
    # of each tag (the same iteration's, or the one in an enclosing scope).
    tag = opt_prop_def(StringAttr)
    after = opt_prop_def(ArrayAttr[StringAttr])

    def _num_refs(self) -> int:
        return len(self.tensors)

    def _print_ref(self, printer: Printer, index: int) -> None:
        printer.print_operand(self.tensors[index])

    @classmethod
    def _parse_ref(cls, parser: Parser) -> object:
        # Tensors are always defined before use (allocations, kernel arguments), so the type is known.
        ref = parser.parse_unresolved_operand()
        values = parser.ssa_values.get(ref.operand_name)
        if values is None or ref.index >= len(values):
            parser.raise_error("tensor used before it is defined", ref.span)
        return values[ref.index]

    @classmethod
    def _build(cls, refs: list[object], props: dict[str, Attribute], attrs: dict[str, Attribute]) -> Self:
        return cls.create(operands=list(refs), properties=props, attributes=attrs)

    def tensor(self, role: str) -> SSAValue | None:
        i = self.role_index(role)
        return None if i is None else self.tensors[i]

    def verify_(self) -> None:
        super().verify_()
        if self.OPNAME in RULES:  # first: a broken documented sentence is named, as at the nisa call
            call = self.rule_call()
            broken = problems(call)
            if broken:
                raise VerifyException(rule_message(call, broken[0]))
        spec = self.SPEC
        depth = loop_depth(self)
        for role, value, ap in zip(self.role_names, self.tensors, self.aps.data):
            t = tensor_type(value)
            allowed = spec.role(role).memories
            if t.mem not in allowed:
                raise VerifyException(f"{self.OPNAME} {role} cannot be in {t.mem} (allowed: {', '.join(allowed)})")
            if not spec.is_dma and t.mem == "psum" and self._on_gpsimd():
                raise VerifyException(f"{self.OPNAME} on gpsimd cannot access psum")
            if len(ap.iv_coeffs) > depth:
                raise VerifyException(f"{role} access pattern uses i{len(ap.iv_coeffs) - 1} outside its loop")
            if t.mem in ON_CHIP and ap.shape[0] > NUM_PARTITIONS:
                raise VerifyException(f"{role} spans {ap.shape[0]} partitions, the limit is {NUM_PARTITIONS}")

    def rule_call(self) -> Call:
        """This instruction as the documented rules see it (``nkic.target.rules``), on the generation its module
        was traced for (``nkic.target``); IR without one gets only the rules of every generation."""
        operands = {}
        for role, value, ap in zip(self.role_names, self.tensors, self.aps.data):
            t = tensor_type(value)
            operands[role] = Operand(t.mem, ap.view_dtype or t.dtype, (ap.shape[0], fields.free_elements(ap.shape)),
                                     indirect=ap.dyn[0] == "indirect")  # fmt: skip
        target = module_target(self)
        gen = get_target(target).nc_version if target in TARGET_ALIASES else None
        return Call(self.OPNAME, operands, fields.field_values(self), gen)

    def _on_gpsimd(self) -> bool:
        e = self.properties.get("engine")
        return isinstance(e, StringAttr) and e.data == "gpsimd"


def _penguin_op(opname: str) -> type[PenguinInst]:
    base = fields.INSTRUCTION_FIELDS[opname]
    cls = type(
        "".join(p.capitalize() for p in opname.split("_")) + "Op",
        (PenguinInst, base),
        {
            "name": f"penguin.{opname}",
            "OPNAME": opname,
            "__annotations__": {"OPNAME": ClassVar[str]},
            "__doc__": f"The traced ``nisa.{opname}`` instruction.",
        },
    )
    return fast_verify(irdl_op_definition(cls))


INSTRUCTION_OPS: dict[str, type[PenguinInst]] = {n: _penguin_op(n) for n in fields.INSTRUCTION_FIELDS}

DmaCopyOp = INSTRUCTION_OPS["dma_copy"]
DmaTransposeOp = INSTRUCTION_OPS["dma_transpose"]
MatmulOp = INSTRUCTION_OPS["matmul"]
TransposeOp = INSTRUCTION_OPS["transpose"]
TensorCopyOp = INSTRUCTION_OPS["tensor_copy"]
TensorTensorOp = INSTRUCTION_OPS["tensor_tensor"]
TensorScalarOp = INSTRUCTION_OPS["tensor_scalar"]
ScalarTensorTensorOp = INSTRUCTION_OPS["scalar_tensor_tensor"]
TensorReduceOp = INSTRUCTION_OPS["tensor_reduce"]
TensorScalarReduceOp = INSTRUCTION_OPS["tensor_scalar_reduce"]
ActivationOp = INSTRUCTION_OPS["activation"]
MemsetOp = INSTRUCTION_OPS["memset"]
IotaOp = INSTRUCTION_OPS["iota"]
AffineSelectOp = INSTRUCTION_OPS["affine_select"]
ReciprocalOp = INSTRUCTION_OPS["reciprocal"]

Penguin = Dialect(
    "penguin",
    [GraphOp, GraphReturnOp, KernelNodeOp, KernelOp, ReturnOp, AllocOp, LoopOp, *INSTRUCTION_OPS.values()],
    [TensorType],
)
