"""Row softmax: the negated row max is the activation bias, so ``exp(x - max)`` and the row sum are one
``activation``; the reciprocal of the sum scales the result."""

from nkic import api as nki

nl = nki.language
nisa = nki.isa


@nki.jit
def softmax(x):
    rows, cols = x.shape
    if rows % 128 or rows == 0:
        raise ValueError(f"softmax works on bands of 128 rows: x has {rows} rows, not a multiple of 128")
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="out")
    for i in nl.affine_range(rows // 128):
        t = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128 : (i + 1) * 128, :])
        neg_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=t, axis=1, negate=True)
        e = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=e, op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )  # fmt: skip
        inv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        y = nl.ndarray((128, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=e, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=y)
    return out
