"""Named pipelines, themselves passes: the whole chain is usable by name from ``nkic-opt``.

* ``nkic-frontend-lowering``: penguin-to-bir, translate-nki-ast-to-bir, inline-nki-kernel, inline-bir-kernel;
* ``nkic-backend``: bir-unroll (``roll_loops=true`` keeps qualifying loops rolled), resolve-psum-accumulate,
  rotate-blocks, split-blocks, assign-engines, pre-schedule, (dma-transpose, opt-in), allocate-memory,
  dependency-analysis, schedule-instructions, post-schedule, dep-reduction{engine_order=true}, dma-optimization,
  insert-semaphores, bir-verify, bir-to-isa, isa-verify;
* ``nkic-pipeline``: both.

Each is built from one ``CompileOptions`` (``nkic.passes.options``); no pass is told the target, every pass reads
the module's (``nkic.passes.targeting``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nkic.passes.allocate_memory import AllocateMemoryPass
from nkic.passes.assign_engines import AssignEnginesPass
from nkic.passes.bir_to_isa import BirToIsaPass
from nkic.passes.bir_unroll import BirUnrollPass
from nkic.passes.bir_verify import BirVerifyPass
from nkic.passes.dep_reduction import DepReductionPass
from nkic.passes.dependency_analysis import DependencyAnalysisPass
from nkic.passes.dma_optimization import DmaOptimizationPass
from nkic.passes.dma_transpose import DmaTransposePass
from nkic.passes.inline_bir_kernel import InlineBirKernelPass
from nkic.passes.inline_nki_kernel import InlineNkiKernelPass
from nkic.passes.insert_semaphores import InsertSemaphoresPass
from nkic.passes.isa_verify import IsaVerifyPass
from nkic.passes.options import DEFAULT_NUM_QUEUES, CompileOptions
from nkic.passes.penguin_to_bir import PenguinToBirPass
from nkic.passes.post_schedule import PostSchedulePass
from nkic.passes.pre_schedule import PreSchedulePass
from nkic.passes.print_metrics import PrintMetricsPass
from nkic.passes.resolve_psum_accumulate import ResolvePsumAccumulatePass
from nkic.passes.rotate_blocks import RotateBlocksPass
from nkic.passes.schedule_instructions import ScheduleInstructionsPass
from nkic.passes.split_blocks import SplitBlocksPass
from nkic.passes.translate_nki_ast_to_bir import TranslateNkiAstToBirPass

_DEFAULT = CompileOptions()


def frontend_lowering(options: CompileOptions = _DEFAULT, **given: Any) -> tuple[ModulePass, ...]:
    """The frontend lowering passes for ``options`` with the ``given`` fields changed."""
    options = options.override(**given)
    return (
        PenguinToBirPass(kernel_format=options.kernel_format),
        TranslateNkiAstToBirPass(),
        InlineNkiKernelPass(),
        InlineBirKernelPass(),
    )


def backend(options: CompileOptions = _DEFAULT, **given: Any) -> tuple[ModulePass, ...]:
    """The backend passes for ``options`` with the ``given`` fields changed; ``metrics`` adds ``print-metrics`` before ``bir-to-isa`` (``nkic compile --metrics``),
    ``roll_loops`` keeps qualifying loops rolled (ARCHITECTURE.md "Rolled loops"); ``post_schedule=False`` leaves
    out ``post-schedule``, ``coalesce_dma=False`` ``dma-optimization``'s coalescing (bench/README.md "Schedule-aware
    allocation" measures both); ``dma_transpose=True`` adds ``dma-transpose`` after ``pre-schedule`` (PE transposes
    plus their PSUM copy become DMA transposes where the cost model favours it; off by default, bench/README.md)."""
    o = options.override(**given)
    queues = o.num_queues
    return (
        BirUnrollPass(roll=o.roll_loops, interleave=o.roll_interleave),
        ResolvePsumAccumulatePass(),
        RotateBlocksPass(),
        SplitBlocksPass(),
        # engines first, so that pre-schedule plans on them; then allocation follows the scheduled order
        AssignEnginesPass(),
        PreSchedulePass(num_queues=queues, policy=o.alloc_policy),
        # on the data flow and the planned order, before allocation
        *((DmaTransposePass(num_queues=queues, scheduled=True),) if o.dma_transpose else ()),
        AllocateMemoryPass(policy=o.alloc_policy),
        DependencyAnalysisPass(),
        ScheduleInstructionsPass(num_queues=queues),
        # critical path first within each engine, on the real edges (allocation's anti/output edges included)
        *((PostSchedulePass(num_queues=queues),) if o.post_schedule else ()),
        # after the schedule is final, so each engine's order counts as edges: fewer semaphore waits
        DepReductionPass(engine_order=True),
        # coalescing of adjacent transfers, then queues by load, not round-robin
        DmaOptimizationPass(num_queues=queues, coalesce=o.coalesce_dma),
        InsertSemaphoresPass(num_queues=queues),
        BirVerifyPass(),
        *((PrintMetricsPass(),) if o.metrics else ()),
        BirToIsaPass(),
        IsaVerifyPass(),
    )


def _run(passes: tuple[ModulePass, ...], ctx: Context, op: ModuleOp) -> None:
    for p in passes:
        p.apply(ctx, op)


@dataclass(frozen=True)
class FrontendLoweringPipeline(ModulePass):
    name = "nkic-frontend-lowering"
    kernel_format: str = "bir"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        _run(frontend_lowering(CompileOptions(kernel_format=self.kernel_format)), ctx, op)


@dataclass(frozen=True)
class BackendPipeline(ModulePass):
    name = "nkic-backend"
    num_queues: int = DEFAULT_NUM_QUEUES
    metrics: bool = False
    roll_loops: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        options = CompileOptions.build(num_queues=self.num_queues, metrics=self.metrics, roll_loops=self.roll_loops)
        _run(backend(options), ctx, op)


@dataclass(frozen=True)
class FullPipeline(ModulePass):
    name = "nkic-pipeline"
    num_queues: int = DEFAULT_NUM_QUEUES
    kernel_format: str = "bir"
    roll_loops: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        options = CompileOptions.build(num_queues=self.num_queues, kernel_format=self.kernel_format,
                                       roll_loops=self.roll_loops)  # fmt: skip
        _run(frontend_lowering(options) + backend(options), ctx, op)
