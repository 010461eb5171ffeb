"""Pausing Python's cyclic garbage collector around the tracer and the compiler (see ``gc_paused``)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# After a pause, a full collection runs when the oldest generation has grown past (1 + FULL_RATIO) times its size after
# the previous full collection (and past FULL_MIN objects): CPython's own kind of rule for its oldest generation, so
# the cost stays amortised O(1) per object and dropped results cannot pile up without bound.
FULL_MIN = 100_000
FULL_RATIO = 1.0
_live = -1  # objects in the oldest generation after the last full collection (-1: not measured yet)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic collector off for the duration; a young collection at the end, a full one now and then.

    A compile builds and drops IR objects by the hundred thousand; each full collection re-scans every live object,
    which made compile time super-linear in the program size (at 8K attention: ~1M tracked objects and 11 full
    collections of 0.5-0.8 s). Reference counting still frees everything acyclic at once. The objects created while
    the collector is off all stay in generation 0, so the young collection at the end scans just them and the
    previous pause's survivors (linear in the allocations) and frees the cycles the pause dropped. What the caller
    drops later (a compile's result module) has moved to the oldest generation, which automatic collections seldom
    reach when most allocation happens with the collector off: the FULL_MIN / FULL_RATIO rule above collects it, so
    memory stays bounded across any number of compiles. Nested uses are free (only the outermost one acts); a
    collector the caller disabled stays disabled."""
    global _live
    if not gc.isenabled():
        yield
        return
    if _live < 0:
        _live = len(gc.get_objects(2))
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(1)  # the pause's own objects (generation 0) and the survivors of earlier pauses (generation 1)
        old = len(gc.get_objects(2))
        if old > max(FULL_MIN, (1 + FULL_RATIO) * _live):
            gc.collect()
            _live = len(gc.get_objects(2))
