"""The memoised ISA verifier (dialects/isa/verify_memo.py): an op that shares its shape attributes with an already
verified one is checked per instruction only, and still rejected, with the full verifier's diagnostic, whenever
its id, semaphores or locations are wrong."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from xdsl.utils.exceptions import VerifyException

from nkic.dialects.isa import ISA_OPS, IsaInst
from nkic.dialects.isa import verify_memo
from nkic.dialects.isa.base import CAPACITY, shape_key
from nkic.target.isa import Operand

ACT = ISA_OPS[("act", "activate")]
DMA = ISA_OPS[("sp", "dma_copy")]
ROW = ((1, 128), (1, 512))


def _message(op: IsaInst) -> str | None:
    try:
        op.verify()
    except VerifyException as e:
        return str(e)
    return None


def _act(inst_id: int = 1, dst: Operand | None = None, **kw: object) -> IsaInst:
    dst = dst or Operand("sbuf", "float32", ROW, address=0x800)
    return ACT.make(inst_id, {"dst": dst, "src": Operand("sbuf", "float32", ROW)}, func="exp", **kw)


def _dma(queue: int = 1, src_address: int = 0x100, **kw: object) -> IsaInst:
    dst = Operand("sbuf", "float32", ((1, 128), (1, 4)))
    src = Operand("hbm", "float32", ((4, 128), (-1, 4)), address=src_address)  # reads 3 elements before its address
    return DMA.make(0, {"dst": dst, "src": src}, queue=queue, **kw)


MM = ISA_OPS[("pe", "matmul")]


def _mm(dst_address: int = 0) -> IsaInst:
    """A [128, 512] fp32 result: one whole 2 KiB PSUM bank per partition at a bank-aligned address."""
    return MM.make(1, {"dst": Operand("psum", "float32", ROW, address=dst_address),
                       "stationary": Operand("sbuf", "bfloat16", ((1, 128), (1, 128))),
                       "moving": Operand("sbuf", "bfloat16", ROW, address=0x400)})  # fmt: skip


BAD: dict[str, tuple[Callable[[], IsaInst], Callable[[], IsaInst]]] = {
    "bytes past the partition": (_act, lambda: _act(dst=Operand("sbuf", "float32", ROW, address=CAPACITY["sbuf"] - 64))),
    "partitions past 128": (_act, lambda: _act(dst=Operand("sbuf", "float32", ROW, start_partition=1))),
    "memory the engine cannot reach": (_act, lambda: _act(dst=Operand("hbm", "float32", ROW, address=0))),
    "another engine's semaphore": (lambda: _act(signal_sem=1), lambda: _act(signal_sem=2)),
    "no such semaphore": (lambda: _act(wait_sem=1, wait_value=1), lambda: _act(wait_sem=6, wait_value=1)),
    "wait value past 32 bits": (lambda: _act(wait_sem=1, wait_value=1), lambda: _act(wait_sem=1, wait_value=1 << 32)),
    "id past 32 bits": (_act, lambda: _act(inst_id=1 << 32)),
    "the queue's semaphore": (lambda: _dma(signal_sem=9), lambda: _dma(signal_sem=8)),
    "HBM access before its variable": (_dma, lambda: _dma(src_address=0)),
    "a matmul result across a PSUM bank (LOC_RULES)": (_mm, lambda: _mm(dst_address=0x100)),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_memo_hit_rejects_like_the_full_verifier(case: str) -> None:
    good, bad = (f() for f in BAD[case])
    assert shape_key(good)[0] == shape_key(bad)[0]  # type: ignore[index]  # the memo entry applies to bad
    verify_memo._MEMO.clear()
    assert _message(good) is None
    assert len(verify_memo._MEMO) == 1
    memoised = _message(bad)
    verify_memo._MEMO.clear()
    full = _message(bad)
    assert memoised is not None and memoised == full


def test_ops_sharing_shape_attributes_share_one_entry() -> None:
    verify_memo._MEMO.clear()
    for i in range(20):
        op = _act(i, dst=Operand("sbuf", "float32", ROW, address=0x800 * (i + 1)), wait_sem=8, wait_value=i)
        op.verify()
    assert len(verify_memo._MEMO) == 1
