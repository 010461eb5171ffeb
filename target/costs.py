"""The instruction cost model, one function per opcode, parameterised by the target generation.

``N`` is the number of free elements per partition of an instruction's main operand; cycles are in the executing
engine's clock. The formulas are the public per-instruction figures of the NKI ISA documentation and the NKI
performance guide; where nothing is published the number is an estimate and says so. The same functions price
instructions for engine assignment, for the scheduler and for the simulator.

The simulator's timeline adds the calibrated effects below (the "timeline model"): the time from an instruction's
end to its results being readable (:data:`DEPENDENT_LATENCY_CYCLES`), the per-instruction floor and the VectorE
fast modes (:func:`occupancy_cycles`), TensorE throttling at low duty (:data:`PE_THROTTLE_WINDOW_NS`...), the DMA
queues' descriptor pipelining under one per-core bandwidth cap (:func:`dma_transfer`) and the SBUF/PSUM ports two
engines share (:func:`shared_ports`), and a NEFF execution's launch and teardown (:func:`neff_launch_ns`,
:func:`neff_teardown_ns`). Sources, as keyed in the
project's hardware notes (each an aws-neuron/aws-neuron-sdk file): ISA26 = general/nki/api/nki/isa/__init__.py at
release 2.26 (the "Estimated instruction cost" blocks); SH = nki/api/nki.api.shared.rst; A2/A3/A4 =
nki/guides/architecture/trainium{_inferentia2,2,3}_arch.rst; PG = nki/deep-dives/nki_perf_guide.rst; DMA =
nki/get-started/about/nki-dma-overview.rst; DBW = nki/deep-dives/nki-dma-bandwidth-guide.rst; DGE =
nki/deep-dives/nki-dge.rst; THR = tools/neuron-explorer/overview-summary-page.rst; SCH =
tools/neuron-explorer/profile-schema-reference.rst; MMT =
general/nki/tutorials/matrix_multiplication.rst (the matmul tutorial's measured trn1 latencies, which pin the model:
bench/matmul_tutorial.py, tests/unit/test_cost_calibration.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from nkic.target.isa import Instr, Operand, per_opcode
from nkic.target.machine import DEFAULT_TARGET, PE_ARRAY, Target, get_target

__all__ = [
    "MIN_II", "DMA_FIXED_NS", "SP_DMA_ISSUE_CYCLES", "COSTS", "cost", "instr_cycles", "instr_ns", "dma_ns",
    "dma_efficiency", "dma_run_efficiency", "DMA_TABLE_RUN_BYTES", "DEPENDENT_LATENCY_CYCLES",
    "dependent_latency_ns", "occupancy_cycles", "occupancy_ns",
    "DMA_DESCRIPTOR_NS", "dma_descriptor_ns", "DMA_LATENCY_NS", "dma_transfer", "dma_core_bytes_per_ns", "PE_THROTTLE_WINDOW_NS",
    "PE_THROTTLE_UTILISATION", "PE_THROTTLE_RATE", "PE_THROTTLE_RAMP_NS", "pe_throttles", "shared_ports",
    "PORT_NAMES", "INSTRUCTION_RECORD_BYTES", "neff_launch_ns", "neff_teardown_ns",
]  # fmt: skip

MIN_II = 64  # minimum initiation interval of the data-path engines ("roughly 64 engine cycles" [SH])
DMA_FIXED_NS = 1300.0  # descriptor + sync + semaphore-to-start per transfer, ~1.3 µs [DBW]
SP_DMA_ISSUE_CYCLES = 64  # estimate: a DMA trigger costs the issuing sequencer about one MIN_II
DMA_ROWS_PER_ENGINE = 8  # a transfer uses one DMA engine per 8 partitions
DMA_MAX_ENGINES = 16  # DMA engines per core
# estimate, the compiler's planning figure: ≈86% of peak at 2 KiB contiguous, ≈93% at 4 KiB (the simulator's
# timeline uses the calibrated DMA_TIMELINE_HALF_EFFICIENCY_BYTES)
DMA_HALF_EFFICIENCY_BYTES = 320.0

CostFn = Callable[[Instr, Target], int]
COSTS: dict[str, CostFn] = {}


def cost(*opcodes: str) -> Callable[[CostFn], CostFn]:
    """Register the cycle cost of ``opcodes``: ``fn(instr, target) -> cycles``."""
    return per_opcode(COSTS, "cost", *opcodes)


def _free(op: Operand | None) -> int:
    return op.free_size if op is not None else 1


def _main(ins: Instr) -> Operand | None:
    """The operand whose free size drives the cost: the first input when present, else the destination."""
    return ins.operand(1) or ins.operand(0)


def _enum_name(ins: Instr, prop: str) -> str:
    try:
        return str(ins.value(prop))
    except ValueError:
        return ""


@cost("SEM_WAIT")
def _sem_wait(ins: Instr, t: Target) -> int:
    return 1  # estimate: a pure semaphore wait costs one sequencer cycle once satisfied


@cost("DMA_COPY", "DMA_COMPUTE")
def _dma_issue(ins: Instr, t: Target) -> int:
    return SP_DMA_ISSUE_CYCLES  # the transfer itself runs on its queue: dma_ns


@cost("DEBUG_PRINT")
def _debug_print_issue(ins: Instr, t: Target) -> int:
    """Estimate (nothing is published): SP triggers the copy to the host's debug buffer like any DMA,
    ``SP_DMA_ISSUE_CYCLES``; the transfer itself is priced by :func:`dma_ns` on its queue, the tile's bytes read
    once and written once to the host (the fixed descriptor cost dominates a debug-sized tile)."""
    return SP_DMA_ISSUE_CYCLES


@cost("MATMUL")
def _matmul(ins: Instr, t: Target) -> int:
    """``max(min(64, M), N)`` (M, N the stationary and moving free sizes, halved in double_row mode, which computes
    two fp8 products per PE and cycle: twice the FLOPs in the same time). fp32 inputs cost ×4, ×2 in transpose mode
    or when every fp32 input carries its ``is_*_onezero`` hint (the "2× better" of the ISA docs).

    Tiling mode (estimate, amortised): matmuls on disjoint PE tiles run concurrently, so one occupies the in-order
    PE queue for its full-array time × the fraction of the array its tile covers; a full set of tiles then costs
    what one full-array matmul does. The model does not check that neighbouring tiled matmuls are disjoint.
    """
    stat, mov = ins.operand("stationary"), ins.operand("moving")
    pack = 2 if ins.flag("double_row") else 1
    cycles = max(min(MIN_II, _free(stat) // pack), _free(mov) // pack)
    fp32 = {role for role, op in (("stationary", stat), ("moving", mov)) if op is not None and op.dtype == "float32"}
    if fp32:
        hinted = all(ins.flag(f"is_{role}_onezero") for role in fp32)
        cycles *= 2 if ins.flag("is_transpose") or hinted else 4
    rows, cols = ins.imm("tile_rows") or PE_ARRAY, ins.imm("tile_cols") or PE_ARRAY
    return max(1, math.ceil(cycles * rows * cols / (PE_ARRAY * PE_ARRAY)))


@cost("TRANSPOSE")
def _transpose(ins: Instr, t: Target) -> int:
    """PE: ``max(P, min(64, F))``; DVE: ``max(64, N)``."""
    src = ins.operand("src")
    if ins.engine == "pe":
        parts = src.num_partitions if src is not None else 1
        return max(parts, min(MIN_II, _free(src)))
    return max(MIN_II, _free(_main(ins)))


@cost("TENSOR_TENSOR")
def _tensor_tensor(ins: Instr, t: Target) -> int:
    """``max(64, N)`` with one input in PSUM and the other in SBUF, or for all-BF16 add/subtract/multiply;
    otherwise ``max(64, 2N)`` (two SBUF reads share the port)."""
    a, b = ins.operand("in0"), ins.operand("in1")
    all_bf16 = all(op is not None and op.dtype == "bfloat16" for op in (ins.operand("dst"), a, b))
    return _two_inputs(ins, all_bf16 and _enum_name(ins, "op") in ("add", "subtract", "multiply"))


def _two_inputs(ins: Instr, fast: bool = False) -> int:
    """``max(64, N)`` when in0/in1 are one PSUM and one SBUF operand (or ``fast``), else ``max(64, 2N)``."""
    a, b = ins.operand("in0"), ins.operand("in1")
    n = _free(a)
    mems = {op.memory for op in (a, b) if op is not None}
    return max(MIN_II, n) if fast or mems == {"psum", "sbuf"} else max(MIN_II, 2 * n)


@cost("TENSOR_TENSOR_SCAN")
def _tensor_tensor_scan(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): a two-input VectorE pass, as TENSOR_TENSOR without its BF16 fast ops."""
    return _two_inputs(ins)


@cost("TENSOR_COPY_PREDICATED", "BN_STATS", "BN_AGGR")
def _one_pass_vector(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): one VectorE pass over the main operand, ``max(64, N)``."""
    return max(MIN_II, _free(_main(ins)))


def _accumulating(ins: Instr, slot: str) -> int:
    """``max(64, N)`` over ``slot``, ``+64`` when the instruction accumulates into the reduce registers."""
    cycles = max(MIN_II, _free(ins.operand(slot)))
    accumulates = _enum_name(ins, "reduce_cmd") in ("reduce", "reset_reduce", "load_reduce")
    if accumulates or ins.operand("reduce_res") is not None:
        cycles += MIN_II
    return cycles


@cost("SELECT_REDUCE")
def _select_reduce(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): as ACTIVATE, ``max(64, N)``, ``+64`` when it accumulates."""
    return _accumulating(ins, "on_true")


@cost("EXPONENTIAL")
def _exponential(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): as ACTIVATE, ``max(64, N)``, ``+64`` when it accumulates."""
    return _accumulating(ins, "src")


@cost("TENSOR_SCALAR", "TENSOR_COPY")
def _one_input(ins: Instr, t: Target) -> int:
    """``max(64, N)``."""
    return max(MIN_II, _free(_main(ins)))


@cost("MEMSET")
def _memset(ins: Instr, t: Target) -> int:
    """``max(64, N)``; ``N/2`` for zero in BF16/FP16."""
    dst = ins.operand("dst")
    n = _free(dst)
    if dst is not None and dst.dtype in ("bfloat16", "float16") and ins.imm("value") == 0:
        return max(1, n // 2)
    return max(MIN_II, n)


@cost("TENSOR_REDUCE")
def _reduce(ins: Instr, t: Target) -> int:
    """``N``; ``N/2`` for BF16 add/max."""
    src = ins.operand("src")
    n = _free(src)
    if src is not None and src.dtype == "bfloat16" and _enum_name(ins, "op") in ("add", "maximum"):
        return max(1, n // 2)
    return max(1, n)


@cost("ACTIVATE")
def _activate(ins: Instr, t: Target) -> int:
    """``max(64, N)`` whatever scale/bias; ``+64`` when it accumulates into the reduce registers."""
    return _accumulating(ins, "src")


@cost("ACTIVATE2")
def _activate2(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): as ACTIVATE, whose scale/bias stage is free, ``max(64, N)``; ``+64`` when it
    accumulates into the reduce registers or reads them out."""
    return _accumulating(ins, "src")


@cost("TENSOR_SCALAR_REDUCE", "TENSOR_SCALAR_CUMULATIVE")
def _tensor_scalar_reduce(ins: Instr, t: Target) -> int:
    """``max(64, N) + 64`` (published for TENSOR_SCALAR_REDUCE; an estimate for the cumulative form)."""
    return max(MIN_II, _free(ins.operand("src"))) + MIN_II


@cost("SCALAR_TENSOR_TENSOR")
def _scalar_tensor_tensor(ins: Instr, t: Target) -> int:
    """``2N``."""
    return max(1, 2 * _free(ins.operand("data")))


@cost("RECIPROCAL")
def _reciprocal(ins: Instr, t: Target) -> int:
    """``max(64, 8N)`` (an iterative divide on VectorE)."""
    return max(MIN_II, 8 * _free(ins.operand("src")))


@cost("RANGE_SELECT")
def _range_select(ins: Instr, t: Target) -> int:
    """Estimate: ``max(64, N)`` like a one-input VectorE op, ``+64`` when it accumulates (as ACTIVATE)."""
    return _accumulating(ins, "on_true")


@cost("TENSOR_PARTITION_REDUCE")
def _partition_reduce(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): a GpSimd pass like iota/affine_select, ``150 + N``, plus one step per partition."""
    src = ins.operand("src")
    return 150 + _free(src) + (src.num_partitions if src is not None else 1)


@cost("MAX8", "FIND_INDEX8", "MATCH_REPLACE8")
def _top8(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): one VectorE pass over the searched operand, ``max(64, N)``."""
    return max(MIN_II, _free(ins.operand("src")))


@cost("NONZERO_WITH_COUNT")
def _nonzero_with_count(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): a GpSimd pass like iota, ``150 + N`` over the source row (the 8 cores work in
    parallel, one row each)."""
    return 150 + _free(ins.operand("src"))


@cost("TOPK")
def _topk(ins: Instr, t: Target) -> int:
    """``4n + K`` (published; the 8 GpSimd cores each run one 16-partition group in parallel)."""
    return 4 * ins.imm("n") + _free(ins.operand("dst"))
@cost("LOCAL_GATHER")
def _local_gather(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): a GpSimd pass, ``150 + N`` with N the elements each partition receives (the eight
    cores gather in parallel)."""
    return 150 + _free(ins.operand("dst"))


@cost("NC_N_GATHER")
def _nc_n_gather(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): NKI documents ``ceil(N / 512)`` underlying instructions for N gathered elements per
    partition; each is priced as a GpSimd pass, ``150 + its elements``."""
    n = _free(ins.operand("dst"))
    return 150 * math.ceil(n / 512) + n


@cost("NC_STREAM_SHUFFLE")
def _nc_stream_shuffle(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): a one-input VectorE pass over the free elements, ``max(64, N)``."""
    return max(MIN_II, _free(ins.operand("src")))


@cost("SEQUENCE_BOUNDS")
def _sequence_bounds(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): a forward and a backward GpSimd scan, ``150 + 2N``."""
    return 150 + 2 * _free(ins.operand("src"))


@cost("IOTA", "AFFINE_SELECT")
def _pattern_ops(ins: Instr, t: Target) -> int:
    """``150 + N`` (GpSimd)."""
    return 150 + _free(ins.operand("dst"))


@cost("RNG", "RAND2", "DROPOUT")
def _random(ins: Instr, t: Target) -> int:
    """``max(64, N)``: the published one-input VectorE figure for dropout; for rng and rand2 (and rng on GpSimd) an
    estimate (unpublished), the same one pass writing dst."""
    return max(MIN_II, _free(ins.operand("dst")))


@cost("SET_RNG_SEED", "RAND_SET_STATE", "RAND_GET_STATE")
def _rng_state(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): moving at most 24 words per lane to or from the generators costs one minimum
    initiation interval, 64 cycles."""
    return MIN_II
@cost("QUANTIZE_MX")
def _quantize_mx(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): one VectorE pass over the source, ``max(64, N_src)``."""
    return max(MIN_II, _free(ins.operand("src")))


@cost("MATMUL_MX")
def _matmul_mx(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): as MATMUL, ``max(min(64, M), N)``, the moving tile streaming one packed element
    (4 values of the contraction) per PE column per cycle; the scales travel with their data."""
    stat, mov = ins.operand("stationary"), ins.operand("moving")
    return max(min(MIN_II, _free(stat)), _free(mov))


def instr_cycles(instr: Instr, target: str | Target = DEFAULT_TARGET) -> int:
    """Cycles ``instr`` occupies its engine, in that engine's clock.

    Not modelled: the gen3/gen4 VectorE perf modes, the >16 B innermost-stride penalty, dependent-instruction
    latency and PE throttling. GpSimd has no published per-op table beyond iota/affine_select; it is taken to follow
    the VectorE formulas.
    """
    fn = COSTS.get(instr.opcode)
    if fn is None:
        raise ValueError(f"no cost registered for opcode {instr.opcode}")
    return fn(instr, get_target(target))


def instr_ns(instr: Instr, target: str | Target = DEFAULT_TARGET) -> float:
    """Engine occupancy in ns: ``instr_cycles / clock_GHz``."""
    t = get_target(target)
    return instr_cycles(instr, t) / t.clock_ghz[instr.engine]


def dma_efficiency(contiguous_bytes: float, half: float = DMA_HALF_EFFICIENCY_BYTES) -> float:
    """Fraction of per-engine peak reached with ``c`` contiguous bytes per row: ``c / (c + c½)`` (the compiler's
    planning figure; the simulator's timeline uses :func:`dma_run_efficiency`)."""
    return contiguous_bytes / (contiguous_bytes + half)


def dma_run_efficiency(contiguous_bytes: float, half: float | None = None) -> float:
    """Fraction of the per-engine table rate reached with runs of ``c`` contiguous bytes per partition, each run a
    descriptor with a fixed overhead worth ``c½`` bytes (``DMA_TIMELINE_HALF_EFFICIENCY_BYTES``), the table's rate
    being that of 8 KiB runs (``DMA_TABLE_RUN_BYTES``): ``min(1, [c / (c + c½)] / [8 KiB / (8 KiB + c½)])``."""
    half = DMA_TIMELINE_HALF_EFFICIENCY_BYTES if half is None else half
    c = max(contiguous_bytes, 1.0)
    at_table = DMA_TABLE_RUN_BYTES / (DMA_TABLE_RUN_BYTES + half)
    return min(1.0, c / (c + half) / at_table)


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


def _dma_shape(instr: Instr, t: Target,
               efficiency: Callable[[float], float] = dma_efficiency) -> tuple[float, int, float] | None:  # fmt: skip
    """``(bytes, engines, efficiency)`` of a DMA_COPY / DMA_COMPUTE (None when an operand is missing), the
    efficiency ``efficiency(contiguous bytes per row)``."""
    dst, srcs = instr.operand(0), [op for op in instr.operands[1:] if op is not None]
    if dst is not None and not srcs and not instr.spec.writes:
        srcs = [dst]  # a transfer out of the core (DEBUG_PRINT): the host buffer receives what src holds
    if dst is None or not srcs:
        return None
    nbytes = max(dst.num_elements * dst.itemsize, sum(op.num_elements * op.itemsize for op in srcs))
    rows = max(1, _rows(dst, srcs[0]))
    engines = min(DMA_MAX_ENGINES, math.ceil(rows / DMA_ROWS_PER_ENGINE))
    row_bytes = nbytes / rows
    contiguous = min(row_bytes, *(_contiguous_elems(op) * op.itemsize for op in (dst, *srcs)))
    eff = efficiency(max(contiguous, 1.0))
    if "transpose" in instr.spec.flags and instr.flag("transpose"):
        on_chip = {dst.memory, srcs[0].memory} <= {"sbuf", "psum"}
        eff *= 0.5 if on_chip else 0.9
    return float(nbytes), engines, eff


def dma_ns(instr: Instr, target: str | Target = DEFAULT_TARGET) -> float:
    """Transfer time of a DMA_COPY or DMA_COMPUTE alone on its queue, in ns (what the compiler plans with).

    ``t = 1300 + bytes / (engines · BW_e · eff(c))`` with ``engines = min(16, ceil(rows / 8))``, ``BW_e`` the
    target's per-engine bandwidth, ``c`` the contiguous bytes per row (the smallest over all sides) and ``eff``
    from :func:`dma_efficiency`. Transposes run at 90% (HBM↔SBUF) or 50% (SBUF→SBUF). ``bytes`` is the larger of
    what is written and what is read (all sources together: an estimate for DMA_COMPUTE, whose compute is taken
    to keep pace with the transfer). The simulator's timeline overlaps transfers instead (:func:`dma_transfer`).
    """
    t = get_target(target)
    shape = _dma_shape(instr, t)
    if shape is None:
        return DMA_FIXED_NS
    nbytes, engines, eff = shape
    return DMA_FIXED_NS + nbytes / (engines * t.dma_bytes_per_ns * eff)


CONTROL_CYCLES = 64  # estimate: a sequencer register operation or branch costs about one MIN_II


@cost("REG_ALU", "LOOP_BEGIN", "LOOP_END", "COUNTED_LOOP_BEGIN", "COUNTED_LOOP_END")
def _control(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): a register ALU operation or a branch, executed by each sequencer at a barrier."""
    return CONTROL_CYCLES


@cost("REG_LOAD", "REG_STORE")
def _register_memory(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): a 4-byte register load/store; the sequencers read SBUF/HBM at about DMA latency."""
    return 2 * CONTROL_CYCLES


# The LNC=2 pair. Nothing is published for either instruction; the figures are estimates.
LNC_SYNC_NS = 500.0  # estimate: a remote semaphore write to the other core plus the local wait seeing it
GPSIMD_SB2SB_FIXED_CYCLES = 2 * MIN_II  # estimate: GpSimd's internal DMA starts without descriptors or queues


@cost("CORE_BARRIER")
def _core_barrier(ins: Instr, t: Target) -> int:
    """Estimate (unpublished): one cross-core semaphore round, ``LNC_SYNC_NS``, paid after the last core arrived
    (the waiting itself is the simulator's)."""
    return math.ceil(LNC_SYNC_NS * t.clock_ghz[ins.engine])


@cost("SENDRECV")
def _sendrecv(ins: Instr, t: Target) -> int:
    """Estimate (unpublished). ``dma_engine.dma``: a DMA between the cores' SBUFs (:func:`dma_ns`, fixed cost and
    bandwidth) plus the CoreBarrier round ``LNC_SYNC_NS``. ``gpsimd_dma``: GpSimd's internal SBUF-to-SBUF DMA, a
    short fixed start plus one element per partition per cycle (it is limited to 1 KiB per partition)."""
    if "gpsimd_dma" in ins.spec.flags and ins.flag("gpsimd_dma"):
        return GPSIMD_SB2SB_FIXED_CYCLES + _free(ins.operand("src"))
    return math.ceil((dma_ns(ins, t) + LNC_SYNC_NS) * t.clock_ghz[ins.engine])


# -- The timeline model: what the simulator adds to the per-instruction figures -------------------------------------
#
# Each constant cites its public source (keys in the module docstring); "estimate" marks what is not published.

# Cycles (engine clock) from the end of an instruction's occupancy to its results being readable by a dependent
# instruction, on the same engine or, through a semaphore, on another one.
DEPENDENT_LATENCY_CYCLES: dict[str, int] = {
    # PG: RAW-dependent 1-element activations issue one every 189 ns on trn1 = 264 ScalarE cycles at 1.4 GHz; the
    # instruction itself occupies MIN_II = 64 of them, so 200 are latency.
    "act": 264 - MIN_II,
    # A2: VectorE instructions cost "~100 cycles more" in read-after-write chains.
    "dve": 100,
    # Estimate: GpSimd has no published figure; taken as VectorE's (it shares VectorE's SBUF ports on v2 [A2]).
    "pool": 100,
    # Estimate: no TensorE pipeline latency is published; PSUM taken readable one MIN_II after the matmul's
    # interval ends.
    "pe": MIN_II,
    "sp": 0,  # SyncE runs no data-path instruction
}

# TensorE throttling (gen3 and gen4 only) [THR]: after >= ~3 µs below 50% utilisation the PE is capped near 50% of
# its rate and ramps back to full over ~3 µs of sustained use.
PE_THROTTLE_WINDOW_NS = 3000.0
PE_THROTTLE_UTILISATION = 0.5
PE_THROTTLE_RATE = 0.5
PE_THROTTLE_RAMP_NS = 3000.0
PE_THROTTLE_SINCE = 3  # nc_version: THR describes trn2/trn3 only; trn1 is not throttled

# The DMA queues [DMA, DBW, DGE]. A transfer whose descriptors are generated at run time (a dynamic address: the
# descriptor generation engine) occupies its queue's generation ~600 ns (DGE: "Each hardware-DGE DMA instruction
# takes approximately 600 ns to execute"; software DGE on GpSimd publishes no figure and is taken as the same), one
# after another, while earlier transfers move data: descriptors pipeline. A static transfer's descriptors were
# built before the run (DGE, mode none: "pre-computed on the Trainium host before NEFF execution ... no on-device
# generation is needed", the "lowest per-transfer latency"), as nkic's NEFF carries them (each DMA's `dma` entry):
# it waits for no generation (dma_descriptor_ns). A
# transfer's first byte moves ~1.3 µs after its trigger (DBW: the fixed cost, "semaphore to start"). Its data then
# moves FIFO behind the queue's earlier transfers, at up to engines · BW_e, and all queues of a core share the
# core's 16 DMA engines: together at most 16 · BW_e, the per-core figure of the DMA/DBW table (trn1 272, trn2 368,
# trn3 528 GB/s). Contiguous runs below 8 KiB per partition lose efficiency (dma_run_efficiency).
DMA_DESCRIPTOR_NS = 600.0


def dma_descriptor_ns(instr: Instr) -> float:
    """How long ``instr``'s descriptors hold its queue's descriptor generation: ``DMA_DESCRIPTOR_NS`` when an
    operand's address is dynamic (generated at run time), 0 for a static transfer (descriptors built before the
    run)."""
    return DMA_DESCRIPTOR_NS if any(op is not None and op.dyn for op in instr.operands) else 0.0
DMA_LATENCY_NS = DMA_FIXED_NS
# DMA efficiency on the timeline (dma_run_efficiency), from the documented mechanism and the training set. A
# transfer is a gather list of contiguous buffers, at least one per partition [A2, DMA], each a descriptor the engine
# processes with a fixed overhead ("the fundamental problem is per-packet overhead", DBW), so runs of c contiguous
# bytes move at c / (c + c½) of the engine's raw rate. The per-engine rate of the DMA/DBW table (17/23/33 B/ns) is
# what DMA's own measurement reaches: one engine moving a [4, 4096] bf16 tile, 8 KiB per partition, in 1416 ns =
# 23.1 B/ns, the trn2 figure. So runs of 8 KiB and more move at the table rate (the documented per-engine figure is
# never exceeded), shorter ones at (c / (c + c½)) / (8 KiB / (8 KiB + c½)) of it.
DMA_TABLE_RUN_BYTES = 8192
# c½ is the one number the documents leave open. Fitted on the training set only (MMT): its three DMA-bound kernels
# load [128, 512] bf16 tiles (1 KiB per partition) and move 100-104 GB/s on trn1 (5.0 GiB in 51.80 ms, 4.06 GiB in
# 42.96 ms, 2.06 GiB in 22.07 ms); c½ = 4/3 KiB keeps those runs at half the table rate, as the earlier fit did
# (c / (c + 1 KiB) of the table rate, which never reached it: 89% at 8 KiB, so DMA's transfer came out 13% slow).
# The curve: 18% at 256 B, 32% at 512 B, 50% at 1 KiB, 70% at 2 KiB ("256 B - 2 KiB improving but still below
# peak", DBW), 88% at 4 KiB ("at 4096 free bytes, we are able to nearly saturate DMA bandwidth", DMA), 100% from
# 8 KiB. Not taken: saturation at 4 KiB (DBW's ">= 4 KiB ... saturates the DMA engines", with the runtime's 4 KiB
# packets, CCO: neuron-runtime/explore/compute-comm-overlap.rst): with c½ = 2 KiB, which keeps MMT's 1 KiB
# kernels, it put MMT's fully optimized kernel (2 and 4 KiB runs) at 93.9% of the PE roofline against the published
# 85%. The compiler keeps planning with DMA_HALF_EFFICIENCY_BYTES (320 B, an older estimate) so that the
# schedules, and the NEFF bytes, do not move with the timeline model.
DMA_TIMELINE_HALF_EFFICIENCY_BYTES = 4096.0 / 3.0

# VectorE fast modes (gen3+) [A3, A4]: 2-byte float data in SBUF, unit innermost stride on every operand: copies and
# tensor_scalar at 4x, or 2x when a side is in PSUM or strided; two-input tensor_tensor at 1x instead of the 2x
# penalty of two SBUF inputs (A3's "BF16 tensor_tensor 2x").
NO_FLOOR = frozenset({"SEM_WAIT"})  # a pure wait streams no data: no initiation interval
DVE_FAST_DTYPES = frozenset({"bfloat16", "float16"})
DVE_FAST_SINCE = 3
DVE_FAST_ONE_INPUT = frozenset({"TENSOR_COPY", "TENSOR_SCALAR"})
# Per-dtype rates of NeuronCore-v4 [A4, trainium3_arch.rst's engine table]: VectorE "512 BF16/FP16/FP8, 256 other"
# elements per cycle (FP8 joins the performance modes); ScalarE "256 BF16/FP16/FP8, 128 other", which the hardware
# notes place on its tensor_scalar/tensor_copy ("v4 BF16 ÷2"); VectorE's exponential at "4x ScalarE's exp rate".
FP8_DTYPES = frozenset({"float8_e4m3", "float8_e5m2", "float8_e4m3fn"})
PER_DTYPE_SINCE = 4
ACT_FAST_ONE_INPUT = frozenset({"TENSOR_COPY", "TENSOR_SCALAR"})
DVE_EXP_SPEEDUP = 4


def _fast_dtypes(t: Target) -> frozenset[str]:
    return DVE_FAST_DTYPES | FP8_DTYPES if t.nc_version >= PER_DTYPE_SINCE else DVE_FAST_DTYPES


def _act_fast(ins: Instr, t: Target) -> bool:
    """Whether a ScalarE tensor_scalar/tensor_copy streams only 2-byte floats or FP8 (gen4's 2x) [A4]."""
    if ins.engine != "act" or t.nc_version < PER_DTYPE_SINCE or ins.opcode not in ACT_FAST_ONE_INPUT:
        return False
    ops = [op for op in ins.operands if op is not None and op.memory in ("sbuf", "psum")]
    main = [op for op in ops if op.num_partitions > 1 or op.free_size > 1]
    return bool(main) and all(op.dtype in _fast_dtypes(t) for op in main)


def dependent_latency_ns(engine: str, target: str | Target = DEFAULT_TARGET) -> float:
    t = get_target(target)
    return DEPENDENT_LATENCY_CYCLES.get(engine, 0) / t.clock_ghz[engine]


def _unit_inner(op: Operand) -> bool:
    pairs = op.pattern[1:] if op.memory in ("sbuf", "psum") else op.pattern
    inner = [step for step, num in pairs if num > 1]
    return not inner or inner[-1] == 1


def _dve_fast_divisor(ins: Instr, t: Target) -> int:
    """1, 2 or 4: the VectorE fast mode an instruction runs in (gen3+, 2-byte floats only) [A3, A4]."""
    if ins.engine != "dve" or t.nc_version < DVE_FAST_SINCE:
        return 1
    ops = [op for op in ins.operands if op is not None and op.memory in ("sbuf", "psum")]
    main = [op for op in ops if op.num_partitions > 1 or op.free_size > 1]  # (P, 1) scalars do not stream
    if not main or any(op.dtype not in _fast_dtypes(t) for op in main):
        return 1
    if ins.opcode in DVE_FAST_ONE_INPUT:
        slow_side = any(op.memory == "psum" or not _unit_inner(op) for op in main)
        return 2 if slow_side else 4
    return 1


def occupancy_cycles(instr: Instr, target: str | Target = DEFAULT_TARGET) -> int:
    """Cycles the simulator's timeline holds ``instr``'s engine: :func:`instr_cycles` with the calibrated effects.

    * A floor of MIN_II for every data-path instruction (the minimum initiation interval [SH]; A2: "MM on a loaded
      stationary: max(N_mov, 64)"), so a (128, 4) reduce costs 64 cycles, not 4. TensorE tiling mode scales it by
      the tile's share of the array (tiles run concurrently).
    * VectorE fast modes (gen3+): copies / tensor_scalar ÷4 (÷2 with a PSUM or strided side); tensor_tensor on
      2-byte floats in SBUF costs ``max(64, N)``, not ``2N`` [A3].
    * Per-dtype rates (gen4): FP8 in VectorE's performance modes, ScalarE's tensor_scalar/tensor_copy at 2x on
      2-byte floats and FP8, VectorE's exponential at 4x [A4].
    * Wide strides (gen2): an SBUF port moves 128 elements per cycle when the innermost stride is at most 16 bytes
      and half that otherwise [A2], so a VectorE/ScalarE/GpSimd instruction with such an operand takes twice as long.
    """
    t = get_target(target)
    cycles = instr_cycles(instr, t)
    if instr.engine == "sp" or instr.opcode in NO_FLOOR or instr.spec.traits & {"control", "dma"}:
        return cycles
    if instr.engine == "dve" and t.nc_version >= DVE_FAST_SINCE:
        if instr.opcode == "TENSOR_TENSOR" and _dve_fast_divisor_tt(instr, t):
            cycles = max(MIN_II, _free(instr.operand("in0")))
        elif instr.opcode == "EXPONENTIAL" and t.nc_version >= PER_DTYPE_SINCE:
            cycles //= DVE_EXP_SPEEDUP
        else:
            cycles //= _dve_fast_divisor(instr, t)
    if _act_fast(instr, t):
        cycles //= 2
    if t.nc_version <= WIDE_STRIDE_UNTIL and instr.engine in ("dve", "act", "pool") and _wide_stride(instr):
        cycles *= 2
    floor = MIN_II
    if instr.opcode == "MATMUL":  # concurrent tiles share the floor as they share the array
        rows, cols = instr.imm("tile_rows") or PE_ARRAY, instr.imm("tile_cols") or PE_ARRAY
        floor = max(1, MIN_II * rows * cols // (PE_ARRAY * PE_ARRAY))
    return max(floor, cycles)


# A2 (trainium_inferentia2_arch.rst): SBUF access runs at full rate for an innermost stride of at most 16 bytes,
# at half rate beyond. The later guides (A3, A4) state their own access rates through the performance modes.
WIDE_STRIDE_BYTES = 16
WIDE_STRIDE_UNTIL = 2  # nc_version


def _wide_stride(ins: Instr) -> bool:
    """Whether an SBUF operand that streams (more than one element per partition) steps more than 16 bytes
    between consecutive elements of its innermost dimension."""
    for op in ins.operands:
        if op is None or op.memory != "sbuf" or op.free_size <= 1:
            continue
        inner = [step for step, num in op.pattern[1:] if num > 1]
        if inner and abs(inner[-1]) * op.itemsize > WIDE_STRIDE_BYTES:
            return True
    return False


def _dve_fast_divisor_tt(ins: Instr, t: Target) -> bool:
    """Whether a VectorE tensor_tensor streams 2-byte floats (gen4: or FP8) from SBUF on every side, unit-stride
    (A3's 2x)."""
    ops = [ins.operand(s) for s in ("dst", "in0", "in1")]
    return all(op is not None and op.memory == "sbuf" and op.dtype in _fast_dtypes(t) and _unit_inner(op)
               for op in ops)  # fmt: skip


def occupancy_ns(instr: Instr, target: str | Target = DEFAULT_TARGET) -> float:
    t = get_target(target)
    return occupancy_cycles(instr, t) / t.clock_ghz[instr.engine]


def pe_throttles(target: str | Target = DEFAULT_TARGET) -> bool:
    return get_target(target).nc_version >= PE_THROTTLE_SINCE


def dma_core_bytes_per_ns(target: str | Target = DEFAULT_TARGET) -> float:
    """The per-core DMA cap shared by all queues: 16 engines at the per-engine rate [DMA, DBW]."""
    return DMA_MAX_ENGINES * get_target(target).dma_bytes_per_ns


def dma_transfer(instr: Instr, target: str | Target = DEFAULT_TARGET) -> tuple[float, float]:
    """``(work, max_rate)`` of a transfer for the timeline: ``work`` = bytes / efficiency (the bytes the engines
    would move at full efficiency in the same time), ``max_rate`` = its engines' bandwidth in bytes/ns."""
    t = get_target(target)
    shape = _dma_shape(instr, t, dma_run_efficiency)
    if shape is None:
        return 0.0, t.dma_bytes_per_ns
    nbytes, engines, eff = shape
    return nbytes / eff, engines * t.dma_bytes_per_ns


# -- NEFF launch and teardown ------------------------------------------------------------------------------------
#
# Nothing publishes how long a NEFF execution takes to start or to finish; the cost follows from documented
# mechanisms. Launch: each engine "has its own sequencer, which is responsible for instruction fetch, decode, and
# issue" (A2), and the instructions come from HBM by DMA, the runtime building the descriptors of the "instruction
# fetch DMAs for TPB engines" (DEVMEM: neuron-runtime/explore/device-memory.rst, DMA rings). An engine issues its
# first instruction once its first fetch has landed: one DMA's fixed cost, "descriptor setup, synchronization, and
# semaphore-to-start latency (~1300 ns cross-engine)" (DBW), then one instruction record at the per-engine rate.
# Later fetches run ahead of execution: a record moves in 2-4 ns at 17-33 B/ns, far inside the 64-cycle minimum
# initiation interval, so fetching never limits the issue rate after the first. Teardown: a run ends with opcodes the
# profiler leaves out of the execution time as setup/teardown (SCH, total_exec_time: "NOP, SET_ORDERING_MODE,
# EVENT_SEMAPHORE, EVENT_SEMAPHORE_RANGE_CLEAR, NOTIFY, COMPARE_BRANCH, DRAIN, WRITE, ..."): DRAIN waits for the
# outstanding transfers (the simulator's end already does), and the completion the runtime waits for is a WRITE, the
# run-time form of a PSEUDO_DMA_TRIGGER ("operands: data=0x1,0x1 size=4,4", SCH compiler_opcode): a DMA of 4 bytes,
# landing one fixed DMA cost later. The record size is nkic's own (runtime/ISA_FORMAT.md): the hardware's
# encoding is not published.
INSTRUCTION_RECORD_BYTES = 64


def neff_launch_ns(target: str | Target = DEFAULT_TARGET) -> float:
    """From the start of a NEFF execution to its engines' first issue: the first instruction fetch's DMA."""
    return DMA_FIXED_NS + INSTRUCTION_RECORD_BYTES / get_target(target).dma_bytes_per_ns


def neff_teardown_ns(target: str | Target = DEFAULT_TARGET) -> float:
    """From the last instruction's or transfer's end to the end of the execution: the completion WRITE's DMA."""
    return DMA_FIXED_NS + 4 / get_target(target).dma_bytes_per_ns


# -- Shared SBUF/PSUM ports: engines that cannot access a memory at the same time -----------------------------------
#
# A2 (trainium_inferentia2_arch.rst, NeuronCore-v2): "VectorE and GpSimd share SBUF access" and "VectorE and ScalarE
# share PSUM access": their accesses are serialized. A3 (trainium2_arch.rst, NeuronCore-v3) removes both conflicts
# (PSUM in parallel when the banks differ), except that VectorE's performance modes (the 2x/4x of
# :func:`_dve_fast_divisor`) borrow GpSimd's SBUF bus, "with hardware arbitration". A4 keeps v3's arrangement.
# The simulator holds a port for the whole occupancy of an instruction that needs it (a streaming instruction reads
# and writes for its whole duration), so two-input elementwise work, which the formulas already price at 2N for two
# SBUF reads through one port, is bound by the port whichever of VectorE or GpSimd runs it.
PORT_NAMES = {"sbuf-dve-pool": "the SBUF port VectorE and GpSimd share", "psum-dve-act": "the PSUM port VectorE and "
              "ScalarE share", "pool-bus": "GpSimd's SBUF bus (VectorE's performance modes borrow it)"}  # fmt: skip
SHARED_PORTS_UNTIL = 2  # nc_version: v2 shares the ports [A2]; v3 and v4 do not [A3, A4]


def _touches(ins: Instr, memory: str) -> bool:
    return any(op is not None and op.memory == memory for op in ins.operands)


def _dve_perf_mode(ins: Instr, t: Target) -> bool:
    """Whether a VectorE instruction runs in a performance mode (gen3+): the fast one-input modes or the 2-byte
    tensor_tensor [A3]."""
    if ins.engine != "dve" or t.nc_version < DVE_FAST_SINCE:
        return False
    if ins.opcode == "TENSOR_TENSOR":
        return _dve_fast_divisor_tt(ins, t)
    return _dve_fast_divisor(ins, t) > 1


def shared_ports(instr: Instr, target: str | Target = DEFAULT_TARGET) -> tuple[str, ...]:
    """The shared memory ports ``instr`` holds while it occupies its engine (keys of :data:`PORT_NAMES`)."""
    t = get_target(target)
    if instr.engine not in ("dve", "pool", "act") or instr.spec.traits & {"control", "dma"}:
        return ()
    ports: list[str] = []
    if t.nc_version <= SHARED_PORTS_UNTIL:
        if instr.engine in ("dve", "pool") and _touches(instr, "sbuf"):
            ports.append("sbuf-dve-pool")
        if instr.engine in ("dve", "act") and _touches(instr, "psum"):
            ports.append("psum-dve-act")
    elif (instr.engine == "pool" and _touches(instr, "sbuf")) or _dve_perf_mode(instr, t):
        ports.append("pool-bus")
    return tuple(ports)
