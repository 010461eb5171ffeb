"""The documented restrictions of the Scalar Engine instructions (activation, activate2) and of the elementwise and
random-number instructions documented next to them (exponential, reciprocal, dropout, rng, rand2, set_rng_seed,
rand_set_state, rand_get_state)."""

from __future__ import annotations

from collections.abc import Callable

from nkic.target.instructions import ACTIVATE2_STAGES
from nkic.target.machine import ENGINE_BY_NAME, ENGINE_OF_HINT, TARGETS, XORWOW_WORDS
from nkic.target.rules import NO_INDIRECTION, Call, Operand, column, dtype_of, in_memories, rule, unavailable, waive
from nkic.target.vocab import DTYPES, FLOAT_DTYPES

PARTITIONS = 128
_INT_DTYPES = ("int8", "int16", "int32", "uint8", "uint16", "uint32")


def _partition_bytes(call: Call, memory: str) -> int:
    """The bytes of one SBUF (or PSUM) partition on the call's generation (the largest of any when unknown)."""
    targets = [t for t in TARGETS.values() if call.gen in (None, t.nc_version)]
    attr = "psum_bytes_per_partition" if memory == "psum" else "sbuf_bytes_per_partition"
    return max(getattr(t, attr) for t in targets)


def _bytes(op: Operand) -> int:
    return op.dims[1] * DTYPES[op.dtype].itemsize if op.dtype in DTYPES else 0


def _same_partitions(fn: str, a: str, b: str) -> Callable[[Call], str | None]:
    """``a`` and ``b`` have the same partition count, at most 128."""

    def test(call: Call) -> str | None:
        x, y = call.operands.get(a), call.operands.get(b)
        if x is None or y is None:
            return None
        if x.dims[0] != y.dims[0]:
            return f"{fn}: '{a}' has {x.dims[0]} partitions but '{b}' has {y.dims[0]}; they must be the same"
        if x.dims[0] > PARTITIONS:
            return f"{fn}: '{a}' has {x.dims[0]} partitions, at most {PARTITIONS}"
        return None

    return test


def _same_free(fn: str, a: str, b: str, fits: bool = True) -> Callable[[Call], str | None]:
    """``a`` and ``b`` have the same elements per partition (and, ``fits``, each fits one partition of its memory)."""

    def test(call: Call) -> str | None:
        x, y = call.operands.get(a), call.operands.get(b)
        if x is None or y is None:
            return None
        if x.dims[1] != y.dims[1]:
            return f"{fn}: '{a}' has {x.dims[1]} elements per partition but '{b}' has {y.dims[1]}; they must match"
        for role, o in ((a, x), (b, y)):
            if fits and _bytes(o) > _partition_bytes(call, o.memory):
                return (f"{fn}: '{role}' needs {_bytes(o)} bytes per partition, more than one {o.memory.upper()} "
                        f"partition ({_partition_bytes(call, o.memory)} bytes)")  # fmt: skip
        return None

    return test


def _indirection(api: str) -> None:
    """The Tensor indirection paragraph's sentences that are not rules: activate2's (nkic takes no ``.indirect()``
    view for it), the ScalarE PSUM scatter of activation and activation_reduce (no dst view: their base partitions are
    rules, target/rules/indirection.py)."""
    if api == "nisa.activate2":
        waive(api, "When operands are manually allocated, their base partitions must satisfy:", NO_INDIRECTION)
        waive(api, "In addition, on the Scalar engine a scattered dst cannot be in PSUM.", NO_INDIRECTION)
    elif api != "nisa.exponential":
        waive(api, "In addition, on the Scalar engine a scattered dst cannot be in PSUM.", "unsupported: nkic's "
              "activation takes no .indirect() dst (ACTIVATE has one spare operand slot, taken by data's index): "
              "an error at the call (frontend/recorders/record.py:_with_index_operands), so no call scatters")


def _chaining(api: str) -> None:
    waive(api, "This is useful when chaining multiple calls", "semantics, not a restriction: reduce_res=None keeps "
          "the result in the engine's registers (the simulator carries them to the next call)")


def _since(instr: str, *sentences: str) -> None:
    for says in sentences:
        unavailable(instr, says)


# ------------------------------------------------------------------------------------------------------------
# activation / activation_reduce
# ------------------------------------------------------------------------------------------------------------
def _reduce_op_is_add(call: Call) -> str | None:
    op = call.fields.get("reduce_op")
    return None if op in (None, "add", "bypass") else f"activation: reduce_op must be nl.add, got nl.{op}"


rule("activation", "reduce_op must be nl.add.", api="nisa.activation")(_reduce_op_is_add)
rule("activation", "On NeuronCore-v2, the reduce_op must be nl.add.", gens=(2,), api="nisa.activation_reduce")(
    _reduce_op_is_add)


@rule("activation", "The scale parameter must have a float32 data type", api="nisa.activation")
def _activation_scale(call: Call) -> str | None:
    dt = dtype_of(call, "scale")
    return None if dt in (None, "float32") else f"activation: the scale tile is {dt}, it must be float32"


@rule("activation", "the bias parameter can be any supported dtype except tfloat32.")
def _activation_bias(call: Call) -> str | None:
    return "activation: the bias tile cannot be tfloat32" if dtype_of(call, "bias") == "tfloat32" else None


rule("activation", "N must be the same as the partition dimension size of data.")(
    column("activation", "data", ("scale", "bias"), "vector"))


@rule("activation", "In NeuronCore-v2, the bias must be a [N, 1] vector, but starting NeuronCore-v3, bias can either "
      "be a compile-time constant scalar or a [N, 1] vector similar to scale.", gens=(2,), api="nisa.activation")
def _activation_bias_vector_v2(call: Call) -> str | None:
    # A zero bias is no bias (nkic records none): only a non-zero constant needs the v3 immediate.
    if "bias" not in call.operands and call.fields.get("bias"):
        return f"activation: bias={call.fields['bias']} is a constant; the bias must be a [N, 1] vector"
    return None


rule("activation", "The partition dimension size of input data and output dst tiles must be the same and must not "
     "exceed 128.")(_same_partitions("activation", "data", "dst"))
rule("activation", "The number of elements per partition of data and dst tiles must be the same and must not exceed "
     "the physical size of each SBUF partition.")(_same_free("activation", "data", "dst"))


@rule("activation", "The reduction result is written into reduce_res, which must be a SBUF/PSUM tile with the same "
      "partition axis size as the input tile data and one element per partition.", api="nisa.activation_reduce")
def _activation_reduce_res(call: Call) -> str | None:
    res, data = call.operands.get("reduce_res"), call.operands.get("data")
    if res is None or data is None:
        return None
    if res.memory not in ("sbuf", "psum"):
        return f"activation_reduce: reduce_res must be an SBUF/PSUM tile, not {res.memory}"
    if res.dims != (data.dims[0], 1):
        return f"activation_reduce: reduce_res must be a ({data.dims[0]}, 1) tile, got {res.dims[0]} x {res.dims[1]}"
    return None


waive("nisa.activation", "- nisa.reduce_cmd.reset: Reset reduce_regs to zero only.",
      "semantics, not a restriction: what reduce_cmd=reset does (runtime/exec_vector.py implements it)")
waive("nisa.activation", "All these optional operations incur no further performance penalty",
      "advice, not a restriction")
for _api in ("nisa.activation", "nisa.activation_reduce", "nisa.activate2", "nisa.exponential"):
    _indirection(_api)
    _chaining(_api)

# ------------------------------------------------------------------------------------------------------------
# activate2 (NeuronCore-v4)
# ------------------------------------------------------------------------------------------------------------
_since("activate2", "Available only on NeuronCore-v4 and newer.",
       "(activate2 itself is only available on NeuronCore-v4 and later.)")
for _start in ("- (nl.multiply, nl.bypass)", "- (nl.add, nl.bypass)", "- (nl.subtract, nl.bypass)"):
    waive("nisa.activate2", _start, "semantics, not a restriction: what one of the six (op0, op1) combinations "
          "computes ('scale only'); the combinations themselves are the rule 'The tensor-scalar stage supports six "
          "(op0, op1) combinations:'")

# The six pairs are data (target/instructions.py ACTIVATE2_STAGES; activate2_problem asks them again in penguin/bir
# and the ISA verifier, with the reduce fields): these rules cite the sentences at the nisa call.
_OPS0, _OPS1 = ("multiply", "add", "subtract", "bypass"), ("add", "subtract", "bypass")


def _stage_ops(call: Call) -> tuple[str, str]:
    return call.fields.get("op0") or "bypass", call.fields.get("op1") or "bypass"


def _arithmetic(k: int, allowed: tuple[str, ...]) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        op = _stage_ops(call)[k]
        return None if op in allowed else f"activate2: op{k} must be one of {', '.join(allowed)}, got {op}"

    return test


rule("activate2", "Must be an arithmetic operator (e.g., nl.multiply, nl.add, nl.subtract) or nl.bypass for no "
     "operation.")(_arithmetic(0, _OPS0))
rule("activate2", "Must be an arithmetic operator (e.g., nl.add, nl.subtract) or nl.bypass for no operation.")(
    _arithmetic(1, _OPS1))


@rule("activate2", "op1 requires op0 to be set.")
def _activate2_op1_needs_op0(call: Call) -> str | None:
    op0, op1 = _stage_ops(call)
    return f"activate2: op1={op1} needs op0 to be set (it is bypass)" if op0 == "bypass" and op1 != "bypass" else None


def _reverse_needs(k: int) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        if call.fields.get(f"reverse{k}") and _stage_ops(call)[k] == "bypass":
            return f"activate2: reverse{k} needs op{k} to be set (it is bypass)"
        return None

    return test


rule("activate2", "reverse0 requires op0 to be set; reverse1 requires op1 to be set.")(
    lambda call: _reverse_needs(0)(call) or _reverse_needs(1)(call))
rule("activate2", "Requires op0 to be set.")(_reverse_needs(0))
rule("activate2", "Requires op1 to be set.")(_reverse_needs(1))


@rule("activate2", "The tensor-scalar stage supports six (op0, op1) combinations:")
def _activate2_pairs(call: Call) -> str | None:
    op0, op1 = _stage_ops(call)
    if (op0, op1) in ACTIVATE2_STAGES or "op0" not in call.fields:
        return None
    pairs = ", ".join(f"({a}, {b})" for a, b in sorted(ACTIVATE2_STAGES))
    return f"activate2: (op0, op1) = ({op0}, {op1}) is not one of {pairs}"
waive("nisa.activate2", "- reduce_cmd.reset: Reset accumulators only",
      "semantics, not a restriction: what reduce_cmd=reset does (runtime/exec_vector.py implements it)")

rule("activate2", "data and dst must have the same partition dimension size (at most 128).")(
    _same_partitions("activate2", "data", "dst"))
rule("activate2", "data and dst must have the same number of elements in the free dimensions.")(
    _same_free("activate2", "data", "dst", fits=False))
rule("activate2", "N must match the partition dimension size of data.")(
    column("activate2", "data", ("imm0", "imm1", "relu_param"), "vector"))


@rule("activate2", "All immediates (imm0, imm1) must have the same dtype when both are tensors.")
def _activate2_imm_dtypes(call: Call) -> str | None:
    a, b = dtype_of(call, "imm0"), dtype_of(call, "imm1")
    if a is None or b is None or a == b:
        return None
    return f"activate2: imm0 and imm1 tiles must share a dtype, got {a} and {b}"


# ------------------------------------------------------------------------------------------------------------
# exponential (VectorE, NeuronCore-v4)
# ------------------------------------------------------------------------------------------------------------
_since("exponential", "Available only on NeuronCore-v4 and newer.",
       "(exponential itself is only available on NeuronCore-v4 and later.)")
rule("exponential", "src, dst must have the same number of elements in the partition dimension.")(
    _same_partitions("exponential", "src", "dst"))
rule("exponential", "src, dst must have the same number of elements in the free dimensions.")(
    _same_free("exponential", "src", "dst", fits=False))
rule("exponential", "Must have shape (src.shape[0], 1).")(column("exponential", "src", ("reduce_res",), "vector"))


@rule("exponential", "src, dst can be up to 4D tensor.", api="nisa.exponential")
def _exponential_rank(call: Call) -> str | None:
    # The rank is not an instruction field: the nisa call passes it (``ranks``) to the checker itself.
    ranks = call.fields.get("ranks") or {}
    bad = next(((r, n) for r, n in ranks.items() if n > 4), None)
    return None if bad is None else f"exponential: '{bad[0]}' is a {bad[1]}-D tensor, at most 4-D"


@rule("exponential", "reduce_init should be unset or set to 0.0 when reduce_cmd is not load_reduce.")
def _exponential_reduce_init(call: Call) -> str | None:
    cmd = call.fields.get("reduce_cmd") or "idle"
    if cmd != "load_reduce" and ("reduce_init" in call.operands or call.fields.get("reduce_init")):
        return f"exponential: reduce_init is only used with reduce_cmd=load_reduce (got {cmd})"
    return None


def _dtypes_of(role: str, allowed: tuple[str, ...]) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        dt = dtype_of(call, role)
        return None if dt is None or dt in allowed else f"exponential: '{role}' cannot be {dt} ({', '.join(allowed)})"

    return test


_FLOATS = ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32")
rule("exponential", "Supported dtypes: float8_e4m3, float8_e5m2, float16, bfloat16, float32, tfloat32, int8, int16, "
     "int32, uint8, uint16.")(_dtypes_of("dst", (*_FLOATS, "tfloat32", *_INT_DTYPES[:-1])))
rule("exponential", "Supported dtypes: float8_e4m3, float8_e5m2, float16, bfloat16, float32, int8, int16, int32, "
     "uint8, uint16, uint32.")(_dtypes_of("src", (*_FLOATS, *_INT_DTYPES)))
rule("exponential", "Can be a scalar or vector of shape (src.shape[0], 1). Supported dtypes: float32.")(
    _dtypes_of("max_value", ("float32",)))
rule("exponential", "Initial value for reduction when using reduce_cmd.load_reduce. Supported dtypes: float32.")(
    _dtypes_of("reduce_init", ("float32",)))

# ------------------------------------------------------------------------------------------------------------
# reciprocal (VectorE)
# ------------------------------------------------------------------------------------------------------------
rule("reciprocal", "The partition dimension size of input data and output dst tiles must be the same and must not "
     "exceed 128.")(_same_partitions("reciprocal", "data", "dst"))
rule("reciprocal", "The number of elements per partition of dst must match that of data and must not exceed the "
     "physical size of each SBUF partition.")(_same_free("reciprocal", "dst", "data"))

# ------------------------------------------------------------------------------------------------------------
# dropout
# ------------------------------------------------------------------------------------------------------------
waive("nisa.dropout", "The drop probability value in each partition is applicable",
      "semantics, not a restriction: partition p's prob drops data[p] (runtime/exec_random.py DROPOUT)")


@rule("dropout", "If data type of data is any of the integer types (e.g., int32, int16), prob data type must be "
      "float32")
def _dropout_prob_dtype(call: Call) -> str | None:
    data, prob = dtype_of(call, "data"), dtype_of(call, "prob")
    if data is None or prob is None:
        return None
    if data not in FLOAT_DTYPES and prob != "float32":
        return f"dropout: prob must be float32 for {data} data, got {prob}"
    if data in FLOAT_DTYPES and prob not in FLOAT_DTYPES:
        return f"dropout: prob must be a float type for {data} data, got {prob}"
    return None


@rule("dropout", "The output data type dst.dtype must match the input data type data.dtype.")
def _dropout_dtype(call: Call) -> str | None:
    d, s = dtype_of(call, "dst"), dtype_of(call, "data")
    return None if d is None or s is None or d == s else f"dropout: dst dtype {d} must match data dtype {s}"


# ------------------------------------------------------------------------------------------------------------
# rand2 (VectorE, NeuronCore-v4)
# ------------------------------------------------------------------------------------------------------------
_since("rand2", "Available only on NeuronCore-v4 and newer.")


@rule("rand2", "The partition dimension size of dst must not exceed 128.")
def _rand2_partitions(call: Call) -> str | None:
    dst = call.operands.get("dst")
    return None if dst is None or dst.dims[0] <= PARTITIONS else f"rand2: dst has {dst.dims[0]} partitions, at most 128"


@rule("rand2", "The number of elements per partition of dst must not exceed the physical size of each SBUF/PSUM "
      "partition.")
def _rand2_free(call: Call) -> str | None:
    dst = call.operands.get("dst")
    if dst is None or _bytes(dst) <= _partition_bytes(call, dst.memory):
        return None
    return f"rand2: dst needs {_bytes(dst)} bytes per partition, more than one {dst.memory.upper()} partition"


# ------------------------------------------------------------------------------------------------------------
# set_rng_seed, rand_set_state, rand_get_state
# ------------------------------------------------------------------------------------------------------------
_RESETS = "semantics, not a restriction: the PRNG state lives for the run (nkic's simulator has no TPB reset)"
waive("nisa.set_rng_seed", "However, the state cannot survive TPB resets", _RESETS)
waive("nisa.rand_set_state", "However, the state cannot survive TPB resets", _RESETS)


rule("set_rng_seed", "The input src_seeds must be in SBUF or PSUM.")(
    in_memories("set_rng_seed", {"src_seeds": ("sbuf", "psum")}))


@rule("set_rng_seed", "The input src_seeds must be a [1,1] tensor.")
def _one_seed(call: Call) -> str | None:
    o = call.operands.get("src_seeds")
    if o is None or o.dims == (1, 1):
        return None
    return f"set_rng_seed reads one 32-bit seed: src_seeds must be [1, 1], got {o.dims} (partitions, free)"



@rule("set_rng_seed", "The input src_seeds must be a 32-bit value.")
def _seed_bits(call: Call) -> str | None:
    dt = dtype_of(call, "src_seeds")
    if dt is None or DTYPES[dt].itemsize == 4:
        return None
    return f"set_rng_seed: src_seeds must hold a 32-bit value, got {dt}"


rule("rand_set_state", "The input src_seeds tile must be in SBUF.")(
    in_memories("rand_set_state", {"src_seeds": ("sbuf",)}))
rule("rand_set_state", "- src_seeds must be in SBUF.")(in_memories("rand_set_state", {"src_seeds": ("sbuf",)}))


def _state_dtype(fn: str, role: str) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        dt = dtype_of(call, role)
        return None if dt in (None, "uint32") else f"{fn}: '{role}' must be uint32, got {dt}"

    return test


def _state_rank(fn: str, role: str) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        # The rank is not an instruction field: the nisa call passes it (``ranks``) to the checker itself.
        n = (call.fields.get("ranks") or {}).get(role)
        return None if n in (None, 2) else f"{fn}: '{role}' must be a 2D tensor, got {n}-D"

    return test


def _state_words(fn: str, role: str) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        t, eng = call.operands.get(role), ENGINE_OF_HINT.get(str(call.fields.get("engine")), "")
        if t is None or eng not in ("pool", "dve"):
            return None
        words = XORWOW_WORDS * ENGINE_BY_NAME[eng].rng_generators
        if t.dims[1] != words:
            return (f"{fn}: '{role}' must hold {words} uint32 words per partition (XORWOW state on "
                    f"{ENGINE_BY_NAME[eng].nki}), got {t.dims[1]}")  # fmt: skip
        return None

    return test


rule("rand_set_state", "The input src_seeds tile must be uint32.")(_state_dtype("rand_set_state", "src_seeds"))
rule("rand_set_state", "must be a 2D uint32 tensor", api="nisa.rand_set_state")(
    _state_rank("rand_set_state", "src_seeds"))
rule("rand_set_state", "src_seeds element count for XORWOW must be 6 elements (GpSimd) or 24 elements (Vector).")(
    _state_words("rand_set_state", "src_seeds"))
rule("rand_get_state", "The output dst tile must be uint32.")(_state_dtype("rand_get_state", "dst"))
rule("rand_get_state", "must be a 2D uint32 tensor", api="nisa.rand_get_state")(_state_rank("rand_get_state", "dst"))
rule("rand_get_state", "dst element count for XORWOW must be 6 elements (GpSimd) or 24 elements (Vector).")(
    _state_words("rand_get_state", "dst"))


@rule("rand_get_state", "The output dst tile must be in SBUF (NeuronCore-v3) or SBUF/PSUM (NeuronCore-v4+).",
      gens=(3, 4))
def _state_dst_memory(call: Call) -> str | None:
    dst = call.operands.get("dst")
    if dst is None or dst.memory == "sbuf" or (dst.memory == "psum" and call.gen != 3):
        return None
    return f"rand_get_state: dst must be in {'SBUF' if call.gen == 3 else 'SBUF or PSUM'}, not {dst.memory}"


@rule("rand_get_state", "Since GpSimd Engine cannot access PSUM, dst must be in SBUF when using GpSimd Engine.")
def _state_dst_gpsimd(call: Call) -> str | None:
    dst = call.operands.get("dst")
    if dst is not None and dst.memory == "psum" and call.fields.get("engine") == "gpsimd":
        return "rand_get_state: dst must be in SBUF when using the GpSimd engine (it cannot access PSUM)"
    return None
