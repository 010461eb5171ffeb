"""``dep-reduction``: transitive reduction of the dependency edges of ``dependency-analysis``.

An edge ``u -> w`` is redundant when ``w`` is reachable from ``u`` through some other predecessor of ``w``: the
ordering it states already follows from the others, so dropping it cannot allow an order the full graph forbids.
Every such edge is dropped, and only those (the reachability relation is unchanged: ``reachability`` below is what
the tests compare before and after). Fewer edges mean fewer semaphore waits from ``insert-semaphores``.

``engine_order=true`` also counts the program order of each compute engine as edges: an engine runs its
instructions one after the other, so the previous instruction on the same engine has finished when the next
starts (the assumption ``insert-semaphores`` already makes when it drops same-engine edges). This finds the
redundancy that only shows through an engine's stream, e.g. ``u(PE) -> w(ACT)`` when a later PE instruction
feeds a DVE instruction that ``w`` waits for. It is valid only once the order is final, so the pipeline runs it
after ``schedule-instructions``; nothing may reorder the instructions afterwards. DMA transfers take no part in
engine order (they run on queues, asynchronously to their issuing engine): they are ordered only by their edges.

Control instructions (registers, runtime loops) are barriers with no edges across them: each stretch between two
of them is reduced on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.traits import IsControl
from nkic.passes.stretch_graph import StretchGraph


def stretches(fn: bir.FunctionOp) -> Iterator[list[bir.BirInst]]:
    """The barrier-free stretches of ``fn``'s instructions, in program order."""
    segment: list[bir.BirInst] = []
    for inst in fn.instructions():
        if inst.has_trait(IsControl):
            if segment:
                yield segment
            segment = []
        else:
            segment.append(inst)
    if segment:
        yield segment


def earlier_deps(insts: list[bir.BirInst]) -> list[list[int]]:
    """Per instruction of a barrier-free stretch: the positions of its dependencies, each of which must be an
    earlier instruction of the stretch (what dependency-analysis produces; hand-written IR may say otherwise)."""
    g = StretchGraph.build(insts)
    return [list(ps) for ps in g.preds]


def _preds(insts: list[bir.BirInst], engine_order: bool) -> tuple[list[list[int]], list[int]]:
    """Per instruction (by position): its explicit predecessors' positions, and its implicit engine-order
    predecessor's position (-1 for none)."""
    g = StretchGraph.build(insts)
    return [list(ps) for ps in g.preds], _engine_chain(g, range(len(insts)), engine_order)


def _engine_chain(g: StretchGraph, span: range, engine_order: bool) -> list[int]:
    """Per position of ``span``: the position (in ``span``) of the previous instruction on the same compute engine
    when ``engine_order`` counts it as an edge, else -1."""
    chain: list[int] = []
    last_on: dict[str, int] = {}
    for k, i in enumerate(span):
        prev = -1
        if engine_order and not g.dma[i]:
            prev = last_on.get(g.engine[i], -1)
            last_on[g.engine[i]] = k
        chain.append(prev)
    return chain


def reachability(insts: list[bir.BirInst], engine_order: bool = False) -> list[int]:
    """Per instruction, the bitset (bit = position in ``insts``) of the instructions it must run after."""
    explicit, chain = _preds(insts, engine_order)
    anc: list[int] = []
    for ps, prev in zip(explicit, chain):
        bits = 0
        for p in ps + ([prev] if prev >= 0 else []):
            bits |= anc[p] | (1 << p)
        anc.append(bits)
    return anc


def reduce_stretch(insts: list[bir.BirInst], engine_order: bool) -> int:
    """Drop the redundant edges of one stretch; returns how many were dropped."""
    g = StretchGraph.build(insts)
    return _reduce(g, range(len(insts)), engine_order)


def _reduce(g: StretchGraph, span: range, engine_order: bool) -> int:
    """Drop the redundant edges of the stretch ``span`` of ``g``; returns how many were dropped."""
    explicit, chain = g.local_preds(span), _engine_chain(g, span, engine_order)
    anc: list[int] = []
    dropped = 0
    for i, (ps, prev) in enumerate(zip(explicit, chain)):
        all_preds = ps if prev < 0 else (*ps, prev)
        if len(all_preds) <= 1:  # nothing to reduce (most instructions): only the ancestors
            anc.append(anc[all_preds[0]] | (1 << all_preds[0]) if all_preds else 0)
            continue
        through = 0  # everything reachable from w through one of its predecessors (not the predecessor itself)
        for p in all_preds:
            through |= anc[p]
        bits = through
        for p in all_preds:
            bits |= 1 << p
        anc.append(bits)
        if any((through >> p) & 1 for p in ps):
            inst = g.insts[span.start + i]
            pairs = inst.dep_pairs
            kept = [e for e, q in zip(pairs, ps) if not (through >> q) & 1]
            dropped += len(pairs) - len(kept)
            if kept:
                inst.properties["deps"] = bir.deps_attr(kept)
            else:
                inst.properties.pop("deps", None)
            g.preds[span.start + i] = tuple([span.start + q for q in ps if not (through >> q) & 1])
    return dropped


def reduce_function(fn: bir.FunctionOp, engine_order: bool) -> int:
    if fn.has_loops():
        raise PassFailedException("dep-reduction needs unrolled BIR (run bir-unroll first)")
    g = StretchGraph.of(fn, list(fn.instructions()))  # post-schedule's, when it ran just before
    dropped = sum(_reduce(g, span, engine_order) for span in g.stretches)
    g.keep(fn)  # its edges updated with the IR's: dma-optimization replays the same graph
    return dropped


@dataclass(frozen=True)
class DepReductionPass(ModulePass):
    name = "dep-reduction"
    # Count each compute engine's program order as edges (only once the schedule is final).
    engine_order: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            reduce_function(fn, self.engine_order)
