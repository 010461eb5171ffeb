"""The documented restrictions of the Vector and GpSimd Engine instructions: element-wise arithmetic (tensor_tensor,
tensor_scalar, scalar_tensor_tensor), reductions and scans, copies and fills, selects, batch-norm statistics, the
top-8 / top-k family, gathers and shuffles."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nkic.target.instructions import (
    GPSIMD_CORE_PARTITIONS,
    GPSIMD_GROUP,
    LOCAL_GATHER_ELEMS,
    LOCAL_GATHER_MAX_INDICES,
    SHUFFLE_KEEP,
    SHUFFLE_QUADRANT,
    TOP8,
    TOP8_MAX_ELEMS,
    TOP8_MIN_ELEMS,
    shuffle_start_problem,
)
from nkic.target.rules import (
    Call,
    Operand,
    column,
    declared_engine,
    dtype_of,
    in_memories,
    rule,
    unavailable,
    waive,
)
from nkic.target.machine import TARGETS
from nkic.target.vocab import ALU_RECORDS, DTYPES, PACKED_DTYPES

PARTITIONS = 128

# The bitvec ALU operators of the reference's ALU table (nki-aluop); every other operator nkic knows is arithmetic.
BITVEC = frozenset({"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "invert", "left_shift", "right_shift",
                    "logical_shift_left", "logical_shift_right", "arith_shift_left", "arith_shift_right"})  # fmt: skip
INTS = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
FLOATS = ("float32", "bfloat16", "float16", "tfloat32", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "float8_e3m4")
FP32_MIN = float(np.finfo(np.float32).min)
_UNSET = (None, "bypass")

# Waiver reasons shared by many sentences.
_ON_CHIP = ("sbuf", "psum")
_CHAINING = ("semantics, not a restriction: reduce_res=None keeps the result in the engine's registers (the "
             "simulator carries them to the next call)")  # fmt: skip


def _unary_operand0(fn: str) -> Callable[[Call], str | None]:
    """With a unary op0 (target/vocab.py: abs, rsqrt, reciprocal, square, relu) operand0 is None or 0: an immediate
    0, never a tile."""
    unary = frozenset(r.name for r in ALU_RECORDS if r.unary)

    def test(call: Call) -> str | None:
        op0 = call.fields.get("op0")
        if op0 not in unary:
            return None
        if "operand0" in call.operands:
            return f"{fn}: op0={op0} is a unary operator: operand0 must be None or 0, not a tile"
        value = call.fields.get("operand0")
        if value not in (None, 0):
            return f"{fn}: op0={op0} is a unary operator: operand0 must be None or 0, got {value}"
        return None

    return test


def _is_int(dt: str | None) -> bool:
    return dt is None or dt in INTS


def _bitvec_dtypes(fn: str, *ops: str) -> Callable[[Call], str | None]:
    """With a bitvec operator among ``ops``, every tile operand is of an integer dtype."""

    def test(call: Call) -> str | None:
        used = [call.fields.get(o) for o in ops if call.fields.get(o) in BITVEC]
        if not used:
            return None
        for role, o in call.operands.items():
            if o.dtype not in INTS:
                return f"{fn}: the bitvec operator nl.{used[0]} needs integer tiles, '{role}' is {o.dtype}"
        return None

    return test


def _arithmetic(fn: str, *ops: str) -> Callable[[Call], str | None]:
    """None of ``ops`` is a bitvec operator."""

    def test(call: Call) -> str | None:
        for o in ops:
            if call.fields.get(o) in BITVEC:
                return f"{fn}: {o}=nl.{call.fields[o]} is a bitvec operator; {o} must be arithmetic"
        return None

    return test


def _both_psum(fn: str, a: str, b: str) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        x, y = call.operands.get(a), call.operands.get(b)
        if x is not None and y is not None and x.memory == y.memory == "psum":
            return f"{fn}: {a} and {b} cannot both be in PSUM"
        return None

    return test


def _dtype(fn: str, role: str, *allowed: str, quote: bool = True) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        dt = dtype_of(call, role)
        if dt is None or dt in allowed:
            return None
        name = f"'{role}'" if quote else role
        return f"{fn}: {name} must be {_either(allowed)}, got {dt}"

    return test


def _one_of(fn: str, name: str, allowed: tuple[str, ...], default: str | None = None) -> Callable[[Call], str | None]:
    """The ALU field ``name`` is one of ``allowed`` (absent: ``default``, which passes)."""

    def test(call: Call) -> str | None:
        v = call.fields.get(name, default)
        if v is None or v == default or v in allowed:
            return None
        return f"{fn}: {name} must be {_either(tuple('nl.' + a for a in allowed))}, got nl.{v}"

    return test


def _either(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"one of {', '.join(names)}" if len(names) > 3 else \
        f"{', '.join(names[:-1])} or {names[-1]}"


def _same_dtype(fn: str, a: str, b: str) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        x, y = dtype_of(call, a), dtype_of(call, b)
        if x is None or y is None or x == y:
            return None
        return f"{fn}: {a} is {x} but {b} is {y}; they must share one dtype"

    return test


def _all(*tests: Callable[[Call], str | None]) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        return next((p for p in (t(call) for t in tests) if p is not None), None)

    return test


def _dims_agree(fn: str, *roles: str, partitions: bool = True, free: bool = True,
                fits: bool = False) -> Callable[[Call], str | None]:  # fmt: skip
    """The operands of ``roles`` (those given) agree on their partitions (at most 128) and / or elements per
    partition (and, ``fits``, an SBUF operand fits one SBUF partition)."""

    def test(call: Call) -> str | None:
        given = [(r, call.operands[r]) for r in roles if r in call.operands]
        if not given:
            return None
        (r0, o0), rest = given[0], given[1:]
        for r, o in rest:
            if partitions and o.dims[0] != o0.dims[0]:
                return f"{fn}: partition count mismatch: '{r0}' has {o0.dims[0]} partitions, '{r}' has {o.dims[0]}"
            if free and o.dims[1] != o0.dims[1]:
                return f"{fn}: '{r0}' has {o0.dims[1]} elements per partition but '{r}' has {o.dims[1]}"
        for r, o in given:
            if partitions and o.dims[0] > PARTITIONS:
                return f"{fn}: '{r}' has {o.dims[0]} partitions, at most {PARTITIONS}"
            if fits and o.memory == "sbuf" and _bytes(o) > _sbuf_partition_bytes(call):
                return (f"{fn}: '{r}' needs {_bytes(o)} bytes per partition, more than one SBUF partition "
                        f"({_sbuf_partition_bytes(call)} bytes)")  # fmt: skip
        return None

    return test


def _bytes(o: Operand) -> int:
    return o.dims[1] * DTYPES[o.dtype].itemsize if o.dtype in DTYPES else 0


def _sbuf_partition_bytes(call: Call) -> int:
    """One SBUF partition's bytes on the call's generation (the largest of any when unknown)."""
    return max(t.sbuf_bytes_per_partition for t in TARGETS.values() if call.gen in (None, t.nc_version))


def _pattern_count(fn: str, *roles: str) -> Callable[[Call], str | None]:
    """The pattern's [step, num] pairs cover exactly the elements per partition of each of ``roles``."""

    def test(call: Call) -> str | None:
        pattern = call.fields.get("pattern")
        if not pattern:
            return None
        count = 1
        for _, n in pattern:
            count *= int(n)
        for role in roles:
            o = call.operands.get(role)
            if o is not None and o.dims[1] != count:
                return f"{fn}: pattern covers {count} elements per partition, {role} has {o.dims[1]}"
        return None

    return test


# ------------------------------------------------------------------------------------------------------------
# tensor_tensor
# ------------------------------------------------------------------------------------------------------------
rule("tensor_tensor", "However, the two input tiles, data1 and data2 cannot both reside in PSUM.")(
    _both_psum("tensor_tensor", "data1", "data2"))


@rule("tensor_tensor", "Since GpSimd Engine cannot access PSUM, the input/output tiles cannot be in PSUM if op is "
      "nl.power.")
def _tensor_tensor_power_psum(call: Call) -> str | None:
    if call.fields.get("op") != "power":
        return None
    role = next((r for r, o in call.operands.items() if o.memory == "psum"), None)
    return None if role is None else f"tensor_tensor: op=nl.power runs on GpSimd, which cannot read PSUM ('{role}')"


rule("tensor_tensor", "For bitvec operators, the input/output data types must be integer types")(
    _bitvec_dtypes("tensor_tensor", "op"))
rule("tensor_tensor", "The two tiles must have the same partition axis size and the same number of elements per "
     "partition.")(_dims_agree("tensor_tensor", "dst", "data1", "data2"))

# ------------------------------------------------------------------------------------------------------------
# tensor_scalar
# ------------------------------------------------------------------------------------------------------------
# Which engine may run which operators is the declaration's (InstrSpec engines / engine_ops: assign-engines and the
# ISA verifiers ask it too); these sentences are rules that ask it for the engine the call names.
for _says in ("Apply up to two math operators to the input data tile by broadcasting scalar/vector operands in the "
              "free dimension using Vector or Scalar or GpSimd Engine: (data <op0> operand0) <op1> operand1.",
              "If bitvec operators are used, the tensor_scalar instruction must run on Vector Engine.",
              "The Scalar Engine on trn2 only supports some operator combinations:",
              "`nki.isa.engine.gpsimd` (only allowed for rsqrt)"):  # fmt: skip
    rule("tensor_scalar", _says)(declared_engine("tensor_scalar"))
rule("tensor_scalar", "Must be None or 0 when op0 is a unary operator (e.g., nl.abs).")(
    _unary_operand0("tensor_scalar"))
# The Tensor indirection paragraphs of tensor_copy, tensor_tensor and tensor_scalar: rules of their own
# (target/rules/indirection.py).


@rule("tensor_scalar", "op1 and operand1 are optional, but must be None (default values) when unused.",
      api="nisa.tensor_scalar")
def _tensor_scalar_unused_operand1(call: Call) -> str | None:
    # The frontend asks with the fact 'operand1_without_op1' (no instruction field holds an operand without its op).
    if call.fields.get("operand1_without_op1"):
        return "tensor_scalar: operand1 is given but op1 is None; pass neither or both"
    return None


@rule("tensor_scalar", "The two operators, op0 and op1, in a tensor_scalar instruction must be of the same type "
      "(both bitvec or both arithmetic).")
def _tensor_scalar_op_kinds(call: Call) -> str | None:
    op0, op1 = call.fields.get("op0"), call.fields.get("op1")
    if op0 in _UNSET or op1 in _UNSET or (op0 in BITVEC) == (op1 in BITVEC):
        return None
    return f"tensor_scalar: op0=nl.{op0} and op1=nl.{op1} mix a bitvec and an arithmetic operator"


rule("tensor_scalar", "Also, the input/output data types must be integer types, and input elements are treated as "
     "bit patterns without any data type casting.")(_bitvec_dtypes("tensor_scalar", "op0", "op1"))


# Read strictly (an operand tile must be float32 with an arithmetic operator), nki-library's MX MoE kernel
# (moe_tkg/selective_expert_mx_impl.py) breaks it with a bfloat16 (P, 1) operand0 tile, and it runs on the device.
waive("nisa.tensor_scalar", "Also, arithmetic operators impose no restriction on the data types", "ambiguous: "
      "nki-library passes a bfloat16 (P, 1) operand0 tile to an arithmetic tensor_scalar (moe_tkg/"
      "selective_expert_mx_impl.py) and it runs on the device; the sentence may mean the operand registers hold "
      "float32 (a number is an fp32 immediate, a tile is read as fp32). Accepted")


# ------------------------------------------------------------------------------------------------------------
# scalar_tensor_tensor
# ------------------------------------------------------------------------------------------------------------
rule("scalar_tensor_tensor", "Both op0 and op1 must be arithmetic operators")(
    _arithmetic("scalar_tensor_tensor", "op0", "op1"))
rule("scalar_tensor_tensor", "Bitvec operators are not supported.")(_arithmetic("scalar_tensor_tensor", "op0", "op1"))
rule("scalar_tensor_tensor", "However, data and operand1 cannot both reside in PSUM.")(
    _both_psum("scalar_tensor_tensor", "data", "operand1"))
rule("scalar_tensor_tensor", "The operand1 tile must have the same shape as data for element-wise operation.")(
    _dims_agree("scalar_tensor_tensor", "data", "operand1"))
rule("scalar_tensor_tensor", "The operand1 must be an SBUF or PSUM tile.")(
    in_memories("scalar_tensor_tensor", {"operand1": _ON_CHIP}))
rule("scalar_tensor_tensor", "The partition dimension size of input data, operand1, and output dst tiles must be the "
     "same and must not exceed 128.")(_dims_agree("scalar_tensor_tensor", "data", "operand1", "dst", free=False))
rule("scalar_tensor_tensor", "The total number of elements per partition of input data, operand1, and output dst "
     "tiles must be the same and must not exceed the physical size of each SBUF partition.")(
    _dims_agree("scalar_tensor_tensor", "data", "operand1", "dst", partitions=False, fits=True))
rule("scalar_tensor_tensor", "If operand0 is not a scalar, the partition dimension size of operand0 must be the same "
     "as that of data and the number of elements per partition of operand0 must be 1.")(
    column("scalar_tensor_tensor", "data", ("operand0",)))

# ------------------------------------------------------------------------------------------------------------
# tensor_reduce
# ------------------------------------------------------------------------------------------------------------
rule("tensor_reduce", "For bitvec operators, the input/output data types must be integer types")(
    _bitvec_dtypes("tensor_reduce", "op"))


@rule("tensor_reduce", ":param negate: if True, reduction result is multiplied by -1.0; only applicable when op is an "
      "arithmetic operator")
def _tensor_reduce_negate(call: Call) -> str | None:
    op = call.fields.get("op")
    if call.fields.get("negate") and op in BITVEC:
        return f"tensor_reduce: negate=True needs an arithmetic op, nl.{op} is a bitvec operator"
    return None


def _free_axes_only(call: Call) -> str | None:
    axes = call.fields.get("axes")
    return "tensor_reduce: cannot reduce along the partition axis 0" if axes and 0 in axes else None


def _trailing_axes(call: Call) -> str | None:
    axes, shape = call.fields.get("axes"), call.fields.get("shape")  # shape: the data's, asked at the call
    if not axes or shape is None or list(axes) == list(range(len(shape) - len(axes), len(shape))):
        return None
    return f"tensor_reduce: axes {tuple(axes)} must be the trailing free axes of a rank-{len(shape)} tensor"


def _dst_follows_axes(call: Call) -> str | None:
    axes, shape, dst = call.fields.get("axes"), call.fields.get("shape"), call.operands.get("dst")
    if not axes or shape is None or dst is None:
        return None
    kept = 1
    for a in range(1, len(shape)):
        kept *= 1 if a in axes else shape[a]
    if dst.dims[1] != kept:
        return f"tensor_reduce: dst has {dst.dims[1]} elements per partition, the result has {kept}"
    return None


rule("tensor_reduce", "Axis 0 (partition axis) cannot be reduced.")(_free_axes_only)
rule("tensor_reduce", "nisa.tensor_reduce only supports free axes reduction.")(_free_axes_only)
rule("tensor_reduce", "Axis 0 (partition dim) cannot be reduced.")(_free_axes_only)
rule("tensor_reduce", "The reduction axes must be the last contiguous free dimension(s) of the tile, ending at the "
     "final dimension.")(_trailing_axes)
rule("tensor_reduce", "must be the last contiguous free dimension(s) ending at the final dim.")(_trailing_axes)
rule("tensor_reduce", "The number of elements per partition in dst must be consistent with the axis field.")(
    _dst_follows_axes)
rule("tensor_reduce", "For example, if axis indicates all free dimensions of data are reduced, the number of elements "
     "per partition in dst must be 1.")(_dst_follows_axes)
waive("nisa.tensor_reduce", "- axis=(3,) reduces only D3", "semantics, not a restriction: an example of which "
      "trailing axes reduce (frontend/recorders/vector.py:tensor_reduce)")
rule("tensor_reduce", "The partition dimension size of input data and output dst tiles must be the same and must not "
     "exceed 128.")(_dims_agree("tensor_reduce", "data", "dst", free=False))
rule("tensor_reduce", "The number of elements per partition of data must not exceed the physical size of each SBUF "
     "partition.")(_dims_agree("tensor_reduce", "data", partitions=False, free=False, fits=True))

# ------------------------------------------------------------------------------------------------------------
# tensor_scalar_reduce
# ------------------------------------------------------------------------------------------------------------
rule("tensor_scalar_reduce", "Also, op0 can only be arithmetic operation")(_arithmetic("tensor_scalar_reduce", "op0"))
rule("tensor_scalar_reduce", "Bitvec operators are not supported in this API.")(
    _arithmetic("tensor_scalar_reduce", "op0"))
waive("nisa.tensor_scalar_reduce", "Unlike regular nisa.tensor_scalar", "signature: nisa.tensor_scalar_reduce has "
      "no op1/operand1 parameter (checked when binding the call)")
rule("tensor_scalar_reduce", "The reduction result is written into reduce_res, which must be a SBUF/PSUM tile with the "
     "same partition axis size as the input tile data and one element per partition.")(_all(
         in_memories("tensor_scalar_reduce", {"reduce_res": _ON_CHIP}),
         column("tensor_scalar_reduce", "data", ("reduce_res",))))


@rule("tensor_scalar_reduce", "reduce_init should only be set when reduce_cmd is load_reduce.")
def _reduce_init_only_to_load(call: Call) -> str | None:
    # The call's facts 'reduce_cmd' and 'reduce_init_given' (the instruction keeps neither: nkic runs reset_reduce).
    cmd = call.fields.get("reduce_cmd")
    if call.fields.get("reduce_init_given") and cmd not in (None, "load_reduce"):
        return f"tensor_scalar_reduce: reduce_init is set but reduce_cmd is {cmd}; it is read only by load_reduce"
    return None


@rule("tensor_scalar_reduce", "Must be provided when reduce_cmd is load_reduce.")
def _reduce_init_for_load(call: Call) -> str | None:
    if call.fields.get("reduce_cmd") == "load_reduce" and call.fields.get("reduce_init_given") is False:
        return "tensor_scalar_reduce: reduce_cmd=load_reduce needs reduce_init, the value the reduction starts from"
    return None

rule("tensor_scalar_reduce", "Must be None or 0 when op0 is a unary operator (e.g., nl.abs).")(
    _unary_operand0("tensor_scalar_reduce"))
_REVERSE0 = ("ambiguous: reverse0 is marked '(not supported yet)' yet its meaning is documented; nkic accepts it and "
             "implements the documented meaning (operand0 as op0's lhs)")  # fmt: skip
waive("nisa.tensor_scalar_reduce", ":param reverse0:", _REVERSE0)
waive("nisa.tensor_scalar_reduce", "`<-- currently not supported yet.`", _REVERSE0)
waive("nisa.tensor_scalar_reduce", "This is useful when chaining multiple calls", _CHAINING)

# ------------------------------------------------------------------------------------------------------------
# tensor_scalar_cumulative
# ------------------------------------------------------------------------------------------------------------
_CUMULATIVE_OPS = ("add", "subtract", "multiply", "maximum", "minimum")
rule("tensor_scalar_cumulative", "- Scalar operation (op0) must be an arithmetic op (e.g., add, mult, max)")(
    _arithmetic("tensor_scalar_cumulative", "op0"))
rule("tensor_scalar_cumulative", "- Reduction operation (op1) is limited to add, subtract, mult, max, min")(
    _one_of("tensor_scalar_cumulative", "op1", _CUMULATIVE_OPS))


@rule("tensor_scalar_cumulative", "- INT32/UINT32 are not supported as input/output dtypes (ISA limitation)")
def _cumulative_no_int32(call: Call) -> str | None:
    for role in ("dst", "src"):
        dt = dtype_of(call, role)
        if dt in ("int32", "uint32"):
            return f"tensor_scalar_cumulative: '{role}' cannot be {dt} (the instruction has no 32-bit integer mode)"
    return None


@rule("tensor_scalar_cumulative", "Must be FP32 datatype")
def _cumulative_imm_fp32(call: Call) -> str | None:
    for role in ("imm0", "imm1"):
        dt = dtype_of(call, role)
        if dt not in (None, "float32"):
            return f"tensor_scalar_cumulative: the {role} tile is {dt}, it must be float32"
    return None



# ------------------------------------------------------------------------------------------------------------
# tensor_tensor_scan
# ------------------------------------------------------------------------------------------------------------
rule("tensor_tensor_scan", "The two input tiles, data0 and data1 cannot both reside in PSUM.")(
    _both_psum("tensor_tensor_scan", "data0", "data1"))
rule("tensor_tensor_scan", "The two input tiles (data0 and data1) must have the same partition axis size and the same "
     "number of elements per partition.")(_dims_agree("tensor_tensor_scan", "data0", "data1"))

# ------------------------------------------------------------------------------------------------------------
# tensor_copy / tensor_copy_predicated / memset
# ------------------------------------------------------------------------------------------------------------
waive("nisa.tensor_copy", "Users should be cautious", "advice, not a restriction")
rule("tensor_copy", "In addition, since GpSimd Engine cannot access PSUM in NeuronCore, Scalar or Vector Engine must "
     "be chosen when the input or output tile is in PSUM")(declared_engine("tensor_copy"))
rule("tensor_copy", "On NeuronCore v2, tensor_copy is not supported on the Scalar Engine.")(
    declared_engine("tensor_copy"))
rule("tensor_copy", ":param src: the source of copy, must be a tile in SBUF or PSUM.")(
    in_memories("tensor_copy", {"src": _ON_CHIP}))


@rule("tensor_copy_predicated", "1. src (if it is a tensor), dst, and predicate must occupy the same number of "
      "partitions and same number of elements per partition. 2. predicate must be of type uint8, uint16, or uint32. "
      "3. src and dst must share the same data type.")
def _copy_predicated(call: Call) -> str | None:
    dst = call.operands.get("dst")
    for role in ("src", "predicate"):
        o = call.operands.get(role)
        if dst is not None and o is not None and o.dims != dst.dims:
            return (f"tensor_copy_predicated: '{role}' is {o.dims[0]} x {o.dims[1]} (partitions x elements), dst is "
                    f"{dst.dims[0]} x {dst.dims[1]}")  # fmt: skip
    return _dtype("tensor_copy_predicated", "predicate", "uint8", "uint16", "uint32", quote=False)(call) or _same_dtype(
        "tensor_copy_predicated", "src", "dst")(call)


waive("nisa.tensor_copy_predicated", "This instruction provides low-level control", "semantics, not a restriction: "
      "what the instruction is for")


@rule("memset", "For x4 packed types (float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4), only value=0 is "
      "supported.")
def _memset_packed(call: Call) -> str | None:
    dt, value = dtype_of(call, "dst"), call.fields.get("value")
    if dt in PACKED_DTYPES and value not in (None, 0):
        return f"memset: a packed MX tile ({dt}) can only be filled with 0, got {value}"
    return None


# ------------------------------------------------------------------------------------------------------------
# iota / affine_select / range_select / select_reduce
# ------------------------------------------------------------------------------------------------------------
def _pattern_4d(fn: str) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        pattern = call.fields.get("pattern")
        if isinstance(pattern, (tuple, list)) and len(pattern) > 4:
            return f"{fn}: pattern {[list(p) for p in pattern]} has {len(pattern)} [step, num] pairs, at most 4"
        return None

    return test


rule("iota", "The pattern is defined by an int32 offset, a tensor access pattern of up to 4D pattern and an int32 "
     "channel_multiplier.")(_pattern_4d("iota"))
rule("iota", "a list of [step, num] to describe up to 4D tensor sizes and strides")(_pattern_4d("iota"))
rule("affine_select", "a list of [step, num] to describe up to 4D tensor sizes and strides for affine expression "
     "generation")(_pattern_4d("affine_select"))
rule("iota", "The total number of elements in pattern must match the number of elements per partition in the dst "
     "tile.")(_pattern_count("iota", "dst"))
rule("iota", "The output dst tile must be in SBUF.")(in_memories("iota", {"dst": ("sbuf",)}))
rule("iota", "The partition dimension size of dst must not exceed 128.")(_dims_agree("iota", "dst", free=False))
rule("iota", "The number of elements per partition of dst must not exceed the physical size of each SBUF "
     "partition.")(_dims_agree("iota", "dst", partitions=False, free=False, fits=True))

rule("affine_select", "- The total number of elements in pattern must match the number of elements per partition in "
     "the dst and on_true_tile tiles.")(_pattern_count("affine_select", "dst", "on_true"))
# (a PSUM tile, e.g. matmul scores, gets the reason and the fix at the nisa call:
# frontend/recorders/select.py:affine_select)
rule("affine_select", "The output dst tile must be in SBUF.")(in_memories("affine_select", {"dst": ("sbuf",)}))
rule("affine_select", "The input on_true_tile must also be in SBUF.")(
    in_memories("affine_select", {"on_true": ("sbuf",)}))
waive("nisa.affine_select", "The on_false_value must be float32", "semantics, not a restriction: on_false_value is "
      "a number, stored as the instruction's fp32 immediate whatever the tiles' dtypes "
      "(frontend/recorders/select.py:affine_select)")
rule("affine_select", "The input tile on_true_tile, the calculated boolean predicate tile, and the returned output "
     "tile must have the same partition dimension size")(_dims_agree("affine_select", "on_true", "dst", free=False))
rule("affine_select", "- The partition dimension size of dst and on_true_tile must be the same and must not exceed "
     "128.")(_dims_agree("affine_select", "dst", "on_true", free=False))
rule("affine_select", "- The number of elements per partition of dst and on_true_tile must not exceed the physical "
     "size of each SBUF partition.")(_dims_agree("affine_select", "dst", "on_true", partitions=False, free=False,
                                                 fits=True))  # fmt: skip

_RANGE_COMPARISONS = ("equal", "less", "less_equal", "greater", "greater_equal")
rule("range_select", "The comparison operators must be one of:")(_all(
    _one_of("range_select", "comp_op0", _RANGE_COMPARISONS), _one_of("range_select", "comp_op1", _RANGE_COMPARISONS)))


@rule("range_select", "- on_true_tile must be one of the FP dtypes, and bound0/bound1 must be FP32 types.")
def _range_select_dtypes(call: Call) -> str | None:
    dt = dtype_of(call, "on_true")
    if dt is not None and dt not in FLOATS:
        return f"range_select: on_true_tile must be a floating-point tile, got {dt}"
    return _dtype("range_select", "bound0", "float32")(call) or _dtype("range_select", "bound1", "float32")(call)


@rule("range_select", "Due to hardware constraints, this must be FP32_MIN (-3.4028235e+38).")
def _range_select_fill(call: Call) -> str | None:
    v = call.fields.get("on_false_value")
    if v is None or np.float32(v) == np.float32(FP32_MIN):
        return None
    return f"range_select: on_false_value must be FP32_MIN (-3.4028235e+38), got {v}"


rule("range_select", "Currently only nl.maximum is supported.")(
    _one_of("range_select", "reduce_op", ("maximum",), default="bypass"))
unavailable("range_select", "Available only on NeuronCore-v3 and newer.")
waive("nisa.range_select", "In this case, you must make sure reduce_res.dtype is FP32", "advice, not a restriction: "
      "a numerical-stability note (a bf16 row of -inf against a non-fp32 max)")
rule("range_select", "Partition dim sizes must match across on_true_tile, bound0, and bound1:")(
    _dims_agree("range_select", "on_true", "bound0", "bound1", free=False))
rule("range_select", "- bound0 and bound1 must have one element per partition")(
    column("range_select", "on_true", ("bound0", "bound1")))
waive("nisa.range_select", "This is useful when chaining multiple calls", _CHAINING)
waive("nisa.range_select", "Defaults to 0, and must be a compile-time integer.", "signature: range_start is int()-ed "
      "at the call (frontend/recorders/select.py:range_select; a loop index unrolls)")

rule("select_reduce", "- reduce_op only supports max")(
    _one_of("select_reduce", "reduce_op", ("maximum",), default="bypass"))
rule("select_reduce", ":param reduce_op: (optional) Reduction operator to apply (only nl.maximum is supported)")(
    _one_of("select_reduce", "reduce_op", ("maximum",), default="bypass"))


@rule("select_reduce", "- reduce_res dtype must of float type")
def _select_reduce_res_float(call: Call) -> str | None:
    dt = dtype_of(call, "reduce_res")
    return None if dt is None or dt in FLOATS else f"select_reduce: reduce_res must be a float tile, got {dt}"


rule("select_reduce", "- on_true, dst, and predicate must have identical shapes (same number of partitions and "
     "elements per partition)")(_dims_agree("select_reduce", "on_true", "dst", "predicate"))
waive("nisa.select_reduce", "- on_false dtype must be float32 if on_false is a scalar.", "semantics, not a "
      "restriction: a number on_false is stored as the instruction's fp32 immediate "
      "(frontend/recorders/record.py:_scalar)")
rule("select_reduce", "- reduce_res must be a vector of shape (on_true.shape[0], 1)")(
    column("select_reduce", "on_true", ("reduce_res",)))
rule("select_reduce", ":param reduce_res: (optional) Tile to store reduction results, must have shape "
     "(on_true.shape[0], 1)")(column("select_reduce", "on_true", ("reduce_res",)))
waive("nisa.select_reduce", "This is useful when chaining multiple calls", _CHAINING)

# ------------------------------------------------------------------------------------------------------------
# bn_stats / bn_aggr
# ------------------------------------------------------------------------------------------------------------
BN_STATS_FMAX = 512  # nl.tile_size.bn_stats_fmax, the same on every generation (Target.bn_stats_fmax)


def _bn_stats_fmax(call: Call) -> str | None:
    data = call.operands.get("data")
    if data is None or data.dims[1] <= BN_STATS_FMAX:
        return None
    return f"bn_stats: data has {data.dims[1]} elements per partition, at most {BN_STATS_FMAX}"


rule("bn_stats", "Due to hardware limitation, the number of elements per partition (i.e., free dimension size) of the "
     "input data must not exceed 512 (nl.tile_size.bn_stats_fmax).")(_bn_stats_fmax)
rule("bn_stats", ":param data: the input tile (up to 512 elements per partition)")(_bn_stats_fmax)
@rule("bn_aggr", "Therefore, the number of elements per partition of data must be a modulo of three.")
def _bn_aggr_triples(call: Call) -> str | None:
    data = call.operands.get("data")
    if data is None or data.dims[1] % 3 == 0:
        return None
    return (f"bn_aggr reads (count, mean, variance * count) triples of {data.dims}: its elements per partition must "
            "be a multiple of 3")  # fmt: skip

# ------------------------------------------------------------------------------------------------------------
# max8 / nc_find_index8 / topk / nonzero_with_count
# ------------------------------------------------------------------------------------------------------------
def _ranks(fn: str, most: dict[str, int], exactly: dict[str, int]) -> Callable[[Call], str | None]:
    """The tensors' ranks (the fact 'shapes', asked at the call: the instruction keeps no rank)."""

    def test(call: Call) -> str | None:
        shapes = call.fields.get("shapes") or {}
        for role, n in most.items():
            if role in shapes and len(shapes[role]) > n:
                return f"{fn}: '{role}' can be at most {n}-dimensional, got shape {tuple(shapes[role])}"
        for role, n in exactly.items():
            if role in shapes and len(shapes[role]) != n:
                src = call.operands.get("src")
                return f"{fn}: dst must be a 2-D [{src.dims[0] if src else 'P'}, 8] tile, got shape {shapes[role]}"
        return None

    return test


rule("max8", "The source tile can be up to 3-dimensional, while the output tile is always 2-dimensional.")(
    _ranks("max8", {"src": 3}, {"dst": 2}))
rule("find_index8", "The data tensor can be up to 3-dimensional, while the vals tensor must be up to 3-dimensional.")(
    _ranks("nc_find_index8", {"data": 3, "vals": 3}, {}))
def _top8_count(fn: str, role: str) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        o = call.operands.get(role)
        if o is None or TOP8_MIN_ELEMS <= o.dims[1] <= TOP8_MAX_ELEMS:
            return None
        return (f"{fn}'s {role} has {o.dims[1]} elements per partition, not between {TOP8_MIN_ELEMS} and "
                f"{TOP8_MAX_ELEMS}")  # fmt: skip

    return test


@rule("max8", "The source and output must have the same partition dimension size:")
def _max8_dst(call: Call) -> str | None:
    # the sentence's list goes on: "- output: [par_dim, 8]" (and "exactly 8 elements per partition")
    src, dst = call.operands.get("src"), call.operands.get("dst")
    if src is None or dst is None or dst.dims == (src.dims[0], TOP8):
        return None
    shape = (call.fields.get("shapes") or {}).get("dst")
    got = f"shape {tuple(shape)}" if shape is not None else f"{dst.dims[0]} x {dst.dims[1]}"
    return f"max8: dst must be a 2-D [{src.dims[0]}, {TOP8}] tile, got {got}"


rule("max8", "The number of elements read per partition must be between 8 and 16,384 inclusive.")(
    _top8_count("max8", "src"))
rule("find_index8", "The data tensor must have between 8 and 16,384 elements per partition.")(
    _top8_count("nc_find_index8", "data"))


@rule("find_index8", "The vals tensor must have exactly 8 elements per partition.")
def _find_index8_vals(call: Call) -> str | None:
    vals, data = call.operands.get("vals"), call.operands.get("data")
    if vals is None or data is None or vals.dims == (data.dims[0], 8):
        return None
    return f"nc_find_index8: 'vals' must hold 8 elements on each of {data.dims[0]} partitions, got {vals.dims}"


waive("nisa.nc_find_index8", "If provided, a mask is applied only to the data tensor.", "semantics, not a "
      "restriction: what a mask would apply to (nkic takes no mask= on nisa calls: frontend/recorders/record.py:_mask)")

rule("topk", "The source must be BF16.")(_dtype("topk", "src", "bfloat16"))
rule("topk", "- Source must be BF16 in SBUF.")(_dtype("topk", "src", "bfloat16"))
rule("topk", "- val_dst must be BF16 in SBUF with shape [par_dim, k].")(_dtype("topk", "val_dst", "bfloat16"))
rule("topk", "- idx_dst must be uint32 in SBUF with shape [par_dim, k].")(_dtype("topk", "idx_dst", "uint32"))
rule("topk", "The source and outputs must be in SBUF.")(
    in_memories("topk", {"src": ("sbuf",), "val_dst": ("sbuf",), "idx_dst": ("sbuf",)}))


@rule("topk", "- partition dim must be a multiple of 16")
def _topk_groups(call: Call) -> str | None:
    src = call.operands.get("src")
    if src is None or src.dims[0] % GPSIMD_GROUP == 0:
        return None
    return f"topk works on groups of {GPSIMD_GROUP} partitions, src has {src.dims[0]}"


unavailable("nonzero_with_count", "Available only on NeuronCore-v3 and newer.")
_GPSIMD_CORES = ("semantics, not a restriction: which partitions the instruction reads and writes (runtime/"
                 "simulator.py leaves the others untouched)")  # fmt: skip
waive("nisa.nonzero_with_count", "NOTE: this instruction only operates on partitions", _GPSIMD_CORES)
waive("nisa.nonzero_with_count", "In nonzero_with_count, each GpSimd core reads from", _GPSIMD_CORES)

# ------------------------------------------------------------------------------------------------------------
# local_gather / nc_n_gather / nc_stream_shuffle / sequence_bounds
# ------------------------------------------------------------------------------------------------------------

waive("nisa.local_gather", "If you only need to gather elements within a partition", "advice, not a restriction")


@rule("local_gather", "Note, num_valid_indices must not exceed the total element count in each 16-partition index "
      "slice (i.e., num_valid_indices <= index.size / (index.shape[0] / 16)).")
def _local_gather_valid(call: Call) -> str | None:
    index, valid = call.operands.get("index"), call.fields.get("num_valid_indices")
    if index is None or valid is None:
        return None
    per_core = GPSIMD_CORE_PARTITIONS * index.dims[1]
    if not 1 <= valid <= per_core:
        return (f"local_gather: num_valid_indices must be 1..{per_core} (the indices in a 16-partition slice of "
                f"index), got {valid}")  # fmt: skip
    return None


rule("local_gather", "The indices in index tile must be uint16 types.")(
    _dtype("local_gather", "index", "uint16", quote=False))


@rule("local_gather", "The number of contiguous elements to gather per index per partition num_elem_per_idx must be "
      "one of the following values: [1, 2, 4, 8, 16, 32].")
def _local_gather_elems(call: Call) -> str | None:
    n = call.fields.get("num_elem_per_idx")
    if n is None or n in LOCAL_GATHER_ELEMS:
        return None
    return f"local_gather: num_elem_per_idx must be one of {list(LOCAL_GATHER_ELEMS)}, got {n}"


@rule("local_gather", "The number of indices for gather per core must be less than or equal to 4096.")
def _local_gather_max(call: Call) -> str | None:
    valid = call.fields.get("num_valid_indices")
    if valid is None or valid <= LOCAL_GATHER_MAX_INDICES:
        return None
    return f"local_gather: {valid} indices per GpSimd core, at most {LOCAL_GATHER_MAX_INDICES}"


@rule("local_gather", "The partition axis size of src_buffer must match that of index and must be a multiple of 16.")
def _local_gather_partitions(call: Call) -> str | None:
    src, index = call.operands.get("src_buffer"), call.operands.get("index")
    if src is None or index is None:
        return None
    if src.dims[0] != index.dims[0] or src.dims[0] % GPSIMD_CORE_PARTITIONS:
        return (f"local_gather: src_buffer has {src.dims[0]} partitions and index {index.dims[0]}; they must match "
                f"and be a multiple of {GPSIMD_CORE_PARTITIONS}")  # fmt: skip
    return None

rule("nc_n_gather", "The output dst tile must have the same data type as data.")(
    _same_dtype("nc_n_gather", "dst", "data"))
rule("nc_n_gather", "The indices tile must be uint32.")(_dtype("nc_n_gather", "indices", "uint32", quote=False))
rule("nc_n_gather", "All input and output tiles (data, indices, and dst) must be in SBUF.")(
    in_memories("nc_n_gather", {"data": ("sbuf",), "indices": ("sbuf",), "dst": ("sbuf",)}))
rule("nc_n_gather", "GpSimd Engine cannot access PSUM")(declared_engine("nc_n_gather"))
rule("nc_n_gather", "The partition dimension of data, indices, and dst must be the same.")(
    _dims_agree("nc_n_gather", "data", "indices", "dst", free=False))
rule("nc_n_gather", "The partition dimension size of data, indices, and dst must be the same and must not exceed "
     "128.")(_dims_agree("nc_n_gather", "data", "indices", "dst", free=False))
rule("nc_n_gather", "The number of elements per partition in dst must match the number of elements per partition in "
     "indices.")(_dims_agree("nc_n_gather", "dst", "indices", partitions=False))
waive("nisa.nc_n_gather", "The indices' values must be within the range", "checked: runtime/exec_index.py (the "
      "indices are run-time data: an index out of range is a simulation error)")


@rule("nc_stream_shuffle", "#. dst must have same data type as src. #. dst must have the same number of elements per "
      "partition as src.")
def _shuffle_like(call: Call) -> str | None:
    src, dst = call.operands.get("src"), call.operands.get("dst")
    if src is None or dst is None:
        return None
    if src.dims[1] != dst.dims[1]:
        return f"nc_stream_shuffle: dst has {dst.dims[1]} elements per partition but src has {src.dims[1]}"
    return _same_dtype("nc_stream_shuffle", "dst", "src")(call)


@rule("nc_stream_shuffle", "Each mask element must be in data type int or affine expression.")
def _shuffle_mask_entries(call: Call) -> str | None:
    """32 integers (affine expressions are bound by unrolling), each a partition of the quadrant or 255 (keep)."""
    mask = call.fields.get("shuffle_mask")
    if mask is None:
        return None
    if not isinstance(mask, (tuple, list)):
        return f"nc_stream_shuffle: shuffle_mask must be a list of {SHUFFLE_QUADRANT} integers, got {mask!r}"
    if len(mask) != SHUFFLE_QUADRANT:
        return f"nc_stream_shuffle: shuffle_mask must have {SHUFFLE_QUADRANT} entries, got {len(mask)}"
    bad = [m for m in mask if isinstance(m, bool) or not isinstance(m, (int, np.integer))
           or not (0 <= m < SHUFFLE_QUADRANT or m == SHUFFLE_KEEP)]  # fmt: skip
    if bad:
        return (f"nc_stream_shuffle: shuffle_mask entries must be 0..{SHUFFLE_QUADRANT - 1} (a partition of the "
                f"quadrant) or {SHUFFLE_KEEP} (keep), got {bad}")  # fmt: skip
    return None


def _shuffle_starts(active: tuple[int, ...]) -> Callable[[Call], str | None]:
    """With ``active`` active partitions, src and dst start where the reference allows (``shuffle_start_problem``,
    from the call's fact 'starts': the tiles' start partitions where the trace knows them)."""

    def test(call: Call) -> str | None:
        src, dst, starts = call.operands.get("src"), call.operands.get("dst"), call.fields.get("starts")
        if src is None or dst is None or not starts:
            return None
        if -(-max(src.dims[0], dst.dims[0]) // SHUFFLE_QUADRANT) * SHUFFLE_QUADRANT not in active:
            return None
        problem = shuffle_start_problem(src.dims[0], dst.dims[0], starts)
        return None if problem is None else f"nc_stream_shuffle: {problem}"

    return test


rule("nc_stream_shuffle", "If num_active_partitions is 96/128, src_start_partition/dst_start_partition must be 0.")(
    _shuffle_starts((96, 128)))
rule("nc_stream_shuffle", "If num_active_partitions is 64, src_start_partition/dst_start_partition must be 0/64.")(
    _shuffle_starts((64,)))
rule("nc_stream_shuffle", "If num_active_partitions is 32, src_start_partition/dst_start_partition must be "
     "0/32/64/96.")(_shuffle_starts((32,)))


@rule("sequence_bounds", "The partition dimension must always be 1.")
def _sequence_bounds_one_partition(call: Call) -> str | None:
    for role in ("dst", "segment_ids"):
        o = call.operands.get(role)
        if o is not None and o.dims[0] != 1:
            return f"sequence_bounds: '{role}' must have one partition, got {o.dims[0]}"
    return None

rule("sequence_bounds", "Both the input tile (segment_ids) and output tile (dst) must have data type nl.float32 or "
     "nl.int32.")(_all(_dtype("sequence_bounds", "segment_ids", "float32", "int32"),
                      _dtype("sequence_bounds", "dst", "float32", "int32")))  # fmt: skip
waive("nisa.sequence_bounds", "All segment IDs must be non-negative integers.", "checked: runtime/exec_index.py (the "
      "ids are run-time data: a negative or non-integral id is a simulation error)")
