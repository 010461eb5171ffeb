"""``allocate-memory``: give every SBUF/PSUM memloc a (partition, byte offset) address.

Explicit ``address=`` placements from the kernel are honoured as they are. Every other tensor is placed by a
linear scan over the live ranges (first to last instruction using it, in program order, which ``pre-schedule``
has made the scheduled order): a colouring of the interval graph, so two tensors live at the same time never share
a byte and tensors whose ranges do not overlap may. Among the legal places (64-byte aligned in SBUF; in PSUM a
tensor never straddles a 2 KiB bank, larger ones start on a bank), the policy chooses:

* ``rotate`` (the default): the first fit after the previous allocation (wrapping around): consecutive tensors
  take consecutive memory, so a loop's next iteration does not reuse what the previous one just freed;
* ``lru``: the place whose bytes were last used longest ago, by the position in the schedule of the
  last use of their latest occupant (never-used bytes count as oldest; ties: lowest offset). Reusing bytes adds an
  anti/output edge from their previous tensor's last use to the new tensor's first; the older that last use, the
  less the edge can delay anything, so reuse stops chaining independent work while memory remains;
* ``stack``: the lowest free offset (immediate reuse, smallest footprint).

``rotate`` is the default by measurement (bench/README.md "Schedule-aware allocation"; simulated time with
``post-schedule``): equal to ``lru`` on the bundled 2048^3 matmul, 1% faster on 4K attention and 6% faster on the
matmul tutorial's optimized kernel; ``lru`` is 8% faster on 8K attention, whose pre-scheduled order does not fit
PSUM, so that allocation follows program order. Spreading tensors over all of memory can fragment it: a function
``rotate`` cannot place is placed by ``lru``, and one ``lru`` cannot place by ``stack``, so every policy places
whatever ``stack`` places. A kernel that does not fit fails with the tensor, its size and what is live.

A runtime loop (``loop_begin`` … ``loop_end``) runs its body again after its last instruction: a tensor used both
inside a loop and outside it is live over the whole loop, so no tensor of the body can take its bytes.

When a function does not fit: its block tensors are split per block (``split-blocks``) and it is placed again; if SBUF
is still short, tensors are spilled through HBM (``passes/spill.py``) with a live budget of all of SBUF, then smaller
shares while fragmentation leaves a tensor no place, and one ``AllocationWarning`` says what was spilled. A kernel
that fits is never split or spilled (``spill=False``, pre-schedule's trial, never spills).
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass

import numpy as np

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.passes.targeting import target_of
from nkic.dialects import bir
from nkic.dialects.common import dense_i64_attr
from nkic.passes.spill import spill_function, spill_stats, warn_spills
from nkic.passes.split_blocks import split_function
from nkic.target.instructions import LOOP_PAIRS

SBUF_ALIGN = 64
_LOOP_ENDS = frozenset(LOOP_PAIRS.values())
# Live SBUF budgets spilling aims for, in turn: all of SBUF, then less while fragmentation leaves a tensor no place
SPILL_SHARES = (1.0, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5)


def live_ranges(fn: bir.FunctionOp) -> dict[str, tuple[int, int]]:
    ranges: dict[str, tuple[int, int]] = {}
    loops: list[tuple[int, int]] = []
    open_loops: list[int] = []
    for i, inst in enumerate(fn.instructions()):
        if inst.OPNAME in LOOP_PAIRS:
            open_loops.append(i)
        elif inst.OPNAME in _LOOP_ENDS and open_loops:
            loops.append((open_loops.pop(), i))
        for name in inst.ref_names:
            lo, _ = ranges.get(name, (i, i))
            ranges[name] = (lo, i)
    for begin, end in loops:  # inner loops first, so an outer loop sees the ranges they widened
        for name, (lo, hi) in ranges.items():
            if lo <= end and hi >= begin and not (begin <= lo and hi <= end):
                ranges[name] = (min(lo, begin), max(hi, end))
    return ranges


def _fits_psum(off: int, size: int, bank: int) -> bool:
    return (off % bank) + size <= bank if size <= bank else off % bank == 0


def first_fit(
    busy: list[tuple[int, int]], size: int, capacity: int, memory: str, bank: int, cursor: int = 0
) -> int | None:
    """First legal offset at or after ``cursor`` (wrapping around) where [off, off+size) overlaps none of ``busy``.

    Starting after the previous allocation rather than at 0 rotates tiles through free memory, so a tile freed by
    one loop iteration is not immediately reused by the next: that reuse would serialise the iterations through
    anti-dependencies when there is room to overlap them. A PSUM tile stays inside one ``bank``-byte bank, or starts
    on one when it is larger.
    """
    align = SBUF_ALIGN if memory == "sbuf" else 4
    starts = {0, cursor, *(hi for _, hi in busy)}
    if memory == "psum":
        starts |= set(range(0, capacity, bank))
    # [off, off + size) overlaps a busy range iff one that starts before off + size ends after off: with the ranges
    # sorted by start and the running maximum of their ends, one bisection per candidate instead of a scan of all
    ranges = sorted(busy)
    los = [lo for lo, _ in ranges]
    reach = list(itertools.accumulate((hi for _, hi in ranges), max))
    for start in sorted(starts, key=lambda s: (s < cursor, s)):
        off = -(-start // align) * align
        if memory == "psum" and not _fits_psum(off, size, bank):
            continue
        if off + size <= capacity:
            k = bisect.bisect_left(los, off + size)
            if k == 0 or reach[k - 1] <= off:
                return off
    return None


_NEVER_FREE = np.iinfo(np.int64).max


def _window_max(a: np.ndarray, w: int) -> np.ndarray:
    """``out[i] = max(a[i:i+w])`` for every full window, by doubling: O(len(a) log w)."""
    out, span = a, 1
    while span * 2 <= w:
        out = np.maximum(out[:-span], out[span:])
        span *= 2
    rest = w - span
    return np.maximum(out[: len(out) - rest], out[rest:]) if rest else out


class _LastUse:
    """Per granule of one memory: the schedule position of the last use of its latest occupant (-1: never used;
    ``_NEVER_FREE`` under an explicit placement). Bytes are free for a tensor whose first use comes later."""

    def __init__(self, capacity: int, granule: int, fixed: list[tuple[int, int]]) -> None:
        self.capacity, self.granule = capacity, granule
        self.until = np.full(-(-capacity // granule), -1, dtype=np.int64)
        for lo, hi in fixed:
            self.until[lo // granule : -(-hi // granule)] = _NEVER_FREE
        # the offsets and their place in a bank, computed once (a kernel places thousands of tensors)
        self.offs = np.arange(len(self.until), dtype=np.int64) * granule
        self.in_bank: dict[int, np.ndarray] = {}

    def place(self, first: int, last: int, size: int, bank: int | None) -> int | None:
        """The free legal offset whose bytes were used longest ago (ties: the lowest); marks it used until
        ``last``. ``bank``: PSUM's bank size (a tile stays in a bank, or starts on one when larger)."""
        g = self.granule
        w = max(1, -(-size // g))
        if w > len(self.until):
            return None
        recent = _window_max(self.until, w)
        offs = self.offs[: len(recent)]
        ok = recent < first
        ok[offs + size > self.capacity] = False
        if bank is not None:
            in_bank = self.in_bank.get(bank)
            if in_bank is None:
                in_bank = self.in_bank[bank] = self.offs % bank
            in_bank = in_bank[: len(recent)]
            ok &= (in_bank + size <= bank) if size <= bank else (in_bank == 0)
        if not ok.any():
            return None
        i = int(np.argmin(np.where(ok, recent, _NEVER_FREE)))
        self.until[i : i + w] = last
        return i * g


POLICIES = ("lru", "rotate", "stack")


@dataclass(frozen=True)
class AllocateMemoryPass(ModulePass):
    name = "allocate-memory"
    # "lru": the legal place used longest ago; "rotate": first fit after the previous allocation; "stack": lowest
    # free offset (immediate reuse). The module docstring says why and bench/README.md what each measures.
    policy: str = "rotate"
    # spill SBUF tensors through HBM when the kernel does not fit otherwise (passes/spill.py); pre-schedule's trial
    # allocation turns it off (its order is only a candidate)
    spill: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.policy not in POLICIES:
            raise PassFailedException(
                f"unknown allocation policy '{self.policy}' (expected {', '.join(POLICIES)})"
            )
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            self.run_function(fn)

    def run_function(self, fn: bir.FunctionOp) -> None:
        try:
            return self._place(fn)
        except PassFailedException as e:
            failure = e
        # Whole block tensors did not fit together: give every block its own live range and try again, as the
        # device compiler allocates the blocks that are live (split-blocks keeps the whole ones that fit, for
        # DMA coalescing, until it has to).
        if split_function(fn):
            try:
                return self._place(fn)
            except PassFailedException as e:
                failure = e
        if not self.spill or "in SBUF" not in str(failure):
            raise failure
        self._place_spilling(fn, failure)

    def _place_spilling(self, fn: bir.FunctionOp, failure: PassFailedException) -> None:
        """Spill until the live SBUF bytes fit all of SBUF, then, while fragmentation still leaves a tensor no
        place, a smaller share of it (passes/spill.py); warn once with what was spilled."""
        capacity = target_of(fn).sbuf_bytes_per_partition
        for share in SPILL_SHARES:
            if not spill_function(fn, int(capacity * share)):
                continue  # nothing more to spill at this budget: the function is as it was when it last failed
            try:
                self._place(fn)
            except PassFailedException as e:
                failure = e
                continue
            return warn_spills(fn, spill_stats(fn))
        raise PassFailedException(f"{failure} (even with spilling: keep fewer tiles live at once, e.g. rolled loops "
                                  "with --roll-loops, or smaller tiles)")

    def _place(self, fn: bir.FunctionOp) -> None:
        ranges = live_ranges(fn)
        target = target_of(fn)
        capacity = {"sbuf": target.sbuf_bytes_per_partition, "psum": target.psum_bytes_per_partition}
        fixed: dict[str, list[tuple[int, int]]] = {"sbuf": [], "psum": []}
        todo: list[bir.MemLocOp] = []
        for loc in fn.memlocs().values():
            if loc.mem not in capacity or loc.sym_name.data not in ranges:
                continue
            if loc.addr is not None:
                _, base = loc.addr
                fixed[loc.mem].append((base, base + loc.bytes_per_partition))
            else:
                todo.append(loc)
        todo.sort(key=lambda m: ranges[m.sym_name.data][0])
        placed = _place_with_fallback(self.policy, todo, ranges, fixed, capacity, target.psum_bank_bytes)
        for loc, off in zip(todo, placed):
            loc.properties["address"] = dense_i64_attr((0, off))


def _place_with_fallback(
    policy: str, todo: list[bir.MemLocOp], ranges: dict[str, tuple[int, int]],
    fixed: dict[str, list[tuple[int, int]]], capacity: dict[str, int], bank: int,
) -> list[int]:
    """Offsets by ``policy``; a spreading policy that fragments memory so that a tensor does not fit falls back
    to the next one (rotate -> lru -> stack), so every policy places whatever ``stack`` places."""
    if policy == "rotate":
        try:
            return _place_first_fit(todo, ranges, fixed, capacity, bank, rotate=True)
        except PassFailedException:
            policy = "lru"
    if policy == "lru":
        placed = _place_lru(todo, ranges, fixed, capacity, bank)
        if placed is not None:
            return placed
    return _place_first_fit(todo, ranges, fixed, capacity, bank, rotate=False)


def _place_lru(
    todo: list[bir.MemLocOp], ranges: dict[str, tuple[int, int]], fixed: dict[str, list[tuple[int, int]]],
    capacity: dict[str, int], bank: int,
) -> list[int] | None:
    """Offsets of ``todo`` (sorted by first use) by the ``lru`` policy; None when one does not fit."""
    maps = {"sbuf": _LastUse(capacity["sbuf"], SBUF_ALIGN, fixed["sbuf"]),
            "psum": _LastUse(capacity["psum"], 4, fixed["psum"])}  # fmt: skip
    out = []
    for loc in todo:
        first, last = ranges[loc.sym_name.data]
        off = maps[loc.mem].place(first, last, loc.bytes_per_partition, bank if loc.mem == "psum" else None)
        if off is None:
            return None
        out.append(off)
    return out


def _place_first_fit(
    todo: list[bir.MemLocOp], ranges: dict[str, tuple[int, int]], fixed: dict[str, list[tuple[int, int]]],
    capacity: dict[str, int], bank: int, rotate: bool,
) -> list[int]:
    """Offsets of ``todo`` (sorted by first use) by first fit, after the previous allocation if ``rotate``; fails
    with the tensor that does not fit and what is live."""
    live: dict[str, list[tuple[int, int, int, bir.MemLocOp]]] = {"sbuf": [], "psum": []}  # (last use, lo, hi, loc)
    cursor = {"sbuf": 0, "psum": 0}
    out = []
    for loc in todo:
        mem, name = loc.mem, loc.sym_name.data
        first, last = ranges[name]
        live[mem] = [x for x in live[mem] if x[0] >= first]
        busy = fixed[mem] + [(lo, hi) for _, lo, hi, _ in live[mem]]
        size = loc.bytes_per_partition
        off = first_fit(busy, size, capacity[mem], mem, bank, cursor[mem])
        if off is None:
            used = sum(hi - lo for lo, hi in busy)
            where = f"{loc.loc.data}: error: " if loc.loc is not None else ""
            raise PassFailedException(
                f"{where}kernel does not fit in {mem.upper()}: tensor '{name}' needs {size} bytes per partition "
                "while "
                f"{used} of {capacity[mem]} bytes per partition are live (at instruction {first})"
                f"{_largest(live[mem])}"
            )
        live[mem].append((last, off, off + size, loc))
        cursor[mem] = off + size if rotate else 0
        out.append(off)
    return out


def _largest(live: list[tuple[int, int, int, bir.MemLocOp]], shown: int = 3) -> str:
    """The largest live tensors with their allocation lines, for the message of a kernel that does not fit."""
    biggest = sorted(live, key=lambda x: x[1] - x[2])[:shown]
    if not biggest:
        return ""
    return "; the largest live: " + ", ".join(
        f"'{m.sym_name.data}' {hi - lo} bytes" + (f" ({m.loc.data})" if m.loc is not None else "")
        for _, lo, hi, m in biggest
    )
