"""``pre-schedule``: scheduling before allocation keeps outputs bit-identical, speeds up attention, and puts the
program order back when the allocator cannot place the new order."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from nkic.dialects import bir
from nkic.compiler.driver import run_neff
# the program-order attention kernel (flash_attention itself is software-pipelined by hand, with private buffers per
# group, so pre-scheduling it gains little): compiled unrolled, this is the kernel pre-schedule was written for
from nkic.kernels.flash_attention import flash_attention_rolled as flash_attention
from nkic.passes import pre_schedule as ps
from nkic.passes.allocate_memory import AllocateMemoryPass
from nkic.passes.spill import AllocationWarning
from pipeline_run import neff_bytes, passes_on


def _f32(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# float32: with bf16 inputs the PE transposes write bf16 PSUM tiles (nc_transpose: "The output dst tile must have the
# same data type as that of data"), half the banks, and the program order already overlaps as well as pre-schedule's
# (1K: 25.6 us plain, 26.7 us pre-scheduled, without post-schedule); at float32 the reordering still pays (39.4 us
# plain, 37.9 us pre-scheduled).
Q, K, V = _f32(1, 1, 1024, 128), _f32(2, 1, 1024, 128), _f32(3, 1, 1024, 128)


def _compile(pre: bool, stop_at_alloc: bool = False) -> bytes | ModuleOp:
    # without post-schedule, which would otherwise recover much of the interleaving on its own
    for p, module, ctx in passes_on(flash_attention.trace(Q, K, V, scale=0.088), post_schedule=False):
        if isinstance(p, ps.PreSchedulePass) and not pre:
            continue
        if stop_at_alloc and isinstance(p, AllocateMemoryPass):
            return module
        p.apply(ctx, module)
    return neff_bytes(module)


def _order(module: ModuleOp) -> list[str]:
    fn = next(f for f in module.ops if isinstance(f, bir.FunctionOp))
    return [f"{i.OPNAME}:{','.join(i.ref_names)}" for i in fn.instructions()]


def test_attention_faster_same_outputs() -> None:
    inputs = {"q": Q, "k": K, "v": V}
    want, got = run_neff(_compile(False), inputs), run_neff(_compile(True), inputs)  # type: ignore[arg-type]
    assert want.outputs["out"].tobytes() == got.outputs["out"].tobytes()
    assert got.profile.total_ns < 0.98 * want.profile.total_ns


def test_program_order_restored_when_allocation_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = _order(_compile(False, stop_at_alloc=True))  # type: ignore[arg-type]
    assert _order(_compile(True, stop_at_alloc=True)) != plain  # type: ignore[arg-type]
    why = "k.py:7:5: error: kernel does not fit in SBUF: tensor 'k.t' needs 4096 bytes per partition while ..."
    monkeypatch.setattr(ps, "_misfit", lambda *a: why)
    with pytest.warns(AllocationWarning) as seen:
        assert _order(_compile(True, stop_at_alloc=True)) == plain  # type: ignore[arg-type]
    said = [w for w in seen if "pre-schedule's order does not fit" in str(w.message)]
    assert len(said) == 1 and (said[0].filename, said[0].lineno) == ("k.py", 7)  # the allocator's reason, at its line
    assert "(kernel does not fit in SBUF: tensor 'k.t' needs 4096 bytes" in str(said[0].message)
    assert "allocation follows the program order" in str(said[0].message)
