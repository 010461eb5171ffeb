"""The trace-time estimate of the live working set (``frontend/peak_live.py``): a kernel whose SBUF tiles must live at
once beyond what allocation can place, even with spilling, fails while tracing, at the user's line, naming its
largest live tensors; one within spilling's reach traces, and so does one whose tiles only look live at once
because it loads them all up front (the scheduler moves the loads)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from nkic import api as nki
from nkic.frontend import TensorSpec
from nkic.frontend.errors import NkiError
from nkic.frontend.peak_live import SPILL_FACTOR
from nkic.target.machine import get_target

nl, nisa = nki.language, nki.isa
GEN3 = get_target("gen3")
TILE = 16384  # fp32 columns: 64 KiB per partition
TRACED = [0]  # iterations of minus_total's tail traced before the error


@nki.jit
def minus_total(a, tail=0):
    """Every tile is read by the total and again after it: all live at once, in any order."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tiles = [nl.load(a[i]) for i in range(a.shape[0])]
    total = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=total, src=tiles[0])
    for t in tiles[1:]:
        nisa.tensor_tensor(dst=total, data1=total, data2=t, op=nl.add)
    for i, t in enumerate(tiles):
        nisa.tensor_tensor(dst=t, data1=t, data2=total, op=nl.subtract)
        nl.store(out[i], t)
    small = nl.load(a[0, :, 0:64])
    for _ in range(tail):
        TRACED[0] += 1
        nl.store(out[0, :, 0:64], small)
    return out


@nki.jit
def up_front(a):
    """Every tile loaded before any is stored: live at once in program order only."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tiles = [nl.load(a[i]) for i in range(a.shape[0])]
    for i in range(a.shape[0]):
        nl.store(out[i], tiles[a.shape[0] - 1 - i])
    return out


def _spec(n: int, cols: int = TILE) -> TensorSpec:
    return TensorSpec((n, 128, cols), "float32")


def test_tiles_live_at_once_beyond_what_spilling_covers_fail_at_the_users_line() -> None:
    n = 5
    assert (n + 1) * TILE * 4 > SPILL_FACTOR * GEN3.sbuf_bytes_per_partition  # the tiles and the total
    first = minus_total.func.__code__.co_firstlineno
    load, add = first + 4, first + 8  # the last tile added to the total: every range is open there
    with pytest.raises(NkiError) as e:
        minus_total.trace(_spec(n))
    text = str(e.value)
    assert re.search(rf"test_peak_live.py:{add}: error: kernel does not fit in SBUF: at least {(n + 1) * TILE * 4} "
                     rf"bytes per partition are live at once here \(in program order\), SBUF has "
                     rf"{GEN3.sbuf_bytes_per_partition}", text), text
    assert f"{TILE * 4} bytes (test_peak_live.py:{load})" in text  # the largest, with the line allocating it
    assert "--roll-loops" in text and "smaller tiles" in text


def test_a_working_set_within_spillings_reach_traces() -> None:
    n = 3
    assert GEN3.sbuf_bytes_per_partition < (n + 1) * TILE * 4 <= SPILL_FACTOR * GEN3.sbuf_bytes_per_partition
    minus_total.trace(_spec(n))


def test_tiles_loaded_up_front_are_not_counted_live_from_their_load() -> None:
    """Five 64 KiB tiles loaded before any is stored: in program order 320 KiB, but pre-schedule pairs each load with
    its store, so the kernel compiles and matches; the estimate leaves the transfers out and lets it through."""
    a = np.random.default_rng(5).standard_normal((5, 128, TILE)).astype(np.float32)
    assert 5 * TILE * 4 > SPILL_FACTOR * GEN3.sbuf_bytes_per_partition
    np.testing.assert_array_equal(nki.simulate(up_front)(a), a[::-1])


def test_the_overshoot_is_found_before_the_trace_ends() -> None:
    """The estimate is checked as the trace grows, so a long kernel stops soon after the overshoot, not at its end."""
    TRACED[0] = 0
    with pytest.raises(NkiError, match="does not fit in SBUF"):
        minus_total.trace(_spec(5), tail=20000)
    assert 0 < TRACED[0] < 20000


@nki.jit
def every_product_first(w, x):
    """Every matmul result (2 KiB of PSUM each) before any is stored: in program order all live at once."""
    n = x.shape[0]
    out = nl.ndarray((n, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    wt = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=w)
    products = []
    for b in range(n):
        xt = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[b])
        p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=wt, moving=xt)
        products.append(p)
    for b, p in enumerate(products):
        s = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        nisa.dma_copy(dst=out[b], src=s)
    return out


def test_psum_live_in_program_order_beyond_psum_is_not_refused() -> None:
    """Why PSUM has no program-order estimate: 12 products are 24 KiB of PSUM live in program order (1.5x), and the
    kernel compiles, pre-schedule pairing each matmul with its copy out."""
    n = 12
    assert n * 512 * 4 > 1.25 * GEN3.psum_bytes_per_partition
    rng = np.random.default_rng(2)
    w = rng.integers(-2, 3, (128, 128)).astype(np.float32)
    x = rng.integers(-2, 3, (n, 128, 512)).astype(np.float32)
    np.testing.assert_array_equal(every_product_first(w, x), np.einsum("km,bkn->bmn", w, x))
