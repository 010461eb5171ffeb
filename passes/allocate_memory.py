"""``allocate-memory``: give every SBUF/PSUM memloc a (partition, byte offset) address.

Explicit ``address=`` placements from the kernel are honoured as they are. Every other tensor is placed by a
linear scan over its live range (first to last instruction using it, in program order): the first fit after the
previous allocation (wrapping around) among the bytes not used by overlapping live tensors, 64-byte aligned in
SBUF; in PSUM a tensor never straddles a 2 KiB
bank (larger ones start on a bank). A kernel that does not fit fails with the tensor, its size and what is live.

A runtime loop (``loop_begin`` … ``loop_end``) runs its body again after its last instruction: a tensor used both
inside a loop and outside it is live over the whole loop, so no tensor of the body can take its bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.common import dense_i64_attr
from nkic.target.instructions import LOOP_PAIRS
from nkic.target.machine import TARGETS, get_target

SBUF_ALIGN = 64
_LOOP_ENDS = frozenset(LOOP_PAIRS.values())


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
    for start in sorted(starts, key=lambda s: (s < cursor, s)):
        off = -(-start // align) * align
        if memory == "psum" and not _fits_psum(off, size, bank):
            continue
        if off + size <= capacity and all(off + size <= lo or off >= hi for lo, hi in busy):
            return off
    return None


@dataclass(frozen=True)
class AllocateMemoryPass(ModulePass):
    name = "allocate-memory"
    target: str = "gen3"
    # "rotate": first fit after the previous allocation; "stack": lowest free offset (immediate reuse)
    policy: str = "rotate"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.target not in TARGETS:
            raise PassFailedException(f"unknown target '{self.target}' (expected {', '.join(TARGETS)})")
        if self.policy not in ("rotate", "stack"):
            raise PassFailedException(f"unknown allocation policy '{self.policy}' (expected rotate or stack)")
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            self.run_function(fn)

    def run_function(self, fn: bir.FunctionOp) -> None:
        ranges = live_ranges(fn)
        target = get_target(self.target)
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
        live: dict[str, list[tuple[int, int, int]]] = {"sbuf": [], "psum": []}  # (last use, lo, hi)
        cursor = {"sbuf": 0, "psum": 0}
        for loc in todo:
            mem, name = loc.mem, loc.sym_name.data
            first, last = ranges[name]
            live[mem] = [x for x in live[mem] if x[0] >= first]
            busy = fixed[mem] + [(lo, hi) for _, lo, hi in live[mem]]
            size = loc.bytes_per_partition
            off = first_fit(busy, size, capacity[mem], mem, target.psum_bank_bytes, cursor[mem])
            if off is None:
                used = sum(hi - lo for lo, hi in busy)
                where = f"{loc.loc.data}: error: " if loc.loc is not None else ""
                raise PassFailedException(
                    f"{where}kernel does not fit in {mem.upper()}: tensor '{name}' needs {size} bytes per partition "
                    "while "
                    f"{used} of {capacity[mem]} bytes per partition are live (at instruction {first})"
                )
            live[mem].append((last, off, off + size))
            cursor[mem] = off + size if self.policy == "rotate" else 0
            loc.properties["address"] = dense_i64_attr((0, off))
