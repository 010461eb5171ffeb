"""Rotating buffers for block tensors indexed by a rolled loop (``rotate-blocks``): a legacy block tensor declared
at twice SBUF whose blocks a rolled ``affine_range`` uses one per iteration compiles with one buffer per iteration
live at once (two with ``NKIC_ROLL_INTERLEAVE=2``), simulates, and matches numpy and the unrolled program; so does a
modern kernel whose ``[P, B, F]`` tensor's blocks move with the loop."""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()

import neuronxcc.nki as legacy_nki  # noqa: E402
import neuronxcc.nki.language as lnl  # noqa: E402

from nkic import api as nki  # noqa: E402
from nkic.dialects import bir  # noqa: E402
from nkic.compiler.driver import compile_kernel, make_context, run_neff  # noqa: E402
from nkic.frontend import TensorSpec  # noqa: E402
from nkic.library import RESOLVER  # noqa: E402
from nkic.passes.bir_unroll import BirUnrollPass  # noqa: E402
from nkic.passes.pipelines import frontend_lowering  # noqa: E402
from nkic.passes.resolver import use_resolver  # noqa: E402
from nkic.passes.rotate_blocks import RotateBlocksPass  # noqa: E402
from nkic.runtime.neff import read_neff  # noqa: E402
from nkic.target.machine import get_target  # noqa: E402

nl, nisa = nki.language, nki.isa
GEN3 = get_target("gen3")
F = 2048  # fp32 elements per block: 8 KiB per partition
TWICE_SBUF = 2 * GEN3.sbuf_bytes_per_partition // (F * 4) + 1  # blocks: the declaration is over twice SBUF (odd)


@legacy_nki.jit
def scale_blocks(a):
    out = lnl.ndarray(a.shape, dtype=a.dtype, buffer=lnl.shared_hbm)
    buf = lnl.ndarray((a.shape[0], lnl.par_dim(128), a.shape[2]), dtype=lnl.float32, buffer=lnl.sbuf)
    for b in lnl.affine_range(a.shape[0]):
        buf[b] = lnl.load(a[b])
        buf[b] = lnl.multiply(buf[b], 2.0)
        lnl.store(out[b], buf[b])
    return out


@legacy_nki.jit
def prefetch_blocks(a):
    """Software-pipelined: iteration b loads block b + 1 while it scales block b, which the previous one loaded."""
    n = a.shape[0]
    out = lnl.ndarray(a.shape, dtype=a.dtype, buffer=lnl.shared_hbm)
    buf = lnl.ndarray((n, lnl.par_dim(128), a.shape[2]), dtype=lnl.float32, buffer=lnl.sbuf)
    buf[0] = lnl.load(a[0])
    for b in lnl.affine_range(n - 1):
        buf[b + 1] = lnl.load(a[b + 1])
        lnl.store(out[b], lnl.multiply(buf[b], 2.0))
    lnl.store(out[n - 1], lnl.multiply(buf[n - 1], 2.0))
    return out


@nki.jit
def modern_blocks(a):
    """NKI 0.2+: no block dims; the [P, B, F] tensor holds block b at t[:, b, :]."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, a.shape[1] // 512, 512), dtype=a.dtype, buffer=nl.sbuf)
    for b in nl.affine_range(a.shape[1] // 512):
        nisa.dma_copy(dst=t[:, b, :], src=a[:, b * 512 : (b + 1) * 512])
        u = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=u, data=t[:, b, :], op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out[:, b * 512 : (b + 1) * 512], src=u)
    return out


def _run(kernel: Any, a: np.ndarray, roll: bool) -> tuple[np.ndarray, Counter]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy idioms' migration hints
        neff = compile_kernel(kernel, (a,), roll_loops=roll).neff
        (name, _, _), = kernel.trace(a).inputs
    (out,) = run_neff(neff, {name: a}).outputs.values()
    ops = Counter(i.opcode for sg in read_neff(neff).subgraphs for s in sg.engines.values() for i in s)
    return out, ops


@pytest.mark.parametrize("interleave", [1, 2])
def test_a_block_tensor_of_twice_sbuf_in_a_rolled_loop(monkeypatch: pytest.MonkeyPatch, interleave: int) -> None:
    """Without rotation the rolled loop keeps the whole 2x-SBUF declaration and allocation fails; rotated, one block
    (two interleaved) is live at a time. 53 blocks with two per body: one leftover iteration before the loop."""
    monkeypatch.setenv("NKIC_ROLL_INTERLEAVE", str(interleave))
    a = np.random.default_rng(0).standard_normal((TWICE_SBUF, 128, F)).astype(np.float32)
    assert TWICE_SBUF * F * 4 > 2 * GEN3.sbuf_bytes_per_partition
    got, ops = _run(scale_blocks, a, roll=True)
    assert ops["COUNTED_LOOP_BEGIN"] > 0  # the loop really stayed rolled
    np.testing.assert_array_equal(got, 2 * a)


def test_blocks_carried_to_the_next_iteration_rotate_in_two_buffers() -> None:
    """Two blocks live across each iteration's end (the one loaded for the next, the one scaled now): the rolled body
    holds two iterations and block b lives in buffer b mod 2, before, in and after the loop."""
    a = np.random.default_rng(2).standard_normal((TWICE_SBUF, 128, F)).astype(np.float32)
    got, ops = _run(prefetch_blocks, a, roll=True)
    assert ops["COUNTED_LOOP_BEGIN"] > 0
    np.testing.assert_array_equal(got, 2 * a)


def _rotated(kernel: Any, spec: TensorSpec, interleave: int) -> dict[str, bir.MemLocOp]:
    module = kernel.trace(spec).module.clone()
    ctx = make_context()
    with warnings.catch_warnings(), use_resolver(RESOLVER):
        warnings.simplefilter("ignore")
        for p in (*frontend_lowering(), BirUnrollPass(roll=True, interleave=interleave), RotateBlocksPass()):
            p.apply(ctx, module)
    return {n: m for f in module.ops if isinstance(f, bir.FunctionOp) for n, m in f.memlocs().items()}


@pytest.mark.parametrize("interleave", [1, 2])
def test_a_modern_block_tensor_gets_as_many_buffers_as_iterations_overlap(interleave: int) -> None:
    """8 blocks of 512: the rolled body holds ``interleave`` iterations, so that many blocks, and no more, are live
    at once; the rolled program computes the unrolled one's bytes."""
    a = np.random.default_rng(1).standard_normal((128, 8 * 512)).astype(np.float32)
    locs = _rotated(modern_blocks, TensorSpec(a.shape, "float32"), interleave)
    rotated = [m for n, m in locs.items() if n.endswith(".rot")]
    assert [m.dims for m in rotated] == [(128, interleave, 512)]
    assert not [m for m in locs.values() if m.dims == (128, 8, 512)]  # the whole declaration is gone
    rolled, ops = _run(modern_blocks, a, roll=True)
    unrolled, _ = _run(modern_blocks, a, roll=False)
    assert ops["COUNTED_LOOP_BEGIN"] > 0
    np.testing.assert_array_equal(rolled, a + 1)
    np.testing.assert_array_equal(rolled, unrolled)
