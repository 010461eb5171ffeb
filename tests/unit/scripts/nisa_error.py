"""A kernel calling a collective without its replica group: ``python -m nkic`` reports one line and exits 1."""

import numpy as np

import nki
import nki.collectives as ncc
import nki.language as nl


@nki.jit
def broken(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ncc.all_reduce(srcs=[a], dsts=[out], replica_group=None, op=nl.add)  # line 13: no replica group
    return out


broken(np.zeros((128, 64), np.float32))
