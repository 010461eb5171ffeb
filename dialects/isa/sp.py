"""The ``isa_sp`` dialect: SyncE (SP) instructions, i.e. DMA triggers."""

from __future__ import annotations

from typing import ClassVar

from xdsl.ir import Dialect
from xdsl.irdl import irdl_op_definition

from nkic.dialects.isa.base import DmaCopyFormat, SemWaitFormat


@irdl_op_definition
class SpDmaCopyOp(DmaCopyFormat):
    name = "isa_sp.dma_copy"
    ENGINE: ClassVar[str] = "sp"


@irdl_op_definition
class SpSemWaitOp(SemWaitFormat):
    name = "isa_sp.sem_wait"
    ENGINE: ClassVar[str] = "sp"


IsaSp = Dialect("isa_sp", [SpDmaCopyOp, SpSemWaitOp])
