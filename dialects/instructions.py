"""The NKI instruction catalogue: operand roles and scalar fields of every instruction, shared by penguin and bir.

Each ``*Fields`` class is a mixin over ``RoleOperandOp``; ``penguin.py`` and ``bir.py`` combine it with their
operand kind. Opcode enums are stored verbatim as strings (``op = "add"``, ``func = "exp"``) and checked against the
vocabularies in ``common.py``; numeric renumbering happens only in the ISA encoder.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import BoolAttr, DenseArrayBase, FloatAttr, IntegerAttr, StringAttr
from xdsl.ir import Attribute
from xdsl.irdl import AnyAttr, opt_prop_def, prop_def
from xdsl.utils.exceptions import VerifyException

from nkic.dialects.common import ACT_FUNCS, ALU_OPS, BIR_ENGINES, ENGINES, REDUCE_CMDS, AccessPatternAttr, check_member
from nkic.dialects.inst import RoleOperandOp


def str_field(op: RoleOperandOp, name: str) -> str | None:
    v = op.properties.get(name)
    return v.data if isinstance(v, StringAttr) else None


def bool_field(op: RoleOperandOp, name: str) -> bool:
    v = op.properties.get(name)
    return bool(v.value.data) if isinstance(v, IntegerAttr) else False


def float_field(op: RoleOperandOp, name: str) -> float | None:
    v = op.properties.get(name)
    return float(v.value.data) if isinstance(v, FloatAttr) else None


def int_field(op: RoleOperandOp, name: str, default: int = 0) -> int:
    v = op.properties.get(name)
    return int(v.value.data) if isinstance(v, IntegerAttr) else default


def _check_engine(op: RoleOperandOp) -> None:
    e = str_field(op, "engine")
    if e is not None:
        check_member("engine", e, ENGINES + BIR_ENGINES)


def _check_alu(op: RoleOperandOp, *names: str) -> None:
    for n in names:
        v = str_field(op, n)
        if v is not None:
            check_member("ALU opcode", v, ALU_OPS)


def _scalar_xor_tensor(op: RoleOperandOp, role: str, required: bool) -> None:
    """A scalar operand is either a (P, 1) tensor operand or an immediate float, never both."""
    has_t, has_v = op.has(role), float_field(op, role) is not None
    if has_t and has_v:
        raise VerifyException(f"'{role}' is given both as a tensor and as an immediate")
    if required and not (has_t or has_v):
        raise VerifyException(f"'{op.name}' requires '{role}' (a tensor or an immediate)")


class DmaCopyFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "src")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "src")

    def verify_fields(self) -> None:
        dst, src = self.ap("dst"), self.ap("src")
        if dst.num_elements != src.num_elements:
            raise VerifyException(
                f"dma_copy element counts differ: dst {dst.num_elements}, src {src.num_elements}"
            )


class DmaTransposeFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "src")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "src")
    axes = opt_prop_def(DenseArrayBase)

    def verify_fields(self) -> None:
        # dst = src with its outermost and innermost dims swapped (NKI's (1, 0) / (2, 1, 0) / (3, 1, 2, 0)).
        dst, src = self.ap("dst").shape, self.ap("src").shape
        if not 2 <= len(src) <= 4 or dst != transposed_shape(src):
            raise VerifyException(
                f"dma_transpose needs 2-D to 4-D operands with dst = src with its first and last dims swapped, "
                f"got {dst} and {src}"
            )
        if self.axes is not None:
            axes = tuple(int(a) for a in self.axes.get_values())
            if axes != tuple([len(src) - 1, *range(1, len(src) - 1), 0]):
                raise VerifyException(f"dma_transpose axes {axes} are not the rank-{len(src)} permutation")


def transposed_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with its first and last dims swapped (the DMA transpose of every rank)."""
    return (shape[-1], *shape[1:-1], shape[0]) if len(shape) >= 2 else shape


class MatmulFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "stationary", "moving")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "stationary", "moving")
    # Absent = NKI's accumulate=None: the first matmul write to a PSUM location overwrites, later ones add.
    accumulate = opt_prop_def(BoolAttr)

    def verify_fields(self) -> None:
        dst, st, mv = (self.ap(r).shape for r in self.ROLES)
        k, m = st[0], _free(st)
        if mv[0] != k:
            raise VerifyException(f"matmul contraction mismatch: stationary K={k}, moving K={mv[0]}")
        if dst[0] != m or _free(dst) != _free(mv):
            raise VerifyException(f"matmul dst shape {dst} does not match [{m}, {_free(mv)}]")
        if k > 128 or m > 128 or _free(mv) > 512:
            raise VerifyException(f"matmul limits exceeded: K={k} (<=128), M={m} (<=128), N={_free(mv)} (<=512)")


class TransposeFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "data")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "data")
    engine = opt_prop_def(StringAttr)

    def verify_fields(self) -> None:
        _check_engine(self)
        d, s = self.ap("dst").shape, self.ap("data").shape
        if d[0] != _free(s) or _free(d) != s[0]:
            raise VerifyException(f"transpose shapes do not match: dst {d}, data {s}")


class TensorCopyFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "src")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "src")
    engine = opt_prop_def(StringAttr)

    def verify_fields(self) -> None:
        _check_engine(self)
        _same_elements(self, "dst", "src")


class TensorTensorFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "data1", "data2")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "data1", "data2")
    op = prop_def(StringAttr)
    engine = opt_prop_def(StringAttr)

    def verify_fields(self) -> None:
        _check_engine(self)
        _check_alu(self, "op")
        _same_elements(self, "dst", "data1")
        _same_elements(self, "dst", "data2")


class TensorScalarFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "data", "operand0", "operand1")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "data")
    op0 = prop_def(StringAttr)
    operand0 = opt_prop_def(FloatAttr)
    reverse0 = opt_prop_def(BoolAttr)
    op1 = opt_prop_def(StringAttr)
    operand1 = opt_prop_def(FloatAttr)
    reverse1 = opt_prop_def(BoolAttr)
    engine = opt_prop_def(StringAttr)

    def verify_fields(self) -> None:
        _check_engine(self)
        _check_alu(self, "op0", "op1")
        _scalar_xor_tensor(self, "operand0", required=True)
        _scalar_xor_tensor(self, "operand1", required=str_field(self, "op1") is not None)
        _same_elements(self, "dst", "data")
        _scalar_shape(self, "operand0", "operand1")


class ScalarTensorTensorFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "data", "operand0", "operand1")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "data", "operand1")
    op0 = prop_def(StringAttr)
    operand0 = opt_prop_def(FloatAttr)
    op1 = prop_def(StringAttr)
    reverse0 = opt_prop_def(BoolAttr)
    reverse1 = opt_prop_def(BoolAttr)

    def verify_fields(self) -> None:
        _check_alu(self, "op0", "op1")
        _scalar_xor_tensor(self, "operand0", required=True)
        _same_elements(self, "dst", "data")
        _same_elements(self, "dst", "operand1")
        _scalar_shape(self, "operand0")


class TensorReduceFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "data")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "data")
    op = prop_def(StringAttr)
    axes = prop_def(DenseArrayBase)
    negate = opt_prop_def(BoolAttr)
    keepdims = opt_prop_def(BoolAttr)

    @property
    def axis_list(self) -> list[int]:
        return [int(a) for a in self.axes.get_values()]

    def verify_fields(self) -> None:
        _check_alu(self, "op")
        data = self.ap("data").shape
        axes = self.axis_list
        if not axes or any(a <= 0 or a >= len(data) for a in axes):
            raise VerifyException(f"tensor_reduce axes {axes} must be free axes of a rank-{len(data)} operand")
        if sorted(axes) != list(range(len(data) - len(axes), len(data))):
            raise VerifyException(f"tensor_reduce axes {axes} must be the trailing free axes")
        kept = 1
        for a in range(len(data)):
            kept *= 1 if a in axes else data[a]
        if self.ap("dst").num_elements != kept:
            raise VerifyException(f"tensor_reduce dst has {self.ap('dst').num_elements} elements, expected {kept}")


class TensorScalarReduceFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "data", "operand0", "reduce_res")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "data", "reduce_res")
    op0 = prop_def(StringAttr)
    operand0 = opt_prop_def(FloatAttr)
    reduce_op = prop_def(StringAttr)
    reverse0 = opt_prop_def(BoolAttr)
    reduce_res_negate = opt_prop_def(BoolAttr)

    def verify_fields(self) -> None:
        _check_alu(self, "op0", "reduce_op")
        _scalar_xor_tensor(self, "operand0", required=True)
        _same_elements(self, "dst", "data")
        _scalar_shape(self, "operand0", "reduce_res")


class ActivationFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "data", "bias", "scale", "reduce_res")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "data")
    func = prop_def(StringAttr)
    bias = opt_prop_def(FloatAttr)
    scale = opt_prop_def(FloatAttr)
    reduce_op = opt_prop_def(StringAttr)
    reduce_cmd = opt_prop_def(StringAttr)

    def verify_fields(self) -> None:
        check_member("activation function", str_field(self, "func") or "", ACT_FUNCS)
        _check_alu(self, "reduce_op")
        cmd = str_field(self, "reduce_cmd")
        if cmd is not None:
            check_member("reduce command", cmd, REDUCE_CMDS)
        _scalar_xor_tensor(self, "bias", required=False)
        _scalar_xor_tensor(self, "scale", required=False)
        _same_elements(self, "dst", "data")
        _scalar_shape(self, "bias", "scale", "reduce_res")
        if self.has("reduce_res") and str_field(self, "reduce_op") is None:
            raise VerifyException("activation with reduce_res needs a reduce_op")


class MemsetFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst",)
    value = prop_def(AnyAttr())
    engine = opt_prop_def(StringAttr)

    def verify_fields(self) -> None:
        _check_engine(self)
        if not isinstance(self.value, FloatAttr | IntegerAttr):
            raise VerifyException("memset value must be a float or integer attribute")


class IotaFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst",)
    # value[p, i…] = pattern.offset + p·channel_multiplier + Σ step·i over pattern's free pairs
    pattern = prop_def(AccessPatternAttr)
    channel_multiplier = opt_prop_def(IntegerAttr)

    def verify_fields(self) -> None:
        _pattern_matches(self, "dst")


class AffineSelectFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "on_true")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "on_true")
    pattern = prop_def(AccessPatternAttr)
    channel_multiplier = opt_prop_def(IntegerAttr)
    cmp_op = prop_def(StringAttr)
    on_false_value = prop_def(FloatAttr)

    def verify_fields(self) -> None:
        _check_alu(self, "cmp_op")
        _same_elements(self, "dst", "on_true")
        _pattern_matches(self, "dst")


class ReciprocalFields(RoleOperandOp):
    ROLES: ClassVar[tuple[str, ...]] = ("dst", "data")
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst", "data")

    def verify_fields(self) -> None:
        _same_elements(self, "dst", "data")


def _free(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape[1:]:
        n *= d
    return n


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


def _pattern_matches(op: RoleOperandOp, role: str) -> None:
    # The pattern lists free dims only; the partition index enters through channel_multiplier.
    pat: Attribute = op.properties["pattern"]
    assert isinstance(pat, AccessPatternAttr)
    if pat.num_elements != _free(op.ap(role).shape):
        raise VerifyException(
            f"pattern covers {pat.num_elements} elements per partition, {role} has {_free(op.ap(role).shape)}"
        )


# Penguin/bir op name -> fields mixin. The order is the ISA-independent instruction vocabulary.
INSTRUCTION_FIELDS: dict[str, type[RoleOperandOp]] = {
    "dma_copy": DmaCopyFields,
    "dma_transpose": DmaTransposeFields,
    "matmul": MatmulFields,
    "transpose": TransposeFields,
    "tensor_copy": TensorCopyFields,
    "tensor_tensor": TensorTensorFields,
    "tensor_scalar": TensorScalarFields,
    "scalar_tensor_tensor": ScalarTensorTensorFields,
    "tensor_reduce": TensorReduceFields,
    "tensor_scalar_reduce": TensorScalarReduceFields,
    "activation": ActivationFields,
    "memset": MemsetFields,
    "iota": IotaFields,
    "affine_select": AffineSelectFields,
    "reciprocal": ReciprocalFields,
}

# Operand roles an instruction writes; every other role is read.
WRITE_ROLES = frozenset({"dst", "reduce_res"})

# NKI engine hint (nki.isa.engine) -> BIR engine.
ENGINE_OF_HINT = {"tensor": "pe", "scalar": "act", "vector": "dve", "gpsimd": "pool", "sync": "sp", "dma": "sp"}


def reads_dst(op: RoleOperandOp) -> bool:
    """Whether the destination is also read (PSUM accumulation)."""
    acc = op.properties.get("accumulate")
    return op.name.endswith(".matmul") and not (isinstance(acc, IntegerAttr) and acc.value.data == 0)
