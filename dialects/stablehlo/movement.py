"""Shape and data-movement ops: ``convert``, ``reshape``, ``broadcast_in_dim``, ``transpose``, ``slice``,
``concatenate``, ``pad``, ``gather``, ``dynamic_slice``, ``iota``, ``reverse``, ``dynamic_update_slice``, ``scatter``."""

from __future__ import annotations

import math
from typing import ClassVar, Self

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, i64
from xdsl.ir import Attribute
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

from nkic.dialects.stablehlo.attributes import GatherAttr, ScatterAttr, i64_array, int_list, shape_of, ttype
from nkic.dialects.stablehlo.compute import _comparator_ok
from nkic.dialects.stablehlo.syntax import (
    _HloOp,
    _UnaryShapeOp,
    _bracketed,
    _finish_fn_typed,
    _int_list_,
    _parse_operands_and_fields,
    _print_fn_type,
    _print_operands,
    _same_shapes,
)

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
