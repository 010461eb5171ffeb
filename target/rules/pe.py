"""The documented restrictions of the Tensor Engine instructions (nc_matmul, nc_transpose)."""

from __future__ import annotations

from collections.abc import Callable

from nkic.target.rules import Call, rule, dtype_of

# ------------------------------------------------------------------------------------------------------------
# nc_matmul
# ------------------------------------------------------------------------------------------------------------
_PE_DTYPES = ("float8_e4m3", "float8_e5m2", "bfloat16", "float16", "tfloat32", "float32")
_FP32_CLASS = ("tfloat32", "float32")


def _pe_inputs(allowed: tuple[str, ...]) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        for role in ("stationary", "moving"):
            dt = dtype_of(call, role)
            if dt is not None and dt not in allowed:
                return f"nc_matmul: '{role}' is {dt}; the Tensor Engine reads {', '.join(allowed)}"
        return None

    return test


rule("matmul", "The input stationary and moving tiles can be one of these supported data types: "
     "float8_e4m3/float8_e5m2/bfloat16/float16/tfloat32/float32.", gens=(2, 3))(_pe_inputs(_PE_DTYPES))
rule("matmul", "Starting NeuronCore-v4, float8_e4m3fn (OCP FP8) is also supported", gens=(4,))(
    _pe_inputs((*_PE_DTYPES, "float8_e4m3fn")))


@rule("matmul", "if one of the input tiles is tfloat32/float32, the other tile must also be tfloat32/float32.")
def _matmul_fp32_pair(call: Call) -> str | None:
    s, m = dtype_of(call, "stationary"), dtype_of(call, "moving")
    if s is None or m is None or (s in _FP32_CLASS) == (m in _FP32_CLASS):
        return None
    return f"nc_matmul: stationary is {s} and moving is {m}; a tfloat32/float32 operand needs a tfloat32/float32 partner"


@rule("matmul", "float8_e4m3 (legacy) and float8_e4m3fn cannot be mixed in the same matmul.", gens=(4,))
def _matmul_fp8_mix(call: Call) -> str | None:
    if {dtype_of(call, "stationary"), dtype_of(call, "moving")} == {"float8_e4m3", "float8_e4m3fn"}:
        return "nc_matmul: float8_e4m3 and float8_e4m3fn operands cannot be mixed"
    return None


@rule("matmul", "The dst tile must be a float32 tile in NeuronCore-v2 and NeuronCore-v3.", gens=(2, 3))
def _matmul_dst_v2_v3(call: Call) -> str | None:
    # Transpose mode writes the stationary tile's own dtype: nc_transpose "is equivalent to calling nisa.nc_matmul
    # directly with is_transpose=True", and its "output dst tile must have the same data type as that of data".
    dt = None if call.fields.get("is_transpose") else dtype_of(call, "dst")
    return None if dt in (None, "float32") else f"nc_matmul: the PSUM result 'dst' is {dt}, it must be float32"


@rule("matmul", "Starting NeuronCore-v4, dst can either be a float32 or bfloat16 tile.", gens=(4,))
def _matmul_dst_v4(call: Call) -> str | None:
    dt = None if call.fields.get("is_transpose") else dtype_of(call, "dst")
    ok = (None, "float32", "bfloat16")
    return None if dt in ok else f"nc_matmul: the PSUM result 'dst' is {dt}, it must be float32 or bfloat16"


@rule("matmul", "On NeuronCore-v2, performance mode is not supported.", gens=(2,))
def _matmul_perf_mode_v2(call: Call) -> str | None:
    return "nc_matmul: perf_mode=double_row is not supported" if call.fields.get("double_row") else None


@rule("matmul", "when performance mode is double_row, stationary and moving tiles must be one of float8_e4m3 or "
      "float8_e5m2 (plus float8_e4m3fn on NeuronCore-v4)", gens=(3, 4))
def _matmul_double_row_dtypes(call: Call) -> str | None:
    if not call.fields.get("double_row"):
        return None
    allowed = ("float8_e4m3", "float8_e5m2", *(("float8_e4m3fn",) if call.gen == 4 else ()))
    for role in ("stationary", "moving"):
        dt = dtype_of(call, role)
        if dt is not None and dt not in allowed:
            return f"nc_matmul: double_row mode reads float8 operands, '{role}' is {dt}"
    return None


# ------------------------------------------------------------------------------------------------------------
# nc_transpose
# ------------------------------------------------------------------------------------------------------------
@rule("transpose", "The output dst tile must have the same data type as that of data.")
def _transpose_dtype(call: Call) -> str | None:
    d, s = dtype_of(call, "dst"), dtype_of(call, "data")
    return None if d is None or s is None or d == s else f"nc_transpose: dst is {d} but data is {s}; they must match"
