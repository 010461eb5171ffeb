"""Spilling (``passes/spill.py``, called by ``allocate-memory``): a kernel whose tiles live at once exceed SBUF
compiles with some tiles stored to HBM and reloaded before their next use, says so in one warning, lists the spills
in ``--metrics``, simulates and matches numpy; a kernel that fits is not touched."""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np

from nkic import api as nki
from nkic.compiler.driver import compile_kernel
from nkic.passes.spill import AllocationWarning
from nkic.target.machine import get_target

nl, nisa = nki.language, nki.isa
GEN3 = get_target("gen3")
COLS = 16384  # fp32: 64 KiB per partition per tile


@nki.jit
def minus_total(a):
    """Every tile is needed for the total, and again after it: all live at once, whatever the order."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tiles = [nl.load(a[i]) for i in range(a.shape[0])]
    total = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=total, src=tiles[0])
    for t in tiles[1:]:
        nisa.tensor_tensor(dst=total, data1=total, data2=t, op=nl.add)
    for i, t in enumerate(tiles):
        nisa.tensor_tensor(dst=t, data1=t, data2=total, op=nl.subtract)  # in place: no tile more
        nl.store(out[i], t)
    return out


def _input(n: int, cols: int = COLS) -> np.ndarray:
    return np.random.default_rng(n).integers(-8, 9, (n, 128, cols)).astype(np.float32)  # exact sums


def test_tiles_beyond_sbuf_are_spilled_and_the_result_matches_numpy() -> None:
    a = _input(3)
    assert 4 * COLS * 4 > GEN3.sbuf_bytes_per_partition  # three tiles and the total
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = nki.simulate(minus_total)(a)
    np.testing.assert_array_equal(got, a - a.sum(axis=0))
    said = [w for w in seen if issubclass(w.category, AllocationWarning)]
    spills = [w for w in said if "spilled to HBM" in str(w.message)]
    assert len(spills) == 1, [str(w.message) for w in seen]  # one line per kernel
    # pre-schedule's order did not fit either: its fallback to the program order says why
    fallback = [str(w.message) for w in said if "pre-schedule's order does not fit" in str(w.message)]
    assert len(fallback) == 1 and "kernel does not fit in SBUF: tensor 'minus_total." in fallback[0], fallback
    text = str(spills[0].message)
    assert "kernel 'minus_total' does not fit in SBUF as scheduled" in text and "spilled to HBM" in text
    assert spills[0].filename == __file__  # at the allocation of a spilled tile


def test_metrics_list_the_spills() -> None:
    out = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out):
        warnings.simplefilter("ignore", AllocationWarning)
        compile_kernel(minus_total, (_input(3),), metrics=True)
    line = next(x for x in out.getvalue().splitlines() if "spills:" in x)
    assert "SBUF tensors through HBM" in line and "stores +" in line and "reloads" in line


def test_a_kernel_that_fits_is_not_spilled() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", AllocationWarning)
        neff = compile_kernel(minus_total, (_input(2),)).neff  # two tiles and the total fit
    assert neff
