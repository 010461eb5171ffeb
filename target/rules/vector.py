"""The documented restrictions of the Vector and GpSimd Engine instructions (tensor_tensor)."""

from __future__ import annotations

from nkic.target.rules import Call, rule, dtype_of

# ------------------------------------------------------------------------------------------------------------
# tensor_tensor
# ------------------------------------------------------------------------------------------------------------
@rule("tensor_tensor", "However, the two input tiles, data1 and data2 cannot both reside in PSUM.")
def _tensor_tensor_psum_inputs(call: Call) -> str | None:
    d1, d2 = call.operands.get("data1"), call.operands.get("data2")
    if d1 is not None and d2 is not None and d1.memory == d2.memory == "psum":
        return "tensor_tensor: data1 and data2 cannot both be in PSUM"
    return None


@rule("tensor_tensor", "Since GpSimd Engine cannot access PSUM, the input/output tiles cannot be in PSUM if op is "
      "nl.power.")
def _tensor_tensor_power_psum(call: Call) -> str | None:
    if call.fields.get("op") != "power":
        return None
    role = next((r for r, o in call.operands.items() if o.memory == "psum"), None)
    return None if role is None else f"tensor_tensor: op=nl.power runs on GpSimd, which cannot read PSUM ('{role}')"
