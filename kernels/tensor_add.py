"""Element-wise tensor add, tiled 128 rows x up to 512 columns (ragged last tiles included); ``tensor_add_spmd``
splits rows evenly over a grid."""

from nkic import api as nki

nl = nki.language
nisa = nki.isa


def _add_tile(a, b, out, r, c, nr, nc):
    x = nl.ndarray((nr, nc), dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray((nr, nc), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a[r : r + nr, c : c + nc])
    nisa.dma_copy(dst=y, src=b[r : r + nr, c : c + nc])
    z = nl.ndarray((nr, nc), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
    nisa.dma_copy(dst=out[r : r + nr, c : c + nc], src=z)


def _add_band(a, b, out, r, nr, cols):
    """Rows [r, r + nr) in tiles of up to 512 columns; a ragged last tile is added on its own."""
    tile_cols = min(cols, 512)
    for j in nl.affine_range(cols // tile_cols):
        _add_tile(a, b, out, r, j * tile_cols, nr, tile_cols)
    if cols % tile_cols:
        _add_tile(a, b, out, r, cols - cols % tile_cols, nr, cols % tile_cols)


def _add_rows(a, b, out, row0, rows, cols):
    """Rows [row0, row0 + rows) in bands of 128 partitions; a ragged last band (rows not a multiple of 128) too."""
    for i in nl.affine_range(rows // 128):
        _add_band(a, b, out, row0 + i * 128, 128, cols)
    if rows % 128:
        _add_band(a, b, out, row0 + rows - rows % 128, rows % 128, cols)


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
    if rows % nl.num_programs(axes=0):
        raise ValueError(f"tensor_add_spmd: {rows} rows do not split evenly over {nl.num_programs(axes=0)} programs")
    share = rows // nl.num_programs(axes=0)
    _add_rows(a, b, out, nl.program_id(axis=0) * share, share, cols)
    return out
