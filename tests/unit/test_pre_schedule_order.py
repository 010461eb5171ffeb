"""``pre-schedule`` picks among ready instructions grouped by resource and memory growth: the order must be exactly
the one of the direct rule (scan every ready instruction, keep those that fit the budgets, take the least
(start, index); none fits: the least overshoot of the budgets, then the least index), kept here as the reference."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nkic.dialects import bir
from nkic.dialects.traits import IsDma
from nkic.compiler.driver import make_context
from nkic.frontend import TensorSpec
from nkic.kernels.flash_attention import flash_attention
from nkic.kernels.matmul import matmul
from nkic.kernels.softmax import softmax
from nkic.library import RESOLVER
from nkic.passes import pre_schedule as ps
from nkic.passes.pipelines import backend, frontend_lowering
from nkic.passes.resolver import use_resolver
from nkic.passes.schedule_instructions import duration_ns
from nkic.target.machine import Target


def _reference(insts: list[bir.BirInst], target: Target, num_queues: int, preds: list[list[int]],
               fn_locs: dict[str, bir.MemLocOp]) -> list[int]:  # fmt: skip
    succs: list[list[int]] = [[] for _ in insts]
    for i, p_ in enumerate(preds):
        for p in p_:
            succs[p].append(i)
    names_of = [[n for n in dict.fromkeys(i.ref_names) if fn_locs[n].mem in ("sbuf", "psum")] for i in insts]
    tracked = {n: ps._footprint(fn_locs[n], target) for ns in names_of for n in ns}
    uses: dict[str, int] = {}
    for ns in names_of:
        for n in ns:
            uses[n] = uses.get(n, 0) + 1
    budget, live, started = ps._budgets(target), {"sbuf": 0.0, "psum": 0.0}, set()
    waiting, finish = [len(p) for p in preds], [0.0] * len(insts)
    engine_free: dict[str, float] = {}
    queue_free = [0.0] * num_queues
    ready = {i for i in range(len(insts)) if waiting[i] == 0}
    data_ready = {i: 0.0 for i in ready}
    is_dma = [i.has_trait(IsDma) for i in insts]

    def growth(i: int) -> dict[str, float]:
        grow = {"sbuf": 0.0, "psum": 0.0}
        for n in names_of[i]:
            if n not in started:
                grow[tracked[n][0]] += tracked[n][1]
        return grow

    def fits(i: int) -> bool:
        return all(live[m] + g <= budget[m] for m, g in growth(i).items())

    def overflow(i: int) -> float:
        return sum(max(0.0, live[m] + g - budget[m]) / budget[m] for m, g in growth(i).items())

    def start_at(i: int) -> float:
        return max(data_ready[i], min(queue_free) if is_dma[i] else engine_free.get(insts[i].engine.data, 0.0))

    order = []
    while ready:
        fitting = [i for i in ready if fits(i)]
        i = min(fitting, key=lambda k: (start_at(k), k)) if fitting else min(ready, key=lambda k: (overflow(k), k))
        ready.remove(i)
        finish[i] = start_at(i) + duration_ns(insts[i], fn_locs, target)
        if is_dma[i]:
            queue_free[queue_free.index(min(queue_free))] = finish[i]
        else:
            engine_free[insts[i].engine.data] = finish[i]
        for n in names_of[i]:
            mem, size = tracked[n]
            if n not in started:
                started.add(n)
                live[mem] += size
            uses[n] -= 1
            if uses[n] == 0:
                live[mem] -= size
        order.append(i)
        for s in succs[i]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.add(s)
                data_ready[s] = max([finish[p] for p in preds[s]], default=0.0)
    return order


def _bf16(*shape: int) -> TensorSpec:
    return TensorSpec(shape, "bfloat16")


CASES: dict[str, Callable[[], object]] = {
    "matmul": lambda: matmul.trace(_bf16(512, 256), _bf16(512, 1024)),
    "softmax": lambda: softmax.trace(TensorSpec((512, 1000), "float32")),
    "attention": lambda: flash_attention.trace(_bf16(1, 512, 64), _bf16(1, 512, 64), _bf16(1, 512, 64),
                                               scale=0.125),  # fmt: skip
}


@pytest.mark.parametrize("sbuf_share", [ps.SBUF_BUDGET, 0.05])  # 5%: the budget binds on most steps
@pytest.mark.parametrize("name", sorted(CASES))
def test_grouped_choice_is_the_direct_rule(name: str, sbuf_share: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ps, "SBUF_BUDGET", sbuf_share)
    fast, compared = ps._order, []

    def both(insts: list[bir.BirInst], target: Target, num_queues: int, preds: list[list[int]],
             fn_locs: dict[str, bir.MemLocOp]) -> list[int]:  # fmt: skip
        got = fast(insts, target, num_queues, preds, fn_locs)
        assert got == _reference(insts, target, num_queues, preds, fn_locs)
        compared.append(len(got))
        return got

    monkeypatch.setattr(ps, "_order", both)
    module = CASES[name]().module.clone()  # type: ignore[attr-defined]
    ctx = make_context()
    with use_resolver(RESOLVER):
        for p in (*frontend_lowering(), *backend()):
            p.apply(ctx, module)
            if isinstance(p, ps.PreSchedulePass):
                break
    assert compared and max(compared) > 20
