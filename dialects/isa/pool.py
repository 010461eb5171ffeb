"""The ``isa_pool`` dialect: GpSimdE (POOL) instructions."""

from __future__ import annotations

from typing import ClassVar

from xdsl.ir import Dialect
from xdsl.irdl import irdl_op_definition

from nkic.dialects.isa.base import (
    AffineSelectFormat,
    IotaFormat,
    MemsetFormat,
    ScalarTensorTensorFormat,
    SemWaitFormat,
    TensorCopyFormat,
    TensorReduceFormat,
    TensorScalarFormat,
    TensorTensorFormat,
)


@irdl_op_definition
class PoolTensorTensorOp(TensorTensorFormat):
    name = "isa_pool.tensor_tensor"
    ENGINE: ClassVar[str] = "pool"


@irdl_op_definition
class PoolTensorScalarOp(TensorScalarFormat):
    name = "isa_pool.tensor_scalar"
    ENGINE: ClassVar[str] = "pool"


@irdl_op_definition
class PoolTensorReduceOp(TensorReduceFormat):
    name = "isa_pool.tensor_reduce"
    ENGINE: ClassVar[str] = "pool"


@irdl_op_definition
class PoolTensorCopyOp(TensorCopyFormat):
    name = "isa_pool.tensor_copy"
    ENGINE: ClassVar[str] = "pool"


@irdl_op_definition
class PoolMemsetOp(MemsetFormat):
    name = "isa_pool.memset"
    ENGINE: ClassVar[str] = "pool"


@irdl_op_definition
class PoolIotaOp(IotaFormat):
    name = "isa_pool.iota"
    ENGINE: ClassVar[str] = "pool"


@irdl_op_definition
class PoolAffineSelectOp(AffineSelectFormat):
    name = "isa_pool.affine_select"
    ENGINE: ClassVar[str] = "pool"


@irdl_op_definition
class PoolScalarTensorTensorOp(ScalarTensorTensorFormat):
    name = "isa_pool.scalar_tensor_tensor"
    ENGINE: ClassVar[str] = "pool"


@irdl_op_definition
class PoolSemWaitOp(SemWaitFormat):
    name = "isa_pool.sem_wait"
    ENGINE: ClassVar[str] = "pool"


IsaPool = Dialect(
    "isa_pool",
    [
        PoolTensorTensorOp, PoolTensorScalarOp, PoolTensorReduceOp, PoolTensorCopyOp, PoolMemsetOp, PoolIotaOp,
        PoolAffineSelectOp, PoolScalarTensorTensorOp, PoolSemWaitOp,
    ],
)  # fmt: skip
