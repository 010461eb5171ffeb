"""RMS-norm ``out = x / sqrt(mean(x^2) + eps) * w`` in bfloat16 (fp32 statistics).

The sum of squares comes from one ``activation(square)`` with an add reduction; ``w`` is broadcast to all 128
partitions by a DMA whose partition step is 0.
"""

from nkic import api as nki

nl = nki.language
nisa = nki.isa


@nki.jit
def rmsnorm(x, w, eps=1e-6):
    rows, d = x.shape
    if rows % 128 or rows == 0:
        raise ValueError(f"rmsnorm works on bands of 128 rows: x has {rows} rows, not a multiple of 128")
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="out")
    w_tile = nl.ndarray((128, d), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_tile, src=w.ap(pattern=[[0, 128], [1, d]], offset=0))
    for i in nl.affine_range(rows // 128):
        t = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128 : (i + 1) * 128, :])
        sq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        ss = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=sq, op=nl.square, data=t, reduce_op=nl.add, reduce_res=ss, reduce_cmd=nisa.reduce_cmd.reset_reduce
        )
        ms = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=ms, data=ss, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=eps)
        rstd = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=ms)
        xn = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=xn, data=t, op0=nl.multiply, operand0=rstd)
        y = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y, data1=xn, data2=w_tile, op=nl.multiply)
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=y)
    return out
