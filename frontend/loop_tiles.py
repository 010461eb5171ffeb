"""Tiles read after the loop that allocated them: a warning, since such a read silently takes the last iteration.

``for i in nl.affine_range(4): t = nl.load(a[i])`` followed by ``nl.store(out, t)`` after the loop is legal: the
tracer unrolls the loop (the tile must exist after it) and the read gets the tile of the last iteration. Someone
who wrote it usually meant something else (a reduction over the iterations, or the store inside the loop), and
nothing in the result says so. So :class:`LoopTiles` watches the unrolled ``affine_range``/``sequential_range`` loops
of one SPMD program: which iteration allocated each on-chip tile, and which tiles are read once their loop has
ended. At the end of the program it warns, once per allocation line, when only the last iteration's tile of that
line was read after the loop. It does not warn for

* tiles of every iteration read after the loop (a list filled in the loop, the matmul tutorial's ``hoist_load``);
* loop-carried state: a tile of one iteration read by a later iteration (``acc = nl.add(acc, x)``), whose last
  value is the loop's result;
* a tile written after the loop before it is read (a scratch tile reused);
* loops of one iteration, and ``static_range``/``range`` loops, which are plain Python unrolling by the user's choice.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from nkic.frontend.errors import NkiWarning
from nkic.frontend.tensor import Storage

# (file, line, column) of an allocation
Site = tuple[str, int, int]


@dataclass(eq=False)
class LoopRun:
    """One execution of an unrolled loop statement (a loop nested in another runs once per outer iteration)."""

    kind: str  # the loop function: affine_range / sequential_range
    file: str
    line: int
    trips: int
    index: int = 0  # the iteration being traced
    closed: bool = False
    # allocation site -> its tiles' iterations read after the loop (before any write after it) and the first such read
    read_after: dict[Site, tuple[set[int], tuple[str, int]]] = field(default_factory=dict)
    carried: set[Site] = field(default_factory=set)  # sites whose tiles a later iteration read
    label: dict[Site, str] = field(default_factory=dict)  # the user's name of a site's tiles


class LoopTiles:
    """The unrolled loops and their tiles, for one program of one trace attempt."""

    def __init__(self) -> None:
        self._open: list[LoopRun] = []
        self._runs: list[LoopRun] = []
        self._tiles: dict[Storage, tuple[LoopRun, int]] = {}  # an on-chip tile -> (its innermost loop run, iteration)
        self._rewritten: set[Storage] = set()  # written after their loop ended: later reads are of the new value

    def unrolled(self, values: range, kind: str, file: str, line: int) -> Iterator[int]:
        """Iterate an unrolled loop, remembering the iteration being traced."""
        run = LoopRun(kind, file, line, len(values))
        self._open.append(run)
        self._runs.append(run)
        try:
            for run.index, value in enumerate(values):
                yield value
        finally:
            # Closed when the user's `for` ends (the generator is exhausted) or leaves it (break: the generator is
            # closed when it is dropped).
            run.closed = True
            self._open = [r for r in self._open if r is not run]

    def allocated(self, storage: Storage) -> None:
        if self._open and storage.buffer.on_chip:
            run = self._open[-1]
            self._tiles[storage] = (run, run.index)
            run.label.setdefault(storage.loc, storage.label or storage.name)

    def accessed(self, storage: Storage, write: bool, where: tuple[str, int]) -> None:
        """An instruction at ``where`` reads (or writes) ``storage``."""
        entry = self._tiles.get(storage)
        if entry is None:
            return
        run, index = entry
        if not run.closed:
            if not write and run.index > index:
                run.carried.add(storage.loc)
            return
        if write:
            self._rewritten.add(storage)
        elif storage not in self._rewritten:
            run.read_after.setdefault(storage.loc, (set(), where))[0].add(index)

    def warn(self) -> None:
        """The warnings of the program traced (call once, at its end)."""
        for run in self._runs:
            if run.trips < 2:
                continue
            for site, (iterations, (file, line)) in run.read_after.items():
                if site in run.carried or iterations != {run.trips - 1}:
                    continue
                text = (f"tile '{run.label.get(site, '')}' (allocated at {os.path.basename(site[0])}:{site[1]}, in "
                        f"the nl.{run.kind} loop at {os.path.basename(run.file)}:{run.line}) is read after the loop: "
                        f"it holds the last iteration's value only (iteration {run.trips - 1} of {run.trips}). "
                        "store or reduce it inside the loop, or keep one tile per iteration in a list")  # fmt: skip
                warnings.warn_explicit(text, NkiWarning, file, line, registry=_WARNED)


# Once per (message, line) for the process, as Python's "default" action: a kernel is re-traced to unroll its loops,
# and every SPMD program traces the same body.
_WARNED: dict[Any, Any] = {}
