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
from dataclasses import dataclass, field
from typing import Any

from nkic.target.isa import OPCODES, Imm, OpSpec, register_opcode
from nkic.target.vocab import HBM_MEMORIES, ON_CHIP

__all__ = ["Role", "Field", "InstrSpec", "INSTRUCTIONS", "declare", "FIELD_KINDS"]

# Field kinds: how a field is stored in the IR and checked.
FIELD_KINDS = frozenset({"alu", "act", "reduce_cmd", "engine", "f32", "bool", "int", "axes", "pattern", "value"})


@dataclass(frozen=True)
class Role:
    """One operand role. ``slot``: the ISA slot it lowers to (default: the same name)."""

    name: str
    write: bool = False
    required: bool = True
    scalar: bool = False  # a (P, 1) tile, P = dst's partitions
    memories: tuple[str, ...] = ON_CHIP
    slot: str | None = None

    @property
    def isa_slot(self) -> str:
        return self.slot or self.name


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
    engines: tuple[str, ...]
    doc: str
    fields: tuple[Field, ...] = ()
    elementwise: tuple[str, ...] = ()  # roles with dst's partitions and elements per partition
    traits: frozenset[str] = field(default_factory=frozenset)  # "dma", "accumulates", "reads_dst"
    constants: Mapping[str, Any] = field(default_factory=dict)  # ISA fields fixed by the instruction
    # ISA fields computed from the instruction's field values (e.g. tensor_reduce's axes -> num_reduced_dims)
    derive: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    # A shape rule over (partitions, elements per partition) by role, checked at every level (nisa call, penguin,
    # bir, ISA): returns what is wrong, or None.
    dims_rule: Callable[[Mapping[str, tuple[int, int]]], str | None] | None = None
    nki_name: str = ""  # the nisa function, when it is not named like the instruction
    since: int = 2  # the first NeuronCore generation (nc_version) that has it

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


INSTRUCTIONS: dict[str, InstrSpec] = {}


def dims_problem(spec: InstrSpec, dims: Mapping[str, tuple[int, int]]) -> str | None:
    """What ``spec.dims_rule`` says of these operand dims (roles that are absent are left out)."""
    return None if spec.dims_rule is None else spec.dims_rule(dims)


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


def declare(spec: InstrSpec, opcode: OpSpec | None = None) -> InstrSpec:
    """Register an instruction (and, for an instruction with an ISA form of its own, that opcode)."""
    if spec.name in INSTRUCTIONS:
        raise ValueError(f"instruction '{spec.name}' is declared twice")
    if opcode is not None:
        register_opcode(opcode)
    isa = OPCODES.get(spec.opcode)
    if isa is None:
        raise ValueError(f"instruction '{spec.name}' lowers to undeclared opcode {spec.opcode}")
    for r in spec.roles:
        if r.isa_slot not in isa.slots:
            raise ValueError(f"instruction '{spec.name}': role '{r.name}' maps to no {spec.opcode} slot")
    INSTRUCTIONS[spec.name] = spec
    return spec


_DST = Role("dst", write=True)
_ANY_MEM = ("sbuf", *HBM_MEMORIES)
_ENGINE = Field("engine", "engine", imm=None)


declare(InstrSpec(
    "dma_copy", "DMA_COPY", (Role("dst", write=True, memories=_ANY_MEM), Role("src", memories=_ANY_MEM)), ("sp",),
    "dst = src between HBM and SBUF (element counts equal, dtype cast through fp32)", traits=frozenset({"dma"}),
))
declare(InstrSpec(
    "dma_transpose", "DMA_COPY", (Role("dst", write=True, memories=("sbuf",)), Role("src", memories=_ANY_MEM)),
    ("sp",), "dst = src with its first and last dims swapped, by DMA", fields=(Field("axes", "axes", imm=None),),
    traits=frozenset({"dma"}), constants={"transpose": True},
))
declare(InstrSpec(
    "matmul", "MATMUL",
    (Role("dst", write=True, memories=("psum",)), Role("stationary", memories=("sbuf",)),
     Role("moving", memories=("sbuf",))),
    ("pe",), "dst[M, N] (+)= stationary[K, M]^T @ moving[K, N]", fields=(Field("accumulate", "bool"),),
    traits=frozenset({"accumulates"}), nki_name="nc_matmul",
))
declare(InstrSpec(
    "transpose", "TRANSPOSE", (_DST, Role("data", slot="src")), ("pe", "dve"), "dst[F, P] = data[P, F]",
    fields=(_ENGINE,), nki_name="nc_transpose", dims_rule=_transpose_dims,
))
declare(InstrSpec(
    "tensor_copy", "TENSOR_COPY", (_DST, Role("src")), ("dve", "act", "pool"), "dst = src (with a dtype cast)",
    fields=(_ENGINE,), elementwise=("src",),
))
declare(InstrSpec(
    "tensor_tensor", "TENSOR_TENSOR", (_DST, Role("data1", slot="in0"), Role("data2", slot="in1")),
    ("dve", "pool", "act"), "dst = data1 <op> data2", fields=(Field("op", "alu", required=True), _ENGINE),
    elementwise=("data1", "data2"),
))
declare(InstrSpec(
    "tensor_scalar", "TENSOR_SCALAR",
    (_DST, Role("data", slot="src"), Role("operand0", required=False, scalar=True),
     Role("operand1", required=False, scalar=True)),
    ("dve", "act", "pool"), "dst = (data <op0> operand0) <op1> operand1",
    fields=(Field("op0", "alu", required=True), Field("operand0", "f32", tensor_role="operand0", required=True),
            Field("reverse0", "bool"), Field("op1", "alu"), Field("operand1", "f32", tensor_role="operand1"),
            Field("reverse1", "bool"), _ENGINE),
    elementwise=("data",),
))
declare(InstrSpec(
    "scalar_tensor_tensor", "SCALAR_TENSOR_TENSOR",
    (_DST, Role("data"), Role("operand0", required=False, scalar=True), Role("operand1")),
    ("dve", "pool"), "dst = (data <op0> operand0) <op1> operand1",
    fields=(Field("op0", "alu", required=True), Field("operand0", "f32", tensor_role="operand0", required=True),
            Field("op1", "alu", required=True), Field("reverse0", "bool"), Field("reverse1", "bool")),
    elementwise=("data", "operand1"),
))
declare(InstrSpec(
    "tensor_reduce", "TENSOR_REDUCE", (_DST, Role("data", slot="src")), ("dve", "pool"),
    "dst = (-)reduce(op) of data over its trailing free axes `axes`",
    fields=(Field("op", "alu", required=True), Field("axes", "axes", required=True, imm=None), Field("negate", "bool"),
            Field("keepdims", "bool", imm=None)),
    derive=lambda f: {"num_reduced_dims": len(f["axes"])},
))
declare(InstrSpec(
    "tensor_scalar_reduce", "TENSOR_SCALAR_REDUCE",
    (_DST, Role("data", slot="src"), Role("operand0", required=False, scalar=True),
     Role("reduce_res", write=True, scalar=True)),
    ("dve",), "dst = data <op0> operand0; reduce_res = (-)reduce(reduce_op, dst)",
    fields=(Field("op0", "alu", required=True), Field("operand0", "f32", tensor_role="operand0", required=True),
            Field("reduce_op", "alu", required=True), Field("reverse0", "bool"),
            Field("reduce_res_negate", "bool", imm="negate")),
    elementwise=("data",),
))
declare(InstrSpec(
    "activation", "ACTIVATE",
    (_DST, Role("data", slot="src"), Role("bias", required=False, scalar=True),
     Role("scale", required=False, scalar=True), Role("reduce_res", write=True, required=False, scalar=True)),
    ("act",), "dst = func(data * scale + bias), optionally row-reduced into reduce_res",
    fields=(Field("func", "act", required=True), Field("bias", "f32", tensor_role="bias"),
            Field("scale", "f32", tensor_role="scale"), Field("reduce_op", "alu"), Field("reduce_cmd", "reduce_cmd")),
    elementwise=("data",),
))
declare(InstrSpec(
    "memset", "MEMSET", (_DST,), ("dve", "pool", "act"), "dst = value",
    fields=(Field("value", "value", required=True), _ENGINE),
))
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
))
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
    OpSpec("RANGE_SELECT", 0x10, ("dve",), ("dst", "on_true", "bound0", "bound1", "reduce_res"),
           "dst = on_true where both bound comparisons of range_start + i hold, else on_false_value",
           required=("dst", "on_true", "bound0", "bound1"),
           imms=(Imm("comp_op0", "alu"), Imm("comp_op1", "alu"), Imm("on_false_value", "f32"),
                 Imm("range_start", "i32", default=0), Imm("reduce_cmd", "reduce_cmd", default="idle"),
                 Imm("reduce_op", "alu", default="bypass")),
           writes=("dst", "reduce_res"), scalar_slots=("bound0", "bound1", "reduce_res"), same_shape=("on_true",)),
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
    OpSpec("TENSOR_TENSOR_SCAN", 0x11, ("dve",), ("dst", "in0", "in1", "initial"),
           "a running op0/op1 recurrence along the free dim, per partition, in fp32", required=("dst", "in0", "in1"),
           imms=(Imm("op0", "alu"), Imm("op1", "alu"), Imm("initial", "f32", tensor_role="initial", required=True)),
           flags=("reverse0", "reverse1"), scalar_slots=("initial",), same_shape=("in0", "in1")),
)
declare(
    InstrSpec(
        "tensor_copy_predicated", "TENSOR_COPY_PREDICATED",
        (Role("dst", write=True), Role("src", required=False), Role("predicate")), ("dve",),
        "dst = src (a tile or a number) where predicate != 0 (== 0 with reverse_pred); elsewhere dst keeps its value",
        fields=(Field("src", "f32", tensor_role="src", required=True), Field("reverse_pred", "bool")),
        elementwise=("src", "predicate"), traits=frozenset({"reads_dst"}),
    ),
    OpSpec("TENSOR_COPY_PREDICATED", 0x12, ("dve",), ("dst", "src", "predicate"),
           "dst = src where the predicate holds, unchanged elsewhere", required=("dst", "predicate"),
           imms=(Imm("src", "f32", tensor_role="src", required=True),), flags=("reverse_pred",),
           same_shape=("src", "predicate")),
)
declare(
    InstrSpec(
        "bn_stats", "BN_STATS", (_DST, Role("data", slot="src")), ("dve",),
        "dst[p] = (count, mean, variance * count) of data[p]'s even elements, then of its odd ones",
        dims_rule=_bn_stats_dims,
    ),
    OpSpec("BN_STATS", 0x13, ("dve",), ("dst", "src"), "per-partition statistics of even and odd elements",
           required=("dst", "src")),
)
declare(
    InstrSpec(
        "bn_aggr", "BN_AGGR", (_DST, Role("data", slot="src")), ("dve",),
        "dst[p] = (mean, variance) of the (count, mean, variance * count) triples of data[p]",
        dims_rule=_bn_aggr_dims,
    ),
    OpSpec("BN_AGGR", 0x14, ("dve",), ("dst", "src"), "combine bn_stats triples into a mean and a variance",
           required=("dst", "src")),
)
declare(
    InstrSpec(
        "exponential", "EXPONENTIAL",
        (_DST, Role("src"), Role("max_value", required=False, scalar=True),
         Role("reduce_res", write=True, required=False, scalar=True),
         Role("reduce_init", required=False, scalar=True)),
        ("dve",), "dst = exp(src - max_value); reduce_res = the VectorE sum registers after reduce_cmd",
        fields=(Field("max_value", "f32", tensor_role="max_value"), Field("reduce_cmd", "reduce_cmd"),
                Field("reduce_init", "f32", tensor_role="reduce_init")),
        elementwise=("src",), since=4,
    ),
    OpSpec("EXPONENTIAL", 0x15, ("dve",), ("dst", "src", "max_value", "reduce_res", "reduce_init"),
           "dst = exp(src - max_value), summed into the VectorE registers per reduce_cmd", required=("dst", "src"),
           imms=(Imm("max_value", "f32", default=0.0, tensor_role="max_value"),
                 Imm("reduce_cmd", "reduce_cmd", default="idle"),
                 Imm("reduce_init", "f32", default=0.0, tensor_role="reduce_init")),
           writes=("dst", "reduce_res"), scalar_slots=("max_value", "reduce_res", "reduce_init"),
           same_shape=("src",)),
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
    OpSpec("SELECT_REDUCE", 0x16, ("dve",), ("dst", "predicate", "on_true", "on_false", "reduce_res"),
           "dst = predicate ? on_true : on_false, max-reduced into the VectorE registers",
           required=("dst", "predicate", "on_true"),
           imms=(Imm("on_false", "f32", tensor_role="on_false", required=True),
                 Imm("reduce_cmd", "reduce_cmd", default="idle"), Imm("reduce_op", "alu", default="bypass")),
           flags=("reverse_pred",), writes=("dst", "reduce_res"), scalar_slots=("on_false", "reduce_res"),
           same_shape=("predicate", "on_true")),
)
declare(
    InstrSpec(
        "tensor_scalar_cumulative", "TENSOR_SCALAR_CUMULATIVE",
        (_DST, Role("src"), Role("imm0", required=False, scalar=True), Role("imm1", required=False, scalar=True)),
        ("dve",), "reg = op1(op0(src[i], imm0), reg), dst[i] = reg along the free dim; reg starts per reduce_cmd "
        "(op1's identity, the VectorE register, or imm1)",
        fields=(Field("op0", "alu", required=True), Field("op1", "alu", required=True),
                Field("imm0", "f32", tensor_role="imm0", required=True), Field("imm1", "f32", tensor_role="imm1"),
                Field("reduce_cmd", "reduce_cmd")),
        elementwise=("src",),
    ),
    OpSpec("TENSOR_SCALAR_CUMULATIVE", 0x17, ("dve",), ("dst", "src", "imm0", "imm1"),
           "a running op1 over op0(src, imm0) along the free dim, in the VectorE registers",
           required=("dst", "src"),
           imms=(Imm("op0", "alu"), Imm("op1", "alu"), Imm("imm0", "f32", tensor_role="imm0", required=True),
                 Imm("imm1", "f32", tensor_role="imm1"), Imm("reduce_cmd", "reduce_cmd", default="idle")),
           scalar_slots=("imm0", "imm1"), same_shape=("src",)),
)
declare(
    InstrSpec(
        "tensor_partition_reduce", "TENSOR_PARTITION_REDUCE", (Role("dst", write=True), Role("data", slot="src")),
        ("pool",), "dst[0, f] = reduce(op) of data[p, f] over the partitions p",
        fields=(Field("op", "alu", required=True),), dims_rule=_partition_reduce_dims,
    ),
    OpSpec("TENSOR_PARTITION_REDUCE", 0x18, ("pool",), ("dst", "src"), "a reduction across partitions into one",
           required=("dst", "src"), imms=(Imm("op", "alu"),)),
)

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
        "quantize_mx", "QUANTIZE_MX",
        (Role("dst", write=True, memories=("sbuf",)), Role("src", memories=("sbuf",)),
         Role("dst_scale", write=True, memories=("sbuf",))),
        ("dve",), "dst, dst_scale = MXFP8 quantization of src (one e8m0 scale per 8 partitions x 4 values)",
        dims_rule=_quantize_mx_dims, since=4,
    ),
    OpSpec("QUANTIZE_MX", 0x38, ("dve",), ("dst", "src", "dst_scale"), "dst (fp8 x4), dst_scale (e8m0) = "
           "MX quantization of src", required=("dst", "src", "dst_scale"), writes=("dst", "dst_scale")),
)
declare(
    InstrSpec(
        "matmul_mx", "MATMUL_MX",
        (Role("dst", write=True, memories=("psum",)), Role("stationary", memories=("sbuf",)),
         Role("moving", memories=("sbuf",)), Role("stationary_scale", memories=("sbuf",)),
         Role("moving_scale", memories=("sbuf",))),
        ("pe",), "dst[M, N] (+)= sum over K and the 4 packed values of dequantized stationary[K, M] * moving[K, N]",
        fields=(Field("accumulate", "bool"),), traits=frozenset({"accumulates"}), nki_name="nc_matmul_mx",
        dims_rule=_matmul_mx_dims, since=4,
    ),
    OpSpec("MATMUL_MX", 0x39, ("pe",), ("dst", "stationary", "moving", "stationary_scale", "moving_scale"),
           "dst[M, N] (+)= dequant(stationary)[K, M, 4] . dequant(moving)[K, N, 4] into PSUM",
           required=("dst", "stationary", "moving", "stationary_scale", "moving_scale"), flags=("accumulate",)),
)
