"""``psum_tile += <matmul result>`` in a legacy kernel: the matmul accumulating into the PSUM tile in place.

The legacy idiom ``psum_tile += nisa.nc_matmul(a, b)`` (also ``+= nl.matmul(x, y)``) is PSUM accumulation on the
device: "K>128 → accumulate into the same bank; first write overwrites" and "Only TensorE accumulates in PSUM (FP32
read-add-write)" (reference/hardware.md); the legacy API's nc_matmul "D1 returns the PSUM tile; accumulate via
``psum[...] += …``" (reference/nki-api.md), and the SDK's own nc_matmul example 2 ("using psum accumulation") is
``f_psum = nl.zeros(..., buffer=nl.psum)`` then ``f_psum += nisa.nc_matmul(d, e)`` in an affine_range. So the
matmul that made the right-hand side is traced again into the accumulator with ``accumulate=True`` ("Accumulates
the result to the existing PSUM content", nki.isa.nc_matmul) and the temporary PSUM tile is dropped: no second
bank, no copy to SBUF, no VectorE add. The numbers are the same as the add's: ``acc + matmul`` in fp32 either way.

Not an instruction family (``recorders/__init__.py`` publishes those as ``nisa``): the legacy ``nc_matmul`` and
``nl.matmul`` note their result here, the legacy ``+=`` asks.
"""

from __future__ import annotations

import dis
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

from nkic.frontend.errors import NkiError, user_frame
from nkic.frontend.tensor import NkiTensor


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
