"""The restrictions on tensor indirection: ``.indirect(index)`` views of compute operands (NeuronCore-v4), the
"**Tensor indirection.**" paragraph of each instruction that accepts them (``nki/api/nki/isa/__init__.py``).

An operand that is such a view has ``Operand.indirect`` set; its index tile is the call's ``<role>_offset`` operand.
``Operand.start`` is the first partition an operand reaches where it is known (a trace's static view of a placed
tile, every ISA operand): the base-partition rules ("When operands are manually allocated, their base partitions
must satisfy: ...") are checked where it is, and accepted where it is not.
"""

from __future__ import annotations

from collections.abc import Callable

from nkic.target.machine import ENGINE_BY_NAME, ENGINE_NAMES, ENGINE_OF_HINT
from nkic.target.rules import Call, rule

# The engines that may run an instruction with a tensor indirection operand (nkic's engine names), as each
# paragraph says; the frontend picks the first one legal for the operands when the call names no engine.
TI_ENGINES: dict[str, tuple[str, ...]] = {
    "tensor_copy": ("dve", "act"),  # "the operation must run on the Vector or Scalar engine"
    "tensor_tensor": ("dve", "pool"),  # "the operation must run on the Vector or GpSimd engine"
    "tensor_scalar": ("dve", "act", "pool"),  # "the operation must run on the Vector, Scalar, or GpSimd engine"
}

# "The indirect operands must be a Tensor-Engine float dtype (float16, bfloat16, float8_e4m3, float8_e5m2,
# float8_e4m3fn)" (nc_matmul).
PE_TI_DTYPES = ("float16", "bfloat16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn")
# tensor_scalar's "int32/uint32 address-arithmetic pattern (tensor_scalar_addr)": the reference names it only; nkic
# reads it narrowly (ambiguous: accept the rest) as an address computed from an int32/uint32 data into an
# int32/uint32 dst by scaling and offsetting (index * stride + base: these ops only).
_ADDR_DTYPES = ("int32", "uint32")
_ADDR_OPS = ("add", "subtract", "multiply", "left_shift")
# "the index of every .indirect() view starts on a quadrant boundary (a multiple of 32)"
QUADRANT = 32


def _indirect_roles(call: Call) -> list[str]:
    return [r for r, o in call.operands.items() if o.indirect]


def _engine(call: Call) -> str | None:
    """nkic's name of the engine the call names (field ``engine``: an NKI or an nkic name), or None."""
    given = call.fields.get("engine")
    engine = ENGINE_OF_HINT.get(given, given) if isinstance(given, str) else None
    return engine if engine in ENGINE_NAMES else None


def ti_available(fn: str) -> Callable[[Call], str | None]:
    """No operand is a tensor indirection view (a rule of the generations before NeuronCore-v4)."""

    def test(call: Call) -> str | None:
        roles = _indirect_roles(call)
        if roles:
            return f"{fn}: '{roles[0]}' is a tensor indirection view (.indirect), which needs NeuronCore-v4 or newer"
        return None

    return test


def ti_engines(fn: str) -> Callable[[Call], str | None]:
    """With an indirect operand, the engine named is one of ``TI_ENGINES[instr]``."""
    def test(call: Call) -> str | None:
        engine = _engine(call)
        allowed = TI_ENGINES[call.instr]
        if _indirect_roles(call) and engine is not None and engine not in allowed:
            names = " or ".join(ENGINE_BY_NAME[e].nki for e in allowed)
            return f"{fn}: with tensor indirection it runs on {names}, not {ENGINE_BY_NAME[engine].nki}"
        return None

    return test


def scalar_scatter_psum(fn: str) -> Callable[[Call], str | None]:
    """On the Scalar engine an indirect dst is not in PSUM."""

    def test(call: Call) -> str | None:
        dst = call.operands.get("dst")
        if dst is not None and dst.indirect and dst.memory == "psum" and _engine(call) == "act":
            return f"{fn}: on the Scalar engine a scattered (indirect) dst cannot be in PSUM"
        return None

    return test


def base_partitions(fn: str, reads: tuple[str, ...], ref: str, by_memory: bool = True) -> Callable[
        [Call], str | None]:  # fmt: skip
    """The base-partition list of a Tensor indirection paragraph, where the starts are known: every index on a
    quadrant boundary; an indirect read operand (``reads``) on its index's partition; an indirect dst's index on
    ``ref``'s partition (``by_memory``: when ``ref`` is in SBUF; in PSUM and indirect, on ``ref``'s index's)."""

    def start(call: Call, role: str) -> int | None:
        o = call.operands.get(role)
        return o.start if o is not None else None

    def test(call: Call) -> str | None:
        for role in _indirect_roles(call):
            s = start(call, f"{role}_offset")
            if s is not None and s % QUADRANT:
                return (f"{fn}: the index of '{role}'.indirect() starts on partition {s}, not on a quadrant "
                        f"boundary (a multiple of {QUADRANT})")  # fmt: skip
        for role in reads:
            o, s = call.operands.get(role), start(call, f"{role}_offset")
            if o is not None and o.indirect and None not in (o.start, s) and o.start != s:
                return f"{fn}: '{role}' starts on partition {o.start} but its index on {s}: they must agree"
        dst, r = call.operands.get("dst"), call.operands.get(ref)
        if dst is None or not dst.indirect or r is None:
            return None
        want, what = r.start, f"'{ref}'"
        if by_memory and r.memory == "psum":
            want, what = (start(call, f"{ref}_offset"), f"'{ref}''s index") if r.indirect else (None, "")
        got = start(call, "dst_offset")
        if None not in (want, got) and want != got:
            return f"{fn}: dst's index starts on partition {got} but {what} on {want}: they must agree"
        return None

    return test


def matmul_transpose(call: Call) -> str | None:
    moving = call.operands.get("moving")
    if call.fields.get("is_transpose") and moving is not None and moving.indirect:
        return "nc_matmul: with is_transpose=True, moving cannot be a tensor indirection view"
    return None


def matmul_tiling(call: Call) -> str | None:
    row, col = call.fields.get("tile_row") or 0, call.fields.get("tile_col") or 0
    if _indirect_roles(call) and (row, col) != (0, 0):
        return f"nc_matmul: with tensor indirection tile_position must be (0, 0) or unset, got ({row}, {col})"
    return None


def matmul_dtypes(call: Call) -> str | None:
    for role in ("stationary", "moving"):
        o = call.operands.get(role)
        if o is not None and o.indirect and o.dtype not in PE_TI_DTYPES:
            return (f"nc_matmul: indirect '{role}' must be one of {', '.join(PE_TI_DTYPES)}, got {o.dtype}")
    return None


def scalar_addr(call: Call) -> str | None:
    dst, data = call.operands.get("dst"), call.operands.get("data")
    if not _indirect_roles(call) or dst is None or data is None:
        return None
    ops = [op for op in (call.fields.get("op0"), call.fields.get("op1")) if op not in (None, "bypass")]
    if dst.dtype in _ADDR_DTYPES and data.dtype in _ADDR_DTYPES and ops and all(op in _ADDR_OPS for op in ops):
        return (f"tensor_scalar: tensor indirection is not supported for {data.dtype} -> {dst.dtype} integer "
                f"arithmetic ({', '.join(ops)}), the address-arithmetic pattern (tensor_scalar_addr)")
    return None


# -- the rules, instruction by instruction -----------------------------------------------------------------------
_BASE = "When operands are manually allocated, their base partitions must satisfy:"
_SCALAR_PSUM = "In addition, on the Scalar engine a scattered dst cannot be in PSUM."
_BEFORE_V4 = (2, 3)

rule("tensor_copy", "When tensor indirection is used, the operation must run on the Vector or Scalar engine.")(
    ti_engines("tensor_copy"))
rule("tensor_copy", _BASE)(base_partitions("tensor_copy", ("src",), "src"))
rule("tensor_copy", _SCALAR_PSUM)(scalar_scatter_psum("tensor_copy"))
rule("tensor_copy", "On NeuronCore-v4 and later, both dst and src support tensor indirection (gather/scatter) by "
     "passing a view created with .indirect(index).", _BEFORE_V4)(ti_available("tensor_copy"))

rule("tensor_tensor", "When tensor indirection is used, the operation must run on the Vector or GpSimd engine.")(
    ti_engines("tensor_tensor"))
rule("tensor_tensor", _BASE)(base_partitions("tensor_tensor", ("data1",), "data1"))
rule("tensor_tensor", "On NeuronCore-v4 and later, dst and data1 support tensor indirection (gather/scatter) by "
     "passing a view created with .indirect(index).", _BEFORE_V4)(ti_available("tensor_tensor"))

rule("tensor_scalar", "When tensor indirection is used, the operation must run on the Vector, Scalar, or GpSimd "
     "engine.")(ti_engines("tensor_scalar"))
rule("tensor_scalar", "Tensor indirection is not supported when the op matches the int32/uint32 address-arithmetic "
     "pattern (tensor_scalar_addr).")(scalar_addr)
rule("tensor_scalar", _BASE)(base_partitions("tensor_scalar", ("data",), "data"))
rule("tensor_scalar", _SCALAR_PSUM)(scalar_scatter_psum("tensor_scalar"))
rule("tensor_scalar", "On NeuronCore-v4 and later, dst and data support tensor indirection (gather/scatter) by "
     "passing a view created with .indirect(index).", _BEFORE_V4)(ti_available("tensor_scalar"))

rule("matmul", "When is_transpose=True, moving cannot use tensor indirection.")(matmul_transpose)
rule("matmul", "Tensor indirection is incompatible with hardware tiling, so tile_position must be (0, 0) (or unset) "
     "when it is used.")(matmul_tiling)
rule("matmul", "The indirect operands must be a Tensor-Engine float dtype (float16, bfloat16, float8_e4m3, "
     "float8_e5m2, float8_e4m3fn).")(matmul_dtypes)
rule("matmul", _BASE)(base_partitions("nc_matmul", ("stationary", "moving"), "stationary", by_memory=False))
rule("matmul", "On NeuronCore-v4 and later, dst, stationary, and moving support tensor indirection (gather/scatter) "
     "by passing a view created with .indirect(index).", _BEFORE_V4)(ti_available("nc_matmul"))

rule("activation", _BASE, api="nisa.activation")(base_partitions("activation", ("data",), "data"))
rule("activation", "On NeuronCore-v4 and later, dst and data support tensor indirection (gather/scatter) by passing "
     "a view created with .indirect(index).", _BEFORE_V4, api="nisa.activation")(ti_available("activation"))
rule("activation", _BASE, api="nisa.activation_reduce")(base_partitions("activation_reduce", ("data",), "data"))
rule("activation", "On NeuronCore-v4 and later, dst and data support tensor indirection (gather/scatter) by passing "
     "a view created with .indirect(index).", _BEFORE_V4, api="nisa.activation_reduce")(
    ti_available("activation_reduce"))

rule("tensor_copy_predicated", _BASE)(base_partitions("tensor_copy_predicated", ("predicate",), "predicate"))
rule("tensor_copy_predicated", "On NeuronCore-v4 and later, dst and predicate support tensor indirection "
     "(gather/scatter) by passing a view created with .indirect(index).", _BEFORE_V4)(
    ti_available("tensor_copy_predicated"))

rule("tensor_reduce", _BASE)(base_partitions("tensor_reduce", ("data",), "data"))
rule("tensor_reduce", "On NeuronCore-v4 and later, both dst and data support tensor indirection (gather/scatter) by "
     "passing a view created with .indirect(index).", _BEFORE_V4)(ti_available("tensor_reduce"))

rule("tensor_scalar_reduce", _BASE)(base_partitions("tensor_scalar_reduce", ("data",), "data"))
rule("tensor_scalar_reduce", "On NeuronCore-v4 and later, dst and data support tensor indirection (gather/scatter) "
     "by passing a view created with .indirect(index).", _BEFORE_V4)(ti_available("tensor_scalar_reduce"))

rule("tensor_scalar_cumulative", _BASE)(base_partitions("tensor_scalar_cumulative", ("src",), "src"))
rule("tensor_scalar_cumulative", "On NeuronCore-v4 and later, dst and src support tensor indirection "
     "(gather/scatter) by passing a view created with .indirect(index).", _BEFORE_V4)(
    ti_available("tensor_scalar_cumulative"))

# exponential exists only from NeuronCore-v4 ("exponential itself is only available on NeuronCore-v4 and later"),
# so no generation rule of its own here.
rule("exponential", _BASE)(base_partitions("exponential", ("src",), "src"))


def mx_tiling(call: Call) -> str | None:
    """nc_matmul_mx's tile_position (a fact of the call: the IR keeps no tiling fields for it)."""
    pos = call.fields.get("tile_position")
    if _indirect_roles(call) and pos is not None and tuple(pos) != (0, 0):
        return f"nc_matmul_mx: with tensor indirection tile_position must be (0, 0) or unset, got {tuple(pos)}"
    return None


rule("matmul_mx", "Tensor indirection is incompatible with hardware tiling, so tile_position must be (0, 0) (or "
     "unset) when it is used.", api="nisa.nc_matmul_mx")(mx_tiling)
rule("matmul_mx", _BASE)(base_partitions("nc_matmul_mx", ("stationary", "moving"), "stationary", by_memory=False))
