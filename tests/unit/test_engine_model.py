"""The documented engine effects of ``target/costs.py`` beyond the per-instruction formulas, instruction by
instruction: the wide-stride SBUF access rate of NeuronCore-v2 (A2), NeuronCore-v4's per-dtype rates (A4), the DMA
efficiency of contiguous runs (DMA, DBW), and where each does not apply."""

from __future__ import annotations

import pytest

from nkic.target.costs import (
    DMA_TABLE_RUN_BYTES,
    MIN_II,
    WIDE_STRIDE_BYTES,
    dma_run_efficiency,
    dma_transfer,
    occupancy_cycles,
)
from nkic.target.isa import Instr, Operand
from nkic.target.machine import get_target


def _copy(engine: str, step: int, dtype: str = "float32", n: int = 512) -> Instr:
    """A tensor_copy of n elements per partition whose source steps ``step`` elements (the destination is dense)."""
    dst = Operand("sbuf", dtype, ((1, 128), (1, n)))
    src = Operand("sbuf", dtype, ((1, 128), (step, n)))
    return Instr("TENSOR_COPY", engine, (dst, src))


@pytest.mark.parametrize("engine", ["dve", "act", "pool"])
def test_wide_strides_halve_the_sbuf_rate_on_trn1(engine: str) -> None:
    dense = occupancy_cycles(_copy(engine, 1), "gen2")
    assert dense == 512
    # 4 fp32 elements = 16 bytes is still full rate; 5 (20 bytes) is beyond it
    assert 4 * 4 == WIDE_STRIDE_BYTES
    assert occupancy_cycles(_copy(engine, 4), "gen2") == dense
    assert occupancy_cycles(_copy(engine, 5), "gen2") == 2 * dense
    assert occupancy_cycles(_copy(engine, 8, "bfloat16"), "gen2") == dense  # 16 bytes of bf16
    assert occupancy_cycles(_copy(engine, 9, "bfloat16"), "gen2") == 2 * dense


def test_wide_strides_follow_the_generation() -> None:
    # trn2's access rates are the performance modes' (A3): a strided fp32 copy keeps max(64, N)
    assert occupancy_cycles(_copy("dve", 8), "gen3") == occupancy_cycles(_copy("dve", 1), "gen3") == 512
    # a (P, 1) scalar operand does not stream: no penalty whatever its step
    assert occupancy_cycles(_copy("act", 64, n=1), "gen2") == MIN_II


def _dense(engine: str, opcode: str, dtype: str, n: int = 512) -> Instr:
    op = Operand("sbuf", dtype, ((1, 128), (1, n)))
    return Instr(opcode, engine, (op, op))


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3"])
def test_trn3_per_dtype_rates(dtype: str) -> None:
    # ScalarE's copy: 2x on 2-byte floats and FP8 on trn3 only [A4]; fp32 keeps max(64, N)
    assert occupancy_cycles(_dense("act", "TENSOR_COPY", dtype), "gen4") == 256
    assert occupancy_cycles(_dense("act", "TENSOR_COPY", dtype), "gen3") == 512
    assert occupancy_cycles(_dense("act", "TENSOR_COPY", "float32"), "gen4") == 512
    # VectorE's performance mode takes FP8 on trn3, not on trn2
    fp8_on_trn2 = 512 if dtype.startswith("float8") else 128
    assert occupancy_cycles(_dense("dve", "TENSOR_COPY", dtype), "gen4") == 128
    assert occupancy_cycles(_dense("dve", "TENSOR_COPY", dtype), "gen3") == fp8_on_trn2


def test_trn3_vector_exponential_at_four_times() -> None:
    op = Operand("sbuf", "float32", ((1, 128), (1, 2048)))
    exp = Instr("EXPONENTIAL", "dve", (op, op))
    assert occupancy_cycles(exp, "gen4") * 4 == occupancy_cycles(exp, "gen3") == 2048


# -- DMA efficiency: per-run descriptor overhead, the table rate at 8 KiB runs (target/costs.py) ------------------


def _load(rows: int, cols: int, dtype: str = "bfloat16", hbm_step: int = 1) -> Instr:
    """One HBM -> SBUF DMA_COPY of [rows, cols]; ``hbm_step`` > 1 reads every step-th element (element-strided)."""
    dst = Operand("sbuf", dtype, ((1, rows), (1, cols)))
    src = Operand("hbm", dtype, ((cols * hbm_step, rows), (hbm_step, cols)), var_id=0)
    return Instr("DMA_COPY", "sp", (dst, src), (0,))


def test_dma_overview_transfer_moves_at_the_table_rate() -> None:
    # DMA overview: one [4, 4096] bf16 load (8 KiB per partition, one engine) took 1416 ns, the trn2 table's 23 B/ns
    work, rate = dma_transfer(_load(4, 4096), "gen3")
    assert rate == get_target("gen3").dma_bytes_per_ns == 23.0
    assert work == 4 * 4096 * 2 and work / rate == pytest.approx(1424.7, abs=0.1)
    assert dma_run_efficiency(DMA_TABLE_RUN_BYTES) == dma_run_efficiency(4 * DMA_TABLE_RUN_BYTES) == 1.0


def test_dma_efficiency_falls_with_the_run_size_as_documented() -> None:
    sizes = [64, 256, 512, 1024, 2048, 4096, 8192]
    effs = [dma_run_efficiency(c) for c in sizes]
    assert effs == sorted(effs) and len(set(effs)) == len(effs)
    # DBW: "< 256 B per partition: severely overhead-bound", "256 B - 2 KiB: improving but still below peak";
    # DMA: "at 4096 free bytes, we are able to nearly saturate DMA bandwidth"
    assert effs[0] < 0.1 and effs[1] < 0.2 and 0.6 < effs[4] < 0.8 and 0.85 < effs[5] < 1.0
    assert dma_run_efficiency(1024) == pytest.approx(0.5)  # the MMT fit: 1 KiB rows at half the table rate
    # per transfer: [128, 1024] bf16 (2 KiB per partition, 16 engines) at 70% of 16 engines' rate
    work, rate = dma_transfer(_load(128, 1024), "gen3")
    assert rate == 16 * 23.0 and work == pytest.approx(128 * 1024 * 2 / dma_run_efficiency(2048))
    # the DMA overview's [128, 128] bf16 example: 2 KiB per engine, but 256 B per partition
    assert dma_transfer(_load(128, 128), "gen3")[0] == pytest.approx(128 * 128 * 2 / dma_run_efficiency(256))


def test_element_strided_dma_is_one_descriptor_per_element() -> None:
    # reading every other bf16 element: 2-byte runs, each its own descriptor
    contiguous, strided = dma_transfer(_load(128, 2048), "gen3"), dma_transfer(_load(128, 2048, hbm_step=2), "gen3")
    assert contiguous[0] == pytest.approx(128 * 2048 * 2 / dma_run_efficiency(4096))
    assert strided[0] / contiguous[0] == pytest.approx(dma_run_efficiency(4096) / dma_run_efficiency(2))
    assert strided[0] / contiguous[0] > 400
