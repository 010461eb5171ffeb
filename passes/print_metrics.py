"""``print-metrics``: a static report of each BIR function, printed to stdout; the IR is left unchanged.

Per engine (DMA transfers per queue once ``insert-semaphores`` assigned them, else as ``dma``): ISA instructions
(the ``sem_wait`` that carries each wait beyond an instruction's first included) and busy time under the
simulator's model (``nkic.target.costs``): an engine instruction's ``occupancy_ns`` (MIN_II floor, VectorE fast
modes), a transfer's data phase alone on its queue (``dma_transfer``); only a run adds TensorE throttling and the
queues sharing the core's bandwidth. The critical path is the longest chain of dependency edges weighted by those
durations plus the same overheads as the simulator: a transfer's trigger and its first byte's DMA latency, a
producer's dependent latency before its results are readable, and the NEFF execution's launch and teardown: no
schedule can finish sooner, whatever the engine contention; beside it, the busiest engine's total (plus launch and
teardown), the other lower bound. "As scheduled" is the longest chain once
each engine's and DMA queue's program order counts as edges too. "Simulated" is the simulator's own timeline run on
this schedule (a copy of the module lowered with ``bir-to-isa``, timing only): the number ``nkic run`` reports for the
NEFF, once ``insert-semaphores`` placed the waits (before, the line says why it is missing). Semaphore waits are
counted once ``insert-semaphores`` ran. SBUF and PSUM high-water marks are the highest byte per partition any placed
tensor reaches (after ``allocate-memory``), against the target's capacity.

The report is static: each instruction counts once, so a runtime loop's body (between ``loop_begin`` and
``loop_end``, whose trip count is known only at run time) counts once, and the report says so.

Runs anywhere after ``assign-engines`` (it needs engines and unrolled BIR); ``nkic compile --metrics`` runs it just
before ``bir-to-isa``. ``metrics()`` returns the numbers for tests and tools.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.passes.targeting import target_of
from nkic.dialects import bir
from nkic.dialects.traits import IsControl, IsDma
from nkic.passes.bir_to_isa import BirToIsaPass
from nkic.passes.lowering import cost_record
from nkic.passes.neff_assembly import isa_module_to_neff
from nkic.passes.spill import SpillStats, spill_stats
from nkic.target.costs import (
    DMA_LATENCY_NS,
    dependent_latency_ns,
    dma_transfer,
    instr_ns,
    neff_launch_ns,
    neff_teardown_ns,
    occupancy_ns,
)
from nkic.target.isa import Instr
from nkic.target.machine import ENGINE_NAMES, Target
from nkic.runtime.simulator import simulate
from nkic.target.vocab import dtype_size


@dataclass
class Metrics:
    name: str
    instructions: int = 0
    edges: int = 0
    waits: int = 0
    control: int = 0  # register / runtime-loop instructions (barriers)
    counts: dict[str, int] = field(default_factory=dict)  # track (engine or DMA queue) -> instructions
    busy_ns: dict[str, float] = field(default_factory=dict)
    critical_ns: float = 0.0
    critical_insts: int = 0
    critical_by_track: dict[str, float] = field(default_factory=dict)  # the critical path's time per track
    in_order_ns: float = 0.0  # the longest chain once each engine's and queue's program order counts too
    overhead_ns: float = 0.0  # the NEFF execution's launch and teardown, in critical_ns and in_order_ns
    high_water: dict[str, int] = field(default_factory=dict)  # memory -> bytes per partition
    capacity: dict[str, int] = field(default_factory=dict)
    spills: SpillStats = field(default_factory=SpillStats)  # allocate-memory's spills through HBM (passes/spill.py)
    simulated_ns: float | None = None  # the simulator's timeline on the lowered module (None: not lowerable yet)
    not_simulated: str = ""  # why simulated_ns is None


def _track(inst: bir.BirInst) -> str:
    if inst.has_trait(IsDma):
        return f"q{inst.queue.value.data}" if inst.queue is not None else "dma"
    return inst.engine.data


def _high_water(fn: bir.FunctionOp) -> dict[str, int]:
    out = {"sbuf": 0, "psum": 0}
    for loc in fn.memlocs().values():
        if loc.mem not in out or loc.addr is None:
            continue
        size = dtype_size(loc.dtype.data)
        for d in loc.dims[1:]:
            size *= d
        out[loc.mem] = max(out[loc.mem], loc.addr[1] + size)
    return out


def _busy_ns(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], target: Target) -> float:
    """What the simulator books on the instruction's track: an engine's occupancy, a transfer's data phase (alone on
    its queue: bytes at full efficiency over its engines' rate)."""
    record = cost_record(inst, locs)
    if inst.has_trait(IsDma):
        work, rate = dma_transfer(record, target)
        return work / rate
    return occupancy_ns(record, target)


def _span_ns(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], target: Target) -> float:
    """From the instruction's start to its end as the simulator times it, when nothing else runs: for a transfer,
    the trigger on its issuing engine, the DMA latency before the first byte, then the data phase."""
    if inst.has_trait(IsDma):
        return occupancy_ns(cost_record(inst, locs), target) + DMA_LATENCY_NS + _busy_ns(inst, locs, target)
    return _busy_ns(inst, locs, target)


def _simulate(fn: bir.FunctionOp, target: Target) -> tuple[float | None, str]:
    """The simulator's timing-only run of a lowered copy of ``fn``'s module: (total ns, "") or (None, why not)."""
    module = fn.parent_op()
    if not isinstance(module, ModuleOp):
        return None, "the function is not in a module"
    insts = list(fn.instructions())
    synced = any(i.signal is not None for i in insts) or not any(i.dep_list for i in insts)
    if not synced or any(i.has_trait(IsDma) and i.queue is None for i in insts):
        return None, "the semaphores and DMA queues come from insert-semaphores"
    lowered = module.clone()
    try:
        BirToIsaPass().apply(Context(), lowered)
    except PassFailedException as e:
        return None, f"bir-to-isa: {e}"
    neff = isa_module_to_neff(lowered, fn.sym_name.data)
    return simulate(neff, {}, target=target.name, timing_only=True).profile.total_ns, ""


def metrics(fn: bir.FunctionOp, target: Target, simulate: bool = True) -> Metrics:
    if any(isinstance(o, bir.LoopOp) for o in fn.body.walk()):
        raise PassFailedException("print-metrics needs unrolled BIR (run bir-unroll first)")
    m = Metrics(fn.sym_name.data)
    locs = fn.memlocs()
    for inst in fn.instructions():
        m.instructions += 1
        m.edges += len(inst.dep_list)
        if inst.waits is not None:
            m.waits += len(inst.waits.get_values()) // 2
        if inst.has_trait(IsControl):
            m.control += 1
            continue
        if inst.engine.data not in ENGINE_NAMES:
            raise PassFailedException(f"instruction {inst.inst_id} has no engine (run assign-engines first)")
        track = _track(inst)
        m.counts[track] = m.counts.get(track, 0) + 1
        m.busy_ns[track] = m.busy_ns.get(track, 0.0) + _busy_ns(inst, locs, target)
        extra = max(0, len(inst.waits.get_values()) // 2 - 1) if inst.waits is not None else 0
        if extra:  # bir-to-isa puts the waits beyond the first in sem_wait instructions on the issuing engine
            engine = inst.engine.data
            m.counts[engine] = m.counts.get(engine, 0) + extra
            m.busy_ns[engine] = m.busy_ns.get(engine, 0.0) + extra * instr_ns(Instr("SEM_WAIT", engine), target)
    m.overhead_ns = neff_launch_ns(target) + neff_teardown_ns(target)
    m.critical_ns, m.critical_insts, m.critical_by_track = _critical(fn, locs, target)
    m.critical_ns += m.overhead_ns
    m.in_order_ns = _critical(fn, locs, target, in_order=True)[0] + m.overhead_ns
    if simulate:
        m.simulated_ns, m.not_simulated = _simulate(fn, target)
    m.high_water = _high_water(fn)
    m.capacity = {"sbuf": target.sbuf_bytes_per_partition, "psum": target.psum_bytes_per_partition}
    m.spills = spill_stats(fn)
    return m


def _critical(fn: bir.FunctionOp, locs: dict[str, bir.MemLocOp], target: Target,
              in_order: bool = False) -> tuple[float, int, dict[str, float]]:  # fmt: skip
    """The longest duration-weighted dependency chain: its length in ns, its instructions, its time per track.
    ``in_order`` also chains each track's instructions in program order (engines and DMA queues are in order):
    the estimated run time of the program as scheduled."""
    last_on: dict[str, int] = {}
    finish: dict[int, float] = {}
    readable: dict[int, float] = {}  # finish + the producer engine's dependent latency (a transfer: when it landed)
    via: dict[int, int | None] = {}
    info: dict[int, tuple[str, float]] = {}
    barrier: int | None = None  # the last instruction before the latest control instruction, on the chain
    for inst in fn.instructions():
        i = inst.inst_id
        if inst.has_trait(IsControl):
            if finish:
                barrier = max(finish, key=lambda k: finish[k])
            continue
        dur = _span_ns(inst, locs, target)
        track = _track(inst)
        info[i] = (track, dur)
        best = barrier
        start = finish[barrier] if barrier is not None else 0.0
        # the simulator's waits: a semaphore signals when the producer's results are readable; an in-order engine
        # waits for that only on a flow edge from itself (its own order covers the others)
        preds = [(d, kind == "flow" or info[d][0] != track) for kind, d in inst.dep_list if d in info]
        if in_order and track in last_on:
            preds.append((last_on[track], False))
        last_on[track] = i
        for d, latency in preds:
            ready = readable[d] if latency else finish[d]
            if ready > start:
                start, best = ready, d
        finish[i], via[i] = start + dur, best
        latency = 0.0 if inst.has_trait(IsDma) else dependent_latency_ns(inst.engine.data, target)
        readable[i] = finish[i] + latency
    if not finish:
        return 0.0, 0, {}
    end = max(finish, key=lambda k: finish[k])
    by_track: dict[str, float] = {}
    count = 0
    node: int | None = end
    while node is not None:
        track, dur = info[node]
        by_track[track] = by_track.get(track, 0.0) + dur
        count += 1
        node = via[node]
    return finish[end], count, by_track


def report(m: Metrics) -> str:
    lines = [f"print-metrics @{m.name}: {m.instructions} instructions, {m.edges} dependency edges, "
             f"{m.waits} semaphore waits",
             f"  {'track':<6} {'instrs':>7} {'busy ns':>12} {'critical ns':>12}"]  # fmt: skip
    for track in sorted(m.counts, key=lambda t: (t.startswith(("q", "dma")), t)):
        lines.append(f"  {track:<6} {m.counts[track]:>7} {m.busy_ns[track]:>12.1f} "
                     f"{m.critical_by_track.get(track, 0.0):>12.1f}")  # fmt: skip
    busiest = max(m.busy_ns.items(), key=lambda kv: kv[1], default=("-", 0.0))
    lines.append(f"  critical path: {m.critical_ns:.1f} ns over {m.critical_insts} instructions; busiest track "
                 f"{busiest[0]}: {busiest[1]:.1f} ns; no schedule beats "
                 f"{max(m.critical_ns, busiest[1] + m.overhead_ns):.1f} ns")
    lines.append(f"  as scheduled (edges plus each engine's and queue's program order): {m.in_order_ns:.1f} ns")
    if m.simulated_ns is not None:
        lines.append(f"  simulated (the runtime's timeline on this schedule, as nkic run reports it): "
                     f"{m.simulated_ns:.1f} ns")  # fmt: skip
    elif m.not_simulated:
        lines.append(f"  simulated: not yet ({m.not_simulated})")
    if m.control:
        lines.append(f"  {m.control} control instructions (barriers); a runtime loop's body counts once")
    for mem in ("sbuf", "psum"):
        hw, cap = m.high_water.get(mem, 0), m.capacity.get(mem, 0)
        pct = 100.0 * hw / cap if cap else 0.0
        lines.append(f"  {mem.upper()} high-water: {hw} of {cap} bytes per partition ({pct:.1f}%)")
    if m.spills.stores:
        sp = m.spills
        lines.append(f"  spills: {len(sp.tensors)} SBUF tensors through HBM, {sp.stores} stores + {sp.reloads} "
                     f"reloads, {sp.bytes} bytes ({', '.join(sorted(sp.tensors))})")
    return "\n".join(lines)


@dataclass(frozen=True)
class PrintMetricsPass(ModulePass):
    name = "print-metrics"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        tgt = target_of(op)
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            print(report(metrics(fn, tgt)), file=sys.stdout, flush=True)
