"""A script whose kernel calls an NKI instruction nkic lacks: ``python -m nkic`` reports one line and exits 1."""

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def broken(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.sendrecv(dst=out, src=a)  # line 13: not implemented by nkic
    return out


broken(np.zeros((128, 64), np.float32))
