"""A user kernel in the public NKI style: it imports `nki`, not nkic (run after nkic.install_nki_alias())."""

import nki
import nki.isa as nisa
import nki.language as nl
from nki.isa import reduce_cmd


@nki.jit
def scaled_exp_rowsum(x, scale):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="out")
    sums = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm, name="sums")
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=t, scale=scale, reduce_op=nl.add, reduce_res=s,
                    reduce_cmd=reduce_cmd.reset_reduce)
    nisa.dma_copy(dst=out, src=e)
    nisa.dma_copy(dst=sums, src=s)
    return out, sums


@nki.jit
def bad_output_buffer(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=x)
    return out
