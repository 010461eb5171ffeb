"""Named pipelines, themselves passes: the whole chain is usable by name from ``nkic-opt``.

* ``nkic-frontend-lowering``: penguin-to-bir, translate-nki-ast-to-bir, inline-nki-kernel, inline-bir-kernel;
* ``nkic-backend``: bir-unroll (``roll_loops=true`` keeps qualifying loops rolled), resolve-psum-accumulate,
  assign-engines, pre-schedule, (dma-transpose, opt-in), allocate-memory, dependency-analysis,
  schedule-instructions, post-schedule, dep-reduction{engine_order=true}, dma-optimization, insert-semaphores,
  bir-verify, bir-to-isa, isa-verify;
* ``nkic-pipeline``: both.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nkic.passes.targeting import for_module


def frontend_lowering(kernel_format: str = "bir") -> tuple[ModulePass, ...]:
    from nkic.passes.inline_bir_kernel import InlineBirKernelPass
    from nkic.passes.inline_nki_kernel import InlineNkiKernelPass
    from nkic.passes.penguin_to_bir import PenguinToBirPass
    from nkic.passes.translate_nki_ast_to_bir import TranslateNkiAstToBirPass

    return (
        PenguinToBirPass(kernel_format=kernel_format),
        TranslateNkiAstToBirPass(),
        InlineNkiKernelPass(),
        InlineBirKernelPass(),
    )


def backend(
    target: str = "gen3", num_queues: int = 4, alloc_policy: str = "rotate", metrics: bool = False,
    roll_loops: bool = False, *, post_schedule: bool = True,
    coalesce_dma: bool = True, dma_transpose: bool = False,
) -> tuple[ModulePass, ...]:
    """The backend passes; ``metrics`` adds ``print-metrics`` before ``bir-to-isa`` (``nkic compile --metrics``),
    ``roll_loops`` keeps qualifying loops rolled (ARCHITECTURE.md "Rolled loops"); ``post_schedule=False`` leaves
    out ``post-schedule``, ``coalesce_dma=False`` ``dma-optimization``'s coalescing (bench/README.md "Schedule-aware
    allocation" measures both); ``dma_transpose=True`` adds ``dma-transpose`` after ``pre-schedule`` (PE transposes
    plus their PSUM copy become DMA transposes where the cost model favours it; off by default, bench/README.md)."""
    from nkic.passes.allocate_memory import AllocateMemoryPass
    from nkic.passes.assign_engines import AssignEnginesPass
    from nkic.passes.bir_to_isa import BirToIsaPass
    from nkic.passes.bir_unroll import BirUnrollPass
    from nkic.passes.bir_verify import BirVerifyPass
    from nkic.passes.dep_reduction import DepReductionPass
    from nkic.passes.dependency_analysis import DependencyAnalysisPass
    from nkic.passes.dma_optimization import DmaOptimizationPass
    from nkic.passes.dma_transpose import DmaTransposePass
    from nkic.passes.insert_semaphores import InsertSemaphoresPass
    from nkic.passes.isa_verify import IsaVerifyPass
    from nkic.passes.post_schedule import PostSchedulePass
    from nkic.passes.pre_schedule import PreSchedulePass
    from nkic.passes.print_metrics import PrintMetricsPass
    from nkic.passes.resolve_psum_accumulate import ResolvePsumAccumulatePass
    from nkic.passes.schedule_instructions import ScheduleInstructionsPass
    from nkic.passes.split_blocks import SplitBlocksPass

    return (
        BirUnrollPass(roll=roll_loops),
        ResolvePsumAccumulatePass(),
        SplitBlocksPass(target=target),
        # engines first, so that pre-schedule plans on them; then allocation follows the scheduled order
        AssignEnginesPass(target=target),
        PreSchedulePass(target=target, num_queues=num_queues, policy=alloc_policy),
        # on the data flow and the planned order, before allocation
        *((DmaTransposePass(target=target, num_queues=num_queues, scheduled=True),) if dma_transpose else ()),
        AllocateMemoryPass(target=target, policy=alloc_policy),
        DependencyAnalysisPass(),
        ScheduleInstructionsPass(target=target, num_queues=num_queues),
        # critical path first within each engine, on the real edges (allocation's anti/output edges included)
        *((PostSchedulePass(target=target, num_queues=num_queues),) if post_schedule else ()),
        # after the schedule is final, so each engine's order counts as edges: fewer semaphore waits
        DepReductionPass(engine_order=True),
        # coalescing of adjacent transfers, then queues by load, not round-robin
        DmaOptimizationPass(target=target, num_queues=num_queues, coalesce=coalesce_dma),
        InsertSemaphoresPass(num_queues=num_queues),
        BirVerifyPass(),
        *((PrintMetricsPass(target=target),) if metrics else ()),
        BirToIsaPass(),
        IsaVerifyPass(target=target),
    )


def _run(passes: tuple[ModulePass, ...], ctx: Context, op: ModuleOp) -> None:
    for p in passes:
        p.apply(ctx, op)


@dataclass(frozen=True)
class FrontendLoweringPipeline(ModulePass):
    name = "nkic-frontend-lowering"
    kernel_format: str = "bir"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        _run(frontend_lowering(self.kernel_format), ctx, op)


@dataclass(frozen=True)
class BackendPipeline(ModulePass):
    name = "nkic-backend"
    target: str = ""  # "" = the module's nkic.target (passes/targeting.py)
    num_queues: int = 4
    metrics: bool = False
    roll_loops: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not self.target:
            return for_module(self, op).apply(ctx, op)
        _run(backend(self.target, self.num_queues, metrics=self.metrics, roll_loops=self.roll_loops), ctx, op)


@dataclass(frozen=True)
class FullPipeline(ModulePass):
    name = "nkic-pipeline"
    target: str = ""  # "" = the module's nkic.target (passes/targeting.py)
    num_queues: int = 4
    kernel_format: str = "bir"
    roll_loops: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not self.target:
            return for_module(self, op).apply(ctx, op)
        passes = frontend_lowering(self.kernel_format) + backend(self.target, self.num_queues, roll_loops=self.roll_loops)
        _run(passes, ctx, op)
