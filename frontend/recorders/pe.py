"""The PE array (TensorE): ``nc_matmul``, ``nc_transpose`` and the MX (microscaling) pair ``quantize_mx`` /
``nc_matmul_mx``."""

from __future__ import annotations

import dis
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

from nkic.frontend.context import nki_op
from nkic.frontend.errors import NkiError, user_frame
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


# -- psum_tile += <matmul result>: accumulate in place -------------------------------------------------------
# The legacy idiom ``psum_tile += nisa.nc_matmul(a, b)`` (also ``+= nl.matmul(x, y)``) is PSUM accumulation on the
# device: "K>128 → accumulate into the same bank; first write overwrites" and "Only TensorE accumulates in PSUM (FP32
# read-add-write)" (reference/hardware.md); the legacy API's nc_matmul "D1 returns the PSUM tile; accumulate via
# ``psum[...] += …``" (reference/nki-api.md), and the SDK's own nc_matmul example 2 ("using psum accumulation") is
# ``f_psum = nl.zeros(..., buffer=nl.psum)`` then ``f_psum += nisa.nc_matmul(d, e)`` in an affine_range. So the
# matmul that made the right-hand side is traced again into the accumulator with ``accumulate=True`` ("Accumulates
# the result to the existing PSUM content", nki.isa.nc_matmul) and the temporary PSUM tile is dropped: no second
# bank, no copy to SBUF, no VectorE add. The numbers are the same as the add's: ``acc + matmul`` in fp32 either way.


@dataclass
class FreshMatmul:
    """The PSUM tile a matmul-returning call (legacy ``nisa.nc_matmul``, ``nl.matmul``) just returned."""

    out: NkiTensor
    op: Any  # the matmul traced into it
    api_call: str  # the nki function it was traced for (its rules and its instructions' ``call``)
    frame: FrameType | None  # the user's frame calling it, and the CALL instruction's offset there
    lasti: int
    again: Callable[[NkiTensor], None]  # the same matmul into another PSUM tile, accumulating


def note_fresh_result(ctx: Any, out: NkiTensor, again: Callable[[NkiTensor], None]) -> None:
    """``out`` was just written by the matmul traced last, and ``again(dst)`` traces that matmul into ``dst``."""
    frame = user_frame()
    ctx.fresh_matmul = FreshMatmul(out, ctx.last_traced(), ctx._api_call, frame,
                                   frame.f_lasti if frame is not None else -1, again)  # fmt: skip


def accumulate_in_place(ctx: Any, acc: NkiTensor, value: NkiTensor) -> bool:
    """``acc += value`` as the matmul that made ``value`` accumulating into ``acc``, when ``value`` is that matmul's
    fresh result and nothing else can read it; False (nothing traced) otherwise, and the caller adds as before."""
    fresh, ctx.fresh_matmul = ctx.fresh_matmul, None
    if fresh is None or fresh.out is not value or not _retargetable(ctx, fresh, acc):
        return False
    outer, ctx._api_call = ctx._api_call, fresh.api_call
    try:
        fresh.again(acc)
    except NkiError:  # a rule the accumulator breaks as a matmul dst (a view across banks ...): add instead
        return False
    finally:
        ctx._api_call = outer
    ctx.replace_traced(fresh.op)
    alloc = value.storage.handle.owner
    if not alloc.result.uses:
        alloc.detach()
        alloc.erase()
    return True


def _retargetable(ctx: Any, fresh: FreshMatmul, acc: NkiTensor) -> bool:
    """Whether retargeting keeps the program's meaning: the matmul is the last instruction traced, its result is read
    by nothing (one use: the matmul's dst) and is the right operand of this very ``+=`` straight from the call
    (so no name holds it for later), and the accumulator is an initialised fp32 tile of the result's size that no
    runtime index addresses (the add reads acc: an uninitialised one keeps the add, and its warning)."""
    value = fresh.out
    return (
        ctx.last_traced() is fresh.op
        and ctx.emitter.is_last(fresh.op)
        and value.storage.handle.uses.get_length() == 1
        and _adds_call_result(fresh)
        and acc.storage is not value.storage
        and acc.storage.written
        and acc.dyn is None
        and acc.dtype == acc.storage.dtype == value.dtype == "float32"
        and (acc.partitions, acc.free_size) == (value.partitions, value.free_size)
    )


def _adds_call_result(fresh: FreshMatmul) -> bool:
    """Whether the user's frame is executing ``x += <the call that returned fresh.out>``: the frame that made the
    call, at an in-place add whose previous instruction is that call."""
    frame = user_frame()
    if frame is None or frame is not fresh.frame:
        return False
    ops = _code_ops(frame.f_code)
    at = ops.get(frame.f_lasti)
    # a frame in a call reports its CALL's offset or, on 3.11, that of the CALL's last inline cache entry
    return at is not None and at[0] in _INPLACE_ADD and at[1] <= fresh.lasti < frame.f_lasti


# ``+=``: Python 3.11+'s BINARY_OP with the in-place add's argument (dis._nb_ops), 3.10's INPLACE_ADD
_INPLACE_ADD = {("INPLACE_ADD", None)} | {("BINARY_OP", i) for i, (_, sym) in
                                          enumerate(getattr(dis, "_nb_ops", ())) if sym == "+="}  # fmt: skip
# code -> {offset: ((opname, arg), the previous instruction's offset)}
_CODE_OPS: weakref.WeakKeyDictionary[CodeType, dict[int, tuple[tuple[str, Any], int]]] = weakref.WeakKeyDictionary()


def _code_ops(code: CodeType) -> dict[int, tuple[tuple[str, Any], int]]:
    table = _CODE_OPS.get(code)
    if table is None:
        ins = list(dis.get_instructions(code))
        table = {b.offset: ((b.opname, b.arg), a.offset) for a, b in zip(ins, ins[1:])}
        _CODE_OPS[code] = table
    return table
