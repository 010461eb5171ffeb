"""The trace-time estimate of the live working set (``frontend/peak_live.py``): a kernel whose tiles live at once
exceed what allocation can place, even with spilling, fails while tracing, at the user's line, naming its largest
live tensors; one within spilling's reach traces."""

from __future__ import annotations

import re

import pytest

from nkic import api as nki
from nkic.frontend import TensorSpec
from nkic.frontend.errors import NkiError
from nkic.frontend.peak_live import SPILL_FACTOR
from nkic.target.machine import get_target

nl, nisa = nki.language, nki.isa
GEN3 = get_target("gen3")
TILE = 16384  # fp32 columns: 64 KiB per partition
TRACED = [0]  # iterations of up_front's tail traced before the error


@nki.jit
def up_front(a, tail=0):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tiles = []
    for i in range(a.shape[0]):
        tiles.append(nl.load(a[i]))  # every tile loaded before any is stored: all live at once
    for i in range(a.shape[0]):
        nl.store(out[i], tiles[a.shape[0] - 1 - i])
    small = nl.load(a[0, :, 0:64])
    for _ in range(tail):
        TRACED[0] += 1
        nl.store(out[0, :, 0:64], small)
    return out


@nki.jit
def psum_tiles(w, x):
    n = x.shape[0]
    out = nl.ndarray((n, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    wt = nl.load(w)
    acc = []
    for b in range(n):  # every PSUM tile written before any is read
        acc.append(nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum))
        nisa.nc_matmul(dst=acc[b], stationary=wt, moving=nl.load(x[b]))
    for b in range(n):
        nl.store(out[b], acc[b])
    return out


def _spec(n: int, cols: int = TILE) -> TensorSpec:
    return TensorSpec((n, 128, cols), "float32")


def test_tiles_live_at_once_beyond_what_spilling_covers_fail_at_the_users_line() -> None:
    n = 5
    assert n * TILE * 4 > SPILL_FACTOR * GEN3.sbuf_bytes_per_partition
    line = up_front.func.__code__.co_firstlineno + 5  # the load: the fifth tile makes them too many
    with pytest.raises(NkiError) as e:
        up_front.trace(_spec(n))
    text = str(e.value)
    assert re.search(rf"test_peak_live.py:{line}: error: kernel does not fit in SBUF: at least {n * TILE * 4} bytes "
                     rf"per partition are live at once here, SBUF has {GEN3.sbuf_bytes_per_partition}", text), text
    assert f"'tiles' {TILE * 4} bytes (test_peak_live.py:{line})" not in text  # a list element has no name of its own
    assert f"{TILE * 4} bytes (test_peak_live.py:{line})" in text  # the largest, with the line allocating it
    assert "--roll-loops" in text and "smaller tiles" in text


def test_a_working_set_within_spillings_reach_traces() -> None:
    n = 4
    assert GEN3.sbuf_bytes_per_partition < n * TILE * 4 <= SPILL_FACTOR * GEN3.sbuf_bytes_per_partition
    up_front.trace(_spec(n))


def test_the_overshoot_is_found_before_the_trace_ends() -> None:
    """The estimate is checked as the trace grows, so a long kernel stops soon after the overshoot, not at its end."""
    TRACED[0] = 0
    with pytest.raises(NkiError, match="does not fit in SBUF"):
        up_front.trace(_spec(5), tail=20000)
    assert 0 < TRACED[0] < 20000


def test_psum_tiles_live_at_once_beyond_psum_fail_while_tracing() -> None:
    """PSUM is never spilled: more accumulators live at once than PSUM holds is an error already at trace time."""
    n = GEN3.psum_bytes_per_partition // 2048 + 1
    with pytest.raises(NkiError, match=rf"kernel does not fit in PSUM: at least {n * 2048} bytes per partition"):
        psum_tiles.trace(TensorSpec((128, 128), "float32"), _spec(n, 512))
