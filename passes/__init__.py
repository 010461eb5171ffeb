"""nkic's passes by command-line name, registered lazily: one pass per module, named after the pass."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass

from nkic.support.lazy import lazy_attr

# pass name -> (module, class)
_PASSES: dict[str, tuple[str, str]] = {
    "penguin-to-bir": ("penguin_to_bir", "PenguinToBirPass"),
    "translate-nki-ast-to-bir": ("translate_nki_ast_to_bir", "TranslateNkiAstToBirPass"),
    "inline-nki-kernel": ("inline_nki_kernel", "InlineNkiKernelPass"),
    "inline-bir-kernel": ("inline_bir_kernel", "InlineBirKernelPass"),
    "bir-unroll": ("bir_unroll", "BirUnrollPass"),
    "rotate-blocks": ("rotate_blocks", "RotateBlocksPass"),
    "split-blocks": ("split_blocks", "SplitBlocksPass"),
    "resolve-psum-accumulate": ("resolve_psum_accumulate", "ResolvePsumAccumulatePass"),
    "spill": ("spill", "SpillPass"),
    "allocate-memory": ("allocate_memory", "AllocateMemoryPass"),
    "assign-engines": ("assign_engines", "AssignEnginesPass"),
    "dependency-analysis": ("dependency_analysis", "DependencyAnalysisPass"),
    "pre-schedule": ("pre_schedule", "PreSchedulePass"),
    "schedule-instructions": ("schedule_instructions", "ScheduleInstructionsPass"),
    "post-schedule": ("post_schedule", "PostSchedulePass"),
    "dep-reduction": ("dep_reduction", "DepReductionPass"),
    "dma-optimization": ("dma_optimization", "DmaOptimizationPass"),
    "tensorcopy-accel": ("tensorcopy_accel", "TensorcopyAccelPass"),
    "dma-transpose": ("dma_transpose", "DmaTransposePass"),
    "insert-semaphores": ("insert_semaphores", "InsertSemaphoresPass"),
    "print-metrics": ("print_metrics", "PrintMetricsPass"),
    "bir-to-isa": ("bir_to_isa", "BirToIsaPass"),
    "bir-verify": ("bir_verify", "BirVerifyPass"),
    "bir-sim": ("bir_sim", "BirSimPass"),
    "isa-verify": ("isa_verify", "IsaVerifyPass"),
    "nkic-frontend-lowering": ("pipelines", "FrontendLoweringPipeline"),
    "nkic-backend": ("pipelines", "BackendPipeline"),
    "nkic-pipeline": ("pipelines", "FullPipeline"),
}


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {name: lazy_attr(f"nkic.passes.{m}", c) for name, (m, c) in _PASSES.items()}
