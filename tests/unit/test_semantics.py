"""Python semantics public NKI kernels rely on, through the public API, checked against numpy or the traced IR."""

from __future__ import annotations

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.driver import compile_traced  # noqa: E402
from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.runtime.neff import read_neff  # noqa: E402

RNG = np.random.default_rng(7)


def ops_of(module: object) -> list[str]:
    """The names of the penguin ops of a traced module, in order."""
    return [op.name for op in module.walk()]  # type: ignore[attr-defined]


# -- launch grids of any rank ---------------------------------------------------------------------------------
@nki.jit
def blocks_by_program(x):
    """Program (p0, p1) adds 10·p0 + p1 to its own block of rows."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    ndim = nl.program_ndim()
    n1 = nl.num_programs(1) if ndim > 1 else 1
    p0, p1 = nl.program_id(0), (nl.program_id(axis=1) if ndim > 1 else 0)
    rows = x.shape[0] // nl.num_programs(axes=None)
    r = (p0 * n1 + p1) * rows
    t = nl.ndarray((rows, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[r : r + rows, :])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(10 * p0 + p1))
    nisa.dma_copy(dst=out[r : r + rows, :], src=t)
    return out


@pytest.mark.parametrize("grid", [(4,), (2, 2), (4, 2), (nl.spmd_dim(2, nl.nc(2)),), (3 * nl.nc(1),)])
def test_launch_grids(grid: tuple[int, ...]) -> None:
    x = RNG.standard_normal((48 if 3 in grid else 64, 8)).astype(np.float32)
    kernel = blocks_by_program[grid]
    got = nki.simulate(kernel)(x)
    want = x.copy()
    rows, n1 = x.shape[0] // kernel.num_programs, grid[1] if len(grid) > 1 else 1
    for pid in range(kernel.num_programs):
        p0, p1 = divmod(pid, n1)
        want[pid * rows : (pid + 1) * rows] += 10 * p0 + p1
    np.testing.assert_allclose(got, want)
    # One NEFF subgraph (one BIR function, one penguin region) per program, all simulated.
    traced = kernel.trace(x)
    assert traced.grid == kernel.num_programs
    assert len(read_neff(compile_traced(traced).neff).subgraphs) == kernel.num_programs


def test_grid_queries_without_a_grid_and_bad_axes() -> None:
    seen = []

    @nki.jit
    def k(x):
        seen.append((nl.program_id(0), nl.num_programs(0), nl.num_programs(None), nl.program_ndim()))
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x)
        return out

    x = np.zeros((4, 4), np.float32)
    k.trace(x)
    k[2, 3].trace(x)
    assert seen[0] == (0, 1, 1, 0) and seen[1:] == [(p // 3, 2, 6, 2) for p in range(6)]

    @nki.jit
    def bad(x):
        nl.program_id(2)

    with pytest.raises(NkiError, match="program_id axis 2 does not exist"):
        bad[2, 2].trace(x)


# -- zero-size slices ---------------------------------------------------------------------------------------------
def test_zero_size_slices_record_nothing() -> None:
    @nki.jit
    def k(x, extra):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=t[0:0, :], src=x[0:0, :])  # nothing to copy
        for i in nl.affine_range(2):
            nisa.tensor_scalar(dst=t[nl.ds(i * 64, extra), :], data=t[nl.ds(i * 64, extra), :], op0=nl.add,
                               operand0=1.0)  # fmt: skip
        nisa.dma_copy(dst=out, src=t)
        return out

    x = RNG.standard_normal((128, 16)).astype(np.float32)
    ops = ops_of(k.trace(x, 0).module)
    assert ops.count("penguin.dma_copy") == 2 and "penguin.tensor_scalar" not in ops and "penguin.loop" in ops
    np.testing.assert_allclose(nki.simulate(k)(x, 0), x)
    np.testing.assert_allclose(nki.simulate(k)(x, 64), x + 1)  # the same kernel with a non-empty slice
