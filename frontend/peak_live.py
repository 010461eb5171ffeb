"""The live working set while tracing: an estimate of the SBUF bytes per partition live at once.

Allocation (``passes/allocate_memory.py``) places every SBUF tensor for its live range, from its first to its
last instruction. Those ranges are only complete at the end of the trace, but a range seen so far (first use to the
latest use traced) is inside the final one, so the most bytes live at once over the ranges seen so far never exceeds
the final peak in program order. ``PeakLive`` keeps those ranges per SPMD program and, at checkpoints 1.25x apart
(amortised O(1) per instruction), computes that peak; a kernel whose estimate already exceeds a memory by more than
spilling can cover is stopped there, at the user's line, instead of minutes later in ``allocate-memory``.

What spilling covers (``passes/spill.py``): SBUF tensors may round-trip through HBM, so SBUF is refused only beyond
``SPILL_FACTOR`` times its size. That factor is a policy, not a documented device limit: spilling is for a working
set that exceeds SBUF at some points (the kernels it was built for, nki-library's ``moe_cte`` and the fused-mamba
``mamba_v2`` at seq 8192, overshoot by under 10%), while a program-order lower bound a quarter beyond SBUF means
whole phases of the kernel would run out of HBM, after minutes of compiling; such a kernel is refused early with the
remedies instead. PSUM is not checked here: it is never spilled, so any margin would be for the scheduler alone,
and the program order is no bound on what the scheduler reaches. Twelve 2 KiB matmul results computed before any is
stored are 24 KiB live in program order (1.5x PSUM) and compile, ``pre-schedule`` pairing each matmul with its store;
a hundred would too. What the trace does check of PSUM is certain whatever the order: one tile or block beyond PSUM
(the declaration's check), an operand beyond one bank (the bank rule, at the instruction). ``allocate-memory`` reports
a real overshoot at the line of the tensor that did not fit, with the largest live tensors and their lines.

Only compute counts: a DMA between HBM and a tile is left out of the tile's range. ``pre-schedule`` issues a load
when the tile's first compute needs it and a store once its last compute is done (a kernel that loads every tile up
front and stores them at the end needs one tile at a time), so counting transfers would refuse kernels that
compile. The range kept, first to last compute instruction, is what moving the transfers cannot shorten; the
scheduler may still reorder compute, which this does not model, hence the margin below and a message that says
"at least" of what the program order needs.

Tensors declared as legacy block tensors are left out (their blocks are split and placed one live block at a time,
which this estimate does not see), and a tensor of a rolled loop's body counts once, as one iteration's: both keep
the estimate a lower bound.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nkic.frontend.dtypes import itemsize
from nkic.frontend.errors import NkiError
from nkic.target.instructions import INSTRUCTIONS
from nkic.target.machine import get_target

SBUF_ALIGN = 64  # allocate-memory places SBUF tensors at 64-byte offsets: a tensor takes at least its size rounded up
FIRST_CHECK = 4096  # instructions before the first checkpoint (a small kernel is checked once, at its end)
CHECK_GROWTH = 1.25  # each checkpoint this much later than the previous: O(1) amortised, an overshoot found early
# SBUF live at once, in multiples of SBUF, beyond which a kernel is refused rather than spilled (module docstring)
SPILL_FACTOR = 1.25
_SHOWN = 3  # the largest live tensors the message names
_IS_DMA: dict[str, bool] = {}  # instruction name -> a DMA (asked for every traced instruction)


@dataclass
class _Ranges:
    """The live ranges seen so far of one memory's tensors (index = tensor)."""

    first: list[int] = field(default_factory=list)
    last: list[int] = field(default_factory=list)
    size: list[int] = field(default_factory=list)
    storage: list[Any] = field(default_factory=list)


class PeakLive:
    """Per SPMD program: the live ranges of its SBUF tensors in trace order, checked at checkpoints 1.25x apart."""

    def __init__(self, target: str) -> None:
        t = get_target(target)
        self.capacity = {"sbuf": t.sbuf_bytes_per_partition}
        self.blocked: set[str] = set()  # block tensors (split per live block later): not counted
        self.reset()

    def reset(self) -> None:
        """A new SPMD program: its own function, its own memory."""
        self.pos = 0
        self.next_check = FIRST_CHECK
        self.index: dict[str, tuple[str, int]] = {}
        self.ranges = {"sbuf": _Ranges()}  # PSUM is allocate-memory's to check (module docstring)
        self.locs: list[Any] = []

    def note(self, op: str, storages: list[Any], loc: Any) -> None:
        """The instruction ``op`` at ``loc`` uses ``storages`` (Storage objects)."""
        pos = self.pos
        self.pos += 1
        self.locs.append(loc)
        dma = _IS_DMA.get(op)
        if dma is None:
            dma = _IS_DMA[op] = INSTRUCTIONS[op].is_dma
        if dma and any(s.buffer.name not in ("sbuf", "psum") for s in storages):
            storages = []  # a transfer to or from HBM: the scheduler moves it next to the tile's compute (docstring)
        for s in storages:
            mem = s.buffer.name
            if mem not in self.ranges or s.name in self.blocked:
                continue
            at = self.index.get(s.name)
            if at is None:
                r = self.ranges[mem]
                self.index[s.name] = (mem, len(r.first))
                r.first.append(pos)
                r.last.append(pos)
                r.size.append(_bytes(s, mem))
                r.storage.append(s)
            else:
                self.ranges[at[0]].last[at[1]] = pos
        if self.pos >= self.next_check:
            self.next_check = int(self.next_check * CHECK_GROWTH)
            self.check()

    def check(self) -> None:
        """Raise when the live set seen so far already exceeds what allocation (with spilling) can place."""
        for mem, r in self.ranges.items():
            if not r.first:
                continue
            peak, at = _peak(r, self.pos)
            limit = self.capacity[mem] * SPILL_FACTOR
            if peak > limit:
                raise self._error(mem, r, peak, at)

    def _error(self, mem: str, r: _Ranges, peak: int, at: int) -> NkiError:
        first, last = np.asarray(r.first), np.asarray(r.last)
        live = np.flatnonzero((first <= at) & (last >= at))
        largest = sorted(live, key=lambda i: -r.size[i])[:_SHOWN]
        names = ", ".join(f"'{_label(r.storage[i])}' {r.size[i]} bytes ({_line(r.storage[i].loc)})" for i in largest)
        spill = f" (spilling covers up to {int(self.capacity[mem] * SPILL_FACTOR)})"
        loc = self.locs[at]
        return NkiError(
            f"kernel does not fit in {mem.upper()}: at least {peak} bytes per partition are live at once here (in "
            f"program order), "
            f"{mem.upper()} has {self.capacity[mem]}{spill}; the largest: {names}",
            "keep fewer tiles live at once: roll the loops (nl.affine_range with --roll-loops), use smaller tiles, "
            "or reuse buffers across iterations",
            where=(loc.file, loc.line),
        )


def _bytes(s: Any, mem: str) -> int:
    row = int(np.prod(s.shape[1:], dtype=np.int64)) * itemsize(s.dtype)
    return -(-row // SBUF_ALIGN) * SBUF_ALIGN if mem == "sbuf" else row


def _peak(r: _Ranges, n: int) -> tuple[int, int]:
    """(the most bytes live at once over the ranges, the first position where it is reached)."""
    delta = np.zeros(n + 1, dtype=np.int64)
    size = np.asarray(r.size, dtype=np.int64)
    np.add.at(delta, np.asarray(r.first), size)
    np.add.at(delta, np.asarray(r.last) + 1, -size)
    live = np.cumsum(delta[:n])
    at = int(np.argmax(live))
    return int(live[at]), at


def _label(s: Any) -> str:
    return s.label or s.name


def _line(loc: tuple[str, int, int]) -> str:
    return f"{os.path.basename(loc[0])}:{loc[1]}"
