"""The compile-time fast paths give the slow paths' answers: the compiled IRDL check (same verdict, same
diagnostic), the memoised cost and ISA records (recomputed when a property changes); pre-schedule's ranked ready set is checked in
test_pre_schedule_order.py."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import IntegerAttr, StringAttr, i32
from xdsl.ir import Operation
from xdsl.utils.exceptions import VerifyException

from nkic.dialects import bir
from nkic.dialects.common import i64_attr
from nkic.dialects.isa import ISA_OPS
from nkic.compiler.driver import make_context
from nkic.kernels.flash_attention import flash_attention
from nkic.library import RESOLVER
from nkic.passes import pre_schedule as ps
from nkic.passes.lowering import cost_record
from nkic.passes.pipelines import backend, frontend_lowering
from nkic.passes.resolver import use_resolver
from nkic.target.isa import Operand
from nkic.frontend import TensorSpec

ActActivateOp = ISA_OPS[("act", "activate")]
ROW = ((1, 128), (1, 512))


def _activate() -> ActActivateOp:
    src = Operand("sbuf", "float32", ROW, 0, 0)
    dst = Operand("sbuf", "float32", ROW, 0, 0x800)
    return ActActivateOp.make(1, {"dst": dst, "src": src}, func="exp")


def _irdl_message(op: Operation) -> str:
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
    check_keeps_xdsl_diagnostic(_activate(), *bad)


def check_keeps_xdsl_diagnostic(op: Operation, name: str, value: object) -> None:
    """A well-formed ``op`` passes its compiled check; with ``name`` set to ``value`` it fails with IRDL's message."""
    op.verify_()
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
