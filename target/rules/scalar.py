"""The documented restrictions of the Scalar Engine instructions (activation)."""

from __future__ import annotations

from nkic.target.rules import Call, rule, dtype_of

# ------------------------------------------------------------------------------------------------------------
# activation
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
