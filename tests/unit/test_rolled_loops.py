"""Loops kept rolled (``roll_loops`` / ``NKIC_ROLL_LOOPS``, ``bir-unroll{roll=true}``): the rolled program computes
exactly what the unrolled one does (same bytes out), against numpy, with the loop body emitted once; what cannot roll
unrolls; the NEFF is deterministic."""

from __future__ import annotations

from collections import Counter
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from nkic import api as nki
from nkic.compiler.driver import compile_kernel, run_neff
from nkic.frontend.tracer import TraceCache
from nkic.runtime.neff import read_neff

nl, nisa = nki.language, nki.isa


def _run(kernel: Any, args: tuple[np.ndarray, ...], roll: bool, **kwargs: Any) -> tuple[np.ndarray, Counter, bytes]:
    """Compile (rolled or not) and simulate; the output, the NEFF's opcode counts and its bytes."""
    neff = compile_kernel(kernel, args, kwargs, roll_loops=roll).neff
    traced = kernel.trace(*args, **kwargs)
    inputs = {name: a for (name, _, _), a in zip(traced.inputs, args)}
    result = run_neff(neff, inputs)
    (out,) = result.outputs.values()
    ops = Counter(i.opcode for sg in read_neff(neff).subgraphs for s in sg.engines.values() for i in s)
    return out, ops, neff


def _both(kernel: Any, args: tuple[np.ndarray, ...], **kwargs: Any) -> tuple[np.ndarray, Counter, Counter]:
    """Rolled and unrolled: the outputs must be the same bytes; returns (output, rolled ops, unrolled ops)."""
    unrolled, flat_ops, _ = _run(kernel, args, False, **kwargs)
    rolled, rolled_ops, _ = _run(kernel, args, True, **kwargs)
    assert rolled.dtype == unrolled.dtype
    assert np.array_equal(rolled.view(np.uint8), unrolled.view(np.uint8))
    assert "COUNTED_LOOP_BEGIN" not in flat_ops
    return rolled, rolled_ops, flat_ops


@nki.jit
def scale_rows(a):
    """An elementwise loop: each 128-row tile loaded, ``2x + 1``, stored."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128 : (i + 1) * 128, :])
        u = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=u, data=t, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=1.0)
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=u)
    return out


def test_elementwise_loop_rolls_and_matches_unrolled() -> None:
    a = np.random.default_rng(0).standard_normal((16 * 128, 64)).astype(np.float32)
    out, rolled, flat = _both(scale_rows, (a,))
    np.testing.assert_array_equal(out, a * 2 + 1)
    assert rolled["COUNTED_LOOP_BEGIN"] == 5 and rolled["COUNTED_LOOP_END"] == 5  # one loop, in each of the 5 engine streams
    assert rolled["TENSOR_SCALAR_PTR"] + rolled["TENSOR_SCALAR"] == 1  # the body once
    assert flat["TENSOR_SCALAR_PTR"] + flat["TENSOR_SCALAR"] == 16
    assert sum(rolled.values()) < sum(flat.values())


@nki.jit
def matmul_k(lhsT, rhs, first_outside):
    """``lhsT.T @ rhs`` for one 128x512 output tile, the K tiles in an affine_range accumulating in PSUM. With
    ``first_outside`` the first K tile is multiplied before the loop (so the loop only accumulates)."""
    k_total = lhsT.shape[0]
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    first = 1 if first_outside else 0
    if first_outside:
        a0 = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        b0 = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a0, src=lhsT[0:128, :])
        nisa.dma_copy(dst=b0, src=rhs[0:128, :])
        nisa.nc_matmul(acc, a0, b0)
    for k in nl.affine_range(first, k_total // 128):
        a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhsT[k * 128 : (k + 1) * 128, :])
        nisa.dma_copy(dst=b, src=rhs[k * 128 : (k + 1) * 128, :])
        nisa.nc_matmul(acc, a, b)
    res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize("first_outside", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_matmul_k_loop_accumulates_in_psum_across_rolled_iterations(first_outside: bool, dtype: Any) -> None:
    """Without a matmul before the loop the first iteration is peeled (its matmul overwrites the PSUM tile, the
    rolled one accumulates); with one, nothing is peeled. Either way the bytes are the unrolled program's."""
    rng = np.random.default_rng(1)
    lhs_t = rng.standard_normal((8 * 128, 128)).astype(dtype)
    rhs = rng.standard_normal((8 * 128, 512)).astype(dtype)
    out, rolled, flat = _both(matmul_k, (lhs_t, rhs), first_outside=first_outside)
    want = lhs_t.astype(np.float64).T @ rhs.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
    assert flat["MATMUL"] == 8
    assert rolled["MATMUL"] == 2  # the peeled (or hand-written) first tile, and the body
    assert rolled["COUNTED_LOOP_BEGIN"] == 5


@nki.jit
def static_rows(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.static_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128 : (i + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=t)
    return out


@nki.jit
def partition_slices(a):
    """The loop moves a slice across partitions (rows 32·i of one tile): a register offset cannot do that."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    for i in nl.affine_range(4):
        nisa.tensor_scalar(dst=t[i * 32 : (i + 1) * 32, :], data=t[i * 32 : (i + 1) * 32, :], op0=nl.add,
                           operand0=float(1))  # fmt: skip
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def moving_psum(lhsT, rhs):
    """A matmul whose PSUM destination moves with the loop: NKI's implicit accumulate is per element, static."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=lhsT)
    for n in nl.affine_range(2):
        b = nl.ndarray((128, 256), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=rhs[:, n * 256 : (n + 1) * 256])
        nisa.nc_matmul(acc[:, n * 256 : (n + 1) * 256], a, b)
    res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_what_cannot_roll_unrolls() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((512, 32)).astype(np.float32)
    out, rolled, _ = _both(static_rows, (a,))  # nl.static_range unrolls: that is its meaning
    np.testing.assert_array_equal(out, a)
    assert "COUNTED_LOOP_BEGIN" not in rolled
    a = rng.standard_normal((128, 32)).astype(np.float32)
    out, rolled, _ = _both(partition_slices, (a,))
    np.testing.assert_array_equal(out, a + 1)
    assert "COUNTED_LOOP_BEGIN" not in rolled
    lhs_t = rng.standard_normal((128, 128)).astype(np.float32)
    rhs = rng.standard_normal((128, 512)).astype(np.float32)
    out, rolled, _ = _both(moving_psum, (lhs_t, rhs))
    np.testing.assert_allclose(out, lhs_t.T @ rhs, rtol=1e-4, atol=1e-4)
    assert "COUNTED_LOOP_BEGIN" not in rolled


@nki.jit
def nested(a):
    """An outer affine_range around an inner one: the inner loop rolls, the outer unrolls around it."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        for j in nl.sequential_range(4):
            t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[i * 128 : (i + 1) * 128, j * 64 : (j + 1) * 64])
            nisa.activation(dst=t, op=nl.exp, data=t)
            nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, j * 64 : (j + 1) * 64], src=t)
    return out


def test_inner_loop_rolls_inside_an_unrolled_outer_loop() -> None:
    a = np.random.default_rng(3).standard_normal((256, 256)).astype(np.float32)
    out, rolled, flat = _both(nested, (a,))
    np.testing.assert_allclose(out, np.exp(a), rtol=1e-5)
    assert rolled["COUNTED_LOOP_BEGIN"] == 2 * 5 and rolled["ACTIVATE"] == 2
    assert flat["ACTIVATE"] == 8


@nki.jit
def nested_rolls(a):
    """Each 128-row tile loaded (moves with i), exp'd in 64-column chunks (move with j), stored (moves with i): every
    operand moves with one loop only, so both loops roll, the inner one inside the outer."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128 : (i + 1) * 128, :])
        u = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        for j in nl.affine_range(a.shape[1] // 64):
            nisa.activation(dst=u[:, j * 64 : (j + 1) * 64], op=nl.exp, data=t[:, j * 64 : (j + 1) * 64])
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=u)
    return out


def test_rolled_loops_nest_with_a_register_each() -> None:
    """The outer loop rolls around the rolled inner one: 2 counted loops (in 5 streams), the exp once; the in-order
    simulation (BIR's sequential meaning, which follows counted loops) agrees with the concurrent one."""
    from nkic.runtime.simulator import simulate_in_order

    a = np.random.default_rng(5).standard_normal((4 * 128, 256)).astype(np.float32)
    out, rolled, flat = _both(nested_rolls, (a,))
    np.testing.assert_allclose(out, np.exp(a), rtol=1e-5)
    assert rolled["COUNTED_LOOP_BEGIN"] == 2 * 5 and rolled["ACTIVATE"] == 1 and rolled["DMA_COPY"] == 2
    assert flat["ACTIVATE"] == 16
    neff = read_neff(compile_kernel(nested_rolls, (a,), {}, roll_loops=True).neff)
    (name, _, _), = nested_rolls.trace(a).inputs
    (in_order,) = simulate_in_order(neff, {name: a}).values()
    np.testing.assert_array_equal(in_order, out)
    counters = {i.imm("iv_reg") for sg in neff.subgraphs for s in sg.engines.values() for i in s
                if i.opcode == "COUNTED_LOOP_BEGIN"}  # fmt: skip
    assert len(counters) == 2  # one register per nesting level


@pytest.mark.parametrize("rows", [8, 7])
def test_interleaved_iterations_share_a_rolled_body(monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    """NKIC_ROLL_INTERLEAVE=2: two iterations per rolled body (their own tiles), the counter stepping by 2; with 7
    iterations the first is emitted before the loop. Same bytes as unrolled."""
    monkeypatch.setenv("NKIC_ROLL_INTERLEAVE", "2")
    a = np.random.default_rng(7).standard_normal((rows * 128, 64)).astype(np.float32)
    out, rolled, _ = _both(scale_rows, (a,))
    np.testing.assert_array_equal(out, a * 2 + 1)
    assert rolled["TENSOR_SCALAR_PTR"] + rolled["TENSOR_SCALAR"] == 2 + rows % 2
    neff = read_neff(compile_kernel(scale_rows, (a,), {}, roll_loops=True).neff)
    (end,) = {(i.imm("step"), i.imm("bound")) for sg in neff.subgraphs for s in sg.engines.values() for i in s
              if i.opcode == "COUNTED_LOOP_END"}  # fmt: skip
    assert end == (2, rows - rows % 2)


def test_rolled_neff_is_deterministic_and_the_env_variable_turns_rolling_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from nkic.compiler.driver import compile_traced

    a = np.zeros((4 * 128, 64), np.float32)
    traced = scale_rows.trace(a)
    first = compile_traced(traced, roll_loops=True).neff
    assert compile_traced(traced, roll_loops=True).neff == first
    monkeypatch.setenv("NKIC_ROLL_LOOPS", "1")
    assert compile_traced(traced).neff == first
    monkeypatch.setenv("NKIC_ROLL_LOOPS", "0")
    assert compile_traced(traced).neff != first


def test_rolled_attention_matches_numpy_and_the_unrolled_program_at_2k() -> None:
    """Causal bf16 d128 attention at 2K (one section: the diagonal band's groups) with the full KV tiles of every Q
    group in rolled loops (``unroll_tiles=False``; unrolled, nothing is left to roll at this size)."""
    from nkic.kernels.flash_attention import flash_attention_rolled

    from .test_flash_attention import BF16_TOL, attention_ref, rel_err

    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((1, 2048, 128)).astype(ml_dtypes.bfloat16) for _ in range(3))
    scale = 128**-0.5
    out, rolled, flat = _both(flash_attention_rolled, (q, k, v), scale=scale, unroll_tiles=False)
    assert rel_err(out, attention_ref(q, k, v, scale, True, 0)) < BF16_TOL
    assert rolled["COUNTED_LOOP_BEGIN"] > 0 and rolled["MATMUL"] < flat["MATMUL"]


@pytest.mark.parametrize(("unroll_tiles", "seqlen", "section", "loops"), [(False, 2048, 1024, 3), (True, 1536, 512, 3)])
def test_rolled_attention_uniform_loops(
    monkeypatch: pytest.MonkeyPatch, unroll_tiles: bool, seqlen: int, section: int, loops: int
) -> None:
    """The uniform causal form at a small scale. 1024-wide sections of 2048 positions: section 0's K/V load loop
    rolls, and its group loop rolls
    around its rolled KV-tile loop (nested). 512-wide sections of 1536 with ``unroll_tiles`` and two interleaved
    iterations per body: the group loops of sections 0 and 1 and the diagonal band's loop over sections 1 and 2.
    Checked against numpy here (the unrolled program's compile would double the time); ``bench/rolled.py --check``
    compares the bytes with the unrolled program at 8K, where every loop of this form rolls, nested."""
    import nkic.kernels.flash_attention as fa

    from .test_flash_attention import BF16_TOL, attention_ref, rel_err

    monkeypatch.setattr(fa, "ROLLED_SECTION", section)
    monkeypatch.setattr(fa.flash_attention_rolled, "cache", TraceCache())
    if unroll_tiles:
        monkeypatch.setenv("NKIC_ROLL_INTERLEAVE", "2")
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((1, seqlen, 128)).astype(ml_dtypes.bfloat16) for _ in range(3))
    out, rolled, _ = _run(fa.flash_attention_rolled, (q, k, v), True, scale=128**-0.5, unroll_tiles=unroll_tiles)
    assert rel_err(out, attention_ref(q, k, v, 128**-0.5, True, 0)) < BF16_TOL
    assert rolled["COUNTED_LOOP_BEGIN"] == loops * 5


def test_rolled_attention_sections_at_small_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    """KV sections (merged through HBM) and a sliding window with rolled tile loops, at a small scale: 1024-wide
    sections of 2200 KV positions, window 1500; a section with no masked tile peels its first rolled iteration."""
    window = 1500
    import nkic.kernels.flash_attention as fa

    from .test_flash_attention import FP32_TOL, attention_ref, rel_err

    monkeypatch.setattr(fa, "SECTION_THRESHOLD", 1024)
    monkeypatch.setattr(fa, "SECTION_SIZE", 1024)
    monkeypatch.setattr(fa.flash_attention_rolled, "cache", TraceCache())
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((1, 2200, 32)).astype(np.float32) for _ in range(3))
    out, rolled, _ = _both(fa.flash_attention_rolled, (q, k, v), scale=0.25, sliding_window=window)
    assert rel_err(out, attention_ref(q, k, v, 0.25, True, window)) < FP32_TOL
    assert rolled["COUNTED_LOOP_BEGIN"] > 0
    assert rolled["SCALAR_TENSOR_TENSOR"] > 0  # sections were merged


_CLI_KERNEL = '''
from nkic import api as nki
nl, nisa = nki.language, nki.isa

@nki.jit
def double(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128 : (i + 1) * 128, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=t)
    return out
'''


def test_cli_roll_loops_and_unroll_all(tmp_path: Any) -> None:
    """``nkic compile --roll-loops`` keeps the loop; ``--unroll-all`` unrolls it even with NKIC_ROLL_LOOPS=1."""
    import os
    import subprocess
    import sys

    (tmp_path / "k.py").write_text(_CLI_KERNEL)
    env = dict(os.environ, NKIC_ROLL_LOOPS="1")
    opcodes = {}
    for flag in ("--roll-loops", "--unroll-all"):
        r = subprocess.run([sys.executable, "-m", "nkic.tools.cli", "compile", "k.py:double", "--arg",
                            "a=float32[1024,64]", "-o", f"{flag[2:]}.neff", flag], cwd=tmp_path, env=env,
                           capture_output=True, text=True)  # fmt: skip
        assert r.returncode == 0, r.stderr
        neff = read_neff((tmp_path / f"{flag[2:]}.neff").read_bytes())
        opcodes[flag] = Counter(i.opcode for sg in neff.subgraphs for s in sg.engines.values() for i in s)
    assert opcodes["--roll-loops"]["COUNTED_LOOP_BEGIN"] == 5 and opcodes["--roll-loops"]["DMA_COPY"] == 2
    assert opcodes["--unroll-all"]["COUNTED_LOOP_BEGIN"] == 0 and opcodes["--unroll-all"]["DMA_COPY"] == 16
