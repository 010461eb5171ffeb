"""Event-driven NeuronCore simulator: executes a NEFF's per-engine ISA streams on numpy state.

Each subgraph is one NeuronCore (own SBUF, PSUM, ScalarE reduce registers, semaphores, engines and DMA queues); all
cores share the HBM variables. Engines run their streams in order; an instruction starts when its engine is free and
its semaphore wait holds, applies its numerical effect at that start time, occupies the engine for its cost
(``nkic.target.costs``) and signals at completion. DMA_COPY costs SP only its issue time; the transfer then runs FIFO on
its queue and signals when it completes.

Timing follows the calibrated timeline model (``nkic.target.costs``, state in ``nkic.runtime.timeline``): an
instruction occupies its engine for ``occupancy_ns`` (MIN_II floor, VectorE fast modes; TensorE slowed while
throttled on gen3+), waits for what its own engine wrote and it reads to be readable, and signals its dependent
latency after it ends; a transfer's descriptors pipeline per queue, its data starts ~1.3 µs after the trigger and
shares the core's DMA bandwidth with the other queues. ``simulate(..., timing_only=True)`` runs that timeline without
the numerics.
"""

from __future__ import annotations

import heapq
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from nkic import safeio
from nkic.runtime import rng
from nkic.runtime import semantics as sem
from nkic.runtime.errors import SimulationDeadlock, SimulationError
from nkic.runtime.neff import Neff, Variable, read_neff
from nkic.runtime.timeline import DmaCore, EngineLane, PeThrottle, SharedPorts, Transfer
from nkic.target.costs import PORT_NAMES, dependent_latency_ns, instr_ns, occupancy_ns, pe_throttles, shared_ports
from nkic.target.collectives import COLLECTIVE_OPCODES
from nkic.target.instructions import (
    GPSIMD_CORE_PARTITIONS,
    GPSIMD_GROUP,
    LOCAL_GATHER_ELEMS,
    LOCAL_GATHER_MAX_INDICES,
    LOOP_OPCODE_PAIRS,
    NUM_REGISTERS,
    SHUFFLE_KEEP,
    SHUFFLE_MASK_WORDS,
    SHUFFLE_QUADRANT,
    shuffle_start_problem,
    unpack_shuffle_mask,
)
from nkic.target.isa import Instr, Operand, bits_f32, bits_i32, per_opcode
from nkic.target.machine import (
    ENGINE_NAMES,
    ENGINES,
    NUM_DMA_QUEUES,
    NUM_PARTITIONS,
    NUM_SEMAPHORES,
    QUEUE_SEM_BASE,
    REFERENCE_CLOCK_GHZ,
    XORWOW_WORDS,
    Target,
    get_target,
    sem_name,
)
from nkic.target.instructions import MX_GROUP_PARTITIONS, mask_cores, mx_scale_row, mx_scale_rows
from nkic.target.vocab import DTYPES, PACKED_DTYPES

__all__ = [
    "simulate", "run_neff_bytes", "RunResult", "Profile", "ProfileEvent", "SimulationError", "SimulationDeadlock",
    "NUM_PARTITIONS", "DEFAULT_MAX_EVENTS", "PortWait",
]  # fmt: skip

DEFAULT_MAX_EVENTS = 10_000_000
# Fresh memory is all-ones bytes: NaN in float32/bf16/fp16/fp8 at any alignment (a float32-NaN-only pattern would
# read as 0.0 in half of the bf16 lanes), and -1 / max in integer dtypes. The official simulator also NaN-fills.
_FILL_BYTE = 0xFF
_TRACK_LABELS = {e.name: e.label for e in ENGINES}
_ENGINE_IDS = {e.name: e.code for e in ENGINES}
_LOOP_CLOSERS = {end: begin for begin, end in LOOP_OPCODE_PAIRS.items()}  # closer -> its opener


# ---------------------------------------------------------------------------------------------------------------
# profile


@dataclass(frozen=True)
class ProfileEvent:
    core: int
    track: str  # engine name or DMA queue ("q3")
    mnemonic: str
    inst_id: int
    start_ns: float
    dur_ns: float

    @property
    def end_ns(self) -> float:
        return self.start_ns + self.dur_ns


@dataclass(frozen=True)
class PortWait:
    """An instruction that waited for a shared SBUF/PSUM port another engine held (``costs.shared_ports``)."""

    core: int
    engine: str  # the engine that waited
    holder: str  # the engine holding the port
    port: str  # a key of costs.PORT_NAMES
    inst_id: int
    start_ns: float  # when it could have started
    dur_ns: float  # how long it waited


def _track_tid(track: str) -> int:
    # Engines use their engine id and queues their semaphore id, so tids never collide.
    return _ENGINE_IDS[track] if track in _ENGINE_IDS else QUEUE_SEM_BASE + int(track[1:])


@dataclass
class Profile:
    """Timing of one run. ``total_cycles`` is ``total_ns`` at the 1.4 GHz reference clock (``REFERENCE_CLOCK_GHZ``),
    whatever the target's engine clocks are, so runs on different targets compare on one scale."""

    target: str
    num_cores: int
    events: list[ProfileEvent] = field(default_factory=list)
    total_ns: float = 0.0
    # (core, inst_id) -> (file:line[:col], nki call), from the NEFF's source.json when it has one
    sources: dict[tuple[int, int], tuple[str, str]] = field(default_factory=dict)
    port_waits: list[PortWait] = field(default_factory=list)  # engines waiting for a port another engine held

    def port_contention(self) -> dict[tuple[str, str, str], float]:
        """(waiting engine, holding engine, port) -> ns waited, summed over cores, longest first."""
        out: dict[tuple[str, str, str], float] = {}
        for w in self.port_waits:
            key = (w.engine, w.holder, w.port)
            out[key] = out.get(key, 0.0) + w.dur_ns
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    @property
    def total_cycles(self) -> int:
        return round(self.total_ns * REFERENCE_CLOCK_GHZ)

    def _tracks(self, core: int | None) -> dict[str, tuple[float, int]]:
        out: dict[str, tuple[float, int]] = {e: (0.0, 0) for e in ENGINE_NAMES}  # idle engines report zero
        for ev in self.events:
            if core is None or ev.core == core:
                busy, count = out.get(ev.track, (0.0, 0))
                out[ev.track] = (busy + ev.dur_ns, count + 1)
        return dict(sorted(out.items(), key=lambda kv: _track_tid(kv[0])))

    @property
    def busy_ns(self) -> dict[str, float]:
        """Busy time per engine / DMA queue, summed over cores."""
        return {k: v[0] for k, v in self._tracks(None).items()}

    @property
    def instr_counts(self) -> dict[str, int]:
        return {k: v[1] for k, v in self._tracks(None).items()}

    def core_busy_ns(self, core: int) -> dict[str, float]:
        return {k: v[0] for k, v in self._tracks(core).items()}

    def events_for(self, track: str, core: int = 0) -> list[ProfileEvent]:
        return [ev for ev in self.events if ev.track == track and ev.core == core]

    def summary(self) -> str:
        lines = [f"target {self.target}: {self.total_ns:.1f} ns = {self.total_cycles} cycles @ "
                 f"{REFERENCE_CLOCK_GHZ} GHz, {self.num_cores} core(s)",
                 f"{'core':>4} {'track':<6} {'instrs':>7} {'busy ns':>12} {'busy %':>7}"]  # fmt: skip
        for core in range(self.num_cores):
            for track, (busy, count) in self._tracks(core).items():
                if not count:
                    continue
                pct = 100.0 * busy / self.total_ns if self.total_ns else 0.0
                lines.append(f"{core:>4} {track:<6} {count:>7} {busy:>12.1f} {pct:>6.1f}%")
        for (engine, holder, port), ns in self.port_contention().items():
            pct = 100.0 * ns / self.total_ns if self.total_ns else 0.0
            lines.append(f"port contention: {engine} waited {ns:.1f} ns ({pct:.1f}%) for {holder} to release "
                         f"{PORT_NAMES[port]}")  # fmt: skip
        return "\n".join(lines)

    def _metadata_events(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for core in range(self.num_cores):
            out.append({"ph": "M", "name": "process_name", "pid": core, "tid": 0,
                        "args": {"name": f"NeuronCore {core} (sg{core:02d})"}})  # fmt: skip
            queues = {ev.track for ev in self.events if ev.core == core and ev.track not in _ENGINE_IDS}
            for track in list(ENGINE_NAMES) + sorted(queues, key=_track_tid):
                label = _TRACK_LABELS.get(track, f"DMA {track}")
                out.append({"ph": "M", "name": "thread_name", "pid": core, "tid": _track_tid(track),
                            "args": {"name": label}})  # fmt: skip
        return out

    def source_of(self, ev: ProfileEvent) -> tuple[str, str] | None:
        return self.sources.get((ev.core, ev.inst_id))

    def by_source(self) -> dict[tuple[str, str], tuple[int, float]]:
        """(file:line, nki call) -> (instructions, busy ns) over every engine and queue, busiest first."""
        out: dict[tuple[str, str], tuple[int, float]] = {}
        for ev in self.events:
            src = self.source_of(ev) or ("?", "")
            n, busy = out.get(src, (0, 0.0))
            out[src] = (n + 1, busy + ev.dur_ns)
        return dict(sorted(out.items(), key=lambda kv: -kv[1][1]))

    def _span(self, ev: ProfileEvent) -> dict[str, object]:
        args: dict[str, object] = {"inst_id": ev.inst_id}
        src = self.source_of(ev)
        name = ev.mnemonic
        if src is not None:  # the kernel line and the nki call the instruction came from
            args["source"], args["call"] = src
            name = f"{ev.mnemonic} {src[1]}" if src[1] else ev.mnemonic
        return {"ph": "X", "name": name, "cat": "engine" if ev.track in _ENGINE_IDS else "dma", "pid": ev.core,
                "tid": _track_tid(ev.track), "ts": ev.start_ns / 1000.0, "dur": ev.dur_ns / 1000.0, "args": args}

    def to_chrome_trace(self) -> dict[str, object]:
        """Chrome trace-event JSON (loads in ui.perfetto.dev / chrome://tracing); timestamps in µs. With source
        information in the NEFF, each span is named ``MNEMONIC nl.call`` and its args give ``source`` (file:line)
        and ``call``."""
        spans = [self._span(ev) for ev in self.events] + [_wait_span(w) for w in self.port_waits]
        return {"traceEvents": self._metadata_events() + spans, "displayTimeUnit": "ns",
                "otherData": {"target": self.target, "total_ns": self.total_ns}}  # fmt: skip

    def write_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Write the Chrome trace JSON atomically, never through a symbolic link (``nkic.safeio``)."""
        safeio.write_text(path, json.dumps(self.to_chrome_trace()))


def _wait_span(w: PortWait) -> dict[str, object]:
    """A port wait on the waiting engine's track, category ``port-wait`` (not counted as busy time)."""
    return {"ph": "X", "name": f"wait for {w.holder}'s port", "cat": "port-wait", "pid": w.core,
            "tid": _track_tid(w.engine), "ts": w.start_ns / 1000.0, "dur": w.dur_ns / 1000.0,
            "args": {"inst_id": w.inst_id, "port": PORT_NAMES[w.port], "holder": w.holder}}  # fmt: skip


@dataclass
class RunResult:
    outputs: dict[str, np.ndarray]
    profile: Profile
    # Every input variable's contents after the run: a kernel may write its inputs (all programs share them).
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    # Each output's elements that some instruction wrote (whole elements: every byte), by name; empty for a
    # timing-only run, which moves no data. An unwritten element holds the NaN fill (see unwritten_outputs).
    written: dict[str, np.ndarray] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------------------
# machine state and operand access


def print_line(line: str) -> None:
    """Where DEBUG_PRINT's lines go by default: the process's stdout at the time of the print (as NKI's CPU
    simulator prints ``nl.device_print`` immediately), flushed so they interleave with the caller's own output."""
    print(line, flush=True)



class _Core:
    def __init__(self, index: int, target: Target, hbm: dict[int, np.ndarray]):
        self.index = index
        self.sbuf = np.full((NUM_PARTITIONS, target.sbuf_bytes_per_partition), _FILL_BYTE, np.uint8)
        self.psum = np.full((NUM_PARTITIONS, target.psum_bytes_per_partition), _FILL_BYTE, np.uint8)
        self.hbm = hbm
        # The per-partition accumulator registers of ScalarE and VectorE (reduce_cmd).
        self.act_regs = np.zeros(NUM_PARTITIONS, np.float32)
        self.dve_regs = np.zeros(NUM_PARTITIONS, np.float32)
        # The XORWOW state of each PRNG engine's lanes, (128, generators * 6) uint32; a NEFF load starts every
        # engine as if seeded with 0 (runtime/rng.py).
        self.rng_state = {e.name: rng.seed_states(0, NUM_PARTITIONS, e.rng_generators) for e in ENGINES
                          if e.rng_generators}  # fmt: skip
        self.sems = [0] * NUM_SEMAPHORES
        # The sequencers' 32-bit registers. Every engine executes each register instruction at the same barrier,
        # so their copies are always equal: one file per core stands for all of them. Register 0 reads as zero.
        self.regs = [0] * NUM_REGISTERS
        self.dma_in_flight = 0
        # The LNC=2 pair: every core of the run, by rank (set by simulate), and the tiles this core's sendrecvs
        # have sent, by pipe, while their exchange is being applied.
        self.pair: list[_Core] = [self]
        # Ranks (runtime/ranks.py): the rank running this program (core ``index`` of its rank's pair) and how many
        # ranks the launch has; the scheduler numbers core (rank r, program i) r * len(pair) + i.
        self.rank, self.ranks = 0, 1
        self.outbox: dict[int, np.ndarray] = {}
        # Output variable id -> one flag byte per byte of it, set by every write (shared by the cores, as hbm is):
        # which output elements the kernel wrote, for the coverage check after the run.
        self.written: dict[int, np.ndarray] = {}
        # DEBUG_PRINT: the NEFF's string table (its prefixes) and where a printed line goes (set by simulate).
        self.strings: tuple[str, ...] = ()
        self.on_print: Callable[[str], None] = print_line


# Elements one operand's offsets may hold before any array is built (an HBM operand may also cover its variable):
# a corrupted [step, num] pair must be an error, not gigabytes of offsets.
_MAX_PATTERN_ELEMENTS = 1 << 22


def _pattern_count(pairs: tuple[tuple[int, int], ...], cap: int = _MAX_PATTERN_ELEMENTS) -> int:
    count = 1
    for _, num in pairs:
        if num < 0:
            raise SimulationError(f"access pattern {list(map(list, pairs))} has a negative size")
        count *= num
    if count > cap:
        raise SimulationError(f"access pattern {list(map(list, pairs))} has {count} elements, more than the "
                              f"{cap} its memory can hold")  # fmt: skip
    return count


def _pattern_extent(address: int, itemsize: int, pairs: tuple[tuple[int, int], ...], limit: int, what: str) -> None:
    """Bounds-check a static pattern from its pairs alone (its lowest and highest byte), before offsets exist."""
    if _pattern_count(pairs) == 0:
        return
    lo = address + itemsize * sum(min(0, step * (num - 1)) for step, num in pairs)
    hi = address + itemsize * sum(max(0, step * (num - 1)) for step, num in pairs) + itemsize
    if lo < 0 or hi > limit:
        raise SimulationError(f"{what} access [{lo}, {hi}) outside 0..{limit}")


def _element_offsets(pairs: tuple[tuple[int, int], ...], cap: int = _MAX_PATTERN_ELEMENTS) -> np.ndarray:
    """Element offsets of a [step, num] pattern in row-major iteration order (at most ``cap`` of them)."""
    _pattern_count(pairs, cap)
    off = np.zeros(1, np.int64)
    for step, num in pairs:
        off = (off[:, None] + step * np.arange(num, dtype=np.int64)[None, :]).ravel()
    return off


@dataclass
class _View:
    """A resolved operand: byte coordinates into ``mem`` for every element. On-chip operands are (partitions, free
    elements); HBM operands are (outermost dim, remaining elements) of the variable's single byte row, so both
    exchange values as 2-D (nparts, free) arrays."""

    op: Operand
    mem: np.ndarray
    rows: np.ndarray  # broadcastable row index: (P, 1, 1) partitions, or (1, 1, 1) for HBM
    cols: np.ndarray  # byte column of every element byte: (1 or n0, free, itemsize)
    nparts: int
    free: int
    # Fast path: a strided (nparts, free * itemsize) byte view of ``mem`` when the pattern is dense per row.
    window: np.ndarray | None = None
    # An output variable's written-flags (_Core.written, shaped as ``mem``) and their window: store_raw sets them.
    written: np.ndarray | None = None
    written_window: np.ndarray | None = None

    @property
    def dtype(self) -> np.dtype:
        return DTYPES[self.op.dtype]

    @property
    def partitions(self) -> np.ndarray:
        return self.rows.reshape(-1)

    def raw(self) -> np.ndarray:
        """Stored values, bit-exact, in the operand dtype."""
        if self.window is not None:
            return np.ascontiguousarray(self.window).view(self.dtype)
        data = np.ascontiguousarray(self.mem[self.rows, self.cols]).reshape(self.nparts, -1)
        return data.view(self.dtype)

    def f32(self) -> np.ndarray:
        return self.raw().astype(np.float32)

    def load(self, integer: bool) -> np.ndarray:
        return self.raw().astype(np.int64) if integer else self.f32()

    def store_raw(self, values: np.ndarray) -> None:
        values = np.ascontiguousarray(values, dtype=self.dtype).reshape(self.nparts, self.free)
        if self.window is not None:
            self.window[...] = values.view(np.uint8).reshape(self.nparts, -1)
            if self.written_window is not None:
                self.written_window[...] = 1
            return
        self.mem[self.rows, self.cols] = values.view(np.uint8).reshape(self.nparts, self.free, -1)
        if self.written is not None:
            self.written[self.rows, self.cols] = 1

    def store(self, values: np.ndarray) -> None:
        """Cast engine results (float32 or int64) to the operand dtype and write them."""
        values = np.asarray(values)
        if values.size != self.nparts * self.free:
            raise SimulationError(f"writing {values.size} elements into an operand of shape {self.op.shape}")
        self.store_raw(sem.cast(values, self.op.dtype))


def _byte_cols(offsets: np.ndarray, itemsize: int) -> np.ndarray:
    return offsets[:, None] + np.arange(itemsize, dtype=np.int64)[None, :]


def _check_bounds(offsets: np.ndarray, itemsize: int, limit: int, what: str) -> None:
    if len(offsets) and (offsets.min() < 0 or offsets.max() + itemsize > limit):
        raise SimulationError(f"{what} access [{offsets.min()}, {offsets.max() + itemsize}) outside 0..{limit}")


def _resolve_onchip(core: _Core, op: Operand) -> _View:
    mem = core.sbuf if op.memory == "sbuf" else core.psum
    step, nparts = op.pattern[0]
    if step != 1:
        raise SimulationError(f"partition pair must be [1, nparts], got [{step}, {nparts}]")
    if nparts < 1 or op.start_partition + nparts > NUM_PARTITIONS:
        raise SimulationError(f"partitions {op.start_partition}..{op.start_partition + nparts - 1} out of range")
    _pattern_extent(op.address, op.itemsize, op.pattern[1:], mem.shape[1], op.memory)
    offsets = op.address + op.itemsize * _element_offsets(op.pattern[1:])
    _check_bounds(offsets, op.itemsize, mem.shape[1], op.memory)
    rows = (op.start_partition + np.arange(nparts, dtype=np.int64)).reshape(-1, 1, 1)
    view = _View(op, mem, rows, _byte_cols(offsets, op.itemsize)[None], nparts, len(offsets))
    if _dense(offsets, op.itemsize):
        lo = int(offsets[0])
        view.window = mem[op.start_partition : op.start_partition + nparts, lo : lo + len(offsets) * op.itemsize]
    return view


def _dense(offsets: np.ndarray, itemsize: int) -> bool:
    """Whether byte offsets are consecutive elements (so a slice can stand for the fancy index)."""
    return len(offsets) > 0 and bool(np.all(np.diff(offsets) == itemsize))


def _resolve_hbm(core: _Core, op: Operand) -> _View:
    buf = core.hbm.get(op.var_id)
    if buf is None:
        raise SimulationError(f"HBM operand references unknown variable id {op.var_id}")
    what = f"HBM variable {op.var_id}"
    _pattern_extent(op.address, op.itemsize, op.pattern, len(buf), what)
    offsets = op.address + op.itemsize * _element_offsets(op.pattern, max(len(buf), _MAX_PATTERN_ELEMENTS))
    _check_bounds(offsets, op.itemsize, len(buf), f"HBM variable {op.var_id}")
    outer = max(op.pattern[0][1], 1)
    cols = _byte_cols(offsets, op.itemsize).reshape(outer, -1, op.itemsize)
    view = _View(op, buf[None, :], np.zeros((1, 1, 1), np.int64), cols, outer, cols.shape[1])
    written = core.written.get(op.var_id)
    if written is not None:
        view.written = written[None, :]
    row = offsets[: cols.shape[1]]
    step = op.pattern[0][0] * op.itemsize
    if _dense(row, op.itemsize) and (outer == 1 or step >= len(row) * op.itemsize):
        # rows do not overlap, so writing through the strided view is exact
        view.window = np.lib.stride_tricks.as_strided(
            buf[int(row[0]) :], shape=(outer, len(row) * op.itemsize), strides=(max(step, 1), 1)
        )
        if written is not None:
            view.written_window = np.lib.stride_tricks.as_strided(
                written[int(row[0]) :], shape=(outer, len(row) * op.itemsize), strides=(max(step, 1), 1)
            )
    return view


def _rotated(core: _Core, op: Operand) -> Operand:
    """A register-offset operand (a rolled loop's ``+ c*r``) at this iteration's address: the register's value times
    the scale, in elements, added to the static address; the result is an ordinary static operand."""
    if not 0 <= op.dyn_ref < NUM_REGISTERS:
        raise SimulationError(f"dynamic offset register {op.dyn_ref} is not a register")
    shift = int(core.regs[op.dyn_ref]) * op.dyn_scale * op.itemsize
    return replace(op, address=op.address + shift, dyn="", dyn_ref=0, dyn_scale=0)


def _resolve(core: _Core, op: Operand | None, what: str) -> _View:
    if op is None:
        raise SimulationError(f"missing {what} operand")
    if op.dyn == "reg":
        op = _rotated(core, op)
    if op.memory in ("sbuf", "psum"):
        return _resolve_onchip(core, op)
    if op.memory == "hbm":
        return _resolve_hbm(core, op)
    raise SimulationError(f"{what} operand cannot be a pattern-only (memory 'none') operand")


# ---------------------------------------------------------------------------------------------------------------
# instruction semantics: one executor per opcode, registered like xDSL's ``@impl(Op)``

# An executor returns None, or (a branch) whether the branch is taken.
Executor = Callable[["_Core", Instr], "bool | None"]
EXECUTORS: dict[str, Executor] = {}


def execute(*opcodes: str) -> Callable[[Executor], Executor]:
    """Register the numerical effect of ``opcodes``: ``fn(core, instr)``."""
    return per_opcode(EXECUTORS, "executor", *opcodes)


def _value(ins: Instr, prop: str) -> str | int | float:
    """A decoded immediate; a corrupt enum code is a SimulationError."""
    try:
        return ins.value(prop)
    except ValueError as e:
        raise SimulationError(f"bad {prop}: {e}") from None


def _alu_op(ins: Instr, prop: str) -> str:
    return str(_value(ins, prop))


def _view(core: _Core, ins: Instr, slot: str) -> _View:
    return _resolve(core, ins.operand(slot), slot)


def _same_shape(dst: _View, *srcs: _View) -> None:
    for src in srcs:
        if (src.nparts, src.free) != (dst.nparts, dst.free):
            raise SimulationError(
                f"operand shapes disagree: {src.nparts}x{src.free} vs destination {dst.nparts}x{dst.free}"
            )


def _scalar_operand(core: _Core, ins: Instr, slot: str, nparts: int, integer: bool) -> np.ndarray:
    """A (P, 1) tile from ``slot`` when present, else the f32 immediate of the same name (integral if ``integer``)."""
    op = ins.operand(slot)
    if op is None:
        value = bits_f32(ins.imm(slot))
        return np.asarray(int(value) if integer else value, np.int64 if integer else np.float32)
    view = _resolve(core, op, slot)
    if view.free != 1 or view.nparts != nparts:
        raise SimulationError(f"scalar operand must be ({nparts}, 1), got {view.op.shape}")
    return view.load(integer)


# -- registers and branches: executed once per core, when every engine has reached the barrier ----------------
def _reg(core: _Core, ins: Instr, prop: str) -> int:
    n = ins.imm(prop)
    if not 0 <= n < NUM_REGISTERS:
        raise SimulationError(f"{prop} {n} is not a register (0..{NUM_REGISTERS - 1})")
    return n


def _reg_source(core: _Core, ins: Instr, reg: str, imm: str) -> int:
    return core.regs[_reg(core, ins, reg)] + bits_i32(ins.imm(imm))


def _wrap_i32(value: int) -> int:
    return bits_i32(int(value) & 0xFFFFFFFF)


def _set_reg(core: _Core, ins: Instr, prop: str, value: int) -> None:
    n = _reg(core, ins, prop)
    if n:  # writes to register 0 are dropped: it reads as zero
        core.regs[n] = _wrap_i32(value)


@execute("REG_ALU")
def _exec_reg_alu(core: _Core, ins: Instr) -> None:
    a = np.int64(_reg_source(core, ins, "src0_reg", "imm0"))
    b = np.int64(_reg_source(core, ins, "src1_reg", "imm1"))
    _set_reg(core, ins, "dst_reg", int(sem.alu(_alu_op(ins, "op"), a, b)))


@execute("REG_LOAD")
def _exec_reg_load(core: _Core, ins: Instr) -> None:
    src = _view(core, ins, "src")
    if src.nparts * src.free != 1:
        raise SimulationError(f"a register loads one element, not {src.op.shape}")
    value = src.raw().reshape(-1)[0]
    if not np.isfinite(value):
        raise SimulationError(f"register load of the non-finite value {value}")
    _set_reg(core, ins, "dst_reg", int(value))


@execute("REG_STORE")
def _exec_reg_store(core: _Core, ins: Instr) -> None:
    dst = _view(core, ins, "dst")
    if dst.nparts * dst.free != 1:
        raise SimulationError(f"a register stores one element, not {dst.op.shape}")
    dst.store(np.asarray([core.regs[_reg(core, ins, "src_reg")]], np.int64))


@execute("LOOP_BEGIN")
def _exec_loop_begin(core: _Core, ins: Instr) -> bool:
    """Taken (skip the body) when the condition register is zero."""
    return core.regs[_reg(core, ins, "cond_reg")] == 0


@execute("LOOP_END")
def _exec_loop_end(core: _Core, ins: Instr) -> bool:
    """Taken (back to the body's start) while the condition register is non-zero."""
    return core.regs[_reg(core, ins, "cond_reg")] != 0


@execute("COUNTED_LOOP_BEGIN")
def _exec_counted_loop_begin(core: _Core, ins: Instr) -> bool:
    """r[iv_reg] = 0; taken (skip the body) when the bound allows no iteration."""
    _set_reg(core, ins, "iv_reg", 0)
    return bits_i32(ins.imm("bound")) <= 0


@execute("COUNTED_LOOP_END")
def _exec_counted_loop_end(core: _Core, ins: Instr) -> bool:
    """r[iv_reg] += step; taken (back to the body's start) while r[iv_reg] < bound."""
    _set_reg(core, ins, "iv_reg", core.regs[_reg(core, ins, "iv_reg")] + bits_i32(ins.imm("step")))
    return core.regs[_reg(core, ins, "iv_reg")] < bits_i32(ins.imm("bound"))


@execute("SEM_WAIT")
def _exec_sem_wait(core: _Core, ins: Instr) -> None:
    """No data effect: the wait itself is the scheduler's."""


@execute("DMA_COPY")
def _exec_dma(core: _Core, ins: Instr) -> None:
    if any(op is not None and op.dyn for op in ins.operands):
        _exec_dma_dynamic(core, ins)
        return
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    if dst.op.num_elements != src.op.num_elements:
        raise SimulationError(f"DMA element counts differ: dst {dst.op.shape} vs src {src.op.shape}")
    values = src.raw()
    if ins.flag("transpose"):  # swap the outermost and innermost dims of src's pattern, keep the middle ones
        shape = src.op.shape
        if len(shape) < 2:
            raise SimulationError(f"transposing DMA needs a source of rank >= 2, got {shape}")
        values = np.swapaxes(values.reshape(shape), 0, -1)
    if dst.op.dtype == src.op.dtype:
        dst.store_raw(values.reshape(-1))
    else:
        dst.store(values.astype(np.float32).reshape(-1))  # casting transfers go through fp32


# -- dynamic operands (runtime/ISA_FORMAT.md, "Dynamic operands") ----------------------------------------------
@dataclass
class _Elements:
    """Every element of an operand as (row of ``mem``, first byte), row-major in its pattern; ``valid`` marks the
    elements of rows whose run-time address lies inside their memory (static operands: all)."""

    op: Operand
    mem: np.ndarray  # 2-D: (partitions, bytes) on chip, (1, bytes) for an HBM variable
    rows: np.ndarray
    bytes: np.ndarray
    valid: np.ndarray
    written: np.ndarray | None = None  # an output variable's written-flags, shaped as ``mem`` (_Core.written)

    def read(self, keep: np.ndarray) -> np.ndarray:
        cols = self.bytes[keep][:, None] + np.arange(self.op.itemsize)
        return np.ascontiguousarray(self.mem[self.rows[keep][:, None], cols]).view(DTYPES[self.op.dtype]).reshape(-1)

    def write(self, keep: np.ndarray, values: np.ndarray) -> None:
        cols = self.bytes[keep][:, None] + np.arange(self.op.itemsize)
        raw = np.ascontiguousarray(values, DTYPES[self.op.dtype]).view(np.uint8).reshape(-1, self.op.itemsize)
        self.mem[self.rows[keep][:, None], cols] = raw
        if self.written is not None:
            self.written[self.rows[keep][:, None], cols] = 1


def _dynamic_values(core: _Core, ins: Instr, op: Operand, slot: str) -> np.ndarray:
    """The run-time value(s) of a dynamic operand: one (reg, scalar) or one per row of pair 0 (vector)."""
    if op.dyn == "reg":
        if not 0 <= op.dyn_ref < NUM_REGISTERS:
            raise SimulationError(f"{slot}: dynamic offset register {op.dyn_ref} is not a register")
        return np.asarray([core.regs[op.dyn_ref]], np.int64)
    if op.dyn_ref >= len(ins.spec.slots):
        raise SimulationError(f"{slot}: dynamic index slot {op.dyn_ref} does not exist")
    index_slot = ins.spec.slots[op.dyn_ref]
    index = _view(core, ins, index_slot)
    if DTYPES[index.op.dtype].kind not in "iu":
        raise SimulationError(f"{slot}: the dynamic index '{index_slot}' must be an integer dtype, not {index.op.dtype}")
    values = index.raw().astype(np.int64).reshape(-1)
    want = op.pattern[0][1] if op.dyn == "vector" else 1
    if len(values) != want:
        raise SimulationError(f"{slot}: a {op.dyn} dynamic offset needs {want} indices in '{index_slot}', "
                              f"got {len(values)}")  # fmt: skip
    return values


def _elements(core: _Core, ins: Instr, slot: str) -> _Elements:
    """Resolve ``slot`` element by element, its dynamic term added, and mark the rows that are in bounds."""
    op = ins.operand(slot)
    if op is None:
        raise SimulationError(f"missing {slot} operand")
    (step0, n0), inner = op.pattern[0], _element_offsets(op.pattern[1:])
    if op.memory == "hbm":  # on chip, the first pair is partitions (at most 128; checked below)
        _pattern_count(op.pattern, max(len(core.hbm.get(op.var_id, ())), _MAX_PATTERN_ELEMENTS))
    value = _dynamic_values(core, ins, op, slot) if op.dyn else np.zeros(1, np.int64)
    if op.memory == "hbm":
        buf = core.hbm.get(op.var_id)
        if buf is None:
            raise SimulationError(f"{slot}: HBM operand references unknown variable id {op.var_id}")
        mem, limit = buf[None, :], len(buf)
        base = value * op.dyn_scale + (0 if op.dyn == "vector" else step0 * np.arange(n0, dtype=np.int64))
        first = op.address + op.itemsize * (np.broadcast_to(base, (n0,))[:, None] + inner[None, :])
        rows = np.zeros_like(first)
    elif op.memory in ("sbuf", "psum"):
        if op.dyn == "vector":
            raise SimulationError(f"{slot}: a vector dynamic offset needs an HBM operand")
        mem = core.sbuf if op.memory == "sbuf" else core.psum
        limit = mem.shape[1]
        if op.start_partition + n0 > NUM_PARTITIONS:
            raise SimulationError(f"{slot}: partitions {op.start_partition}..{op.start_partition + n0 - 1} out of range")
        offsets = op.address + op.itemsize * (int(value[0]) * op.dyn_scale + inner)
        first = np.broadcast_to(offsets, (n0, len(inner)))
        rows = np.broadcast_to((op.start_partition + np.arange(n0, dtype=np.int64))[:, None], first.shape)
    else:
        raise SimulationError(f"{slot} operand cannot be a pattern-only (memory 'none') operand")
    row_ok = np.all((first >= 0) & (first + op.itemsize <= limit), axis=1)
    if not op.dyn and not row_ok.all():
        raise SimulationError(f"{slot} access outside its {op.memory} memory ({limit} bytes)")
    valid = np.repeat(row_ok, first.shape[1])
    written = core.written.get(op.var_id) if op.memory == "hbm" else None
    return _Elements(op, mem, rows.reshape(-1), np.where(valid, first.reshape(-1), 0), valid,
                     written[None, :] if written is not None else None)  # fmt: skip


def _out_of_bounds_report(e: _Elements, slot: str, values: np.ndarray) -> str:
    bad = int(np.argmin(e.valid.reshape(e.op.pattern[0][1], -1)[:, 0]))
    where = f"HBM variable {e.op.var_id}" if e.op.memory == "hbm" else f"the {e.op.memory} partition"
    value = int(values[bad if len(values) > 1 else 0])
    return (f"{slot} row {bad}: dynamic offset {value} (x {e.op.dyn_scale} elements) reaches outside {where}; "
            "oob_mode=error")  # fmt: skip


def _exec_dma_dynamic(core: _Core, ins: Instr) -> None:
    """DMA_COPY with a dynamic operand: every run-time row is bounds-checked before anything moves; with
    ``oob_skip`` the out-of-bounds rows (of either side) are left out, else they are a SimulationError."""
    dst, src = _elements(core, ins, "dst"), _elements(core, ins, "src")
    n = len(dst.valid)
    if n != len(src.valid):
        raise SimulationError(f"DMA element counts differ: dst {dst.op.shape} vs src {src.op.shape}")
    order = np.arange(n)
    if ins.flag("transpose"):
        shape = src.op.shape
        if len(shape) < 2:
            raise SimulationError(f"transposing DMA needs a source of rank >= 2, got {shape}")
        order = np.swapaxes(order.reshape(shape), 0, -1).reshape(-1)  # dst element k comes from src order[k]
    if not ins.flag("oob_skip"):
        for slot, e in (("dst", dst), ("src", src)):
            if not e.valid.all():
                raise SimulationError(_out_of_bounds_report(e, slot, _dynamic_values(core, ins, e.op, slot)))
    keep = dst.valid & src.valid[order]
    values = src.read(order[keep])
    if dst.op.dtype == src.op.dtype:
        dst.write(keep, values)
    else:  # casting transfers go through fp32
        dst.write(keep, sem.cast(values.astype(np.float32), dst.op.dtype))


@execute("MATMUL")
def _exec_matmul(core: _Core, ins: Instr) -> None:
    dst = _view(core, ins, "dst")
    stat, mov = _view(core, ins, "stationary"), _view(core, ins, "moving")
    if dst.op.memory != "psum":
        raise SimulationError("MATMUL destination must be in PSUM")
    pack = 2 if ins.flag("double_row") else 1  # [K, 2, M] x [K, 2, N]: free sizes 2M and 2N
    if stat.nparts != mov.nparts or pack * dst.nparts != stat.free or pack * dst.free != mov.free:
        raise SimulationError(f"MATMUL shapes: stationary {stat.nparts}x{stat.free}, moving {mov.nparts}x"
                              f"{mov.free}, dst {dst.nparts}x{dst.free}")  # fmt: skip
    # Tiling mode (tile_* immediates) only places the matmul on the PE array: the result is the same.
    if ins.flag("is_transpose"):
        _transpose_mode(dst, stat, mov, ins.flag("accumulate"))
        return
    s, m = stat.f32(), mov.f32()
    s, m = (sem.tf32(v) if view.op.dtype == "tfloat32" else v for v, view in ((s, stat), (m, mov)))
    if pack == 2:
        s, m = sem.double_row_operand(s), sem.double_row_operand(m)
    with np.errstate(invalid="ignore", over="ignore"):  # Inf x 0 is NaN on the PE too
        result = np.matmul(s.T, m)
    if ins.flag("accumulate"):
        result = result + dst.f32()
    dst.store(result)


def _transpose_mode(dst: _View, stat: _View, mov: _View, accumulate: bool) -> None:
    """MATMUL with is_transpose: bit-accurate when ``moving`` routes every output column from one row (an identity)
    and dst has stationary's dtype; otherwise values through fp32 (see ``sem.transpose_mode_matmul``)."""
    result, source = sem.transpose_mode_matmul(stat.f32(), mov.f32())
    if not accumulate and dst.op.dtype == stat.op.dtype and (source >= 0).all():
        dst.store_raw(stat.raw()[source, :].T)
        return
    if accumulate:
        result = result + dst.f32()
    dst.store(result)


def _mx_scale_rows(scale: _View, data: _View, role: str) -> np.ndarray:
    """The scale-tile rows (relative partitions) of data's 8-partition groups; checks the scale tile's shape."""
    if scale.free != data.free or scale.nparts < mx_scale_rows(data.nparts) or data.nparts % MX_GROUP_PARTITIONS:
        raise SimulationError(f"{role} {scale.nparts}x{scale.free} does not hold the scales of {data.nparts}x"
                              f"{data.free} MX data")  # fmt: skip
    return np.array([mx_scale_row(g) for g in range(data.nparts // MX_GROUP_PARTITIONS)], np.int64)


def _mx_values(data: _View) -> np.ndarray:
    """The (K, 4F) MX element values of packed (K, F) data."""
    packed = PACKED_DTYPES.get(data.op.dtype)
    if packed is None:
        raise SimulationError(f"MX data must have a packed dtype, got {data.op.dtype}")
    return packed.unpack(data.raw())


@execute("QUANTIZE_MX")
def _exec_quantize_mx(core: _Core, ins: Instr) -> None:
    dst, src, scale = _view(core, ins, "dst"), _view(core, ins, "src"), _view(core, ins, "dst_scale")
    packed = PACKED_DTYPES.get(dst.op.dtype)
    if packed is None or packed.bits != 8:
        raise SimulationError(f"QUANTIZE_MX writes float8 x4 data, not {dst.op.dtype}")
    if (dst.nparts, 4 * dst.free) != (src.nparts, src.free):
        raise SimulationError(f"QUANTIZE_MX of {src.nparts}x{src.free} into {dst.nparts}x{dst.free} packed")
    rows = _mx_scale_rows(scale, dst, "dst_scale")
    values, scales = sem.mx_quantize(src.f32(), packed.element)
    dst.store_raw(packed.pack(values))
    # Only the groups' rows of the scale tile are written; the other partitions keep their bytes.
    tile = np.ascontiguousarray(scale.raw()).view(np.uint8).copy()
    tile[rows] = scales
    scale.store_raw(tile.view(scale.dtype))


@execute("MATMUL_MX")
def _exec_matmul_mx(core: _Core, ins: Instr) -> None:
    dst = _view(core, ins, "dst")
    stat, mov = _view(core, ins, "stationary"), _view(core, ins, "moving")
    if dst.op.memory != "psum":
        raise SimulationError("MATMUL_MX destination must be in PSUM")
    if stat.nparts != mov.nparts or dst.nparts != stat.free or dst.free != mov.free:
        raise SimulationError(f"MATMUL_MX shapes: stationary {stat.nparts}x{stat.free}, moving {mov.nparts}x"
                              f"{mov.free}, dst {dst.nparts}x{dst.free}")  # fmt: skip
    real = []
    for data, role in ((stat, "stationary_scale"), (mov, "moving_scale")):
        scale = _view(core, ins, role)
        rows = _mx_scale_rows(scale, data, role)
        scale_bytes = np.ascontiguousarray(scale.raw()).view(np.uint8)[rows]
        real.append(sem.mx_dequantize(_mx_values(data), scale_bytes))
    result = sem.mx_matmul(*real)
    if ins.flag("accumulate"):
        result = result + dst.f32()
    dst.store(result)


@execute("TRANSPOSE")
def _exec_transpose(core: _Core, ins: Instr) -> None:
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    if (dst.nparts, dst.free) != (src.free, src.nparts):
        raise SimulationError(f"TRANSPOSE of {src.nparts}x{src.free} into {dst.nparts}x{dst.free}")
    if dst.op.dtype == src.op.dtype:
        dst.store_raw(src.raw().T)
    else:
        dst.store(src.f32().T)


def _all_int(*views: _View) -> bool:
    return all(sem.is_int_dtype(v.op.dtype) for v in views)


@execute("TENSOR_TENSOR")
def _exec_tensor_tensor(core: _Core, ins: Instr) -> None:
    dst, a, b = _view(core, ins, "dst"), _view(core, ins, "in0"), _view(core, ins, "in1")
    _same_shape(dst, a, b)
    integer = _all_int(dst, a, b)  # all-integer operands: exact integer math (GpSimd/DVE int path)
    dst.store(sem.alu(_alu_op(ins, "op"), a.load(integer), b.load(integer)))


@execute("TENSOR_SCALAR")
def _exec_tensor_scalar(core: _Core, ins: Instr) -> None:
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    _same_shape(dst, src)
    ops = [_alu_op(ins, "op0")]
    if ins.flag("has_op1"):
        ops.append(_alu_op(ins, "op1"))
    # Arithmetic runs in fp32; only pure bit-vector chains on integer tensors keep integer values.
    integer = _all_int(dst, src) and all(op in sem.BITVEC_OPS or op == "bypass" for op in ops)
    result = src.load(integer)
    for k, op in enumerate(ops):
        scalar = _scalar_operand(core, ins, f"operand{k}", src.nparts, integer)
        result = sem.scalar_step(op, result, scalar, ins.flag(f"reverse{k}"))
    dst.store(result)


@execute("TENSOR_REDUCE")
def _exec_tensor_reduce(core: _Core, ins: Instr) -> None:
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    free_dims = src.op.shape[1:]
    k = ins.imm("num_reduced_dims") or len(free_dims)  # 0 = every free dim
    if k > len(free_dims):
        raise SimulationError(f"TENSOR_REDUCE over {k} trailing dims of a {len(free_dims)}-free-dim operand")
    inner = int(np.prod(free_dims[len(free_dims) - k :]))
    integer = _all_int(dst, src)
    values = src.load(integer).reshape(src.nparts, -1, inner)
    result = sem.reduce_last(_alu_op(ins, "op"), values)
    if ins.flag("negate"):
        result = -result
    dst.store(result)


def _accumulate(
    core: _Core,
    regs: np.ndarray,
    ins: Instr,
    parts: np.ndarray,
    values: np.ndarray,
    op: str | None = None,
    load: np.ndarray | None = None,
) -> None:
    """Apply ``reduce_cmd`` to an engine's accumulator registers, then write them to ``reduce_res`` if given.

    ``op`` is the reduction (default: the ``reduce_op`` immediate); ``load_reduce`` starts from ``load`` when the
    instruction has a value to load, else from the registers."""
    cmd = _alu_op(ins, "reduce_cmd")
    op = op or _alu_op(ins, "reduce_op")
    if cmd == "reset":
        regs[parts] = sem.reduce_identity(op)
    elif cmd == "reset_reduce":
        regs[parts] = sem.reduce_last(op, values)
    elif cmd in ("reduce", "load_reduce"):
        start = load if cmd == "load_reduce" and load is not None else regs[parts]
        regs[parts] = sem.alu(op, start, sem.reduce_last(op, values))
    _write_registers(core, ins, regs, parts)


def _write_registers(core: _Core, ins: Instr, regs: np.ndarray, parts: np.ndarray) -> None:
    """``reduce_res``, when present, receives the accumulator registers of the instruction's partitions."""
    res = ins.operand("reduce_res")
    if res is not None:
        view = _resolve(core, res, "reduce_res")
        if view.nparts != len(parts) or view.free != 1:
            raise SimulationError(f"reduce_res must be ({len(parts)}, 1), got {res.shape}")
        view.store(regs[parts])


@execute("ACTIVATE")
def _exec_activate(core: _Core, ins: Instr) -> None:
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    _same_shape(dst, src)
    bias = _scalar_operand(core, ins, "bias", src.nparts, False)
    scale = _scalar_operand(core, ins, "scale", src.nparts, False)
    result = sem.activation(_alu_op(ins, "func"), src.f32() * scale + bias)
    dst.store(result)
    _accumulate(core, core.act_regs, ins, src.partitions, result)


@execute("ACTIVATE2")
def _exec_activate2(core: _Core, ins: Instr) -> None:
    """``y = func((src op0 imm0) op1 imm1, relu_param)`` in fp32; y (before the cast to dst) feeds the registers."""
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    _same_shape(dst, src)
    value = src.f32()
    for k in (0, 1):
        op = _alu_op(ins, f"op{k}")
        if op != "bypass":
            scalar = _scalar_operand(core, ins, f"imm{k}", src.nparts, False)
            value = sem.scalar_step(op, value, scalar, ins.flag(f"reverse{k}")).astype(np.float32)
    relu_param = _scalar_operand(core, ins, "relu_param", src.nparts, False)
    result = sem.activation(_alu_op(ins, "func"), value, relu_param)
    dst.store(result)
    _accumulate(core, core.act_regs, ins, src.partitions, result)


@execute("TENSOR_COPY")
def _exec_tensor_copy(core: _Core, ins: Instr) -> None:
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    _same_shape(dst, src)
    if dst.op.dtype == src.op.dtype:
        dst.store_raw(src.raw())
    else:
        dst.store(src.load(_all_int(dst, src)))


@execute("MEMSET")
def _exec_memset(core: _Core, ins: Instr) -> None:
    dst = _view(core, ins, "dst")
    integer = ins.flag("int_value")
    dst.store(np.full((dst.nparts, dst.free), _value(ins, "value"), np.int64 if integer else np.float32))


def _affine_values(ins: Instr) -> np.ndarray:
    """``offset + p * channel_multiplier + Σ step·idx`` in int32 arithmetic, shaped (P, F)."""
    pattern = ins.operand("pattern")
    if pattern is None or pattern.memory != "none":
        raise SimulationError("pattern operand (memory 'none') required")
    multiplier, nparts = pattern.pattern[0]
    if not 0 <= nparts <= NUM_PARTITIONS:  # before np.arange: a corrupted count must not allocate
        raise SimulationError(f"pattern operand spans {nparts} partitions (at most {NUM_PARTITIONS})")
    free = _element_offsets(pattern.pattern[1:])
    values = int(_value(ins, "offset")) + multiplier * np.arange(nparts, dtype=np.int64)[:, None] + free
    return values.astype(np.int32).astype(np.int64)  # wrap like the 32-bit hardware counters


@execute("IOTA")
def _exec_iota(core: _Core, ins: Instr) -> None:
    dst = _view(core, ins, "dst")
    values = _affine_values(ins)
    if values.shape != (dst.nparts, dst.free):
        raise SimulationError(f"IOTA pattern {values.shape} does not match destination {dst.op.shape}")
    dst.store(values if sem.is_int_dtype(dst.op.dtype) else values.astype(np.float32))


@execute("AFFINE_SELECT")
def _exec_affine_select(core: _Core, ins: Instr) -> None:
    dst, on_true = _view(core, ins, "dst"), _view(core, ins, "on_true")
    _same_shape(dst, on_true)
    values = _affine_values(ins)
    if values.shape != (dst.nparts, dst.free):
        raise SimulationError(f"AFFINE_SELECT pattern {values.shape} does not match destination {dst.op.shape}")
    cond = sem.alu(_alu_op(ins, "cmp_op"), values, np.zeros((), np.int64)) != 0
    dst.store(np.where(cond, on_true.f32(), np.float32(_value(ins, "on_false_value"))))


@execute("RECIPROCAL")
def _exec_reciprocal(core: _Core, ins: Instr) -> None:
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    _same_shape(dst, src)
    with np.errstate(all="ignore"):
        dst.store(np.float32(1.0) / src.f32())


@execute("TENSOR_SCALAR_REDUCE")
def _exec_tensor_scalar_reduce(core: _Core, ins: Instr) -> None:
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    _same_shape(dst, src)
    scalar = _scalar_operand(core, ins, "operand0", src.nparts, False)
    result = sem.scalar_step(_alu_op(ins, "op0"), src.f32(), scalar, ins.flag("reverse0"))
    dst.store(result)
    res = ins.operand("reduce_res")
    if res is not None:
        reduced = sem.reduce_last(_alu_op(ins, "reduce_op"), result)
        view = _resolve(core, res, "reduce_res")
        if view.nparts != src.nparts or view.free != 1:
            raise SimulationError(f"reduce_res must be ({src.nparts}, 1), got {res.shape}")
        view.store(-reduced if ins.flag("negate") else reduced)


@execute("RANGE_SELECT")
def _exec_range_select(core: _Core, ins: Instr) -> None:
    """The free index plus range_start, compared in fp32 against two per-partition bounds."""
    dst, on_true = _view(core, ins, "dst"), _view(core, ins, "on_true")
    _same_shape(dst, on_true)
    bound0 = _scalar_operand(core, ins, "bound0", dst.nparts, False)
    bound1 = _scalar_operand(core, ins, "bound1", dst.nparts, False)
    index = (int(_value(ins, "range_start")) + np.arange(dst.free, dtype=np.int64)).astype(np.float32)[None, :]
    keep0 = sem.alu(_alu_op(ins, "comp_op0"), index, bound0) != 0
    keep = keep0 & (sem.alu(_alu_op(ins, "comp_op1"), index, bound1) != 0)
    result = np.where(keep, on_true.f32(), np.float32(_value(ins, "on_false_value")))
    dst.store(result)
    _accumulate(core, core.dve_regs, ins, on_true.partitions, result)


@execute("TENSOR_TENSOR_SCAN")
def _exec_tensor_tensor_scan(core: _Core, ins: Instr) -> None:
    """A sequential recurrence along the free dim (all partitions at once), in fp32."""
    dst, a, b = _view(core, ins, "dst"), _view(core, ins, "in0"), _view(core, ins, "in1")
    _same_shape(dst, a, b)
    op0, op1 = _alu_op(ins, "op0"), _alu_op(ins, "op1")
    x, y = a.f32(), b.f32()
    state = np.broadcast_to(_scalar_operand(core, ins, "initial", dst.nparts, False), (dst.nparts, 1))
    state = state.reshape(-1).astype(np.float32)
    out = np.empty_like(x)
    for i in range(x.shape[1]):
        step = sem.scalar_step(op0, x[:, i], state, ins.flag("reverse0"))
        state = sem.scalar_step(op1, step.astype(np.float32), y[:, i], ins.flag("reverse1")).astype(np.float32)
        out[:, i] = state
    dst.store(out)


@execute("TENSOR_COPY_PREDICATED")
def _exec_tensor_copy_predicated(core: _Core, ins: Instr) -> None:
    dst, pred = _view(core, ins, "dst"), _view(core, ins, "predicate")
    _same_shape(dst, pred)
    keep = pred.raw() != 0
    if ins.flag("reverse_pred"):
        keep = ~keep
    out = dst.raw().copy()
    if ins.operand("src") is not None:
        src = _view(core, ins, "src")
        _same_shape(dst, src)
        values = src.raw() if src.op.dtype == dst.op.dtype else sem.cast(src.f32(), dst.op.dtype)
    else:
        values = np.broadcast_to(sem.cast(np.float32(bits_f32(ins.imm("src"))), dst.op.dtype), out.shape)
    out[keep] = values[keep]
    dst.store_raw(out)


@execute("BN_STATS")
def _exec_bn_stats(core: _Core, ins: Instr) -> None:
    """(count, mean, variance * count) of the even, then the odd elements of each partition, in fp32."""
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    x = src.f32()
    cols = []
    for half in (x[:, 0::2], x[:, 1::2]):
        count = np.float32(half.shape[1])
        mean = half.sum(axis=1, dtype=np.float32) / count if half.shape[1] else np.zeros(len(x), np.float32)
        m2 = ((half - mean[:, None]) ** 2).sum(axis=1, dtype=np.float32)
        cols += [np.full(len(x), count, np.float32), mean, m2]
    dst.store(np.stack(cols, axis=1))


@execute("BN_AGGR")
def _exec_bn_aggr(core: _Core, ins: Instr) -> None:
    """Chan's parallel combination of (count, mean, variance * count) triples: mean and variance per partition."""
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    t = src.f32().reshape(src.nparts, -1, 3)
    n, m, m2 = t[..., 0], t[..., 1], t[..., 2]
    total = n.sum(axis=1, dtype=np.float32)
    with np.errstate(all="ignore"):
        mean = np.where(total > 0, (n * m).sum(axis=1, dtype=np.float32) / total, np.float32(0))
        spread = (m2 + n * (m - mean[:, None]) ** 2).sum(axis=1, dtype=np.float32)
        var = np.where(total > 0, spread / total, np.float32(0))
    dst.store(np.stack([mean, var], axis=1))


@execute("EXPONENTIAL")
def _exec_exponential(core: _Core, ins: Instr) -> None:
    """``exp(src - max_value)``; the row sums go into the VectorE registers as reduce_cmd says."""
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    _same_shape(dst, src)
    shift = _scalar_operand(core, ins, "max_value", src.nparts, False)
    result = sem.activation("exp", src.f32() - shift)
    dst.store(result)
    init = _scalar_operand(core, ins, "reduce_init", src.nparts, False)
    load = np.broadcast_to(init, (src.nparts, 1)).reshape(-1).astype(np.float32)
    _accumulate(core, core.dve_regs, ins, src.partitions, result, op="add", load=load)


@execute("SELECT_REDUCE")
def _exec_select_reduce(core: _Core, ins: Instr) -> None:
    dst, pred, on_true = _view(core, ins, "dst"), _view(core, ins, "predicate"), _view(core, ins, "on_true")
    _same_shape(dst, pred, on_true)
    keep = pred.raw() != 0
    if ins.flag("reverse_pred"):
        keep = ~keep
    on_false = _scalar_operand(core, ins, "on_false", dst.nparts, False)
    result = np.where(keep, on_true.f32(), on_false).astype(np.float32)
    dst.store(result)
    _accumulate(core, core.dve_regs, ins, on_true.partitions, result)


@execute("TENSOR_SCALAR_CUMULATIVE")
def _exec_tensor_scalar_cumulative(core: _Core, ins: Instr) -> None:
    """The documented pseudocode: the register starts per reduce_cmd, then ``reg = op1(op0(x, imm0), reg)``."""
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    _same_shape(dst, src)
    op0, op1, cmd = _alu_op(ins, "op0"), _alu_op(ins, "op1"), _alu_op(ins, "reduce_cmd")
    parts = src.partitions
    if cmd == "reset_reduce":  # a running difference starts from 0 like a sum
        reg = np.full(src.nparts, sem.reduce_identity("add" if op1 == "subtract" else op1), np.float32)
    elif cmd == "load_reduce":
        init = _scalar_operand(core, ins, "imm1", src.nparts, False)
        reg = np.broadcast_to(init, (src.nparts, 1)).reshape(-1).astype(np.float32)
    else:
        reg = core.dve_regs[parts].astype(np.float32)
    scaled = sem.scalar_step(op0, src.f32(), _scalar_operand(core, ins, "imm0", src.nparts, False), False)
    out = np.empty((src.nparts, src.free), np.float32)
    for i in range(src.free):
        reg = sem.alu(op1, scaled[:, i].astype(np.float32), reg).astype(np.float32)
        out[:, i] = reg
    dst.store(out)
    core.dve_regs[parts] = reg


@execute("TENSOR_PARTITION_REDUCE")
def _exec_tensor_partition_reduce(core: _Core, ins: Instr) -> None:
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    if (dst.nparts, dst.free) != (1, src.free):
        raise SimulationError(f"partition reduce of {src.nparts}x{src.free} into {dst.nparts}x{dst.free}")
    values = src.load(_all_int(dst, src))
    dst.store(sem.reduce_last(_alu_op(ins, "op"), values.T)[None, :])


def _rng_lanes(core: _Core, ins: Instr) -> np.ndarray:
    """The executing engine's PRNG state (lanes x words), a SimulationError on an engine without one."""
    state = core.rng_state.get(ins.engine)
    if state is None:
        raise SimulationError(f"{ins.opcode} on {ins.engine}: the engine has no random number generator")
    return state


def _draw(core: _Core, ins: Instr, view: _View) -> np.ndarray:
    """One 32-bit XORWOW output per element of ``view``, from the lanes of its partitions (which advance)."""
    state, parts = _rng_lanes(core, ins), view.partitions
    lanes = state[parts]
    bits = rng.draw(lanes, view.free)
    state[parts] = lanes
    return bits


@execute("RNG")
def _exec_rng(core: _Core, ins: Instr) -> None:
    dst = _view(core, ins, "dst")
    dst.store_raw(rng.truncate(_draw(core, ins, dst), dst.dtype))


@execute("RAND2")
def _exec_rand2(core: _Core, ins: Instr) -> None:
    dst = _view(core, ins, "dst")
    low = _scalar_operand(core, ins, "min", dst.nparts, False)
    high = _scalar_operand(core, ins, "max", dst.nparts, False)
    dst.store(rng.uniform(_draw(core, ins, dst), low, high))


@execute("DROPOUT")
def _exec_dropout(core: _Core, ins: Instr) -> None:
    """Kept elements are copied bit for bit (dst and src share a dtype); dropped ones become 0."""
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    _same_shape(dst, src)
    prob = _scalar_operand(core, ins, "prob", dst.nparts, False)
    keep = rng.dropout_keep(_draw(core, ins, dst), prob)
    if dst.dtype != src.dtype:
        raise SimulationError(f"DROPOUT copies {src.op.dtype} into {dst.op.dtype}: the dtypes must match")
    values = src.raw()
    dst.store_raw(np.where(keep, values, np.zeros((), values.dtype)))


@execute("SET_RNG_SEED")
def _exec_set_rng_seed(core: _Core, ins: Instr) -> None:
    src = _view(core, ins, "src")
    if src.dtype.itemsize != 4 or src.nparts * src.free != 1:
        raise SimulationError(f"SET_RNG_SEED reads one 32-bit value, got {src.op.dtype} {src.op.shape}")
    seed = int(src.raw().view(np.uint32).reshape(-1)[0])
    state = _rng_lanes(core, ins)
    state[...] = rng.seed_states(seed, state.shape[0], state.shape[1] // XORWOW_WORDS)


def _state_view(core: _Core, ins: Instr, slot: str) -> tuple[_View, np.ndarray]:
    view, state = _view(core, ins, slot), _rng_lanes(core, ins)
    if view.op.dtype != "uint32" or view.free != state.shape[1]:
        raise SimulationError(f"{ins.opcode} on {ins.engine} moves {state.shape[1]} uint32 words per partition, "
                              f"got {view.free} {view.op.dtype}")  # fmt: skip
    return view, state


@execute("RAND_SET_STATE")
def _exec_rand_set_state(core: _Core, ins: Instr) -> None:
    src, state = _state_view(core, ins, "src")
    state[src.partitions] = src.raw()


@execute("RAND_GET_STATE")
def _exec_rand_get_state(core: _Core, ins: Instr) -> None:
    dst, state = _state_view(core, ins, "dst")
    dst.store_raw(state[dst.partitions])
def _all_ones(dtype: np.dtype) -> int:
    """The not-found sentinel of an index dtype: every bit set."""
    return int(np.iinfo(dtype).max) if dtype.kind == "u" else -1


@execute("MAX8")
def _exec_max8(core: _Core, ins: Instr) -> None:
    """The 8 largest fp32 values of each partition, descending (``descending_order``: NaN first, ties kept)."""
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    if (dst.nparts, dst.free) != (src.nparts, 8) or src.free < 8:
        raise SimulationError(f"MAX8 of {src.nparts}x{src.free} into {dst.nparts}x{dst.free}")
    values = src.f32()
    dst.store(np.take_along_axis(values, sem.descending_order(values)[:, :8], axis=1))


def _index8(core: _Core, ins: Instr, data: _View, slot: str, reverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """Match the 8 values of ``vals`` in ``data`` and write their indices (all-ones where absent) to ``slot``."""
    vals = _view(core, ins, "vals")
    if vals.nparts != data.nparts or vals.free != 8:
        raise SimulationError(f"vals must be {data.nparts}x8, got {vals.nparts}x{vals.free}")
    index, found = sem.claimed_matches(data.f32(), vals.f32(), reverse)
    if ins.operand(slot) is not None:
        out = _view(core, ins, slot)
        if (out.nparts, out.free) != (data.nparts, 8):
            raise SimulationError(f"{slot} must be {data.nparts}x8, got {out.nparts}x{out.free}")
        out.store(np.where(found, index, _all_ones(out.dtype)))
    return index, found


@execute("FIND_INDEX8")
def _exec_find_index8(core: _Core, ins: Instr) -> None:
    _index8(core, ins, _view(core, ins, "src"), "dst", reverse=False)


@execute("MATCH_REPLACE8")
def _exec_match_replace8(core: _Core, ins: Instr) -> None:
    """``vals`` served from slot 7 down to 0; the matched elements become ``imm``, the rest pass through fp32."""
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    _same_shape(dst, src)
    values = src.f32()  # read before dst is written: dst may be src itself
    index, found = _index8(core, ins, src, "dst_idx", reverse=True)
    rows = np.broadcast_to(np.arange(src.nparts)[:, None], index.shape)
    values[rows[found], index[found]] = np.float32(_value(ins, "imm"))
    dst.store(values)


def _group_rows(view: _View, what: str) -> None:
    """GpSimd core c owns partitions 16c .. 16c + 15: an operand worked on per core starts at a core boundary."""
    if view.op.start_partition % GPSIMD_GROUP:
        raise SimulationError(f"{what} starts at partition {view.op.start_partition}, not on a GpSimd core boundary")


@execute("NONZERO_WITH_COUNT")
def _exec_nonzero_with_count(core: _Core, ins: Instr) -> None:
    """Only the first partition of each 16-partition GpSimd core is read and written; other rows keep their bits."""
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    if (dst.nparts, dst.free) != (src.nparts, src.free + 1):
        raise SimulationError(f"NONZERO_WITH_COUNT of {src.nparts}x{src.free} into {dst.nparts}x{dst.free}")
    offset, padding = int(_value(ins, "index_offset")), int(_value(ins, "padding_val"))
    values, out = src.raw(), dst.raw().copy()
    for row in range(-src.op.start_partition % GPSIMD_GROUP, src.nparts, GPSIMD_GROUP):
        hits = np.flatnonzero(values[row] != 0)
        line = np.full(dst.free, padding, np.int64)
        line[: len(hits)] = hits + offset
        line[-1] = len(hits)
        out[row] = line.astype(np.int32)  # int32 arithmetic wraps like the hardware's
    dst.store_raw(out)


@execute("TOPK")
def _exec_topk(core: _Core, ins: Instr) -> None:
    """Per 16-partition group: the k largest of its n-element snake, ascending, written back as a snake."""
    vals, idx, src = _view(core, ins, "dst"), _view(core, ins, "idx_dst"), _view(core, ins, "src")
    n, k = int(_value(ins, "n")), vals.free
    if (idx.nparts, idx.free) != (vals.nparts, k) or src.nparts != vals.nparts or src.nparts % GPSIMD_GROUP:
        raise SimulationError(f"TOPK of {src.nparts}x{src.free} into {vals.nparts}x{k} and {idx.nparts}x{idx.free}")
    if not 1 <= k <= n or src.free * GPSIMD_GROUP < n:
        raise SimulationError(f"TOPK: n = {n} elements, k = {k}, src {src.nparts}x{src.free}")
    for view, what in ((vals, "val_dst"), (idx, "idx_dst"), (src, "src")):
        _group_rows(view, what)
    data, out_vals, out_idx = src.f32(), vals.raw().copy(), idx.raw().copy()
    j = np.arange(k)
    for g in range(0, src.nparts, GPSIMD_GROUP):
        snake = data[g : g + GPSIMD_GROUP].T.reshape(-1)[:n]  # element j at partition j % 16, column j // 16
        chosen = sem.descending_order(snake)[:k][::-1]  # the k largest, ascending
        out_vals[g + j % GPSIMD_GROUP, j // GPSIMD_GROUP] = sem.cast(snake[chosen], vals.op.dtype)
        out_idx[g + j % GPSIMD_GROUP, j // GPSIMD_GROUP] = chosen
    vals.store_raw(out_vals)
    idx.store_raw(out_idx)


@execute("SCALAR_TENSOR_TENSOR")
def _exec_scalar_tensor_tensor(core: _Core, ins: Instr) -> None:
    dst, data, other = _view(core, ins, "dst"), _view(core, ins, "data"), _view(core, ins, "operand1")
    _same_shape(dst, data, other)
    scalar = _scalar_operand(core, ins, "operand0", data.nparts, False)
    result = sem.scalar_step(_alu_op(ins, "op0"), data.f32(), scalar, ins.flag("reverse0"))
    op1, t1 = _alu_op(ins, "op1"), other.f32()
    dst.store(sem.alu(op1, t1, result) if ins.flag("reverse1") else sem.alu(op1, result, t1))


# -- gathers, shuffles, sequence bounds, DMA compute ------------------------------------------------------------
def _index_values(view: _View, what: str) -> np.ndarray:
    """An index operand's values as int64 (integer dtypes only: a float index has no defined meaning)."""
    if not sem.is_int_dtype(view.op.dtype):
        raise SimulationError(f"{what} must have an integer dtype, got {view.op.dtype}")
    return view.raw().astype(np.int64)


def _out_of_range(values: np.ndarray, limit: int, what: str, span: int = 1) -> None:
    """SimulationError naming the first index whose ``span`` elements are not all inside ``[0, limit)``."""
    bad = (values < 0) | (values + span > limit)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        value = int(values[where])
        reach = f"{value}..{value + span - 1}" if span > 1 else f"{value}"
        raise SimulationError(f"{what} {where} = {value} reaches element {reach}, outside [0, {limit})")


@execute("LOCAL_GATHER")
def _exec_local_gather(core: _Core, ins: Instr) -> None:
    """Per GpSimd core (16 partitions): its index slice flattened partition-first, the first num_valid_indices used;
    each of its partitions gathers num_elem_per_idx elements at every index from its own free elements."""
    dst, src, index = _view(core, ins, "dst"), _view(core, ins, "src"), _view(core, ins, "index")
    per_idx, valid = int(_value(ins, "num_elem_per_idx")), int(_value(ins, "num_valid_indices"))
    parts, group = src.nparts, GPSIMD_CORE_PARTITIONS
    if index.nparts != parts or dst.nparts != parts or parts % group:
        raise SimulationError(f"src {parts}, index {index.nparts} and dst {dst.nparts} partitions must agree and be "
                              f"a multiple of {group}")  # fmt: skip
    for name, v in (("src", src), ("index", index), ("dst", dst)):
        if v.op.start_partition % group:
            raise SimulationError(f"{name} starts at partition {v.op.start_partition}, not on a GpSimd core boundary")
    if dst.op.dtype != src.op.dtype:
        raise SimulationError(f"dst {dst.op.dtype} and src {src.op.dtype} differ (a gather cannot cast)")
    if per_idx not in LOCAL_GATHER_ELEMS or not 1 <= valid <= min(group * index.free, LOCAL_GATHER_MAX_INDICES):
        raise SimulationError(f"num_elem_per_idx {per_idx} / num_valid_indices {valid} out of range")
    if dst.free != valid * per_idx:
        raise SimulationError(f"dst has {dst.free} elements per partition, the gather writes {valid} x {per_idx}")
    cores = parts // group
    # (cores, 16, k) -> per core, partition-first: entry j of core c is index[16c + j % 16, j // 16]
    idx = _index_values(index, "index").reshape(cores, group, index.free).transpose(0, 2, 1).reshape(cores, -1)
    idx = idx[:, :valid]
    _out_of_range(idx, src.free, "index (core, position)", per_idx)  # before reading src
    cols = (idx[:, :, None] + np.arange(per_idx)).reshape(cores, 1, -1)
    data = src.raw().reshape(cores, group, src.free)
    dst.store_raw(np.take_along_axis(data, np.broadcast_to(cols, (cores, group, cols.shape[-1])), axis=2))


@execute("NC_N_GATHER")
def _exec_nc_n_gather(core: _Core, ins: Instr) -> None:
    """``dst[p, i] = src[p, indices[p, i]]`` over src's flattened free elements."""
    dst, src, indices = _view(core, ins, "dst"), _view(core, ins, "src"), _view(core, ins, "indices")
    if not dst.nparts == src.nparts == indices.nparts or dst.free != indices.free:
        raise SimulationError(f"dst {dst.nparts}x{dst.free}, src {src.nparts}x{src.free} and indices "
                              f"{indices.nparts}x{indices.free} do not fit")  # fmt: skip
    if dst.op.dtype != src.op.dtype:
        raise SimulationError(f"dst {dst.op.dtype} and src {src.op.dtype} differ (a gather cannot cast)")
    idx = _index_values(indices, "indices")
    _out_of_range(idx, src.free, "indices (partition, position)")  # before reading src
    dst.store_raw(np.take_along_axis(src.raw(), idx, axis=1))


@execute("NC_STREAM_SHUFFLE")
def _exec_nc_stream_shuffle(core: _Core, ins: Instr) -> None:
    """Per quadrant q: ``dst[32q + i] = src[32q + mask[i]]``; mask 255 keeps dst[32q + i]. src is read whole before
    dst is written, so in-place shuffles see the old values."""
    dst, src = _view(core, ins, "dst"), _view(core, ins, "src")
    if dst.free != src.free or dst.op.dtype != src.op.dtype:
        raise SimulationError(f"dst {dst.nparts}x{dst.free} {dst.op.dtype} and src {src.nparts}x{src.free} "
                              f"{src.op.dtype} need equal free sizes and dtypes")  # fmt: skip
    problem = shuffle_start_problem(src.nparts, dst.nparts, {"src": src.op.start_partition,
                                                           "dst": dst.op.start_partition})
    if problem is not None:
        raise SimulationError(problem)
    mask = unpack_shuffle_mask(tuple(int(_value(ins, f"mask{w}")) for w in range(SHUFFLE_MASK_WORDS)))
    lanes = np.arange(dst.nparts)
    picks = np.asarray(mask, np.int64)[lanes % SHUFFLE_QUADRANT]
    moved = picks != SHUFFLE_KEEP
    rows = lanes - lanes % SHUFFLE_QUADRANT + picks
    bad = moved & ((picks >= SHUFFLE_QUADRANT) | (rows >= src.nparts))
    if bad.any():
        i = int(np.argmax(bad))
        raise SimulationError(f"mask entry {i % SHUFFLE_QUADRANT} = {int(picks[i])} makes dst partition {i} read "
                              f"src partition {int(rows[i])}, src has {src.nparts}")  # fmt: skip
    out = dst.raw().copy()
    out[moved] = src.raw()[rows[moved]]
    dst.store_raw(out)


@execute("SEQUENCE_BOUNDS")
def _exec_sequence_bounds(core: _Core, ins: Instr) -> None:
    """NKI's reference: a run is a maximal stretch of equal neighbouring ids; each element gets its run's
    ``[start, end)``, id 0 (padding) gets ``(n, -1)``."""
    dst, seg = _view(core, ins, "dst"), _view(core, ins, "src")
    if seg.nparts != 1 or (dst.nparts, dst.free) != (1, 2 * seg.free):
        raise SimulationError(f"segment ids {seg.nparts}x{seg.free} need one partition and dst 1x{2 * seg.free}, "
                              f"got {dst.nparts}x{dst.free}")  # fmt: skip
    ids = seg.raw().reshape(-1).astype(np.float64)
    bad = ~np.isfinite(ids) | (ids < 0) | (ids != np.floor(ids))
    if bad.any():
        i = int(np.argmax(bad))
        raise SimulationError(f"segment id {i} is {ids[i]}; segment ids must be non-negative integers")
    n = len(ids)
    begins = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    run = np.cumsum(np.r_[True, ids[1:] != ids[:-1]]) - 1
    start, end = begins[run], np.r_[begins[1:], n][run]
    pad = ids == 0
    start, end = np.where(pad, n, start), np.where(pad, -1, end)
    dst.store(np.concatenate([start, end]).astype(np.int64)[None, :])


@execute("DMA_COMPUTE")
def _exec_dma_compute(core: _Core, ins: Instr) -> None:
    """``dst = src0 + src1 + ...`` element-wise (row-major order of each pattern), summed left to right in fp32,
    then cast to dst's dtype. With a dynamic operand (read-modify-write) every operand is resolved row by row, its
    index tensor in a spare source slot."""
    if any(op is not None and op.dyn for op in ins.operands):
        _exec_dma_compute_dynamic(core, ins)
        return
    dst = _view(core, ins, "dst")
    srcs = [_resolve(core, op, slot) for slot, op in zip(ins.spec.slots[1:], ins.operands[1:]) if op is not None]
    for s in srcs:
        if s.op.num_elements != dst.op.num_elements:
            raise SimulationError(f"element counts differ: dst {dst.op.shape} vs a source {s.op.shape}")
    op = _alu_op(ins, "reduce_op")
    if op != "add":
        raise SimulationError(f"reduce_op must be add, got {op}")
    total = srcs[0].f32().reshape(-1)
    for s in srcs[1:]:
        total = (total + s.f32().reshape(-1)).astype(np.float32)
    dst.store(total)


def _exec_dma_compute_dynamic(core: _Core, ins: Instr) -> None:
    """DMA_COMPUTE with dynamic operands: the slots that hold index tensors are not sources; every source is read
    (all of them before dst is written, so a scatter RMW reads the old dst), summed in fp32, and written through
    dst's run-time addresses. Out-of-bounds rows are an error, or with ``oob_skip`` left out on every side."""
    index_slots = {op.dyn_ref for op in ins.operands if op is not None and op.dyn in ("scalar", "vector")}
    slots = [s for i, (s, op) in enumerate(zip(ins.spec.slots, ins.operands))
             if op is not None and i not in index_slots]  # fmt: skip
    if _alu_op(ins, "reduce_op") != "add":
        raise SimulationError(f"reduce_op must be add, got {_alu_op(ins, 'reduce_op')}")
    parts = {slot: _elements(core, ins, slot) for slot in slots}
    n = len(parts["dst"].valid)
    for slot, e in parts.items():
        if len(e.valid) != n:
            raise SimulationError(f"element counts differ: dst {parts['dst'].op.shape} vs {slot} {e.op.shape}")
        if not ins.flag("oob_skip") and not e.valid.all():
            raise SimulationError(_out_of_bounds_report(e, slot, _dynamic_values(core, ins, e.op, slot)))
    keep = np.logical_and.reduce([e.valid for e in parts.values()])
    total: np.ndarray | None = None
    for slot in slots[1:]:
        values = parts[slot].read(keep).astype(np.float32)
        total = values if total is None else (total + values).astype(np.float32)
    assert total is not None
    parts["dst"].write(keep, sem.cast(total, parts["dst"].op.dtype))


# -- the LNC=2 pair: the scheduler makes the cores meet (_Scheduler._meet); these are the per-core effects ------
@execute("SENDRECV")
def _exec_sendrecv(core: _Core, ins: Instr) -> None:
    """The receiving half of an exchange: ``dst`` = the tile core ``recv_from_rank`` sent on this pipe (the
    scheduler has put every member's ``src`` into its outbox first, so an exchange in place swaps)."""
    peer, pipe = int(_value(ins, "recv_from_rank")), int(_value(ins, "pipe_id"))
    if peer >= len(core.pair):
        raise SimulationError(f"recv_from_rank {peer} names no core (the run has {len(core.pair)})")
    sent = core.pair[peer].outbox.get(pipe)
    if sent is None:
        raise SimulationError(f"core {peer} sent nothing on pipe {pipe} to core {core.index}")
    dst = _view(core, ins, "dst")
    if sent.dtype != dst.dtype or sent.shape != (dst.nparts, dst.free):
        raise SimulationError(f"core {peer} sent a {sent.shape} {sent.dtype} tile (partitions, elements) on pipe "
                              f"{pipe}; dst is ({dst.nparts}, {dst.free}) {dst.dtype}")  # fmt: skip
    dst.store_raw(sent)


@execute("DEBUG_PRINT")
def _exec_debug_print(core: _Core, ins: Instr) -> None:
    """``nl.device_print``: one line, ``<prefix> <value>``, what ``print(prefix, value)`` writes for the tile as a
    numpy array of its own shape and dtype (numpy's ``str``, under the caller's print options). It runs when the
    instruction executes, so it shows the value at that point of the run: after the writes it depends on, before
    the later ones (which wait for it); once per execution, so once per iteration of a loop."""
    index = ins.imm("prefix")
    if index >= len(core.strings):
        raise SimulationError(f"prefix string {index} is not in the NEFF's string table ({len(core.strings)} strings)")
    src = _view(core, ins, "src")
    value = src.raw().reshape(src.op.shape)
    core.on_print(f"{core.strings[index]} {value}")


@execute("CORE_BARRIER")
def _exec_core_barrier(core: _Core, ins: Instr) -> None:
    """No data effect: the cores' meeting is the scheduler's; a barrier must name its own core."""
    cores = mask_cores(int(_value(ins, "core_mask")))
    if core.index not in cores:
        raise SimulationError(f"core {core.index} is not one of the barrier's cores {cores}")


# ---------------------------------------------------------------------------------------------------------------
# scheduling


@dataclass
class _Engine:
    core: int
    name: str
    instrs: list[Instr]
    pc: int = 0
    busy: bool = False
    meeting: tuple | None = None  # the LNC meeting this engine waits at (_Scheduler._post)
    # LOOP_BEGIN <-> LOOP_END positions in this stream (structured control flow: a branch goes to its partner)
    partner: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        opened: list[int] = []
        closers = {end: begin for begin, end in LOOP_OPCODE_PAIRS.items()}
        for i, ins in enumerate(self.instrs):
            if ins.opcode in LOOP_OPCODE_PAIRS:
                opened.append(i)
            elif ins.opcode in closers:
                if not opened or self.instrs[opened[-1]].opcode != closers[ins.opcode]:
                    raise SimulationError(f"core {self.core} {self.name}[{i}] {ins.opcode} without a "
                                          f"{closers[ins.opcode]}")  # fmt: skip
                begin = opened.pop()
                self.partner[begin], self.partner[i] = i, begin
        if opened:
            begin = self.instrs[opened[-1]].opcode
            raise SimulationError(f"core {self.core} {self.name}[{opened[-1]}] {begin} without a "
                                  f"{LOOP_OPCODE_PAIRS[begin]}")  # fmt: skip

    @property
    def done(self) -> bool:
        return self.pc >= len(self.instrs)

    @property
    def at_barrier(self) -> bool:
        return not self.busy and not self.done and "control" in self.instrs[self.pc].spec.traits


class _Scheduler:
    def __init__(self, neff: Neff, cores: list[_Core], target: Target, max_events: int, timing_only: bool = False):
        self.cores = cores
        self.target = target
        self.max_events = max_events
        self.timing_only = timing_only  # run the timeline only: data-path instructions have no numerical effect
        self.engines = [_Engine(c, e, list(sg.engines.get(e, []))) for c, sg in enumerate(neff.subgraphs)
                        for e in ENGINE_NAMES]  # fmt: skip
        # The timeline model (runtime/timeline.py): same-engine read-after-write waits, TensorE throttling, the DMA
        # queues under the core's bandwidth cap; semaphore signals still to arrive (a barrier waits for them).
        self.lanes = {(e.core, e.name): EngineLane() for e in self.engines}
        self.throttles = [PeThrottle() for _ in cores] if pe_throttles(target) else None
        self.ports = [SharedPorts() for _ in cores]  # the ports engines share (costs.shared_ports)
        self.dma = [DmaCore(target, lambda: self.now, self._at, partial(self._land, c)) for c in range(len(cores))]
        self.signals_in_flight = [0] * len(cores)
        self.latency = {e: dependent_latency_ns(e, target) for e in ENGINE_NAMES}
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = 0
        self.now = 0.0
        self.handled = 0
        self.profile = Profile(target.name, len(cores))
        # The LNC=2 pair's meetings. A core's k-th SENDRECV of a pipe meets the other cores' k-th of that pipe, its
        # k-th CORE_BARRIER their k-th barrier: (what, k) -> {core: (engines, instruction)}, what being
        # ("SENDRECV", pipe) or ("CORE_BARRIER",). arrived[(core, what)] counts a core's arrivals.
        self.arrived: dict[tuple[int, tuple], int] = {}
        self.meetings: dict[tuple, dict[int, tuple[list[_Engine], Instr]]] = {}

    def run(self) -> Profile:
        while True:
            for eng in self.engines:
                if self._ready(eng):
                    self._issue(eng)
            for core in range(len(self.cores)):
                self._barrier(core)
            if not self.heap:
                break
            self._advance()
        blocked = [e for e in self.engines if not e.done]
        if blocked or self.meetings:  # a collective some rank never reached holds no engine, but never completes
            raise SimulationDeadlock(self._deadlock_report(blocked))
        return self.profile

    def _at(self, time: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.heap, (time, self.seq, action))
        self.seq += 1

    def _advance(self) -> None:
        # Apply every completion at the earliest time before issuing, so same-time signals are seen together.
        self.now = self.heap[0][0]
        while self.heap and self.heap[0][0] == self.now:
            heapq.heappop(self.heap)[2]()
            self.handled += 1
        if self.handled > self.max_events:
            raise SimulationError(f"runaway simulation: more than {self.max_events} events")

    def _ready(self, eng: _Engine) -> bool:
        if eng.busy or eng.done:
            return False
        ins = eng.instrs[eng.pc]
        if "control" in ins.spec.traits:
            return False  # run by _barrier, with the core's other engines
        return ins.wait_sem is None or self.cores[eng.core].sems[ins.wait_sem] >= ins.wait_value

    def _where(self, eng: _Engine, ins: Instr) -> str:
        return f"core {eng.core} {eng.name}[{eng.pc}] {ins.opcode} (inst_id {ins.inst_id})"

    def _execute(self, eng: _Engine, ins: Instr) -> bool | None:
        if self.timing_only and "control" not in ins.spec.traits:
            return None  # registers and branches still run: they decide what the timeline executes
        executor = EXECUTORS.get(ins.opcode)
        if executor is None:
            raise SimulationError(f"{self._where(eng, ins)}: the simulator has no executor for {ins.opcode}")
        try:
            return executor(self.cores[eng.core], ins)
        except SimulationError as e:
            raise SimulationError(f"{self._where(eng, ins)}: {e}") from e

    def _cost(self, eng: _Engine, ins: Instr) -> float:
        try:
            return instr_ns(ins, self.target)
        except ValueError as e:
            raise SimulationError(f"{self._where(eng, ins)}: {e}") from None

    def _issue(self, eng: _Engine) -> None:
        ins = eng.instrs[eng.pc]
        if ins.opcode == "SENDRECV":  # the engine waits for the other cores of its pipe (_meet)
            self._post(eng.core, ("SENDRECV", int(_value(ins, "pipe_id"))), [eng], ins)
            return
        if ins.opcode in COLLECTIVE_OPCODES:  # a DMA whose transfer waits for its replica group (_collective)
            self._trigger_collective(eng, ins)
            return
        self._execute(eng, ins)
        lane = self.lanes[(eng.core, eng.name)]
        start = lane.ready_at(ins, self.now)  # after what this engine wrote and ins reads is readable
        dur = self._occupancy(eng, ins, start)
        start = self._claim_ports(eng, ins, start, dur)
        eng.pc += 1
        eng.busy = True
        self._record(eng.core, eng.name, ins, start, dur)
        self._at(start + dur, partial(self._finish, eng, None))
        if "dma" in ins.spec.traits:  # SP only issues it; the transfer runs on its queue
            self._start_transfer(eng.core, ins, start + dur)
            return
        readable = start + dur + self.latency[eng.name]
        lane.wrote(ins, readable)
        if ins.signal_sem is not None:
            self.signals_in_flight[eng.core] += 1
            self._at(readable, partial(self._signal_later, eng.core, ins.signal_sem))

    def _claim_ports(self, eng: _Engine, ins: Instr, start: float, dur: float) -> float:
        """The start of ``ins`` once the shared ports it needs are free (a wait is booked in the profile)."""
        ports = shared_ports(ins, self.target)
        if not ports:
            return start
        began, blocker = self.ports[eng.core].claim(ports, eng.name, start, dur)
        if blocker is not None:
            self.profile.port_waits.append(PortWait(eng.core, eng.name, *blocker, ins.inst_id, start, began - start))
        return began

    def _occupancy(self, eng: _Engine, ins: Instr, start: float) -> float:
        """How long ``ins`` holds its engine from ``start``: the calibrated occupancy, slowed while TensorE is
        throttled (gen3+)."""
        try:
            dur = occupancy_ns(ins, self.target)
        except ValueError as e:
            raise SimulationError(f"{self._where(eng, ins)}: {e}") from None
        if eng.name == "pe" and self.throttles is not None:
            throttle = self.throttles[eng.core]
            dur /= throttle.rate(start)
            throttle.ran(start, start + dur)
        return dur

    def _signal_later(self, core: int, signal: int) -> None:
        self.signals_in_flight[core] -= 1
        self._signal(core, signal)

    def _barrier(self, core: int) -> None:
        """When every engine of ``core`` waits at a control instruction and no DMA is in flight, run it once (the
        engines hold equal copies of the registers), reset the semaphores and move every engine on: past it, or
        to the partner of a taken branch."""
        engines = [e for e in self.engines if e.core == core]
        if self.cores[core].dma_in_flight or self.signals_in_flight[core] or \
                not all(e.at_barrier and e.meeting is None for e in engines):
            return
        lead = engines[0]
        ins = lead.instrs[lead.pc]
        for e in engines[1:]:
            other = e.instrs[e.pc]
            if (other.opcode, other.inst_id) != (ins.opcode, ins.inst_id):
                raise SimulationError(f"{self._where(e, other)} and {self._where(lead, ins)} meet at one barrier: "
                                      "every engine must reach the same control instructions")  # fmt: skip
        if ins.opcode == "CORE_BARRIER":  # the core, idle, now waits for the barrier's other cores (_meet)
            self._post(core, ("CORE_BARRIER",), engines, ins)
            return
        self._release(core, engines, ins)

    def _release(self, core: int, engines: list[_Engine], ins: Instr) -> None:
        """Run a control instruction on ``core`` whose engines all wait at it: once (the engines hold equal copies
        of the registers); the semaphores restart from zero; every engine moves on after the instruction's cost."""
        lead = engines[0]
        taken = self._execute(lead, ins)
        self.cores[core].sems = [0] * NUM_SEMAPHORES
        for e in engines:
            dur = self._cost(e, ins)
            self._record(e.core, e.name, e.instrs[e.pc], self.now, dur)
            e.pc = e.partner[e.pc] + 1 if taken else e.pc + 1
            e.busy = True
            self._at(self.now + dur, partial(self._finish, e, None))

    # -- the LNC=2 pair -------------------------------------------------------------------------------------
    def _post(self, core: int, what: tuple, engines: list[_Engine], ins: Instr) -> None:
        """``core`` arrives at its next meeting of kind ``what`` (its engines wait there); complete the meeting if
        every core it needs has arrived too."""
        k = self.arrived.get((core, what), 0)
        self.arrived[(core, what)] = k + 1
        key = (what, k)
        posts = self.meetings.setdefault(key, {})
        posts[core] = (engines, ins)
        for e in engines:
            e.busy, e.meeting = e.busy or what[0] == "SENDRECV", key
        members = self._members(key, core)
        if members is not None:
            self._meet(key, members)

    def _peers(self, core: int, ins: Instr) -> tuple[int, ...]:
        """The cores ``core``'s instruction names: a sendrecv's two ranks, a barrier's cores (of its own rank), a
        collective's replica group."""
        if ins.opcode in COLLECTIVE_OPCODES:
            return _cc.peers(self.cores, core, ins)
        if ins.opcode == "SENDRECV":
            peers: tuple[int, ...] = (int(_value(ins, "send_to_rank")), int(_value(ins, "recv_from_rank")))
        else:
            peers = mask_cores(int(_value(ins, "core_mask")))
            if self.cores[core].index not in peers:
                raise SimulationError(f"core {core} CORE_BARRIER (inst_id {ins.inst_id}) names cores {peers}, "
                                      "not its own")  # fmt: skip
        base = core - self.cores[core].index  # the LNC pair of core's own rank (0 unless several ranks run)
        peers = tuple(base + p for p in peers)
        for p in peers:
            if p >= len(self.cores):
                raise SimulationError(f"core {core} {ins.opcode} (inst_id {ins.inst_id}) names core {p}, but the "
                                      f"NEFF has {len(self.cores)} core(s)")  # fmt: skip
        return peers

    def _members(self, key: tuple, core: int) -> set[int] | None:
        """Every core of the meeting ``core`` arrived at, once all of them have arrived (else None)."""
        posts = self.meetings[key]
        members, todo = set(), [core]
        while todo:
            c = todo.pop()
            if c in members:
                continue
            if c not in posts:
                return None
            members.add(c)
            todo.extend(self._peers(c, posts[c][1]))
        return members

    def _meet(self, key: tuple, members: set[int]) -> None:
        """Every core of the meeting has arrived: exchange the sendrecv tiles, or release the barrier."""
        if key[0][0] == "COLLECTIVE":
            self._collective(key, members)
            return
        posts = self.meetings[key]
        what, k = key
        first = posts[min(members)][1]
        for c in sorted(members):
            ins = posts[c][1]
            if ins.opcode == "SENDRECV":
                to = c - self.cores[c].index + int(_value(ins, "send_to_rank"))
                if int(_value(posts[to][1], "recv_from_rank")) != self.cores[c].index:
                    raise SimulationError(f"core {c} sends to core {to} on pipe {what[1]} (exchange #{k}), but core "
                                          f"{to} receives from core {int(_value(posts[to][1], 'recv_from_rank'))}")
            elif ins.imm("core_mask") != first.imm("core_mask"):
                raise SimulationError(f"CORE_BARRIER #{k}: core {min(members)} names cores "
                                      f"{self._peers(min(members), first)}, core {c} names {self._peers(c, ins)}")
        if what[0] == "SENDRECV":
            self._exchange(what[1], {c: posts[c] for c in members})
        else:
            for c in sorted(members):
                self._release(c, *posts[c])
        for c in members:
            for e in posts.pop(c)[0]:
                e.meeting = None
        if not posts:
            del self.meetings[key]

    def _trigger_collective(self, eng: _Engine, ins: Instr) -> None:
        """SP triggers a collective like a DMA and goes on; the collective is in flight on the core (barriers wait
        for it) and posts to its group's meeting when the trigger is done (_collective runs it)."""
        lane = self.lanes[(eng.core, eng.name)]
        start = lane.ready_at(ins, self.now)
        dur = self._occupancy(eng, ins, start)
        eng.pc += 1
        eng.busy = True
        self._record(eng.core, eng.name, ins, start, dur)
        self._at(start + dur, partial(self._finish, eng, None))
        self.cores[eng.core].dma_in_flight += 1
        key = ("COLLECTIVE", self.cores[eng.core].index)
        self._at(start + dur, partial(self._post, eng.core, key, [], ins))

    def _collective(self, key: tuple, members: set[int]) -> None:
        """Every member of a replica group has triggered its collective: apply it (runtime/collectives.py); each
        member's transfer takes the collective's cost on its queue, then signals like a DMA landing."""
        posts = self.meetings[key]
        group = {c: posts.pop(c)[1] for c in sorted(members)}
        if not posts:
            del self.meetings[key]
        _cc.meet(self.cores, group, key[1], self.timing_only)
        dur = max(_cc.transfer_ns(ins, self.target) for ins in group.values())
        for c, ins in group.items():
            self._record(c, f"q{ins.imm('queue')}", ins, self.now, dur)
            self._at(self.now + dur, partial(self._collective_done, c, ins.signal_sem))

    def _collective_done(self, core: int, signal: int | None) -> None:
        self.cores[core].dma_in_flight -= 1
        self._signal(core, signal)

    def _exchange(self, pipe: int, posts: dict[int, tuple[list[_Engine], Instr]]) -> None:
        """Each member's src goes to the dst of the core it sends to, all at once: every src is read before any
        dst is written. The group completes together, after the slowest member's transfer."""
        for c, (_, ins) in posts.items():
            if not self.timing_only:
                self.cores[c].outbox[pipe] = _view(self.cores[c], ins, "src").raw().copy()
        try:
            for c, ([eng], ins) in posts.items():
                self._execute(eng, ins)
        finally:
            for c in posts:
                self.cores[c].outbox.pop(pipe, None)
        dur = max(self._cost(eng, ins) for [eng], ins in posts.values())
        for c, ([eng], ins) in posts.items():
            self._record(c, eng.name, ins, self.now, dur)
            eng.pc += 1
            self._at(self.now + dur, partial(self._finish, eng, ins.signal_sem))

    def _meeting_line(self, key: tuple, core: int, ins: Instr) -> str:
        (what, *pipe), k = key
        if what == "COLLECTIVE":
            return _cc.meeting_line(self.cores, self.engines, self.meetings[key], k, core, ins)
        at = f"sendrecv #{k} on pipe {pipe[0]}" if what == "SENDRECV" else f"core_barrier #{k}"
        missing = [p for p in self._peers(core, ins) if p not in self.meetings[key]]
        waits = []
        for p in missing:
            engines = [e for e in self.engines if e.core == p]
            state = "has finished its streams" if all(e.done for e in engines) else "is stuck elsewhere"
            waits.append(f"core {p}, which {state} without reaching its {at}")
        return f"  core {core} {ins.opcode} (inst_id {ins.inst_id}) waits at its {at} for " + "; ".join(waits or ["the cores its partners wait for"])

    def _meeting_report(self) -> list[str]:
        """A line per core waiting at an LNC meeting (sendrecv, core_barrier) for a core that never came."""
        return [self._meeting_line(key, core, ins) for key, posts in self.meetings.items()
                for core, (_, ins) in sorted(posts.items())]  # fmt: skip

    def _finish(self, eng: _Engine, signal: int | None) -> None:
        eng.busy = False
        self._signal(eng.core, signal)

    def _signal(self, core: int, signal: int | None) -> None:
        if signal is not None:
            self.cores[core].sems[signal] += 1

    def _start_transfer(self, core: int, ins: Instr, ready: float) -> None:
        queue = ins.imm("queue")
        if queue >= NUM_DMA_QUEUES:
            raise SimulationError(f"core {core} {ins.opcode} (inst_id {ins.inst_id}) on bad queue {queue}")
        self.cores[core].dma_in_flight += 1
        self.dma[core].submit(ins, queue, ready)

    def _land(self, core: int, transfer: Transfer, start: float, end: float) -> None:
        """A transfer's last byte landed: its data phase goes on its queue's track, and it signals."""
        ins = transfer.ins
        self._record(core, f"q{ins.imm('queue')}", ins, start, end - start)
        self.cores[core].dma_in_flight -= 1
        self._signal(core, ins.signal_sem)

    def _record(self, core: int, track: str, ins: Instr, start: float, dur: float) -> None:
        self.profile.events.append(ProfileEvent(core, track, ins.opcode, ins.inst_id, start, dur))
        self.profile.total_ns = max(self.profile.total_ns, start + dur)

    def _deadlock_report(self, blocked: list[_Engine]) -> str:
        """One line (errors print as one line): what every blocked engine waits for, then the semaphores."""
        lines = [f"simulation deadlock at {self.now:.1f} ns: no engine can progress and nothing is in flight"]
        lines += self._meeting_report()
        for eng in blocked:
            if eng.meeting is not None:
                continue
            ins = eng.instrs[eng.pc]
            have = self.cores[eng.core].sems[ins.wait_sem] if ins.wait_sem is not None else "-"
            wait = sem_name(ins.wait_sem) if ins.wait_sem is not None else "nothing"
            lines.append(f"core {eng.core} {eng.name}[{eng.pc}] {ins.opcode} (inst_id {ins.inst_id}) waits "
                         f"{wait} >= {ins.wait_value}, current value {have}")  # fmt: skip
        for core in sorted({e.core for e in blocked if e.meeting is None}):
            values = ", ".join(f"{sem_name(i)}={v}" for i, v in enumerate(self.cores[core].sems) if v)
            lines.append(f"core {core} semaphores: {values or 'all zero'}")
        return lines[0] + "".join((": " if i == 0 else "; ") + line.strip() for i, line in enumerate(lines[1:]))


# ---------------------------------------------------------------------------------------------------------------
# entry points


def _input_buffer(var: Variable, value: object) -> np.ndarray:
    arr = np.asarray(value)
    if arr.shape != var.shape:
        raise ValueError(f"input '{var.name}' has shape {arr.shape}, expected {var.shape}")
    return np.ascontiguousarray(arr.astype(DTYPES[var.dtype])).reshape(-1).view(np.uint8).copy()


def _init_hbm(neff: Neff, inputs: Mapping[str, object], hbm_bytes: int,
              timing_only: bool = False) -> dict[int, np.ndarray]:  # fmt: skip
    total = sum(v.size for v in neff.variables)
    if total > hbm_bytes:  # before any buffer is allocated
        raise SimulationError(f"the NEFF's variables need {total} bytes, more than the {hbm_bytes} bytes of HBM")
    names = {v.name for v in neff.variables if v.kind == "input"}
    unknown = sorted(set(inputs) - names)
    if unknown:
        raise ValueError(f"unknown inputs {unknown}; the kernel takes {sorted(names)}")
    hbm: dict[int, np.ndarray] = {}
    for var in neff.variables:
        if timing_only and var.name not in inputs:
            # Zeros (pages the OS maps lazily): only registers loaded from memory read them; nothing else runs.
            hbm[var.var_id] = np.zeros(var.size, np.uint8)
        elif var.kind == "input":
            if var.name not in inputs:
                raise ValueError(f"missing input '{var.name}' (shape {var.shape}, dtype {var.dtype})")
            hbm[var.var_id] = _input_buffer(var, inputs[var.name])
        elif var.data is not None:  # a file variable (a constant): its bytes, loaded before the kernel starts
            hbm[var.var_id] = np.frombuffer(var.data, np.uint8).copy()
        else:
            hbm[var.var_id] = np.full(var.size, _FILL_BYTE, np.uint8)
    return hbm


def simulate(neff: Neff, inputs: Mapping[str, object], *, target: str = "gen3",
             max_events: int = DEFAULT_MAX_EVENTS, timing_only: bool = False,
             on_print: Callable[[str], None] = print_line) -> RunResult:  # fmt: skip
    """Run ``neff`` on numpy copies of ``inputs``; returns the output variables and the timing profile.

    ``timing_only``: run the timeline without numerics (for kernels too large to compute on a CPU). Inputs are
    optional (missing ones read as zeros); data-path instructions and DMA transfers take their time but move no
    data, so the outputs are meaningless (zeros, or the inputs given). Registers and branches still execute: a loop
    whose trip count is loaded from memory sees the inputs given, or zeros (and DEBUG_PRINT prints nothing).
    ``on_print`` receives each line DEBUG_PRINT prints (default: stdout)."""
    tgt = get_target(target)
    hbm = _init_hbm(neff, inputs, tgt.hbm_bytes, timing_only)
    cores = [_Core(i, tgt, hbm) for i in range(len(neff.subgraphs))]
    # A timing-only run moves no data: every output would look unwritten, so nothing is tracked.
    written = {} if timing_only else {v.var_id: np.zeros(v.size, np.uint8) for v in neff.variables
                                      if v.kind == "output"}  # fmt: skip
    for core in cores:
        core.pair = cores  # the LNC=2 pair reads its partner's sent tiles
        core.strings, core.on_print = tuple(neff.strings), on_print
        core.written = written
    profile = _Scheduler(neff, cores, tgt, max_events, timing_only).run()
    profile.sources = {(c, i): src for c, sg in enumerate(neff.subgraphs) for i, src in sg.sources.items()}
    final = {
        v.name: hbm[v.var_id].view(DTYPES[v.dtype]).reshape(v.shape).copy()
        for v in neff.variables if v.kind in ("output", "input")
    }  # fmt: skip
    inputs = {v.name: final.pop(v.name) for v in neff.variables if v.kind == "input"}
    elements = {v.name: written[v.var_id].reshape(-1, DTYPES[v.dtype].itemsize).all(axis=1).reshape(v.shape)
                for v in neff.variables if v.var_id in written}  # fmt: skip
    return RunResult(final, profile, inputs, elements)


def unwritten_outputs(result: RunResult, names: Mapping[str, str] | None = None) -> list[str]:
    """One line per output with elements no instruction wrote (they hold the simulator's NaN fill): ``output 'out'
    rows 256..511 were never written`` when whole rows (along the first dim) are missing, else how many elements
    and where. Empty when every output was written whole, or the run tracked nothing (timing only). ``names``: what
    to call an output variable in the message (the kernel's own name for it)."""
    names = names or {}
    return [line for name, mask in result.written.items()
            if (line := _coverage_line(names.get(name, name), mask)) is not None]  # fmt: skip


def _ranges(indices: np.ndarray, most: int = 3) -> str:
    """``256..511``, ``0..3, 8..11``: the runs of sorted indices, at most ``most`` of them then ``...``."""
    runs: list[str] = []
    breaks = np.flatnonzero(np.diff(indices) != 1)
    starts = np.concatenate(([0], breaks + 1))
    ends = np.concatenate((breaks, [len(indices) - 1]))
    for lo, hi in zip(starts, ends):
        if len(runs) == most:
            runs.append("...")
            break
        a, b = int(indices[lo]), int(indices[hi])
        runs.append(f"{a}..{b}" if b > a else f"{a}")
    return ", ".join(runs)


def _coverage_line(name: str, written: np.ndarray) -> str | None:
    missing = ~written
    count = int(missing.sum())
    if count == 0:
        return None
    if missing.ndim == 0:
        return f"output '{name}' was never written"
    if missing.ndim == 1:
        return f"output '{name}' elements {_ranges(np.flatnonzero(missing))} were never written"
    per_row = missing.reshape(missing.shape[0], -1)
    rows = np.flatnonzero(per_row.any(axis=1))
    if per_row[rows].all():
        said = "row {} was" if len(rows) == 1 else "rows {} were"
        return f"output '{name}' {said.format(_ranges(rows))} never written"
    where = f"rows {_ranges(rows)}"
    if missing.ndim == 2:  # the columns too, when the hole is a box
        cols = np.flatnonzero(missing.any(axis=0))
        if missing[np.ix_(rows, cols)].all():
            where += f" (columns {_ranges(cols)})"
    return f"output '{name}' has {count} of {missing.size} elements never written, in {where}"


def simulate_in_order(neff: Neff, inputs: Mapping[str, object], *, target: str = "gen3",
                      max_steps: int = DEFAULT_MAX_EVENTS,
                      on_print: Callable[[str], None] = print_line) -> dict[str, np.ndarray]:  # fmt: skip
    """The reference semantics of a NEFF: each core's instructions one at a time in instruction-id order (the
    program order of the BIR they came from), with the same executors and initial state as :func:`simulate` but no
    engines, queues, semaphores or timing; cores run one after the other. The ``bir-sim`` pass checks that the
    concurrent simulation agrees with it. Runtime loops are followed (a taken branch goes past its partner); the
    instructions that make cores meet (``sendrecv``, ``core_barrier``) have no sequential meaning here and raise."""
    tgt = get_target(target)
    hbm = _init_hbm(neff, inputs, tgt.hbm_bytes)
    cores = [_Core(i, tgt, hbm) for i in range(len(neff.subgraphs))]
    for core in cores:
        core.pair = cores
        core.strings, core.on_print = tuple(neff.strings), on_print
    for core, sg in zip(cores, neff.subgraphs):
        by_id: dict[int, Instr] = {}
        for instrs in sg.engines.values():
            for ins in instrs:
                if ins.opcode != "SEM_WAIT":  # waits are ordering only; every copy of a control instruction is one
                    by_id.setdefault(ins.inst_id, ins)
        order = [by_id[i] for i in sorted(by_id)]
        partner: dict[int, int] = {}
        opened: list[int] = []
        for i, ins in enumerate(order):
            if ins.opcode in ("SENDRECV", "CORE_BARRIER"):
                raise SimulationError(f"in-order execution cannot run {ins.opcode} (inst_id {ins.inst_id})")
            if ins.opcode in LOOP_OPCODE_PAIRS:  # runtime and counted (rolled) loops, nested
                opened.append(i)
            elif ins.opcode in _LOOP_CLOSERS:
                if not opened or order[opened[-1]].opcode != _LOOP_CLOSERS[ins.opcode]:
                    raise SimulationError(f"{ins.opcode} (inst_id {ins.inst_id}) without a {_LOOP_CLOSERS[ins.opcode]}")
                begin = opened.pop()
                partner[begin], partner[i] = i, begin
        pc = steps = 0
        while pc < len(order):
            ins = order[pc]
            executor = EXECUTORS.get(ins.opcode)
            if executor is None:
                raise SimulationError(f"core {core.index} {ins.opcode} (inst_id {ins.inst_id}): no executor")
            taken = executor(core, ins)
            pc = partner[pc] + 1 if taken and pc in partner else pc + 1
            steps += 1
            if steps > max_steps:
                raise SimulationError(f"in-order execution ran more than {max_steps} instructions")
    return {v.name: hbm[v.var_id].view(DTYPES[v.dtype]).reshape(v.shape).copy()
            for v in neff.variables if v.kind == "output"}  # fmt: skip


def run_neff_bytes(data: bytes, inputs: Mapping[str, object], **kwargs: object) -> RunResult:
    """Parse a serialised NEFF and :func:`simulate` it."""
    return simulate(read_neff(data), inputs, **kwargs)  # type: ignore[arg-type]


# The collectives between ranks: their meetings' effects and the rank registers' executors (imported last: it
# builds on this module).
from nkic.runtime import collectives as _cc  # noqa: E402
