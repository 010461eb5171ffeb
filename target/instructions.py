"""The NKI instructions: one ``InstrSpec`` per instruction, the single declaration everything else derives from.

A declaration names the instruction's operand roles (as NKI's keywords name them), what each role may be (written
or read, a (P, 1) scalar tile, its memory spaces, the ISA slot it lowers to), its scalar fields and their kinds,
the engines that may run it (preferred first), the ISA opcode it lowers to and the fields that become immediates.
From it come the ``penguin.*`` and ``bir.*`` ops with their generic verification, the ISA lowering, engine
assignment and the frontend's operand checks. Shape rules beyond the generic ones, numerics and costs are separate
functions registered by name (see ARCHITECTURE.md, "Adding an instruction").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from nkic.target.isa import (
    DERIVED_ENGINES,
    FROM_INSTRUCTIONS,
    OPCODES,
    Imm,
    OpSpec,
    register_opcode,
    set_opcode_engines,
)
from nkic.target.machine import ENGINE_BY_NAME, ENGINE_NAMES, PE_ARRAY, TARGETS, Target
from nkic.target.vocab import ALU_OPS, HBM_MEMORIES, ON_CHIP

__all__ = ["Role", "Field", "InstrSpec", "INSTRUCTIONS", "declare", "encoding", "FIELD_KINDS", "legal_engines",
           "engine_problem"]

# Field kinds: how a field is stored in the IR and checked.
FIELD_KINDS = frozenset({"alu", "act", "reduce_cmd", "engine", "f32", "bool", "int", "axes", "pattern", "value",
                         "str"})  # str: a constant string (a StringAttr; in a NEFF an index into its string table)


@dataclass(frozen=True)
class Role:
    """One operand role. ``slot``: the ISA slot it lowers to (default: the same name)."""

    name: str
    write: bool = False
    required: bool = True
    scalar: bool = False  # a (P, 1) tile, P = dst's partitions
    memories: tuple[str, ...] = ON_CHIP
    slot: str | None = None
    # May take a dynamic access pattern (``.ap(scalar_offset=, vector_offset=)``): ``declare`` adds the optional
    # read role ``<name>_offset`` (slot ``<slot>_offset``) that carries the index tensor.
    indirect: bool = False
    # The ISA slot of ``<name>_offset`` when not ``<slot>_offset`` (an opcode with no spare slots of that name, e.g.
    # DMA_COMPUTE's index tensors sit in source slots the read-modify-write form leaves empty).
    offset_slot: str | None = None
    # May be a tensor indirection view (``.indirect(index)``, NeuronCore-v4): ``declare`` adds the optional read role
    # ``<name>_offset`` (slot ``<slot>_offset``, SBUF) for its index tile, as for ``indirect``.
    ti: bool = False

    @property
    def isa_slot(self) -> str:
        return self.slot or self.name

    @property
    def offset_role(self) -> str:
        """The role holding this role's dynamic index tensor."""
        return f"{self.name}_offset"


@dataclass(frozen=True)
class Field:
    """One scalar field. ``tensor_role``: the role that may carry this scalar instead (never both).

    ``imm``: the ISA immediate or flag it lowers to ("" = the same name, None = not lowered).
    """

    name: str
    kind: str
    required: bool = False
    tensor_role: str | None = None
    imm: str | None = ""

    def __post_init__(self) -> None:
        if self.kind not in FIELD_KINDS:
            raise ValueError(f"field '{self.name}': unknown kind '{self.kind}'")

    @property
    def isa_name(self) -> str | None:
        return self.name if self.imm == "" else self.imm


@dataclass(frozen=True)
class InstrSpec:
    """One NKI instruction (``nisa.<nki_name>``), stored as ``penguin.<name>`` / ``bir.<name>``."""

    name: str
    opcode: str
    roles: tuple[Role, ...]
    # The engines the NKI ISA reference lets run it (the first sentence of its nisa docstring: "... using Vector
    # Engine or GpSimd Engine"), preferred first, over every generation; ``engine_since`` narrows them per
    # generation. assign-engines, the frontend's ``engine=`` check, the ISA ops and the ISA verifier all derive
    # from this (see ``legal_engines``).
    engines: tuple[str, ...]
    doc: str
    fields: tuple[Field, ...] = ()
    elementwise: tuple[str, ...] = ()  # roles with dst's partitions and elements per partition
    # "dma", "accumulates", "reads_dst", "control", "first_engine", "copy", "transpose", "meets"
    # (dialects/traits.py)
    traits: frozenset[str] = field(default_factory=frozenset)
    constants: Mapping[str, Any] = field(default_factory=dict)  # ISA fields fixed by the instruction
    # ISA fields computed from the instruction's field values (e.g. tensor_reduce's axes -> num_reduced_dims)
    derive: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    # A shape rule over (partitions, elements per partition) by role, checked at every level (nisa call, penguin,
    # bir, ISA): returns what is wrong, or None.
    dims_rule: Callable[[Mapping[str, tuple[int, int]]], str | None] | None = None
    nki_name: str = ""  # the nisa function, when it is not named like the instruction
    since: int = 2  # the first NeuronCore generation (nc_version) that has it
    # State kept inside the executing engine (beyond memory) that the instruction reads / writes, e.g. "rng" (the
    # PRNG state): dependency-analysis orders the readers and writers of one engine's state like memory accesses.
    reads_state: frozenset[str] = frozenset()
    writes_state: frozenset[str] = frozenset()
    # The named states in CORE_STATES belong to the whole core rather than to the executing engine.
    # Engines of ``engines`` that the reference allows only from a later generation: engine -> first nc_version.
    engine_since: Mapping[str, int] = field(default_factory=dict)
    # The ALU ops an engine may compute for this instruction (engine -> ops; an engine not named: every op), asked
    # of every field of kind "alu" (absent or bypass always passes).
    engine_ops: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def role_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.roles)

    @property
    def required_roles(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.roles if r.required)

    @property
    def write_roles(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.roles if r.write)

    @property
    def scalar_roles(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.roles if r.scalar)

    def role(self, name: str) -> Role:
        return next(r for r in self.roles if r.name == name)

    @property
    def isa(self) -> OpSpec:
        return OPCODES[self.opcode]

    @property
    def is_dma(self) -> bool:
        return "dma" in self.traits

    def engines_on(self, nc_version: int | None) -> tuple[str, ...]:
        """The declared engines on generation ``nc_version`` (None: on some generation), preferred first."""
        if nc_version is None:
            return self.engines
        return tuple(e for e in self.engines if max(self.since, self.engine_since.get(e, 0)) <= nc_version)


INSTRUCTIONS: dict[str, InstrSpec] = {}


def dims_problem(spec: InstrSpec, dims: Mapping[str, tuple[int, int]]) -> str | None:
    """What ``spec.dims_rule`` says of these operand dims (roles that are absent are left out)."""
    return None if spec.dims_rule is None else spec.dims_rule(dims)


# nc_matmul's PE tiling mode: the first PE row and column and the tile's rows and columns (absent: the whole array).
MATMUL_TILE_FIELDS = tuple(Field(n, "int") for n in ("tile_row", "tile_col", "tile_rows", "tile_cols"))


def _transpose_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    if d["dst"] != d["data"][::-1]:
        return f"transpose of {d['data']} (partitions, free) writes {d['data'][::-1]}, not {d['dst']}"
    return None


def _bn_stats_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    if d["dst"] != (d["data"][0], 6):
        return f"bn_stats of {d['data']} (partitions, free) writes {(d['data'][0], 6)}, not {d['dst']}"
    return None


def _bn_aggr_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    (p, f), dst = d["data"], d["dst"]
    if f % 3 or dst != (p, 2):
        return f"bn_aggr reads (count, mean, variance * count) triples of {(p, f)} into {(p, 2)}, not {dst}"
    return None


def _partition_reduce_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    if d["dst"] != (1, d["data"][1]):
        return f"tensor_partition_reduce of {d['data']} writes {(1, d['data'][1])}, not {d['dst']}"
    return None


def _seed_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    if d["src_seeds"] != (1, 1):
        return f"set_rng_seed reads one 32-bit seed: src_seeds must be [1, 1], got {d['src_seeds']} (partitions, free)"
    return None


# activate2's tensor-scalar stage: the (op0, op1) pairs ScalarE supports, and the reductions into its registers.
ACTIVATE2_STAGES: frozenset[tuple[str, str]] = frozenset({
    ("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"), ("add", "bypass"), ("subtract", "bypass"),
    ("bypass", "bypass"),
})  # fmt: skip
ACTIVATE2_REDUCE_OPS: tuple[str, ...] = ("add", "maximum", "minimum", "abs_max", "abs_min")
_ACCUMULATING_CMDS = ("reset", "reduce", "reset_reduce")


MATMUL_TILE_SIZES = (32, 64, 128)  # row / column tile sizes of the PE array (32 from gen3, checked by nisa)


def matmul_tile_problem(get: Callable[[str], Any], k: int, m: int) -> str | None:
    """What is wrong with a matmul's PE tiling fields (``get(name)``, None when absent) for a [K, M] stationary
    tile: each size one of MATMUL_TILE_SIZES, each start a multiple of its size inside the array, the stationary tile
    within the tile, and no column tiling in double_row mode."""
    rows, cols = get("tile_rows") or PE_ARRAY, get("tile_cols") or PE_ARRAY
    row, col = get("tile_row") or 0, get("tile_col") or 0
    if rows not in MATMUL_TILE_SIZES or cols not in MATMUL_TILE_SIZES:
        return f"matmul tile_size ({rows}, {cols}) must be made of {MATMUL_TILE_SIZES}"
    if row % rows or col % cols or not (0 <= row < PE_ARRAY and 0 <= col < PE_ARRAY):
        return f"matmul tile_position ({row}, {col}) must be multiples of tile_size ({rows}, {cols}) inside the array"
    if k > rows or m > cols:
        return f"matmul stationary [K={k}, M={m}] exceeds its PE tile of {rows} rows x {cols} columns"
    if get("double_row") and cols < PE_ARRAY:
        return "matmul double_row mode cannot be combined with column tiling"
    return None


def activate2_problem(get: Callable[[str], Any]) -> str | None:
    """What is wrong with activate2's fields (``get(name)``, None when absent), checked at every level."""
    op0, op1 = get("op0") or "bypass", get("op1") or "bypass"
    if (op0, op1) not in ACTIVATE2_STAGES:
        pairs = ", ".join(f"({a}, {b})" for a, b in sorted(ACTIVATE2_STAGES))
        return f"activate2: (op0, op1) = ({op0}, {op1}) is not one of {pairs}"
    for k, op in ((0, op0), (1, op1)):
        if get(f"reverse{k}") and op == "bypass":
            return f"activate2: reverse{k} needs op{k} to be set (it is bypass)"
    cmd, reduce = get("reduce_cmd") or "idle", get("reduce_op")
    if reduce is not None and reduce != "bypass" and reduce not in ACTIVATE2_REDUCE_OPS:
        return f"activate2: reduce_op must be one of {', '.join(ACTIVATE2_REDUCE_OPS)}, got {reduce}"
    if cmd in _ACCUMULATING_CMDS and reduce in (None, "bypass"):
        return f"activate2: reduce_cmd={cmd} needs a reduce_op"
    if cmd not in ("idle", *_ACCUMULATING_CMDS):
        return f"activate2: reduce_cmd must be idle, reset, reduce or reset_reduce, got {cmd}"
    return None


# An opcode's slots given as FROM_ROLES: its one instruction's roles say them (in role order), and which are required,
# written, (P, 1) scalars and of dst's shape (the instruction's elementwise roles); the OpSpec adds only what the
# encoding adds (code, immediates, flags). ``declare`` fills them in.
FROM_ROLES: tuple[str, ...] = ("<the instruction's roles>",)
# The instruction traits its opcode has too: the scheduler, the NEFF writer and the simulator ask them of an Instr.
ISA_TRAITS = frozenset({"dma", "control", "meets"})


def encoding(code: int, doc: str, imms: tuple[Imm, ...] = (), flags: tuple[str, ...] = (),
             derived_flags: frozenset[str] = frozenset()) -> OpSpec:  # fmt: skip
    """The ISA form of an instruction with an opcode of its own, as only the encoding adds it: the code, the
    immediates, the flag order and a one-line formula. ``declare`` fills in the rest from the instruction: the
    mnemonic (its ``opcode``), the engines (its own; every stream's for a control instruction, which each stream
    holds a copy of), the slots from its roles (FROM_ROLES) and its ISA_TRAITS."""
    return OpSpec("", code, FROM_INSTRUCTIONS, FROM_ROLES, doc, imms=imms, flags=flags, derived_flags=derived_flags)


def _from_roles(spec: InstrSpec, opcode: OpSpec) -> OpSpec:
    if opcode.mnemonic not in ("", spec.opcode):
        raise ValueError(f"instruction '{spec.name}' lowers to {spec.opcode}, not {opcode.mnemonic}")
    engines = ENGINE_NAMES if "control" in spec.traits else opcode.engines
    return replace(opcode, mnemonic=spec.opcode, engines=engines, slots=tuple(r.isa_slot for r in spec.roles),
                   required=tuple(r.isa_slot for r in spec.roles if r.required),
                   writes=tuple(r.isa_slot for r in spec.roles if r.write),
                   scalar_slots=tuple(r.isa_slot for r in spec.roles if r.scalar),
                   same_shape=tuple(spec.role(n).isa_slot for n in spec.elementwise),
                   traits=opcode.traits | (spec.traits & ISA_TRAITS))  # fmt: skip


def declare(spec: InstrSpec, opcode: OpSpec | None = None) -> InstrSpec:
    """Register an instruction (and, for an instruction with an ISA form of its own, that opcode)."""
    if spec.name in INSTRUCTIONS:
        raise ValueError(f"instruction '{spec.name}' is declared twice")
    spec = _with_offset_roles(spec)
    if opcode is not None:
        if opcode.slots is FROM_ROLES:
            opcode = _from_roles(spec, opcode)
        register_opcode(opcode)
    isa = OPCODES.get(spec.opcode)
    if isa is None:
        raise ValueError(f"instruction '{spec.name}' lowers to undeclared opcode {spec.opcode}")
    for r in spec.roles:
        if r.isa_slot not in isa.slots:
            raise ValueError(f"instruction '{spec.name}': role '{r.name}' maps to no {spec.opcode} slot")
    unknown = set(spec.engines) - set(ENGINE_NAMES) or set(spec.engine_since) - set(spec.engines)
    if unknown or set(spec.engine_ops) - set(spec.engines):
        raise ValueError(f"instruction '{spec.name}': engines {sorted(unknown or spec.engine_ops)} are not its own")
    INSTRUCTIONS[spec.name] = spec
    if spec.opcode in DERIVED_ENGINES:  # the opcode runs where the instructions lowering to it may run
        union = [e for s in INSTRUCTIONS.values() if s.opcode == spec.opcode for e in s.engines]
        set_opcode_engines(spec.opcode, tuple(dict.fromkeys(union)))
    return spec


def available_on(instruction: str, target: Target) -> bool:
    """Whether generation ``target`` has ``instruction`` (its declaration says since which generation)."""
    spec = INSTRUCTIONS.get(instruction)
    return spec is not None and spec.since <= target.nc_version


def first_generation(instruction: str) -> str | None:
    """The first generation that has ``instruction`` (for error messages), or None."""
    return next((t.name for t in TARGETS.values() if available_on(instruction, t)), None)


def legal_engines(spec: InstrSpec, nc_version: int | None = None, memories: Mapping[str, str] | None = None,
                  fields: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The engines that may run ``spec`` on generation ``nc_version`` (None: any generation) with its operands in
    ``memories`` (role -> memory; absent roles are not asked) and these field values, preferred first.

    Control instructions are not placed (every stream holds a copy), so only the declaration is asked of them."""
    return tuple(e for e in spec.engines_on(nc_version) if engine_problem(spec, e, nc_version, memories, fields)
                 is None)  # fmt: skip


def engine_problem(spec: InstrSpec, engine: str, nc_version: int | None = None,
                   memories: Mapping[str, str] | None = None, fields: Mapping[str, Any] | None = None) -> str | None:
    """Why ``engine`` may not run ``spec`` here (see ``legal_engines``), or None. The one statement of engine
    legality: asked by assign-engines, the frontend's ``engine=`` check and the ISA verifiers."""
    name = f"nisa.{spec.nki_name or spec.name}"
    if engine not in spec.engines:
        return f"{name} runs on {', '.join(spec.engines)} (the NKI ISA reference), not {engine}"
    if nc_version is not None and engine not in spec.engines_on(nc_version):
        since = max(spec.since, spec.engine_since.get(engine, 0))
        return f"{name} runs on {engine} only from NeuronCore-v{since}, not on NeuronCore-v{nc_version}"
    eng = ENGINE_BY_NAME[engine]
    if "control" not in spec.traits:
        writes = set(spec.write_roles)
        for role, mem in (memories or {}).items():
            if not eng.reaches(mem, role in writes):
                how = "write" if role in writes else "read"
                return f"{name}: {eng.label} cannot {how} {mem.upper()} ('{role}')"
    allowed = spec.engine_ops.get(engine)
    if allowed is not None:
        for f in spec.fields:
            op = (fields or {}).get(f.name)
            if f.kind == "alu" and op not in (None, "bypass") and op not in allowed:
                return f"{name}: {eng.label} does not compute {f.name}={op} (it computes {', '.join(sorted(allowed))})"
    return None


def _with_offset_roles(spec: InstrSpec) -> InstrSpec:
    """Every ``indirect`` or ``ti`` role gets its index-tensor role, after the declared ones (canonical role order).
    A tensor indirection index is "SBUF tensor containing free-dimension offsets" (nl NkiTensor.indirect)."""
    extra = tuple(Role(r.offset_role, required=False, memories=INDEX_MEMORIES if r.indirect else ("sbuf",),
                       slot=r.offset_slot or f"{r.isa_slot}_offset")
                  for r in spec.roles if r.indirect or r.ti)  # fmt: skip
    return replace(spec, roles=spec.roles + extra) if extra else spec


# Where a dynamic offset's index tensor may live.
INDEX_MEMORIES = ("sbuf", *HBM_MEMORIES)
_DST = Role("dst", write=True)
_DST_TI = Role("dst", write=True, ti=True)  # a dst that may scatter through a tensor indirection view
_ANY_MEM = ("sbuf", *HBM_MEMORIES)
_ENGINE = Field("engine", "engine", imm=None)


_OOB_SKIP = Field("oob_skip", "bool")  # nisa.oob_mode.skip: out-of-bounds dynamic rows are not transferred
declare(InstrSpec(
    "dma_copy", "DMA_COPY",
    (Role("dst", write=True, memories=_ANY_MEM, indirect=True), Role("src", memories=_ANY_MEM, indirect=True)),
    ("sp",), "dst = src between HBM and SBUF (element counts equal, dtype cast through fp32)",
    fields=(_OOB_SKIP,), traits=frozenset({"dma", "copy"}),
))
declare(InstrSpec(
    "dma_transpose", "DMA_COPY",
    (Role("dst", write=True, memories=("sbuf",)), Role("src", memories=_ANY_MEM, indirect=True)),
    ("sp",), "dst = src with its first and last dims swapped, by DMA",
    fields=(Field("axes", "axes", imm=None), _OOB_SKIP), traits=frozenset({"dma", "transpose"}),
    constants={"transpose": True},
))
declare(InstrSpec(
    "matmul", "MATMUL",
    (Role("dst", write=True, memories=("psum",), ti=True), Role("stationary", memories=("sbuf",), ti=True),
     Role("moving", memories=("sbuf",), ti=True)),
    ("pe",), "dst[M, N] (+)= stationary[K, M]^T @ moving[K, N]",
    fields=(Field("accumulate", "bool"), Field("is_transpose", "bool"), Field("double_row", "bool"),
            Field("is_stationary_onezero", "bool"), Field("is_moving_onezero", "bool"), *MATMUL_TILE_FIELDS),
    traits=frozenset({"accumulates"}), nki_name="nc_matmul",
),
    encoding(0x02, "dst[M, N] (+)= stationary[K, M]^T @ "
             "moving[K, N] into PSUM",
             imms=tuple(Imm(n, "u32", default=0, sparse=True) for n in ("tile_row", "tile_col", "tile_rows", "tile_cols")),
             flags=("accumulate", "is_transpose", "double_row", "is_stationary_onezero", "is_moving_onezero")))
# "using Tensor or Vector Engine". Not by load: "Tensor Engine can handle an input tile of shape [128, 128] or
# smaller, while Vector Engine can handle shape [32, 32] or smaller", and TensorE writes only PSUM: assign-engines
# takes the first engine whose memories fit (trait "first_engine").
declare(InstrSpec(
    "transpose", "TRANSPOSE", (_DST, Role("data", slot="src")), ("pe", "dve"), "dst[F, P] = data[P, F]",
    fields=(_ENGINE,), nki_name="nc_transpose", dims_rule=_transpose_dims,
    traits=frozenset({"first_engine", "transpose"}),
),
    encoding(0x03, "dst[F, P] = src[P, F]"))
# "using Vector, Scalar or GpSimd Engine", but "On NeuronCore v2, tensor_copy is not supported on the Scalar Engine."
declare(InstrSpec(
    "tensor_copy", "TENSOR_COPY", (_DST_TI, Role("src", ti=True)), ("dve", "act", "pool"),
    "dst = src (with a dtype cast)",
    fields=(_ENGINE,), elementwise=("src",), engine_since={"act": 3}, traits=frozenset({"copy"}),
),
    encoding(0x08, "dst = src (with dtype conversion)"))
# "using Vector Engine or GpSimd Engine"; of the ops, "nl.power. (Which runs on the GpSimd engine.)"
declare(InstrSpec(
    "tensor_tensor", "TENSOR_TENSOR", (_DST_TI, Role("data1", slot="in0", ti=True), Role("data2", slot="in1")),
    ("dve", "pool"), "dst = data1 <op> data2", fields=(Field("op", "alu", required=True), _ENGINE),
    elementwise=("data1", "data2"), engine_ops={"dve": frozenset(ALU_OPS.names) - {"power"}},
),
    encoding(0x04, "dst = in0 <op> in1",
             imms=(Imm("op", "alu"),)))
# "using Vector or Scalar or GpSimd Engine", but `engine`: "nki.isa.engine.gpsimd (only allowed for rsqrt)"; and
# "each engine supports limited arithmetic operators": ScalarE's stages are the ones below.
declare(InstrSpec(
    "tensor_scalar", "TENSOR_SCALAR",
    (_DST_TI, Role("data", slot="src", ti=True), Role("operand0", required=False, scalar=True),
     Role("operand1", required=False, scalar=True)),
    ("dve", "act", "pool"), "dst = (data <op0> operand0) <op1> operand1",
    fields=(Field("op0", "alu", required=True), Field("operand0", "f32", tensor_role="operand0", required=True),
            Field("reverse0", "bool"), Field("op1", "alu"), Field("operand1", "f32", tensor_role="operand1"),
            Field("reverse1", "bool"), _ENGINE),
    elementwise=("data",),
    engine_ops={"act": frozenset({"multiply", "add", "subtract"}), "pool": frozenset({"rsqrt"})},
),
    encoding(0x05, "dst = (src <op0> operand0) <op1> operand1",
             imms=(Imm("op0", "alu"), Imm("operand0", "f32", tensor_role="operand0", required=True), Imm("op1", "alu", optional=True),
                   Imm("operand1", "f32", tensor_role="operand1")),
             flags=("reverse0", "reverse1", "has_op1"),
             derived_flags=frozenset({"has_op1"})))
declare(InstrSpec(
    "scalar_tensor_tensor", "SCALAR_TENSOR_TENSOR",
    (_DST, Role("data"), Role("operand0", required=False, scalar=True), Role("operand1")),
    ("dve",), "dst = (data <op0> operand0) <op1> operand1",
    fields=(Field("op0", "alu", required=True), Field("operand0", "f32", tensor_role="operand0", required=True),
            Field("op1", "alu", required=True), Field("reverse0", "bool"), Field("reverse1", "bool")),
    elementwise=("data", "operand1"),
),
    encoding(0x0E, "dst = (data <op0> operand0) <op1> operand1",
             imms=(Imm("op0", "alu"), Imm("operand0", "f32", tensor_role="operand0", required=True), Imm("op1", "alu")),
             flags=("reverse0", "reverse1")))
declare(InstrSpec(
    "tensor_reduce", "TENSOR_REDUCE", (_DST_TI, Role("data", slot="src", ti=True)), ("dve",),
    "dst = (-)reduce(op) of data over its trailing free axes `axes`",
    fields=(Field("op", "alu", required=True), Field("axes", "axes", required=True, imm=None), Field("negate", "bool"),
            Field("keepdims", "bool", imm=None)),
    derive=lambda f: {"num_reduced_dims": len(f["axes"])},
),
    encoding(0x06, "dst = (-)reduce(op) over the trailing "
             "`num_reduced_dims` free dims of src (0 = all)",
             imms=(Imm("op", "alu"), Imm("num_reduced_dims", "u32", default=0)),
             flags=("negate",)))
declare(InstrSpec(
    "tensor_scalar_reduce", "TENSOR_SCALAR_REDUCE",
    (_DST_TI, Role("data", slot="src", ti=True), Role("operand0", required=False, scalar=True),
     Role("reduce_res", write=True, scalar=True)),
    ("dve",), "dst = data <op0> operand0; reduce_res = (-)reduce(reduce_op, dst)",
    fields=(Field("op0", "alu", required=True), Field("operand0", "f32", tensor_role="operand0", required=True),
            Field("reduce_op", "alu", required=True), Field("reverse0", "bool"),
            Field("reduce_res_negate", "bool", imm="negate")),
    elementwise=("data",),
))
declare(InstrSpec(
    "activation", "ACTIVATE",
    # "dst and data support tensor indirection": only data here, ACTIVATE has one slot left of MAX_SLOTS for an
    # index (frontend/recorders/record.py refuses an indirect dst of activation, as not implemented).
    (_DST, Role("data", slot="src", ti=True), Role("bias", required=False, scalar=True),
     Role("scale", required=False, scalar=True), Role("reduce_res", write=True, required=False, scalar=True)),
    ("act",), "dst = func(data * scale + bias), optionally row-reduced into reduce_res",
    fields=(Field("func", "act", required=True), Field("bias", "f32", tensor_role="bias"),
            Field("scale", "f32", tensor_role="scale"), Field("reduce_op", "alu"), Field("reduce_cmd", "reduce_cmd")),
    elementwise=("data",),
),
    encoding(0x07, "dst = func(src * scale + bias); reduce_res = the reduce registers after `reduce_cmd`",
             imms=(Imm("func", "act"), Imm("scale", "f32", default=1.0, tensor_role="scale"),
                   Imm("bias", "f32", default=0.0, tensor_role="bias"), Imm("reduce_cmd", "reduce_cmd", default="idle"),
                   Imm("reduce_op", "alu", default="bypass"))))
declare(InstrSpec(
    "memset", "MEMSET", (_DST,), ("dve", "pool"), "dst = value",
    fields=(Field("value", "value", required=True), _ENGINE),
),
    encoding(0x09, "dst = value",
             imms=(Imm("value", "value"),),
             flags=("int_value",),
             derived_flags=frozenset({"int_value"})))
declare(InstrSpec(
    "iota", "IOTA", (Role("dst", write=True, memories=("sbuf",)),), ("pool",),
    "dst[p, i...] = pattern.offset + p * channel_multiplier + sum(step * i)",
    fields=(Field("pattern", "pattern", required=True), Field("channel_multiplier", "int", imm=None)),
))
declare(InstrSpec(
    "affine_select", "AFFINE_SELECT",
    (Role("dst", write=True, memories=("sbuf",)), Role("on_true", memories=("sbuf",))), ("pool",),
    "dst = on_true if (pattern.offset + p * channel_multiplier + sum(step * i)) <cmp_op> 0 else on_false_value",
    fields=(Field("pattern", "pattern", required=True), Field("channel_multiplier", "int", imm=None),
            Field("cmp_op", "alu", required=True), Field("on_false_value", "f32", required=True)),
    elementwise=("on_true",),
))
declare(InstrSpec(
    "reciprocal", "RECIPROCAL", (_DST, Role("data", slot="src")), ("dve",), "dst = 1 / data",
    elementwise=("data",),
),
    encoding(0x0C, "dst = 1 / src"))
declare(
    InstrSpec(
        "range_select", "RANGE_SELECT",
        (_DST, Role("on_true"), Role("bound0", scalar=True), Role("bound1", scalar=True),
         Role("reduce_res", write=True, required=False, scalar=True)),
        ("dve",), "dst = on_true where comp_op0(range_start + i, bound0) and comp_op1(range_start + i, bound1) "
        "(i the free index), else on_false_value; reduce_res = the reduce registers after reduce_cmd",
        fields=(Field("comp_op0", "alu", required=True), Field("comp_op1", "alu", required=True),
                Field("on_false_value", "f32", required=True), Field("range_start", "int"),
                Field("reduce_op", "alu"), Field("reduce_cmd", "reduce_cmd")),
        elementwise=("on_true",), since=3,
    ),
    encoding(0x10, "dst = on_true where both bound comparisons of range_start + i hold, else on_false_value",
             imms=(Imm("comp_op0", "alu"), Imm("comp_op1", "alu"), Imm("on_false_value", "f32"),
                   Imm("range_start", "i32", default=0), Imm("reduce_cmd", "reduce_cmd", default="idle"),
                   Imm("reduce_op", "alu", default="bypass"))),
)
declare(
    InstrSpec(
        "tensor_tensor_scan", "TENSOR_TENSOR_SCAN",
        (_DST, Role("data0", slot="in0"), Role("data1", slot="in1"), Role("initial", required=False, scalar=True)),
        ("dve",), "dst[:, i] = (data0[:, i] <op0> dst[:, i-1]) <op1> data1[:, i], dst[:, -1] = initial",
        fields=(Field("op0", "alu", required=True), Field("op1", "alu", required=True),
                Field("initial", "f32", tensor_role="initial", required=True), Field("reverse0", "bool"),
                Field("reverse1", "bool")),
        elementwise=("data0", "data1"),
    ),
    encoding(0x11, "a running op0/op1 recurrence along the free dim, per partition, in fp32",
             imms=(Imm("op0", "alu"), Imm("op1", "alu"), Imm("initial", "f32", tensor_role="initial", required=True)),
             flags=("reverse0", "reverse1")),
)
declare(
    InstrSpec(
        "tensor_copy_predicated", "TENSOR_COPY_PREDICATED",
        (_DST_TI, Role("src", required=False), Role("predicate", ti=True)), ("dve",),
        "dst = src (a tile or a number) where predicate != 0 (== 0 with reverse_pred); elsewhere dst keeps its value",
        fields=(Field("src", "f32", tensor_role="src", required=True), Field("reverse_pred", "bool")),
        elementwise=("src", "predicate"), traits=frozenset({"reads_dst"}),
    ),
    encoding(0x12, "dst = src where the predicate holds, unchanged elsewhere",
             imms=(Imm("src", "f32", tensor_role="src", required=True),),
             flags=("reverse_pred",)),
)
declare(
    InstrSpec(
        "bn_stats", "BN_STATS", (_DST, Role("data", slot="src")), ("dve",),
        "dst[p] = (count, mean, variance * count) of data[p]'s even elements, then of its odd ones",
        dims_rule=_bn_stats_dims,
    ),
    encoding(0x13, "per-partition statistics of even and odd elements"),
)
declare(
    InstrSpec(
        "bn_aggr", "BN_AGGR", (_DST, Role("data", slot="src")), ("dve",),
        "dst[p] = (mean, variance) of the (count, mean, variance * count) triples of data[p]",
        dims_rule=_bn_aggr_dims,
    ),
    encoding(0x14, "combine bn_stats triples into a mean and a variance"),
)
declare(
    InstrSpec(
        "exponential", "EXPONENTIAL",
        # "dst and src support tensor indirection": only src here, EXPONENTIAL has one slot left of MAX_SLOTS for
        # an index (frontend/recorders/record.py refuses an indirect dst, as not implemented).
        (_DST, Role("src", ti=True), Role("max_value", required=False, scalar=True),
         Role("reduce_res", write=True, required=False, scalar=True),
         Role("reduce_init", required=False, scalar=True)),
        ("dve",), "dst = exp(src - max_value); reduce_res = the VectorE sum registers after reduce_cmd",
        fields=(Field("max_value", "f32", tensor_role="max_value"), Field("reduce_cmd", "reduce_cmd"),
                Field("reduce_init", "f32", tensor_role="reduce_init")),
        elementwise=("src",), since=4,
    ),
    encoding(0x15, "dst = exp(src - max_value), summed into the VectorE registers per reduce_cmd",
             imms=(Imm("max_value", "f32", default=0.0, tensor_role="max_value"),
                   Imm("reduce_cmd", "reduce_cmd", default="idle"),
                   Imm("reduce_init", "f32", default=0.0, tensor_role="reduce_init"))),
)
declare(
    InstrSpec(
        "select_reduce", "SELECT_REDUCE",
        (_DST, Role("predicate"), Role("on_true"), Role("on_false", required=False, scalar=True),
         Role("reduce_res", write=True, required=False, scalar=True)),
        ("dve",), "dst = on_true where predicate != 0 (== 0 with reverse_pred), else on_false; reduce_res = the "
        "VectorE registers after reduce_cmd with reduce_op",
        fields=(Field("on_false", "f32", tensor_role="on_false", required=True), Field("reduce_cmd", "reduce_cmd"),
                Field("reduce_op", "alu"), Field("reverse_pred", "bool")),
        elementwise=("predicate", "on_true"),
    ),
    encoding(0x16, "dst = predicate ? on_true : on_false, max-reduced into the VectorE registers",
             imms=(Imm("on_false", "f32", tensor_role="on_false", required=True),
                   Imm("reduce_cmd", "reduce_cmd", default="idle"), Imm("reduce_op", "alu", default="bypass")),
             flags=("reverse_pred",)),
)
declare(
    InstrSpec(
        "tensor_scalar_cumulative", "TENSOR_SCALAR_CUMULATIVE",
        (_DST_TI, Role("src", ti=True), Role("imm0", required=False, scalar=True),
         Role("imm1", required=False, scalar=True)),
        ("dve",), "reg = op1(op0(src[i], imm0), reg), dst[i] = reg along the free dim; reg starts per reduce_cmd "
        "(op1's identity, the VectorE register, or imm1)",
        fields=(Field("op0", "alu", required=True), Field("op1", "alu", required=True),
                Field("imm0", "f32", tensor_role="imm0", required=True), Field("imm1", "f32", tensor_role="imm1"),
                Field("reduce_cmd", "reduce_cmd")),
        elementwise=("src",),
    ),
    encoding(0x17, "a running op1 over op0(src, imm0) along the free dim, in the VectorE registers",
             imms=(Imm("op0", "alu"), Imm("op1", "alu"), Imm("imm0", "f32", tensor_role="imm0", required=True),
                   Imm("imm1", "f32", tensor_role="imm1"), Imm("reduce_cmd", "reduce_cmd", default="idle"))),
)
declare(
    InstrSpec(
        "tensor_partition_reduce", "TENSOR_PARTITION_REDUCE", (Role("dst", write=True), Role("data", slot="src")),
        ("pool",), "dst[0, f] = reduce(op) of data[p, f] over the partitions p",
        fields=(Field("op", "alu", required=True),), dims_rule=_partition_reduce_dims,
    ),
    encoding(0x18, "a reduction across partitions into one",
             imms=(Imm("op", "alu"),)),
)


# ---------------------------------------------------------------------------------------------------------------
# Registers and control flow. Each engine sequencer has NUM_REGISTERS 32-bit registers; register 0 reads as zero
# (as RISC-V's x0), so every register source is "register + immediate" and a move of a constant is r0 + value.
# These are "control" instructions: every engine of the core executes them together, at a barrier (all engines
# idle, every DMA landed), which is what lets a loop's trip count come from data. See ARCHITECTURE.md, "Runtime
# loops".
# ---------------------------------------------------------------------------------------------------------------
NUM_REGISTERS = 64
_CONTROL = frozenset({"control"})
_REG_MEMS = ("sbuf", *HBM_MEMORIES)


def _single_element(d: Mapping[str, tuple[int, int]]) -> str | None:
    bad = {r: pf for r, pf in d.items() if pf != (1, 1)}
    return f"a register moves one 32-bit element, not {bad}" if bad else None


declare(
    InstrSpec(
        "register_alu", "REG_ALU", (), ("sp",),
        "r[dst_reg] = (r[src0_reg] + imm0) <op> (r[src1_reg] + imm1), r[0] = 0 (a move is op = bypass)",
        fields=(Field("dst_reg", "int", required=True), Field("op", "alu", required=True),
                Field("src0_reg", "int"), Field("imm0", "int"), Field("src1_reg", "int"), Field("imm1", "int")),
        traits=_CONTROL, nki_name="register_move",
    ),
    encoding(0x40, "r[dst_reg] = (r[src0_reg] + imm0) <op> (r[src1_reg] + imm1)",
             imms=(Imm("dst_reg", "u32"), Imm("op", "alu"), Imm("src0_reg", "u32", default=0),
                   Imm("imm0", "i32", default=0), Imm("src1_reg", "u32", default=0), Imm("imm1", "i32", default=0))),
)
declare(
    InstrSpec(
        "register_load", "REG_LOAD", (Role("src", memories=_REG_MEMS),), ("sp",),
        "r[dst_reg] = src, one element read as a 32-bit integer",
        fields=(Field("dst_reg", "int", required=True),), traits=_CONTROL, dims_rule=_single_element,
    ),
    encoding(0x41, "r[dst_reg] = the one element of src, as an int32",
             imms=(Imm("dst_reg", "u32"),)),
)
declare(
    InstrSpec(
        "register_store", "REG_STORE", (Role("dst", write=True, memories=_REG_MEMS),), ("sp",),
        "dst = r[src_reg], one element converted to dst's dtype",
        fields=(Field("src_reg", "int", required=True),), traits=_CONTROL, dims_rule=_single_element,
    ),
    encoding(0x42, "dst's one element = r[src_reg]",
             imms=(Imm("src_reg", "u32"),)),
)
declare(
    InstrSpec(
        "loop_begin", "LOOP_BEGIN", (), ("sp",),
        "if r[cond_reg] == 0, continue after the matching loop_end (a while loop's entry test)",
        fields=(Field("cond_reg", "int", required=True),), traits=_CONTROL,
    ),
    encoding(0x43, "skip to after the matching LOOP_END if r[cond_reg] == 0",
             imms=(Imm("cond_reg", "u32"),)),
)
declare(
    InstrSpec(
        "loop_end", "LOOP_END", (), ("sp",),
        "if r[cond_reg] != 0, continue after the matching loop_begin (the back edge)",
        fields=(Field("cond_reg", "int", required=True),), traits=_CONTROL,
    ),
    encoding(0x44, "jump back to after the matching LOOP_BEGIN if r[cond_reg] != 0",
             imms=(Imm("cond_reg", "u32"),)),
)

# The counted loop of a rolled ``affine_range`` (ARCHITECTURE.md "Rolled loops"): the induction register counts
# 0, step, 2·step, ... while below the immediate bound; one barrier per iteration (the end), no condition register.
declare(
    InstrSpec(
        "counted_loop_begin", "COUNTED_LOOP_BEGIN", (), ("sp",),
        "r[iv_reg] = 0; if bound <= 0, continue after the matching counted_loop_end",
        fields=(Field("iv_reg", "int", required=True), Field("bound", "int", required=True)), traits=_CONTROL,
    ),
    encoding(0x50, "r[iv_reg] = 0; skip to after the matching COUNTED_LOOP_END if bound <= 0",
             imms=(Imm("iv_reg", "u32"), Imm("bound", "i32"))),
)
declare(
    InstrSpec(
        "counted_loop_end", "COUNTED_LOOP_END", (), ("sp",),
        "r[iv_reg] += step; if r[iv_reg] < bound, continue after the matching counted_loop_begin",
        fields=(Field("iv_reg", "int", required=True), Field("step", "int", required=True),
                Field("bound", "int", required=True)),
        traits=_CONTROL,
    ),
    encoding(0x51, "r[iv_reg] += step; jump back to after the matching COUNTED_LOOP_BEGIN if r[iv_reg] < bound",
             imms=(Imm("iv_reg", "u32"), Imm("step", "i32"), Imm("bound", "i32"))),
)
# The structured loops: each opener's partner closer, by instruction name and by ISA mnemonic.
LOOP_PAIRS = {"loop_begin": "loop_end", "counted_loop_begin": "counted_loop_end"}
LOOP_OPCODE_PAIRS = {"LOOP_BEGIN": "LOOP_END", "COUNTED_LOOP_BEGIN": "COUNTED_LOOP_END"}


# -- random numbers: XORWOW state inside VectorE / GpSimd (``runtime/rng.py``) ----------------------------------
_RNG = frozenset({"rng"})
# "Supported engines: NeuronCore-v2: Vector. NeuronCore-v3+: GpSimd, Vector." (nisa.rng); "NeuronCore-v3: GpSimd.
# NeuronCore-v4+: GpSimd, Vector." (nisa.rand_set_state, nisa.rand_get_state)
_RNG_ENGINES = ("dve", "pool")
_RNG_STATE_ENGINES = ("pool", "dve")
declare(
    InstrSpec(
        "rng", "RNG", (_DST,), _RNG_ENGINES,
        "dst = the next 32-bit XORWOW outputs of the engine's lanes, truncated to dst's integer dtype",
        fields=(_ENGINE,), reads_state=_RNG, writes_state=_RNG, engine_since={"pool": 3},
    ),
    encoding(0x28, "dst = next XORWOW outputs (low bits)"),
)
declare(
    InstrSpec(
        "rand2", "RAND2",
        (_DST, Role("min", required=False, scalar=True), Role("max", required=False, scalar=True)), ("dve",),
        "dst = min + u * (max - min) in fp32, u uniform in [0, 1) from the VectorE XORWOW generators",
        fields=(Field("min", "f32", tensor_role="min", required=True),
                Field("max", "f32", tensor_role="max", required=True)),
        reads_state=_RNG, writes_state=_RNG, since=4,
    ),
    encoding(0x29, "dst = uniform in [min, max] (XORWOW)",
             imms=(Imm("min", "f32", tensor_role="min", required=True),
                   Imm("max", "f32", tensor_role="max", required=True))),
)
declare(
    InstrSpec(
        "dropout", "DROPOUT", (_DST, Role("data", slot="src"), Role("prob", required=False, scalar=True)), ("dve",),
        "dst = 0 where u < prob (u uniform in [0, 1) from the VectorE XORWOW generators), else data",
        fields=(Field("prob", "f32", tensor_role="prob", required=True),), elementwise=("data",),
        reads_state=_RNG, writes_state=_RNG,
    ),
    encoding(0x2A, "dst = src, zeroed with probability prob",
             imms=(Imm("prob", "f32", tensor_role="prob", required=True),)),
)
declare(
    InstrSpec(
        "set_rng_seed", "SET_RNG_SEED", (Role("src_seeds", slot="src"),), ("dve",),
        "seed every VectorE XORWOW generator from the 32-bit value src_seeds[0, 0]", writes_state=_RNG,
        dims_rule=_seed_dims,
    ),
    encoding(0x2B, "seed the VectorE PRNG from one 32-bit value"),
)
declare(
    InstrSpec(
        "rand_set_state", "RAND_SET_STATE", (Role("src_seeds", slot="src", memories=("sbuf",)),),
        _RNG_STATE_ENGINES, "the engine's XORWOW state of lane p = src_seeds[p, :] (6 uint32 words per generator)",
        fields=(_ENGINE,), writes_state=_RNG, since=3, engine_since={"dve": 4},
    ),
    encoding(0x2C, "load the PRNG state of each lane"),
)
declare(
    InstrSpec(
        "rand_get_state", "RAND_GET_STATE", (_DST,), _RNG_STATE_ENGINES,
        "dst[p, :] = the engine's XORWOW state of lane p (6 uint32 words per generator)",
        fields=(_ENGINE,), reads_state=_RNG, since=3, engine_since={"dve": 4},
    ),
    encoding(0x2D, "store the PRNG state of each lane"),
)


# -- the top-k family: max8 / nc_find_index8 / nc_match_replace8 (VectorE), nonzero_with_count / topk (GpSimd) ------
TOP8 = 8  # max8 and the *8 matchers work on 8 values per partition
TOP8_MIN_ELEMS, TOP8_MAX_ELEMS = 8, 16384  # elements per partition max8 / nc_find_index8 read
GPSIMD_GROUP = 16  # partitions per GpSimd core: nonzero_with_count and topk work per group of 16
TOPK_MAX_N, TOPK_MAX_K = 65536, 32768  # topk: 8 <= n < 65536, 1 <= k < 32768


def _top8_count(what: str, dims: tuple[int, int], lo: int = TOP8_MIN_ELEMS) -> str | None:
    if not lo <= dims[1] <= TOP8_MAX_ELEMS:
        return f"{what} has {dims[1]} elements per partition, not between {lo} and {TOP8_MAX_ELEMS}"
    return None


def _max8_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    if d["dst"] != (d["src"][0], TOP8):
        return f"max8 of {d['src']} (partitions, free) writes {(d['src'][0], TOP8)}, not {d['dst']}"
    return _top8_count("max8's src", d["src"])


def _find_index8_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    want = (d["data"][0], TOP8)
    for role in ("dst", "vals"):
        if d[role] != want:
            return f"nc_find_index8 over {d['data']} (partitions, free) needs {role} {want}, not {d[role]}"
    return _top8_count("nc_find_index8's data", d["data"])


def _match_replace8_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    want = (d["data"][0], TOP8)
    for role in ("vals", "dst_idx"):
        if role in d and d[role] != want:
            return f"nc_match_replace8 over {d['data']} (partitions, free) needs {role} {want}, not {d[role]}"
    return _top8_count("nc_match_replace8's data", d["data"], lo=1)


def _nonzero_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    (p, f), dst = d["src"], d["dst"]
    if dst != (p, f + 1):
        return f"nonzero_with_count of {(p, f)} (partitions, free) writes {(p, f + 1)} (count last), not {dst}"
    return None


def _topk_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    (p, _), val, idx = d["src"], d["val_dst"], d["idx_dst"]
    if p % GPSIMD_GROUP:
        return f"topk works on groups of {GPSIMD_GROUP} partitions, src has {p}"
    if val != idx or val[0] != p:
        return f"topk of {d['src']} (partitions, free) needs val_dst and idx_dst of ({p}, k), not {val} and {idx}"
    if not 1 <= val[1] < TOPK_MAX_K:
        return f"topk needs 1 <= k < {TOPK_MAX_K}, got k = {val[1]}"
    return None


# -- gathers, shuffles and DMA compute ------------------------------------------------------------------------
GPSIMD_CORE_PARTITIONS = 16  # each of the 8 GpSimd cores reaches 16 contiguous SBUF partitions
LOCAL_GATHER_ELEMS = (1, 2, 4, 8, 16, 32)  # num_elem_per_idx values local_gather accepts
LOCAL_GATHER_MAX_INDICES = 4096  # indices per GpSimd core
SHUFFLE_QUADRANT = 32  # nc_stream_shuffle moves data within quadrants of 32 partitions
SHUFFLE_KEEP = 255  # a shuffle_mask entry that leaves its output partition unmodified
SHUFFLE_MASK_WORDS = 8  # the 32 one-byte mask entries, four to an immediate word
DMA_COMPUTE_MAX_SRCS = 5  # source slots of DMA_COMPUTE (NKI allows 16; nkic's records have 6 operand slots)


def pack_shuffle_mask(mask: tuple[int, ...]) -> dict[str, int]:
    """The 32 mask entries as eight u32 words ``mask0..mask7``, entry ``4w + b`` in byte ``b`` of word ``w``."""
    return {f"mask{w}": sum((int(mask[4 * w + b]) & 0xFF) << (8 * b) for b in range(4))
            for w in range(SHUFFLE_MASK_WORDS)}  # fmt: skip


def unpack_shuffle_mask(words: tuple[int, ...]) -> tuple[int, ...]:
    """The inverse of :func:`pack_shuffle_mask`."""
    return tuple((int(words[i // 4]) >> (8 * (i % 4))) & 0xFF for i in range(4 * SHUFFLE_MASK_WORDS))


def shuffle_start_problem(src_parts: int, dst_parts: int, starts: Mapping[str, int]) -> str | None:
    """NKI's start-partition rule of nc_stream_shuffle: with ``a = ceil(max(src, dst partitions) / 32) * 32`` active
    partitions, src and dst start at 0 (a = 96, 128), at 0 or 64 (a = 64), or on any quadrant (a = 32)."""
    active = -(-max(src_parts, dst_parts) // SHUFFLE_QUADRANT) * SHUFFLE_QUADRANT
    allowed = {32: (0, 32, 64, 96), 64: (0, 64)}.get(active, (0,))
    for role, start in starts.items():
        if start not in allowed:
            return (f"with {active} active partitions '{role}' must start at partition "
                    f"{' or '.join(map(str, allowed))}, not {start}")  # fmt: skip
    return None


def _local_gather_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    (p, _), (pi, _), (pd, _) = d["src_buffer"], d["index"], d["dst"]
    if p != pi or pd != p or p % GPSIMD_CORE_PARTITIONS:
        return (f"local_gather needs src_buffer, index and dst on the same number of partitions, a multiple of "
                f"{GPSIMD_CORE_PARTITIONS}, got {p}, {pi} and {pd}")  # fmt: skip
    return None


def _n_gather_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    (pd, fd), (p, _), (pi, fi) = d["dst"], d["data"], d["indices"]
    if not pd == p == pi or fd != fi:
        return (f"nc_n_gather writes one element per index: dst {(pd, fd)} must be indices {(pi, fi)}, data has "
                f"{p} partitions")  # fmt: skip
    return None


def _shuffle_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    if d["dst"][1] != d["src"][1]:
        return f"nc_stream_shuffle moves whole partitions: dst {d['dst']} and src {d['src']} need equal free sizes"
    return None


def _sequence_bounds_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    (p, n), dst = d["segment_ids"], d["dst"]
    if p != 1 or dst != (1, 2 * n):
        return f"sequence_bounds of segment_ids {(p, n)} (one partition) writes (1, 2 x {n}) = {(1, 2 * n)}, not {dst}"
    return None


def _dma_compute_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    counts = {r: p * f for r, (p, f) in d.items() if not r.endswith("_offset")}  # index tensors have their own
    if len(set(counts.values())) > 1:
        return f"dma_compute needs equal element counts, got {counts}"
    return None


# -- MX (microscaling) -----------------------------------------------------------------------------------------
# An MX scaling group is 8 partitions x 4 values (one packed _x4 element) and shares one float8_e8m0fnu scale.
MX_GROUP_PARTITIONS = 8
MX_QUADRANT = 32  # SBUF partitions per quadrant
MX_SCALES_PER_QUADRANT = MX_QUADRANT // MX_GROUP_PARTITIONS


def mx_scale_row(group: int) -> int:
    """The partition (relative to the scale tile's first) holding the scales of 8-partition group ``group``:
    the scales of a 32-partition quadrant's four groups sit in the first four partitions of the same quadrant
    (``nisa.quantize_mx``'s layout, which ``nc_matmul_mx`` reads)."""
    return group // MX_SCALES_PER_QUADRANT * MX_QUADRANT + group % MX_SCALES_PER_QUADRANT


def mx_scale_rows(data_partitions: int) -> int:
    """Partitions a scale tile must span for MX data on ``data_partitions`` partitions."""
    return mx_scale_row(data_partitions // MX_GROUP_PARTITIONS - 1) + 1


def _mx_partitions(role: str, p: int) -> str | None:
    if p % MX_QUADRANT or not 0 < p <= 4 * MX_QUADRANT:
        return f"the partition dimension size of {role} must be a multiple of 32 and at most 128, got {p}"
    return None


def _mx_scale(role: str, scale: tuple[int, int], data_role: str, data: tuple[int, int]) -> str | None:
    rows, free = mx_scale_rows(data[0]), data[1]
    if scale[1] != free or scale[0] < rows:
        return (
            f"{role} {scale} (partitions, free) must have {free} elements per partition (one scale per packed "
            f"element of {data_role}) and span at least {rows} partitions for {data[0]} data partitions"
        )
    return None


def _quantize_mx_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    (p, f), dst = d["src"], d["dst"]
    if problem := _mx_partitions("src", p):
        return problem
    if f % 4:
        return f"the free dimension size of src must be a multiple of 4, got {f}"
    if dst != (p, f // 4):
        return f"quantize_mx of src {(p, f)} (partitions, free) writes {(p, f // 4)} packed elements, not {dst}"
    return _mx_scale("dst_scale", d["dst_scale"], "dst", dst)


def _matmul_mx_dims(d: Mapping[str, tuple[int, int]]) -> str | None:
    (k, m), (k_mv, n), dst = d["stationary"], d["moving"], d["dst"]
    if k != k_mv:
        return f"nc_matmul_mx partition sizes differ: stationary has {k}, moving has {k_mv}"
    if problem := _mx_partitions("stationary", k):
        return problem
    if m % 2 or m > 4 * MX_QUADRANT:
        return f"the free dimension size of stationary must be even and at most 128, got {m}"
    if dst != (m, n):
        return f"nc_matmul_mx dst {dst} (partitions, free) does not match the [M={m}, N={n}] result"
    return _mx_scale("stationary_scale", d["stationary_scale"], "stationary", (k, m)) or _mx_scale(
        "moving_scale", d["moving_scale"], "moving", (k, n)
    )


declare(
    InstrSpec(
        "max8", "MAX8", (_DST, Role("src")), ("dve",),
        "dst[p, :8] = the 8 largest values of src[p] in descending order (fp32 compares, duplicates kept)",
        dims_rule=_max8_dims,
    ),
    encoding(0x20, "the 8 largest values per partition, descending"),
)
declare(
    InstrSpec(
        "find_index8", "FIND_INDEX8", (_DST, Role("data", slot="src"), Role("vals")), ("dve",),
        "dst[p, i] = the free index of vals[p, i] in data[p] (the k-th match for its k-th duplicate in vals), "
        "all-ones when absent", nki_name="nc_find_index8", dims_rule=_find_index8_dims,
    ),
    encoding(0x21, "indices of 8 values per partition"),
)
declare(
    InstrSpec(
        "match_replace8", "MATCH_REPLACE8",
        (_DST, Role("data", slot="src"), Role("vals"), Role("dst_idx", write=True, required=False)), ("dve",),
        "dst = data with the first unclaimed match of each vals[p, i] (i = 7 .. 0) replaced by imm; dst_idx[p, i] "
        "= its free index, all-ones when absent", fields=(Field("imm", "f32", required=True),),
        elementwise=("data",), nki_name="nc_match_replace8", dims_rule=_match_replace8_dims,
    ),
    encoding(0x22, "replace the matches of 8 values per partition by imm, recording their indices",
             imms=(Imm("imm", "f32"),)),
)
declare(
    InstrSpec(
        "nonzero_with_count", "NONZERO_WITH_COUNT",
        (Role("dst", write=True, memories=("sbuf",)), Role("src", memories=("sbuf",))), ("pool",),
        "on partitions 0, 16, ..., 112: dst[p] = (indices of src[p]'s nonzeros + index_offset, padding_val..., "
        "count)", fields=(Field("index_offset", "int"), Field("padding_val", "int")),
        dims_rule=_nonzero_dims, since=3,
    ),
    encoding(0x23, "nonzero indices, padding and count on the first partition of each 16-partition group",
             imms=(Imm("index_offset", "i32", default=0), Imm("padding_val", "i32", default=-1))),
)
declare(
    InstrSpec(
        "topk", "TOPK",
        (Role("val_dst", write=True, memories=("sbuf",), slot="dst"),
         Role("idx_dst", write=True, memories=("sbuf",)), Role("src", memories=("sbuf",))), ("pool",),
        "per 16-partition group: the k largest of the n-element snake src[j % 16, j // 16], ascending, written in "
        "the same snake layout to val_dst with their snake indices in idx_dst",
        fields=(Field("n", "int", required=True),),
        dims_rule=_topk_dims,
    ),
    encoding(0x24, "top-k of the n-element 16-partition snake of each group, ascending, in snake layout",
             imms=(Imm("n", "u32"),)),
)
declare(
    InstrSpec(
        "local_gather", "LOCAL_GATHER",
        (Role("dst", write=True, memories=("sbuf",)), Role("src_buffer", memories=("sbuf",), slot="src"),
         Role("index", memories=("sbuf",))),
        ("pool",), "per GpSimd core (16 partitions): idx = the core's index slice flattened partition-first, first "
        "num_valid_indices; dst[p, j, e] = src_buffer[p, idx[j] + e] for e < num_elem_per_idx",
        fields=(Field("num_elem_per_idx", "int"), Field("num_valid_indices", "int", required=True)),
        dims_rule=_local_gather_dims,
    ),
    encoding(0x30, "per GpSimd core, gather num_elem_per_idx elements at each of its indices from each of its partitions",
             imms=(Imm("num_elem_per_idx", "u32", default=1), Imm("num_valid_indices", "u32"))),
)
declare(
    InstrSpec(
        "nc_n_gather", "NC_N_GATHER",
        (Role("dst", write=True, memories=("sbuf",)), Role("data", memories=("sbuf",), slot="src"),
         Role("indices", memories=("sbuf",))),
        ("pool",), "dst[p, i] = data[p, indices[p, i]], data's free dims flattened", dims_rule=_n_gather_dims,
    ),
    encoding(0x31, "dst[p, i] = src[p, indices[p, i]] within each partition"),
)
declare(
    InstrSpec(
        "nc_stream_shuffle", "NC_STREAM_SHUFFLE", (_DST, Role("src")), ("dve",),
        "dst[32q + i] = src[32q + shuffle_mask[i]] per quadrant q; an entry of 255 leaves dst[32q + i] unchanged",
        fields=(Field("shuffle_mask", "axes", required=True, imm=None),),
        derive=lambda f: pack_shuffle_mask(tuple(f["shuffle_mask"])), traits=frozenset({"reads_dst"}),
        dims_rule=_shuffle_dims,
    ),
    encoding(0x32, "move whole partitions within each 32-partition quadrant by a 32-entry mask (255 = keep)",
             imms=tuple(Imm(f"mask{w}", "u32", default=0) for w in range(SHUFFLE_MASK_WORDS))),
)
declare(
    InstrSpec(
        "sequence_bounds", "SEQUENCE_BOUNDS",
        (Role("dst", write=True, memories=("sbuf",)), Role("segment_ids", memories=("sbuf",), slot="src")),
        ("pool",), "dst[0, 0, i], dst[0, 1, i] = start and end (exclusive) of the run of equal segment ids holding "
        "i; (n, -1) where the id is 0 (padding)", dims_rule=_sequence_bounds_dims,
    ),
    encoding(0x33, "the [start, end) of each element's segment"),
)
_DMA_COMPUTE_SRCS = tuple(f"src{i}" for i in range(DMA_COMPUTE_MAX_SRCS))
# The read-modify-write (dynamic) form has exactly two sources: the index tensors of dst, src0 and src1 take the
# source slots it leaves empty (the frontend refuses a third source next to a dynamic operand).
DMA_COMPUTE_RMW_SRCS = 2
_DMA_COMPUTE_OFFSET_SLOTS = {"dst": "src4", "src0": "src3", "src1": "src2"}
declare(
    InstrSpec(
        "dma_compute", "DMA_COMPUTE",
        (Role("dst", write=True, memories=_ANY_MEM, indirect=True, offset_slot=_DMA_COMPUTE_OFFSET_SLOTS["dst"]),
         *(Role(s, required=s == "src0", memories=_ANY_MEM, indirect=s in _DMA_COMPUTE_OFFSET_SLOTS,
                offset_slot=_DMA_COMPUTE_OFFSET_SLOTS.get(s)) for s in _DMA_COMPUTE_SRCS)),
        ("sp",), "dst = reduce_op(src0, src1, ...) element-wise in fp32, by DMA", fields=(Field("reduce_op", "alu",
        required=True), _OOB_SKIP), traits=frozenset({"dma"}), dims_rule=_dma_compute_dims,
    ),
    OpSpec("DMA_COMPUTE", 0x34, FROM_INSTRUCTIONS, ("dst", *_DMA_COMPUTE_SRCS),
           "dst = reduce_op of the sources, element-wise in fp32, on DMA queue `queue`; a dynamic operand's index "
           "tensor sits in a spare source slot; `oob_skip` skips out-of-bounds dynamic rows", required=("dst", "src0"),
           imms=(Imm("queue", "u32"), Imm("reduce_op", "alu")), flags=("oob_skip",), traits=frozenset({"dma"})),
)
declare(
    InstrSpec(
        "activate2", "ACTIVATE2",
        (_DST, Role("data", slot="src"), Role("imm0", required=False, scalar=True),
         Role("imm1", required=False, scalar=True), Role("relu_param", required=False, scalar=True),
         Role("reduce_res", write=True, required=False, scalar=True)),
        ("act",), "dst = func((data <op0> imm0) <op1> imm1, relu_param), optionally row-reduced with reduce_op into "
        "the ScalarE registers per reduce_cmd (reduce_res receives them)",
        fields=(Field("func", "act", required=True), Field("op0", "alu", required=True),
                Field("op1", "alu", required=True), Field("imm0", "f32", tensor_role="imm0"),
                Field("imm1", "f32", tensor_role="imm1"), Field("relu_param", "f32", tensor_role="relu_param"),
                Field("reverse0", "bool"), Field("reverse1", "bool"), Field("reduce_op", "alu"),
                Field("reduce_cmd", "reduce_cmd")),
        elementwise=("data",), since=4,
    ),
    encoding(0x48, "dst = func((src <op0> imm0) <op1> imm1, relu_param); reduce_res = the reduce registers after reduce_cmd",
             imms=(Imm("func", "act"), Imm("op0", "alu"), Imm("op1", "alu"),
                   Imm("imm0", "f32", default=0.0, tensor_role="imm0"), Imm("imm1", "f32", default=0.0, tensor_role="imm1"),
                   Imm("relu_param", "f32", default=0.0, tensor_role="relu_param"),
                   Imm("reduce_cmd", "reduce_cmd", default="idle"), Imm("reduce_op", "alu", default="bypass")),
             flags=("reverse0", "reverse1")),
)
declare(
    InstrSpec(
        "quantize_mx", "QUANTIZE_MX",
        (Role("dst", write=True, memories=("sbuf",)), Role("src", memories=("sbuf",)),
         Role("dst_scale", write=True, memories=("sbuf",))),
        ("dve",), "dst, dst_scale = MXFP8 quantization of src (one e8m0 scale per 8 partitions x 4 values)",
        dims_rule=_quantize_mx_dims, since=4,
    ),
    encoding(0x38, "dst (fp8 x4), dst_scale (e8m0) = "
             "MX quantization of src"),
)
declare(
    InstrSpec(
        "matmul_mx", "MATMUL_MX",
        # "dst supports tensor indirection ... independently": MATMUL_MX has one spare slot, for dst's index (the
        # data/scale pairs, which would need two more, take no view: frontend/recorders/record.py refuses them).
        (Role("dst", write=True, memories=("psum",), ti=True), Role("stationary", memories=("sbuf",)),
         Role("moving", memories=("sbuf",)), Role("stationary_scale", memories=("sbuf",)),
         Role("moving_scale", memories=("sbuf",))),
        ("pe",), "dst[M, N] (+)= sum over K and the 4 packed values of dequantized stationary[K, M] * moving[K, N]",
        fields=(Field("accumulate", "bool"),), traits=frozenset({"accumulates"}), nki_name="nc_matmul_mx",
        dims_rule=_matmul_mx_dims, since=4,
    ),
    encoding(0x39, "dst[M, N] (+)= dequant(stationary)[K, M, 4] . dequant(moving)[K, N, 4] into PSUM",
             flags=("accumulate",)),
)


# ---------------------------------------------------------------------------------------------------------------
# The LNC=2 pair: the two NeuronCores of a logical core (a ``kernel[2]`` launch, one SPMD program per core) share
# an HBM stack. ``sendrecv`` swaps SBUF tiles between them; ``core_barrier`` makes each wait for the other. A core
# is named by its rank, the program's index in the launch (ARCHITECTURE.md, "The LNC=2 pair").
# ---------------------------------------------------------------------------------------------------------------
LNC_MAX_RANKS = 2  # the cores of one logical core that sendrecv / core_barrier can name (ranks 0 and 1)
# gpsimd_dma (GpSimd's own SBUF-to-SBUF DMA) moves at most this many bytes per partition.
SENDRECV_GPSIMD_BYTES = {4: 1024, 2: 512, 1: 256}
_SENDRECV_ENGINES = ("sp", "pool", "act", "dve")  # dma_engine.dma "can be triggered from any engine"
# The core's position in its sendrecv sequence: the simulator pairs the cores' k-th sendrecvs of a pipe, so every
# core issues its sendrecvs in program order, whatever engines run them (dependency-analysis chains them).
LNC_PIPES = "lnc_pipes"
# The core's debug stream (nl.device_print): its prints leave in program order (dependency-analysis chains them).
DEBUG_STREAM = "debug_stream"
CORE_STATES: frozenset[str] = frozenset({LNC_PIPES, DEBUG_STREAM})


def sendrecv_problem(get: Callable[[str], Any], itemsize: int | None, free_elems: int) -> str | None:
    """What is wrong with a sendrecv's ranks and size (``get(field)``; ``itemsize`` None when unknown), checked at
    the nisa call, in penguin/bir and in the ISA."""
    for name in ("send_to_rank", "recv_from_rank"):
        rank = get(name)
        if rank is None or not 0 <= int(rank) < LNC_MAX_RANKS:
            return f"sendrecv: {name} must be 0 or 1 (a core of the LNC=2 pair), got {rank}"
    if itemsize is not None and get("gpsimd_dma"):
        limit = SENDRECV_GPSIMD_BYTES.get(itemsize, min(SENDRECV_GPSIMD_BYTES.values()))
        if free_elems * itemsize > limit:
            return (f"sendrecv: dma_engine.gpsimd_dma moves at most {limit} bytes per partition of a {itemsize}-byte "
                    f"dtype, got {free_elems * itemsize}")
    return None


def core_barrier_problem(cores: tuple[int, ...]) -> str | None:
    """What is wrong with a core_barrier's ranks, checked in penguin/bir and (as a mask) in the ISA."""
    if not cores or len(set(cores)) != len(cores) or not all(0 <= c < LNC_MAX_RANKS for c in cores):
        return f"core_barrier: cores must be distinct ranks of the LNC=2 pair (0 and/or 1), got {tuple(cores)}"
    return None


def core_mask(cores: tuple[int, ...]) -> int:
    """The bit mask of a core_barrier's ranks (bit r set for rank r)."""
    return sum(1 << int(c) for c in cores)


def mask_cores(mask: int) -> tuple[int, ...]:
    return tuple(r for r in range(32) if mask >> r & 1)


declare(
    InstrSpec(
        "sendrecv", "SENDRECV", (Role("dst", write=True, memories=("sbuf",)), Role("src", memories=("sbuf",))),
        _SENDRECV_ENGINES,
        "send src to the dst of core send_to_rank while receiving core recv_from_rank's src into dst; the cores' "
        "sendrecvs of one pipe_id pair up in order and complete together",
        fields=(Field("send_to_rank", "int", required=True), Field("recv_from_rank", "int", required=True),
                Field("pipe_id", "int", required=True), Field("gpsimd_dma", "bool"), _ENGINE),
        elementwise=("src",), since=3, reads_state=frozenset({LNC_PIPES}), writes_state=frozenset({LNC_PIPES}),
        traits=frozenset({"meets"}),
    ),
    encoding(0x54, "dst of core send_to_rank = src; dst = src of core recv_from_rank (rendezvous on pipe_id)",
             imms=(Imm("send_to_rank", "u32"), Imm("recv_from_rank", "u32"),
                                            Imm("pipe_id", "u32", default=0)),
             flags=("gpsimd_dma",)),
)
declare(
    InstrSpec(
        "core_barrier", "CORE_BARRIER", (Role("data", memories=INDEX_MEMORIES),), ("pool", "act", "dve", "pe", "sp"),
        "every core in cores waits until all of them reached this barrier (with all their earlier work done)",
        fields=(Field("cores", "axes", required=True, imm=None), _ENGINE), traits=_CONTROL | {"meets"},
        derive=lambda f: {"core_mask": core_mask(tuple(f["cores"]))}, since=3,
    ),
    encoding(0x55, "wait until every core of core_mask has reached its matching CORE_BARRIER",
             imms=(Imm("core_mask", "u32"),)),
)


# ---------------------------------------------------------------------------------------------------------------
# Debugging. ``nl.device_print(prefix, tensor)``: on hardware the Neuron runtime hands device-printed tensors to the
# host through its debug stream, i.e. the tile is copied out of the core into a host-visible buffer, from SBUF or
# from HBM alike. nkic models exactly that: DEBUG_PRINT is a DMA on an SP queue (the one engine path that reads both
# memories) whose destination is the host, so it reads ``src`` and writes nothing of the kernel's. Its prefix is a
# ``str`` field: the ISA immediate is its index in the NEFF's string table (runtime/ISA_FORMAT.md). The core's prints
# share DEBUG_STREAM, so they stay in program order; the simulator prints ``<prefix> <value>`` when one executes.
# ---------------------------------------------------------------------------------------------------------------
_PRINTABLE = ("sbuf", *HBM_MEMORIES)  # "Can be in SBUF or HBM"
_DEBUG = frozenset({DEBUG_STREAM})
declare(
    InstrSpec(
        "device_print", "DEBUG_PRINT", (Role("src", memories=_PRINTABLE),), ("sp",),
        "print `prefix` and the value src has when this instruction executes (a DMA to the host's debug stream)",
        fields=(Field("prefix", "str", required=True),), traits=frozenset({"dma"}),
        reads_state=_DEBUG, writes_state=_DEBUG,
    ),
    encoding(0x56, "copy src to the host's debug stream on DMA queue `queue`, labelled with string `prefix` of the NEFF",
             imms=(Imm("queue", "u32"), Imm("prefix", "str"))),
)

# The collectives between ranks (nki.collectives) are declared in their own module, registered here so that every
# reader of INSTRUCTIONS sees them.
from nkic.target import collectives as _collectives  # noqa: E402,F401  (after the declarations it builds on)
