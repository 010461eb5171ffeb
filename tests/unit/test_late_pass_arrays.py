"""The plain-array forms the late backend passes read (issue 10) say what the IR says: the edge pairs cached on a
``deps`` attribute, the directly built ``deps``/``waits`` attributes, the memoised traits, the stretch graph, the
renumbering of ``stretch_graph.reorder`` (the same IR as ``schedule_instructions._reorder``) and the bisection
first fit of ``allocate-memory`` (the same offsets as a scan of every busy range)."""

from __future__ import annotations

import random

import pytest
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, ModuleOp, i64
from xdsl.ir.core import Operation
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.traits import IsControl, IsDma
from nkic.compiler.driver import make_context
from nkic.frontend import TensorSpec
from nkic.kernels.matmul import matmul
from nkic.library import RESOLVER
from nkic.passes import dma_optimization
from nkic.passes.allocate_memory import _fits_psum, first_fit
from nkic.passes.dep_reduction import reduce_function
from nkic.passes.pipelines import backend, frontend_lowering
from nkic.passes.post_schedule import PostSchedulePass, post_schedule
from nkic.passes.resolver import use_resolver
from nkic.passes.schedule_instructions import _reorder
from nkic.passes.stretch_graph import StretchGraph, reorder
from nkic.target.machine import get_target


def test_deps_attr_is_the_array_of_dep_attrs() -> None:
    edges = [("flow", 3), ("anti", 7), ("output", 7)]
    attr = bir.deps_attr(edges)
    plain = ArrayAttr([bir.DepAttr(k, i) for k, i in edges])
    assert attr == plain and hash(attr) == hash(plain) and str(attr) == str(plain)
    assert bir.dep_pairs_of(attr) == bir.dep_pairs_of(plain) == tuple(edges)
    assert bir.dep_ids_of(plain) == (3, 7, 7)
    assert bir.dep_pairs_of(None) == () and bir.dep_ids_of(None) == ()
    with pytest.raises(Exception, match="dependency kind"):
        bir.deps_attr([("sideways", 1)])


def test_waits_attr_is_the_dense_array() -> None:
    flat = [8, 3, 1, 12, 4, 2**40]
    assert bir.waits_attr(flat) == DenseArrayBase.from_list(i64, flat)
    assert str(bir.waits_attr(flat)) == str(DenseArrayBase.from_list(i64, flat))


def test_memoised_traits_agree_with_the_generic_lookup() -> None:
    for cls in bir.INSTRUCTION_OPS.values():
        for trait in (IsDma, IsControl):
            assert cls.has_trait(trait) == Operation.has_trait.__func__(cls, trait)  # type: ignore[attr-defined]


def _scheduled_module() -> ModuleOp:
    """A small matmul through the backend up to post-schedule (not run; it reorders this one, and dep-reduction
    then drops edges)."""
    traced = matmul.trace(TensorSpec((384, 256), "float32"), TensorSpec((384, 1024), "float32"))
    module = traced.module.clone()
    ctx = make_context()
    with use_resolver(RESOLVER):
        for p in (*frontend_lowering(), *backend()):
            if isinstance(p, PostSchedulePass):
                return module
            p.apply(ctx, module)
    raise AssertionError("no post-schedule in the pipeline")


def _function(module: ModuleOp) -> bir.FunctionOp:
    return next(f for f in module.ops if isinstance(f, bir.FunctionOp))


def test_stretch_graph_and_dep_accessors_match_the_ir() -> None:
    fn = _function(_scheduled_module())
    insts = list(fn.instructions())
    assert insts == [o for o in fn.body.walk() if isinstance(o, bir.BirInst)]
    g = StretchGraph.build(insts)
    for i, inst in enumerate(insts):
        assert inst.dep_list == [(d.kind.data, d.on.data) for d in (inst.deps.data if inst.deps else ())]
        assert [insts[p].inst_id for p in g.preds[i]] == [d for _, d in inst.dep_list]
        assert g.dma[i] == inst.has_trait(IsDma) and g.engine[i] == inst.engine.data


def test_reorder_renumbers_as_schedule_instructions_does() -> None:
    """Both renumberings of the same topological shuffle give the same IR."""
    mod_a, mod_b = _scheduled_module(), _scheduled_module()
    fa, fb = _function(mod_a), _function(mod_b)
    rng = random.Random(7)
    orders = []
    for fn in (fa, fb):
        insts = list(fn.instructions())
        preds = StretchGraph.build(insts).preds
        done: set[int] = set()
        order: list[int] = []
        ready = [i for i, ps in enumerate(preds) if not ps]
        while ready:  # a random topological order, the same for both (same seed state)
            i = ready.pop(rng.randrange(len(ready)))
            order.append(i)
            done.add(i)
            ready += [j for j, ps in enumerate(preds) if j not in done and j not in ready and j not in order
                      and set(ps) <= done]  # fmt: skip
        orders.append([insts[i] for i in order])
        rng = random.Random(7)
    _reorder(fa, orders[0])
    reorder(fb, orders[1])
    assert str(mod_a) == str(mod_b)


def test_stretch_graph_strict_diagnostics() -> None:
    fn = _function(_scheduled_module())
    insts = list(fn.instructions())
    late = next(i for i in insts if i.dep_list)
    with pytest.raises(PassFailedException, match="depends on a later instruction"):
        StretchGraph.build([late, *[i for i in insts if i is not late]])
    with pytest.raises(PassFailedException, match="not before it in the same barrier-free stretch"):
        StretchGraph.build([late])
    assert StretchGraph.build([late], strict=False).preds == [()]


def _first_fit_by_scan(busy: list[tuple[int, int]], size: int, capacity: int, memory: str, bank: int,
                       cursor: int) -> int | None:  # fmt: skip
    """The definition: the first candidate (in rotation order) whose bytes overlap no busy range."""
    align = 64 if memory == "sbuf" else 4
    starts = {0, cursor, *(hi for _, hi in busy)} | (set(range(0, capacity, bank)) if memory == "psum" else set())
    for start in sorted(starts, key=lambda s: (s < cursor, s)):
        off = -(-start // align) * align
        if memory == "psum" and not _fits_psum(off, size, bank):
            continue
        if off + size <= capacity and all(off + size <= lo or off >= hi for lo, hi in busy):
            return off
    return None


def test_first_fit_bisection_equals_the_scan() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        memory = rng.choice(["sbuf", "psum"])
        capacity = 4096 if memory == "sbuf" else 16384
        busy = []
        for _ in range(rng.randint(0, 10)):
            lo = rng.randrange(capacity)
            busy.append((lo, min(capacity, lo + rng.randint(0, 900))))
        size, cursor = rng.randint(1, 3000), rng.randrange(capacity)
        got = first_fit(busy, size, capacity, memory, 2048, cursor)
        assert got == _first_fit_by_scan(busy, size, capacity, memory, 2048, cursor)


def test_the_graph_kept_between_passes_is_the_graph_of_the_ir() -> None:
    """post-schedule leaves its (renumbered) graph and dep-reduction its (reduced) one on the function; each is
    what reading the IR afresh gives, and a change to an edge list makes ``of`` read it afresh."""
    module = _scheduled_module()
    fn = _function(module)
    assert post_schedule(fn, get_target("gen3"), 4)  # reordered: the kept graph is the renumbered one
    insts = list(fn.instructions())
    assert StretchGraph.of(fn, insts) == StretchGraph.build(insts)
    assert reduce_function(fn, engine_order=True) > 0
    insts = list(fn.instructions())
    kept = StretchGraph.of(fn, insts)
    assert kept == StretchGraph.build(insts) and StretchGraph.of(fn, insts) is kept  # read once, then reused
    inst = next(i for i in insts if i.dep_list)
    inst.properties["deps"] = bir.deps_attr(inst.dep_list[:-1])
    assert StretchGraph.of(fn, insts) is not kept and StretchGraph.of(fn, insts) == StretchGraph.build(insts)


def test_cost_figures_priced_once_across_the_late_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """dma-optimization reuses post-schedule's figures (dep-reduction only drops edges, some instructions lose all
    of theirs); a change to an operand prices the instruction again."""
    module = _scheduled_module()
    fn, target = _function(module), get_target("gen3")
    assert post_schedule(fn, target, 4) and reduce_function(fn, engine_order=True) > 0
    insts, locs = list(fn.instructions()), fn.memlocs()
    priced: list[bir.BirInst] = []
    for name in ("duration_ns", "cost_record"):
        real = getattr(dma_optimization, name)
        monkeypatch.setattr(dma_optimization, name, lambda inst, *a, real=real: priced.append(inst) or real(inst, *a))
    kept = [dma_optimization._figures(i, locs, target) for i in insts]
    assert not priced
    for inst in insts:  # what pricing afresh gives
        del inst.__dict__[dma_optimization._FIGURES]
    assert [dma_optimization._figures(i, locs, target) for i in insts] == kept and len(priced) == len(insts)
    priced.clear()
    changed = next(i for i in insts if i.has_trait(IsDma))
    changed.properties["aps"] = ArrayAttr(list(changed.aps.data))  # equal, but a new object
    dma_optimization._figures(changed, locs, target)
    assert priced == [changed]
