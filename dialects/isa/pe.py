"""The ``isa_pe`` dialect: TensorE (PE) instructions."""

from __future__ import annotations

from typing import ClassVar

from xdsl.ir import Dialect
from xdsl.irdl import irdl_op_definition

from nkic.dialects.isa.base import MatmulFormat, SemWaitFormat, TransposeFormat


@irdl_op_definition
class PeMatmulOp(MatmulFormat):
    name = "isa_pe.matmul"
    ENGINE: ClassVar[str] = "pe"


@irdl_op_definition
class PeTransposeOp(TransposeFormat):
    name = "isa_pe.transpose"
    ENGINE: ClassVar[str] = "pe"


@irdl_op_definition
class PeSemWaitOp(SemWaitFormat):
    name = "isa_pe.sem_wait"
    ENGINE: ClassVar[str] = "pe"


IsaPe = Dialect("isa_pe", [PeMatmulOp, PeTransposeOp, PeSemWaitOp])
