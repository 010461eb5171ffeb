"""The ``bir`` dialect: backend IR at one-instruction-per-ISA-instruction granularity.

A BIR function declares its memory locations (``bir.memloc``: kernel inputs/outputs and internal tensors) and
holds instructions that name them by symbol, each stamped with an id, an engine and dependency edges; loops are
``bir.loop`` axes. The host function carries kernels through the three carrier ops of the spec's Stage 4a:

* ``bir.nki_klir_kernel`` (IT56) — the frontend carrier: the kernel as embedded BIR JSON (``kernel_format = "bir"``,
  FORM B) or a serialized kernel-AST binary (FORM A);
* ``bir.nki_kernel`` (IT55) — a call-site of a separate BIR function, with name-keyed argument maps;
* ``bir.bir_kernel`` (IT54) — a pre-compiled library kernel described by name, shapes and attributes.

    bir.function @add {inputs = ["a", "b"], outputs = ["out"]} {
      bir.memloc @x : sbuf [128, 512] f32
      bir.dma_copy dst @x[0 : [512, 128], [1, 512]], src @a[0 : [512, 128], [1, 512]] {id = 0 : i64, engine = "sp"}
    }
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar, Self

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BytesAttr,
    DenseArrayBase,
    DictionaryAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, ParametrizedAttribute, Region
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import NoTerminator, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from nkic.dialects import instructions as fields
from nkic.dialects.common import (
    BIR_ENGINES,
    MEMORIES,
    check_member,
    constant_bytes,
    dense_i64_attr,
    dense_ints,
    int_attr,
    parse_i64,
    string_attr,
)
from nkic.target.machine import MAX_HBM_BYTES, MAX_PSUM_BYTES, MAX_SBUF_BYTES, NUM_PARTITIONS
from nkic.target.vocab import DTYPES, ON_CHIP, dtype_size
from nkic.dialects.fastverify import fast_verify
from nkic.dialects.inst import RoleOperandOp

DEP_KINDS = ("flow", "output", "anti", "ordered")
MEMLOC_KINDS = ("input", "output", "internal", "constant")
KERNEL_SOURCES = ("Beta1", "Beta2", "Beta3")


@irdl_attr_definition
class DepAttr(ParametrizedAttribute):
    """A dependency edge on an earlier instruction: ``#bir.dep<flow, 3>``."""

    name = "bir.dep"
    kind: StringAttr
    on: IntAttr

    def __init__(self, kind: str, on: int):
        super().__init__(string_attr(kind), int_attr(on))  # shared immutable parameters (common.int_attr)

    def verify(self) -> None:
        check_member("dependency kind", self.kind.data, DEP_KINDS)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            kind = parser.parse_identifier()
            parser.parse_punctuation(",")
            on = parser.parse_integer(allow_negative=False)
        return StringAttr(kind), IntAttr(on)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.kind.data}, {self.on.data}>")


@functools.lru_cache(maxsize=1 << 18)
def _dep_cached(kind: str, on: int) -> DepAttr:
    if kind in DEP_KINDS and on >= 0:
        # DepAttr(kind, on) less xDSL's generic parameter verification (~20 us): its own check holds here
        attr = DepAttr.__new__(DepAttr)
        object.__setattr__(attr, "kind", string_attr(kind))
        object.__setattr__(attr, "on", int_attr(on))
        return attr
    return DepAttr(kind, on)


def deps_attr(edges: Iterable[tuple[str, int]]) -> ArrayAttr[DepAttr]:
    """The ``deps`` property of ``(kind, instruction id)`` edges. The edge attributes are shared (immutable, and
    several passes rebuild every instruction's edges: the same few values, built and verified again each time).
    The plain ``(kind, id)`` pairs are stored with the attribute (see ``dep_pairs``), so reading them back is free."""
    pairs = tuple([(k, i) for k, i in edges])
    try:
        deps = tuple([_dep_cached(k, i) if type(k) is str and type(i) is int else DepAttr(k, i) for k, i in pairs])
    except TypeError:  # an unhashable kind or id: DepAttr itself says what is wrong
        deps = tuple([DepAttr(k, i) for k, i in pairs])
    # ArrayAttr(deps) less its construction-time check (every element an Attribute, which DepAttrs are): a pass that
    # renumbers builds one per instruction
    attr = ArrayAttr.__new__(ArrayAttr)
    object.__setattr__(attr, "data", deps)
    if all([type(k) is str and type(i) is int for k, i in pairs]):
        attr.__dict__[_PAIRS] = pairs
        attr.__dict__[_IDS] = tuple([i for _, i in pairs])
    return attr


def waits_attr(flat: Sequence[int]) -> DenseArrayBase:
    """The ``waits`` property (flattened ``(semaphore, value)`` pairs, plain ints): ``DenseArrayBase.from_list(i64,
    flat)`` built directly (~1 us instead of ~40: insert-semaphores sets one on most instructions). Its check, a byte
    length that is a multiple of 8, holds by construction; values beyond int64 still fail in ``struct.pack``."""
    data = BytesAttr.__new__(BytesAttr)
    object.__setattr__(data, "data", struct.pack(f"<{len(flat)}q", *flat))
    attr = DenseArrayBase.__new__(DenseArrayBase)
    object.__setattr__(attr, "elt_type", i64)
    object.__setattr__(attr, "data", data)
    return attr


# The dependency ids as plain arrays: an edge list is an immutable ``ArrayAttr`` of ``DepAttr``s (the IR text and
# JSON forms stay as they are), and the late passes read every instruction's edges several times each (385k reads at
# the 16K attention). Each attribute object carries, in its instance ``__dict__`` (not a dataclass field: equality,
# hashing and printing ignore it), its edges as a tuple of ``(kind, id)`` pairs and a tuple of ids, built on first
# read or when ``deps_attr`` builds it. Valid forever: the attribute never changes.
_PAIRS = "_nkic_dep_pairs"
_IDS = "_nkic_dep_ids"


def dep_pairs_of(attr: ArrayAttr[DepAttr] | None) -> tuple[tuple[str, int], ...]:
    """The ``(kind, id)`` pairs of a ``deps`` attribute (``()`` for none), cached on the attribute."""
    if attr is None:
        return ()
    got = attr.__dict__.get(_PAIRS)
    if got is None:
        got = attr.__dict__[_PAIRS] = tuple((d.kind.data, d.on.data) for d in attr.data)
    return got


def dep_ids_of(attr: ArrayAttr[DepAttr] | None) -> tuple[int, ...]:
    """The ids a ``deps`` attribute points at, in its order (``()`` for none), cached on the attribute."""
    if attr is None:
        return ()
    got = attr.__dict__.get(_IDS)
    if got is None:
        got = attr.__dict__[_IDS] = tuple(i for _, i in dep_pairs_of(attr))
    return got


@irdl_op_definition
class FunctionOp(IRDLOperation):
    """A BIR function; ``inputs``/``outputs`` name its parameter memory locations in order."""

    name = "bir.function"
    sym_name = prop_def(SymbolNameConstraint())
    inputs = prop_def(ArrayAttr[StringAttr])
    outputs = prop_def(ArrayAttr[StringAttr])
    grid = opt_prop_def(IntegerAttr[I64])
    program_id = opt_prop_def(IntegerAttr[I64])
    body = region_def("single_block")
    traits = traits_def(SymbolOpInterface(), NoTerminator(), SymbolTable())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$sym_name attr-dict-with-keyword $body"

    def __init__(self, name: str, inputs: Sequence[str], outputs: Sequence[str], body: Region | None = None):
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "inputs": ArrayAttr([StringAttr(n) for n in inputs]),
                "outputs": ArrayAttr([StringAttr(n) for n in outputs]),
            },
            regions=[body if body is not None else Region(Block())],
        )

    @property
    def input_names(self) -> list[str]:
        return [s.data for s in self.inputs.data]

    @property
    def output_names(self) -> list[str]:
        return [s.data for s in self.outputs.data]

    def memlocs(self) -> dict[str, MemLocOp]:
        return _memlocs_in(self.body.block)

    def instructions(self) -> Iterator[BirInst]:
        """All instructions in program order, loop bodies included (as ``body.walk()`` would find them, without
        its generic recursion: every pass reads the instruction list, some of them several times)."""
        return _instructions_in(self.body.block)

    def has_loops(self) -> bool:
        """Whether a ``bir.loop`` is left (what ``any(isinstance(o, LoopOp) for o in body.walk())`` says, but
        looking only into ops that have regions)."""
        return _has_loops(self.body.block)

    def verify_(self) -> None:
        locs = self.memlocs()
        for n in self.input_names:
            if n not in locs or locs[n].kind.data != "input":
                raise VerifyException(f"function input '{n}' must be a memloc of kind input")
        for n in self.output_names:
            if n not in locs or locs[n].kind.data != "output":
                raise VerifyException(f"function output '{n}' must be a memloc of kind output")
        for inst in self.instructions():
            for r in inst.ref_names:
                if r not in locs:
                    raise VerifyException(f"'{inst.name}' (id {inst.id.value.data}) uses undeclared memloc @{r}")
            _verify_footprints(inst, locs)


# The scans below read the block's linked list through its fields, in plain loops: the ``first_op``/``next_op``
# properties and a generator per level cost more than the loop bodies when every late pass scans a 100k-op function
# several times. Each takes the next op first, like ``Block.ops``: the caller may detach the current one.

_IS_INST: dict[type, bool] = {}  # op class -> is a BirInst (an ABC isinstance check costs ~1 us per op)


def _instructions_in(block: Block) -> Iterator[BirInst]:
    op = block._first_op  # pyright: ignore[reportPrivateUsage]
    while op is not None:
        after = op._next_op  # pyright: ignore[reportPrivateUsage]
        kind = _IS_INST.get(type(op))
        if kind is None:
            kind = _IS_INST[type(op)] = isinstance(op, BirInst)
        if kind:
            yield op  # type: ignore[misc]
        elif op.regions:
            for region in op.regions:
                for inner in region.blocks:
                    yield from _instructions_in(inner)
        op = after


def _memlocs_in(block: Block) -> dict[str, MemLocOp]:
    out: dict[str, MemLocOp] = {}
    op = block._first_op  # pyright: ignore[reportPrivateUsage]
    while op is not None:
        if type(op) is MemLocOp:
            out[op.properties["sym_name"].data] = op  # type: ignore[attr-defined]
        op = op._next_op  # pyright: ignore[reportPrivateUsage]
    return out


def _has_loops(block: Block) -> bool:
    op = block._first_op  # pyright: ignore[reportPrivateUsage]
    while op is not None:
        if op.regions and (isinstance(op, LoopOp) or any(_has_loops(b) for r in op.regions for b in r.blocks)):
            return True
        op = op._next_op  # pyright: ignore[reportPrivateUsage]
    return False


def _enclosing_loops(op: Operation) -> list[LoopOp]:
    loops: list[LoopOp] = []
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, FunctionOp):
        if isinstance(parent, LoopOp):
            loops.append(parent)
        parent = parent.parent_op()
    return loops[::-1]


def _verify_footprints(inst: BirInst, locs: dict[str, MemLocOp]) -> None:
    """Every static access pattern stays inside its memloc's storage for every iteration of the loops around it,
    and uses only the induction variables of those loops (the passes index storage and loops without checking)."""
    loops: list[LoopOp] | None = None
    for role, ref, ap in zip(inst.role_names, inst.ref_names, inst.aps.data):
        coeffs = ap.iv_coeffs
        if coeffs and loops is None:
            loops = _enclosing_loops(inst)
        if coeffs and len(coeffs) > len(loops or []):
            raise VerifyException(f"'{inst.name}' (id {inst.inst_id}) '{role}' uses loop index i{len(coeffs) - 1} "
                                  f"inside {len(loops or [])} loops")  # fmt: skip
        if ap.is_dynamic or any(n == 0 for _, n in ap.pairs):
            continue
        lo = hi = ap.offset.data
        for c, loop in zip(coeffs, loops or []):
            its = loop.iterations
            if not its:
                return  # the instruction never runs
            lo, hi = lo + min(c * its[0], c * its[-1]), hi + max(c * its[0], c * its[-1])
        for step, n in ap.pairs:
            lo, hi = lo + min(0, step * (n - 1)), hi + max(0, step * (n - 1))
        loc = locs[ref]
        size = math.prod(loc.dims) * dtype_size(loc.dtype.data) // dtype_size(ap.operand_dtype(loc.dtype.data))
        if lo < 0 or hi >= size:
            raise VerifyException(f"'{inst.name}' (id {inst.inst_id}) '{role}' reaches elements {lo}..{hi} of "
                                  f"@{ref}, which has {size}")  # fmt: skip


@irdl_op_definition
class MemLocOp(IRDLOperation):
    """A memory location: ``bir.memloc @x : sbuf [128, 512] f32 {address = array<i64: 0, 0>}``."""

    name = "bir.memloc"
    sym_name = prop_def(SymbolNameConstraint())
    memory = prop_def(StringAttr)
    shape = prop_def(DenseArrayBase[I64])
    dtype = prop_def(StringAttr)
    kind = prop_def(StringAttr)
    address = opt_prop_def(DenseArrayBase[I64])
    # The loop axis whose body allocated this tensor: unrolling gives each iteration a fresh copy.
    scope = opt_prop_def(StringAttr)
    # A ``constant`` memloc's contents (nl.shared_constant): "0x" + its little-endian bytes, row-major.
    data = opt_prop_def(StringAttr)
    # An on-chip tensor's allocation site in the user's kernel ("file:line[:col]"), for capacity errors.
    loc = opt_prop_def(StringAttr)
    traits = traits_def(SymbolOpInterface())

    def __init__(
        self,
        name: str,
        memory: str,
        shape: Sequence[int],
        dtype: str,
        kind: str = "internal",
        address: Sequence[int] | None = None,
    ):
        props: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "memory": string_attr(memory),
            "shape": dense_i64_attr(shape),
            "dtype": string_attr(dtype),
            "kind": string_attr(kind),
        }
        if address is not None:
            props["address"] = dense_i64_attr(address)
        super().__init__(properties=props)

    @property
    def dims(self) -> tuple[int, ...]:
        return dense_ints(self.shape)

    @property
    def mem(self) -> str:
        return self.memory.data

    @property
    def addr(self) -> tuple[int, ...] | None:
        return None if self.address is None else dense_ints(self.address)

    @property
    def bytes_per_partition(self) -> int:
        n = dtype_size(self.dtype.data)
        for d in self.dims[1:]:
            n *= d
        return n

    def verify_(self) -> None:
        check_member("memory space", self.mem, MEMORIES)
        check_member("memloc kind", self.kind.data, MEMLOC_KINDS)
        check_member("dtype", self.dtype.data, tuple(DTYPES))
        if not self.dims or min(self.dims) < 1:
            raise VerifyException(f"memloc @{self.sym_name.data}: shape {list(self.dims)} needs positive dimensions")
        if self.mem not in ON_CHIP and self.bytes_per_partition * self.dims[0] > MAX_HBM_BYTES:
            raise VerifyException(f"memloc @{self.sym_name.data}: {self.bytes_per_partition * self.dims[0]} bytes, "
                                  f"more than the largest HBM ({MAX_HBM_BYTES} bytes)")  # fmt: skip
        self._verify_address()
        if self.mem in ON_CHIP and self.dims[0] > NUM_PARTITIONS:
            raise VerifyException(
                f"partition dimension {self.dims[0]} exceeds the architecture limit of {NUM_PARTITIONS}"
            )
        if (self.kind.data == "constant") != (self.data is not None):
            raise VerifyException("a constant memloc, and only it, carries data")
        if self.data is not None:
            if self.mem in ON_CHIP or self.scope is not None:
                raise VerifyException("a constant lives in HBM, outside every loop")
            constant_bytes(self.data, self.bytes_per_partition * self.dims[0])

    def _verify_address(self) -> None:
        """An address is (start partition, byte offset) of an on-chip tensor, and the tensor fits from there."""
        if self.addr is None:
            return
        name = f"memloc @{self.sym_name.data}"
        if self.mem not in ON_CHIP:
            raise VerifyException(f"{name}: only on-chip memlocs have an address")
        if len(self.addr) != 2:
            raise VerifyException(f"{name}: address {list(self.addr)} must be (start partition, byte offset)")
        part, base = self.addr
        capacity = MAX_SBUF_BYTES if self.mem == "sbuf" else MAX_PSUM_BYTES
        if not 0 <= part <= NUM_PARTITIONS - self.dims[0]:
            raise VerifyException(f"{name}: partitions {part}..{part + self.dims[0] - 1} are not all in "
                                  f"0..{NUM_PARTITIONS - 1}")  # fmt: skip
        if base < 0 or base + self.bytes_per_partition > capacity:
            raise VerifyException(f"{name}: bytes [{base}, {base + self.bytes_per_partition}) of each partition are "
                                  f"not all in the {capacity}-byte {self.mem} partition")  # fmt: skip

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(f" : {self.mem} [{', '.join(map(str, self.dims))}] {self.dtype.data}")
        extra: dict[str, Attribute] = {}
        if self.kind.data != "internal":
            extra["kind"] = self.kind
        if self.address is not None:
            extra["address"] = self.address
        if self.scope is not None:
            extra["scope"] = self.scope
        if self.data is not None:
            extra["data"] = self.data
        if self.loc is not None:
            extra["loc"] = self.loc
        if extra:
            printer.print_string(" ")
            printer.print_attr_dict(extra)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        name = parser.parse_symbol_name().data
        parser.parse_punctuation(":")
        memory = parser.parse_identifier()
        shape = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: parse_i64(parser))
        dtype = parser.parse_identifier()
        extra = parser.parse_optional_attr_dict()
        op = cls(name, memory, shape, dtype)
        for k in ("kind", "address", "scope", "data", "loc"):
            if k in extra:
                op.properties[k] = extra.pop(k)
        if extra:
            parser.raise_error(f"unexpected memloc attributes: {', '.join(extra)}")
        return op


@irdl_op_definition
class LoopOp(IRDLOperation):
    """A loop axis (``BirAxis`` + ``InstLoop``): ``iN`` in access patterns is the index at nesting depth N."""

    name = "bir.loop"
    axis = prop_def(StringAttr)
    start = prop_def(IntegerAttr[I64])
    stop = prop_def(IntegerAttr[I64])
    step = prop_def(IntegerAttr[I64])
    kind = prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$axis $kind $start `to` $stop `step` $step $body attr-dict"

    def __init__(self, axis: str, kind: str, start: int, stop: int, step: int, body: Region | None = None):
        super().__init__(
            properties={
                "axis": StringAttr(axis),
                "kind": StringAttr(kind),
                "start": IntegerAttr(start, i64),
                "stop": IntegerAttr(stop, i64),
                "step": IntegerAttr(step, i64),
            },
            regions=[body if body is not None else Region(Block())],
        )

    @property
    def iterations(self) -> range:
        return range(self.start.value.data, self.stop.value.data, self.step.value.data)

    def verify_(self) -> None:
        if self.step.value.data == 0:
            raise VerifyException(f"loop '{self.axis.data}' has step 0")


class BirInst(RoleOperandOp):
    """A BIR instruction: operands name memory locations; ``id``, ``engine`` and ``deps`` are stamped on."""

    OPNAME: ClassVar[str] = ""
    OPERAND_PROPS: ClassVar[tuple[str, ...]] = ("roles", "aps", "refs")
    refs = prop_def(ArrayAttr[StringAttr])
    id = prop_def(IntegerAttr[I64])
    engine = prop_def(StringAttr)
    deps = opt_prop_def(ArrayAttr[DepAttr])
    predicates = opt_prop_def(ArrayAttr)
    loc = opt_prop_def(StringAttr)
    call = opt_prop_def(StringAttr)  # the nki API call traced here (nl.exp, nisa.activation): for profiles
    # nisa.NkiInstruction.depends_on, from penguin (see PenguinInst): dependency-analysis turns them into edges.
    tag = opt_prop_def(StringAttr)
    after = opt_prop_def(ArrayAttr[StringAttr])
    # Set by the backend: DMA queue, semaphore waits as flattened (sem, value) pairs, the semaphore signalled.
    queue = opt_prop_def(IntegerAttr[I64])
    waits = opt_prop_def(DenseArrayBase[I64])
    signal = opt_prop_def(IntegerAttr[I64])

    @property
    def ref_names(self) -> list[str]:
        return [r.data for r in self.properties["refs"].data]  # type: ignore[attr-defined]

    def ref(self, role: str) -> str | None:
        i = self.role_index(role)
        return None if i is None else self.refs.data[i].data

    # The accessors below read ``properties`` directly: the irdl property descriptor costs as much as the rest.
    @property
    def inst_id(self) -> int:
        return self.properties["id"].value.data  # type: ignore[attr-defined]

    @property
    def dep_list(self) -> list[tuple[str, int]]:
        """The edges as ``(kind, id)`` pairs (a fresh list: callers may change it)."""
        return list(dep_pairs_of(self.properties.get("deps")))  # type: ignore[arg-type]

    @property
    def dep_pairs(self) -> tuple[tuple[str, int], ...]:
        """The edges as ``(kind, id)`` pairs, shared with the attribute (read-only, no copy)."""
        return dep_pairs_of(self.properties.get("deps"))  # type: ignore[arg-type]

    @property
    def dep_ids(self) -> tuple[int, ...]:
        """The ids of the instructions this one depends on, in edge order (read-only, no copy)."""
        return dep_ids_of(self.properties.get("deps"))  # type: ignore[arg-type]

    @classmethod
    def has_trait(cls, trait: Any, *, value_if_unregistered: bool = True) -> bool:
        """``Operation.has_trait``, memoised per class: traits are fixed per op class, and the backend asks
        IsDma/IsControl of every instruction in every pass (~2.7 us each through the generic scan)."""
        key = (cls, trait)
        try:
            return _TRAIT_MEMO[key]
        except KeyError:
            got = _TRAIT_MEMO[key] = super().has_trait(trait, value_if_unregistered=value_if_unregistered)
            return got
        except TypeError:  # an unhashable trait instance
            return super().has_trait(trait, value_if_unregistered=value_if_unregistered)

    def _num_refs(self) -> int:
        return len(self.refs.data)

    def _print_ref(self, printer: Printer, index: int) -> None:
        printer.print_symbol_name(self.refs.data[index].data)

    @classmethod
    def _parse_ref(cls, parser: Parser) -> object:
        return parser.parse_symbol_name()

    @classmethod
    def _build(cls, refs: list[object], props: dict[str, Attribute], attrs: dict[str, Attribute]) -> Self:
        props["refs"] = ArrayAttr(refs)  # type: ignore[arg-type]
        return cls.create(properties=props, attributes=attrs)

    def verify_fields(self) -> None:
        check_member("engine", self.engine.data, BIR_ENGINES)
        super().verify_fields()


_TRAIT_MEMO: dict[tuple[type, Any], bool] = {}


def _bir_op(opname: str) -> type[BirInst]:
    cls = type(
        "Bir" + "".join(p.capitalize() for p in opname.split("_")) + "Op",
        (BirInst, fields.INSTRUCTION_FIELDS[opname]),
        {
            "name": f"bir.{opname}",
            "OPNAME": opname,
            "__annotations__": {"OPNAME": ClassVar[str]},
            "__doc__": f"BIR form of ``nisa.{opname}``.",
        },
    )
    return fast_verify(irdl_op_definition(cls))


INSTRUCTION_OPS: dict[str, type[BirInst]] = {n: _bir_op(n) for n in fields.INSTRUCTION_FIELDS}


# ------------------------------------------------------------------------------------------------------------------
# Kernel carriers (spec Stage 4a)
# ------------------------------------------------------------------------------------------------------------------


def str_map(d: dict[str, str]) -> DictionaryAttr:
    return DictionaryAttr({k: StringAttr(v) for k, v in d.items()})


def read_str_map(d: DictionaryAttr) -> dict[str, str]:
    return {k: v.data for k, v in d.data.items()}  # type: ignore[union-attr]


class CarrierOp(IRDLOperation):
    """Common shape of the kernel carriers: ``func_args``/``func_outs`` map kernel parameter -> caller memloc."""

    func_args = prop_def(DictionaryAttr)
    func_outs = prop_def(DictionaryAttr)
    grid = prop_def(IntegerAttr[I64])
    program_id = opt_prop_def(IntegerAttr[I64])
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict"

    @property
    def arg_map(self) -> dict[str, str]:
        return read_str_map(self.func_args)

    @property
    def out_map(self) -> dict[str, str]:
        return read_str_map(self.func_outs)

    def verify_(self) -> None:
        for d in (self.func_args, self.func_outs):
            for v in d.data.values():
                if not isinstance(v, StringAttr):
                    raise VerifyException("kernel argument maps must map names to memloc names")


@irdl_op_definition
class NkiKlirKernelOp(CarrierOp):
    """IT56 ``InstNKIKLIRKernel``: the frontend carrier of a traced kernel."""

    name = "bir.nki_klir_kernel"
    kernel_name = prop_def(StringAttr)
    kernel_format = prop_def(StringAttr)
    klir_binary = prop_def(StringAttr)
    sb_buf_shape = prop_def(DenseArrayBase[I64])
    psum_buf_shape = prop_def(DenseArrayBase[I64])
    nki_binary_version_identifier = prop_def(StringAttr)
    address_rotation_scope = opt_prop_def(StringAttr)

    def verify_(self) -> None:
        super().verify_()
        check_member("kernel format", self.kernel_format.data, ("bir", "klir"))


@irdl_op_definition
class NkiKernelOp(CarrierOp):
    """IT55 ``InstNKIKernel``: a call-site of the BIR function ``func``."""

    name = "bir.nki_kernel"
    func = prop_def(SymbolRefAttr)
    kernel_source = prop_def(StringAttr)

    def verify_(self) -> None:
        super().verify_()
        check_member("kernel source", self.kernel_source.data, KERNEL_SOURCES)


@irdl_op_definition
class BirKernelOp(CarrierOp):
    """IT54 ``InstBIRKernel``: a pre-compiled library kernel (already BIR), expanded by ``inline-bir-kernel``."""

    name = "bir.bir_kernel"
    kernel_name = prop_def(StringAttr)
    srcs_shape = prop_def(ArrayAttr[DenseArrayBase])
    dsts_shape = prop_def(ArrayAttr[DenseArrayBase])
    kernel_attrs = prop_def(StringAttr)
    auto_cast = opt_prop_def(StringAttr)
    quant_kernel = opt_prop_def(IntegerAttr)
    norm_type = opt_prop_def(StringAttr)
    fused_rmsnorm = opt_prop_def(IntegerAttr)
    is_causal = opt_prop_def(IntegerAttr)
    lnc_size = opt_prop_def(IntegerAttr[I64])
    output_layout = opt_prop_def(StringAttr)
    store_add = opt_prop_def(IntegerAttr)
    lower_bound = opt_prop_def(IntegerAttr)


CARRIERS = (NkiKlirKernelOp, NkiKernelOp, BirKernelOp)


def function_of(op: Operation) -> FunctionOp:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, FunctionOp):
        parent = parent.parent_op()
    if parent is None:
        raise VerifyException(f"'{op.name}' must be inside a bir.function")
    return parent


Bir = Dialect(
    "bir",
    [FunctionOp, MemLocOp, LoopOp, *INSTRUCTION_OPS.values(), *CARRIERS],
    [DepAttr],
)
