"""``emit.verify_traced``: the tracer's module verification, ``module.verify()`` with the instruction verifier run
once per distinct instruction. It must accept what ``module.verify()`` accepts and reject what it rejects, with the
same diagnostic, also when the broken instruction repeats an earlier, valid one."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, StringAttr, i32
from xdsl.utils.exceptions import VerifyException

import nkic.frontend.isa as nisa
import nkic.frontend.language as nl
from nkic.dialects import penguin
from nkic.dialects.common import AccessPatternAttr
from nkic.frontend.emit import verify_traced
from nkic.frontend.tracer import TensorSpec, jit
from test_compile_fastpaths import check_keeps_xdsl_diagnostic


@jit
def copies(a):
    """The same copy four times in an unrolled loop (identical instructions), once in a rolled loop, once after."""
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), nl.float32)
    u = nl.ndarray((128, 512), nl.float32)
    nisa.dma_copy(t, a)
    for _ in nl.static_range(4):
        nisa.tensor_copy(u, t)
    for i in nl.affine_range(4):
        nisa.tensor_copy(u[:, nl.ds(i * 128, 128)], t[:, nl.ds(i * 128, 128)])
    nisa.tensor_copy(u, t)
    nisa.dma_copy(out, u)
    return out


def _module():  # type: ignore[no-untyped-def]
    return copies.trace(TensorSpec((128, 512), "float32")).module.clone()


def _insts(module, name: str) -> list[penguin.PenguinInst]:  # type: ignore[no-untyped-def]
    return [op for op in module.walk() if isinstance(op, penguin.PenguinInst) and op.OPNAME == name]


def _error(check, module) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(VerifyException) as info:
        check(module)
    return str(info.value)


def test_accepts_what_module_verify_accepts() -> None:
    module = _module()
    module.verify()
    verify_traced(module)


@pytest.mark.parametrize("which", [0, 3])
def test_a_broken_repeat_is_still_verified(which: int) -> None:
    """The last of the identical unrolled copies (or the first) given a mismatched pattern: the same error."""
    module = _module()
    op = _insts(module, "tensor_copy")[which]
    dst, src = op.aps.data
    op.properties["aps"] = ArrayAttr([dst, AccessPatternAttr(0, [(512, 128), (1, 256)])])
    assert _error(verify_traced, module) == _error(lambda m: m.verify(), module)


def test_a_bad_property_on_a_repeat() -> None:
    module = _module()
    op = _insts(module, "tensor_copy")[2]
    op.properties["engine"] = StringAttr("warp_drive")
    message = _error(verify_traced, module)
    assert message == _error(lambda m: m.verify(), module)
    assert "warp_drive" in message


def test_loop_depth_counts() -> None:
    """An instruction after the loop given the pattern of the one inside (which names the loop index, and verified
    there): the depth is part of what was verified, so the copy outside the loop is rejected."""
    module = _module()
    *_, inside, after = _insts(module, "tensor_copy")
    assert any(ap.iv_coeffs for ap in inside.aps.data)
    after.properties = dict(inside.properties)  # the same attributes (operand types too), now at depth 0
    message = _error(verify_traced, module)
    assert message == _error(lambda m: m.verify(), module)
    assert "outside its loop" in message


# -- penguin.alloc's compiled IRDL check (dialects/fastverify.py: one result of a base type) --------------------------
def _alloc(mem: str = "sbuf", address: tuple[int, int] | None = None) -> penguin.AllocOp:
    from nkic.dialects.common import element_type

    return penguin.AllocOp("t", penguin.TensorType(mem, (128, 512), element_type("float32")), address, "k.py:3")


def _irdl_message(op: penguin.AllocOp) -> str:
    with pytest.raises(VerifyException) as e:
        op.get_irdl_definition().verify(op)
    return str(e.value)


@pytest.mark.parametrize("bad", [
    ("tensor_name", IntegerAttr(1, i32)),  # wrong base
    ("address", StringAttr("0, 0")),
    ("nonsense", StringAttr("x")),  # undeclared property
])  # fmt: skip
def test_alloc_compiled_check_keeps_xdsl_diagnostics(bad: tuple[str, object]) -> None:
    check_keeps_xdsl_diagnostic(_alloc(), *bad)


def test_alloc_result_type_and_own_verifier() -> None:
    op = penguin.AllocOp.create(result_types=[StringAttr("not a tensor type")],
                                properties={"tensor_name": StringAttr("t")})  # fmt: skip
    want = _irdl_message(op)
    with pytest.raises(VerifyException) as got:
        op.verify_()
    assert str(got.value) == want
    with pytest.raises(VerifyException, match="only sbuf and psum tensors take an explicit address"):
        _alloc("shared_hbm", (0, 0)).verify_()  # the op's own check still runs after the compiled one
