"""The event-driven scheduler: engines run their streams in order, an instruction starts when its engine is
free and its semaphore wait holds, DMA transfers run on their queues, control instructions run at a per-core
barrier, and the LNC pair's and the collectives' cores meet. Timing is ``runtime/timeline.py``'s model.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from functools import partial

# The executors of every instruction family register themselves in EXECUTORS as they load (runtime/executors.py);
# the collectives' module adds the rank registers' executors and the meetings' effects.
from nkic.runtime import collectives as _cc
from nkic.runtime import exec_control, exec_dma, exec_index, exec_pe, exec_random, exec_vector  # noqa: F401
from nkic.runtime.errors import SimulationDeadlock, SimulationError
from nkic.runtime.executors import EXECUTORS, _value, _view
from nkic.runtime.neff import Neff
from nkic.runtime.profile import PortWait, Profile, ProfileEvent
from nkic.runtime.state import _Core, _Engine
from nkic.runtime.timeline import DmaCore, EngineLane, PeThrottle, SharedPorts, Transfer
from nkic.target.collectives import COLLECTIVE_OPCODES
from nkic.target.costs import (
    dependent_latency_ns,
    instr_ns,
    neff_launch_ns,
    neff_teardown_ns,
    occupancy_ns,
    pe_throttles,
    shared_ports,
)
from nkic.target.instructions import mask_cores
from nkic.target.isa import Instr
from nkic.target.machine import ENGINE_NAMES, NUM_DMA_QUEUES, NUM_SEMAPHORES, Target, sem_name


# The kinds of meeting (the first member of a meeting key): a pipe's sendrecvs, a core_barrier, a collective.
_PIPE, _BARRIER, _COLLECTIVE = "SENDRECV", "CORE_BARRIER", "COLLECTIVE"


def _pipe_exchange(ins: Instr) -> bool:
    """Whether ``ins`` makes cores meet from one engine (sendrecv), not with all the core's engines at its barrier
    (core_barrier, a control instruction): both are declared with the trait "meets" (target/instructions.py)."""
    traits = ins.spec.traits
    return "meets" in traits and "control" not in traits


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
        self.handled = 0
        self.profile = Profile(target.name, len(cores))
        # The NEFF execution's launch (the engines' first instruction fetch) and teardown (the completion write):
        # no engine issues before the launch ends, and the run ends a teardown after its last event.
        self.profile.launch_ns, self.profile.teardown_ns = neff_launch_ns(target), neff_teardown_ns(target)
        self.now = self.profile.launch_ns
        # The LNC=2 pair's meetings. A core's k-th SENDRECV of a pipe meets the other cores' k-th of that pipe, its
        # k-th CORE_BARRIER their k-th barrier: (what, k) -> {core: (engines, instruction)}, what being
        # (_PIPE, pipe) or (_BARRIER,). arrived[(core, what)] counts a core's arrivals.
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
        self.profile.total_ns = max(self.profile.total_ns, self.profile.launch_ns) + self.profile.teardown_ns
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
        core = self.cores[eng.core]
        core.executing = ins
        try:
            return executor(core, ins)
        except SimulationError as e:
            raise SimulationError(f"{self._where(eng, ins)}: {e}") from e

    def _cost(self, eng: _Engine, ins: Instr) -> float:
        try:
            return instr_ns(ins, self.target)
        except ValueError as e:
            raise SimulationError(f"{self._where(eng, ins)}: {e}") from None

    def _issue(self, eng: _Engine) -> None:
        ins = eng.instrs[eng.pc]
        if _pipe_exchange(ins):  # the engine waits for the other cores of its pipe (_meet)
            self._post(eng.core, (_PIPE, int(_value(ins, "pipe_id"))), [eng], ins)
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
        if "meets" in ins.spec.traits:  # core_barrier: the core, idle, now waits for its other cores (_meet)
            self._post(core, (_BARRIER,), engines, ins)
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
            e.busy, e.meeting = e.busy or what[0] == _PIPE, key
        members = self._members(key, core)
        if members is not None:
            self._meet(key, members)

    def _peers(self, core: int, ins: Instr) -> tuple[int, ...]:
        """The cores ``core``'s instruction names: a sendrecv's two ranks, a barrier's cores (of its own rank), a
        collective's replica group."""
        if ins.opcode in COLLECTIVE_OPCODES:
            return _cc.peers(self.cores, core, ins)
        if _pipe_exchange(ins):
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
        if key[0][0] == _COLLECTIVE:
            self._collective(key, members)
            return
        posts = self.meetings[key]
        what, k = key
        first = posts[min(members)][1]
        for c in sorted(members):
            ins = posts[c][1]
            if _pipe_exchange(ins):
                to = c - self.cores[c].index + int(_value(ins, "send_to_rank"))
                if int(_value(posts[to][1], "recv_from_rank")) != self.cores[c].index:
                    raise SimulationError(f"core {c} sends to core {to} on pipe {what[1]} (exchange #{k}), but core "
                                          f"{to} receives from core {int(_value(posts[to][1], 'recv_from_rank'))}")
            elif ins.imm("core_mask") != first.imm("core_mask"):
                raise SimulationError(f"CORE_BARRIER #{k}: core {min(members)} names cores "
                                      f"{self._peers(min(members), first)}, core {c} names {self._peers(c, ins)}")
        if what[0] == _PIPE:
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
        key = (_COLLECTIVE, self.cores[eng.core].index)
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
        if what == _COLLECTIVE:
            return _cc.meeting_line(self.cores, self.engines, self.meetings[key], k, core, ins)
        at = f"sendrecv #{k} on pipe {pipe[0]}" if what == _PIPE else f"core_barrier #{k}"
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
