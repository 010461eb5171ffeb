"""StableHLO's attributes (precision and comparison keywords, dot/gather/scatter/convolution dimension numbers)
and the helpers that read types and values: ``ttype``, ``shape_of``, ``int_list``, ``numpy_dtype``, ``dense_to_numpy``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
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
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Data, ParametrizedAttribute, SSAValue
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

# Attributes
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
