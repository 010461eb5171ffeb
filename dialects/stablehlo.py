"""The subset of StableHLO that nkic's framework front door reads (``nkic.hlo``).

xDSL 0.74 has no StableHLO dialect (``xdsl-jax`` pins an older xDSL), so this is nkic's own: the ops that
``jax.jit(f).lower(*args).compiler_ir("stablehlo")`` emits for dense MLP/attention programs, in MLIR's generic form
(what ``get_asm(print_generic_op_form=True)`` prints) and, for the element-wise, shape and constant ops, the pretty
form. Every op keeps its operands, results and attributes exactly as StableHLO defines them; verification checks
the shape rules the lowering relies on (element-wise shapes, broadcast/transpose/reshape/dot dimensions).

``parse_stablehlo(text)`` is the parse boundary: it reads hex float literals as bit patterns. MLIR prints a
non-finite float splat as its bits (``dense<0xFF800000> : tensor<f32>`` is −inf, ``dense<0xFF80> : tensor<bf16>``
too); xDSL 0.74 reads the hex token as an integer and converts it to a float (4.28e9).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, Self

import ml_dtypes
import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IntAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Data, Dialect, ParametrizedAttribute, Region, SSAValue
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
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException
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


_GATHER_FIELDS = ("offset_dims", "collapsed_slice_dims", "operand_batching_dims", "start_indices_batching_dims",
                  "start_index_map")  # fmt: skip


@irdl_attr_definition
class GatherAttr(ParametrizedAttribute):
    """``#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0],
    index_vector_dim = 1>``: the gather's dimension numbers; absent lists are empty (and not printed)."""

    name = "stablehlo.gather"
    offset_dims: ArrayAttr[IntAttr]
    collapsed_slice_dims: ArrayAttr[IntAttr]
    operand_batching_dims: ArrayAttr[IntAttr]
    start_indices_batching_dims: ArrayAttr[IntAttr]
    start_index_map: ArrayAttr[IntAttr]
    index_vector_dim: IntAttr

    def dims(self, field: str) -> tuple[int, ...]:
        return tuple(d.data for d in getattr(self, field).data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        values: dict[str, list[int]] = {f: [] for f in _GATHER_FIELDS}
        vector_dim = [0]

        def entry() -> None:
            key = parser.parse_identifier()
            parser.parse_punctuation("=")
            if key == "index_vector_dim":
                vector_dim[0] = parser.parse_integer()
            elif key in values:
                values[key] = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
            else:
                parser.raise_error(f"unknown gather dimension field '{key}'")

        parser.parse_comma_separated_list(parser.Delimiter.ANGLE, entry)
        return (*(ArrayAttr([IntAttr(d) for d in values[f]]) for f in _GATHER_FIELDS), IntAttr(vector_dim[0]))

    def print_parameters(self, printer: Printer) -> None:
        parts = [f"{f} = [{', '.join(map(str, self.dims(f)))}]" for f in _GATHER_FIELDS if self.dims(f)]
        printer.print_string("<" + ", ".join([*parts, f"index_vector_dim = {self.index_vector_dim.data}"]) + ">")


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
        printer.print_op_attributes(self.attributes)
        printer.print_string(f" : ({self.lhs[0].type}, {self.lhs[1].type}) -> {self.result.type}")


@irdl_op_definition
class ReturnOp(_HloOp):
    name = "stablehlo.return"
    results_ = var_operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(),))

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])


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
        from xdsl.ir import Block

        parser.parse_punctuation("(")
        x = parser.parse_unresolved_operand()
        parser.parse_keyword("init")
        parser.parse_punctuation(":")
        init = parser.parse_unresolved_operand()
        parser.parse_punctuation(")")
        parser.parse_keyword("applies")
        combiner = parser.parse_identifier()
        parser.parse_keyword("across")
        parser.parse_keyword("dimensions")
        parser.parse_punctuation("=")
        dims = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ftype = parser.parse_function_type()
        values = parser.resolve_operands([x, init], list(ftype.inputs.data), parser.pos)
        scalar = ftype.inputs.data[1]
        name = combiner.removeprefix("stablehlo.")
        if name not in ELEMENTWISE or ELEMENTWISE[name].ARITY != 2:
            parser.raise_error(f"stablehlo.reduce cannot apply '{combiner}'")
        block = Block(arg_types=[scalar, scalar])
        inner = ELEMENTWISE[name].create(operands=list(block.args), result_types=[scalar])
        block.add_ops([inner, ReturnOp([inner.results[0]])])
        return cls.create(operands=values, result_types=list(ftype.outputs.data), attributes=attrs,
                          properties={"dimensions": i64_array(dims)}, regions=[Region(block)])  # fmt: skip

    def print(self, printer: Printer) -> None:
        combiner = self.combiner()
        if combiner is None or len(self.inputs) != 2:
            printer.print_op_with_default_format(self)
            return
        printer.print_string("(")
        printer.print_operand(self.inputs[0])
        printer.print_string(" init: ")
        printer.print_operand(self.inputs[1])
        dims = ", ".join(map(str, int_list(self.dimensions)))
        printer.print_string(f") applies stablehlo.{combiner} across dimensions = [{dims}]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(f" : ({self.inputs[0].type}, {self.inputs[1].type}) -> {self.outs[0].type}")


@irdl_op_definition
class CustomCallOp(_HloOp):
    """``stablehlo.custom_call @target(%a, ...) {backend_config = "..."}``: generic form only. nkic reads
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


@irdl_op_definition
class OptimizationBarrierOp(_HloOp):
    name = "stablehlo.optimization_barrier"
    operand = var_operand_def()
    result = var_result_def()

    def verify_(self) -> None:
        if [v.type for v in self.operand] != [v.type for v in self.result]:
            raise VerifyException("stablehlo.optimization_barrier: results must have the operands' types")


StableHLO = Dialect(
    "stablehlo",
    [
        *ELEMENTWISE.values(), ConstantOp, ConvertOp, SliceOp, ReshapeOp, BroadcastInDimOp, TransposeOp, IotaOp, CompareOp,
        SelectOp, DotGeneralOp, ReturnOp, ReduceOp, CustomCallOp, CompositeOp, OptimizationBarrierOp, ConcatenateOp,
        PadOp, GatherOp, DynamicSliceOp, WhileOp,
    ],
    [PrecisionAttr, ComparisonDirectionAttr, ComparisonTypeAttr, DotAttr, GatherAttr, DotAlgorithmAttr],
)  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# The parse boundary
# ------------------------------------------------------------------------------------------------------------------


class StableHloParser(Parser):
    """A parser that reads a hexadecimal literal in a float dense attribute as the element's bit pattern."""

    def _parse_tensor_literal_element(self) -> Parser._TensorLiteralElement:
        tok = self._current_token
        if tok.kind == MLIRTokenKind.INTEGER_LIT and tok.text[:2].lower() == "0x":
            self._consume_token(MLIRTokenKind.INTEGER_LIT)
            return _HexElement(False, int(tok.text, 16), tok.span)
        return super()._parse_tensor_literal_element()


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


def parse_stablehlo(text: str, ctx: Context | None = None) -> ModuleOp:
    """A StableHLO module (generic or pretty form) with hex float literals read as bits."""
    return StableHloParser(ctx or stablehlo_context(), text).parse_module()
