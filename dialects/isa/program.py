"""The ``isa`` dialect: the structure of a per-engine ISA program.

One ``isa.core`` per NeuronCore subgraph (``sg00`` ...) declares the HBM variables of ``def.json`` and holds one
``isa.stream`` per engine, whose ops are that engine's instructions in issue order::

    isa.core @sg00 {
      isa.var @a : input [256, 512] float32 {var_id = 0 : i64}
      isa.stream "sp" {
        isa_sp.dma_copy dst sbuf(p0, 0x0, float32)[...], src hbm(var 0, 0x0, float32)[...] {id = 0 : i64, ...}
      }
    }
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Self

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr, StringAttr, SymbolNameConstraint, i64
from xdsl.ir import Attribute, Block, Dialect, Operation, Region
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    lazy_traits_def,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, NoTerminator, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from nkic.dialects.common import check_member, constant_attr, constant_bytes, parse_i64
from nkic.target.vocab import DTYPES, dtype_size
from nkic.dialects.isa.base import IsaInst, IsaLocAttr, byte_range
from nkic.target.machine import ENGINE_NAMES as ENGINES
from nkic.target.machine import MAX_HBM_BYTES
from nkic.target.names import is_safe_name

VAR_KINDS = ("input", "output", "tmp-buf", "file")


@irdl_op_definition
class CoreOp(IRDLOperation):
    """One NeuronCore subgraph: ``isa.var`` declarations and at most one ``isa.stream`` per engine."""

    name = "isa.core"
    sym_name = prop_def(SymbolNameConstraint())
    body = region_def("single_block")
    traits = traits_def(SymbolOpInterface(), NoTerminator(), SymbolTable())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$sym_name attr-dict-with-keyword $body"

    def __init__(self, name: str, body: Region | None = None):
        super().__init__(
            properties={"sym_name": StringAttr(name)},
            regions=[body if body is not None else Region(Block())],
        )

    def verify_(self) -> None:
        engines: set[str] = set()
        var_ids: set[int] = set()
        for op in self.body.block.ops:
            if isinstance(op, StreamOp):
                if op.engine_name in engines:
                    raise VerifyException(f"isa.core @{self.sym_name.data} has two '{op.engine_name}' streams")
                engines.add(op.engine_name)
            elif isinstance(op, VarOp):
                if op.id in var_ids:
                    raise VerifyException(f"isa.core @{self.sym_name.data} declares var_id {op.id} twice")
                var_ids.add(op.id)
            else:
                raise VerifyException(f"isa.core may only hold isa.var and isa.stream ops, not '{op.name}'")
        self._verify_hbm_accesses()

    def _verify_hbm_accesses(self) -> None:
        """Every HBM operand names a declared variable and stays inside it."""
        sizes = {v.id: v.size_bytes for v in core_vars(self).values()}
        for stream in self.body.block.ops:
            if not isinstance(stream, StreamOp):
                continue
            for inst in stream.instructions:
                _check_hbm(inst, sizes)


def _check_hbm(inst: IsaInst, sizes: dict[int, int]) -> None:
    for i, (loc, ap) in enumerate(zip(inst.locs.data, inst.aps.data)):
        if loc.memory.data != "hbm":
            continue
        role = inst.roles.data[i].data
        if loc.var not in sizes:
            raise VerifyException(f"'{inst.name}' (id {inst.inst_id}) '{role}' uses undeclared var {loc.var}")
        lo, hi = byte_range(loc, ap)
        if lo < 0 or hi > sizes[loc.var]:
            raise VerifyException(
                f"'{inst.name}' (id {inst.inst_id}) '{role}' bytes [{lo:#x}, {hi:#x}) outside var {loc.var} "
                f"({sizes[loc.var]} bytes)"
            )


@irdl_op_definition
class VarOp(IRDLOperation):
    """An HBM variable of ``def.json``: ``isa.var @a : input [256, 512] float32 {var_id = 0 : i64}``; a ``file``
    variable (a constant, ``nl.shared_constant``) also carries its contents: ``{var_id = 2 : i64, data = "0x..."}``."""

    name = "isa.var"
    sym_name = prop_def(SymbolNameConstraint())
    kind = prop_def(StringAttr)
    shape = prop_def(DenseArrayBase[I64])
    dtype = prop_def(StringAttr)
    var_id = prop_def(IntegerAttr[I64])
    data = opt_prop_def(StringAttr)
    traits = traits_def(SymbolOpInterface(), HasParent(CoreOp))

    def __init__(
        self, name: str, kind: str, shape: Sequence[int], dtype: str, var_id: int, data: StringAttr | None = None
    ):
        props: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "kind": StringAttr(kind),
            "shape": DenseArrayBase.from_list(i64, list(shape)),
            "dtype": StringAttr(dtype),
            "var_id": IntegerAttr(var_id, i64),
        }
        if data is not None:
            props["data"] = data
        super().__init__(properties=props)

    def contents(self) -> bytes | None:
        """A file variable's bytes (None for the others)."""
        return None if self.data is None else constant_bytes(self.data, self.size_bytes)

    @property
    def id(self) -> int:
        return self.var_id.value.data

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.shape.get_values())

    @property
    def size_bytes(self) -> int:
        return math.prod(self.dims) * dtype_size(self.dtype.data)

    def verify_(self) -> None:
        check_member("variable kind", self.kind.data, VAR_KINDS)
        check_member("dtype", self.dtype.data, tuple(DTYPES))
        if not 0 <= self.id <= 0xFFFF:
            raise VerifyException(f"var_id {self.id} does not fit in 16 bits")
        if any(d <= 0 for d in self.dims):
            raise VerifyException(f"variable shape {list(self.dims)} must be positive")
        if not is_safe_name(self.sym_name.data):
            raise VerifyException(f"variable name '{self.sym_name.data}' is not a safe name (target/names.py)")
        if self.size_bytes > MAX_HBM_BYTES:
            raise VerifyException(f"variable @{self.sym_name.data}: {self.size_bytes} bytes, more than the largest "
                                  f"HBM ({MAX_HBM_BYTES} bytes)")  # fmt: skip
        if (self.kind.data == "file") != (self.data is not None):
            raise VerifyException("a file variable (a constant), and only it, carries data")
        self.contents()

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(f" : {self.kind.data} [{', '.join(map(str, self.dims))}] {self.dtype.data} ")
        printer.print_attr_dict({"var_id": self.var_id} | ({} if self.data is None else {"data": self.data}))

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        name = parser.parse_symbol_name().data
        parser.parse_punctuation(":")
        kind = parser.parse_identifier(" (a variable kind)")
        # 'tmp-buf' lexes as identifier, '-', identifier.
        while parser.parse_optional_punctuation("-") is not None:
            kind += "-" + parser.parse_identifier()
        shape = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: parse_i64(parser))
        dtype = parser.parse_identifier(" (a dtype)")
        extra = parser.parse_optional_attr_dict()
        var_id, data = extra.pop("var_id", None), extra.pop("data", None)
        if not isinstance(var_id, IntegerAttr) or extra or not isinstance(data, StringAttr | None):
            parser.raise_error("isa.var takes the attributes var_id and (for a file variable) data")
        return cls(name, kind, shape, dtype, var_id.value.data, data)


@irdl_op_definition
class StreamOp(IRDLOperation):
    """One engine's instruction stream, in issue order: ``isa.stream "pe" { ... }``."""

    name = "isa.stream"
    engine = prop_def(StringAttr)
    # Not "single_block": xDSL parses an empty `{ }` as a region without blocks, and an idle engine is legal.
    body = region_def()
    traits = lazy_traits_def(lambda: (NoTerminator(), HasParent(CoreOp)))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$engine attr-dict-with-keyword $body"

    def __init__(self, engine: str, body: Region | None = None):
        super().__init__(
            properties={"engine": StringAttr(engine)},
            regions=[body if body is not None else Region(Block())],
        )

    @property
    def engine_name(self) -> str:
        return self.engine.data

    def body_ops(self) -> list[Operation]:
        """The stream's ops, also when the region was parsed from `{ }` (no block)."""
        return [op for block in self.body.blocks for op in block.ops]

    @property
    def instructions(self) -> list[IsaInst]:
        return [op for op in self.body_ops() if isinstance(op, IsaInst)]

    def verify_(self) -> None:
        check_member("engine", self.engine_name, ENGINES)
        if len(self.body.blocks) > 1:
            raise VerifyException(f"isa.stream \"{self.engine_name}\" must have at most one block")
        for op in self.body_ops():
            if not isinstance(op, IsaInst):
                raise VerifyException(
                    f"isa.stream \"{self.engine_name}\" may only hold ISA instructions, not '{op.name}'"
                )
            if op.ENGINE != self.engine_name:
                raise VerifyException(
                    f"'{op.name}' (engine {op.ENGINE}) cannot be in the \"{self.engine_name}\" stream"
                )


def core_streams(core: CoreOp) -> dict[str, list[IsaInst]]:
    """Engine name -> its instructions in issue order (engines without a stream are absent)."""
    return {op.engine_name: op.instructions for op in core.body.block.ops if isinstance(op, StreamOp)}


def core_vars(core: CoreOp) -> dict[str, VarOp]:
    """Variable name -> its declaration."""
    return {op.sym_name.data: op for op in core.body.block.ops if isinstance(op, VarOp)}


Isa = Dialect("isa", [CoreOp, VarOp, StreamOp], [IsaLocAttr])
