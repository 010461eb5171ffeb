"""The subset of StableHLO that nkic's framework front door reads (``nkic.hlo``).

xDSL 0.74 has no StableHLO dialect (``xdsl-jax`` pins an older xDSL), so this is nkic's own: the ops that
``jax.jit(f).lower(*args).as_text()`` emits for norms, MLPs, attention, logsumexp, top-k/sort, cumsum, scatter,
loops, convolutions and KV-cache steps, in MLIR's generic form (what ``get_asm(print_generic_op_form=True)``
prints) and in the pretty form StableHLO gives each op (JAX prints sort, reduce_window, scatter and gather
generically), plus the ``chlo`` ops JAX emits by default (``Chlo``; ``nkic.hlo.chlo_legalize`` decomposes them). Every op keeps its operands, results and attributes exactly as StableHLO defines them; verification checks
the shape rules the lowering relies on (element-wise shapes, broadcast/transpose/reshape/dot dimensions).

``parse_stablehlo(text)`` is the parse boundary: it reads hex float literals as bit patterns. MLIR prints a
non-finite float splat as its bits (``dense<0xFF800000> : tensor<f32>`` is −inf, ``dense<0xFF80> : tensor<bf16>``
too); xDSL 0.74 reads the hex token as an integer and converts it to a float (4.28e9).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Self

import ml_dtypes
import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    BFloat16Type,
    CallSiteLoc,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FileLineColLoc,
    Float16Type,
    Float32Type,
    Float64Type,
    FusedLoc,
    IntAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    NameLoc,
    StringAttr,
    TensorType,
    UnknownLoc,
    i64,
)
from xdsl.ir import Attribute, Block, Data, Dialect, Operation, ParametrizedAttribute, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
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
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind

# ------------------------------------------------------------------------------------------------------------------
# Attributes
# ------------------------------------------------------------------------------------------------------------------


class _Keyword(Data[str]):
    """``#stablehlo<precision DEFAULT>`` (opaque) or ``#stablehlo.precision<DEFAULT>``: one keyword of a set."""

    CHOICES: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> str:
        opaque = parser.parse_optional_punctuation("<") is None  # opaque form: '<' consumed with the name
        word = parser.parse_identifier()
        if not opaque:
            parser.parse_punctuation(">")
        return word

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data}>")

    def verify(self) -> None:
        if self.data not in self.CHOICES:
            raise VerifyException(f"{self.name} must be one of {', '.join(self.CHOICES)}, not '{self.data}'")


@irdl_attr_definition
class PrecisionAttr(_Keyword):
    name = "stablehlo.precision"
    CHOICES: ClassVar[tuple[str, ...]] = ("DEFAULT", "HIGH", "HIGHEST")


@irdl_attr_definition
class ComparisonDirectionAttr(_Keyword):
    name = "stablehlo.comparison_direction"
    CHOICES: ClassVar[tuple[str, ...]] = ("EQ", "NE", "GE", "GT", "LE", "LT")


@irdl_attr_definition
class ComparisonTypeAttr(_Keyword):
    name = "stablehlo.comparison_type"
    CHOICES: ClassVar[tuple[str, ...]] = ("NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


_DOT_FIELDS = ("lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
               "rhs_contracting_dimensions")  # fmt: skip


@irdl_attr_definition
class DotAttr(ParametrizedAttribute):
    """``#stablehlo.dot<lhs_batching_dimensions = [0], ..., rhs_contracting_dimensions = [1]>``; absent lists
    are empty (and not printed)."""

    name = "stablehlo.dot"
    lhs_batching_dimensions: ArrayAttr[IntAttr]
    rhs_batching_dimensions: ArrayAttr[IntAttr]
    lhs_contracting_dimensions: ArrayAttr[IntAttr]
    rhs_contracting_dimensions: ArrayAttr[IntAttr]

    def __init__(self, lb: Sequence[int], rb: Sequence[int], lc: Sequence[int], rc: Sequence[int]):
        super().__init__(*(ArrayAttr([IntAttr(d) for d in dims]) for dims in (lb, rb, lc, rc)))

    def dims(self, field: str) -> tuple[int, ...]:
        return tuple(d.data for d in getattr(self, field).data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        values: dict[str, list[int]] = {f: [] for f in _DOT_FIELDS}

        def entry() -> None:
            key = parser.parse_identifier()
            if key not in values:
                parser.raise_error(f"unknown dot dimension field '{key}'")
            parser.parse_punctuation("=")
            values[key] = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)

        parser.parse_comma_separated_list(parser.Delimiter.ANGLE, entry)
        return tuple(ArrayAttr([IntAttr(d) for d in values[f]]) for f in _DOT_FIELDS)

    def print_parameters(self, printer: Printer) -> None:
        parts = [f"{f} = [{', '.join(map(str, self.dims(f)))}]" for f in _DOT_FIELDS if self.dims(f)]
        printer.print_string("<" + ", ".join(parts) + ">")


@irdl_attr_definition
class DotAlgorithmAttr(ParametrizedAttribute):
    """``#stablehlo.dot_algorithm<lhs_precision_type = bf16, ..., allow_imprecise_accumulation = false>``: how
    a dot_general computes (JAX writes it for bf16 dots). Carried as written (each ``key = value``); nkic's matmul
    is bf16/fp32 operands with an fp32 accumulator, which the algorithms JAX emits for the CPU describe."""

    name = "stablehlo.dot_algorithm"
    entries: ArrayAttr[StringAttr]

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        items: list[StringAttr] = []

        def entry() -> None:
            key = parser.parse_identifier()
            parser.parse_punctuation("=")
            if (b := parser.parse_optional_boolean()) is not None:
                value = "true" if b else "false"
            elif (i := parser.parse_optional_integer()) is not None:
                value = str(i)
            else:
                value = str(parser.parse_type())
            items.append(StringAttr(f"{key} = {value}"))

        parser.parse_comma_separated_list(parser.Delimiter.ANGLE, entry)
        return (ArrayAttr(items),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<" + ", ".join(e.data for e in self.entries.data) + ">")


class _DimNumbers:
    """The textual form shared by gather's and scatter's dimension numbers: ``<field = [..], ...,
    index_vector_dim = N>``, absent lists empty (and not printed). A subclass names its FIELDS and its KIND."""

    FIELDS: ClassVar[tuple[str, ...]]
    KIND: ClassVar[str]
    # (each subclass declares the FIELDS parameters then index_vector_dim: xDSL takes parameters in declaration order)

    def dims(self, field: str) -> tuple[int, ...]:
        return tuple(d.data for d in getattr(self, field).data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        values: dict[str, list[int]] = {f: [] for f in cls.FIELDS}
        vector_dim = [0]

        def entry() -> None:
            key = parser.parse_identifier()
            parser.parse_punctuation("=")
            if key == "index_vector_dim":
                vector_dim[0] = parser.parse_integer()
            elif key in values:
                values[key] = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
            else:
                parser.raise_error(f"unknown {cls.KIND} dimension field '{key}'")

        parser.parse_comma_separated_list(parser.Delimiter.ANGLE, entry)
        return (*(ArrayAttr([IntAttr(d) for d in values[f]]) for f in cls.FIELDS), IntAttr(vector_dim[0]))

    def print_parameters(self, printer: Printer) -> None:
        parts = [f"{f} = [{', '.join(map(str, self.dims(f)))}]" for f in self.FIELDS if self.dims(f)]
        vector_dim = getattr(self, "index_vector_dim").data
        printer.print_string("<" + ", ".join([*parts, f"index_vector_dim = {vector_dim}"]) + ">")


@irdl_attr_definition
class GatherAttr(_DimNumbers, ParametrizedAttribute):
    """``#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0],
    index_vector_dim = 1>``: the gather's dimension numbers."""

    name = "stablehlo.gather"
    FIELDS = ("offset_dims", "collapsed_slice_dims", "operand_batching_dims", "start_indices_batching_dims",
              "start_index_map")  # fmt: skip
    KIND = "gather"
    offset_dims: ArrayAttr[IntAttr]
    collapsed_slice_dims: ArrayAttr[IntAttr]
    operand_batching_dims: ArrayAttr[IntAttr]
    start_indices_batching_dims: ArrayAttr[IntAttr]
    start_index_map: ArrayAttr[IntAttr]
    index_vector_dim: IntAttr


@irdl_attr_definition
class ScatterAttr(_DimNumbers, ParametrizedAttribute):
    """``#stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
    index_vector_dim = 1>``: the scatter's dimension numbers."""

    name = "stablehlo.scatter"
    FIELDS = ("update_window_dims", "inserted_window_dims", "input_batching_dims", "scatter_indices_batching_dims",
              "scatter_dims_to_operand_dims")  # fmt: skip
    KIND = "scatter"
    update_window_dims: ArrayAttr[IntAttr]
    inserted_window_dims: ArrayAttr[IntAttr]
    input_batching_dims: ArrayAttr[IntAttr]
    scatter_indices_batching_dims: ArrayAttr[IntAttr]
    scatter_dims_to_operand_dims: ArrayAttr[IntAttr]
    index_vector_dim: IntAttr


@irdl_attr_definition
class ConvAttr(ParametrizedAttribute):
    """``#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>``: which dimension of the input, the kernel and
    the output is the batch (``b``) / feature (``f``), input / output feature (``i``/``o``) and each spatial one
    (its index). Kept as the three layouts, one letter or spatial index per dimension."""

    name = "stablehlo.conv"
    input_layout: ArrayAttr[StringAttr]
    kernel_layout: ArrayAttr[StringAttr]
    output_layout: ArrayAttr[StringAttr]

    LETTERS: ClassVar[tuple[str, str, str]] = ("bf", "io", "bf")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        layouts = parse_conv_layouts(parser)
        parser.parse_punctuation(">")
        return tuple(ArrayAttr([StringAttr(s) for s in lay]) for lay in layouts)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.text()}>")

    def text(self) -> str:
        lay = [f"[{', '.join(s.data for s in a.data)}]" for a in (self.input_layout, self.kernel_layout,
                                                                  self.output_layout)]  # fmt: skip
        return f"{lay[0]}x{lay[1]}->{lay[2]}"

    def layout(self, which: int) -> tuple[str, ...]:
        return tuple(s.data for s in (self.input_layout, self.kernel_layout, self.output_layout)[which].data)

    def verify(self) -> None:
        for lay, letters in zip((self.layout(0), self.layout(1), self.layout(2)), self.LETTERS):
            spatial = sorted(int(s) for s in lay if s.isdigit())
            if sorted(s for s in lay if not s.isdigit()) != sorted(letters) or spatial != list(range(len(spatial))):
                raise VerifyException(f"stablehlo.conv: layout [{', '.join(lay)}] needs {letters[0]}, {letters[1]} "
                                      "and spatial dimensions 0..n-1")  # fmt: skip


def parse_conv_layouts(parser: AttrParser) -> tuple[list[str], list[str], list[str]]:
    """``[b, f, 0]x[o, i, 0]->[b, f, 0]`` (the lexer reads ``0]x`` and ``x[`` as separate tokens)."""

    def item() -> str:
        if (i := parser.parse_optional_integer(allow_boolean=False, allow_negative=False)) is not None:
            return str(i)
        return parser.parse_identifier()

    lhs = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, item)
    parser.parse_keyword("x")
    rhs = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, item)
    parser.parse_punctuation("->")
    out = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, item)
    return lhs, rhs, out


# ------------------------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------------------------


def ttype(value: SSAValue | Attribute) -> TensorType:
    t = value.type if isinstance(value, SSAValue) else value
    if not isinstance(t, TensorType):
        raise VerifyException(f"expected a ranked tensor, got {t}")
    return t


def shape_of(value: SSAValue | Attribute) -> tuple[int, ...]:
    return tuple(ttype(value).get_shape())


def int_list(attr: Attribute | None) -> tuple[int, ...]:
    """``array<i64: 1, 0>`` (DenseArrayBase) or ``[1, 0]`` / ``dense<[1, 0]>`` as a tuple of ints."""
    if attr is None:
        return ()
    if isinstance(attr, DenseArrayBase):
        return tuple(int(v) for v in attr.get_values())
    if isinstance(attr, ArrayAttr):
        return tuple(int(a.value.data) if isinstance(a, IntegerAttr) else int(a.data) for a in attr.data)
    if isinstance(attr, DenseIntOrFPElementsAttr):
        return tuple(int(v) for v in attr.get_values())
    raise VerifyException(f"expected a list of integers, got {attr}")


def i64_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def numpy_dtype(element_type: Attribute) -> np.dtype:
    """The numpy dtype of a StableHLO element type (i1 as bool)."""
    if isinstance(element_type, BFloat16Type):
        return np.dtype(ml_dtypes.bfloat16)
    if isinstance(element_type, Float16Type):
        return np.dtype(np.float16)
    if isinstance(element_type, Float32Type):
        return np.dtype(np.float32)
    if isinstance(element_type, Float64Type):
        return np.dtype(np.float64)
    if isinstance(element_type, IntegerType):
        width = element_type.width.data
        if width == 1:
            return np.dtype(np.bool_)
        unsigned = element_type.signedness.data.name == "UNSIGNED"
        return np.dtype(f"{'u' if unsigned else ''}int{width}")
    raise VerifyException(f"unsupported element type {element_type}")


def dense_to_numpy(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    """The attribute's values as an array of its type's shape and dtype."""
    t = attr.get_type()
    dtype = numpy_dtype(t.element_type)
    values = attr.get_values()
    return np.asarray(values, dtype=np.float64 if dtype.kind == "f" or dtype == np.dtype(ml_dtypes.bfloat16)
                      else None).astype(dtype).reshape(tuple(t.get_shape()))  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# Pretty-form helpers
# ------------------------------------------------------------------------------------------------------------------


def _int_list_(parser: Parser) -> list[int]:
    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)


def _bracketed(values: Sequence[int]) -> str:
    return f"[{', '.join(map(str, values))}]"


def _parse_operands_and_fields(parser: Parser, readers: dict[str, Callable[[], Any]]) -> tuple[list[Any], dict[str, Any]]:
    """``%a, %b, ..., key = value, ...``: the operands, then ``key = value`` entries (each ``key`` one of
    ``readers``)."""
    operands = [parser.parse_unresolved_operand()]
    found: dict[str, Any] = {}
    while parser.parse_optional_punctuation(",") is not None:
        if not found and parser._current_token.kind == MLIRTokenKind.PERCENT_IDENT:
            operands.append(parser.parse_unresolved_operand())
            continue
        key = parser.parse_identifier()
        if key not in readers:
            parser.raise_error(f"unexpected '{key}', expected {' or '.join(readers) or 'an operand'}")
        parser.parse_punctuation("=")
        found[key] = readers[key]()
    return operands, found


def _finish_fn_typed(parser: Parser, cls: type[IRDLOperation], operands: Sequence[Any],
                     properties: dict[str, Attribute], regions: Sequence[Region] = ()) -> Any:  # fmt: skip
    """``attr-dict : (operand types) -> result types``, then the op."""
    attrs = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    pos = parser.pos
    ftype = parser.parse_function_type()
    values = parser.resolve_operands(list(operands), list(ftype.inputs.data), pos)
    return cls.create(operands=values, result_types=list(ftype.outputs.data), properties=properties,
                      attributes=attrs, regions=list(regions))  # fmt: skip


def _print_fn_type(printer: Printer, op: Operation, attributes: dict[str, Attribute] | None = None) -> None:
    """``attr-dict : (operand types) -> result types``; ``attributes`` in place of the op's own."""
    printer.print_op_attributes(op.attributes if attributes is None else attributes)
    ins = ", ".join(str(v.type) for v in op.operands)
    outs = [str(r.type) for r in op.results]
    printer.print_string(f" : ({ins}) -> " + (outs[0] if len(outs) == 1 else f"({', '.join(outs)})"))


def _print_operands(printer: Printer, values: Sequence[SSAValue]) -> None:
    printer.print_string(" ")
    printer.print_list(values, printer.print_operand)


# ------------------------------------------------------------------------------------------------------------------
# Ops
# ------------------------------------------------------------------------------------------------------------------


class _HloOp(IRDLOperation):
    """Generic form for every op; ops with a pretty form override ``parse``/``print``."""


def _same_shapes(op: IRDLOperation) -> None:
    shapes = {shape_of(v) for v in [*op.operands, *op.results]}
    if len(shapes) != 1:
        raise VerifyException(f"{op.name}: operands and result must have one shape, got {sorted(shapes)}")


class _ElementwiseOp(_HloOp):
    """``stablehlo.add %a, %b : tensor<4xf32>`` (pretty) — operands and result of one type (compare: i1 result)."""

    ARITY: ClassVar[int] = 2
    operand = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        if len(self.operand) != self.ARITY:
            raise VerifyException(f"{self.name} takes {self.ARITY} operands, got {len(self.operand)}")
        _same_shapes(self)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        operands = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        values = parser.resolve_operands(operands, [t] * len(operands), parser.pos)
        return cls.create(operands=values, result_types=[t], attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operand, printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)


def _elementwise(opname: str, arity: int) -> type[_ElementwiseOp]:
    cls = type(
        "".join(p.capitalize() for p in opname.split("_")) + "Op",
        (_ElementwiseOp,),
        {"name": f"stablehlo.{opname}", "ARITY": arity, "__annotations__": {"ARITY": ClassVar[int]}},
    )
    return irdl_op_definition(cls)


BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder", "and", "or", "xor")
UNARY = ("exponential", "log", "tanh", "logistic", "sqrt", "rsqrt", "negate", "abs", "sine", "cosine",
         "exponential_minus_one", "log_plus_one", "floor", "ceil", "sign", "not")  # fmt: skip
ELEMENTWISE: dict[str, type[_ElementwiseOp]] = {
    **{n: _elementwise(n, 2) for n in BINARY},
    **{n: _elementwise(n, 1) for n in UNARY},
}


@irdl_op_definition
class ConstantOp(_HloOp):
    """``stablehlo.constant dense<...> : tensor<...>``."""

    name = "stablehlo.constant"
    value = prop_def(DenseIntOrFPElementsAttr)
    output = result_def()
    traits = traits_def(Pure())

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(properties={"value": value}, result_types=[value.get_type()])

    def verify_(self) -> None:
        if self.value.get_type() != self.output.type:
            raise VerifyException("stablehlo.constant: the value's type must be the result type")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        attrs = parser.parse_optional_attr_dict()
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error("stablehlo.constant expects a dense elements attribute")
        op = cls(value)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_op_attributes(self.attributes)
        printer.print_string(" ")
        printer.print_attribute(self.value)

    def numpy(self) -> np.ndarray:
        return dense_to_numpy(self.value)


def _parse_unary_with_types(parser: Parser) -> tuple[SSAValue, Attribute]:
    """``%x ... : (T) -> U`` or ``%x ... : U`` when the operand has the result's type."""
    parser.parse_punctuation(":")
    if parser.parse_optional_punctuation("(") is not None:
        src = parser.parse_type()
        parser.parse_punctuation(")")
        parser.parse_punctuation("->")
        return src, parser.parse_type()
    t = parser.parse_type()
    return t, t


def _print_unary_types(printer: Printer, src: Attribute, dst: Attribute) -> None:
    printer.print_string(" : ")
    if src == dst:
        printer.print_attribute(dst)
        return
    printer.print_string("(")
    printer.print_attribute(src)
    printer.print_string(") -> ")
    printer.print_attribute(dst)


class _UnaryShapeOp(_HloOp):
    """``stablehlo.<op> %x[, dims = [..]] : (T) -> U``."""

    DIMS: ClassVar[str | None] = None
    operand = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        x = parser.parse_unresolved_operand()
        props: dict[str, Attribute] = {}
        if cls.DIMS is not None:
            parser.parse_punctuation(",")
            parser.parse_keyword("dims")
            parser.parse_punctuation("=")
            dims = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
            props[cls.DIMS] = i64_array(dims)
        attrs = parser.parse_optional_attr_dict()
        src, dst = _parse_unary_with_types(parser)
        (value,) = parser.resolve_operands([x], [src], parser.pos)
        return cls.create(operands=[value], result_types=[dst], properties=props, attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.operand[0])
        if self.DIMS is not None:
            printer.print_string(f", dims = [{', '.join(map(str, int_list(self.properties[self.DIMS])))}]")
        printer.print_op_attributes(self.attributes)
        _print_unary_types(printer, self.operand[0].type, self.result.type)

    def verify_(self) -> None:
        if len(self.operand) != 1:
            raise VerifyException(f"{self.name} takes one operand")


@irdl_op_definition
class ConvertOp(_UnaryShapeOp):
    name = "stablehlo.convert"

    def verify_(self) -> None:
        super().verify_()
        _same_shapes(self)


@irdl_op_definition
class ReshapeOp(_UnaryShapeOp):
    name = "stablehlo.reshape"

    def verify_(self) -> None:
        super().verify_()
        if math.prod(shape_of(self.operand[0])) != math.prod(shape_of(self.result)):
            raise VerifyException("stablehlo.reshape: operand and result must have the same number of elements")


@irdl_op_definition
class BroadcastInDimOp(_UnaryShapeOp):
    name = "stablehlo.broadcast_in_dim"
    DIMS: ClassVar[str | None] = "broadcast_dimensions"
    broadcast_dimensions = prop_def(DenseArrayBase)

    def verify_(self) -> None:
        super().verify_()
        src, dst, dims = shape_of(self.operand[0]), shape_of(self.result), int_list(self.broadcast_dimensions)
        if len(dims) != len(src):
            raise VerifyException("stablehlo.broadcast_in_dim: one broadcast dimension per operand dimension")
        for i, d in enumerate(dims):
            if not 0 <= d < len(dst) or src[i] not in (1, dst[d]):
                raise VerifyException(f"stablehlo.broadcast_in_dim: operand dimension {i} cannot go to {d}")


@irdl_op_definition
class TransposeOp(_UnaryShapeOp):
    name = "stablehlo.transpose"
    DIMS: ClassVar[str | None] = "permutation"
    permutation = prop_def(DenseArrayBase)

    def verify_(self) -> None:
        super().verify_()
        perm, src = int_list(self.permutation), shape_of(self.operand[0])
        if sorted(perm) != list(range(len(src))):
            raise VerifyException("stablehlo.transpose: permutation must be a permutation of the operand's dims")
        if tuple(src[p] for p in perm) != shape_of(self.result):
            raise VerifyException("stablehlo.transpose: result shape must be the permuted operand shape")


@irdl_op_definition
class SliceOp(_HloOp):
    """``stablehlo.slice``: ``result[i] = operand[start + i * stride]`` per dimension (generic form)."""

    name = "stablehlo.slice"
    start_indices = prop_def(DenseArrayBase)
    limit_indices = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    operand = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        src = shape_of(self.operand[0])
        start, limit, step = int_list(self.start_indices), int_list(self.limit_indices), int_list(self.strides)
        if not len(start) == len(limit) == len(step) == len(src):
            raise VerifyException("stablehlo.slice: one start, limit and stride per operand dimension")
        if any(not 0 <= a <= b <= n or s <= 0 for a, b, s, n in zip(start, limit, step, src)):
            raise VerifyException("stablehlo.slice: 0 <= start <= limit <= size and stride > 0")
        if tuple(-(-(b - a) // s) for a, b, s in zip(start, limit, step)) != shape_of(self.result):
            raise VerifyException("stablehlo.slice: result shape must be ceil((limit - start) / stride)")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        """``stablehlo.slice %x [0:8, 4:16:2] : (T) -> U`` (``start:limit[:stride]`` per dimension)."""
        x = parser.parse_unresolved_operand()

        def bound() -> tuple[int, int, int]:
            start = parser.parse_integer()
            parser.parse_punctuation(":")
            limit = parser.parse_integer()
            step = parser.parse_integer() if parser.parse_optional_punctuation(":") is not None else 1
            return start, limit, step

        bounds = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, bound)
        props = {k: i64_array([b[i] for b in bounds]) for i, k in enumerate(("start_indices", "limit_indices",
                                                                              "strides"))}  # fmt: skip
        return _finish_fn_typed(parser, cls, [x], props)  # type: ignore[return-value]

    def print(self, printer: Printer) -> None:
        start, limit, step = int_list(self.start_indices), int_list(self.limit_indices), int_list(self.strides)
        parts = [f"{a}:{b}" + (f":{c}" if c != 1 else "") for a, b, c in zip(start, limit, step)]
        _print_operands(printer, self.operand)
        printer.print_string(f" [{', '.join(parts)}]")
        _print_fn_type(printer, self)


@irdl_op_definition
class ConcatenateOp(_HloOp):
    """``stablehlo.concatenate``: the operands one after another along ``dimension`` (generic form)."""

    name = "stablehlo.concatenate"
    dimension = prop_def(IntegerAttr)
    inputs = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        d, out = self.dimension.value.data, shape_of(self.result)
        shapes = [shape_of(v) for v in self.inputs]
        if not shapes or not 0 <= d < len(out):
            raise VerifyException("stablehlo.concatenate: at least one operand and a dimension of the result")
        rest = {s[:d] + s[d + 1 :] for s in shapes}
        if rest != {out[:d] + out[d + 1 :]} or sum(s[d] for s in shapes) != out[d]:
            raise VerifyException("stablehlo.concatenate: operands must agree off the dimension and sum to it")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        """``stablehlo.concatenate %a, %b, dim = 1 : (T, U) -> V``."""
        operands, fields = _parse_operands_and_fields(parser, {"dim": parser.parse_integer})
        if "dim" not in fields:
            parser.raise_error("stablehlo.concatenate needs 'dim = N'")
        return _finish_fn_typed(parser, cls, operands, {"dimension": IntegerAttr(fields["dim"], i64)})  # type: ignore[return-value]

    def print(self, printer: Printer) -> None:
        _print_operands(printer, self.inputs)
        printer.print_string(f", dim = {self.dimension.value.data}")
        _print_fn_type(printer, self)


@irdl_op_definition
class PadOp(_HloOp):
    """``stablehlo.pad(%x, %value)``: ``edge_padding_low``/``high`` elements before/after each dimension and
    ``interior_padding`` between its elements, all of the scalar ``%value`` (generic form)."""

    name = "stablehlo.pad"
    edge_padding_low = prop_def(DenseArrayBase)
    edge_padding_high = prop_def(DenseArrayBase)
    interior_padding = prop_def(DenseArrayBase)
    operand = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        if len(self.operand) != 2 or shape_of(self.operand[1]):
            raise VerifyException("stablehlo.pad takes an operand and a scalar padding value")
        src = shape_of(self.operand[0])
        low, high, interior = (int_list(a) for a in (self.edge_padding_low, self.edge_padding_high,
                                                      self.interior_padding))  # fmt: skip
        if not len(low) == len(high) == len(interior) == len(src) or any(i < 0 for i in interior):
            raise VerifyException("stablehlo.pad: one low, high and (non-negative) interior padding per dimension")
        want = tuple(lo + hi + n + max(n - 1, 0) * i for lo, hi, n, i in zip(low, high, src, interior))
        if want != shape_of(self.result):
            raise VerifyException(f"stablehlo.pad: result shape must be {want}")

    _PRETTY: ClassVar[dict[str, str]] = {"low": "edge_padding_low", "high": "edge_padding_high",
                                         "interior": "interior_padding"}  # fmt: skip

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        """``stablehlo.pad %x, %v, low = [1, 0], high = [1, 0], interior = [0, 0] : (T, tensor<f32>) -> U``."""
        operands, fields = _parse_operands_and_fields(parser, {k: lambda: _int_list_(parser) for k in cls._PRETTY})
        if set(fields) != set(cls._PRETTY):
            parser.raise_error("stablehlo.pad needs low, high and interior")
        props = {cls._PRETTY[k]: i64_array(v) for k, v in fields.items()}
        return _finish_fn_typed(parser, cls, operands, props)  # type: ignore[return-value]

    def print(self, printer: Printer) -> None:
        _print_operands(printer, self.operand)
        for word, prop in self._PRETTY.items():
            printer.print_string(f", {word} = {_bracketed(int_list(self.properties[prop]))}")
        _print_fn_type(printer, self)


@irdl_op_definition
class GatherOp(_HloOp):
    """``stablehlo.gather(%operand, %start_indices)``: slices of ``slice_sizes`` at run-time start indices
    (generic form; nkic lowers the row gather ``table[ids]`` and ``jnp.take(..., axis=0)`` emit)."""

    name = "stablehlo.gather"
    dimension_numbers = prop_def(GatherAttr)
    slice_sizes = prop_def(DenseArrayBase)
    indices_are_sorted = opt_prop_def(Attribute)
    operand = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        if len(self.operand) != 2:
            raise VerifyException("stablehlo.gather takes an operand and start indices")
        src, sizes = shape_of(self.operand[0]), int_list(self.slice_sizes)
        if len(sizes) != len(src) or any(not 0 <= s <= n for s, n in zip(sizes, src)):
            raise VerifyException("stablehlo.gather: one slice size per operand dimension, within it")
        dn = self.dimension_numbers
        if any(sizes[d] > 1 for d in dn.dims("collapsed_slice_dims")):
            raise VerifyException("stablehlo.gather: a collapsed slice dimension has size 1")


@irdl_op_definition
class DynamicSliceOp(_HloOp):
    """``stablehlo.dynamic_slice(%x, %i0, %i1, ...)``: a ``slice_sizes`` block at run-time (scalar) start indices,
    each clamped into ``[0, size - slice_size]`` (generic form)."""

    name = "stablehlo.dynamic_slice"
    slice_sizes = prop_def(DenseArrayBase)
    operand = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        src, sizes = shape_of(self.operand[0]), int_list(self.slice_sizes)
        if len(self.operand) != 1 + len(src) or any(shape_of(v) for v in self.operand[1:]):
            raise VerifyException("stablehlo.dynamic_slice: one scalar start index per operand dimension")
        if len(sizes) != len(src) or any(not 0 <= s <= n for s, n in zip(sizes, src)):
            raise VerifyException("stablehlo.dynamic_slice: one slice size per operand dimension, within it")
        if sizes != shape_of(self.result):
            raise VerifyException("stablehlo.dynamic_slice: the result shape is slice_sizes")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        """``stablehlo.dynamic_slice %x, %i, %j, sizes = [2, 16] : (T, tensor<i32>, tensor<i32>) -> U``."""
        operands, fields = _parse_operands_and_fields(parser, {"sizes": lambda: _int_list_(parser)})
        if "sizes" not in fields:
            parser.raise_error("stablehlo.dynamic_slice needs 'sizes = [...]'")
        return _finish_fn_typed(parser, cls, operands, {"slice_sizes": i64_array(fields["sizes"])})  # type: ignore[return-value]

    def print(self, printer: Printer) -> None:
        _print_operands(printer, self.operand)
        printer.print_string(f", sizes = {_bracketed(int_list(self.slice_sizes))}")
        _print_fn_type(printer, self)


@irdl_op_definition
class IotaOp(_HloOp):
    """``stablehlo.iota dim = 0 : tensor<4x4xi32>``."""

    name = "stablehlo.iota"
    iota_dimension = prop_def(IntegerAttr)
    output = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        if not 0 <= self.iota_dimension.value.data < len(shape_of(self.output)):
            raise VerifyException("stablehlo.iota: iota_dimension out of range")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        parser.parse_keyword("dim")
        parser.parse_punctuation("=")
        dim = parser.parse_integer()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        return cls.create(properties={"iota_dimension": IntegerAttr(dim, i64)}, result_types=[t], attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(f" dim = {self.iota_dimension.value.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.output.type)


@irdl_op_definition
class CompareOp(_HloOp):
    """``stablehlo.compare GE, %a, %b, SIGNED : (T, T) -> tensor<..xi1>``."""

    name = "stablehlo.compare"
    comparison_direction = prop_def(ComparisonDirectionAttr)
    compare_type = opt_prop_def(ComparisonTypeAttr)
    operand = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        if len(self.operand) != 2:
            raise VerifyException("stablehlo.compare takes two operands")
        _same_shapes(self)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        props: dict[str, Attribute] = {"comparison_direction": ComparisonDirectionAttr(parser.parse_identifier())}
        parser.parse_punctuation(",")
        a = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        b = parser.parse_unresolved_operand()
        if parser.parse_optional_punctuation(",") is not None:
            props["compare_type"] = ComparisonTypeAttr(parser.parse_identifier())
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ftype = parser.parse_function_type()
        values = parser.resolve_operands([a, b], list(ftype.inputs.data), parser.pos)
        return cls.create(operands=values, result_types=list(ftype.outputs.data), properties=props, attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.comparison_direction.data}, ")
        printer.print_list(self.operand, printer.print_operand)
        if self.compare_type is not None:
            printer.print_string(f", {self.compare_type.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(f" : ({self.operand[0].type}, {self.operand[1].type}) -> {self.result.type}")


@irdl_op_definition
class SelectOp(_HloOp):
    """``stablehlo.select %pred, %a, %b : tensor<..xi1>, tensor<..>``."""

    name = "stablehlo.select"
    operand = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        if len(self.operand) != 3:
            raise VerifyException("stablehlo.select takes three operands")
        pred = shape_of(self.operand[0])
        if pred and pred != shape_of(self.result):
            raise VerifyException("stablehlo.select: pred must be a scalar or of the result's shape")
        if shape_of(self.operand[1]) != shape_of(self.result) or shape_of(self.operand[2]) != shape_of(self.result):
            raise VerifyException("stablehlo.select: on_true and on_false must have the result's shape")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        ops = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pred_t = parser.parse_type()
        parser.parse_punctuation(",")
        t = parser.parse_type()
        values = parser.resolve_operands(ops, [pred_t, t, t], parser.pos)
        return cls.create(operands=values, result_types=[t], attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operand, printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(f" : {self.operand[0].type}, {self.result.type}")


@irdl_op_definition
class DotGeneralOp(_HloOp):
    """``stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (T, T) -> U``."""

    name = "stablehlo.dot_general"
    dot_dimension_numbers = prop_def(DotAttr)
    precision_config = opt_prop_def(ArrayAttr)
    algorithm = opt_prop_def(Attribute)
    lhs = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        if len(self.lhs) != 2:
            raise VerifyException("stablehlo.dot_general takes two operands")
        dn = self.dot_dimension_numbers
        a, b = shape_of(self.lhs[0]), shape_of(self.lhs[1])
        lb, rb = dn.dims("lhs_batching_dimensions"), dn.dims("rhs_batching_dimensions")
        lc, rc = dn.dims("lhs_contracting_dimensions"), dn.dims("rhs_contracting_dimensions")
        if len(lb) != len(rb) or len(lc) != len(rc):
            raise VerifyException("stablehlo.dot_general: lhs and rhs need as many batching/contracting dims")
        if any(a[i] != b[j] for i, j in [*zip(lb, rb), *zip(lc, rc)]):
            raise VerifyException("stablehlo.dot_general: batching and contracting dimension sizes must agree")
        free_a = [a[i] for i in range(len(a)) if i not in (*lb, *lc)]
        free_b = [b[i] for i in range(len(b)) if i not in (*rb, *rc)]
        if (*[a[i] for i in lb], *free_a, *free_b) != shape_of(self.result):
            raise VerifyException("stablehlo.dot_general: result shape must be batch x lhs free x rhs free")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        a = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        b = parser.parse_unresolved_operand()
        dims: dict[str, list[int]] = {"batching_dims": [[], []], "contracting_dims": [[], []]}  # type: ignore[dict-item]
        props: dict[str, Attribute] = {}

        def int_list_() -> list[int]:
            return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)

        while parser.parse_optional_punctuation(",") is not None:
            key = parser.parse_identifier()
            parser.parse_punctuation("=")
            if key in dims:
                left = int_list_()
                parser.parse_keyword("x")
                dims[key] = [left, int_list_()]  # type: ignore[list-item]
            elif key == "precision":
                words = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_identifier)
                props["precision_config"] = ArrayAttr([PrecisionAttr(w) for w in words])
            elif key == "algorithm":
                props["algorithm"] = DotAlgorithmAttr(*DotAlgorithmAttr.parse_parameters(parser))
            else:
                parser.raise_error(f"unknown dot_general field '{key}'")
        (lb, rb), (lc, rc) = dims["batching_dims"], dims["contracting_dims"]  # type: ignore[misc]
        props["dot_dimension_numbers"] = DotAttr(lb, rb, lc, rc)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ftype = parser.parse_function_type()
        values = parser.resolve_operands([a, b], list(ftype.inputs.data), parser.pos)
        return cls.create(operands=values, result_types=list(ftype.outputs.data), properties=props, attributes=attrs)

    def print(self, printer: Printer) -> None:
        dn = self.dot_dimension_numbers
        printer.print_string(" ")
        printer.print_list(self.lhs, printer.print_operand)

        def pair(a: str, b: str) -> str:
            return f"[{', '.join(map(str, dn.dims(a)))}] x [{', '.join(map(str, dn.dims(b)))}]"

        if dn.dims("lhs_batching_dimensions"):
            printer.print_string(", batching_dims = " + pair("lhs_batching_dimensions", "rhs_batching_dimensions"))
        printer.print_string(", contracting_dims = " + pair("lhs_contracting_dimensions", "rhs_contracting_dimensions"))
        if self.precision_config is not None:
            words = [p.data for p in self.precision_config.data if isinstance(p, PrecisionAttr)]
            printer.print_string(f", precision = [{', '.join(words)}]")
        if isinstance(self.algorithm, DotAlgorithmAttr):
            printer.print_string(", algorithm = ")
            self.algorithm.print_parameters(printer)
        printer.print_op_attributes(self.attributes)
        printer.print_string(f" : ({self.lhs[0].type}, {self.lhs[1].type}) -> {self.result.type}")


@irdl_op_definition
class ReturnOp(_HloOp):
    name = "stablehlo.return"
    results_ = var_operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(),))

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        """``stablehlo.return %a, %b : T, U``."""
        values, attrs = _parse_typed_values(parser)
        op = cls(values)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        _print_typed_values(printer, self.results_, self.attributes)


def _parse_typed_values(parser: Parser) -> tuple[list[SSAValue], dict[str, Attribute]]:
    """``%a, %b {attrs} : T, U`` (values optional, and then no types): the values and the attribute dict."""
    operands = []
    if parser._current_token.kind == MLIRTokenKind.PERCENT_IDENT:
        operands = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_unresolved_operand)
    attrs = parser.parse_optional_attr_dict()
    types: list[Attribute] = []
    if operands:
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
    return parser.resolve_operands(operands, types, parser.pos), attrs


def _print_typed_values(printer: Printer, values: Sequence[SSAValue], attributes: dict[str, Attribute]) -> None:
    """The form ``_parse_typed_values`` reads."""
    if values:
        _print_operands(printer, values)
    printer.print_op_attributes(attributes)
    if values:
        printer.print_string(" : " + ", ".join(str(v.type) for v in values))


@irdl_op_definition
class ReduceOp(_HloOp):
    """``stablehlo.reduce`` with a body region; pretty form ``stablehlo.reduce(%x init: %c) applies stablehlo.add
    across dimensions = [1] : (T, tensor<f32>) -> U`` (one input) is read and printed."""

    name = "stablehlo.reduce"
    dimensions = prop_def(DenseArrayBase)
    inputs = var_operand_def()
    outs = var_result_def()
    body = region_def()

    def verify_(self) -> None:
        n = len(self.inputs) // 2
        if len(self.inputs) != 2 * n or len(self.outs) != n or n == 0:
            raise VerifyException("stablehlo.reduce takes N inputs, N init values and has N results")
        dims = int_list(self.dimensions)
        for x, out in zip(self.inputs[:n], self.outs):
            src = shape_of(x)
            if any(not 0 <= d < len(src) for d in dims):
                raise VerifyException("stablehlo.reduce: dimension out of range")
            if tuple(s for i, s in enumerate(src) if i not in dims) != shape_of(out):
                raise VerifyException("stablehlo.reduce: result shape must be the operand's without the dimensions")

    def combiner(self) -> str | None:
        """The element-wise op name of a one-op body (``add``, ``maximum``, ...), else None."""
        ops = list(self.body.block.ops)
        if len(ops) == 2 and isinstance(ops[0], _ElementwiseOp) and isinstance(ops[1], ReturnOp):
            args = list(self.body.block.args)
            if list(ops[0].operands) == args and list(ops[1].operands) == [ops[0].results[0]]:
                return ops[0].name.removeprefix("stablehlo.")
        return None

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        """``stablehlo.reduce(%x init: %c), (%y init: %d) across dimensions = [1] : (...) -> (...) reducer(%a: T,
        %c: T) (%b: U, %d: U) { body }``, or ``... applies stablehlo.add across ...`` for a one-op body."""

        def pair() -> tuple[Any, Any]:
            parser.parse_punctuation("(")
            x = parser.parse_unresolved_operand()
            parser.parse_keyword("init")
            parser.parse_punctuation(":")
            init = parser.parse_unresolved_operand()
            parser.parse_punctuation(")")
            return x, init

        pairs = [pair()]
        while parser.parse_optional_punctuation(",") is not None:
            pairs.append(pair())
        combiner = None
        if parser.parse_optional_keyword("applies") is not None:
            combiner = parser.parse_identifier()
        parser.parse_keyword("across")
        parser.parse_keyword("dimensions")
        parser.parse_punctuation("=")
        dims = _int_list_(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        ftype = parser.parse_function_type()
        operands = [p[0] for p in pairs] + [p[1] for p in pairs]
        values = parser.resolve_operands(operands, list(ftype.inputs.data), pos)
        scalars = list(ftype.inputs.data)[len(pairs) :]
        region = _reduce_body(parser, combiner, scalars) if combiner is not None else _reducer_region(parser, len(pairs))
        return cls.create(operands=values, result_types=list(ftype.outputs.data), attributes=attrs,
                          properties={"dimensions": i64_array(dims)}, regions=[region])  # fmt: skip

    def print(self, printer: Printer) -> None:
        n = len(self.inputs) // 2
        printer.print_string("(")
        for i in range(n):
            if i:
                printer.print_string(", (")
            printer.print_operand(self.inputs[i])
            printer.print_string(" init: ")
            printer.print_operand(self.inputs[n + i])
            printer.print_string(")")
        combiner = self.combiner() if n == 1 else None
        if combiner is not None:
            printer.print_string(f" applies stablehlo.{combiner}")
        printer.print_string(f" across dimensions = {_bracketed(int_list(self.dimensions))}")
        _print_fn_type(printer, self)
        if combiner is not None:
            return
        args = self.body.block.args
        printer.print_string(" reducer")
        for i in range(n):
            printer.print_string("(" if i == 0 else " (")
            printer.print_block_argument(args[i])
            printer.print_string(", ")
            printer.print_block_argument(args[n + i])
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)


def _reduce_body(parser: Parser, combiner: str, scalars: Sequence[Attribute]) -> Region:
    """The one-op body ``applies stablehlo.<combiner>`` names."""
    name = combiner.removeprefix("stablehlo.")
    if name not in ELEMENTWISE or ELEMENTWISE[name].ARITY != 2 or len(scalars) != 1:
        parser.raise_error(f"stablehlo.reduce cannot apply '{combiner}'")
    block = Block(arg_types=[scalars[0], scalars[0]])
    inner = ELEMENTWISE[name].create(operands=list(block.args), result_types=[scalars[0]])
    block.add_ops([inner, ReturnOp([inner.results[0]])])
    return Region(block)


def _reducer_region(parser: Parser, n: int) -> Region:
    """``reducer(%a0: T, %b0: T) (%a1: U, %b1: U) { body }``: the block takes the accumulators, then the
    elements (a0, a1, ..., b0, b1, ...)."""
    parser.parse_keyword("reducer")

    def argument() -> Parser.Argument:  # ``%a: T`` with its optional ``loc(...)``, as MLIR prints with debug info
        arg = parser.parse_argument()
        arg.location = parser.parse_optional_location()
        return arg

    lhs, rhs = [], []
    for _ in range(n):
        parser.parse_punctuation("(")
        lhs.append(argument())
        parser.parse_punctuation(",")
        rhs.append(argument())
        parser.parse_punctuation(")")
    return parser.parse_region([*lhs, *rhs])


@irdl_op_definition
class CustomCallOp(_HloOp):
    """``stablehlo.custom_call @target(%a, ...) {backend_config = "..."}`` (read in either form, printed
    generically). nkic reads
    ``call_target_name`` and ``backend_config`` (a JSON string, or a dictionary); the rest is carried."""

    name = "stablehlo.custom_call"
    call_target_name = prop_def(StringAttr)
    backend_config = opt_prop_def(Attribute)
    api_version = opt_prop_def(IntegerAttr)
    has_side_effect = opt_prop_def(Attribute)
    called_computations = opt_prop_def(ArrayAttr)
    operand_layouts = opt_prop_def(Attribute)
    result_layouts = opt_prop_def(Attribute)
    output_operand_aliases = opt_prop_def(Attribute)
    inputs = var_operand_def()
    outs = var_result_def()

    # No print: printed in the generic form, which names call_target_name (the routers' output is read so).
    _PROPS: ClassVar[tuple[str, ...]] = ("backend_config", "api_version", "has_side_effect", "called_computations",
                                         "operand_layouts", "result_layouts", "output_operand_aliases")  # fmt: skip

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        """``stablehlo.custom_call @target(%a, %b) {backend_config = "...", ...} : (T, U) -> V``."""
        target = parser.parse_symbol_name()
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        props: dict[str, Attribute] = {"call_target_name": target}
        props.update({k: attrs.pop(k) for k in cls._PROPS if k in attrs})
        parser.parse_punctuation(":")
        pos = parser.pos
        ftype = parser.parse_function_type()
        values = parser.resolve_operands(operands, list(ftype.inputs.data), pos)
        return cls.create(operands=values, result_types=list(ftype.outputs.data), properties=props, attributes=attrs)

    def config(self) -> dict[str, object]:
        """``backend_config`` as a dictionary (a JSON string or a DictionaryAttr of strings/numbers/bools)."""
        import json

        from xdsl.dialects.builtin import DictionaryAttr, FloatAttr

        cfg = self.backend_config
        if cfg is None:
            return {}
        if isinstance(cfg, StringAttr):
            return json.loads(cfg.data) if cfg.data.strip() else {}
        if isinstance(cfg, DictionaryAttr):
            out: dict[str, object] = {}
            for k, v in cfg.data.items():
                if isinstance(v, StringAttr):
                    out[k] = v.data
                elif isinstance(v, IntegerAttr) and v.type == IntegerType(1):
                    out[k] = bool(v.value.data)
                elif isinstance(v, (IntegerAttr, FloatAttr)):
                    out[k] = v.value.data
                elif isinstance(v, ArrayAttr):
                    out[k] = [int(e.value.data) if isinstance(e, IntegerAttr) else str(e) for e in v.data]
            return out
        raise VerifyException(f"unsupported backend_config {cfg}")


@irdl_op_definition
class CompositeOp(_HloOp):
    """``stablehlo.composite "name" %a, ... {composite_attributes = {...}, decomposition = @f}``: a named group
    of ops whose meaning is ``decomposition``; routers match on ``name``."""

    name = "stablehlo.composite"
    composite_name = prop_def(StringAttr, prop_name="name")
    composite_attributes = opt_prop_def(Attribute)
    decomposition = prop_def(Attribute)
    version = opt_prop_def(IntegerAttr)
    inputs = var_operand_def()
    outs = var_result_def()

    _PROPS: ClassVar[tuple[str, ...]] = ("composite_attributes", "decomposition", "version")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        """``stablehlo.composite "name" %a, %b {composite_attributes = {...}, decomposition = @f} : (T) -> U``."""
        name = parser.parse_str_literal()
        operands = []
        if parser._current_token.kind == MLIRTokenKind.PERCENT_IDENT:
            operands = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        props: dict[str, Attribute] = {"name": StringAttr(name)}
        props.update({k: attrs.pop(k) for k in cls._PROPS if k in attrs})
        if "decomposition" not in props:
            parser.raise_error("stablehlo.composite needs a decomposition")
        parser.parse_punctuation(":")
        pos = parser.pos
        ftype = parser.parse_function_type()
        values = parser.resolve_operands(operands, list(ftype.inputs.data), pos)
        return cls.create(operands=values, result_types=list(ftype.outputs.data), properties=props, attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.composite_name.data)
        if self.inputs:
            _print_operands(printer, self.inputs)
        extra = {k: self.properties[k] for k in self._PROPS if k in self.properties}
        _print_fn_type(printer, self, {**extra, **self.attributes})


@irdl_op_definition
class WhileOp(_HloOp):
    """``stablehlo.while(%init...) ({cond}, {body})``: runs ``body`` on the loop values while ``cond`` (returning
    an i1 scalar) holds; the results are the final values (generic form)."""

    name = "stablehlo.while"
    operand = var_operand_def()
    result = var_result_def()
    cond = region_def()
    body = region_def()

    def verify_(self) -> None:
        types = [v.type for v in self.operand]
        if [r.type for r in self.result] != types:
            raise VerifyException("stablehlo.while: results must have the loop values' types")
        for region in (self.cond, self.body):
            if [a.type for a in region.block.args] != types:
                raise VerifyException("stablehlo.while: each region takes the loop values")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        """``stablehlo.while(%iterArg = %c, %iterArg_0 = %x) : T, U cond { ... } do { ... }``: the region
        arguments are the names before ``=``."""
        pairs: list[tuple[Any, Any]] = []

        def pair() -> None:
            name = parser.parse_argument(expect_type=False)
            parser.parse_punctuation("=")
            pairs.append((name, parser.parse_unresolved_operand()))

        parser.parse_comma_separated_list(parser.Delimiter.PAREN, pair)
        attrs = parser.parse_optional_attr_dict()
        types: list[Attribute] = []
        if pairs:
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        values = parser.resolve_operands([p[1] for p in pairs], types, parser.pos)
        args = [name.resolve(t) for (name, _), t in zip(pairs, types)]
        parser.parse_keyword("cond")
        cond = parser.parse_region(args)
        parser.parse_keyword("do")
        body = parser.parse_region(args)
        return cls.create(operands=values, result_types=types, attributes=attrs, regions=[cond, body])

    def print(self, printer: Printer) -> None:
        args = self.cond.block.args
        printer.print_string("(")
        for i, (arg, value) in enumerate(zip(args, self.operand)):
            if i:
                printer.print_string(", ")
            printer.print_operand(arg)
            printer.print_string(" = ")
            printer.print_operand(value)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        if self.operand:
            printer.print_string(" : " + ", ".join(str(v.type) for v in self.operand))
        printer.print_string(" cond ")
        printer.print_region(self.cond, print_entry_block_args=False)
        for a, b in zip(self.body.block.args, args):  # the body's arguments go by the cond's names
            printer._ssa_values[a] = printer._ssa_values[b]  # pyright: ignore[reportPrivateUsage]
        printer.print_string(" do ")
        printer.print_region(self.body, print_entry_block_args=False)


@irdl_op_definition
class OptimizationBarrierOp(_HloOp):
    name = "stablehlo.optimization_barrier"
    operand = var_operand_def()
    result = var_result_def()

    def verify_(self) -> None:
        if [v.type for v in self.operand] != [v.type for v in self.result]:
            raise VerifyException("stablehlo.optimization_barrier: results must have the operands' types")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        """``stablehlo.optimization_barrier %a, %b : T, U``."""
        values, attrs = _parse_typed_values(parser)
        return cls.create(operands=values, result_types=[v.type for v in values], attributes=attrs)

    def print(self, printer: Printer) -> None:
        _print_typed_values(printer, self.operand, self.attributes)


# ------------------------------------------------------------------------------------------------------------------
# Ops JAX emits beyond the dense MLP/attention subset (issue 27)
# ------------------------------------------------------------------------------------------------------------------


@irdl_op_definition
class IsFiniteOp(_UnaryShapeOp):
    """``stablehlo.is_finite %x : (tensor<8xf32>) -> tensor<8xi1>``: true where ``x`` is neither ±inf nor NaN."""

    name = "stablehlo.is_finite"

    def verify_(self) -> None:
        super().verify_()
        _same_shapes(self)
        if ttype(self.result).element_type != IntegerType(1):
            raise VerifyException("stablehlo.is_finite: the result is i1")


@irdl_op_definition
class ReverseOp(_UnaryShapeOp):
    """``stablehlo.reverse %x, dims = [1] : tensor<8x16xf32>``: the operand with ``dimensions`` reversed."""

    name = "stablehlo.reverse"
    DIMS: ClassVar[str | None] = "dimensions"
    dimensions = prop_def(DenseArrayBase)

    def verify_(self) -> None:
        super().verify_()
        if ttype(self.operand[0]) != ttype(self.result):
            raise VerifyException("stablehlo.reverse: the result has the operand's type")
        if any(not 0 <= d < len(shape_of(self.result)) for d in int_list(self.dimensions)):
            raise VerifyException("stablehlo.reverse: dimension out of range")


@irdl_op_definition
class DynamicUpdateSliceOp(_HloOp):
    """``stablehlo.dynamic_update_slice %x, %update, %i0, %i1 : (T, U, tensor<i32>, tensor<i32>) -> T``: ``x`` with
    ``update`` written at the run-time start indices, each clamped into ``[0, size - update size]``."""

    name = "stablehlo.dynamic_update_slice"
    operand = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        if len(self.operand) < 2:
            raise VerifyException("stablehlo.dynamic_update_slice takes an operand, an update and start indices")
        src, upd = shape_of(self.operand[0]), shape_of(self.operand[1])
        if len(self.operand) != 2 + len(src) or any(shape_of(v) for v in self.operand[2:]):
            raise VerifyException("stablehlo.dynamic_update_slice: one scalar start index per operand dimension")
        if len(upd) != len(src) or any(u > n for u, n in zip(upd, src)):
            raise VerifyException("stablehlo.dynamic_update_slice: the update fits in the operand, rank for rank")
        if ttype(self.result) != ttype(self.operand[0]):
            raise VerifyException("stablehlo.dynamic_update_slice: the result has the operand's type")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        operands, _ = _parse_operands_and_fields(parser, {})
        return _finish_fn_typed(parser, cls, operands, {})

    def print(self, printer: Printer) -> None:
        _print_operands(printer, self.operand)
        _print_fn_type(printer, self)


def _comparator_ok(region: Region, n: int, what: str) -> None:
    block = region.block
    if [shape_of(a) for a in block.args] != [()] * len(block.args) or len(block.args) != n:
        raise VerifyException(f"{what}: the body takes {n} scalars")


@irdl_op_definition
class SortOp(_HloOp):
    """``"stablehlo.sort"(%x, %i) <{dimension = 1 : i64, is_stable = true}> ({comparator})``: the operands sorted
    together along ``dimension`` by the comparator on the (lhs, rhs) element pairs of every operand (generic form,
    which is what JAX prints)."""

    name = "stablehlo.sort"
    dimension = prop_def(IntegerAttr)
    is_stable = opt_prop_def(Attribute)
    inputs = var_operand_def()
    outs = var_result_def()
    comparator = region_def()

    def verify_(self) -> None:
        shapes = {shape_of(v) for v in [*self.inputs, *self.outs]}
        if not self.inputs or len(shapes) != 1 or len(self.inputs) != len(self.outs):
            raise VerifyException("stablehlo.sort: operands and results of one shape, as many results as operands")
        if not 0 <= self.dimension.value.data < len(next(iter(shapes))):
            raise VerifyException("stablehlo.sort: dimension out of range")
        _comparator_ok(self.comparator, 2 * len(self.inputs), "stablehlo.sort")


def _pairs_attr(attr: Attribute | None, rank: int) -> list[tuple[int, int]]:
    """``dense<[[lo, hi], ...]> : tensor<Nx2xi64>`` (or a splat) as N pairs; absent is all zero."""
    if attr is None:
        return [(0, 0)] * rank
    flat = int_list(attr)
    if len(flat) == 1:
        flat = flat * (2 * rank)
    if len(flat) != 2 * rank:
        raise VerifyException(f"expected {rank} (low, high) pairs, got {len(flat)} values")
    return [(flat[2 * i], flat[2 * i + 1]) for i in range(rank)]


@irdl_op_definition
class ReduceWindowOp(_HloOp):
    """``"stablehlo.reduce_window"(%x, %init) <{window_dimensions = ..., window_strides = ..., padding = ...}>
    ({body})``: the body folded over each window (``jnp.cumsum`` is a window the length of the axis, padded
    before; pooling a strided window). Generic form, as JAX prints it."""

    name = "stablehlo.reduce_window"
    window_dimensions = prop_def(DenseArrayBase)
    window_strides = opt_prop_def(DenseArrayBase)
    base_dilations = opt_prop_def(DenseArrayBase)
    window_dilations = opt_prop_def(DenseArrayBase)
    padding = opt_prop_def(DenseIntOrFPElementsAttr)
    inputs = var_operand_def()
    outs = var_result_def()
    body = region_def()

    def geometry(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...],
                                list[tuple[int, int]]]:  # fmt: skip
        """(window, strides, base dilations, window dilations, padding), the defaults filled in."""
        rank = len(shape_of(self.inputs[0]))
        ones = (1,) * rank
        get = lambda a: int_list(a) if a is not None else ones  # noqa: E731
        return (int_list(self.window_dimensions), get(self.window_strides), get(self.base_dilations),
                get(self.window_dilations), _pairs_attr(self.padding, rank))  # fmt: skip

    def verify_(self) -> None:
        n = len(self.inputs) // 2
        if n == 0 or len(self.inputs) != 2 * n or len(self.outs) != n:
            raise VerifyException("stablehlo.reduce_window takes N inputs, N init values and has N results")
        src = shape_of(self.inputs[0])
        window, strides, base, wdil, pad = self.geometry()
        if not len(window) == len(strides) == len(base) == len(wdil) == len(src):
            raise VerifyException("stablehlo.reduce_window: one window size, stride and dilation per dimension")
        want = tuple(
            0 if (span := (s - 1) * b + 1 + lo + hi) < (w - 1) * d + 1 else (span - (w - 1) * d - 1) // st + 1
            for s, b, (lo, hi), w, d, st in zip(src, base, pad, window, wdil, strides)
        )
        if any(shape_of(r) != want for r in self.outs):
            raise VerifyException(f"stablehlo.reduce_window: result shape must be {want}")
        _comparator_ok(self.body, 2 * n, "stablehlo.reduce_window")


@irdl_op_definition
class ScatterOp(_HloOp):
    """``"stablehlo.scatter"(%x, %indices, %updates) <{scatter_dimension_numbers = #stablehlo.scatter<...>}>
    ({update})``: ``x`` with each update combined (by the body: add for ``.at[].add``/``segment_sum``, the
    update itself for ``.at[].set``) into the window its index selects. Generic form, as JAX prints it."""

    name = "stablehlo.scatter"
    scatter_dimension_numbers = prop_def(ScatterAttr)
    indices_are_sorted = opt_prop_def(Attribute)
    unique_indices = opt_prop_def(Attribute)
    inputs = var_operand_def()
    outs = var_result_def()
    update_computation = region_def()

    def verify_(self) -> None:
        n = (len(self.inputs) - 1) // 2
        if n == 0 or len(self.inputs) != 2 * n + 1 or len(self.outs) != n:
            raise VerifyException("stablehlo.scatter takes N inputs, the indices and N updates, and has N results")
        if any(ttype(r) != ttype(x) for r, x in zip(self.outs, self.inputs[:n])):
            raise VerifyException("stablehlo.scatter: each result has its input's type")
        dn, rank = self.scatter_dimension_numbers, len(shape_of(self.inputs[0]))
        if len(dn.dims("update_window_dims")) + len(dn.dims("inserted_window_dims")) + len(
            dn.dims("input_batching_dims")
        ) != rank:
            raise VerifyException("stablehlo.scatter: window, inserted and batching dims must cover the operand")
        _comparator_ok(self.update_computation, 2 * n, "stablehlo.scatter")


_WINDOW_KEYS = {"stride": "window_strides", "lhs_dilate": "lhs_dilation", "rhs_dilate": "rhs_dilation"}


@irdl_op_definition
class ConvolutionOp(_HloOp):
    """``stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {stride = [1],
    pad = [[1, 1]], lhs_dilate = [1], rhs_dilate = [1], reverse = [false]} {feature_group_count = 1 : i64, ...}``."""

    name = "stablehlo.convolution"
    dimension_numbers = prop_def(ConvAttr)
    window_strides = opt_prop_def(DenseArrayBase)
    padding = opt_prop_def(DenseIntOrFPElementsAttr)
    lhs_dilation = opt_prop_def(DenseArrayBase)
    rhs_dilation = opt_prop_def(DenseArrayBase)
    window_reversal = opt_prop_def(DenseArrayBase)
    feature_group_count = prop_def(IntegerAttr)
    batch_group_count = prop_def(IntegerAttr)
    precision_config = opt_prop_def(ArrayAttr)
    lhs = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def spatial_rank(self) -> int:
        return sum(s.isdigit() for s in self.dimension_numbers.layout(0))

    def verify_(self) -> None:
        if len(self.lhs) != 2:
            raise VerifyException("stablehlo.convolution takes an input and a kernel")
        dn = self.dimension_numbers
        ranks = (len(shape_of(self.lhs[0])), len(shape_of(self.lhs[1])), len(shape_of(self.result)))
        if ranks != tuple(len(dn.layout(i)) for i in range(3)):
            raise VerifyException("stablehlo.convolution: dim_numbers must name every dimension of each operand")
        x, w = dict(zip(dn.layout(0), shape_of(self.lhs[0]))), dict(zip(dn.layout(1), shape_of(self.lhs[1])))
        groups = self.feature_group_count.value.data
        if x["f"] != w["i"] * groups:
            raise VerifyException("stablehlo.convolution: input features must be kernel input features x groups")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_unresolved_operand)
        props: dict[str, Attribute] = {}
        parser.parse_keyword("dim_numbers")
        parser.parse_punctuation("=")
        layouts = parse_conv_layouts(parser)
        props["dimension_numbers"] = ConvAttr(*(ArrayAttr([StringAttr(s) for s in lay]) for lay in layouts))
        if parser.parse_optional_punctuation(",") is not None:
            parser.parse_keyword("window")
            parser.parse_punctuation("=")
            parser.parse_comma_separated_list(parser.Delimiter.BRACES, lambda: _parse_window_entry(parser, props))
        attrs = parser.parse_optional_attr_dict()
        for key in ("feature_group_count", "batch_group_count", "precision_config"):
            if key in attrs:
                props[key] = attrs.pop(key)
        parser.parse_punctuation(":")
        pos = parser.pos
        ftype = parser.parse_function_type()
        values = parser.resolve_operands(operands, list(ftype.inputs.data), pos)
        return cls.create(operands=values, result_types=list(ftype.outputs.data), properties=props, attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string("(")
        printer.print_list(self.lhs, printer.print_operand)
        printer.print_string(f") dim_numbers = {self.dimension_numbers.text()}")
        window = []
        for word, prop in (("stride", "window_strides"), ("pad", "padding"), ("lhs_dilate", "lhs_dilation"),
                           ("rhs_dilate", "rhs_dilation"), ("reverse", "window_reversal")):  # fmt: skip
            value = self.properties.get(prop)
            if value is None:
                continue
            if prop == "padding":
                pairs = _pairs_attr(value, self.spatial_rank())
                window.append(f"pad = [{', '.join(f'[{lo}, {hi}]' for lo, hi in pairs)}]")
            elif prop == "window_reversal":
                window.append(f"reverse = [{', '.join('true' if v else 'false' for v in int_list(value))}]")
            else:
                window.append(f"{word} = {_bracketed(int_list(value))}")
        if window:
            printer.print_string(f", window = {{{', '.join(window)}}}")
        extra = {k: self.properties[k] for k in ("feature_group_count", "batch_group_count", "precision_config")
                 if k in self.properties}  # fmt: skip
        printer.print_op_attributes({**extra, **self.attributes})
        printer.print_string(f" : ({self.lhs[0].type}, {self.lhs[1].type}) -> {self.result.type}")


def _parse_window_entry(parser: Parser, props: dict[str, Attribute]) -> None:
    key = parser.parse_identifier()
    parser.parse_punctuation("=")
    if key in _WINDOW_KEYS:
        props[_WINDOW_KEYS[key]] = i64_array(_int_list_(parser))
    elif key == "pad":
        pairs = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: _int_list_(parser))
        flat = [v for p in pairs for v in p]
        props["padding"] = DenseIntOrFPElementsAttr.from_list(TensorType(i64, [len(pairs), 2]), flat)
    elif key == "reverse":
        flags = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: parser.parse_boolean())
        props["window_reversal"] = DenseArrayBase.from_list(IntegerType(1), [int(f) for f in flags])
    else:
        parser.raise_error(f"unknown convolution window field '{key}'")



@irdl_op_definition
class ClampOp(_HloOp):
    """``stablehlo.clamp %min, %x, %max : T`` (or ``: (Tmin, T, Tmax) -> T``): ``min(max(x, min), max)``, ``min`` and
    ``max`` of x's shape or scalars."""

    name = "stablehlo.clamp"
    operand = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        if len(self.operand) != 3:
            raise VerifyException("stablehlo.clamp takes min, operand and max")
        shape = shape_of(self.operand[1])
        if any(shape_of(v) not in ((), shape) for v in (self.operand[0], self.operand[2])):
            raise VerifyException("stablehlo.clamp: min and max are scalars or of the operand's shape")
        if ttype(self.result) != ttype(self.operand[1]):
            raise VerifyException("stablehlo.clamp: the result has the operand's type")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        operands, _ = _parse_operands_and_fields(parser, {})
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        if parser._current_token.kind == MLIRTokenKind.L_PAREN:
            ftype = parser.parse_function_type()
            ins, outs = list(ftype.inputs.data), list(ftype.outputs.data)
        else:
            t = parser.parse_type()
            ins, outs = [t] * len(operands), [t]
        values = parser.resolve_operands(operands, ins, pos)
        return cls.create(operands=values, result_types=outs, attributes=attrs)

    def print(self, printer: Printer) -> None:
        _print_operands(printer, self.operand)
        if {v.type for v in self.operand} == {self.result.type}:
            printer.print_op_attributes(self.attributes)
            printer.print_string(f" : {self.result.type}")
        else:
            _print_fn_type(printer, self)


@irdl_op_definition
class CaseOp(_HloOp):
    """``"stablehlo.case"(%index) ({branch 0}, {branch 1}, ...)``: the results of branch ``index`` (the last branch
    when ``index`` is out of range); each branch takes no arguments and returns the results (generic form, as JAX
    prints it for ``lax.cond`` / ``lax.switch``)."""

    name = "stablehlo.case"
    index = var_operand_def()
    outs = var_result_def()
    branches = var_region_def()

    def verify_(self) -> None:
        if len(self.index) != 1 or shape_of(self.index[0]) or ttype(self.index[0]).element_type != IntegerType(32):
            raise VerifyException("stablehlo.case takes one tensor<i32> index")
        if not self.branches:
            raise VerifyException("stablehlo.case has at least one branch")
        for region in self.branches:
            ret = region.block.last_op
            if region.block.args or not isinstance(ret, ReturnOp):
                raise VerifyException("stablehlo.case: each branch takes no arguments and ends in stablehlo.return")
            if [v.type for v in ret.operands] != [r.type for r in self.outs]:
                raise VerifyException("stablehlo.case: each branch returns the results' types")


# ------------------------------------------------------------------------------------------------------------------
# chlo: the client ops JAX emits by default (decomposed into StableHLO by ``chlo-legalize``)
# ------------------------------------------------------------------------------------------------------------------


class _ChloUnaryOp(_HloOp):
    """``chlo.erf %x : tensor<8xf32> -> tensor<8xf32>``: an element-wise op on a float tensor."""

    operand = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        if len(self.operand) != 1:
            raise VerifyException(f"{self.name} takes one operand")
        if ttype(self.operand[0]) != ttype(self.result):
            raise VerifyException(f"{self.name}: the result has the operand's type")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        x = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        src = parser.parse_type()
        dst = src
        if parser.parse_optional_punctuation("->") is not None:
            dst = parser.parse_type()
        (value,) = parser.resolve_operands([x], [src], parser.pos)
        return cls.create(operands=[value], result_types=[dst], attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.operand[0])
        printer.print_op_attributes(self.attributes)
        printer.print_string(f" : {self.operand[0].type} -> {self.result.type}")


@irdl_op_definition
class ChloSquareOp(_ChloUnaryOp):
    name = "chlo.square"


@irdl_op_definition
class ChloErfOp(_ChloUnaryOp):
    name = "chlo.erf"


@irdl_op_definition
class ChloErfcOp(_ChloUnaryOp):
    name = "chlo.erfc"


@irdl_op_definition
class ChloErfInvOp(_ChloUnaryOp):
    name = "chlo.erf_inv"


@irdl_op_definition
class ChloTopKOp(_HloOp):
    """``%v, %i = chlo.top_k(%x, k = 4) : tensor<8x16xf32> -> (tensor<8x4xf32>, tensor<8x4xi32>)``: the ``k``
    largest elements of the last dimension, in descending order, and their indices."""

    name = "chlo.top_k"
    k = prop_def(IntegerAttr)
    operand = var_operand_def()
    outs = var_result_def()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        if len(self.operand) != 1 or len(self.outs) != 2:
            raise VerifyException("chlo.top_k takes one operand and has two results")
        src, k = shape_of(self.operand[0]), self.k.value.data
        if not src or not 0 <= k <= src[-1]:
            raise VerifyException("chlo.top_k: k must be at most the size of the last dimension")
        want = (*src[:-1], k)
        if shape_of(self.outs[0]) != want or shape_of(self.outs[1]) != want:
            raise VerifyException(f"chlo.top_k: the results have shape {want}")
        if ttype(self.outs[0]).element_type != ttype(self.operand[0]).element_type:
            raise VerifyException("chlo.top_k: the values have the operand's element type")

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        parser.parse_punctuation("(")
        x = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        parser.parse_keyword("k")
        parser.parse_punctuation("=")
        k = parser.parse_integer()
        parser.parse_punctuation(")")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        src = parser.parse_type()
        parser.parse_punctuation("->")
        outs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        (value,) = parser.resolve_operands([x], [src], parser.pos)
        return cls.create(operands=[value], result_types=outs, attributes=attrs,
                          properties={"k": IntegerAttr(k, i64)})  # fmt: skip

    def print(self, printer: Printer) -> None:
        printer.print_string("(")
        printer.print_operand(self.operand[0])
        printer.print_string(f", k = {self.k.value.data})")
        printer.print_op_attributes(self.attributes)
        printer.print_string(f" : {self.operand[0].type} -> ({self.outs[0].type}, {self.outs[1].type})")


Chlo = Dialect("chlo", [ChloSquareOp, ChloErfOp, ChloErfcOp, ChloErfInvOp, ChloTopKOp], [])


StableHLO = Dialect(
    "stablehlo",
    [
        *ELEMENTWISE.values(), ConstantOp, ConvertOp, SliceOp, ReshapeOp, BroadcastInDimOp, TransposeOp, IotaOp, CompareOp,
        SelectOp, DotGeneralOp, ReturnOp, ReduceOp, CustomCallOp, CompositeOp, OptimizationBarrierOp, ConcatenateOp,
        PadOp, GatherOp, DynamicSliceOp, WhileOp, IsFiniteOp, ReverseOp, DynamicUpdateSliceOp, SortOp, ReduceWindowOp,
        ScatterOp, ConvolutionOp, ClampOp, CaseOp,
    ],
    [PrecisionAttr, ComparisonDirectionAttr, ComparisonTypeAttr, DotAttr, GatherAttr, DotAlgorithmAttr, ScatterAttr,
     ConvAttr],
)  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# The parse boundary
# ------------------------------------------------------------------------------------------------------------------


class StableHloParser(Parser):
    """A parser that reads a hexadecimal literal in a float dense attribute as the element's bit pattern, and gives
    every op it reads its place in the text: the op's location becomes ``fused<"nkic.mlir">[file:line:col, the
    location the text gave it]`` (``mlir_location`` / ``source_location`` read it back)."""

    def __init__(self, ctx: Context, text: str, name: str = "<stablehlo>", first_line: int = 1):
        """``first_line``: the line of ``name`` that ``text`` starts at (a ``--split-input-file`` chunk's)."""
        body, aliases = _location_aliases(text)  # MLIR prints location aliases after their uses
        super().__init__(ctx, body, name)
        self._line_starts = [0, *(i + 1 for i, c in enumerate(body) if c == "\n")]
        self._file, self._first_line = name, first_line
        _define_aliases(self, aliases)

    def _parse_tensor_literal_element(self) -> Parser._TensorLiteralElement:
        tok = self._current_token
        if tok.kind == MLIRTokenKind.INTEGER_LIT and tok.text[:2].lower() == "0x":
            self._consume_token(MLIRTokenKind.INTEGER_LIT)
            return _HexElement(False, int(tok.text, 16), tok.span)
        return super()._parse_tensor_literal_element()

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        line = bisect.bisect_right(self._line_starts, offset)
        return line + self._first_line - 1, offset - self._line_starts[line - 1] + 1

    def parse_operation(self) -> Operation:
        line, col = self.line_col(self._current_token.span.start)
        op = super().parse_operation()
        here = FileLineColLoc(StringAttr(self._file), IntAttr(line), IntAttr(col))
        op.location = FusedLoc([here, op.location], StringAttr(MLIR_LOC))
        return op


MLIR_LOC = "nkic.mlir"
# ``#loc3 = loc(...)`` on a line of its own: MLIR prints location aliases after the module that uses them.
_LOC_ALIAS = re.compile(r"^(#loc[\w.$-]*)\s*=\s*(loc\(.*\))\s*$", re.MULTILINE)
# MLIR's file:line:col ranges (``"f.py":8:19 to :43``, ``to 9:3``), which xDSL 0.74 does not read: the start is kept.
_LOC_RANGE = re.compile(r'("(?:[^"\\]|\\.)*":\d+:\d+) to (?:\d+)?:\d+')


def _location_aliases(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The text without its location alias definitions (blank lines in their place, so lines keep their numbers)
    and the definitions (name, ``loc(...)``), ranges cut to their start."""
    text = _LOC_RANGE.sub(r"\1", text)
    aliases = [(m.group(1), m.group(2)) for m in _LOC_ALIAS.finditer(text)]
    return _LOC_ALIAS.sub("", text), aliases


def _define_aliases(parser: StableHloParser, aliases: list[tuple[str, str]]) -> None:
    """Parse each alias in an order where the aliases it names come first (MLIR prints them in any order)."""
    pending = list(aliases)
    while pending:
        left = []
        for name, body in pending:
            sub = Parser(parser.ctx, body)
            sub.attribute_aliases = parser.attribute_aliases
            try:
                loc = sub.parse_optional_location()
            except ParseError:
                left.append((name, body))
                continue
            parser.attribute_aliases[name] = loc if loc is not None else UnknownLoc()
        if len(left) == len(pending):
            raise ParseError(parser._current_token.span, f"location alias {left[0][0]} cannot be read: {left[0][1]}")
        pending = left


def mlir_location(op: Operation) -> tuple[str, int, int] | None:
    """(file, line, column) of ``op`` in the StableHLO text it was parsed from, or None for an op nkic made."""
    loc = op.location
    if isinstance(loc, FusedLoc) and loc.metadata == StringAttr(MLIR_LOC):
        here = loc.locations.data[0]
        if isinstance(here, FileLineColLoc):
            return here.filename.data, here.line.data, here.column.data
    return None


def source_location(op: Operation) -> tuple[str, str, int, int] | None:
    """(name, file, line, column) of the source the text's own location gives ``op`` (JAX writes
    ``loc("jit(f)/dot_general"(callsite("f"("model.py":12:8) at ...)))``): the outermost name and the innermost
    file:line:col, the user's line; None when the text gives none."""
    loc = op.location
    if isinstance(loc, FusedLoc) and loc.metadata == StringAttr(MLIR_LOC):
        loc = loc.locations.data[1]
    names: list[str] = []
    found: list[tuple[str, int, int]] = []

    def visit(at: Attribute) -> None:
        if found:
            return
        if isinstance(at, NameLoc):
            names.append(at.desc.data)
            visit(at.location)
        elif isinstance(at, CallSiteLoc):
            visit(at.callee)
            visit(at.caller)
        elif isinstance(at, FusedLoc):
            for inner in at.locations.data:
                visit(inner)
        elif isinstance(at, FileLineColLoc):
            found.append((at.filename.data, at.line.data, at.column.data))

    visit(loc)
    if not found:
        return None
    return (names[0] if names else "", *found[0])


class _HexElement(Parser._TensorLiteralElement):
    def to_type(self, parser: AttrParser, type: Attribute):  # type: ignore[override]
        if isinstance(type, AnyFloat):
            dtype = numpy_dtype(type)
            bits = np.array([self.value], dtype=f"uint{dtype.itemsize * 8}")
            return float(bits.view(dtype)[0])
        return super().to_type(parser, type)  # type: ignore[arg-type]


def stablehlo_context() -> Context:
    """builtin + func + stablehlo (and nkic's dialects, lazily)."""
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from nkic.dialects import get_all_dialects

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Func)
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx


def parse_stablehlo(text: str, ctx: Context | None = None, filename: str = "<stablehlo>") -> ModuleOp:
    """A StableHLO module (generic or pretty form) with hex float literals read as bits, each op located at its
    line of ``text`` (named ``filename``) and at the source location the text gives it, ``#loc`` aliases included."""
    return StableHloParser(ctx or stablehlo_context(), text, filename).parse_module()
