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


TRAITS: dict[str, type[OpTrait]] = {"dma": IsDma, "accumulates": AccumulatesDst, "reads_dst": ReadsDst}
