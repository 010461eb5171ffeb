"""A flat BIR instruction list as plain arrays: what the late passes read of it, read once.

``post-schedule``, ``dep-reduction`` and ``dma-optimization`` each walk the final instruction list several times
(the replays of the cost model, the critical-path order, the transitive reduction), and each used to ask every
instruction for its id, edges, engine and traits through the xDSL accessors on every walk. ``StretchGraph``
reads those once per list: per position, whether the instruction is a control barrier or a DMA, its engine, and
the positions of the instructions it depends on; plus the barrier-free stretches. The passes then work on lists
of ints (positions), and go back to the instructions only to rewrite them.

Two readings of an edge whose target is not an earlier instruction of the same stretch:

* ``strict`` (``dep-reduction``, ``post-schedule``): an error, with ``earlier_deps``' diagnostics (what
  ``dependency-analysis`` produces never has one; hand-written IR may);
* lenient (the replay): the edge constrains nothing (a barrier already drained everything before it, and an
  instruction the replay has not reached has no finish time yet), so it is left out.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.common import i64_attr
from nkic.dialects.traits import IsControl, IsDma


_KEPT = "_nkic_stretch_graph"  # on a FunctionOp: (graph, the attributes it was read from), see StretchGraph.of


def _signature(insts: Sequence[bir.BirInst]) -> tuple[list[Any], list[Any], list[Any]]:
    """What a graph reads of each instruction besides its class: the id, edge and engine attribute objects."""
    props = [inst.properties for inst in insts]
    return [p["id"] for p in props], [p.get("deps") for p in props], [p["engine"] for p in props]


@dataclass
class StretchGraph:
    insts: list[bir.BirInst]  # program order (or the order the caller gave)
    control: list[bool]  # a barrier (registers, runtime loops): no edge crosses it
    dma: list[bool]  # a DMA transfer (runs on a queue, not on its issuing engine)
    engine: list[str]
    preds: list[tuple[int, ...]]  # positions of the instructions it depends on (() for a barrier)
    stretches: list[range]  # the positions of each barrier-free stretch, in order (empty ones left out)

    @classmethod
    def build(cls, insts: Sequence[bir.BirInst], strict: bool = True) -> StretchGraph:
        insts = list(insts)
        props = [inst.properties for inst in insts]  # read directly: the irdl accessors cost more than the rest
        control = [inst.has_trait(IsControl) for inst in insts]
        g = cls(insts, control, [inst.has_trait(IsDma) for inst in insts],
                [p["engine"].data for p in props], [()] * len(insts), [])  # type: ignore[attr-defined]
        ids: list[int] = [p["id"].value.data for p in props]  # type: ignore[attr-defined]
        deps = [bir.dep_ids_of(p.get("deps")) for p in props]  # type: ignore[arg-type]
        start = 0
        for i, c in enumerate([*control, True]):
            if c:
                if i > start:
                    g.stretches.append(range(start, i))
                    g._stretch_preds(range(start, i), ids, deps, strict)
                start = i + 1
        return g

    def _stretch_preds(self, span: range, ids: list[int], deps: list[tuple[int, ...]], strict: bool) -> None:
        preds = self.preds
        if strict:  # positions of the whole stretch first: a later instruction gets its own diagnostic
            index = dict(zip(ids[span.start : span.stop], span))
            for i in span:
                try:
                    ps = tuple([index[d] for d in deps[i]])
                except KeyError as e:
                    raise PassFailedException(f"instruction {ids[i]} depends on {e.args[0]}, which is not before it "
                                              "in the same barrier-free stretch") from None  # fmt: skip
                if ps and max(ps) >= i:
                    raise PassFailedException(f"instruction {ids[i]} depends on a later instruction")
                preds[i] = ps
            return
        seen: dict[int, int] = {}  # id -> position, of the instructions before this one in the stretch
        for i in span:
            preds[i] = tuple([p for p in map(seen.get, deps[i]) if p is not None])
            seen[ids[i]] = i

    @classmethod
    def of(cls, fn: bir.FunctionOp, insts: Sequence[bir.BirInst], strict: bool = True) -> StretchGraph:
        """``build(insts, strict)``, or the graph the previous late pass left on ``fn`` (``keep``) when it was read
        from this very list: the same instruction objects in the same order, with the very same id, edge and engine
        attributes (attributes are immutable: a pass that renumbers or drops an edge puts a new object there). A
        kept graph is strict, and serves a lenient request too: its edges all point at earlier instructions of the
        same stretch, which the lenient reading keeps."""
        kept = fn.__dict__.get(_KEPT)
        if kept is not None:
            g, signature = kept
            if len(g.insts) == len(insts) and all(map(operator.is_, g.insts, insts)):
                now = _signature(insts)
                if all(all(map(operator.is_, a, b)) for a, b in zip(signature, now)):
                    return g
        g = cls.build(insts, strict)
        if strict:
            g.keep(fn)
        return g

    def keep(self, fn: bir.FunctionOp) -> None:
        """Leave this graph on ``fn`` for the next late pass (``of`` checks it still describes the IR)."""
        fn.__dict__[_KEPT] = (self, _signature(self.insts))

    @staticmethod
    def forget(fn: bir.FunctionOp) -> None:
        """Drop the graph kept on ``fn`` (the next pass to want one reads the IR afresh)."""
        fn.__dict__.pop(_KEPT, None)

    def renumbered(self, order: list[int]) -> StretchGraph:
        """The graph of this one's instructions in ``order`` (a topological order with the barriers where they
        were) once ``reorder`` has renumbered them: ids are then positions and each edge list is sorted by them."""
        pos = [0] * len(order)
        for new, old in enumerate(order):
            pos[old] = new
        return StretchGraph([self.insts[o] for o in order], [self.control[o] for o in order],
                            [self.dma[o] for o in order], [self.engine[o] for o in order],
                            [tuple(sorted([pos[p] for p in self.preds[o]])) for o in order],
                            list(self.stretches))  # fmt: skip

    def local_preds(self, span: range) -> list[tuple[int, ...]]:
        """The predecessors of a (strict) stretch's instructions as positions within the stretch."""
        s = span.start
        return [tuple([p - s for p in self.preds[i]]) for i in span]


def reorder(fn: bir.FunctionOp, new_order: list[bir.BirInst]) -> None:
    """Put ``fn``'s instructions in ``new_order`` and renumber them: ids 0, 1, ... in the new order, each edge list
    renumbered and sorted by the new ids. The result of ``schedule_instructions._reorder``, less its cost where
    nothing changes: an edge list whose ids keep their numbers and order keeps its attribute (renumbering rebuilt
    every list, ~7 us each)."""
    props_of = [inst.properties for inst in new_order]  # read directly: the accessors cost more than the loop
    renumber = {p["id"].value.data: n for n, p in enumerate(props_of)}  # type: ignore[attr-defined]
    new_id = renumber.__getitem__
    block = fn.body.block
    for inst in new_order:
        inst.detach()
    block.add_ops(new_order)
    for n, props in enumerate(props_of):
        props["id"] = i64_attr(n)
        deps = props.get("deps")
        if deps is None:
            continue
        old = bir.dep_ids_of(deps)  # type: ignore[arg-type]
        new = list(map(new_id, old))
        if new == sorted(new):  # still in order (a stable sort leaves them)
            if tuple(new) == old:
                continue
            pairs = bir.dep_pairs_of(deps)  # type: ignore[arg-type]
            props["deps"] = bir.deps_attr([(k, i) for (k, _), i in zip(pairs, new)])
        else:
            pairs = bir.dep_pairs_of(deps)  # type: ignore[arg-type]
            props["deps"] = bir.deps_attr([(k, renumber[i]) for k, i in sorted(pairs, key=lambda e: renumber[e[1]])])
