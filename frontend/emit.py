"""PenguinEmitter: the only place where the tracer touches xDSL.

The tracer (``tracer.py``) calls ``param``/``alloc``/``inst``/``begin_loop``… while re-executing a kernel; the emitter
builds the ``penguin`` module in memory: one ``penguin.kernel`` (one region per SPMD program) and the host graph
whose ``penguin.kernel_node`` calls it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    FunctionType,
    ModuleOp,
    StringAttr,
    f32,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, ErasedSSAValue, Operation, OpResult, Region, SSAValue
from xdsl.traits import IsTerminator, NoTerminator
from xdsl.utils.exceptions import VerifyException

from nkic.dialects import penguin
from nkic.dialects.common import (
    TARGET_ATTR,
    AccessPatternAttr,
    attr_of,
    dense_i64_attr,
    element_type,
    i64_attr,
    names_attr,
    string_attr,
)


@dataclass(frozen=True)
class Loc:
    file: str
    line: int
    col: int = 0
    call: str = ""  # the nki API call the user wrote there (``nl.exp``, ``nisa.activation``), for profiles

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" + (f":{self.col}" if self.col else "")


@dataclass(frozen=True)
class Affine:
    """``const + Σ coeffs[d]·iv_d`` where ``iv_d`` is the induction variable at loop depth d (outermost 0)."""

    const: int
    coeffs: tuple[int, ...] = ()


@dataclass(frozen=True)
class Operand:
    tensor: object
    offset: Affine
    pattern: tuple[tuple[int, int], ...]
    view: str = ""  # the dtype the operand reinterprets the tensor's bytes as ("" = its own)
    dyn: tuple[str, str, int, int] = ("", "", 0, 0)  # dynamic term: (kind, index role, register, scale)


def _pattern_attr(pattern: Sequence[Sequence[int]], offset: int = 0) -> AccessPatternAttr:
    return AccessPatternAttr(offset, [tuple(p) for p in pattern])


# Attributes whose Python value needs a specific attribute form.
# How a traced field value becomes a property, by the field's kind in the instruction declaration.
_BY_KIND = {
    "axes": lambda v: dense_i64_attr([int(a) for a in v]),  # shared: the same few axes on every reduce
    "int": lambda v: i64_attr(int(v)),
    "f32": lambda v: _f32(float(v)),
    "value": lambda v: _f32(float(v)) if isinstance(v, float) else i64_attr(int(v)),
}


def _f32(value: float) -> FloatAttr:
    """``FloatAttr(value, f32)``, shared except for zeros (0.0 and -0.0 are one cache key, not one attribute)."""
    return _f32_cached(value) if value != 0.0 else FloatAttr(value, f32)


@functools.lru_cache(maxsize=1 << 12)
def _f32_cached(value: float) -> FloatAttr:
    return FloatAttr(value, f32)


@functools.lru_cache(maxsize=1 << 12)
def _tensor_type(buffer: str, shape: tuple[int, ...], dtype: str) -> penguin.TensorType:
    """One type attribute per (memory, shape, dtype): a loop body allocates the same tile types over and over, and
    a TensorType verifies (dtype lookup, bounds) when built."""
    return penguin.TensorType(buffer, shape, element_type(dtype))


# An operand's access pattern as plain values: (offset, pairs, loop coefficients, view dtype, dynamic term).
ApKey = tuple[int, tuple[tuple[int, int], ...], tuple[int, ...], str, tuple[str, str, int, int]]


@functools.lru_cache(maxsize=1 << 16)
def _ap_attr(key: ApKey) -> AccessPatternAttr:
    """One attribute per distinct access pattern: an unrolled loop body touches the same tile patterns (and often
    the same offsets) over and over, and building a pattern normalises and verifies its values."""
    const, pattern, coeffs, view, dyn = key
    return AccessPatternAttr(const, pattern, coeffs, view, dyn)


@functools.lru_cache(maxsize=1 << 16)
def _aps_attr(keys: tuple[ApKey, ...]) -> ArrayAttr[AccessPatternAttr]:
    """The ``aps`` property of an instruction (its operands' patterns in role order), shared like ``_ap_attr``."""
    return ArrayAttr([_ap_attr(k) for k in keys])


@functools.lru_cache(maxsize=None)
def _field_kinds(cls: type) -> dict[str, str]:
    return {f.name: f.kind for f in cls.SPEC.fields}  # type: ignore[attr-defined]


class PenguinEmitter:
    def __init__(self, kernel_name: str, grid: int = 1, kind: str = "external"):
        self.kernel_name = kernel_name
        self.grid = grid
        self.kind = kind
        self._programs: list[Region] = []
        self._param_types: list[penguin.TensorType] | None = None
        self._output_types: list[penguin.TensorType] | None = None
        self._blocks: list[Block] = []

    # -- programs --------------------------------------------------------------------------------------
    def begin_program(self, program_id: int) -> None:
        assert not self._blocks, "begin_program inside an open program"
        self._pending_params: list[penguin.TensorType] = []
        self._blocks = [Block()]

    def param(self, name: str, shape: tuple[int, ...], dtype: str) -> SSAValue:
        t = penguin.TensorType("shared_hbm", shape, element_type(dtype))
        arg = self._blocks[0].insert_arg(t, len(self._blocks[0].args))
        arg.name_hint = _ssa_name(name)
        return arg

    def alloc(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype: str,
        buffer: str,
        address: tuple[int, int] | None,
        loc: Loc,
        data: bytes | None = None,
    ) -> SSAValue:
        op = _alloc_op(name, _tensor_type(buffer, tuple(shape), dtype), address, str(loc), data)
        self._blocks[-1].add_op(op)
        op.result.name_hint = _ssa_name(name)
        return op.result

    def inst(self, op: str, operands: dict[str, Operand], attrs: dict[str, object], loc: Loc) -> Operation:
        cls = penguin.INSTRUCTION_OPS[op]
        roles = [r for r in cls.ROLES if r in operands]
        props: dict[str, Attribute] = {
            "roles": names_attr(roles),
            "aps": _aps_attr(tuple((o.offset.const, o.pattern, o.offset.coeffs, o.view, o.dyn)
                                   for o in (operands[r] for r in roles))),  # fmt: skip
            "loc": string_attr(str(loc)),
        }
        if loc.call:
            props["call"] = string_attr(loc.call)
        kinds = _field_kinds(cls)
        for k, v in attrs.items():
            if v is None:
                continue
            kind = kinds.get(k)
            if kind == "pattern":  # the traced offset is the pattern's
                props[k] = _pattern_attr(v, int(attrs.get("offset", 0) or 0))
            elif k == "offset" and "pattern" in attrs:
                continue
            elif kind in _BY_KIND:
                props[k] = _BY_KIND[kind](v)
            else:
                props[k] = attr_of(v)
        new = cls.create(operands=[operands[r].tensor for r in roles], properties=props)
        self._blocks[-1].add_op(new)
        return new

    def is_last(self, op: Operation) -> bool:
        """Whether ``op`` is the last op of the block being traced (nothing emitted after it, no loop opened)."""
        return op.parent is self._blocks[-1] and op.next_op is None

    @staticmethod
    def order(consumer: Operation, producer: Operation, tag: str) -> None:
        """``consumer`` runs after ``producer`` (nisa.NkiInstruction.depends_on): ``producer`` is tagged (once) and
        ``consumer`` lists the tag."""
        if "tag" not in producer.properties:
            producer.properties["tag"] = StringAttr(tag)
        name = producer.properties["tag"]
        after = consumer.properties.get("after")
        names = list(after.data) if isinstance(after, ArrayAttr) else []
        if name not in names:
            consumer.properties["after"] = ArrayAttr([*names, name])

    # -- loops -----------------------------------------------------------------------------------------
    def begin_loop(self, kind: str, start: int, stop: int, step: int, loc: Loc) -> None:
        body = Block()
        self._blocks[-1].add_op(penguin.LoopOp(kind, start, stop, step, Region(body), str(loc)))
        self._blocks.append(body)

    def end_loop(self) -> None:
        assert len(self._blocks) > 1, "end_loop without begin_loop"
        self._blocks.pop()

    def end_program(self, outputs: list[object]) -> None:
        assert len(self._blocks) == 1, "end_program inside a loop"
        block = self._blocks.pop()
        block.add_op(penguin.ReturnOp(outputs))  # type: ignore[arg-type]
        types = [a.type for a in block.args]
        outs = [v.type for v in outputs]  # type: ignore[attr-defined]
        if self._param_types is None:
            self._param_types, self._output_types = types, outs
        elif types != self._param_types or outs != self._output_types:
            raise ValueError("SPMD programs of one kernel must have the same inputs and outputs")
        self._programs.append(Region(block))

    def finish(self, target: str | None = None) -> ModuleOp:
        """The traced module, stamped with the generation it was traced for (``nkic.target``), verified."""
        assert self._param_types is not None and self._output_types is not None, "no program was traced"
        ftype = FunctionType.from_lists(self._param_types, self._output_types)
        kernel = penguin.KernelOp(self.kernel_name, ftype, self._programs)
        graph_block = Block(arg_types=self._param_types)
        for arg, karg in zip(graph_block.args, self._programs[0].block.args):
            arg.name_hint = karg.name_hint
        node = penguin.KernelNodeOp(
            self.kernel_name, graph_block.args, self._output_types, self.kind, self.grid
        )
        graph_block.add_ops([node, penguin.GraphReturnOp(node.outs)])
        module = ModuleOp([penguin.GraphOp("main", Region(graph_block)), kernel])
        if target is not None:
            module.attributes[TARGET_ATTR] = StringAttr(target)
        verify_traced(module)
        return module


def _alloc_op(
    name: str, t: penguin.TensorType, address: tuple[int, int] | None, loc: str, data: bytes | None
) -> penguin.AllocOp:
    """``penguin.AllocOp(name, t, address, loc, data)``: the same properties, given to ``create`` (xDSL's generic
    IRDL builder sorts operands, results, regions and successors by their definitions, most of the cost of building
    one; an allocation has none but its result). The loc string attribute is shared: a loop body repeats its
    lines."""
    if data is not None:  # a constant: rare, and the constructor knows how its contents are stored
        return penguin.AllocOp(name, t, address, loc, data)
    props: dict[str, Attribute] = {"tensor_name": StringAttr(name)}
    if address is not None:
        props["address"] = DenseArrayBase.from_list(i64, list(address))
    props["loc"] = string_attr(loc)
    return penguin.AllocOp.create(result_types=[t], properties=props)


def _ssa_name(name: str) -> str | None:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    if not cleaned or cleaned[0].isdigit():
        cleaned = "t" + cleaned
    return cleaned


# -- verification ----------------------------------------------------------------------------------------------------
# The key of an instruction op's own verifier input: (class, loop depth, parent op class, result/region/successor
# counts, its operand types, properties and attributes by identity). Identities are only compared within one
# verify_traced call, while every op (and so every attribute it holds) is alive.
_InstKey = tuple[object, ...]


def verify_traced(module: ModuleOp) -> None:
    """``module.verify()``: every check it makes, in its order, with its diagnostics, except that an instruction
    op's own verifier (``verify_``: its IRDL constraints, roles, fields and shape rules, memories, loop depth) runs
    once per distinct input. That verifier reads nothing but the op's class, operand types, properties, attributes
    and loop depth (its traits are markers; the parent's class is in the key too), and attributes are immutable: an
    unrolled loop body traces the same instruction with the same (interned, see ``_ap_attr``) attributes over and
    over, so of the ~23k instructions of a 16K attention ~3.5k are distinct. The structural checks (operands,
    terminators, parent links) still run for every op."""
    _verify_op(module, 0, set())


def _verify_op(op: Operation, depth: int, verified: set[_InstKey]) -> None:
    """``Operation.verify`` (xDSL 0.74) with the instruction verifier memoised; ``depth`` = enclosing loops."""
    cls = type(op)
    kind = _KINDS.get(cls)
    if kind is None:
        kind = _KINDS[cls] = _kind(cls)
    if kind == "own":  # an op with a verify of its own: as module.verify() runs it
        op.verify()
        return
    # The stored tuples behind ``op.operands`` / ``op.successors`` (each of those builds a view object per call).
    operands, successors = op._operands, op._successors
    for operand in operands:  # (an SSA value's isinstance goes through ABCMeta: results and arguments skip it)
        if type(operand) not in _LIVE_VALUES and isinstance(operand, ErasedSSAValue):
            raise ValueError("Erased SSA value is used by the operation")
    block = op.parent
    region = None if block is None else block.parent
    if successors:
        if block is None or region is None:
            raise VerifyException(f"Operation {op.name} with block successors does not belong to a block or a region")
        if block.last_op is not op:
            raise VerifyException(f"Operation {op.name} with block successors must terminate its parent block")
        for succ in successors:
            if succ.parent != block.parent:
                raise VerifyException(f"Operation {op.name} is branching to a block of a different region")
    if block is not None and region is not None and block.last_op == op:
        if len(region.blocks) == 1:
            parent = region.parent
            if parent is not None and not parent.has_trait(NoTerminator) and not op.has_trait(IsTerminator):
                raise VerifyException(
                    f"Operation {op.name} terminates block in single-block region but is not a terminator"
                )
        elif len(region.blocks) > 1 and not op.has_trait(IsTerminator):
            raise VerifyException(f"Operation {op.name} terminates block in multi-block region but is not a terminator")
    inner = 0 if kind == "kernel" else depth + (kind == "loop")  # as penguin.loop_depth counts
    for r in op.regions:
        _verify_region(r, inner, verified)
    key = None
    if kind == "inst":
        props, attrs = op.properties, op.attributes
        types = tuple([id(v.type) for v in operands])
        parent = None if region is None else type(region.parent)  # (for a trait such as HasParent)
        key = (type(op), depth, parent, len(op.results), len(op.regions), len(successors), types,
               tuple(props), tuple(map(id, props.values())), tuple(attrs), tuple(map(id, attrs.values())))  # fmt: skip
        if key in verified:
            return
    try:
        op.verify_()
    except VerifyException as err:
        op.emit_error(f"Operation does not verify: {err}", err)
    if key is not None:
        verified.add(key)


_LIVE_VALUES = (OpResult, BlockArgument)
_KINDS: dict[type[Operation], str] = {}  # op class -> _kind (isinstance through the IR's ABCs is slow)


def _kind(cls: type[Operation]) -> str:
    """How ``_verify_op`` treats ops of ``cls``: "own" (it overrides ``verify``), "kernel", "loop", "inst" (an
    instruction, whose own verifier is memoised) or "" (anything else)."""
    if cls.verify is not Operation.verify:
        return "own"
    for base, kind in ((penguin.KernelOp, "kernel"), (penguin.LoopOp, "loop"), (penguin.PenguinInst, "inst")):
        if issubclass(cls, base):
            return kind
    return ""


def _verify_region(region: Region, depth: int, verified: set[_InstKey]) -> None:
    """``Region.verify`` and ``Block.verify`` (xDSL 0.74), nested ops through ``_verify_op``."""
    for block in region.blocks:
        for op in block.ops:
            if op.parent != block:
                raise ValueError("Parent pointer of operation does not refer to containing region")
            _verify_op(op, depth, verified)
        if len(block.ops) == 0:
            parent = block.parent
            if parent is not None and (parent_op := parent.parent) is not None:
                if len(parent.blocks) == 1 and not parent_op.has_trait(NoTerminator):
                    raise VerifyException(f"Operation {parent_op.name} contains empty block in single-block region "
                                          "that expects at least a terminator")  # fmt: skip
        if block.parent != region:
            raise ValueError("Parent pointer of block does not refer to containing region")
