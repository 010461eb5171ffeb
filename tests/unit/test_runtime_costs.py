"""The cost model's per-opcode formulas (``nkic.target.costs``)."""

from __future__ import annotations

import pytest

from nkic.target.costs import DMA_FIXED_NS, dma_efficiency, dma_ns, instr_cycles, instr_ns
from nkic.target.isa import Instr, Operand
from nkic.target.machine import TARGETS, get_target
from nkic.target.vocab import ALU_OPS, REDUCE_CMDS

ALU = dict(ALU_OPS.codes)


def tile(p: int, f: int, dtype: str = "bfloat16", memory: str = "sbuf") -> Operand:
    return Operand(memory, dtype, ((1, p), (1, f)))


@pytest.mark.parametrize(
    "m, n, dtype, want", [(128, 512, "bfloat16", 512), (128, 16, "bfloat16", 64), (8, 4, "bfloat16", 8),
                          (128, 512, "float32", 2048), (32, 16, "float32", 128)],
)  # fmt: skip
def test_matmul(m: int, n: int, dtype: str, want: int) -> None:
    ins = Instr("MATMUL", "pe", (tile(m, n, "float32", "psum"), tile(128, m, dtype), tile(128, n, dtype)))
    assert instr_cycles(ins) == want
    assert instr_ns(ins, "gen2") == pytest.approx(want / 2.8)


def test_pe_transpose() -> None:
    assert instr_cycles(Instr("TRANSPOSE", "pe", (tile(512, 128), tile(128, 512)))) == 128
    assert instr_cycles(Instr("TRANSPOSE", "pe", (tile(32, 16), tile(16, 32)))) == 32


def test_vector_and_scalar_tables() -> None:
    n = 512
    sb, ps = tile(128, n), tile(128, n, memory="psum")
    f32 = tile(128, n, "float32")
    assert instr_cycles(Instr("TENSOR_TENSOR", "dve", (sb, f32, f32), (ALU["add"],))) == 2 * n
    assert instr_cycles(Instr("TENSOR_TENSOR", "dve", (sb, ps, f32), (ALU["add"],))) == n
    assert instr_cycles(Instr("TENSOR_TENSOR", "dve", (sb, sb, sb), (ALU["multiply"],))) == n  # all-bf16
    assert instr_cycles(Instr("TENSOR_SCALAR", "dve", (sb, sb))) == n
    assert instr_cycles(Instr("TENSOR_SCALAR", "act", (tile(128, 8), tile(128, 8)))) == 64
    assert instr_cycles(Instr("TENSOR_SCALAR_REDUCE", "dve", (sb, sb))) == n + 64
    assert instr_cycles(Instr("RECIPROCAL", "dve", (sb, tile(128, 100)))) == 800
    assert instr_cycles(Instr("SCALAR_TENSOR_TENSOR", "dve", (sb, sb, None, sb))) == 2 * n
    assert instr_cycles(Instr("TENSOR_REDUCE", "dve", (tile(128, 1), f32), (ALU["add"],))) == n
    assert instr_cycles(Instr("TENSOR_REDUCE", "dve", (tile(128, 1), sb), (ALU["add"],))) == n // 2
    assert instr_cycles(Instr("MEMSET", "dve", (f32,))) == n and instr_cycles(Instr("MEMSET", "dve", (sb,))) == n // 2
    assert instr_cycles(Instr("ACTIVATE", "act", (sb, sb))) == n
    acc = Instr("ACTIVATE", "act", (sb, sb), (0, 0, 0, REDUCE_CMDS.code("reset_reduce")))
    assert instr_cycles(acc) == n + 64
    pattern = Operand("none", "int32", ((1, 128), (1, n)))
    assert instr_cycles(Instr("IOTA", "pool", (sb, pattern))) == 150 + n
    assert instr_cycles(Instr("AFFINE_SELECT", "pool", (sb, sb, pattern))) == 150 + n
    assert instr_cycles(Instr("SEM_WAIT", "pool")) == 1


def test_dma() -> None:
    hbm = Operand("hbm", "float32", ((1024, 128), (1, 1024)), var_id=0)
    load = Instr("DMA_COPY", "sp", (tile(128, 1024, "float32"), hbm))
    assert instr_cycles(load) == 64
    nbytes = 128 * 4096
    want = DMA_FIXED_NS + nbytes / (16 * TARGETS["gen3"].dma_bytes_per_ns * dma_efficiency(4096))
    assert dma_ns(load) == pytest.approx(want)
    # 8 partitions use one DMA engine, so 1/16 of the bytes take as long; 4-byte runs are far less efficient.
    small = Instr("DMA_COPY", "sp", (tile(8, 1024, "float32"), Operand("hbm", "float32", ((1024, 8), (1, 1024)))))
    strided = Instr("DMA_COPY", "sp", (tile(128, 1024, "float32"), Operand("hbm", "float32", ((1, 128), (128, 1024)))))
    assert dma_ns(small) == pytest.approx(dma_ns(load))
    assert dma_ns(strided) > 10 * (dma_ns(load) - DMA_FIXED_NS)
    assert dma_ns(load, "gen4") < dma_ns(load, "gen3") < dma_ns(load, "gen2")
    assert 0.84 < dma_efficiency(2048) < 0.88 and 0.92 < dma_efficiency(4096) < 0.94


def test_targets() -> None:
    assert [TARGETS[t].sbuf_bytes_per_partition for t in ("gen2", "gen3", "gen4")] == [180224, 212984, 245752]
    assert get_target("trn2") is TARGETS["gen3"] and TARGETS["gen3"].clock_ghz["dve"] == 0.96
    with pytest.raises(ValueError):
        get_target("gen1")
