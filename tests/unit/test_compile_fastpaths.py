"""The compile-time fast paths give the slow paths' answers: the compiled IRDL check (same verdict, same
diagnostic), the memoised cost and ISA records (recomputed when a property changes) and pre-schedule's ranked ready
set (the same order as testing every ready instruction, also when the memory budget binds)."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import IntegerAttr, StringAttr, i32
from xdsl.utils.exceptions import VerifyException

from nkic.dialects import bir
from nkic.dialects.common import i64_attr
from nkic.dialects.isa import ISA_OPS
from nkic.driver import make_context
from nkic.kernels.flash_attention import flash_attention
from nkic.library import RESOLVER
from nkic.passes import pre_schedule as ps
from nkic.passes.dependency_analysis import analyse
from nkic.passes.lowering import cost_record
from nkic.passes.pipelines import backend, frontend_lowering
from nkic.passes.resolver import use_resolver
from nkic.passes.schedule_instructions import duration_ns
from nkic.target.isa import Operand
from nkic.target.machine import get_target
from nkic.frontend import TensorSpec
from nkic.dialects.traits import IsDma

ActActivateOp = ISA_OPS[("act", "activate")]
ROW = ((1, 128), (1, 512))


def _activate() -> ActActivateOp:
    src = Operand("sbuf", "float32", ROW, 0, 0)
    dst = Operand("sbuf", "float32", ROW, 0, 0x800)
    return ActActivateOp.make(1, {"dst": dst, "src": src}, func="exp")


def _irdl_message(op: ActActivateOp) -> str:
    with pytest.raises(VerifyException) as e:
        op.get_irdl_definition().verify(op)
    return str(e.value)


@pytest.mark.parametrize("bad", [
    ("id", StringAttr("one")),  # wrong base
    ("id", IntegerAttr(1, i32)),  # wrong parameter
    ("func", i64_attr(3)),
    ("nonsense", StringAttr("x")),  # undeclared property
])  # fmt: skip
def test_compiled_check_keeps_xdsl_diagnostics(bad: tuple[str, object]) -> None:
    op = _activate()
    op.verify_()  # a well-formed op passes the compiled check
    name, value = bad
    op.properties[name] = value  # type: ignore[assignment]
    want = _irdl_message(op)
    with pytest.raises(VerifyException) as got:
        op.verify_()
    assert str(got.value) == want


def test_missing_required_property_diagnostic() -> None:
    op = _activate()
    del op.properties["id"]
    want = _irdl_message(op)
    with pytest.raises(VerifyException, match="property 'id' expected") as got:
        op.verify_()
    assert str(got.value) == want


def test_isa_record_follows_property_changes() -> None:
    op = _activate()
    first = op.to_instr()
    assert op.to_instr() is first  # memoised
    op.properties["id"] = i64_attr(7)
    assert op.to_instr().inst_id == 7


def _module_before_pre_schedule(seqlen: int) -> object:
    s = TensorSpec((1, seqlen, 128), "bfloat16")
    module = flash_attention.trace(s, s, s, scale=0.088).module.clone()
    ctx = make_context()
    with use_resolver(RESOLVER):
        for p in (*frontend_lowering(), *backend()):
            if isinstance(p, ps.PreSchedulePass):
                return module
            p.apply(ctx, module)
    raise AssertionError("no pre-schedule pass")


def _scan_order(insts: list[bir.BirInst], budget: dict[str, float]) -> list[int]:
    """pre-schedule's rule, written as a scan: among the ready instructions that fit, the earliest start (then
    program order); else the lowest index."""
    target = get_target("gen3")
    locs = insts[0].parent_op().memlocs()  # type: ignore[union-attr]
    index = {inst.inst_id: i for i, inst in enumerate(insts)}
    preds = [[index[d] for _, d in inst.dep_list] for inst in insts]
    names = [[n for n in dict.fromkeys(i.ref_names) if locs[n].mem in ("sbuf", "psum")] for i in insts]
    size = {n: ps._footprint(locs[n], target) for ns in names for n in ns}
    uses: dict[str, int] = {}
    for ns in names:
        for n in ns:
            uses[n] = uses.get(n, 0) + 1
    live, started, done = {"sbuf": 0.0, "psum": 0.0}, set(), [False] * len(insts)
    finish, engine_free, queues, order = [0.0] * len(insts), {}, [0.0] * 4, []
    while len(order) < len(insts):
        ready = [i for i in range(len(insts)) if not done[i] and all(done[p] for p in preds[i])]

        def growth(i: int) -> dict[str, float]:
            grow = {"sbuf": 0.0, "psum": 0.0}
            for n in names[i]:
                if n not in started:
                    grow[size[n][0]] += size[n][1]
            return grow

        def fits(i: int) -> bool:
            return all(live[m] + g <= budget[m] for m, g in growth(i).items())

        def overflow(i: int) -> float:
            return sum(max(0.0, live[m] + g - budget[m]) / budget[m] for m, g in growth(i).items())

        def start(i: int) -> float:
            free = min(queues) if insts[i].has_trait(IsDma) else engine_free.get(insts[i].engine.data, 0.0)
            return max(max([finish[p] for p in preds[i]], default=0.0), free)

        fitting = [i for i in ready if fits(i)]
        i = min(fitting, key=lambda k: (start(k), k)) if fitting else min(ready, key=lambda k: (overflow(k), k))
        finish[i] = start(i) + duration_ns(insts[i], locs, target)
        if insts[i].has_trait(IsDma):
            queues[queues.index(min(queues))] = finish[i]
        else:
            engine_free[insts[i].engine.data] = finish[i]
        for n in names[i]:
            if n not in started:
                started.add(n)
                live[size[n][0]] += size[n][1]
            uses[n] -= 1
            if uses[n] == 0:
                live[size[n][0]] -= size[n][1]
        done[i] = True
        order.append(i)
    return order


@pytest.mark.parametrize("sbuf_share", [ps.SBUF_BUDGET, 0.05])
def test_pre_schedule_ranking_equals_scan(monkeypatch: pytest.MonkeyPatch, sbuf_share: float) -> None:
    monkeypatch.setattr(ps, "SBUF_BUDGET", sbuf_share)  # 5%: the budget binds on most steps
    module = _module_before_pre_schedule(1024)
    fn = next(f for f in module.ops if isinstance(f, bir.FunctionOp))  # type: ignore[attr-defined]
    insts = list(fn.instructions())
    ps._virtual_addresses(fn)
    analyse(fn)
    target = get_target("gen3")
    assert ps._order(insts, target, 4) == _scan_order(insts, ps._budgets(target))


def test_cost_record_follows_property_changes() -> None:
    module = _module_before_pre_schedule(1024)
    fn = next(f for f in module.ops if isinstance(f, bir.FunctionOp))  # type: ignore[attr-defined]
    locs = fn.memlocs()
    inst = next(i for i in fn.instructions() if i.OPNAME == "activation")
    first = cost_record(inst, locs)
    assert cost_record(inst, locs) is first
    inst.properties["id"] = i64_attr(12345)  # not costed: same record
    assert cost_record(inst, locs) is first
    inst.properties["func"] = StringAttr("tanh")  # costed: a new record
    assert cost_record(inst, locs) is not first
