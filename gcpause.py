"""Pausing Python's cyclic garbage collector around the tracer and the compiler (see ``gc_paused``)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# A full collection runs when the objects created under pauses since the last one exceed FULL_RATIO times the
# objects that survived it (and at least FULL_MIN): CPython's own rule for its oldest generation, so the cost stays
# amortised O(1) per object and the heap at most (1 + FULL_RATIO) times the live data plus one compile's garbage.
FULL_MIN = 100_000
FULL_RATIO = 1.0
_pending = 0  # tracked objects created under pauses since the last full collection
_live = 0  # tracked objects that survived it


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic collector off for the duration; a young collection at the end, a full one now and then.

    A compile builds and drops IR objects by the hundred thousand; each full collection re-scans every live object,
    which made compile time super-linear in the program size (at 8K attention: ~1M tracked objects and 11 full
    collections of 0.5-0.8 s). Reference counting still frees everything acyclic at once. The objects created while
    the collector is off all stay in generation 0, so the collection at the end scans just them (linear in the
    pause's own allocations) and frees the cycles it dropped. What the caller drops later (a compile's result
    module) lives in an older generation, which automatic collections rarely reach when most allocation happens
    with the collector off: the FULL_MIN / FULL_RATIO rule above collects it, so memory stays bounded across any
    number of compiles. Nested uses are free (only the outermost one acts); a collector the caller disabled stays
    disabled."""
    global _pending, _live
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        grown = gc.get_count()[0]  # net objects tracked since the last generation-0 collection
        gc.enable()
        gc.collect(0)
        _pending += grown
        if _pending > max(FULL_MIN, FULL_RATIO * _live):
            gc.collect()
            _pending, _live = 0, len(gc.get_objects())
