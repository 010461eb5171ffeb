"""The ``nki.isa`` enums (engines, reduce commands, generations, DMA modes) and the generation queries."""

from __future__ import annotations

from enum import Enum
from typing import Any

from nkic.frontend.context import active_context, default_target
from nkic.frontend.errors import NkiError
from nkic.target.machine import NKI_ENGINES
from nkic.target.vocab import REDUCE_CMDS


# -- enums --------------------------------------------------------------------------------------------------
engine = Enum("engine", [(name, NKI_ENGINES.code(name)) for name in NKI_ENGINES])  # type: ignore[misc]

unknown_engine, tensor_engine, scalar_engine = engine.unknown, engine.tensor, engine.scalar
gpsimd_engine, vector_engine = engine.gpsimd, engine.vector

reduce_cmd = Enum("reduce_cmd", [(name, REDUCE_CMDS.code(name)) for name in REDUCE_CMDS])  # type: ignore[misc]


_ENGINE, _REDUCE_CMD = engine, reduce_cmd  # the instruction parameters named `engine`/`reduce_cmd` shadow these


class nc_version(Enum):
    """NeuronCore generations, ordered (``get_nc_version() >= nc_version.gen3``) but not equal to ints."""

    gen2 = 2
    gen3 = 3
    gen4 = 4

    def __lt__(self, other: Any) -> bool:
        return self.value < other.value if isinstance(other, nc_version) else NotImplemented

    def __le__(self, other: Any) -> bool:
        return self.value <= other.value if isinstance(other, nc_version) else NotImplemented

    def __gt__(self, other: Any) -> bool:
        return self.value > other.value if isinstance(other, nc_version) else NotImplemented

    def __ge__(self, other: Any) -> bool:
        return self.value >= other.value if isinstance(other, nc_version) else NotImplemented


class dge_mode(Enum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(Enum):
    error = 0
    skip = 1


_OOB_MODE = oob_mode  # dma_compute's parameter named `oob_mode` shadows the enum
_DGE = dge_mode  # the DMA functions' parameter named `dge_mode` shadows the enum


class matmul_perf_mode(Enum):
    none = 0
    double_row = 1


class dma_engine(Enum):
    dma = 1
    gpsimd_dma = 2


def get_nc_version() -> nc_version:
    """The compile target of the running trace (outside a trace: the default target, gen3 unless overridden)."""
    ctx = active_context()
    if ctx is not None:
        return nc_version[ctx.options.target]
    return nc_version[default_target()]


def get_nc_sub_version() -> int:
    """The silicon revision within the target's generation: nkic models the first revision of each (0)."""
    return 0


class NkiValidationError(NkiError):
    """A hardware constraint violated by an instruction's operands (nkic raises NkiError, of which this is a kind)."""
