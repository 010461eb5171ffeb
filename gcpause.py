"""Pausing Python's cyclic garbage collector around the tracer and the compiler (see ``gc_paused``)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# A full collection runs at the start of a pause when the objects the collector does not scan (the frozen ones, below)
# have grown past (1 + FULL_RATIO) times the tracked objects left after the previous full collection, and past
# FULL_MIN objects: CPython's own kind of rule for its oldest generation, so the cost stays amortised O(1) per object
# and dropped results cannot pile up without bound. At the start, not the end: a process that compiles once (the CLI,
# a benchmark) never pays for a collection whose garbage dies with it anyway. FULL_MIN is about 1.7 times what a
# 16K-attention trace and compile leave (2.4M objects, 435 MB peak RSS either way).
FULL_MIN = 4_000_000
FULL_RATIO = 1.0
_live = 0  # tracked objects after the last full collection


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic collector off for the duration; at the end everything is frozen, now and then collected.

    A compile builds and drops IR objects by the hundred thousand; each collection re-scans the objects it covers,
    which made compile time super-linear in the program size (at 8K attention: ~1M tracked objects and 11 full
    collections of 0.5-0.8 s). Reference counting still frees everything acyclic at once. At the end, ``gc.freeze``
    moves every tracked object to the permanent generation (O(1)), so the collections that run automatically once the
    collector is back on scan only what the caller allocates afterwards, not the pause's survivors (a young
    collection of those cost ~0.7 s per pause at 16K attention, and 16K's trace and compile are two pauses). The
    cycles a pause dropped (and what the caller drops later of its results) wait in the permanent generation until
    the FULL_MIN / FULL_RATIO rule above unfreezes and collects everything, so memory stays bounded across any number
    of compiles; ``gc.collect()`` alone does not reach them. Nested uses are free (only the outermost one acts); a
    collector the caller disabled stays disabled, and then nothing is frozen either (a program that uses
    ``gc.freeze`` itself keeps control by disabling the collector around nkic)."""
    global _live
    if not gc.isenabled():
        yield
        return
    if gc.get_freeze_count() > max(FULL_MIN, (1 + FULL_RATIO) * _live):
        gc.unfreeze()
        gc.collect()
        _live = len(gc.get_objects())
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
