"""Tiled matmul ``out[M, N] = lhsT[K, M]^T @ rhs[K, N]`` with K > 128 accumulated in PSUM.

Each (128 x 512) output tile accumulates K/128 ``nc_matmul``s into one PSUM bank through NKI's implicit rule
(the first write overwrites, later ones add), then is evacuated to SBUF and stored.
"""

from nkic import api as nki

nl = nki.language
nisa = nki.isa


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
    out = nl.ndarray((m_total, n_total), dtype=lhsT.dtype, buffer=nl.shared_hbm, name="out")
    for m in nl.affine_range(m_total // 128):
        for n in nl.affine_range(n_total // tile_n):
            acc = nl.ndarray((128, tile_n), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_total // 128):
                a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((128, tile_n), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                nisa.dma_copy(dst=b, src=rhs[k * 128 : (k + 1) * 128, n * tile_n : (n + 1) * tile_n])
                nisa.nc_matmul(acc, a, b)
            res = nl.ndarray((128, tile_n), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * 128 : (m + 1) * 128, n * tile_n : (n + 1) * tile_n], src=res)
    return out
