"""The documented restrictions of the ``nki.language`` functions themselves (``nl.*``, the reference's
``nki/api/nki/language/__init__.py``).

A rule here has ``instr = "nl.<name>"`` and ``api = "nl.<name>"``: no instruction carries it, so the penguin verifier
never sees it; the ``nl`` function's implementation asks ``problems`` itself
(``frontend/recorders/record.py:language_rules``), with the call's tiles as operands and its other arguments
(numbers, shapes, axes, steps) as fields. What an ``nl`` function emits is held to the instructions' rules by the
penguin verifier, as for every lowering."""

from __future__ import annotations

from collections.abc import Callable

from nkic.target.rules import Call, rule, waive

_INTEGER = ("int8", "int16", "int32", "uint8", "uint16", "uint32", "bool_")
_TILE_OR_NUMBER = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "bitwise_and",
                   "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "logical_and", "logical_or",
                   "logical_xor")  # fmt: skip
_BITWISE = ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift")
_REDUCTIONS = ("sum", "max", "min", "mean", "prod", "var", "all", "softmax")


def _nl(name: str, says: str, gens: tuple[int, ...] = (2, 3, 4)) -> Callable[
        [Callable[[Call], str | None]], Callable[[Call], str | None]]:  # fmt: skip
    return rule(f"nl.{name}", says, gens=gens, api=f"nl.{name}")


def _fn(call: Call) -> str:
    return call.instr  # "nl.equal"


# -- nl.abs_max / nl.abs_min (NeuronCore-v4) --------------------------------------------------------------------
def _v4_only(call: Call) -> str | None:
    return f"{_fn(call)} is not available on gen{call.gen}: it needs gen4 (trn3) or newer"


for _name in ("abs_max", "abs_min"):
    _nl(_name, "Available only on NeuronCore-v4 (trn3) and newer.", gens=(2, 3))(_v4_only)


# -- binary functions: a tile and integer inputs ----------------------------------------------------------------
def _a_tile(call: Call) -> str | None:
    if "x" in call.operands or "y" in call.operands:
        return None
    return f"{_fn(call)}: at least one of x, y must be a tile, got two numbers"


for _name in _TILE_OR_NUMBER:
    _nl(_name, "At least one of x, y must be a tile.")(_a_tile)


def _integer_inputs(call: Call) -> str | None:
    for role, o in call.operands.items():
        if o.dtype not in _INTEGER:
            return f"{_fn(call)}: '{role}' is {o.dtype}; the inputs must be integer typed"
    for role in ("x", "y"):
        v = call.fields.get(role)
        if isinstance(v, float) and not v.is_integer():
            return f"{_fn(call)}: '{role}' is {v}; the inputs must be integer typed"
    return None


for _name in _BITWISE:
    _nl(_name, "Inputs must be integer typed.")(_integer_inputs)
_nl("invert", "Input must be integer typed.")(_integer_inputs)

_BOOLEAN_LIKE = ("semantics, not a restriction: a precondition on the values, which are not known at trace time; "
                 "nkic computes the ALU's logical op on whatever values the tiles hold, as the device does")
for _name in ("logical_and", "logical_or", "logical_xor"):
    waive(f"nl.{_name}", "Inputs should be boolean-like (0 or 1 values).", _BOOLEAN_LIKE)
waive("nl.logical_not", "Implemented as XOR with 1, so inputs should be boolean-like", _BOOLEAN_LIKE)


# -- nl.copy ------------------------------------------------------------------------------------------------------
@_nl("copy", "the source of copy, must be a tile in SBUF or PSUM.")
def _copy_source(call: Call) -> str | None:
    x = call.operands.get("x")
    return None if x is None or x.memory in ("sbuf", "psum") else f"nl.copy: x must be a tile in SBUF or PSUM, not {x.memory}"


# -- reductions: free axes --------------------------------------------------------------------------------------
def _free_axes(call: Call) -> str | None:
    # Only the partition-axis half is a rule: "can only be the last contiguous dim(s)" is not, as public kernels
    # (nki-samples' pooling: axis=(2, 4)) reduce other free axes and run; nkic reduces them through a permuted view.
    if 0 in (call.fields.get("axes") or ()):
        return f"{_fn(call)}: cannot reduce along the partition axis 0; the axes must be free dimensions"
    return None


for _name in _REDUCTIONS:
    _nl(_name, "must be free dimensions, not partition dimension (0)")(_free_axes)


# -- nl.broadcast_to ----------------------------------------------------------------------------------------------
@_nl("broadcast_to", "Must have the same rank as x.")
def _broadcast_rank(call: Call) -> str | None:
    src, shape = call.fields.get("x_shape"), call.fields.get("shape")
    if src is None or shape is None or len(src) == len(shape):
        return None
    return f"nl.broadcast_to: shape {tuple(shape)} has rank {len(shape)}, x {tuple(src)} has rank {len(src)}; they must match"


@_nl("broadcast_to", "Each dimension must either match or be broadcast from size 1.")
def _broadcast_dims(call: Call) -> str | None:
    src, shape = call.fields.get("x_shape"), call.fields.get("shape")
    if src is None or shape is None or len(src) != len(shape):
        return None
    for d, (m, n) in enumerate(zip(src, shape)):
        if m != n and m != 1:
            return f"nl.broadcast_to: shapes {tuple(src)} and {tuple(shape)} cannot be broadcast (dim {d}: {m} to {n})"
    return None


# -- nl.matmul ----------------------------------------------------------------------------------------------------
@_nl("matmul", "x: a tile on SBUF (partition dimension <= 128, free dimension <= 128), x's free dimension must match "
     "y's partition dimension.")
def _matmul_shapes(call: Call) -> str | None:
    # "on SBUF": nkic copies a PSUM operand to SBUF first (as nl.copy would), so a PSUM x is accepted (ambiguous).
    x, y = call.operands.get("x"), call.operands.get("y")
    if x is None or y is None:
        return None
    (p, f), transposed = x.dims, bool(call.fields.get("transpose_x"))
    if p > 128 or f > 128:
        return f"nl.matmul: x is {p} x {f}; its partition and free dimensions must be at most 128"
    contract = p if transposed else f
    if contract != y.dims[0]:
        spelled = "x.T @ y" if transposed else "x @ y"
        return (f"nl.matmul: {spelled} needs y with {contract} rows (the contraction dim), y's partition dimension "
                f"is {y.dims[0]}")  # fmt: skip
    return None


# -- loops --------------------------------------------------------------------------------------------------------
@_nl("no_reorder", "Register-based dynamic loops (nl.fori_loop, nl.while_loop) are not supported inside a no_reorder "
     "block.")
def _no_dynamic_loop(call: Call) -> str | None:
    loop = call.fields.get("loop")
    if loop and call.fields.get("depth"):
        return f"nl.{loop} is a register-based dynamic loop: it cannot be inside a no_reorder block"
    return None


def _step(call: Call) -> str | None:
    step = call.fields.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        return f"{_fn(call)}: step must be a compile-time positive integer, got {step!r}"
    return None


_nl("dynamic_range", "step size, must be a compile-time positive integer (not VirtualRegister).")(_step)
_nl("fori_loop", "step size, must be a compile-time positive integer.")(_step)

# -- constants and prints -------------------------------------------------------------------------------------------
waive("nl.shared_constant", "With LNC=2, both cores share the same constant",
      "semantics, not a restriction: nkic names a constant after its contents (frontend/trace_context.py:constant), so the "
      "two cores of an LNC=2 pair share one NEFF variable when their data agrees and each reads its own data when "
      "it does not: no core ever reads data another core's trace diverged")


@_nl("device_print", "Evaluated at trace time; must be a constant string.")
def _print_prefix(call: Call) -> str | None:
    prefix = call.fields.get("print_prefix")
    if isinstance(prefix, str):
        return None
    return f"nl.device_print: print_prefix must be a constant string, got {type(prefix).__name__}"
