"""``nisa.dma_transpose`` with 2-D, 3-D and 4-D access patterns at every level it passes through.

The NKI permutations are (1, 0), (2, 1, 0) and (3, 1, 2, 0): each swaps the outermost and innermost dims and keeps
the middle ones, which is what ``penguin/bir.dma_transpose`` and the ISA ``DMA_COPY`` transpose flag mean for
operands of any rank 2..4 (runtime/ISA_FORMAT.md). The 4-D patterns are the ones attention_cte uses: the Q load
(HBM → SBUF with two dummy [1, 1] dims) and the exp-tile transpose (SBUF → SBUF, a batch of 128 × 128 blocks).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from xdsl.context import Context
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

import nkic.frontend.isa as nisa
import nkic.frontend.language as nl
from nkic.dialects.common import contiguous_pattern
from nkic.api.execute import simulate
from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import TensorSpec, jit
from nkic.runtime.encoding import ENGINES, Instr, Operand, decode_stream, encode_stream, queue_sem
from nkic.runtime.neff import Neff, Subgraph, Variable
from nkic.runtime.simulator import simulate as simulate_neff

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(5)


# -- kernels --------------------------------------------------------------------------------------------------
@jit
def q_style(q):
    """q (s, d) in HBM -> (d, s) in SBUF with a 4-D pattern padded by [1, 1] dims, then back to HBM."""
    s, d = q.shape
    t = nl.ndarray((d, s), q.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t.ap([[s, d], [1, 1], [1, 1], [1, s]]), src=q.ap([[d, s], [1, 1], [1, 1], [1, d]]))
    out = nl.ndarray((d, s), q.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, t)
    return out


@jit
def block_style(x):
    """x (p, 512) in SBUF -> out[k, b, j] = x[j, 128·b + k] for 3 blocks of 128 (SBUF -> SBUF, 4-D)."""
    p = x.shape[0]
    src = nl.ndarray((p, 512), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(src, x)
    dst = nl.ndarray((128, 3 * p), x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(
        dst=dst.ap([[3 * p, 128], [1, 1], [p, 3], [1, p]]),
        src=src.ap([[512, p], [1, 1], [128, 3], [1, 128]], offset=64),
    )
    out = nl.ndarray((128, 3 * p), x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, dst)
    return out


@jit
def three_d(x):
    """x (a, b, c) in HBM -> (c, b, a) in SBUF with the default 3-D permutation (2, 1, 0)."""
    a, b, c = x.shape
    t = nl.ndarray((c, b, a), x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(t, x)
    out = nl.ndarray((c, b, a), x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, t)
    return out


def test_frontend_records_rank_4_operands() -> None:
    text = str(q_style.trace(TensorSpec((128, 64), "bfloat16")).module)
    line = next(ln for ln in text.splitlines() if "penguin.dma_transpose" in ln)
    assert "[128, 64], [1, 1], [1, 1], [1, 128]" in line  # dst: partition pair first
    assert "[64, 128], [1, 1], [1, 1], [1, 64]" in line  # src


@pytest.mark.parametrize("dtype", [BF16, np.float32])
def test_q_style_hbm_to_sbuf(dtype: type) -> None:
    q = RNG.standard_normal((128, 64)).astype(dtype)
    out = simulate(q_style)(q)
    assert np.array_equal(out, q.T)  # bit-exact: same-dtype DMA


def test_block_style_sbuf_to_sbuf() -> None:
    x = RNG.standard_normal((96, 512)).astype(BF16)
    out = simulate(block_style)(x)
    blocks = x[:, 64 : 64 + 384].reshape(96, 3, 128)  # [j, b, k]
    assert np.array_equal(out.reshape(128, 3, 96), blocks.transpose(2, 1, 0))


def test_three_d_default_axes() -> None:
    x = RNG.standard_normal((16, 4, 8)).astype(np.float32)
    assert np.array_equal(simulate(three_d)(x), x.transpose(2, 1, 0))


def _k_bad_axes(x):
    t = nl.ndarray((8, 16, 4), x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(t, x, axes=(2, 0, 1))


def _k_bad_dtype(x):
    t = nl.ndarray((8, 4, 16), nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_transpose(t, x)


def _k_bad_shape(x):
    t = nl.ndarray((8, 16, 4), x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(t, x)


@pytest.mark.parametrize(
    "fn,message",
    [
        (_k_bad_axes, r"axes \(2, 0, 1\) are not supported for a rank-3 source"),
        (_k_bad_dtype, "dst is bfloat16 but src is float32"),
        (_k_bad_shape, r"must equal the permuted source shape \(8, 4, 16\)"),
    ],
)
def test_frontend_rejects(fn, message: str) -> None:
    with pytest.raises(NkiError, match=message):
        jit(fn).trace(TensorSpec((16, 4, 8), "float32"))


# -- penguin / ISA verifiers ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ctx() -> Context:
    from nkic.compiler.driver import make_context

    return make_context()


def test_penguin_verifier(ctx: Context) -> None:
    """The traced module re-parses and verifies; the same op with a dst that is not src's swap is rejected."""
    text = str(q_style.trace(TensorSpec((128, 64), "bfloat16")).module)
    Parser(ctx, text).parse_module().verify()
    good = "dst %sbuf[0 : [128, 64], [1, 1], [1, 1], [1, 128]]"
    assert good in text
    bad = text.replace(good, "dst %sbuf[0 : [128, 64], [1, 1], [1, 128], [1, 1]]")
    with pytest.raises(VerifyException, match="first and last dims swapped"):
        Parser(ctx, bad).parse_module().verify()


def _isa(dst: str, src: str) -> str:
    return (
        "builtin.module {\n  isa.core @sg00 {\n"
        "    isa.var @a : input [64, 128] bfloat16 {var_id = 0 : i64}\n"
        '    isa.stream "sp" {\n'
        f"      isa_sp.dma_copy dst sbuf(p0, 0x0, bfloat16){dst}, src hbm(var 0, 0x0, bfloat16){src} "
        "{id = 0 : i64, queue = 0 : i64, transpose = true, signal_sem = 8 : i64}\n"
        "    }\n  }\n}"
    )


def test_isa_verifier(ctx: Context) -> None:
    ok = _isa("[0 : [1, 128], [1, 1], [1, 1], [1, 64]]", "[0 : [128, 64], [1, 1], [1, 1], [1, 128]]")
    Parser(ctx, ok).parse_module().verify()
    bad = _isa("[0 : [1, 128], [1, 1], [1, 64], [1, 1]]", "[0 : [128, 64], [1, 1], [1, 1], [1, 128]]")
    with pytest.raises(VerifyException, match="first and last dims"):
        Parser(ctx, bad).parse_module().verify()


# -- encoding and simulator -----------------------------------------------------------------------------------
def test_encoding_round_trips_rank_4_transpose() -> None:
    dst = Operand("sbuf", "bfloat16", ((1, 128), (1, 1), (96, 3), (1, 96)), 0, 0)
    src = Operand("sbuf", "bfloat16", ((1, 96), (1, 1), (128, 3), (1, 128)), 0, 4096)
    ins = Instr("DMA_COPY", "sp", (dst, src), (2,), flags=1, signal_sem=queue_sem(2))
    assert decode_stream(encode_stream("sp", [ins])) == ("sp", [ins])


def test_simulator_swaps_first_and_last_dims() -> None:
    a, b, c, e = 5, 2, 3, 7
    x = RNG.standard_normal((a, b, c, e)).astype(np.float32)
    src_var = Variable("x", 0, "input", x.shape, "float32")
    out_var = Variable("y", 1, "output", (e, b, c, a), "float32")
    src = Operand("hbm", "float32", tuple(contiguous_pattern(x.shape)), var_id=0)
    tile = Operand("sbuf", "float32", ((1, e), *contiguous_pattern((b, c, a))), 0, 0)
    out = Operand("hbm", "float32", tuple(contiguous_pattern((e, b, c, a))), var_id=1)
    streams: dict[str, list[Instr]] = {eng: [] for eng in ENGINES}
    streams["sp"] = [
        Instr("DMA_COPY", "sp", (tile, src), (0,), flags=1, signal_sem=queue_sem(0)),
        Instr("SEM_WAIT", "sp", wait_sem=queue_sem(0), wait_value=1),
        Instr("DMA_COPY", "sp", (out, tile), (1,), signal_sem=queue_sem(1)),
    ]
    result = simulate_neff(Neff("t", [src_var, out_var], [Subgraph("sg00", streams)]), {"x": x})
    assert np.array_equal(result.outputs["y"], x.transpose(3, 1, 2, 0))
