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

This module is the entry point. The machine state is ``runtime/state.py``, the event-driven scheduler
``runtime/scheduler.py``, the profile ``runtime/profile.py``, and the instructions' semantics one ``@execute``
executor per opcode in the ``runtime/exec_*.py`` family modules, registered in ``runtime/executors.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from nkic.runtime.errors import SimulationDeadlock, SimulationError
from nkic.runtime.executors import EXECUTORS
from nkic.runtime.neff import Neff, read_neff
from nkic.runtime.profile import PortWait, Profile, ProfileEvent, RunResult
from nkic.runtime.scheduler import _Scheduler
from nkic.runtime.state import _Core, _init_hbm, print_line
from nkic.target.instructions import LOOP_OPCODE_PAIRS
from nkic.target.isa import Instr
from nkic.target.machine import DEFAULT_TARGET, NUM_PARTITIONS, get_target
from nkic.target.vocab import DTYPES

__all__ = [
    "simulate", "run_neff_bytes", "RunResult", "Profile", "ProfileEvent", "SimulationError", "SimulationDeadlock",
    "NUM_PARTITIONS", "DEFAULT_MAX_EVENTS", "PortWait",
]  # fmt: skip


DEFAULT_MAX_EVENTS = 10_000_000
_LOOP_CLOSERS = {end: begin for begin, end in LOOP_OPCODE_PAIRS.items()}  # closer -> its opener


def simulate(neff: Neff, inputs: Mapping[str, object], *, target: str = DEFAULT_TARGET,
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


def simulate_in_order(neff: Neff, inputs: Mapping[str, object], *, target: str = DEFAULT_TARGET,
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
                if "wait" not in ins.spec.traits:  # waits are ordering only; every copy of a control instruction is one
                    by_id.setdefault(ins.inst_id, ins)
        order = [by_id[i] for i in sorted(by_id)]
        partner: dict[int, int] = {}
        opened: list[int] = []
        for i, ins in enumerate(order):
            if "meets" in ins.spec.traits:  # sendrecv, core_barrier
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
            core.executing = ins  # a tensor indirection operand reads its offsets from another slot of it
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
