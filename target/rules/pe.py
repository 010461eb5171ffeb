"""The documented restrictions of the Tensor Engine instructions (nc_matmul, nc_matmul_mx, nc_transpose), the MX
quantizer, and the DMA / collective / register instructions (dma_copy, dma_transpose, dma_compute, sendrecv,
core_barrier, register_*).

Most rules read what every level sees (operands' memory, dtype and (partitions, free) sizes; the instruction's
fields). Some restrictions are about the call itself — a raw parameter the IR does not keep (``tile_position``,
``dge_mode``, ``priority``, ``scales``), a tile's full shape — which the ``nisa`` function passes as extra fields
(``frontend/recorders/record.py`` ``_rules``): such a rule passes when its field is absent (IR text, the verifier),
so it holds at the user's line only, where the parameter exists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nkic.target.machine import TARGETS
from nkic.target.rules import Call, Operand, dtype_of, rule, waive
from nkic.target.vocab import HBM_MEMORIES, dtype_size

_PE = 128  # the PE array's rows and columns
_HBM = frozenset(HBM_MEMORIES)


def _op(call: Call, role: str) -> Operand | None:
    return call.operands.get(role)


def _mem(call: Call, role: str) -> str | None:
    op = call.operands.get(role)
    return op.memory if op is not None else None


def _where(memories: tuple[str, ...]) -> str:
    return " or ".join("HBM" if m == "hbm" else m.upper() for m in memories)


def _memories(name: str, want: dict[str, tuple[str, ...]]) -> Callable[[Call], str | None]:
    """Each role of ``want`` (present in the call) is in one of its memories (any HBM kind counts as "hbm")."""

    def test(call: Call) -> str | None:
        for role, allowed in want.items():
            m = _mem(call, role)
            if m is not None and ("hbm" if m in _HBM else m) not in allowed:
                return f"{name}: '{role}' must be in {_where(allowed)}, not {m}"
        return None

    return test


def _dtypes(name: str, roles: tuple[str, ...], allowed: tuple[str, ...]) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        for role in roles:
            dt = dtype_of(call, role)
            if dt is not None and dt not in allowed:
                return f"{name}: '{role}' must be {' or '.join(allowed)}, got {dt}"
        return None

    return test


def _same_dtype(name: str, a: str, b: str, note: str = "") -> Callable[[Call], str | None]:
    """Roles ``a`` and ``b`` (when both are given) hold one dtype."""

    def test(call: Call) -> str | None:
        x, y = dtype_of(call, a), dtype_of(call, b)
        return None if x is None or y is None or x == y else f"{name}: {a} is {x} but {b} is {y}{note}"

    return test


def _pair(value: Any) -> tuple[int, int] | None:
    """A static (int, int) pair, or None (absent, or not yet known: an affine expression is checked once bound)."""
    try:
        a, b = value
        return int(a), int(b)
    except (TypeError, ValueError):
        return None


def _given(value: Any) -> bool:
    return value is not None and value != () and value != []


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
    return "nc_matmul: perf_mode double_row is not available on gen2" if call.fields.get("double_row") else None


@rule("matmul", "when performance mode is double_row, stationary and moving tiles must be one of float8_e4m3 or "
      "float8_e5m2 (plus float8_e4m3fn on NeuronCore-v4)", gens=(3, 4))
def _matmul_double_row_dtypes(call: Call) -> str | None:
    if not call.fields.get("double_row"):
        return None
    allowed = ("float8_e4m3", "float8_e5m2", *(("float8_e4m3fn",) if call.gen == 4 else ()))
    for role in ("stationary", "moving"):
        dt = dtype_of(call, role)
        if dt is not None and dt not in allowed:
            return f"nc_matmul: perf_mode double_row needs float8 '{role}', got {dt}"
    return None


def _matmul_double_row_columns(call: Call) -> str | None:
    cols = call.fields.get("tile_cols")
    if call.fields.get("double_row") and cols is not None and cols < _PE:
        rows = call.fields.get("tile_rows")
        return f"nc_matmul: perf_mode double_row cannot be combined with column tiling (tile_size {(rows, cols)})"
    return None


rule("matmul", "double_row performance mode cannot be combined with Tensor Engine column tiling mode")(
    _matmul_double_row_columns)
rule("matmul", "cannot be combined with column tiling mode.")(_matmul_double_row_columns)


@rule("matmul", "The first free dimension must be 2.")
def _matmul_double_row_shape(call: Call) -> str | None:
    shapes = call.fields.get("shapes")
    if not call.fields.get("double_row") or not shapes:
        return None
    for role in ("stationary", "moving"):
        shape = tuple(shapes.get(role, ()))
        if len(shape) < 3 or shape[1] != 2:
            return f"nc_matmul: perf_mode double_row needs '{role}' shaped [K, 2, ...], got {list(shape)}"
    return None


rule("matmul", "The nc_matmul instruction must read inputs from SBUF and write outputs to PSUM.")(
    _memories("nc_matmul", {"dst": ("psum",), "stationary": ("sbuf",), "moving": ("sbuf",)}))
rule("matmul", "Therefore, the stationary and moving must be SBUF tiles, and dst tile must be a PSUM tile.")(
    _memories("nc_matmul", {"stationary": ("sbuf",), "moving": ("sbuf",), "dst": ("psum",)}))


def _kmn(call: Call) -> tuple[int, int, int] | None:
    st, mv = _op(call, "stationary"), _op(call, "moving")
    if st is None or mv is None:
        return None
    pack = 2 if call.fields.get("double_row") else 1  # double_row: the dim of 2 is contraction, not M / N
    return st.dims[0], st.dims[1] // pack, mv.dims[1] // pack


def _max_n(call: Call) -> int:
    # "Starting NeuronCore-v4, the free dimension size of moving tile can go up to 4096 for float32 dst or 8192 for
    # bfloat16 dst, matching the size of 8x PSUM banks (the entire PSUM)": 16 KiB per partition either way.
    if call.gen != 4:
        return 512
    return 8192 if dtype_of(call, "dst") == "bfloat16" and not call.fields.get("is_transpose") else 4096


def _limits(call: Call) -> str:
    """The one message of the three size rules: K, M and N against their maxima (what nkic always said)."""
    k, m, n = _kmn(call) or (0, 0, 0)
    rows, cols = call.fields.get("tile_rows") or _PE, call.fields.get("tile_cols") or _PE
    gen = f" on gen{call.gen}" if call.gen is not None else ""
    return (f"nc_matmul: matmul limits exceeded{gen}: K={k} (max {rows}), M={m} (max {cols}), N={n} "
            f"(max {_max_n(call)})")  # fmt: skip


@rule("matmul", "The partition dimension sizes of the stationary and moving tiles must be identical.")
def _matmul_same_k(call: Call) -> str | None:
    st, mv = _op(call, "stationary"), _op(call, "moving")
    if st is None or mv is None or st.dims[0] == mv.dims[0]:
        return None
    return f"nc_matmul: partition count mismatch: stationary has K={st.dims[0]} partitions, moving has {mv.dims[0]}"


@rule("matmul", "They must not exceed 128 when tiling mode is off or row_size specified in tile_size when tiling "
      "mode is on.")
def _matmul_k_limit(call: Call) -> str | None:
    kmn = _kmn(call)
    return _limits(call) if kmn and kmn[0] > (call.fields.get("tile_rows") or _PE) else None


@rule("matmul", "The free dimension size of stationary must not exceed 128 when tiling mode is off or column_size "
      "in tile_size when tiling mode is on.")
def _matmul_m_limit(call: Call) -> str | None:
    kmn = _kmn(call)
    return _limits(call) if kmn and kmn[1] > (call.fields.get("tile_cols") or _PE) else None


@rule("matmul", "The stationary tile size must not exceed the chosen tile_size.")
def _matmul_stationary_in_tile(call: Call) -> str | None:
    kmn = _kmn(call)
    rows, cols = call.fields.get("tile_rows"), call.fields.get("tile_cols")
    if kmn is None or rows is None or cols is None:
        return None
    return _limits(call) if kmn[0] > rows or kmn[1] > cols else None


@rule("matmul", "On NeuronCore-v2 and -v3, the free dimension size of moving tile must not exceed 512, matching the "
      "maximum number of float32 elements per PSUM bank.", gens=(2, 3))
def _matmul_n_limit_v2_v3(call: Call) -> str | None:
    kmn = _kmn(call)
    return _limits(call) if kmn and kmn[2] > 512 else None


@rule("matmul", "Starting NeuronCore-v4, the free dimension size of moving tile can go up to 4096 for float32 dst "
      "or 8192 for bfloat16 dst, matching the size of 8x PSUM banks (the entire PSUM).", gens=(4,))
def _matmul_n_limit_v4(call: Call) -> str | None:
    kmn = _kmn(call)
    return _limits(call) if kmn and kmn[2] > _max_n(call) else None


@rule("matmul", "Note, tile_position and tile_size must both be set to enable tiling mode.")
def _matmul_tiling_both(call: Call) -> str | None:
    if "tile_position" not in call.fields and "tile_size" not in call.fields:
        return None
    if _given(call.fields.get("tile_position")) != _given(call.fields.get("tile_size")):
        return f"{_name(call)}: tile_position and tile_size must both be set to enable tiling mode"
    return None


def _name(call: Call) -> str:
    return {"matmul": "nc_matmul", "matmul_mx": "nc_matmul_mx"}.get(call.instr, call.instr)


@rule("matmul", "The start_row must be a multiple of row_size specified in tile_size and must not exceed 128.")
def _matmul_start_row(call: Call) -> str | None:
    return _start(call, "start_row", call.fields.get("tile_row"), call.fields.get("tile_rows"))


@rule("matmul", "Similarly, the start_column must be a multiple of column_size and must not exceed 128.")
def _matmul_start_column(call: Call) -> str | None:
    return _start(call, "start_column", call.fields.get("tile_col"), call.fields.get("tile_cols"))


def _start(call: Call, name: str, start: int | None, size: int | None) -> str | None:
    # "must not exceed 128": the tile it starts must lie inside the array, so the start is below 128.
    if start is None or size is None or (start % size == 0 and 0 <= start < _PE):
        return None
    return f"{_name(call)}: tile_position {name} must be a multiple of {size} below {_PE}, got {start}"


# -- nc_matmul: sentences that are not rules of their own
waive("nisa.nc_matmul", "The first matmul targeting a PSUM location", "semantics, not a restriction: a matmul with "
      "accumulate=True onto a location no matmul has written reads what is there (the simulator fills fresh memory "
      "with NaN, so the undefined result shows); whether an earlier instruction wrote it is a run-time fact")
waive("nisa.nc_matmul", "Only valid after the PSUM location has been initialized", "semantics, not a restriction: "
      "as the sentence before (undefined behaviour, simulated as accumulating onto the location's contents)")
waive("nisa.nc_matmul", "On NeuronCore-v2 and NeuronCore-v3, matmul accumulating into a PSUM location", "semantics, "
      "not a restriction: undefined behaviour on hardware (the simulator accumulates onto the value written)")
waive("nisa.nc_matmul", "If performance mode is off, the contraction dimension", "semantics, not a restriction: "
      "nc_matmul contracts over the partition dimension by definition; the shape rule is 'The partition dimension "
      "sizes of the stationary and moving tiles must be identical'")
waive("nisa.nc_matmul", "Explicit tiling is required", "semantics, not a restriction: restates the tile size "
      "limits, each a rule of its own")
waive("nisa.nc_matmul", ":param is_stationary_onezero:", "advice, not a restriction")
waive("nisa.nc_matmul", ":param is_moving_onezero:", "advice, not a restriction")
waive("nisa.nc_matmul", ":param tile_position:", "ambiguous: 'start_column must be 0' contradicts the tiling "
      "section (column tiling, 'the start_column must be a multiple of column_size'), and nki-library tiles columns "
      "(router_topk, qkv_tkg, mlp_tkg): nkic follows the tiling section")
waive("nisa.nc_matmul", ":param tile_size:", "ambiguous: 'column_size must be 128' contradicts the tiling section "
      "('Column tiling mode slices the 128 PE columns in the same fashion'), which nki-library uses: nkic follows it")


# ------------------------------------------------------------------------------------------------------------
# nc_matmul_mx
# ------------------------------------------------------------------------------------------------------------
_MX_DATA = ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4")  # nkic's PACKED_DTYPES order
_MX_SCALE = ("float8_e8m0fnu", "uint8")
_MX = "nisa.nc_matmul_mx"

rule("matmul_mx", "The nc_matmul_mx instruction must read inputs from SBUF and write outputs to PSUM.")(
    _memories("nc_matmul_mx", {"dst": ("psum",), "stationary": ("sbuf",), "moving": ("sbuf",),
                               "stationary_scale": ("sbuf",), "moving_scale": ("sbuf",)}))  # fmt: skip
rule("matmul_mx", "Therefore, the stationary, moving, stationary_scale, and moving_scale must be SBUF tiles, and dst "
     "tile must be a PSUM tile.")(
    _memories("nc_matmul_mx", {"stationary": ("sbuf",), "moving": ("sbuf",), "stationary_scale": ("sbuf",),
                               "moving_scale": ("sbuf",), "dst": ("psum",)}))  # fmt: skip
rule("matmul_mx", "The input stationary and moving tiles must be float8_e5m2_x4, float8_e4m3fn_x4, or "
     "float4_e2m1fn_x4 (4-packed quantized data types).")(
    _dtypes("nc_matmul_mx", ("stationary", "moving"), _MX_DATA))
rule("matmul_mx", "The stationary_scale and moving_scale tiles must be float8_e8m0fnu or uint8")(
    _dtypes("nc_matmul_mx", ("stationary_scale", "moving_scale"), _MX_SCALE))
rule("matmul_mx", "The dst tile can be float32 or bfloat16.")(_dtypes("nc_matmul_mx", ("dst",), ("float32", "bfloat16")))


@rule("matmul_mx", "The partition dimension size of stationary and moving must be identical and be a multiple of 32, "
      "not exceeding 128.")
def _mx_partitions(call: Call) -> str | None:
    st, mv = _op(call, "stationary"), _op(call, "moving")
    if st is None or mv is None:
        return None
    if st.dims[0] != mv.dims[0]:
        return f"nc_matmul_mx partition sizes differ: stationary has {st.dims[0]}, moving has {mv.dims[0]}"
    if st.dims[0] % 32 or not 0 < st.dims[0] <= _PE:
        return (f"nc_matmul_mx: the partition dimension size of stationary must be a multiple of 32 and at most "
                f"{_PE}, got {st.dims[0]}")  # fmt: skip
    return None


@rule("matmul_mx", "The free dimension size of stationary must be even and not exceed 128.")
def _mx_stationary_free(call: Call) -> str | None:
    st = _op(call, "stationary")
    m = st.dims[1] if st is not None else 0
    return f"the free dimension size of stationary must be even and at most 128, got {m}" if m % 2 or m > _PE else None


@rule("matmul_mx", "The free dimension size of moving must not exceed 4096 when dst is in float32 or 8192 when dst is "
      "in bfloat16, matching the size of 8x PSUM banks (the entire PSUM).")
def _mx_moving_free(call: Call) -> str | None:
    mv = _op(call, "moving")
    limit = 8192 if dtype_of(call, "dst") == "bfloat16" else 4096
    if mv is not None and mv.dims[1] > limit:
        return f"nc_matmul_mx: the free dimension size of moving is {mv.dims[1]}, at most {limit} for a {dtype_of(call, 'dst')} dst"
    return None


def _mx_tiles(call: Call) -> tuple[tuple[int, int], tuple[int, int]] | None:
    pos, size = _pair(call.fields.get("tile_position")), _pair(call.fields.get("tile_size"))
    return None if pos is None or size is None else (pos, size)


@rule("matmul_mx", "For nc_matmul_mx, Tensor Engine supports only row tiling mode", api=_MX)
def _mx_row_tiling_only(call: Call) -> str | None:
    tiles = _mx_tiles(call)
    if tiles is not None and (tiles[1][1] != _PE or tiles[0][1] != 0):
        return f"nc_matmul_mx: only row tiling: tile_size must be (rows, 128) and tile_position (row, 0), got {tiles}"
    return None


@rule("matmul_mx", "The row tile size can be set in the tile_size field as a tuple (row_size, column_size), where "
      "column_size must be 128.", api=_MX)
def _mx_tile_size(call: Call) -> str | None:
    tiles = _mx_tiles(call)
    if tiles is not None and (tiles[1][1] != _PE or tiles[1][0] not in (32, 64, 128)):
        return (f"nc_matmul_mx: tile_size must be (32, 128), (64, 128) or (128, 128) (row tiling only), got "
                f"{tiles[1]}")  # fmt: skip
    return None


@rule("matmul_mx", "A given nc_matmul_mx can pick the exact row tile within the 128x128 systolic array by specifying "
      "the starting row in tile_position as a tuple (start_row, start_column), where start_column must be 0.", api=_MX)
def _mx_start_column(call: Call) -> str | None:
    tiles = _mx_tiles(call)
    if tiles is not None and tiles[0][1] != 0:
        return f"nc_matmul_mx: tile_position start_column must be 0, got {tiles[0][1]}"
    return None


@rule("matmul_mx", "The start_row must be a multiple of row_size specified in tile_size and must not exceed 128.",
      api=_MX)
def _mx_start_row(call: Call) -> str | None:
    tiles = _mx_tiles(call)
    return None if tiles is None else _start(call, "start_row", tiles[0][0], tiles[1][0])


@rule("matmul_mx", "The stationary tile size must not exceed the chosen tile_size.", api=_MX)
def _mx_stationary_in_tile(call: Call) -> str | None:
    tiles, st = _mx_tiles(call), _op(call, "stationary")
    if tiles is not None and st is not None and st.dims[0] > tiles[1][0]:
        return f"nc_matmul_mx: the stationary tile ({st.dims[0]} partitions) exceeds the row tile size {tiles[1][0]}"
    return None


rule("matmul_mx", "Note, tile_position and tile_size must both be set to enable tiling mode.", api=_MX)(
    _matmul_tiling_both)

def _missing(api: str, first: int) -> Callable[[Call], str | None]:
    """The instruction is missing on this generation (the declaration's ``since`` says so to the verifiers too)."""

    def test(call: Call) -> str | None:
        return f"{api} is not available on gen{call.gen}: it needs gen{first} or newer"

    return test


rule("matmul_mx", "Available only on NeuronCore-v4 and newer.", gens=(2, 3))(_missing(_MX, 4))
rule("matmul_mx", "(nc_matmul_mx itself is only available on NeuronCore-v4 and later.)", gens=(2, 3))(
    _missing(_MX, 4))
waive(_MX, "The (stationary, stationary_scale) and (moving, moving_scale) pairs", "unsupported: nkic takes a tensor "
      "indirection view only on nc_matmul_mx's dst (MATMUL_MX has one spare operand slot, for its index); a view on "
      "stationary, moving or a scale is an error at the call (frontend/recorders/record.py:_with_index_operands)")
# Its tiling and base-partition sentences are rules (target/rules/indirection.py).


# ------------------------------------------------------------------------------------------------------------
# quantize_mx
# ------------------------------------------------------------------------------------------------------------
_QMX = "nisa.quantize_mx"
rule("quantize_mx", "All input src and output tiles (dst and dst_scale) must be in SBUF.")(
    _memories("quantize_mx", {"src": ("sbuf",), "dst": ("sbuf",), "dst_scale": ("sbuf",)}))
rule("quantize_mx", "The input src tile must be float16 or bfloat16.")(
    _dtypes("quantize_mx", ("src",), ("float16", "bfloat16")))
rule("quantize_mx", "The output dst tile must be float8_e5m2_x4 or float8_e4m3fn_x4 (4-packed FP8 data types).")(
    _dtypes("quantize_mx", ("dst",), ("float8_e4m3fn_x4", "float8_e5m2_x4")))
rule("quantize_mx", "The dst_scale tile must be float8_e8m0fnu or uint8")(
    _dtypes("quantize_mx", ("dst_scale",), _MX_SCALE))


@rule("quantize_mx", "The partition dimension size of src must be a multiple of 32 and must not exceed 128.")
def _qmx_partitions(call: Call) -> str | None:
    src = _op(call, "src")
    if src is None or (src.dims[0] % 32 == 0 and 0 < src.dims[0] <= _PE):
        return None
    return f"quantize_mx: the partition dimension size of src must be a multiple of 32 and at most 128, got {src.dims[0]}"


@rule("quantize_mx", "The free dimension size of src must be a multiple of 4 and must not exceed the physical size of "
      "each SBUF partition.")
def _qmx_free(call: Call) -> str | None:
    src = _op(call, "src")
    if src is None:
        return None
    if src.dims[1] % 4:
        return f"quantize_mx: the free dimension size of src must be a multiple of 4, got {src.dims[1]}"
    if call.gen is not None:
        target = next(t for t in TARGETS.values() if t.nc_version == call.gen)
        size = src.dims[1] * dtype_size(src.dtype)
        if size > target.sbuf_bytes_per_partition:
            return (f"quantize_mx: src holds {size} bytes per partition, more than an SBUF partition "
                    f"({target.sbuf_bytes_per_partition} bytes)")  # fmt: skip
    return None


rule("quantize_mx", "Available only on NeuronCore-v4 and newer.", gens=(2, 3))(_missing(_QMX, 4))
waive(_QMX, "This instruction calculates the required scales", "semantics, not a restriction: the QUANTIZE_MX "
      "executor (runtime/exec_pe.py) computes them")


# ------------------------------------------------------------------------------------------------------------
# nc_transpose
# ------------------------------------------------------------------------------------------------------------
rule("transpose", "The output dst tile must have the same data type as that of data.")(
    _same_dtype("nc_transpose", "dst", "data", "; they must match"))


@rule("transpose", "Tensor Engine nc_transpose must read the input tile from SBUF and write the transposed result to "
      "PSUM.")
def _transpose_pe_memories(call: Call) -> str | None:
    if call.fields.get("engine") not in ("tensor", "pe"):
        return None  # no engine named: assign-engines picks one the memories allow (Vector Engine reads/writes both)
    return _memories("nc_transpose (Tensor Engine)", {"data": ("sbuf",), "dst": ("psum",)})(call)


# ------------------------------------------------------------------------------------------------------------
# dma_copy, dma_transpose
# ------------------------------------------------------------------------------------------------------------
@rule("dma_copy", "The total number of data elements in src must match that of dst.")
def _dma_copy_count(call: Call) -> str | None:
    dst, src = _op(call, "dst"), _op(call, "src")
    if dst is None or src is None:
        return None
    nd, ns = dst.dims[0] * dst.dims[1], src.dims[0] * src.dims[1]
    return None if nd == ns else f"dma_copy: element count mismatch: dst has {nd} elements, src has {ns}"


def _priority_v4(name: str) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        if call.fields.get("priority") is None:
            return None
        return f"{name}: priority needs NeuronCore-v4 (gen4), the target is gen{call.gen}"

    return test


def _hwdge_v3(name: str) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        if call.fields.get("dge_mode") != "hwdge":
            return None
        return f"{name}: dge_mode=hwdge needs NeuronCore-v3 (gen3) or newer, the target is gen{call.gen}"

    return test


_PRIORITY = "(optional): DMA quality-of-service priority level 0-3 where lower is higher priority (NeuronCore-v4+ only)"
_HWDGE = "Hardware based DGE is only supported for NeuronCore-v3 or newer."
for _instr, _name_ in (("dma_copy", "dma_copy"), ("dma_transpose", "dma_transpose")):
    rule(_instr, _PRIORITY, gens=(2, 3))(_priority_v4(_name_))
    rule(_instr, _HWDGE, gens=(2,))(_hwdge_v3(_name_))


@rule("dma_copy", "Only valid when dge_mode=nisa.dge_mode.hwdge.")
def _dma_copy_engine(call: Call) -> str | None:
    eng = call.fields.get("hwdge_engine")
    if eng in (None, "unknown") or call.fields.get("dge_mode") == "hwdge":
        return None
    return "dma_copy: engine= selects the HWDGE engine and is only valid with dge_mode=hwdge"


waive("nisa.dma_copy", "When either sw_dge or hw_dge mode is used", "semantics, not a restriction: what the dynamic "
      "modes allow (nkic accepts a dynamic start address in every dge_mode: it models one DMA path)")


@rule("dma_copy", "The tensor being indexed (the one .ap() is called on) must be in HBM.")
def _dma_copy_vector_indexed_in_hbm(call: Call) -> str | None:
    # A role's index tensor is its '<role>_offset' operand; vector indirection's holds one row index per partition,
    # scalar indirection's is "a 1x1 SBUF tensor" (the reference), so an index of more than one element is vector
    # indirection. (At a nisa call, .ap already refuses a vector_offset on an on-chip tensor; IR text can say it.)
    for role in ("dst", "src"):
        o, index = call.operands.get(role), call.operands.get(f"{role}_offset")
        if o is not None and index is not None and index.dims[0] * index.dims[1] > 1 and o.memory not in _HBM:
            return f"dma_copy: '{role}' is indexed by a vector offset, so it must be in HBM, not {o.memory}"
    return None


@rule("dma_transpose", "the destination of transpose, must be a tile in SBUF.")
def _dma_transpose_dst(call: Call) -> str | None:
    return _memories("dma_transpose", {"dst": ("sbuf",)})(call)


@rule("dma_transpose", "the source of transpose, must be a tile in HBM or SBUF.")
def _dma_transpose_src(call: Call) -> str | None:
    return _memories("dma_transpose", {"src": ("hbm", "sbuf")})(call)


rule("dma_transpose", "src.dtype == dst.dtype")(_same_dtype("dma_transpose", "dst", "src"))


def _indirect(call: Call) -> bool:
    return bool(call.fields.get("src_indirect")) or "src_offset" in call.operands


@rule("dma_transpose", "The only valid dge_mode s are unknown and hwdge.")
def _dma_transpose_direct_dge(call: Call) -> str | None:
    # Relaxed: nki-library's mlp_tkg gate/up projection transposes with dge_mode=none (no DGE: descriptors made
    # before the run), which runs on the device; only a software-DGE direct transpose is refused.
    mode = call.fields.get("dge_mode")
    if mode in (None, "unknown", "hwdge", "none") or _indirect(call):
        return None
    return f"dma_transpose: a direct (not indirect) DMA transpose takes dge_mode unknown or hwdge, got {mode}"


@rule("dma_transpose", "The only valid dge_mode s are unknown and swdge.")
def _dma_transpose_indirect_dge(call: Call) -> str | None:
    mode = call.fields.get("dge_mode")
    if mode in (None, "unknown", "swdge") or not _indirect(call):
        return None
    return f"dma_transpose: an indirect DMA transpose (a gather) takes dge_mode unknown or swdge, got {mode}"


def _hw_shape(call: Call) -> tuple[int, ...] | None:
    """src's shape when the transpose is a hardware-DGE one (dge_mode=hwdge asked for), else None."""
    if call.fields.get("dge_mode") != "hwdge" or _indirect(call):
        return None
    shape = call.fields.get("src_shape")
    return tuple(shape) if shape else None


@rule("dma_transpose", "For 2-d input tiles, src.shape[0] == 16.")
def _hwdge_2d(call: Call) -> str | None:
    shape = _hw_shape(call)
    if shape is None or len(shape) != 2 or shape[0] == 16:
        return None
    return f"dma_transpose: a hardware-DGE transpose of a 2-d tile needs src.shape[0] == 16, got shape {shape}"


@rule("dma_transpose", "For 3-d/4-d input tiles, src.shape[0] must be in {1, 2, 4, 8, 16} and (src.shape[0] "
      "src.shape[-2]) % 16 == 0.")
def _hwdge_nd(call: Call) -> str | None:
    shape = _hw_shape(call)
    if shape is None or len(shape) < 3 or (shape[0] in (1, 2, 4, 8, 16) and shape[0] * shape[-2] % 16 == 0):
        return None
    return (f"dma_transpose: a hardware-DGE transpose of a {len(shape)}-d tile needs src.shape[0] in "
            f"{{1, 2, 4, 8, 16}} and src.shape[0] * src.shape[-2] a multiple of 16, got shape {shape}")  # fmt: skip


@rule("dma_transpose", "src.shape[-1] <= 128")
def _transpose_last_dim(call: Call) -> str | None:
    # Both lists (hardware DGE and the indirect, software-DGE transpose) state it.
    shape = _hw_shape(call) or (tuple(call.fields.get("src_shape") or ()) if _indirect(call) else None)
    if not shape or shape[-1] <= _PE:
        return None
    return f"dma_transpose: src.shape[-1] must be at most 128 for this DMA transpose, got shape {shape}"


@rule("dma_transpose", "src.dtype is 2 bytes")
def _transpose_two_bytes(call: Call) -> str | None:
    if _hw_shape(call) is None and not (_indirect(call) and call.fields.get("src_shape")):
        return None
    dt = dtype_of(call, "src")
    if dt is None or dtype_size(dt) == 2:
        return None
    return f"dma_transpose: this DMA transpose moves 2-byte elements, src is {dt}"


@rule("dma_transpose", "src tensor must be on HBM")
def _indirect_src_hbm(call: Call) -> str | None:
    m = _mem(call, "src")
    if not _indirect(call) or m is None or m in _HBM:
        return None
    return f"dma_transpose: an indirect transpose gathers from HBM, src is in {m}"


@rule("dma_transpose", "TRN2+ only", gens=(2,))
def _indirect_trn2(call: Call) -> str | None:
    return "dma_transpose: an indirect (gather) transpose needs trn2 or newer" if _indirect(call) else None


@rule("dma_transpose", "Only valid when src uses indirect indexing.")
def _transpose_oob_skip(call: Call) -> str | None:
    if "src_indirect" not in call.fields or not call.fields.get("oob_skip") or _indirect(call):
        return None  # the IR does not say whether a register-offset src is indirect: asked at the call only
    return "dma_transpose: oob_mode=skip is only valid when src uses indirect indexing"


@rule("dma_transpose", "indices.dtype is np.uint32")
def _indices_uint32(call: Call) -> str | None:
    dt = dtype_of(call, "src_offset")
    if dt is None or dt == "uint32" or "src_indirect" not in call.fields:
        return None
    return f"dma_transpose: the indices of an indirect transpose must be uint32, got {dt}"


@rule("dma_transpose", "indices tensor must be on SBUF")
def _indices_sbuf(call: Call) -> str | None:
    m = _mem(call, "src_offset") if "src_indirect" in call.fields else None  # the call's vector index only
    return None if m in (None, "sbuf") else f"dma_transpose: the indices of an indirect transpose must be in SBUF, not {m}"


# The other items of the indirect list ("When src is 4D: ..."; the index shapes: 2-d, 16..128 rows, a multiple of
# 16, 128 rows when more than one column, count >= src.shape[0]) describe the device's gather-transpose lowering;
# the sentences holding them are encoded by the rules above ('src.shape[-1] <= 128', 'src.dtype is 2 bytes', 'src
# tensor must be on HBM', the indices' dtype and memory). nkic takes one index per row, (P, 1)
# (frontend/tensor.py:NkiTensor._dynamic_offset).


# ------------------------------------------------------------------------------------------------------------
# dma_compute
# ------------------------------------------------------------------------------------------------------------
DMA_COMPUTE_MAX_SOURCES = 16


def _add_only(call: Call) -> str | None:
    op = call.fields.get("reduce_op")
    return None if op in (None, "add") else f"dma_compute: reduce_op must be nl.add, got {op}"


def _unit_scales(call: Call) -> str | None:
    scales = call.fields.get("scales")
    if scales is None:
        return None
    n = call.fields.get("n_srcs")
    if n is not None and len(scales) != n:
        return f"dma_compute: {len(scales)} scales for {n} sources"
    return None if all(float(s) == 1.0 for s in scales) else f"dma_compute: every scale must be 1.0, got {list(scales)}"


def _unique(call: Call) -> str | None:
    if call.fields.get("unique_indices", True) or not call.fields.get("dynamic"):
        return None
    return "dma_compute: unique_indices=False is not supported with a dynamic operand"


rule("dma_compute", "Currently, only nl.add is supported for reduce_op")(_add_only)
rule("dma_compute", "(currently only nl.add is supported)")(_add_only)
rule("dma_compute", "all values in scales must be 1.0 (or scales can be None which defaults to all 1.0).")(_unit_scales)
rule("dma_compute", "All scales must be 1.0 (or None)")(_unit_scales)
rule("dma_compute", "Must be all 1.0 if provided.")(_unit_scales)
rule("dma_compute", "unique_indices must be True (non-unique indices not yet supported)")(_unique)
rule("dma_compute", "Must be True when using vector_offset (non-unique not yet supported).")(_unique)


@rule("dma_compute", "The element count of each tensor in srcs and dst must match exactly.")
def _dma_compute_counts(call: Call) -> str | None:
    dst = _op(call, "dst")
    if dst is None:
        return None
    for role, op in call.operands.items():
        if role.startswith("src") and not role.endswith("_offset") and op.dims[0] * op.dims[1] != dst.dims[0] * dst.dims[1]:
            name = call.fields.get("names", {}).get(role, role)
            return (f"dma_compute: element count mismatch: dst has {dst.dims[0] * dst.dims[1]} elements, {name} has "
                    f"{op.dims[0] * op.dims[1]}")  # fmt: skip
    return None


@rule("dma_compute", "The max number of source tensors in srcs is 16.")
def _dma_compute_max_srcs(call: Call) -> str | None:
    n = call.fields.get("n_srcs")
    if n is None or n <= DMA_COMPUTE_MAX_SOURCES:
        return None
    return f"dma_compute: {n} sources, at most {DMA_COMPUTE_MAX_SOURCES}"


waive("nisa.dma_compute", "Both srcs and dst tensors must have compile-time known addresses", "ambiguous: "
      "nkic's read-modify-write forms (frontend/recorders/movement.py:_dma_compute_rmw) also take a scalar offset "
      "(a (1, 1) index "
      "tile or a register), a run-time start address like vector_offset's rows; a dynamic operand outside those "
      "forms is refused there")
waive("nisa.dma_compute", "The only supported DGE mode for read-modify-write", "semantics, not a restriction: "
      "nisa.dma_compute takes no dge_mode ('The compiler automatically assigns the correct DGE mode')")
waive("nisa.dma_compute", "For dma_compute without vector_offset, the only supported DGE mode", "semantics, not a "
      "restriction: nisa.dma_compute takes no dge_mode ('The compiler automatically assigns the correct DGE mode')")


# ------------------------------------------------------------------------------------------------------------
# sendrecv, core_barrier
# ------------------------------------------------------------------------------------------------------------
rule("sendrecv", "src and dst tiles must both be in SBUF.")(_memories("sendrecv", {"src": ("sbuf",), "dst": ("sbuf",)}))


rule("sendrecv", "src and dst must have the same data type, but they can be any supported data types in NKI.")(
    _same_dtype("sendrecv", "src", "dst", "; sendrecv cannot cast"))


@rule("sendrecv", "src and dst must have the same partition dimension size and the same number of elements per "
      "partition.")
def _sendrecv_dims(call: Call) -> str | None:
    s, d = _op(call, "src"), _op(call, "dst")
    if s is None or d is None or s.dims == d.dims:
        return None
    if s.dims[0] != d.dims[0]:
        return f"sendrecv: partition count mismatch: 'dst' has {d.dims[0]} partitions, 'src' has {s.dims[0]}"
    return f"sendrecv: 'dst' has {d.dims[1]} elements per partition but 'src' has {s.dims[1]}"


@rule("sendrecv", "Therefore, send_to_rank and recv_from_rank must be either 0 or 1.")
def _sendrecv_ranks(call: Call) -> str | None:
    for name in ("send_to_rank", "recv_from_rank"):
        rank = call.fields.get(name)
        if rank is not None and rank not in (0, 1):
            return f"sendrecv: {name} must be 0 or 1 (a core of the LNC=2 pair), got {rank}"
    return None


rule("sendrecv", "Available only on NeuronCore-v3 or newer.", gens=(2,))(_missing("nisa.sendrecv", 3))


waive("nisa.sendrecv", "This instruction is only allowed in NeuronCore-v3 or newer when", "ambiguous: LNC is the "
      "platform's setting, not the launch's; nkic's LNC=2 pair is the kernel[2] launch, and a one-program launch may "
      "still run on an LNC=2 core, so nkic accepts a sendrecv to the core itself there (tests/unit/test_lnc_pair.py); "
      "a rank outside the launch is an error (frontend/recorders/lnc.py:_rank), v2 a rule of its own")

waive("nisa.sendrecv", "Operations with the same pipe_id form a logical group", "semantics, not a restriction: the "
      "simulator pairs a pipe's sendrecvs and completes them together")
waive("nisa.sendrecv", "- src and dst must have the same shape and layout.", "ambiguous: the next sentence states "
      "the requirement as the same partition size and the same number of elements per partition (a rule); nkic "
      "accepts free dims shaped differently")


def _cores(call: Call) -> str | None:
    # Read as "the cores named are those of the pair (0, 1)": nki-library writes core_barrier(t, (0,)) for a single
    # shard, which runs on the device; a subset of the pair is accepted.
    for i, c in enumerate(call.fields.get("cores_given") or ()):
        if c not in (0, 1):
            return f"core_barrier: cores[{i}] must be 0 or 1 (a core of the LNC=2 pair), got {c}"
    return None


rule("core_barrier", "Currently only cores=(0, 1) is supported.")(_cores)
rule("core_barrier", "only (0, 1) is supported when LNC2 is enabled")(_cores)

rule("core_barrier", "Available only on NeuronCore-v3 or newer.", gens=(2,))(_missing("nisa.core_barrier", 3))
waive("nisa.core_barrier", "This instruction creates a synchronization point", "semantics, not a restriction: the "
      "simulator's barrier (every listed core waits for the others)")
waive("nisa.core_barrier", "This instruction is only allowed in NeuronCore-v3 or newer when", "ambiguous: "
      "nki-library calls core_barrier(cores=(0, 1)) in kernels that also run as one program; nkic lets a core the "
      "launch does not have wait for nobody (frontend/recorders/lnc.py:core_barrier); v3+ is the declaration's since")
waive("nisa.core_barrier", "This must be data in shared HBM", "ambiguous: the barrier never touches data, and "
      "nki-library's router_topk barriers on an SBUF tensor: nkic accepts HBM or SBUF (PSUM is refused by the "
      "declaration's memories)")
waive("nisa.core_barrier", ":param data: the shared data", "ambiguous: as 'This must be data in shared HBM' (nkic "
      "accepts HBM or SBUF, as nki-library's router_topk needs)")


# ------------------------------------------------------------------------------------------------------------
# register_load, register_store (register_alloc / register_move take no tensors)
# ------------------------------------------------------------------------------------------------------------
def _one_element(name: str, role: str) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        t = _op(call, role)
        if t is None or t.dims[0] * t.dims[1] == 1:
            return None
        return f"{name}: '{role}' must hold exactly one element, got {t.dims[0] * t.dims[1]} elements"

    return test


def _scalar_word(name: str, role: str) -> Callable[[Call], str | None]:
    def test(call: Call) -> str | None:
        t = _op(call, role)
        if t is None:
            return None
        if t.memory not in ("sbuf", *_HBM):
            return f"{name}: '{role}' must be in SBUF or HBM, not {t.memory}"
        if dtype_size(t.dtype) > 4:
            return f"{name}: '{role}' is {t.dtype}; a register holds at most 32 bits"
        return None

    return test


rule("register_load", "The source must be a NKI tensor with exactly one element (shape [1] or [1, 1]).")(
    _one_element("register_load", "src"))
rule("register_load", "This instruction reads a single scalar value (up to 32-bit) from a memory location (HBM or "
     "SBUF)")(_scalar_word("register_load", "src"))
rule("register_store", "The destination must be a tensor with exactly one element (shape [1] or [1, 1]).")(
    _one_element("register_store", "dst"))
rule("register_store", "This instruction writes the scalar value (up to 32-bit) stored in a virtual register to a "
     "memory location (HBM or SBUF).")(_scalar_word("register_store", "dst"))
waive("nisa.register_move", "This instruction operates on virtual registers only", "semantics, not a restriction: "
      "register_move takes no tensor (frontend/control.py)")
