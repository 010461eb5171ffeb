"""The ``isa_dve`` dialect: VectorE (DVE) instructions."""

from __future__ import annotations

from typing import ClassVar

from xdsl.ir import Dialect
from xdsl.irdl import irdl_op_definition

from nkic.dialects.isa.base import (
    MemsetFormat,
    ReciprocalFormat,
    ScalarTensorTensorFormat,
    SemWaitFormat,
    TensorCopyFormat,
    TensorReduceFormat,
    TensorScalarFormat,
    TensorScalarReduceFormat,
    TensorTensorFormat,
    TransposeFormat,
)


@irdl_op_definition
class DveTensorTensorOp(TensorTensorFormat):
    name = "isa_dve.tensor_tensor"
    ENGINE: ClassVar[str] = "dve"


@irdl_op_definition
class DveTensorScalarOp(TensorScalarFormat):
    name = "isa_dve.tensor_scalar"
    ENGINE: ClassVar[str] = "dve"


@irdl_op_definition
class DveTensorReduceOp(TensorReduceFormat):
    name = "isa_dve.tensor_reduce"
    ENGINE: ClassVar[str] = "dve"


@irdl_op_definition
class DveTensorCopyOp(TensorCopyFormat):
    name = "isa_dve.tensor_copy"
    ENGINE: ClassVar[str] = "dve"


@irdl_op_definition
class DveMemsetOp(MemsetFormat):
    name = "isa_dve.memset"
    ENGINE: ClassVar[str] = "dve"


@irdl_op_definition
class DveReciprocalOp(ReciprocalFormat):
    name = "isa_dve.reciprocal"
    ENGINE: ClassVar[str] = "dve"


@irdl_op_definition
class DveTensorScalarReduceOp(TensorScalarReduceFormat):
    name = "isa_dve.tensor_scalar_reduce"
    ENGINE: ClassVar[str] = "dve"


@irdl_op_definition
class DveScalarTensorTensorOp(ScalarTensorTensorFormat):
    name = "isa_dve.scalar_tensor_tensor"
    ENGINE: ClassVar[str] = "dve"


@irdl_op_definition
class DveTransposeOp(TransposeFormat):
    name = "isa_dve.transpose"
    ENGINE: ClassVar[str] = "dve"


@irdl_op_definition
class DveSemWaitOp(SemWaitFormat):
    name = "isa_dve.sem_wait"
    ENGINE: ClassVar[str] = "dve"


IsaDve = Dialect(
    "isa_dve",
    [
        DveTensorTensorOp, DveTensorScalarOp, DveTensorReduceOp, DveTensorCopyOp, DveMemsetOp, DveReciprocalOp,
        DveTensorScalarReduceOp, DveScalarTensorTensorOp, DveTransposeOp, DveSemWaitOp,
    ],
)  # fmt: skip
