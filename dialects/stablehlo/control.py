"""Control flow and calls: ``return``, ``custom_call``, ``composite``, ``while``, ``optimization_barrier``, ``case``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar, Self

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FloatAttr, IntegerAttr, IntegerType, StringAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    lazy_traits_def,
    opt_prop_def,
    prop_def,
    region_def,
    var_operand_def,
    var_region_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind

from nkic.dialects.stablehlo.attributes import shape_of, ttype
from nkic.dialects.stablehlo.syntax import (
    _HloOp,
    _parse_typed_values,
    _print_fn_type,
    _print_operands,
    _print_typed_values,
)

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
