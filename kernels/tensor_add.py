"""Element-wise tensor add, tiled 128 rows x up to 512 columns; ``tensor_add_spmd`` splits rows over a grid."""

from nkic import api as nki

nl = nki.language
nisa = nki.isa


def _add_rows(a, b, out, row0, rows, cols):
    tile_cols = min(cols, 512)
    for i in nl.affine_range(rows // 128):
        for j in nl.affine_range(cols // tile_cols):
            r = row0 + i * 128
            c = j * tile_cols
            x = nl.ndarray((128, tile_cols), dtype=a.dtype, buffer=nl.sbuf)
            y = nl.ndarray((128, tile_cols), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=x, src=a[r : r + 128, c : c + tile_cols])
            nisa.dma_copy(dst=y, src=b[r : r + 128, c : c + tile_cols])
            z = nl.ndarray((128, tile_cols), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
            nisa.dma_copy(dst=out[r : r + 128, c : c + tile_cols], src=z)


@nki.jit
def tensor_add(a, b):
    rows, cols = a.shape
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    _add_rows(a, b, out, 0, rows, cols)
    return out


@nki.jit
def tensor_add_spmd(a, b):
    """Launch as ``tensor_add_spmd[2](a, b)``: program p adds rows [p*R/2, (p+1)*R/2)."""
    rows, cols = a.shape
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    share = rows // nl.num_programs(axes=0)
    _add_rows(a, b, out, nl.program_id(axis=0) * share, share, cols)
    return out
