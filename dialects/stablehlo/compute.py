"""Ops with a computation of their own: ``dot_general``, ``reduce`` (and the reducer bodies other ops share),
``sort``, ``reduce_window`` and ``convolution``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Block, Region
from xdsl.irdl import (
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from nkic.dialects.stablehlo.attributes import (
    ConvAttr,
    DotAlgorithmAttr,
    DotAttr,
    PrecisionAttr,
    i64_array,
    int_list,
    parse_conv_layouts,
    shape_of,
)
from nkic.dialects.stablehlo.control import ReturnOp
from nkic.dialects.stablehlo.elementwise import ELEMENTWISE, _ElementwiseOp
from nkic.dialects.stablehlo.syntax import _HloOp, _bracketed, _int_list_, _print_fn_type

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


def pairs_attr(attr: Attribute | None, rank: int) -> list[tuple[int, int]]:
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
                get(self.window_dilations), pairs_attr(self.padding, rank))  # fmt: skip

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
                pairs = pairs_attr(value, self.spatial_rank())
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
