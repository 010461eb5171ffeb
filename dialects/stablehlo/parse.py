"""The parse boundary: the ``stablehlo`` dialect, ``StableHloParser`` (hex float literals as bit patterns, MLIR's
location aliases and ranges) and ``parse_stablehlo``; ``mlir_location`` / ``source_location`` read an op's location back."""

from __future__ import annotations

import bisect
import re

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import (
    AnyFloat,
    Builtin,
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    IntAttr,
    ModuleOp,
    NameLoc,
    StringAttr,
    UnknownLoc,
)
from xdsl.dialects.func import Func
from xdsl.ir import Attribute, Dialect, Operation
from xdsl.parser import AttrParser, Parser
from xdsl.utils.exceptions import ParseError
from xdsl.utils.mlir_lexer import MLIRTokenKind

from nkic.dialects import get_all_dialects
from nkic.dialects.stablehlo.attributes import (
    ComparisonDirectionAttr,
    ComparisonTypeAttr,
    ConvAttr,
    DotAlgorithmAttr,
    DotAttr,
    GatherAttr,
    PrecisionAttr,
    ScatterAttr,
    numpy_dtype,
)
from nkic.dialects.stablehlo.compute import ConvolutionOp, DotGeneralOp, ReduceOp, ReduceWindowOp, SortOp
from nkic.dialects.stablehlo.control import CaseOp, CompositeOp, CustomCallOp, OptimizationBarrierOp, ReturnOp, WhileOp
from nkic.dialects.stablehlo.elementwise import ClampOp, CompareOp, ConstantOp, ELEMENTWISE, IsFiniteOp, SelectOp
from nkic.dialects.stablehlo.movement import (
    BroadcastInDimOp,
    ConcatenateOp,
    ConvertOp,
    DynamicSliceOp,
    DynamicUpdateSliceOp,
    GatherOp,
    IotaOp,
    PadOp,
    ReshapeOp,
    ReverseOp,
    ScatterOp,
    SliceOp,
    TransposeOp,
)

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
