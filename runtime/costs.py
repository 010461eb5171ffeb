"""Instruction cost model (hardware.md §4), parameterised by target generation.

Tags follow hardware.md: [C] stated by AWS, [D] derived, [I] inferred, [G] our guess. ``N`` is the number of free
elements per partition of the instruction's main operand. Cycles are in the executing engine's clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nkic.dialects.common import ALU_OPS, REDUCE_CMDS
from nkic.runtime.encoding import Instr, Operand

__all__ = [
    "Target", "TARGETS", "DEFAULT_TARGET", "REFERENCE_CLOCK_GHZ", "MIN_II", "DMA_FIXED_NS", "SP_DMA_ISSUE_CYCLES",
    "get_target", "instr_cycles", "instr_ns", "dma_ns", "dma_efficiency",
]  # fmt: skip

MIN_II = 64  # minimum initiation interval of the data-path engines [ISA26, SH]
DMA_FIXED_NS = 1300.0  # descriptor + sync + semaphore-to-start per transfer [DBW]
SP_DMA_ISSUE_CYCLES = 64  # [G] a DMA trigger costs the issuing sequencer about one MIN_II
DMA_ROWS_PER_ENGINE = 8  # a transfer uses one DMA engine per 8 partitions [DMA]
DMA_MAX_ENGINES = 16  # 16 DMA engines per core [A2, A3, A4]
DMA_HALF_EFFICIENCY_BYTES = 320.0  # [G] c½ of hardware.md §4.4: ≈86% at 2 KiB, ≈93% at 4 KiB contiguous
REFERENCE_CLOCK_GHZ = 1.4  # profile "cycles" are reported at this clock (v2 ScalarE/GpSimd clock) [G]


@dataclass(frozen=True)
class Target:
    """Per-generation numbers: engine clocks in GHz (§1.2) [C], DMA B/ns per engine (§4.4) [C], SBUF bytes per
    partition usable by kernels (§1.3) [HC] and PSUM bytes per partition (§1.3) [C]."""

    name: str
    clock_ghz: dict[str, float]
    dma_bytes_per_ns: float
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int = 16384


def _clocks(pe: float, dve: float, act: float, pool: float) -> dict[str, float]:
    # SyncE's clock is unpublished; [G] it runs at the ScalarE/GpSimd sequencer clock.
    return {"pe": pe, "dve": dve, "act": act, "pool": pool, "sp": act}


TARGETS: dict[str, Target] = {
    "gen2": Target("gen2", _clocks(2.8, 1.12, 1.4, 1.4), 17.0, 180224),
    "gen3": Target("gen3", _clocks(2.4, 0.96, 1.2, 1.2), 23.0, 212984),
    "gen4": Target("gen4", _clocks(2.4, 1.2, 1.2, 1.2), 33.0, 245752),
}
DEFAULT_TARGET = "gen3"
_ALIASES = {"trn1": "gen2", "inf2": "gen2", "trn2": "gen3", "trn3": "gen4"}


def get_target(target: str | Target) -> Target:
    if isinstance(target, Target):
        return target
    name = _ALIASES.get(target, target)
    if name not in TARGETS:
        raise ValueError(f"unknown target '{target}', expected one of {', '.join(TARGETS)}")
    return TARGETS[name]


def _free(op: Operand | None) -> int:
    return op.free_size if op is not None else 1


def _main(ins: Instr) -> Operand | None:
    """The operand whose free size drives the cost: the first input when present, else the destination."""
    return ins.operand(1) or ins.operand(0)


def _pe_cycles(ins: Instr) -> int:
    """MATMUL ``max(min(64, N_stat), N_mov)``, ×4 for fp32 inputs [ISA26, A2]; PE TRANSPOSE ``max(P, min(64, F))``
    [ISA26]."""
    if ins.opcode == "MATMUL":
        stat, mov = ins.operand(1), ins.operand(2)
        cycles = max(min(MIN_II, _free(stat)), _free(mov))
        fp32 = any(op is not None and op.dtype == "float32" for op in (stat, mov))
        return cycles * 4 if fp32 else cycles
    if ins.opcode == "TRANSPOSE":
        src = ins.operand(1)
        parts = src.num_partitions if src is not None else 1
        return max(parts, min(MIN_II, _free(src)))
    return 1


def _tensor_tensor_cycles(ins: Instr) -> int:
    """``max(64, N)`` when one input is in PSUM and the other in SBUF, or for all-BF16 add/subtract/multiply;
    otherwise ``max(64, 2N)`` (two SBUF reads share the port) [A2, ISA26]."""
    a, b, n = ins.operand(1), ins.operand(2), _free(ins.operand(1))
    mems = {op.memory for op in (a, b) if op is not None}
    all_bf16 = all(op is not None and op.dtype == "bfloat16" for op in (ins.operand(0), a, b))
    fast_op = ALU_OPS[ins.imm(0)] in ("add", "subtract", "multiply") if ins.imm(0) < len(ALU_OPS) else False
    if mems == {"psum", "sbuf"} or (all_bf16 and fast_op):
        return max(MIN_II, n)
    return max(MIN_II, 2 * n)


def _memset_cycles(ins: Instr) -> int:
    """``max(64, N)``; ``N/2`` for zero in BF16/FP16 [A2, ISA26]."""
    dst = ins.operand(0)
    n = _free(dst)
    if dst is not None and dst.dtype in ("bfloat16", "float16") and ins.imm(0) == 0:
        return max(1, n // 2)
    return max(MIN_II, n)


def _reduce_cycles(ins: Instr) -> int:
    """``N``; ``N/2`` for BF16 add/max [A2, ISA26]."""
    src = ins.operand(1)
    n = _free(src)
    op = ALU_OPS[ins.imm(0)] if ins.imm(0) < len(ALU_OPS) else ""
    if src is not None and src.dtype == "bfloat16" and op in ("add", "maximum"):
        return max(1, n // 2)
    return max(1, n)


def _activate_cycles(ins: Instr) -> int:
    """``max(64, N)`` whatever scale/bias; ``+64`` when it accumulates into the reduce registers (ActReadAccumulator)
    [A2, ISA26]."""
    cycles = max(MIN_II, _free(ins.operand(1)))
    cmd = REDUCE_CMDS[ins.imm(3)] if ins.imm(3) < len(REDUCE_CMDS) else "idle"
    if cmd in ("reduce", "reset_reduce", "load_reduce") or ins.operand(4) is not None:
        cycles += MIN_II
    return cycles


def _one_input(ins: Instr) -> int:
    """tensor_scalar / tensor_copy / DVE transpose: ``max(64, N)`` [A2, ISA26]."""
    return max(MIN_II, _free(_main(ins)))


_COMPUTE = {
    "TENSOR_TENSOR": _tensor_tensor_cycles,
    "TENSOR_SCALAR": _one_input,
    "TENSOR_COPY": _one_input,
    "TRANSPOSE": _one_input,
    "MEMSET": _memset_cycles,
    "TENSOR_REDUCE": _reduce_cycles,
    "ACTIVATE": _activate_cycles,
    # tensor_scalar_reduce max(64, N) + 64 [ISA26]; scalar_tensor_tensor 2N [ISA26]; reciprocal max(64, 8N) [SH];
    # iota / affine_select 150 + N [ISA26].
    "TENSOR_SCALAR_REDUCE": lambda ins: max(MIN_II, _free(ins.operand(1))) + MIN_II,
    "SCALAR_TENSOR_TENSOR": lambda ins: max(1, 2 * _free(ins.operand(1))),
    "RECIPROCAL": lambda ins: max(MIN_II, 8 * _free(ins.operand(1))),
    "IOTA": lambda ins: 150 + _free(ins.operand(0)),
    "AFFINE_SELECT": lambda ins: 150 + _free(ins.operand(0)),
}


def instr_cycles(instr: Instr, target: str | Target = DEFAULT_TARGET) -> int:
    """Cycles ``instr`` occupies its engine, in that engine's clock.

    Not modelled: v3/v4 VectorE perf modes, the >16 B innermost-stride penalty, RAW-chain overheads and PE
    throttling (hardware.md §4.1–4.3). The target only matters through :func:`instr_ns` today; it is a parameter so
    generation-specific rates can be added without changing callers.
    """
    get_target(target)
    if instr.opcode == "SEM_WAIT":
        return 1  # [G] a pure semaphore wait costs one sequencer cycle once satisfied
    if instr.opcode == "DMA_COPY":
        return SP_DMA_ISSUE_CYCLES
    if instr.engine == "pe":
        return _pe_cycles(instr)
    # GpSimd has no published per-op table beyond iota/affine_select; [G] it follows the VectorE formulas.
    return _COMPUTE[instr.opcode](instr)


def instr_ns(instr: Instr, target: str | Target = DEFAULT_TARGET) -> float:
    """Engine occupancy in ns: ``instr_cycles / clock_GHz``."""
    t = get_target(target)
    return instr_cycles(instr, t) / t.clock_ghz[instr.engine]


def dma_efficiency(contiguous_bytes: float) -> float:
    """Fraction of per-engine peak reached with ``c`` contiguous bytes per row: ``c / (c + c½)`` [G, §4.4]."""
    return contiguous_bytes / (contiguous_bytes + DMA_HALF_EFFICIENCY_BYTES)


def _contiguous_elems(op: Operand) -> int:
    """Elements in the innermost unit-stride run of an AP (merging dims whose step equals the inner extent)."""
    pairs = op.pattern[1:] if op.memory in ("sbuf", "psum") else op.pattern
    run = 1
    for step, num in reversed(pairs):
        if num == 1:
            continue
        if step != run:
            break
        run *= num
    return run


def _rows(dst: Operand, src: Operand) -> int:
    for op in (dst, src):
        if op.memory in ("sbuf", "psum"):
            return op.num_partitions
    return dst.pattern[0][1]


def dma_ns(instr: Instr, target: str | Target = DEFAULT_TARGET) -> float:
    """Transfer time of a DMA_COPY on its queue, in ns.

    ``t = 1300 + bytes / (engines · BW_e · eff(c))`` with ``engines = min(16, ceil(rows / 8))`` [DMA], ``BW_e`` the
    per-engine table (17 / 23 / 33 B/ns) [DMA, DBW], ``c`` the contiguous bytes per row (the smaller of the two
    sides) and ``eff`` from :func:`dma_efficiency` [G]. Transposes run at 90% (HBM↔SBUF) or 50% (SBUF→SBUF) [A3].
    """
    t = get_target(target)
    dst, src = instr.operand(0), instr.operand(1)
    if dst is None or src is None:
        return DMA_FIXED_NS
    nbytes = max(dst.num_elements * dst.itemsize, src.num_elements * src.itemsize)
    rows = max(1, _rows(dst, src))
    engines = min(DMA_MAX_ENGINES, math.ceil(rows / DMA_ROWS_PER_ENGINE))
    row_bytes = nbytes / rows
    contiguous = min(row_bytes, _contiguous_elems(dst) * dst.itemsize, _contiguous_elems(src) * src.itemsize)
    eff = dma_efficiency(max(contiguous, 1.0))
    if instr.flags & 1:
        on_chip = {dst.memory, src.memory} <= {"sbuf", "psum"}
        eff *= 0.5 if on_chip else 0.9
    return DMA_FIXED_NS + nbytes / (engines * t.dma_bytes_per_ns * eff)
