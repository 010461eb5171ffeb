"""CompileOptions: built once from the decorator, the environment and the caller, in that order of precedence; the
pipeline is built from it."""

from __future__ import annotations

import pytest

from nkic.frontend.tracer import CompileOptions as DecoratorOptions
from nkic.passes.dma_transpose import DmaTransposePass
from nkic.passes.insert_semaphores import InsertSemaphoresPass
from nkic.passes.options import DEFAULT_NUM_QUEUES, CompileOptions
from nkic.passes.pipelines import backend
from nkic.passes.print_metrics import PrintMetricsPass


def test_the_decorator_then_the_environment_then_the_caller() -> None:
    decorator = DecoratorOptions(target="gen2", carrier_format="klir", enable_stack_allocator=True)
    env = {"NKIC_ROLL_LOOPS": "1", "NKIC_ROLL_INTERLEAVE": "4", "NKIC_VERIFY_EACH_PASS": "0"}
    built = CompileOptions.build(decorator, env)
    assert (built.target, built.kernel_format, built.alloc_policy) == ("gen2", "klir", "stack")
    assert (built.roll_loops, built.roll_interleave, built.verify_each_pass) == (True, 4, False)
    given = CompileOptions.build(decorator, env, target="gen4", roll_loops=False, alloc_policy=None)
    assert (given.target, given.roll_loops, given.alloc_policy) == ("gen4", False, "stack")  # None: not given


def test_unset_sources_leave_the_defaults() -> None:
    assert CompileOptions.build(None, {}) == CompileOptions()
    assert CompileOptions().target is None  # the module's own generation


def test_an_unknown_option_is_an_error() -> None:
    with pytest.raises(TypeError, match="unknown compile option"):
        CompileOptions.build(None, {}, num_queue=2)


def test_the_pipeline_is_built_from_the_options() -> None:
    passes = backend(CompileOptions(num_queues=2, metrics=True, dma_transpose=True))
    assert {p.num_queues for p in passes if hasattr(p, "num_queues")} == {2}
    assert any(isinstance(p, PrintMetricsPass) for p in passes) and any(isinstance(p, DmaTransposePass) for p in passes)
    default = backend()
    assert next(p for p in default if isinstance(p, InsertSemaphoresPass)).num_queues == DEFAULT_NUM_QUEUES
    assert not any(isinstance(p, (PrintMetricsPass, DmaTransposePass)) for p in default)


def test_the_cache_settings_name_what_changes_the_bytes() -> None:
    assert CompileOptions().cache_settings() == {"variant": "", "debug_info": False}
    assert CompileOptions(roll_loops=True, roll_interleave=2, debug_info=True).cache_settings() == {
        "variant": "roll-loops-interleave-2", "debug_info": True}
