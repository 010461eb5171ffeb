"""The ``isa_act`` dialect: ScalarE (ACT) instructions."""

from __future__ import annotations

from typing import ClassVar

from xdsl.ir import Dialect
from xdsl.irdl import irdl_op_definition

from nkic.dialects.isa.base import (
    ActivateFormat,
    MemsetFormat,
    SemWaitFormat,
    TensorCopyFormat,
    TensorScalarFormat,
    TensorTensorFormat,
)


@irdl_op_definition
class ActActivateOp(ActivateFormat):
    name = "isa_act.activate"
    ENGINE: ClassVar[str] = "act"


@irdl_op_definition
class ActTensorTensorOp(TensorTensorFormat):
    name = "isa_act.tensor_tensor"
    ENGINE: ClassVar[str] = "act"


@irdl_op_definition
class ActTensorScalarOp(TensorScalarFormat):
    name = "isa_act.tensor_scalar"
    ENGINE: ClassVar[str] = "act"


@irdl_op_definition
class ActTensorCopyOp(TensorCopyFormat):
    name = "isa_act.tensor_copy"
    ENGINE: ClassVar[str] = "act"


@irdl_op_definition
class ActMemsetOp(MemsetFormat):
    name = "isa_act.memset"
    ENGINE: ClassVar[str] = "act"


@irdl_op_definition
class ActSemWaitOp(SemWaitFormat):
    name = "isa_act.sem_wait"
    ENGINE: ClassVar[str] = "act"


IsaAct = Dialect(
    "isa_act",
    [ActActivateOp, ActTensorTensorOp, ActTensorScalarOp, ActTensorCopyOp, ActMemsetOp, ActSemWaitOp],
)
