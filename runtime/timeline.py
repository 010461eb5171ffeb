"""The simulator's timeline state: when an instruction may start and how long it and its results take.

The numbers come from ``nkic.target.costs`` (its "timeline model" section); this module keeps the state they act
on while a NEFF runs, separate from the numerics:

* :class:`EngineLane`: one engine's recent writes, so an instruction that reads what the same engine wrote waits
  for the producer's dependent latency (in-order engines do not wait on their own semaphore);
* :class:`PeThrottle`: TensorE's utilisation over a trailing window, and the rate it is capped to after a quiet
  one (gen3+);
* :class:`SharedPorts`: the SBUF/PSUM ports two engines of a core share (``costs.shared_ports``): an instruction
  that needs a port held by the other engine waits for it, and the wait is booked against the holder;
* :class:`DmaCore`: one core's 16 queues (run-time descriptors generated one after another per queue, data FIFO
  per queue) sharing the core's DMA bandwidth, max-min fair among the transfers moving data at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from nkic.target.costs import (
    DMA_LATENCY_NS,
    PE_THROTTLE_RAMP_NS,
    PE_THROTTLE_RATE,
    PE_THROTTLE_UTILISATION,
    PE_THROTTLE_WINDOW_NS,
    dma_core_bytes_per_ns,
    dma_descriptor_ns,
    dma_transfer,
)
from nkic.target.isa import Instr, Operand
from nkic.target.machine import NUM_DMA_QUEUES, NUM_PARTITIONS, Target

__all__ = ["EngineLane", "PeThrottle", "SharedPorts", "DmaCore", "Transfer"]

# (memory, first partition, end partition, first byte, end byte) of an on-chip operand
Extent = tuple[str, int, int, int, int]


def extent(op: Operand) -> Extent | None:
    """The partitions and bytes an SBUF/PSUM operand may touch (a dynamic one: all of its memory)."""
    if op.memory not in ("sbuf", "psum"):
        return None
    if op.dyn:
        return (op.memory, 0, NUM_PARTITIONS, 0, 1 << 62)
    lo = hi = 0
    for step, num in op.pattern[1:]:
        reach = step * (max(num, 1) - 1)
        lo, hi = lo + min(reach, 0), hi + max(reach, 0)
    p0 = op.start_partition
    return (op.memory, p0, p0 + op.pattern[0][1], op.address + lo * op.itemsize,
            op.address + (hi + 1) * op.itemsize)  # fmt: skip


def _overlap(a: Extent, b: Extent) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2] and a[3] < b[4] and b[3] < a[4]


@dataclass
class EngineLane:
    """An in-order engine's writes whose results are not yet readable: (readable at, extent)."""

    pending: list[tuple[float, Extent]] = field(default_factory=list)

    def ready_at(self, ins: Instr, now: float) -> float:
        """The earliest start of ``ins``: after every pending write of this engine that it reads."""
        self.pending = [(t, e) for t, e in self.pending if t > now]
        if not self.pending:
            return now
        reads = _read_extents(ins)
        start = now
        for t, e in self.pending:
            if any(_overlap(e, r) for r in reads):
                start = max(start, t)
        return start

    def wrote(self, ins: Instr, readable_at: float) -> None:
        for slot in ins.spec.writes:
            op = ins.operand(slot)
            ext = extent(op) if op is not None else None
            if ext is not None:
                self.pending.append((readable_at, ext))


def _read_extents(ins: Instr) -> list[Extent]:
    """What ``ins`` reads through its engine: its operands but the ones it writes. A destination an instruction
    accumulates into or partly keeps is not read by the engine, so it does not wait for an earlier write of it:
    PSUM accumulation is near-memory, "read-accumulate-write to every 4B element in memory", with TensorE having
    "only write access" to PSUM (A2, "Near-memory accumulation in PSUM"); a predicated copy or a stream shuffle's
    kept lanes are masked writes. The in-order engine lands its writes in issue order."""
    writes = set(ins.spec.writes)
    out = []
    for slot, op in zip(ins.spec.slots, ins.operands):
        if op is None or slot in writes:
            continue
        ext = extent(op)
        if ext is not None:
            out.append(ext)
    return out


@dataclass
class PeThrottle:
    """TensorE's busy intervals over the trailing window and the time its rate last started ramping up [THR]."""

    busy: deque[tuple[float, float]] = field(default_factory=deque)
    ramp_from: float = 0.0

    def rate(self, start: float) -> float:
        """The fraction of full rate an instruction starting at ``start`` runs at (book it with :meth:`ran`).

        While the trailing window's use is below the threshold the cap holds and the ramp restarts; once it is
        above, the rate ramps linearly to full. The PE counts as idle before the kernel, so it starts capped."""
        window = start - PE_THROTTLE_WINDOW_NS
        while self.busy and self.busy[0][1] <= window:
            self.busy.popleft()
        used = sum(min(e, start) - max(s, window) for s, e in self.busy)
        if used < PE_THROTTLE_UTILISATION * PE_THROTTLE_WINDOW_NS:
            self.ramp_from = start
        ramp = min(1.0, (start - self.ramp_from) / PE_THROTTLE_RAMP_NS)
        return PE_THROTTLE_RATE + (1.0 - PE_THROTTLE_RATE) * ramp

    def ran(self, start: float, end: float) -> None:
        self.busy.append((start, end))


@dataclass
class SharedPorts:
    """One core's shared ports: port -> (free at, engine holding it). Engines claim a port in the order they issue
    (the hardware's arbitration is not published; first come, first served)."""

    held: dict[str, tuple[float, str]] = field(default_factory=dict)

    def claim(self, ports: tuple[str, ...], engine: str, start: float,
              dur: float) -> tuple[float, tuple[str, str] | None]:  # fmt: skip
        """The start of an instruction of ``engine`` that holds ``ports`` for ``dur`` and could start at ``start``,
        and (engine, port) of the hold that delayed it last (None: no wait). Books the ports until its end."""
        blocker: tuple[str, str] | None = None
        for port in ports:
            free, by = self.held.get(port, (0.0, engine))
            if free > start and by != engine:
                start, blocker = free, (by, port)
        for port in ports:
            self.held[port] = (start + dur, engine)
        return start, blocker


@dataclass
class Transfer:
    ins: Instr
    work: float  # bytes at full efficiency still to move
    max_rate: float  # bytes / ns its engines can move
    data_ready: float  # when its first byte may move (trigger + latency)
    start: float = -1.0
    rate: float = 0.0


class DmaCore:
    """One core's DMA queues. ``clock()`` is the current time, ``at(time, action)`` schedules an event and
    ``done(transfer, start, end)`` is called when a transfer's last byte lands."""

    def __init__(self, target: Target, clock: Callable[[], float], at: Callable[[float, Callable[[], None]], None],
                 done: Callable[[Transfer, float, float], None]) -> None:  # fmt: skip
        self.target = target
        self.capacity = dma_core_bytes_per_ns(target)
        self.clock, self.at, self.done = clock, at, done
        self.descriptors_free = [0.0] * NUM_DMA_QUEUES
        self.waiting: list[deque[Transfer]] = [deque() for _ in range(NUM_DMA_QUEUES)]
        self.moving: dict[int, Transfer] = {}  # queue -> its transfer moving data
        self.updated = 0.0
        self.version = 0

    def submit(self, ins: Instr, queue: int, triggered: float) -> None:
        """A transfer triggered at ``triggered``: its descriptors wait for the queue's earlier ones."""
        begin = max(triggered, self.descriptors_free[queue])
        self.descriptors_free[queue] = begin + dma_descriptor_ns(ins)
        work, max_rate = dma_transfer(ins, self.target)
        self.waiting[queue].append(Transfer(ins, work, max_rate, begin + DMA_LATENCY_NS))
        if queue not in self.moving and len(self.waiting[queue]) == 1:
            self.at(self.waiting[queue][0].data_ready, lambda: self._start(queue))

    def _start(self, queue: int) -> None:
        """Start the queue's next transfer now if its data may move, else when it may."""
        if queue in self.moving or not self.waiting[queue]:
            return
        head = self.waiting[queue][0]
        now = self.clock()
        if head.data_ready > now + 1e-9:
            self.at(head.data_ready, lambda: self._start(queue))
            return
        self._advance(now)
        self.waiting[queue].popleft()
        head.start = now
        self.moving[queue] = head
        self._reshare(now)

    def _advance(self, now: float) -> None:
        dt = now - self.updated
        if dt > 0:
            for t in self.moving.values():
                t.work -= t.rate * dt
        self.updated = now

    def _reshare(self, now: float) -> None:
        """Max-min fair rates under the core cap, and an event at the next completion (earlier ones go stale)."""
        movers = sorted(self.moving.values(), key=lambda t: t.max_rate)
        left = self.capacity
        for i, t in enumerate(movers):
            t.rate = min(t.max_rate, left / (len(movers) - i))
            left -= t.rate
        self.version += 1
        if movers:
            first = min(now + max(t.work, 0.0) / t.rate for t in movers)
            version = self.version
            self.at(first, lambda: self._complete(version))

    def _complete(self, version: int) -> None:
        if version != self.version:
            return
        now = self.clock()
        self._advance(now)
        finished = [q for q, t in self.moving.items() if t.work <= 1e-6 * max(1.0, t.rate)]
        for q in finished:
            t = self.moving.pop(q)
            self.done(t, t.start, now)
        for q in finished:
            self._start(q)
        self._reshare(now)
