"""``chlo``: the client ops JAX emits by default (``square``, ``erf``, ``erfc``, ``erf_inv``, ``top_k``), decomposed into
StableHLO by ``nkic.hlo.chlo_legalize``."""

from __future__ import annotations

from typing import Self

from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import Dialect
from xdsl.irdl import irdl_op_definition, prop_def, result_def, traits_def, var_operand_def, var_result_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from nkic.dialects.stablehlo.attributes import shape_of, ttype
from nkic.dialects.stablehlo.syntax import _HloOp

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
