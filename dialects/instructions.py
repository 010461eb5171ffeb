"""The instruction ops shared by penguin and bir, generated from the declarations in ``nkic.target.instructions``.

For every ``InstrSpec`` this module builds a mixin over ``RoleOperandOp``: its roles, its fields as IRDL properties
(by kind: ALU op / activation / reduce command / engine names are strings, ``f32`` a float, ``axes`` a dense
array, ``pattern`` an access pattern, ...), its traits, and verification. The generic checks come from the
declaration (enum members, a scalar given as a tensor or an immediate but not both, (P, 1) scalar tiles, elementwise
shapes, patterns that cover dst); rules beyond those are ``@shape_rule`` functions below. ``penguin.py`` and
``bir.py`` combine each mixin with their operand kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from xdsl.dialects.builtin import BoolAttr, DenseArrayBase, FloatAttr, IntegerAttr, StringAttr
from xdsl.ir import Attribute
from xdsl.irdl import AnyAttr, opt_prop_def, prop_def, traits_def
from xdsl.utils.exceptions import VerifyException

from nkic.dialects.common import BIR_ENGINES, ENGINES, AccessPatternAttr, check_member, value_of
from nkic.dialects.inst import RoleOperandOp
from nkic.dialects.traits import TRAITS, AccumulatesDst, ReadsDst
from nkic.target.instructions import (
    GPSIMD_CORE_PARTITIONS,
    INSTRUCTIONS,
    LOCAL_GATHER_ELEMS,
    LOCAL_GATHER_MAX_INDICES,
    SHUFFLE_KEEP,
    SHUFFLE_QUADRANT,
    Field,
    InstrSpec,
    activate2_problem,
    core_barrier_problem,
    dims_problem,
    sendrecv_problem,
    matmul_tile_problem,
)
from nkic.target.isa import ENUM_KINDS, MAX_STRING_LENGTH
from nkic.target.machine import MAX_MATMUL_K, MAX_MATMUL_M, MAX_MATMUL_N


def str_field(op: RoleOperandOp, name: str) -> str | None:
    v = op.properties.get(name)
    return v.data if isinstance(v, StringAttr) else None


def float_field(op: RoleOperandOp, name: str) -> float | None:
    v = op.properties.get(name)
    return float(v.value.data) if isinstance(v, FloatAttr) else None


def _scalar_xor_tensor(op: RoleOperandOp, role: str, required: bool) -> None:
    """A scalar operand is either a (P, 1) tensor operand or an immediate float, never both."""
    has_t, has_v = op.has(role), float_field(op, role) is not None
    if has_t and has_v:
        raise VerifyException(f"'{role}' is given both as a tensor and as an immediate")
    if required and not (has_t or has_v):
        raise VerifyException(f"'{op.name}' requires '{role}' (a tensor or an immediate)")


_CONSTRAINTS: dict[str, object] = {
    "alu": StringAttr, "act": StringAttr, "reduce_cmd": StringAttr, "engine": StringAttr, "f32": FloatAttr,
    "bool": BoolAttr, "int": IntegerAttr, "axes": DenseArrayBase, "pattern": AccessPatternAttr, "value": AnyAttr(),
    "str": StringAttr,
}  # fmt: skip

ShapeRule = Callable[["InstructionFields"], None]
SHAPE_RULES: dict[str, ShapeRule] = {}


def shape_rule(name: str) -> Callable[[ShapeRule], ShapeRule]:
    """Register a verification rule of instruction ``name`` beyond the generic checks."""

    def register(fn: ShapeRule) -> ShapeRule:
        if name not in INSTRUCTIONS:
            raise ValueError(f"shape rule for undeclared instruction '{name}'")
        SHAPE_RULES[name] = fn
        return fn

    return register


class InstructionFields(RoleOperandOp):
    """Verification shared by every generated instruction op; ``SPEC`` is its declaration."""

    SPEC: ClassVar[InstrSpec]

    def verify_fields(self) -> None:
        spec = self.SPEC
        for f in spec.fields:
            _check_field(self, f)
        _dynamic_terms(self)
        for role in spec.elementwise:
            _same_elements(self, "dst", role)
        _scalar_shape(self, *spec.scalar_roles)
        for f in spec.fields:
            if f.kind == "pattern":
                _pattern_matches(self, "dst", f.name)
        if spec.dims_rule is not None:
            dims = {r: (ap.shape[0], _free(ap.shape)) for r, ap in zip(self.role_names, self.aps.data)}
            problem = dims_problem(spec, dims)
            if problem is not None:
                raise VerifyException(problem)
        rule = SHAPE_RULES.get(spec.name)
        if rule is not None:
            rule(self)


def _dynamic_terms(op: InstructionFields) -> None:
    """A dynamic access pattern with an index operand sits on a role declared ``indirect`` and names that role's
    index operand. A register term (``reg``) sits on an ``indirect`` role in a kernel (penguin), and on any role in
    BIR: that is how a rolled loop rotates addresses (``passes/loop_rolling.py``)."""
    backend = op.name.startswith("bir.")
    for role, ap in zip(op.role_names, op.aps.data):
        kind, index_role, _, _ = ap.dyn
        if not kind or (kind == "reg" and backend):
            continue
        declared = op.SPEC.role(role)
        if not (declared.ti if kind == "indirect" else declared.indirect):
            raise VerifyException(f"'{role}' of {op.name} cannot have a dynamic ({kind}) offset")
        if kind == "reg":
            continue
        if index_role != declared.offset_role or not op.has(index_role):
            raise VerifyException(f"'{role}': its {kind} offset must name the '{declared.offset_role}' operand, "
                                  f"got '{index_role}'")  # fmt: skip
        if kind == "indirect":
            _indirect_term(role, ap, index_role, op.ap(index_role))
            continue
        count = op.ap(index_role).num_elements
        want = ap.shape[0] if kind == "vector" else 1
        if count != want:
            raise VerifyException(f"'{role}': a {kind} offset needs {want} indices, '{index_role}' has {count}")


def _indirect_term(role: str, ap: AccessPatternAttr, index_role: str, index: AccessPatternAttr) -> None:
    """A tensor indirection view is (P, num_elem) over an index of shape (P, K) holding at least num_elem offsets:
    "index: SBUF tensor containing free-dimension offsets, shape (P, K) where P == self.shape[0]" and "num_elem:
    number of offsets to use. Defaults to index.size" (nl NkiTensor.indirect)."""
    if len(ap.pairs) != 2:
        raise VerifyException(f"'{role}': a tensor indirection view is (partitions, offsets), got shape {ap.shape}")
    if index.shape[0] != ap.shape[0] or index.num_elements < ap.shape[1]:
        raise VerifyException(f"'{role}': its {ap.shape[1]} indirect offsets over {ap.shape[0]} partitions need an "
                              f"index of {ap.shape[0]} partitions holding as many, '{index_role}' is {index.shape}")


def _check_field(op: RoleOperandOp, f: Field) -> None:
    value = op.properties.get(f.name)
    if f.kind == "engine" and isinstance(value, StringAttr):
        check_member("engine", value.data, ENGINES + BIR_ENGINES)
    elif f.kind in ENUM_KINDS and isinstance(value, StringAttr):
        vocab = ENUM_KINDS[f.kind]
        check_member(vocab.what, value.data, vocab.names)
    elif f.kind == "value" and value is not None and not isinstance(value, FloatAttr | IntegerAttr):
        raise VerifyException(f"{f.name} must be a float or integer attribute")
    elif f.kind == "str" and isinstance(value, StringAttr) and len(value.data) > MAX_STRING_LENGTH:
        raise VerifyException(f"{f.name} has {len(value.data)} characters, at most {MAX_STRING_LENGTH}")
    if f.tensor_role is not None:
        _scalar_xor_tensor(op, f.tensor_role, f.required)


def _fields_mixin(spec: InstrSpec) -> type[InstructionFields]:
    body: dict[str, object] = {
        "SPEC": spec,
        "ROLES": spec.role_names,
        "REQUIRED": spec.required_roles,
        "__annotations__": {"SPEC": ClassVar[InstrSpec], "ROLES": ClassVar[object], "REQUIRED": ClassVar[object]},
        "traits": traits_def(*(TRAITS[t]() for t in sorted(spec.traits))),
    }
    for f in spec.fields:
        constraint = _CONSTRAINTS[f.kind]
        stored = f.required and f.tensor_role is None
        body[f.name] = prop_def(constraint) if stored else opt_prop_def(constraint)  # type: ignore[arg-type]
    name = "".join(p.capitalize() for p in spec.name.split("_")) + "Fields"
    return type(name, (InstructionFields,), body)


# -- rules beyond the declarations ---------------------------------------------------------------------------------


@shape_rule("dma_copy")
def _dma_copy(op: InstructionFields) -> None:
    dst, src = op.ap("dst"), op.ap("src")
    if dst.num_elements != src.num_elements:
        raise VerifyException(f"dma_copy element counts differ: dst {dst.num_elements}, src {src.num_elements}")


@shape_rule("dma_transpose")
def _dma_transpose(op: InstructionFields) -> None:
    # dst = src with its outermost and innermost dims swapped (NKI's (1, 0) / (2, 1, 0) / (3, 1, 2, 0)).
    dst, src = op.ap("dst").shape, op.ap("src").shape
    if not 2 <= len(src) <= 4 or dst != transposed_shape(src):
        raise VerifyException(
            f"dma_transpose needs 2-D to 4-D operands with dst = src with its first and last dims swapped, "
            f"got {dst} and {src}"
        )
    axes_attr = op.properties.get("axes")
    if isinstance(axes_attr, DenseArrayBase):
        axes = tuple(int(a) for a in axes_attr.get_values())
        if axes != tuple([len(src) - 1, *range(1, len(src) - 1), 0]):
            raise VerifyException(f"dma_transpose axes {axes} are not the rank-{len(src)} permutation")


def transposed_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with its first and last dims swapped (the DMA transpose of every rank)."""
    return (shape[-1], *shape[1:-1], shape[0]) if len(shape) >= 2 else shape


@shape_rule("matmul")
def _matmul(op: InstructionFields) -> None:
    dst, st, mv = (op.ap(r).shape for r in ("dst", "stationary", "moving"))
    get = lambda name: value_of(op.properties.get(name))  # noqa: E731
    pack = 2 if get("double_row") else 1  # double_row: [K, 2, M] x [K, 2, N], the 2 contracted too
    if pack == 2 and (len(st) < 3 or st[1] != 2 or len(mv) < 3 or mv[1] != 2):
        raise VerifyException(f"matmul double_row operands must be [K, 2, ...], got {st} and {mv}")
    k, m = st[0], _free(st) // pack
    problem = matmul_tile_problem(get, k, m)
    if problem is not None:
        raise VerifyException(problem)
    if mv[0] != k:
        raise VerifyException(f"matmul contraction mismatch: stationary K={k}, moving K={mv[0]}")
    n = _free(mv) // pack
    if dst[0] != m or _free(dst) != n:
        raise VerifyException(f"matmul dst shape {dst} does not match [{m}, {n}]")
    # N: the entire PSUM in the narrowest result dtype (v4: "up to 4096 for float32 dst or 8192 for bfloat16 dst");
    # the bound per generation and dtype is the documented rule's (target/rules/pe.py, asked by the penguin verifier)
    max_n = 2 * MAX_MATMUL_N
    if k > MAX_MATMUL_K or m > MAX_MATMUL_M or n > max_n:
        raise VerifyException(
            f"matmul limits exceeded: K={k} (<={MAX_MATMUL_K}), M={m} (<={MAX_MATMUL_M}), N={n} (<={max_n})"
        )


@shape_rule("tensor_scalar")
def _tensor_scalar(op: InstructionFields) -> None:
    if str_field(op, "op1") is not None and not (op.has("operand1") or float_field(op, "operand1") is not None):
        raise VerifyException(f"'{op.name}' requires 'operand1' (a tensor or an immediate)")


@shape_rule("tensor_reduce")
def _tensor_reduce(op: InstructionFields) -> None:
    data = op.ap("data").shape
    axes = axis_list(op)
    if not axes or any(a <= 0 or a >= len(data) for a in axes):
        raise VerifyException(f"tensor_reduce axes {axes} must be free axes of a rank-{len(data)} operand")
    if sorted(axes) != list(range(len(data) - len(axes), len(data))):
        raise VerifyException(f"tensor_reduce axes {axes} must be the trailing free axes")
    kept = 1
    for a in range(len(data)):
        kept *= 1 if a in axes else data[a]
    if op.ap("dst").num_elements != kept:
        raise VerifyException(f"tensor_reduce dst has {op.ap('dst').num_elements} elements, expected {kept}")


def axis_list(op: RoleOperandOp, name: str = "axes") -> list[int]:
    axes = op.properties[name]
    assert isinstance(axes, DenseArrayBase)
    return [int(a) for a in axes.get_values()]


@shape_rule("activation")
def _activation(op: InstructionFields) -> None:
    if op.has("reduce_res") and str_field(op, "reduce_op") is None:
        raise VerifyException("activation with reduce_res needs a reduce_op")


@shape_rule("local_gather")
def _local_gather(op: InstructionFields) -> None:
    per_idx = _int_field(op, "num_elem_per_idx", 1)
    valid = _int_field(op, "num_valid_indices", 0)
    if per_idx not in LOCAL_GATHER_ELEMS:
        raise VerifyException(f"num_elem_per_idx must be one of {LOCAL_GATHER_ELEMS}, got {per_idx}")
    per_core = GPSIMD_CORE_PARTITIONS * _free(op.ap("index").shape)
    if not 1 <= valid <= min(per_core, LOCAL_GATHER_MAX_INDICES):
        raise VerifyException(f"num_valid_indices must be 1..{min(per_core, LOCAL_GATHER_MAX_INDICES)}, got {valid}")
    if _free(op.ap("dst").shape) != valid * per_idx:
        raise VerifyException(f"local_gather of {valid} indices x {per_idx} elements writes {valid * per_idx} "
                              f"elements per partition, dst has {_free(op.ap('dst').shape)}")  # fmt: skip


@shape_rule("nc_stream_shuffle")
def _nc_stream_shuffle(op: InstructionFields) -> None:
    mask = [int(m) for m in op.properties["shuffle_mask"].get_values()]  # type: ignore[attr-defined]
    if len(mask) != SHUFFLE_QUADRANT:
        raise VerifyException(f"shuffle_mask needs {SHUFFLE_QUADRANT} entries, got {len(mask)}")
    bad = [m for m in mask if not (0 <= m < SHUFFLE_QUADRANT or m == SHUFFLE_KEEP)]
    if bad:
        raise VerifyException(f"shuffle_mask entries must be 0..{SHUFFLE_QUADRANT - 1} or {SHUFFLE_KEEP}, got {bad}")


def _int_field(op: RoleOperandOp, name: str, default: int) -> int:
    v = op.properties.get(name)
    return int(v.value.data) if isinstance(v, IntegerAttr) else default


@shape_rule("sendrecv")
def _sendrecv(op: InstructionFields) -> None:
    problem = sendrecv_problem(lambda name: value_of(op.properties.get(name)), None, 0)
    if problem is not None:
        raise VerifyException(problem)


@shape_rule("core_barrier")
def _core_barrier(op: InstructionFields) -> None:
    problem = core_barrier_problem(tuple(axis_list(op, "cores")))
    if problem is not None:
        raise VerifyException(problem)


@shape_rule("activate2")
def _activate2(op: InstructionFields) -> None:
    problem = activate2_problem(lambda name: value_of(op.properties.get(name)))
    if problem is not None:
        raise VerifyException(problem)


def _free(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape[1:]:
        n *= d
    return n


free_elements = _free  # elements per partition of an access pattern's shape


_SCALAR_KINDS = frozenset({"alu", "act", "reduce_cmd", "engine", "f32", "bool", "int", "str"})


def field_values(op: RoleOperandOp) -> dict[str, Any]:
    """The instruction's scalar fields that are given, as Python values (what the documented rules read)."""
    out: dict[str, Any] = {}
    for f in op.SPEC.fields:  # type: ignore[attr-defined]
        attr = op.properties.get(f.name)
        if attr is not None and f.kind in _SCALAR_KINDS:
            try:
                out[f.name] = value_of(attr)
            except TypeError:  # a malformed field: _check_field names it
                continue
    return out


def _same_elements(op: RoleOperandOp, a: str, b: str) -> None:
    pa, pb = op.ap(a), op.ap(b)
    if pa is None or pb is None:
        return
    if pa.shape[0] != pb.shape[0]:
        raise VerifyException(f"partition counts differ: {a} has {pa.shape[0]}, {b} has {pb.shape[0]}")
    if _free(pa.shape) != _free(pb.shape):
        raise VerifyException(
            f"elements per partition differ: {a} has {_free(pa.shape)}, {b} has {_free(pb.shape)}"
        )


def _scalar_shape(op: RoleOperandOp, *roles: str) -> None:
    dst = op.ap("dst")
    for r in roles:
        ap = op.ap(r)
        if ap is not None and (_free(ap.shape) != 1 or ap.shape[0] != dst.shape[0]):
            raise VerifyException(f"'{r}' must be a ({dst.shape[0]}, 1) tile, got {ap.shape}")


def _pattern_matches(op: RoleOperandOp, role: str, field: str) -> None:
    # The pattern lists free dims only; the partition index enters through channel_multiplier.
    pat: Attribute = op.properties[field]
    assert isinstance(pat, AccessPatternAttr)
    if pat.num_elements != _free(op.ap(role).shape):
        raise VerifyException(
            f"{field} covers {pat.num_elements} elements per partition, {role} has {_free(op.ap(role).shape)}"
        )


# Penguin/bir op name -> fields mixin, in declaration order (the ISA-independent instruction vocabulary).
INSTRUCTION_FIELDS: dict[str, type[InstructionFields]] = {n: _fields_mixin(s) for n, s in INSTRUCTIONS.items()}


def reads_dst(op: RoleOperandOp) -> bool:
    """Whether the destination is also read: a predicated copy, or PSUM accumulation unless ``accumulate = false``."""
    if op.has_trait(ReadsDst):
        return True
    acc = op.properties.get("accumulate")
    return op.has_trait(AccumulatesDst) and not (isinstance(acc, IntegerAttr) and acc.value.data == 0)
