"""A blocked matmul for ``dot_general`` (and the convolution's patches): operands kept in SBUF and reused.

Op by op each ``nc_matmul`` used to load both of its tiles: every rhs tile was read M/128 times and every lhsT tile
N/512 times, and the program was DMA-bound (a 512 x 1024 x 4096 bf16 dot: 0.33 ms simulated, 16% of the PE
roofline; the library's blocked ``matmul`` kernel: 77 us). This is that kernel's blocking (kernels/matmul.py, itself
after the NKI matmul tutorial's "block the free dimensions, keep the operands in SBUF"): per N block of up to
``BLOCK_N`` columns the rhs K-tiles are loaded once (2 KiB contiguous per partition in bf16: the simulator's
``dma_run_efficiency`` reaches 70% at 2 KiB runs), per M block of up to ``BLOCK_M`` rows the lhsT K-tiles once, and every
128 x 512 output tile accumulates its K/128 matmuls in one PSUM bank. So rhs is read once and lhsT N/BLOCK_N times.
Blocks shrink when the resident K-tiles would take more than ``SBUF_BUDGET`` bytes per partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.hlo.tiles import F_TILE, K_TILE, P_TILE, Hbm

BLOCK_N = 1024  # two 512-column PSUM tiles
BLOCK_M = 512  # four 128-row tiles
SBUF_BUDGET = 96 * 1024  # bytes per partition for the resident K-tiles: half of a partition's 192 KiB


@dataclass(frozen=True)
class Operand:
    """A [batch..., rows, cols] matrix in HBM with contiguous cols: element (b..., r, c) at ``offset + sum(b_i *
    stride_i) + r * row_stride + c`` of ``tensor`` (``batch``: (size, stride) per batch dim, in order), stored as
    ``dtype`` and computed as ``compute`` (a bf16 weight read as f32 is loaded as bf16 and widened on chip)."""

    tensor: Any
    dtype: str
    offset: int
    batch: tuple[tuple[int, int], ...]
    row_stride: int
    compute: str

    @staticmethod
    def dense(h: Hbm, bsz: int, rows: int, cols: int) -> Operand:
        return Operand(h.tensor, h.dtype, 0, ((bsz, rows * cols),), cols, h.dtype)

    def base(self, bi: int) -> int:
        """The offset of batch ``bi`` (the batch dims' flat, row-major index)."""
        off = self.offset
        for size, stride in reversed(self.batch):
            bi, i = divmod(bi, size)
            off += i * stride
        return off


def _itemsize(dtype: str) -> int:
    return 4 if dtype in ("float32", "int32", "uint32") else 2 if dtype in ("bfloat16", "float16") else 1


def _blocks(k: int, m: int, n: int, dt: str) -> tuple[int, int]:
    bn, bm = min(BLOCK_N, n), min(BLOCK_M, m)
    ktiles = -(-k // K_TILE)
    while ktiles * (bn + bm) * _itemsize(dt) > SBUF_BUDGET and (bn > F_TILE or bm > P_TILE):
        if bn > F_TILE:
            bn = max(F_TILE, bn // 2)
        else:
            bm = max(P_TILE, bm // 2)
    return bn, bm


def blocked_matmul(a: Hbm | Operand, b: Hbm | Operand, out: Hbm | Operand, bsz: int, k: int, m: int, n: int) -> None:
    """``out[bi, m, n] = a[bi, k, m]^T @ b[bi, k, n]`` for each batch ``bi`` (row-major views, or strided ones)."""
    a, b = (x if isinstance(x, Operand) else Operand.dense(x, bsz, k, cols) for x, cols in ((a, m), (b, n)))
    out = out if isinstance(out, Operand) else Operand.dense(out, bsz, m, n)
    floats = ("float32", "bfloat16", "float16")
    dt = a.compute if a.compute == b.compute and a.compute in floats else "float32"
    bn, bm = _blocks(k, m, n, dt)
    for bi in range(bsz):
        for n0 in range(0, n, bn):
            nb = min(bn, n - n0)
            rhs = [_load(b, bi, k0, n0, min(K_TILE, k - k0), nb, dt) for k0 in range(0, k, K_TILE)]
            for m0 in range(0, m, bm):
                mb = min(bm, m - m0)
                lhs = [_load(a, bi, k0, m0, min(K_TILE, k - k0), mb, dt) for k0 in range(0, k, K_TILE)]
                _block(out, lhs, rhs, out.base(bi) + m0 * out.row_stride + n0, mb, nb)


def _load(x: Operand, bi: int, r0: int, c0: int, rows: int, cols: int, dt: str) -> Any:
    offset = x.base(bi) + r0 * x.row_stride + c0
    t = nl.load(x.tensor.ap([[x.row_stride, rows], [1, cols]], offset=offset))
    return t if t.dtype == dt else nl.copy(t, dtype=dt)


def _block(out: Operand, lhs: list[Any], rhs: list[Any], base: int, mb: int, nb: int) -> None:
    """The (mb x nb) output block at ``base``: 128 x 512 PSUM tiles over the resident K-tiles."""
    for i in range(0, mb, P_TILE):
        ni = min(P_TILE, mb - i)
        for j in range(0, nb, F_TILE):
            nj = min(F_TILE, nb - j)
            acc = nl.ndarray((ni, nj), dtype=nl.float32, buffer=nl.psum)
            for st, mv in zip(lhs, rhs):
                nisa.nc_matmul(acc, st[:, i : i + ni], mv[:, j : j + nj])
            nl.store(out.tensor.ap([[out.row_stride, ni], [1, nj]], offset=base + i * out.row_stride + j),
                     nl.copy(acc, dtype=out.dtype))  # fmt: skip
