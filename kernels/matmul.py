"""Blocked matmul ``out[M, N] = lhsT[K, M]^T @ rhs[K, N]``, operands kept in SBUF.

The previous kernel reloaded both operand tiles for every ``nc_matmul`` and was DMA-bound (22-25% of the bf16 PE
roofline at 1024^3 and 2048^3). Here the output is blocked over N and M:

* for each N block (up to ``BLOCK_N`` = 1024 columns) the whole ``rhs[:, block]`` is loaded once, one DMA per
  128-row K tile (2 KiB contiguous per partition in bf16: efficient transfers), and stays in SBUF;
* for each M block (up to ``BLOCK_M`` = 512 rows) inside it, ``lhsT[:, block]`` is loaded once, one DMA per K tile;
* every (128 x 512) output tile of the block accumulates its K/128 matmuls in one PSUM bank (NKI's implicit rule:
  the first write overwrites, later ones add), is evacuated into an SBUF row block, and each 128-row block of the
  output is stored with one DMA per N block.

So ``rhs`` is read once, ``lhsT`` N/BLOCK_N times, and each loaded tile feeds BLOCK_M/128 or BLOCK_N/512 matmuls.
Block sizes shrink to divide the problem (any K, M multiple of 128 and N multiple of the 512-column tile, or
N <= 512). SBUF use per partition: K/128 * (BLOCK_N + BLOCK_M) elements plus a BLOCK_N output row.
"""

from nkic import api as nki

nl = nki.language
nisa = nki.isa

TILE = 128  # K and M tile: partitions / stationary free size
BLOCK_N = 1024  # output columns per N block (two 512-column PSUM tiles)
BLOCK_M = 512  # output rows per M block (four 128-row tiles)


def _block(total: int, tile: int, most: int) -> int:
    """The largest multiple of ``tile`` up to ``most`` that divides ``total``."""
    for size in range(min(most, total) // tile * tile, 0, -tile):
        if total % size == 0:
            return size
    return tile


@nki.jit
def matmul(lhsT, rhs):
    k_total, m_total = lhsT.shape
    _, n_total = rhs.shape
    tile_n = min(n_total, 512)
    if k_total % 128 or m_total % 128 or n_total % tile_n or rhs.shape[0] != k_total:
        raise ValueError(
            f"matmul tiles K and M by 128 and N by {tile_n}: lhsT is {tuple(lhsT.shape)} (K, M), rhs "
            f"{tuple(rhs.shape)} (K, N); K and M must be multiples of 128, N of {tile_n}, and both K equal"
        )
    block_n = _block(n_total, tile_n, BLOCK_N)
    block_m = _block(m_total, TILE, BLOCK_M)
    k_tiles = k_total // TILE
    out = nl.ndarray((m_total, n_total), dtype=lhsT.dtype, buffer=nl.shared_hbm, name="out")
    for nb in nl.affine_range(n_total // block_n):
        n0 = nb * block_n
        b = nl.ndarray((TILE, k_tiles, block_n), dtype=rhs.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(k_tiles):
            nisa.dma_copy(dst=b[:, k, :], src=rhs[k * TILE : (k + 1) * TILE, n0 : n0 + block_n])
        for mb in nl.affine_range(m_total // block_m):
            m0 = mb * block_m
            a = nl.ndarray((TILE, k_tiles, block_m), dtype=lhsT.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(k_tiles):
                nisa.dma_copy(dst=a[:, k, :], src=lhsT[k * TILE : (k + 1) * TILE, m0 : m0 + block_m])
            for mt in nl.affine_range(block_m // TILE):
                res = nl.ndarray((TILE, block_n), dtype=lhsT.dtype, buffer=nl.sbuf)
                for nt in nl.affine_range(block_n // tile_n):
                    acc = nl.ndarray((TILE, tile_n), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(k_tiles):
                        nisa.nc_matmul(acc, a[:, k, mt * TILE : (mt + 1) * TILE],
                                       b[:, k, nt * tile_n : (nt + 1) * tile_n])  # fmt: skip
                    nisa.tensor_copy(dst=res[:, nt * tile_n : (nt + 1) * tile_n], src=acc)
                rows = m0 + mt * TILE
                nisa.dma_copy(dst=out[rows : rows + TILE, n0 : n0 + block_n], src=res)
    return out
