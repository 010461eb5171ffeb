"""Pausing Python's cyclic garbage collector around the tracer and the compiler (see ``gc_paused``)."""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import threading
from collections.abc import Iterator

# A full collection runs at the start of a pause when what the collector does not scan (the frozen objects, below) may
# hold too much garbage: the frozen objects have grown past (1 + FULL_RATIO) times the tracked objects left after the
# previous full collection and past FULL_MIN objects, or the process's memory has grown past (1 + FULL_RATIO) times
# what it was after that collection and by more than FULL_MIN_BYTES (objects alone are not enough: a frozen cycle may
# hold a large array). CPython's own kind of rule for its oldest generation, so the cost stays amortised O(1) per
# object or byte and dropped results cannot pile up without bound. At the start, not the end: a process that compiles
# once (the CLI, a benchmark) never pays for a collection whose garbage dies with it anyway. FULL_MIN is about 1.7
# times what a 16K-attention trace and compile leave (2.4M objects, ~0.5 GB peak RSS either way).
FULL_MIN = 4_000_000
FULL_MIN_BYTES = 1 << 30
FULL_RATIO = 1.0
_live = 0  # tracked objects after the last full collection
_live_bytes = -1  # the process's resident bytes after the last full collection (-1: not measured yet)

# The collector is process-wide, but pauses are made by every thread that traces or compiles. They are counted under
# a lock: the first to enter (with the collector on) acts and turns it off, later ones (nested in the same thread or
# overlapping from others) only join, and the last to leave freezes and turns it back on. A thread leaving while
# another is still compiling must not re-enable it under that one (nor read the other's pause as "the caller disabled
# the collector" and freeze nothing). Re-entrant, in case a finalizer run by the collection at the start compiles.
_lock = threading.RLock()
_depth = 0  # pauses in progress, every thread's; > 0 exactly while a pause holds the collector off


def resident_bytes() -> int:
    """The process's resident memory now (Linux); elsewhere its peak, which only grows, so the rule still holds."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _full_collection_due() -> bool:
    global _live_bytes
    if _live_bytes < 0:
        _live_bytes = resident_bytes()
    if gc.get_freeze_count() > max(FULL_MIN, (1 + FULL_RATIO) * _live):
        return True
    rss = resident_bytes()
    return rss > max(_live_bytes + FULL_MIN_BYTES, (1 + FULL_RATIO) * _live_bytes)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic collector off for the duration; at the end everything is frozen, now and then collected.

    A compile builds and drops IR objects by the hundred thousand; each collection re-scans the objects it covers,
    which made compile time super-linear in the program size (at 8K attention: ~1M tracked objects and 11 full
    collections of 0.5-0.8 s). Reference counting still frees everything acyclic at once. At the end, ``gc.freeze``
    moves every tracked object to the permanent generation (O(1)), so the collections that run automatically once the
    collector is back on scan only what the caller allocates afterwards, not the pause's survivors (a young
    collection of those cost ~0.7 s per pause at 16K attention, and 16K's trace and compile are two pauses). The
    cycles a pause dropped (and what the caller drops later) wait in the permanent generation until the rule above
    unfreezes and collects everything, so memory stays bounded across any number of compiles; ``gc.collect()`` alone
    does not reach them. Before freezing, the caller's young objects made since the previous pause are collected
    (cheap: only they are scanned), so garbage the caller made (a simulation's cycles) is not frozen with them.
    Nested uses are free (only the outermost one acts); a collector the caller disabled stays disabled, and then
    nothing is frozen either (a program that uses ``gc.freeze`` itself keeps control by disabling the collector
    around nkic). Thread-safe: pauses of several threads that overlap are one pause, from the first one's start to
    the last one's end (see ``_lock``)."""
    global _live, _live_bytes, _depth
    with _lock:
        if _depth == 0 and not gc.isenabled():
            acting = False  # the caller disabled it: leave it alone
        else:
            acting = True
            if _depth == 0:
                if _full_collection_due():
                    gc.unfreeze()
                    gc.collect()
                    _live, _live_bytes = len(gc.get_objects()), resident_bytes()
                else:
                    gc.collect(1)
                gc.disable()
            _depth += 1
    if not acting:
        yield
        return
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.freeze()
                gc.enable()
