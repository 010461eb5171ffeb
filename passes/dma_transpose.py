"""``dma-transpose``: PE transposes into PSUM whose only reader is one PSUM→SBUF copy become DMA transposes.

A group ``T1..Tn: P[..] ← transpose(E[..])`` (PE), ``C: S ← tensor_copy(P)`` is replaced by DMA transposes
``S[..] ← dma_transpose(E[..])`` SBUF→SBUF, placed where ``C`` was, when all of this holds, so that S ends up bit
for bit as before (a transpose and a same-dtype copy are both plain moves of the bits):

* ``C`` is a plain ``tensor_copy`` (no option, predicate or ``depends_on`` tag; nor are the transposes) from P
  (PSUM) to S (SBUF) with the same dtype, the same static access pattern on both sides, and P and S have the same
  shape; so the element a transpose wrote at offset x of P lands at offset x of S, and each transpose's pattern on
  P is its pattern on S (every element a transpose writes must be among those the copy reads: a dead write on P
  would land on S);
* every other instruction naming P is a ``transpose`` on PE that writes P before ``C``; P is internal;
* the dtype is 2 bytes (the documented DMA-transpose limit, ``nki.isa.dma_transpose``), each transpose is 2-D
  with static view-less patterns, its source E in SBUF with P's dtype and at most 128 source columns
  (``src.shape[-1] <= 128``);
* no instruction between a transpose and ``C`` writes its source (the DMA reads E at ``C``'s place).

When the transposes' sources and destinations step uniformly (the flash-attention Pᵀ: blocks of one exp tile), the
group becomes ONE 3-D DMA transpose ``[q, blocks, k] -> [k, blocks, q]`` (one descriptor's fixed cost); otherwise
one 2-D DMA transpose per PE transpose.

**When.** The decision is per group against the cost model (``target/costs.py``), in two steps. First the static
per-engine busy estimate ``print-metrics`` computes (:func:`nkic.passes.print_metrics.metrics`), plus the core's
shared DMA bandwidth (the timeline's ``dma_transfer`` work over ``dma_core_bytes_per_ns``, which print-metrics
does not count): PE loses the transposes' time, the copy's engine the copy's, the DMA queues gain the DMA
transposes' time (each at least the ~1.3 µs fixed cost; SBUF→SBUF transposes at half the DMA efficiency). The
group qualifies only when the busiest of those loads (an engine, the queues' total over ``num_queues``, the core's
DMA bandwidth) goes down: the work moves off a bottleneck onto engines with room. Then ``dma-optimization``'s
replay of the order (the planned one with ``scheduled``) with the group rewritten must finish strictly earlier
(the DMA's latency, the queues being FIFO). Groups are taken in order, the loads and the replay updated after
each.

The pass runs on flat BIR before allocation, where only the data flow matters (``dependency-analysis``
recomputes every edge later). In ``backend(dma_transpose=True)`` it runs right after ``pre-schedule`` with
``scheduled=true``: the replay then sees the planned order, with the data-flow edges computed as pre-schedule does
(private virtual addresses) and taken off again. Without ``scheduled`` (``nkic-opt -p dma-transpose``) it uses the
edges it finds, e.g. right after ``assign-engines``. Edges on a removed instruction become edges on the DMA
transposes replacing it. Only ``tensor_copy`` copies are matched, on whichever engine (an ``activation`` copy is left alone).

Off by default (bench/README.md "DMA transposes by pass"): on the bundled flash attention, whose kernel already
moves every 3rd chunk's Pᵀ to the DMA queues by hand, it gives 4K 136.2 → 135.7 µs and 8K 425.3 → 437.2 µs; on
the kernel without its hand-placed DMA transposes 4K 127.0 → 125.9 µs, 8K 445.8 → 447.7 µs. Neither estimate sees
allocation's reuse edges or the timeline's DMA effects well enough to gain at 8K.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr
from nkic.dialects.traits import IsDma, Transposes
from nkic.passes.dependency_analysis import analyse
from nkic.passes.dma_optimization import Costs, replay_ns
from nkic.passes.lowering import cost_record
from nkic.passes.options import DEFAULT_NUM_QUEUES
from nkic.passes.pre_schedule import _virtual_addresses
from nkic.passes.print_metrics import metrics
from nkic.passes.schedule_instructions import check_options, duration_ns
from nkic.passes.targeting import target_of
from nkic.passes.tensorcopy_accel import _engine_copy, _reads, _writes
from nkic.target.costs import dma_core_bytes_per_ns, dma_transfer
from nkic.target.machine import NUM_DMA_QUEUES, Target
from nkic.target.vocab import dtype_size

_COPY_PROPS = frozenset({"roles", "aps", "refs", "id", "engine", "deps", "loc", "call"})


def _elements(ap: AccessPatternAttr) -> np.ndarray:
    """The element offsets a static pattern touches."""
    out = np.array([ap.offset_value], dtype=np.int64)
    for step, num in ap.pairs:
        out = np.add.outer(out, step * np.arange(num, dtype=np.int64)).ravel()
    return out


def _static_2d(ap: AccessPatternAttr) -> bool:
    return not ap.is_dynamic and not ap.view_dtype and not any(ap.iv_coeffs) and len(ap.pairs) == 2


@dataclass
class _Group:
    copy: bir.BirInst
    transposes: list[bir.BirInst]
    new: list[bir.BirInst]  # the DMA transposes replacing them (not yet in the IR)


def _candidate(copy: bir.BirInst, at: int, insts: list[bir.BirInst], uses: dict[str, list[int]],
               locs: dict[str, bir.MemLocOp], target: Target) -> list[bir.BirInst]:  # fmt: skip
    """The transposes feeding ``copy`` (at position ``at``) if the group qualifies, else []."""
    if not _engine_copy(copy) or copy.role_names != ["dst", "src"] or set(copy.properties) - _COPY_PROPS:
        return []
    dst, src = copy.ref("dst"), copy.ref("src")
    assert dst is not None and src is not None
    s, p = locs[dst], locs[src]
    if s.mem != "sbuf" or p.mem != "psum" or p.kind.data != "internal" or dst == src:
        return []
    if s.dtype.data != p.dtype.data or dtype_size(p.dtype.data) != 2 or s.dims != p.dims:
        return []
    ap = copy.ap("src")
    if copy.ap("dst") != ap or ap.is_dynamic or ap.view_dtype or any(ap.iv_coeffs):
        return []
    covered = _elements(ap)
    transposes = []
    for i in uses[src]:
        if i == at:
            continue
        t = insts[i]
        if i > at or not t.has_trait(Transposes) or t.engine.data != "pe" or t.ref("dst") != src or _reads(t, src):
            return []
        if set(t.properties) - _COPY_PROPS:
            return []  # an option, a predicate or a depends_on tag: not a plain transpose
        data = t.ref("data")
        assert data is not None
        e = locs[data]
        if e.mem != "sbuf" or e.dtype.data != p.dtype.data or data in (src, dst):
            return []
        ap_d, ap_s = t.ap("dst"), t.ap("data")
        if not (_static_2d(ap_d) and _static_2d(ap_s)) or ap_s.pairs[1][1] > target.dma_transpose_max_cols:
            return []
        if not np.isin(_elements(ap_d), covered).all():
            return []  # written but never copied: on S it would overwrite what the copy leaves alone
        if any(i < j < at and _writes(insts[j], data) for j in uses[data]):
            return []  # the source changes before the copy's place, where the DMA would read it
        transposes.append(t)
    return transposes


def _dma(template: bir.BirInst, roles: ArrayAttr, refs: list[str], aps: list[AccessPatternAttr],
         inst_id: int) -> bir.BirInst:  # fmt: skip
    props = {
        "roles": roles, "aps": ArrayAttr(aps), "refs": ArrayAttr([StringAttr(r) for r in refs]),
        "id": IntegerAttr(inst_id, i64), "engine": StringAttr("sp"),
    }  # fmt: skip
    for key in ("loc", "call"):
        if key in template.properties:
            props[key] = template.properties[key]
    return bir.INSTRUCTION_OPS["dma_transpose"].create(properties=props)


def _combined(ts: list[bir.BirInst]) -> tuple[AccessPatternAttr, AccessPatternAttr] | None:
    """One 3-D (dst, src) pattern pair for transposes of equal shape stepping uniformly on both sides."""
    if len(ts) < 2 or len({t.ref("data") for t in ts}) != 1:
        return None
    ts = sorted(ts, key=lambda t: t.ap("dst").offset_value)
    d0, s0 = ts[0].ap("dst"), ts[0].ap("data")
    steps = set()
    for a, b in zip(ts, ts[1:]):
        if b.ap("dst").pairs != d0.pairs or b.ap("data").pairs != s0.pairs:
            return None
        steps.add((b.ap("dst").offset_value - a.ap("dst").offset_value,
                   b.ap("data").offset_value - a.ap("data").offset_value))  # fmt: skip
    if len(steps) != 1:
        return None
    sd, ss = steps.pop()
    if sd <= 0 or ss <= 0:
        return None
    n = len(ts)
    dst = AccessPatternAttr(d0.offset_value, [d0.pairs[0], (sd, n), d0.pairs[1]])
    src = AccessPatternAttr(s0.offset_value, [s0.pairs[0], (ss, n), s0.pairs[1]])
    return dst, src


def _replacements(copy: bir.BirInst, ts: list[bir.BirInst], next_id: int) -> list[bir.BirInst]:
    roles, s = copy.properties["roles"], copy.ref("dst")
    assert isinstance(roles, ArrayAttr) and s is not None
    both = _combined(ts)
    if both is not None:
        return [_dma(ts[0], roles, [s, ts[0].ref("data") or ""], list(both), copy.inst_id)]
    ids = [*range(next_id, next_id + len(ts) - 1), copy.inst_id]  # the copy's readers' edges: on the last
    return [_dma(t, roles, [s, t.ref("data") or ""], [t.ap("dst"), t.ap("data")], k) for t, k in zip(ts, ids)]


_CORE = "dma-core"  # the loads' key for the core's shared DMA bandwidth


def _core_ns(insts: Iterable[bir.BirInst], locs: dict[str, bir.MemLocOp], target: Target) -> float:
    """The time the transfers take of the core's DMA bandwidth, which all queues share (the timeline's figures:
    ``dma_transfer``'s work over ``dma_core_bytes_per_ns``; print-metrics counts each queue on its own)."""
    work = sum(dma_transfer(cost_record(i, locs), target)[0] for i in insts if i.has_trait(IsDma))
    return work / dma_core_bytes_per_ns(target)


def _initial_loads(fn: bir.FunctionOp, target: Target) -> dict[str, float]:
    """print-metrics' static busy time per engine (DMA queues as one ``dma`` track), plus the core's DMA cap."""
    load = dict(metrics(fn, target).busy_ns)
    load[_CORE] = _core_ns(fn.instructions(), fn.memlocs(), target)
    return load


def _bound(load: dict[str, float], num_queues: int) -> float:
    """The static lower bound the loads allow: the busiest engine, the DMA queues sharing their total, the core's
    DMA bandwidth."""
    dma = sum(v for k, v in load.items() if k == "dma" or k.startswith("q"))
    engines = [v for k, v in load.items() if k != "dma" and not k.startswith("q")]
    return max([*engines, dma / num_queues])


def _outside_deps(g: _Group) -> None:
    """Give the DMA transposes the group's edges on instructions outside it."""
    removed = {t.inst_id for t in g.transposes} | {g.copy.inst_id}
    deps: dict[int, str] = {}
    for inst in (*g.transposes, g.copy):
        for k, d in inst.dep_list:
            if d not in removed:
                deps.setdefault(d, k)
    if deps:
        for d in g.new:
            d.properties["deps"] = bir.deps_attr(sorted(((k, e) for e, k in deps.items()), key=lambda x: x[1]))


def rewrite(fn: bir.FunctionOp, target: Target, num_queues: int, force: bool = False) -> int:
    """Rewrite every qualifying group the cost model favours (``force``: every qualifying group); returns how
    many."""
    if any(isinstance(o, bir.LoopOp) for o in fn.body.walk()):
        raise PassFailedException("dma-transpose needs unrolled BIR (run bir-unroll first)")
    locs = fn.memlocs()
    insts = list(fn.instructions())
    uses: dict[str, list[int]] = {}
    for i, inst in enumerate(insts):
        for name in dict.fromkeys(inst.ref_names):
            uses.setdefault(name, []).append(i)
    load: dict[str, float] | None = None
    next_id = max((i.inst_id for i in insts), default=-1) + 1
    groups: list[_Group] = []
    order = insts
    costs: Costs = {}  # the replays' per-instruction figures
    end = 0.0
    for at, copy in enumerate(insts):
        ts = _candidate(copy, at, insts, uses, locs, target)
        if not ts:
            continue
        g = _Group(copy, ts, _replacements(copy, ts, next_id))
        _outside_deps(g)
        trial = _spliced(order, g)
        if not force:
            if load is None:  # the first candidate: the static loads and the replay of the program as it is
                load = _initial_loads(fn, target)
                end = replay_ns(order, locs, target, num_queues, costs)
            after = _loads_after(load, g, locs, target)
            if _bound(after, num_queues) >= _bound(load, num_queues):
                continue  # the work would not come off the busiest engine
            trial_end = replay_ns(trial, locs, target, num_queues, costs)
            if trial_end >= end:
                continue  # in the program's order the result would not come sooner (the DMA's latency)
            load, end = after, trial_end
        order = trial
        next_id += len(g.new) - 1
        groups.append(g)
    for g in groups:
        _apply(fn, g, locs)
    return len(groups)


def _spliced(order: list[bir.BirInst], g: _Group) -> list[bir.BirInst]:
    """``order`` with the group's transposes gone and its DMA transposes in place of the copy."""
    gone = set(g.transposes)
    out: list[bir.BirInst] = []
    for inst in order:
        if inst is g.copy:
            out += g.new
        elif inst not in gone:
            out.append(inst)
    return out


def _loads_after(load: dict[str, float], g: _Group, locs: dict[str, bir.MemLocOp],
                 target: Target) -> dict[str, float]:  # fmt: skip
    after = dict(load)
    after["pe"] = after.get("pe", 0.0) - sum(duration_ns(t, locs, target) for t in g.transposes)
    eng = g.copy.engine.data
    after[eng] = after.get(eng, 0.0) - duration_ns(g.copy, locs, target)
    after["dma"] = after.get("dma", 0.0) + sum(duration_ns(d, locs, target) for d in g.new)
    after[_CORE] = after.get(_CORE, 0.0) + _core_ns(g.new, locs, target)
    return after


def _apply(fn: bir.FunctionOp, g: _Group, locs: dict[str, bir.MemLocOp]) -> None:
    """Put the DMA transposes where the copy was, point edges on the group's instructions at them, and drop the
    transposes, the copy and P."""
    removed = {t.inst_id for t in g.transposes} | {g.copy.inst_id}
    block = g.copy.parent_block()
    assert block is not None
    for d in g.new:
        block.insert_op_before(d, g.copy)
    psum = g.copy.ref("src")
    for inst in (*g.transposes, g.copy):
        inst.detach()
        inst.erase()
    new_ids = [d.inst_id for d in g.new]
    for inst in fn.instructions():
        if inst.deps is None or not any(d in removed for _, d in inst.dep_list):
            continue
        out: dict[int, str] = {}
        for k, d in inst.dep_list:
            for e in new_ids if d in removed else [d]:
                out.setdefault(e, k)
        inst.properties["deps"] = bir.deps_attr(sorted(((k, e) for e, k in out.items()), key=lambda x: x[1]))
    assert psum is not None
    loc = locs.pop(psum)
    loc.detach()
    loc.erase()


@dataclass(frozen=True)
class DmaTransposePass(ModulePass):
    """``force=true`` rewrites every qualifying group whatever the loads say (tests)."""

    name = "dma-transpose"
    num_queues: int = DEFAULT_NUM_QUEUES
    force: bool = False
    scheduled: bool = False  # after pre-schedule: the edges are gone; the data flow's are computed for the replay

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_options(self.num_queues, NUM_DMA_QUEUES)
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            if self.scheduled:
                _with_data_edges(fn, lambda f: rewrite(f, target_of(op), self.num_queues, self.force))
            else:
                rewrite(fn, target_of(op), self.num_queues, self.force)


def _with_data_edges(fn: bir.FunctionOp, body: Callable[[bir.FunctionOp], object]) -> None:
    """Run ``body`` with the data-flow edges on ``fn`` (private virtual addresses, as pre-schedule computes them),
    then take the edges and addresses off again."""
    virtual = _virtual_addresses(fn)
    try:
        analyse(fn)
        body(fn)
    finally:
        for m in virtual:
            m.properties.pop("address", None)
        for inst in fn.instructions():
            inst.properties.pop("deps", None)
