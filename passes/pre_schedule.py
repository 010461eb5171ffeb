"""``pre-schedule``: list scheduling before memory allocation, on the kernel's true dependencies.

``schedule-instructions`` runs after ``allocate-memory``, so tensors that share an address (reused memory) are
already chained by anti and output edges, and it cannot interleave work the allocation serialised. This pass
schedules first: it gives every on-chip tensor without an explicit address a private virtual address (no two
overlap; explicit addresses are kept, so deliberate aliasing stays ordered), computes the dependency edges with
``dependency-analysis``'s own rules (flow/anti/output on bytes, engine state, explicit ``depends_on`` order), runs
``schedule-instructions``' list scheduler on them, and then removes the virtual addresses and the edges. Allocation
then follows the scheduled order, so the live ranges it sees are the ones the engines will have.

Interleaving keeps more tensors live at once, so the scheduler tracks what is live (a tensor from its first
instruction to its last) and starts a new tensor only while SBUF stays under 85% and PSUM under its bank count
(each tile counted as whole banks); when nothing ready fits, the earliest instruction in program order goes.
Functions with runtime loops (control instructions) keep their order. It needs engines (run ``assign-engines``
first; an ``unassigned`` instruction is planned on the first engine its operands allow).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.passes.assign_engines import legal_engines
from nkic.passes.dependency_analysis import analyse
from nkic.dialects.traits import IsControl, IsDma
from nkic.passes.schedule_instructions import _reorder, duration_ns
from nkic.target.machine import TARGETS, Target, get_target

_ALIGN = 512


def _virtual_addresses(fn: bir.FunctionOp) -> list[bir.MemLocOp]:
    """Give each unplaced on-chip memloc a private address above every explicit one; returns the memlocs set."""
    locs = [m for m in fn.memlocs().values() if m.mem in ("sbuf", "psum")]
    top = max((m.addr[1] + m.bytes_per_partition for m in locs if m.addr is not None), default=0)
    placed = []
    for m in locs:
        if m.addr is not None:
            continue
        top = -(-top // _ALIGN) * _ALIGN
        m.properties["address"] = DenseArrayBase.from_list(i64, [0, top])
        top += m.bytes_per_partition
        placed.append(m)
    return placed


SBUF_BUDGET = 0.85  # of SBUF, in bytes live at once: headroom for the allocator's alignment and fragmentation


def _budgets(target: Target) -> dict[str, float]:
    """What may be live at once: SBUF bytes, and PSUM banks (a tile takes whole banks here, to be safe)."""
    return {"sbuf": SBUF_BUDGET * target.sbuf_bytes_per_partition, "psum": float(target.psum_banks)}


def _footprint(m: bir.MemLocOp, target: Target) -> tuple[str, float]:
    if m.mem == "psum":
        return "psum", float(-(-m.bytes_per_partition // target.psum_bank_bytes))
    return "sbuf", float(m.bytes_per_partition)


def _order(insts: list[bir.BirInst], target: Target, num_queues: int) -> list[int]:
    """A list schedule (earliest start first, like ``schedule-instructions``) that never has more on-chip tensors
    live than the budgets allow; when nothing ready fits, the earliest instruction in program order goes."""
    locs = {}
    for inst in insts:
        for name in inst.ref_names:
            locs.setdefault(name, None)
    fn_locs = insts[0].parent_op().memlocs() if insts else {}  # type: ignore[union-attr]
    index = {inst.inst_id: i for i, inst in enumerate(insts)}
    preds = [[index[d] for _, d in inst.dep_list] for inst in insts]
    succs: list[list[int]] = [[] for _ in insts]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    tracked = {n: _footprint(fn_locs[n], target) for n in locs if fn_locs[n].mem in ("sbuf", "psum")}
    uses: dict[str, int] = {}
    for inst in insts:
        for n in set(inst.ref_names) & tracked.keys():
            uses[n] = uses.get(n, 0) + 1
    budget, live = _budgets(target), {"sbuf": 0.0, "psum": 0.0}
    started: set[str] = set()
    waiting = [len(ps) for ps in preds]
    finish = [0.0] * len(insts)
    engine_free: dict[str, float] = {}
    queue_free = [0.0] * num_queues
    ready = {i for i in range(len(insts)) if waiting[i] == 0}
    order: list[int] = []

    names_of = [[n for n in dict.fromkeys(inst.ref_names) if n in tracked] for inst in insts]
    is_dma = [inst.has_trait(IsDma) for inst in insts]
    engine_of = [inst.engine.data for inst in insts]
    data_ready: dict[int, float] = {i: 0.0 for i in ready}

    def growth(i: int) -> dict[str, float]:
        grow = {"sbuf": 0.0, "psum": 0.0}
        for n in names_of[i]:
            if n not in started:
                mem, size = tracked[n]
                grow[mem] += size
        return grow

    def fits(i: int) -> bool:
        return all(live[m] + g <= budget[m] for m, g in growth(i).items())

    def overflow(i: int) -> float:
        """How far past the budgets starting ``i`` goes, as a fraction of each budget (summed)."""
        return sum(max(0.0, live[m] + g - budget[m]) / budget[m] for m, g in growth(i).items())

    def start_at(i: int) -> float:
        res = min(queue_free) if is_dma[i] else engine_free.get(engine_of[i], 0.0)
        return max(data_ready[i], res)

    while ready:
        fitting = [i for i in ready if fits(i)]
        # nothing fits: the instruction that overshoots the budgets least (finishing work rather than starting new
        # tensors), then the earliest in program order
        i = min(fitting, key=lambda k: (start_at(k), k)) if fitting else min(ready, key=lambda k: (overflow(k), k))
        ready.remove(i)
        t = start_at(i)
        finish[i] = t + duration_ns(insts[i], fn_locs, target)
        if is_dma[i]:
            queue_free[queue_free.index(min(queue_free))] = finish[i]
        else:
            engine_free[engine_of[i]] = finish[i]
        for n in names_of[i]:
            mem, size = tracked[n]
            if n not in started:
                started.add(n)
                live[mem] += size
            uses[n] -= 1
            if uses[n] == 0:
                live[mem] -= size
        order.append(i)
        for s_ in succs[i]:
            waiting[s_] -= 1
            if waiting[s_] == 0:
                ready.add(s_)
                data_ready[s_] = max([finish[p] for p in preds[s_]], default=0.0)
    if len(order) != len(insts):
        raise PassFailedException("pre-schedule: dependency edges form a cycle")
    return order


def pre_schedule(fn: bir.FunctionOp, target: Target, num_queues: int) -> bool:
    """Reorder ``fn``; False (order kept) for a function with control instructions, whose tensors may live across
    runtime loops."""
    if any(isinstance(o, bir.LoopOp) for o in fn.body.walk()):
        raise PassFailedException("pre-schedule needs unrolled BIR (run bir-unroll first)")
    insts = list(fn.instructions())
    if not insts or any(i.has_trait(IsControl) for i in insts):
        return False
    virtual = _virtual_addresses(fn)
    unassigned = [i for i in insts if i.engine.data == "unassigned"]
    locs = fn.memlocs()
    for inst in unassigned:
        inst.properties["engine"] = StringAttr(legal_engines(inst, locs)[0])
    try:
        analyse(fn)
        new = [insts[i] for i in _order(insts, target, num_queues)]
        _reorder(fn, new)
    finally:
        for m in virtual:
            m.properties.pop("address", None)
        for inst in fn.instructions():
            inst.properties.pop("deps", None)
        for inst in unassigned:
            inst.properties["engine"] = StringAttr("unassigned")
    return True


@dataclass(frozen=True)
class PreSchedulePass(ModulePass):
    """``policy`` is the allocation policy that follows (``allocate-memory``'s): if that allocator cannot place the
    reordered kernel (more live at once than the budgets foresaw), the program order is put back."""

    name = "pre-schedule"
    target: str = "gen3"
    num_queues: int = 4
    policy: str = "rotate"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.target not in TARGETS:
            raise PassFailedException(f"unknown target '{self.target}' (expected {', '.join(TARGETS)})")
        fns = [f for f in op.ops if isinstance(f, bir.FunctionOp)]
        before = {fn: list(fn.instructions()) for fn in fns}
        changed = [fn for fn in fns if pre_schedule(fn, get_target(self.target), self.num_queues)]
        if changed and not _fits(op, ctx, self.target, self.policy):
            for fn in changed:
                _reorder(fn, before[fn])


def _fits(op: ModuleOp, ctx: Context, target: str, policy: str) -> bool:
    from nkic.passes.allocate_memory import AllocateMemoryPass

    try:
        AllocateMemoryPass(target=target, policy=policy).apply(ctx, op.clone())
    except PassFailedException:
        return False
    return True
