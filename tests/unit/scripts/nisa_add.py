"""A standalone NKI script for ``python -m nkic``: adds two arrays with nisa and checks the result."""

import sys

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=b)
    nisa.tensor_tensor(dst=x, data1=x, data2=y, op=nl.add)
    nisa.dma_copy(dst=out, src=x)
    return out


if __name__ == "__main__":
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    a = np.full((128, 64), scale, np.float32)
    result = add(a, a)  # a direct call on numpy arrays: compile and simulate
    assert np.allclose(result, 2 * a)
    print(f"ok {sys.argv[1:]} {float(result[0, 0])}")
