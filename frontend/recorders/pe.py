"""The PE array (TensorE): ``nc_matmul``, ``nc_transpose`` and the MX (microscaling) pair ``quantize_mx`` /
``nc_matmul_mx``."""

from __future__ import annotations

from typing import Any

from nkic.frontend.context import nki_op
from nkic.frontend.errors import NkiError
from nkic.frontend.recorders.enums import _ENGINE, matmul_perf_mode
from nkic.frontend.recorders.record import _enum, _mask, _on_chip, _record, _rules, _target, _tensor
from nkic.frontend.tensor import NkiTensor
from nkic.target.instructions import INSTRUCTIONS, dims_problem
from nkic.target.machine import Target


# -- matmul / transpose -------------------------------------------------------------------------------------
@nki_op
def nc_matmul(
    ctx: Any,
    dst: NkiTensor,
    stationary: NkiTensor,
    moving: NkiTensor,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: bool | None = None,
    tile_position: Any = (),
    tile_size: Any = (),
    perf_mode: Any = None,
    **kw: Any,
) -> None:
    """``dst[M, N] (+)= stationary[K, M]ᵀ · moving[K, N]`` on the PE array (see ``_matmul_mode`` for the options)."""
    _mask(kw)
    op = "nc_matmul"
    dst, st, mv = _tensor(op, "dst", dst), _tensor(op, "stationary", stationary), _tensor(op, "moving", moving)
    t = _target(ctx)
    double_row = _perf_mode(op, perf_mode)
    tiles = _pe_tiles(op, tile_position, tile_size, t)
    attrs: dict[str, Any] = {"accumulate": None if accumulate is None else bool(accumulate)}
    # gen2 has no transpose mode: is_transpose only labels the instruction for the profiler there (a plain matmul).
    attrs["is_transpose"] = bool(is_transpose) and t.nc_version >= 3 or None
    attrs["double_row"] = double_row or None
    attrs["is_stationary_onezero"] = bool(is_stationary_onezero) or None
    attrs["is_moving_onezero"] = bool(is_moving_onezero) or None
    if tiles is not None:
        attrs.update(zip(("tile_row", "tile_col", "tile_rows", "tile_cols"), tiles))
    operands = {"dst": dst, "stationary": st, "moving": mv}
    # memories, K/M/N limits, tiling and double_row's rules (target/rules/pe.py)
    _rules(ctx, "matmul", operands, {**attrs, "tile_position": tile_position, "tile_size": tile_size,
                                     "shapes": {"stationary": tuple(st.shape), "moving": tuple(mv.shape)}})
    m, n = st.free_size // (2 if double_row else 1), mv.free_size // (2 if double_row else 1)
    if dst.partitions != m or dst.free_size != n:
        raise NkiError(f"{op}: dst shape {dst.shape} does not match the [M={m}, N={n}] result")
    _record(ctx, "matmul", operands, attrs)


def _perf_mode(op: str, perf_mode: Any) -> bool:
    """Whether ``perf_mode`` asks for FP8 double-row mode (gen3+; its generation, dtype and ``[K, 2, ...]`` shape are
    rules: ``target/rules/pe.py``): the contraction runs over K and that dim of 2."""
    name = perf_mode.name if isinstance(perf_mode, matmul_perf_mode) else perf_mode
    if name in (None, "none"):
        return False
    if name not in ("double_row", "double_row_gen3"):  # the second spelling is NKI 0.1's
        raise NkiError(f"{op}: perf_mode must be matmul_perf_mode.none or matmul_perf_mode.double_row, "
                       f"got {perf_mode!r}")  # fmt: skip
    return True


def _pe_tiles(op: str, tile_position: Any, tile_size: Any, t: Target) -> tuple[int, int, int, int] | None:
    """(start_row, start_column, row_size, column_size) of a matmul in PE tiling mode, None for the full array.

    Sizes are 64 or 128 (and 32 from gen3), positions multiples of their size inside the array. The API reference's
    parameter list says start_column must be 0, but its tiling section and nki-library's kernels tile columns too:
    nkic follows the latter. Tiling places the matmul on the array; the result is the same (see the MATMUL cost).
    """
    if not tile_position or not tile_size:
        return None  # one without the other: a rule (target/rules/pe.py)
    row, col = _static_pair(op, tile_position, "tile_position")
    rows, cols = _static_pair(op, tile_size, "tile_size")
    legal = (32, 64, 128) if t.nc_version >= 3 else (64, 128)
    if rows not in legal or cols not in legal:
        raise NkiError(f"{op}: tile_size sizes must be in {legal} on {t.name}, got {(rows, cols)}")
    return row, col, rows, cols  # the positions' rules: target/rules/pe.py


def _dims_rule(op: str, name: str, operands: dict[str, NkiTensor]) -> None:
    problem = dims_problem(INSTRUCTIONS[name], {r: (t.partitions, t.free_size) for r, t in operands.items()})
    if problem is not None:
        raise NkiError(f"{op}: {problem}")


@nki_op
def quantize_mx(ctx: Any, dst: NkiTensor, src: NkiTensor, dst_scale: NkiTensor, **kw: Any) -> None:
    """MXFP8 quantization on VectorE: for each group of 8 partitions x 4 values of ``src`` one float8_e8m0fnu
    scale in ``dst_scale`` and 4 packed fp8 values per ``dst`` element (see the QUANTIZE_MX executor)."""
    _mask(kw)
    op = "quantize_mx"
    dst, src, scale = _tensor(op, "dst", dst), _tensor(op, "src", src), _tensor(op, "dst_scale", dst_scale)
    operands = {"dst": dst, "src": src, "dst_scale": scale}
    _rules(ctx, op, operands, {})  # memories, dtypes, sizes (target/rules/pe.py)
    _dims_rule(op, op, operands)
    _record(ctx, op, operands, {}, "vector")


def _static_pair(op: str, value: Any, name: str) -> tuple[int, int]:
    try:
        a, b = value
        return int(a), int(b)  # an affine expression needs its value: the loop unrolls
    except (TypeError, ValueError):
        raise NkiError(f"{op}: {name} must be a pair of integers, got {value!r}") from None


@nki_op
def nc_matmul_mx(
    ctx: Any,
    dst: NkiTensor,
    stationary: NkiTensor,
    moving: NkiTensor,
    stationary_scale: NkiTensor,
    moving_scale: NkiTensor,
    tile_position: Any = None,
    tile_size: Any = None,
    accumulate: bool | None = None,
    **kw: Any,
) -> None:
    """``dst[M, N] (+)=`` the MX matmul of packed ``stationary[K, M]`` and ``moving[K, N]`` on the PE array: the
    contraction runs over K and the 4 values of each packed element, each value times its group's scale."""
    _mask(kw)
    op = "nc_matmul_mx"
    names = ("dst", "stationary", "moving", "stationary_scale", "moving_scale")
    operands = {r: _tensor(op, r, t) for r, t in zip(names, (dst, stationary, moving, stationary_scale, moving_scale))}
    pos = _static_pair(op, tile_position, "tile_position") if tile_position else None
    size = _static_pair(op, tile_size, "tile_size") if tile_size else None
    # memories, dtypes, sizes and row tiling (target/rules/pe.py); then the scales' layout (the declaration's)
    _rules(ctx, "matmul_mx", operands, {"tile_position": pos, "tile_size": size})
    _dims_rule(op, "matmul_mx", operands)
    attrs = {"accumulate": None if accumulate is None else bool(accumulate)}
    _record(ctx, "matmul_mx", operands, attrs)


@nki_op
def nc_transpose(ctx: Any, dst: NkiTensor, data: NkiTensor, engine: Any = None, **kw: Any) -> None:
    """``dst[F, P] = data[P, F]`` (TensorE up to 128×128 SBUF→PSUM, VectorE up to 32×32)."""
    _mask(kw)
    op = "nc_transpose"
    dst, data = _tensor(op, "dst", dst), _tensor(op, "data", data)
    _on_chip(op, "dst", dst)
    _on_chip(op, "data", data)
    eng = _enum(engine, _ENGINE, "engine")
    _rules(ctx, "transpose", {"dst": dst, "data": data}, {"engine": eng})
    limit = 32 if eng == "vector" else 128
    if data.partitions > limit or data.free_size > limit:
        raise NkiError(f"{op}: data shape {data.shape} exceeds the {limit}x{limit} transpose limit of {eng}")
    if dst.partitions != data.free_size or dst.free_size != data.partitions:
        raise NkiError(f"{op}: dst shape {dst.shape} must be the transpose of data shape {data.shape}")
    _record(ctx, "transpose", {"dst": dst, "data": data}, {"engine": eng}, eng)
