"""What nkic does with each StableHLO and chlo op: lowered, routed or rejected (issue 27 item 6).

The op sets are the dialects' own: every op ``stablehlo/dialect/StablehloOps.td`` and ``stablehlo/dialect/ChloOps.td``
define (openxla/stablehlo). ``status`` answers from nkic's code — the dialect's registered ops, the interpreter's
lowerings (``tiles.SegmentInterpreter``'s methods and element-wise tables, the per-family ``LOWERINGS``) and
``chlo-legalize`` and ``decompose-hlo`` — and the README's op table states the same (``tests/unit/test_stablehlo_op_table.py`` compares
them), so the table cannot drift from what the compiler does:

* ``lowered``: compiled op by op (or folded when its operands are constants, or decomposed into lowered ops);
* ``routed``: replaced by a kernel (an attention or NKI custom call, an attention composite; another composite is
  inlined and lowered through its decomposition);
* ``rejected``: an error naming the op at its MLIR line — a parse error for an op nkic does not read, a lowering
  error for one it reads but does not lower (such ops may still fold when their operands are constants).
"""

from __future__ import annotations

from nkic.dialects import stablehlo as hlo
from nkic.hlo import families, tiles
from nkic.hlo.chlo_legalize import LEGALIZED
from nkic.hlo.decompose_hlo import DECOMPOSED

STABLEHLO_OPS = (
    "abs add after_all all_gather all_reduce all_to_all and async_done async_start atan2 batch_norm_grad "
    "batch_norm_inference batch_norm_training bitcast_convert broadcast broadcast_in_dim case cbrt ceil cholesky "
    "clamp collective_broadcast collective_permute collective_reduce compare complex composite concatenate constant "
    "convert convolution cosine count_leading_zeros create_token custom_call divide dot dot_general dynamic_conv "
    "dynamic_gather dynamic_iota dynamic_pad dynamic_reshape dynamic_slice dynamic_update_slice einsum exponential "
    "exponential_minus_one fft floor gather get_dimension_size get_tuple_element if imag infeed iota is_finite log "
    "log_plus_one logistic map maximum minimum multiply negate not optimization_barrier or outfeed pad partition_id "
    "popcnt power real recv reduce reduce_precision reduce_scatter reduce_window remainder replica_id reshape return "
    "reverse rng rng_bit_generator round_nearest_afz round_nearest_even rsqrt scatter select select_and_scatter send "
    "set_dimension_size shift_left shift_right_arithmetic shift_right_logical sign sine slice sort sqrt subtract tan "
    "tanh torch_index_select transpose triangular_solve tuple unary_einsum uniform_dequantize uniform_quantize while "
    "xor"
).split()
CHLO_OPS = (
    "acos acosh asin asinh atan atanh bessel_i1e broadcast_add broadcast_and broadcast_atan2 broadcast_compare "
    "broadcast_complex broadcast_divide broadcast_maximum broadcast_minimum broadcast_multiply broadcast_next_after "
    "broadcast_or broadcast_polygamma broadcast_power broadcast_remainder broadcast_select broadcast_shift_left "
    "broadcast_shift_right_arithmetic broadcast_shift_right_logical broadcast_subtract broadcast_xor broadcast_zeta "
    "conj constant constant_like cosh digamma erf erf_inv erfc is_inf is_neg_inf is_pos_inf lgamma mulhi next_after "
    "polygamma ragged_dot scan sinh square tan top_k zeta"
).split()
ROUTED = frozenset({"stablehlo.custom_call", "stablehlo.composite"})
# Values, not instructions: folded at compile time and embedded as NEFF data where a kernel reads them.
FOLDED = frozenset({"stablehlo.constant", "stablehlo.iota"})
# The terminator of the regions of reduce, sort, while, ...: lowered as part of its op.
TERMINATORS = frozenset({"stablehlo.return"})


def all_ops() -> list[str]:
    """Every StableHLO and chlo op, with the prefix, in the dialects' order."""
    return [f"stablehlo.{n}" for n in STABLEHLO_OPS] + [f"chlo.{n}" for n in CHLO_OPS]


def registered() -> set[str]:
    """The ops nkic reads (its StableHLO and chlo dialects)."""
    return {op.name for op in [*hlo.StableHLO.operations, *hlo.Chlo.operations]}


def status(name: str) -> str:
    """``lowered``, ``routed`` or ``rejected`` for the op ``name`` (``stablehlo.add``, ``chlo.erf``)."""
    if name not in registered():
        return "rejected"
    if name.startswith("chlo."):
        return "lowered" if name in LEGALIZED and all(status(n) == "lowered" for n in LEGALIZED[name]) else "rejected"
    if name in ROUTED:
        return "routed"
    if name in DECOMPOSED:
        return "lowered" if all(status(n) == "lowered" for n in DECOMPOSED[name]) else "rejected"
    if name in FOLDED or name in TERMINATORS:
        return "lowered"
    return "lowered" if _has_lowering(name.removeprefix("stablehlo.")) else "rejected"


def _has_lowering(short: str) -> bool:
    if short in hlo.ELEMENTWISE:  # the element-wise tables the interpreter maps each op through
        return short in tiles._TILE_UNARY or short in tiles._TILE_BINARY or short in tiles._LOGICAL
    return hasattr(tiles.SegmentInterpreter, f"op_{short}") or short in families.LOWERINGS
