"""Traits of the instruction ops, derived from the instruction declarations in ``nkic.target``.

Passes ask ``op.has_trait(IsDma)`` instead of testing op names.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.traits import OpTrait


@dataclass(frozen=True)
class IsDma(OpTrait):
    """The instruction is a DMA transfer: issued by SP, executed on a DMA queue."""


@dataclass(frozen=True)
class AccumulatesDst(OpTrait):
    """The instruction may add into its destination (matmul into PSUM), so it reads dst too."""


@dataclass(frozen=True)
class ReadsDst(OpTrait):
    """The instruction keeps part of its destination (a predicated copy), so it reads dst too."""


@dataclass(frozen=True)
class IsControl(OpTrait):
    """A register or loop instruction: every engine of the core executes it together, at a barrier (all engines
    idle, every DMA landed). Passes treat it as a fence: no dependency edge, schedule move or semaphore count
    crosses it."""


@dataclass(frozen=True)
class FirstEngine(OpTrait):
    """assign-engines takes the first legal engine of the declaration, not the least loaded: the engine follows
    the instruction's operands (nc_transpose: TensorE up to 128x128 into PSUM, VectorE up to 32x32)."""


@dataclass(frozen=True)
class CopiesData(OpTrait):
    """dst = src element for element, a dtype cast at most (tensor_copy, dma_copy): passes may fold, merge or
    re-route such a copy without knowing the instruction."""


@dataclass(frozen=True)
class Transposes(OpTrait):
    """dst = src with its partition and free dims swapped (nc_transpose, dma_transpose)."""


@dataclass(frozen=True)
class MeetsCores(OpTrait):
    """The LNC=2 pair's cores meet at it (sendrecv, core_barrier): it completes only when the other core reaches
    its partner, so the program has no one-core-at-a-time order."""


TRAITS: dict[str, type[OpTrait]] = {"dma": IsDma, "accumulates": AccumulatesDst, "reads_dst": ReadsDst,
                                    "control": IsControl, "first_engine": FirstEngine, "copy": CopiesData,
                                    "transpose": Transposes, "meets": MeetsCores}
