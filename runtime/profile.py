"""A simulation's timing profile: one event per instruction or transfer, port waits, and the run's result.

The scheduler (``runtime/scheduler.py``) records events as it runs; ``Profile`` sums them per engine and per NKI
source line and writes them as a Chrome trace.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

from nkic.support import safeio
from nkic.target.costs import PORT_NAMES
from nkic.target.machine import ENGINES, ENGINE_NAMES, QUEUE_SEM_BASE, REFERENCE_CLOCK_GHZ


_TRACK_LABELS = {e.name: e.label for e in ENGINES}


_ENGINE_IDS = {e.name: e.code for e in ENGINES}


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
    # the NEFF execution's start before any engine issues, and its end after the last event (costs.neff_launch_ns,
    # costs.neff_teardown_ns): both are in total_ns
    launch_ns: float = 0.0
    teardown_ns: float = 0.0

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
                 f"{REFERENCE_CLOCK_GHZ} GHz, {self.num_cores} core(s), launch {self.launch_ns:.1f} ns + teardown "
                 f"{self.teardown_ns:.1f} ns included",
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
        """Write the Chrome trace JSON atomically, never through a symbolic link (``nkic.support.safeio``)."""
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
