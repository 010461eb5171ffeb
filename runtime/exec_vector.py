"""Executors of the elementwise, reduction, scan and activation instructions (VectorE, ScalarE, GpSimd): their
numerics are ``runtime/semantics.py``'s.
"""

from __future__ import annotations

import numpy as np

from nkic.runtime import semantics as sem
from nkic.runtime.errors import SimulationError
from nkic.runtime.executors import Operands, _alu_op, _scalar_operand, _value, elementwise, execute
from nkic.runtime.state import _Core, _View, _element_offsets, _resolve
from nkic.target.isa import Instr, bits_f32
from nkic.target.machine import NUM_PARTITIONS


def _all_int(*views: _View) -> bool:
    return all(sem.is_int_dtype(v.op.dtype) for v in views)


@elementwise("TENSOR_TENSOR")  # all-integer operands: exact integer math (GpSimd/DVE int path)
def _tensor_tensor(ins: Instr, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return sem.alu(_alu_op(ins, "op"), a, b)


@execute("TENSOR_SCALAR")
def _exec_tensor_scalar(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, src = ops.dst, ops.src
    ops = [_alu_op(ins, "op0")]
    if ins.flag("has_op1"):
        ops.append(_alu_op(ins, "op1"))
    # Arithmetic runs in fp32; only pure bit-vector chains on integer tensors keep integer values.
    integer = _all_int(dst, src) and all(op in sem.BITVEC_OPS or op == "bypass" for op in ops)
    result = src.load(integer)
    for k, op in enumerate(ops):
        scalar = _scalar_operand(core, ins, f"operand{k}", src.nparts, integer)
        result = sem.scalar_step(op, result, scalar, ins.flag(f"reverse{k}"))
    dst.store(result)


@execute("TENSOR_REDUCE")
def _exec_tensor_reduce(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, src = ops.dst, ops.src
    free_dims = src.op.shape[1:]
    k = ins.imm("num_reduced_dims") or len(free_dims)  # 0 = every free dim
    if k > len(free_dims):
        raise SimulationError(f"TENSOR_REDUCE over {k} trailing dims of a {len(free_dims)}-free-dim operand")
    inner = int(np.prod(free_dims[len(free_dims) - k :]))
    integer = _all_int(dst, src)
    values = src.load(integer).reshape(src.nparts, -1, inner)
    result = sem.reduce_last(_alu_op(ins, "op"), values)
    if ins.flag("negate"):
        result = -result
    dst.store(result)


def _accumulate(
    core: _Core,
    regs: np.ndarray,
    ins: Instr,
    parts: np.ndarray,
    values: np.ndarray,
    op: str | None = None,
    load: np.ndarray | None = None,
) -> None:
    """Apply ``reduce_cmd`` to an engine's accumulator registers, then write them to ``reduce_res`` if given.

    ``op`` is the reduction (default: the ``reduce_op`` immediate); ``load_reduce`` starts from ``load`` when the
    instruction has a value to load, else from the registers."""
    cmd = _alu_op(ins, "reduce_cmd")
    op = op or _alu_op(ins, "reduce_op")
    if cmd == "reset":
        regs[parts] = sem.reduce_identity(op)
    elif cmd == "reset_reduce":
        regs[parts] = sem.reduce_last(op, values)
    elif cmd in ("reduce", "load_reduce"):
        start = load if cmd == "load_reduce" and load is not None else regs[parts]
        regs[parts] = sem.alu(op, start, sem.reduce_last(op, values))
    _write_registers(core, ins, regs, parts)


def _write_registers(core: _Core, ins: Instr, regs: np.ndarray, parts: np.ndarray) -> None:
    """``reduce_res``, when present, receives the accumulator registers of the instruction's partitions."""
    res = ins.operand("reduce_res")
    if res is not None:
        view = _resolve(core, res, "reduce_res")
        if view.nparts != len(parts) or view.free != 1:
            raise SimulationError(f"reduce_res must be ({len(parts)}, 1), got {res.shape}")
        view.store(regs[parts])


@execute("ACTIVATE")
def _exec_activate(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, src = ops.dst, ops.src
    bias = _scalar_operand(core, ins, "bias", src.nparts, False)
    scale = _scalar_operand(core, ins, "scale", src.nparts, False)
    result = sem.activation(_alu_op(ins, "func"), src.f32() * scale + bias)
    dst.store(result)
    _accumulate(core, core.act_regs, ins, src.partitions, result)


@execute("ACTIVATE2")
def _exec_activate2(core: _Core, ins: Instr, ops: Operands) -> None:
    """``y = func((src op0 imm0) op1 imm1, relu_param)`` in fp32; y (before the cast to dst) feeds the registers."""
    dst, src = ops.dst, ops.src
    value = src.f32()
    for k in (0, 1):
        op = _alu_op(ins, f"op{k}")
        if op != "bypass":
            scalar = _scalar_operand(core, ins, f"imm{k}", src.nparts, False)
            value = sem.scalar_step(op, value, scalar, ins.flag(f"reverse{k}")).astype(np.float32)
    relu_param = _scalar_operand(core, ins, "relu_param", src.nparts, False)
    result = sem.activation(_alu_op(ins, "func"), value, relu_param)
    dst.store(result)
    _accumulate(core, core.act_regs, ins, src.partitions, result)


@execute("TENSOR_COPY")
def _exec_tensor_copy(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, src = ops.dst, ops.src
    if dst.op.dtype == src.op.dtype:
        dst.store_raw(src.raw())
    else:
        dst.store(src.load(_all_int(dst, src)))


@execute("MEMSET")
def _exec_memset(core: _Core, ins: Instr, ops: Operands) -> None:
    dst = ops.dst
    integer = ins.flag("int_value")
    dst.store(np.full((dst.nparts, dst.free), _value(ins, "value"), np.int64 if integer else np.float32))


def _affine_values(ins: Instr) -> np.ndarray:
    """``offset + p * channel_multiplier + Σ step·idx`` in int32 arithmetic, shaped (P, F)."""
    pattern = ins.operand("pattern")
    if pattern is None or pattern.memory != "none":
        raise SimulationError("pattern operand (memory 'none') required")
    multiplier, nparts = pattern.pattern[0]
    if not 0 <= nparts <= NUM_PARTITIONS:  # before np.arange: a corrupted count must not allocate
        raise SimulationError(f"pattern operand spans {nparts} partitions (at most {NUM_PARTITIONS})")
    free = _element_offsets(pattern.pattern[1:])
    values = int(_value(ins, "offset")) + multiplier * np.arange(nparts, dtype=np.int64)[:, None] + free
    return values.astype(np.int32).astype(np.int64)  # wrap like the 32-bit hardware counters


@execute("IOTA")
def _exec_iota(core: _Core, ins: Instr, ops: Operands) -> None:
    dst = ops.dst
    values = _affine_values(ins)
    if values.shape != (dst.nparts, dst.free):
        raise SimulationError(f"IOTA pattern {values.shape} does not match destination {dst.op.shape}")
    dst.store(values if sem.is_int_dtype(dst.op.dtype) else values.astype(np.float32))


@execute("AFFINE_SELECT")
def _exec_affine_select(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, on_true = ops.dst, ops.on_true
    values = _affine_values(ins)
    if values.shape != (dst.nparts, dst.free):
        raise SimulationError(f"AFFINE_SELECT pattern {values.shape} does not match destination {dst.op.shape}")
    cond = sem.alu(_alu_op(ins, "cmp_op"), values, np.zeros((), np.int64)) != 0
    dst.store(np.where(cond, on_true.f32(), np.float32(_value(ins, "on_false_value"))))


@elementwise("RECIPROCAL", exact_int=False)
def _reciprocal(ins: Instr, src: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.float32(1.0) / src


@execute("TENSOR_SCALAR_REDUCE")
def _exec_tensor_scalar_reduce(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, src = ops.dst, ops.src
    scalar = _scalar_operand(core, ins, "operand0", src.nparts, False)
    result = sem.scalar_step(_alu_op(ins, "op0"), src.f32(), scalar, ins.flag("reverse0"))
    dst.store(result)
    res = ins.operand("reduce_res")
    if res is not None:
        reduced = sem.reduce_last(_alu_op(ins, "reduce_op"), result)
        view = _resolve(core, res, "reduce_res")
        if view.nparts != src.nparts or view.free != 1:
            raise SimulationError(f"reduce_res must be ({src.nparts}, 1), got {res.shape}")
        view.store(-reduced if ins.flag("negate") else reduced)


@execute("RANGE_SELECT")
def _exec_range_select(core: _Core, ins: Instr, ops: Operands) -> None:
    """The free index plus range_start, compared in fp32 against two per-partition bounds."""
    dst, on_true = ops.dst, ops.on_true
    bound0 = _scalar_operand(core, ins, "bound0", dst.nparts, False)
    bound1 = _scalar_operand(core, ins, "bound1", dst.nparts, False)
    index = (int(_value(ins, "range_start")) + np.arange(dst.free, dtype=np.int64)).astype(np.float32)[None, :]
    keep0 = sem.alu(_alu_op(ins, "comp_op0"), index, bound0) != 0
    keep = keep0 & (sem.alu(_alu_op(ins, "comp_op1"), index, bound1) != 0)
    result = np.where(keep, on_true.f32(), np.float32(_value(ins, "on_false_value")))
    dst.store(result)
    _accumulate(core, core.dve_regs, ins, on_true.partitions, result)


@execute("TENSOR_TENSOR_SCAN")
def _exec_tensor_tensor_scan(core: _Core, ins: Instr, ops: Operands) -> None:
    """A sequential recurrence along the free dim (all partitions at once), in fp32."""
    dst, a, b = ops.dst, ops.in0, ops.in1
    op0, op1 = _alu_op(ins, "op0"), _alu_op(ins, "op1")
    x, y = a.f32(), b.f32()
    state = np.broadcast_to(_scalar_operand(core, ins, "initial", dst.nparts, False), (dst.nparts, 1))
    state = state.reshape(-1).astype(np.float32)
    out = np.empty_like(x)
    for i in range(x.shape[1]):
        step = sem.scalar_step(op0, x[:, i], state, ins.flag("reverse0"))
        state = sem.scalar_step(op1, step.astype(np.float32), y[:, i], ins.flag("reverse1")).astype(np.float32)
        out[:, i] = state
    dst.store(out)


@execute("TENSOR_COPY_PREDICATED")
def _exec_tensor_copy_predicated(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, pred = ops.dst, ops.predicate
    keep = pred.raw() != 0
    if ins.flag("reverse_pred"):
        keep = ~keep
    out = dst.raw().copy()
    if ins.operand("src") is not None:
        src = ops.src
        values = src.raw() if src.op.dtype == dst.op.dtype else sem.cast(src.f32(), dst.op.dtype)
    else:
        values = np.broadcast_to(sem.cast(np.float32(bits_f32(ins.imm("src"))), dst.op.dtype), out.shape)
    out[keep] = values[keep]
    dst.store_raw(out)


@execute("BN_STATS")
def _exec_bn_stats(core: _Core, ins: Instr, ops: Operands) -> None:
    """(count, mean, variance * count) of the even, then the odd elements of each partition, in fp32."""
    dst, src = ops.dst, ops.src
    x = src.f32()
    cols = []
    for half in (x[:, 0::2], x[:, 1::2]):
        count = np.float32(half.shape[1])
        mean = half.sum(axis=1, dtype=np.float32) / count if half.shape[1] else np.zeros(len(x), np.float32)
        m2 = ((half - mean[:, None]) ** 2).sum(axis=1, dtype=np.float32)
        cols += [np.full(len(x), count, np.float32), mean, m2]
    dst.store(np.stack(cols, axis=1))


@execute("BN_AGGR")
def _exec_bn_aggr(core: _Core, ins: Instr, ops: Operands) -> None:
    """Chan's parallel combination of (count, mean, variance * count) triples: mean and variance per partition."""
    dst, src = ops.dst, ops.src
    t = src.f32().reshape(src.nparts, -1, 3)
    n, m, m2 = t[..., 0], t[..., 1], t[..., 2]
    total = n.sum(axis=1, dtype=np.float32)
    with np.errstate(all="ignore"):
        mean = np.where(total > 0, (n * m).sum(axis=1, dtype=np.float32) / total, np.float32(0))
        spread = (m2 + n * (m - mean[:, None]) ** 2).sum(axis=1, dtype=np.float32)
        var = np.where(total > 0, spread / total, np.float32(0))
    dst.store(np.stack([mean, var], axis=1))


@execute("EXPONENTIAL")
def _exec_exponential(core: _Core, ins: Instr, ops: Operands) -> None:
    """``exp(src - max_value)``; the row sums go into the VectorE registers as reduce_cmd says."""
    dst, src = ops.dst, ops.src
    shift = _scalar_operand(core, ins, "max_value", src.nparts, False)
    result = sem.activation("exp", src.f32() - shift)
    dst.store(result)
    init = _scalar_operand(core, ins, "reduce_init", src.nparts, False)
    load = np.broadcast_to(init, (src.nparts, 1)).reshape(-1).astype(np.float32)
    _accumulate(core, core.dve_regs, ins, src.partitions, result, op="add", load=load)


@execute("SELECT_REDUCE")
def _exec_select_reduce(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, pred, on_true = ops.dst, ops.predicate, ops.on_true
    keep = pred.raw() != 0
    if ins.flag("reverse_pred"):
        keep = ~keep
    on_false = _scalar_operand(core, ins, "on_false", dst.nparts, False)
    result = np.where(keep, on_true.f32(), on_false).astype(np.float32)
    dst.store(result)
    _accumulate(core, core.dve_regs, ins, on_true.partitions, result)


@execute("TENSOR_SCALAR_CUMULATIVE")
def _exec_tensor_scalar_cumulative(core: _Core, ins: Instr, ops: Operands) -> None:
    """The documented pseudocode: the register starts per reduce_cmd, then ``reg = op1(op0(x, imm0), reg)``."""
    dst, src = ops.dst, ops.src
    op0, op1, cmd = _alu_op(ins, "op0"), _alu_op(ins, "op1"), _alu_op(ins, "reduce_cmd")
    parts = src.partitions
    if cmd == "reset_reduce":  # a running difference starts from 0 like a sum
        reg = np.full(src.nparts, sem.reduce_identity("add" if op1 == "subtract" else op1), np.float32)
    elif cmd == "load_reduce":
        init = _scalar_operand(core, ins, "imm1", src.nparts, False)
        reg = np.broadcast_to(init, (src.nparts, 1)).reshape(-1).astype(np.float32)
    else:
        reg = core.dve_regs[parts].astype(np.float32)
    scaled = sem.scalar_step(op0, src.f32(), _scalar_operand(core, ins, "imm0", src.nparts, False), False)
    out = np.empty((src.nparts, src.free), np.float32)
    for i in range(src.free):
        reg = sem.alu(op1, scaled[:, i].astype(np.float32), reg).astype(np.float32)
        out[:, i] = reg
    dst.store(out)
    core.dve_regs[parts] = reg


@execute("TENSOR_PARTITION_REDUCE")
def _exec_tensor_partition_reduce(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, src = ops.dst, ops.src
    if (dst.nparts, dst.free) != (1, src.free):
        raise SimulationError(f"partition reduce of {src.nparts}x{src.free} into {dst.nparts}x{dst.free}")
    values = src.load(_all_int(dst, src))
    dst.store(sem.reduce_last(_alu_op(ins, "op"), values.T)[None, :])


@execute("SCALAR_TENSOR_TENSOR")
def _exec_scalar_tensor_tensor(core: _Core, ins: Instr, ops: Operands) -> None:
    dst, data, other = ops.dst, ops.data, ops.operand1
    scalar = _scalar_operand(core, ins, "operand0", data.nparts, False)
    result = sem.scalar_step(_alu_op(ins, "op0"), data.f32(), scalar, ins.flag("reverse0"))
    op1, t1 = _alu_op(ins, "op1"), other.f32()
    dst.store(sem.alu(op1, t1, result) if ins.flag("reverse1") else sem.alu(op1, result, t1))
