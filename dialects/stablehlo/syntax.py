"""What the ops share: the base op class (generic form unless an op overrides ``parse``/``print``), the shape check
of element-wise ops, and the readers and printers of the pretty forms several ops use."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Self

from xdsl.ir import Attribute, Operation, Region, SSAValue
from xdsl.irdl import IRDLOperation, result_def, traits_def, var_operand_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind

from nkic.dialects.stablehlo.attributes import i64_array, int_list, shape_of

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


class _HloOp(IRDLOperation):
    """Generic form for every op; ops with a pretty form override ``parse``/``print``."""


def _same_shapes(op: IRDLOperation) -> None:
    shapes = {shape_of(v) for v in [*op.operands, *op.results]}
    if len(shapes) != 1:
        raise VerifyException(f"{op.name}: operands and result must have one shape, got {sorted(shapes)}")


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
