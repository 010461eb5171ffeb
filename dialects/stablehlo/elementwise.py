"""Element-wise ops: the unary and binary arithmetic/logical ops, ``constant``, ``compare``, ``select``, ``is_finite``
and ``clamp``."""

from __future__ import annotations

from typing import ClassVar, Self

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerType
from xdsl.ir import Attribute
from xdsl.irdl import irdl_op_definition, opt_prop_def, prop_def, result_def, traits_def, var_operand_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind

from nkic.dialects.stablehlo.attributes import (
    ComparisonDirectionAttr,
    ComparisonTypeAttr,
    dense_to_numpy,
    shape_of,
    ttype,
)
from nkic.dialects.stablehlo.syntax import (
    _HloOp,
    _UnaryShapeOp,
    _parse_operands_and_fields,
    _print_fn_type,
    _print_operands,
    _same_shapes,
)

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
class IsFiniteOp(_UnaryShapeOp):
    """``stablehlo.is_finite %x : (tensor<8xf32>) -> tensor<8xi1>``: true where ``x`` is neither ±inf nor NaN."""

    name = "stablehlo.is_finite"

    def verify_(self) -> None:
        super().verify_()
        _same_shapes(self)
        if ttype(self.result).element_type != IntegerType(1):
            raise VerifyException("stablehlo.is_finite: the result is i1")


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
