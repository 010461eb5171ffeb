"""The documented engine effects of ``target/costs.py`` beyond the per-instruction formulas, instruction by
instruction: the wide-stride SBUF access rate of NeuronCore-v2 (A2), NeuronCore-v4's per-dtype rates (A4), and
where each does not apply."""

from __future__ import annotations

import pytest

from nkic.target.costs import MIN_II, WIDE_STRIDE_BYTES, occupancy_cycles
from nkic.target.isa import Instr, Operand


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
