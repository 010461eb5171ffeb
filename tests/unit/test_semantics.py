"""Python semantics public NKI kernels rely on, through the public API, checked against numpy or the traced IR."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.compiler.driver import compile_traced  # noqa: E402
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


# -- inputs the kernel writes and returns --------------------------------------------------------------------------
@nki.jit
def add_into_first(a, b):
    """Writes a + b into its input ``a`` and returns ``a``."""
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    u = nl.ndarray(b.shape, b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=u, src=b)
    nisa.tensor_tensor(dst=t, data1=t, data2=u, op=nl.add)
    nisa.dma_copy(dst=a, src=t)
    return a


def test_returning_a_written_input() -> None:
    a = RNG.standard_normal((128, 32)).astype(np.float32)
    b = RNG.standard_normal((128, 32)).astype(np.float32)
    a0, b0 = a.copy(), b.copy()
    got = add_into_first(a, b)
    np.testing.assert_allclose(got, a0 + b0, rtol=1e-6)
    np.testing.assert_allclose(a, a0 + b0, rtol=1e-6)  # the written input is copied back, as NKI's simulator does
    np.testing.assert_array_equal(b, b0)  # an input only read is untouched
    traced = add_into_first.trace(a, b)
    assert traced.written_inputs == (("a", traced.outputs[0][0]),) and traced.outputs[0][0] != "a"
    assert nki.simulate(add_into_first)(a0.copy(), b0).shape == (128, 32)


def test_written_input_not_returned_is_copied_back_and_returning_an_unwritten_one_works() -> None:
    @nki.jit
    def scale_in_place(x, y):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=x, src=t)
        return y  # returned, never written: a copy of it

    x = RNG.standard_normal((128, 16)).astype(np.float32)
    y = RNG.standard_normal((128, 16)).astype(np.float32)
    x0 = x.copy()
    np.testing.assert_array_equal(scale_in_place(x, y), y)
    np.testing.assert_allclose(x, 2 * x0)
    readonly = x0.copy()
    readonly.flags.writeable = False
    scale_in_place(readonly, y)  # a read-only array is not written back
    np.testing.assert_array_equal(readonly, x0)


@nki.jit
def add_rows_into_first(a, b, only=None):
    """Each program of a 1-D grid writes a + b into its share of the rows of its input ``a`` (only program
    ``only``, if given) and returns ``a``."""
    n, pid = a.shape[0] // nl.num_programs(0), nl.program_id(0)
    if only is not None and pid != only:
        return a
    t = nl.ndarray((n, a.shape[1]), a.dtype, buffer=nl.sbuf)
    u = nl.ndarray((n, a.shape[1]), b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[pid * n:(pid + 1) * n, :])
    nisa.dma_copy(dst=u, src=b[pid * n:(pid + 1) * n, :])
    nisa.tensor_tensor(dst=t, data1=t, data2=u, op=nl.add)
    nisa.dma_copy(dst=a[pid * n:(pid + 1) * n, :], src=t)
    return a


@pytest.mark.parametrize("grid,only", [(2, None), (4, None), (2, 1)])
def test_returning_a_written_input_under_a_grid(grid: int, only: int | None) -> None:
    """Every program writes the one shared input; the returned input and the caller's array hold all the programs'
    writes (read back after the run: no copy is compiled, so nothing must be ordered after the other programs)."""
    a = RNG.standard_normal((128, 16)).astype(np.float32)
    b = RNG.standard_normal((128, 16)).astype(np.float32)
    want = a + b
    if only is not None:
        n = 128 // grid
        rows = np.zeros(128, bool)
        rows[only * n:(only + 1) * n] = True
        want = np.where(rows[:, None], a + b, a)
    got = add_rows_into_first[grid](a, b, only)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(a, want, rtol=1e-6)
    traced = add_rows_into_first[grid].trace(a, b, only)
    assert traced.outputs[0][0] == "a" and traced.written_inputs == (("a", "a"),)
    assert ops_of(traced.module).count("penguin.dma_copy") == 3 * (grid if only is None else 1)


def test_a_written_input_under_a_grid_that_is_not_returned_is_copied_back() -> None:
    @nki.jit
    def halves(x):
        n, pid = x.shape[0] // 2, nl.program_id(0)
        t = nl.ndarray((n, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[pid * n:(pid + 1) * n, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=float(pid + 2))
        nisa.dma_copy(dst=x[pid * n:(pid + 1) * n, :], src=t)

    x = RNG.standard_normal((128, 8)).astype(np.float32)
    x0 = x.copy()
    assert halves[2](x) is None
    np.testing.assert_allclose(x, np.concatenate([2 * x0[:64], 3 * x0[64:]]), rtol=1e-6)


def test_returning_a_reshape_of_a_whole_output() -> None:
    """``return out.reshape(...)`` (nki-library's gen_mask_tkg_hbm) returns the output's bytes under that shape;
    returning part of a tensor stays an error."""

    @nki.jit
    def reshaped(x, part: bool):
        out = nl.ndarray((2, 64, 3), x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((64, 6), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out.reshape((64, 2, 3)).reshape((64, 6)), src=t)
        return out[0] if part else out.reshape((128, 3))

    x = RNG.standard_normal((64, 6)).astype(np.float32)
    got = reshaped(x, False)
    np.testing.assert_array_equal(got, x.reshape(128, 3))
    assert reshaped.trace(x, False).outputs[0][1] == (128, 3)
    with pytest.raises(NkiError, match="must return whole tensors, not views of"):
        reshaped.trace(x, True)


# -- the buffer an input reports -------------------------------------------------------------------------------------
def test_inputs_report_hbm() -> None:
    seen = []

    @nki.jit
    def k(x):
        # The docs' mxfp kernels assert `x.buffer == nl.hbm` of their inputs; nki-library asserts
        # `x.buffer == nl.hbm or x.buffer == nl.shared_hbm` and branches on `x.buffer == nl.sbuf`.
        seen.append((x.buffer == nl.shared_hbm, nl.is_hbm(x.buffer), x.buffer == nl.sbuf, x.buffer == nl.hbm))
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x)
        return out

    x = np.zeros((4, 4), np.float32)
    k.trace(x)
    k[2].trace(x)
    assert seen == [(False, True, False, True)] * 3


# -- Python side effects in symbolic loop bodies ------------------------------------------------------------------
def test_list_appended_in_a_loop_body_stays_rolled_when_used_inside() -> None:
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0] // 128):
            tiles = []  # filled and used within one iteration: the loop stays a loop
            t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i * 128 : (i + 1) * 128, :])
            tiles.append(t)
            nisa.tensor_scalar(dst=tiles[-1], data=tiles[0], op0=nl.add, operand0=1.0)
            nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=tiles[0])
        return out

    x = RNG.standard_normal((512, 16)).astype(np.float32)
    ops = ops_of(k.trace(x).module)
    assert ops.count("penguin.loop") == 1 and ops.count("penguin.dma_copy") == 2
    np.testing.assert_allclose(nki.simulate(k)(x), x + 1)


def test_tiles_used_after_their_loop_unroll_it() -> None:
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        tiles = []
        for i in nl.affine_range(4):  # each iteration's tile is used after the loop: this loop unrolls
            t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i * 128 : (i + 1) * 128, :])
            tiles.append(t)
        for j in nl.affine_range(4):  # tiles[j] needs j's value: this loop unrolls too
            nisa.tensor_scalar(dst=tiles[j], data=tiles[j], op0=nl.multiply, operand0=float(1 + j))
        for i in nl.sequential_range(4):  # reads only its own tile: stays rolled
            s = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=s, src=x[i * 128 : (i + 1) * 128, :])
        for i in nl.static_range(4):
            nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=tiles[i])
        return out

    x = RNG.standard_normal((512, 8)).astype(np.float32)
    ops = ops_of(k.trace(x).module)
    assert ops.count("penguin.loop") == 1  # only the sequential_range loop
    want = x * np.repeat(np.arange(1, 5, dtype=np.float32), 128)[:, None]
    np.testing.assert_allclose(nki.simulate(k)(x), want, rtol=1e-6)


def test_list_indexed_by_a_constant_after_a_rolled_loop() -> None:
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        offsets = []
        for i in nl.affine_range(2):
            offsets.append(i * 64)  # plain Python data: one entry per iteration
        t = nl.ndarray((64, x.shape[1]), x.dtype, buffer=nl.sbuf)
        for r in (0, 1):
            nisa.dma_copy(dst=t, src=x[offsets[1 - r] : offsets[1 - r] + 64, :])
            nisa.dma_copy(dst=out[r * 64 : (r + 1) * 64, :], src=t)
        return out

    x = RNG.standard_normal((128, 8)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(k)(x), np.concatenate([x[64:], x[:64]]))


MATMUL_EXAMPLES = (
    Path(__file__).resolve().parents[3] / "shared" / "corpus" / "aws-neuron-sdk" / "nki" / "examples"
    / "matrix_multiplication" / "matrix_multiplication_nki_kernels.py"
)  # fmt: skip


@pytest.mark.skipif(not MATMUL_EXAMPLES.is_file(), reason="the NKI examples are not in ../shared/corpus")
def test_matmul_tutorial_hoist_load_unmodified() -> None:
    spec = importlib.util.spec_from_file_location("matmul_tutorial_kernels", MATMUL_EXAMPLES)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    lhsT = RNG.standard_normal((256, 256)).astype(np.float32)
    rhs = RNG.standard_normal((256, 1024)).astype(np.float32)
    kernel = module.nki_matmul_hoist_load_
    # The m and n loops stay loops; the k loops unroll (their tiles live in lists used after them).
    assert ops_of(kernel.trace(lhsT, rhs).module).count("penguin.loop") == 2
    np.testing.assert_allclose(nki.simulate(kernel)(lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-4)


# -- helpers returning tensors they did not receive ---------------------------------------------------------------
def test_plain_helper_may_return_a_tile_it_allocates_but_a_nested_kernel_may_not() -> None:
    class Allocator:  # nki-library's ModularAllocator.alloc_sbuf_tensor(shape, dtype, ...) does exactly this
        def alloc_sbuf_tensor(self, shape, dtype):
            return nl.ndarray(shape, dtype, buffer=nl.sbuf)

    @nki.jit
    def nested(shape):
        return nl.ndarray(shape, nl.float32, buffer=nl.sbuf)

    @nki.jit
    def k(x, use_nested):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nested(x.shape) if use_nested else Allocator().alloc_sbuf_tensor(x.shape, x.dtype)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = RNG.standard_normal((128, 8)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(k)(x, False), x)
    with pytest.raises(NkiError, match="function without nki data as input should not return nki data"):
        k.trace(x, True)


def test_a_tile_carried_to_the_next_iteration_unrolls_the_loop() -> None:
    @nki.jit
    def running_sum(x):
        """out block i = x block 0 + ... + x block i, by handing each iteration's tile to the next."""
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for i in nl.affine_range(x.shape[0] // 128):
            t = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i * 128 : (i + 1) * 128, :])
            nisa.tensor_tensor(dst=t, data1=t, data2=acc, op=nl.add)
            nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=t)
            acc = t  # the next iteration reads this iteration's tile
        return out

    x = RNG.standard_normal((384, 8)).astype(np.float32)
    assert "penguin.loop" not in ops_of(running_sum.trace(x).module)
    want = np.cumsum(x.reshape(3, 128, 8), axis=0).reshape(384, 8)
    np.testing.assert_allclose(nki.simulate(running_sum)(x), want, rtol=1e-5, atol=1e-5)


def test_inputs_named_like_ir_uniquing_suffixes_stay_distinct() -> None:
    """``*args`` inputs and parameters like ``in_1``/``in_2`` keep distinct names through the IR and the NEFF."""

    @nki.jit
    def varargs(*args):
        out = nl.ndarray(args[0].shape, dtype=args[0].dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.subtract(nl.load(args[0]), nl.load(args[1])))
        return out

    @nki.jit
    def suffixed(in_1, in_2):
        out = nl.ndarray(in_1.shape, dtype=in_1.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.subtract(nl.load(in_1), nl.load(in_2)))
        return out

    a = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    b = np.ones((128, 4), np.float32)
    np.testing.assert_array_equal(nki.simulate(varargs)(a, b), a - b)
    np.testing.assert_array_equal(nki.simulate(suffixed)(a, b), a - b)


# -- returning a reshape of a whole output -------------------------------------------------------------------------
@nki.jit
def row_max_reshaped(x):
    """Returns its (n, 1) row maxima reshaped to (1, n) and (n // 4, 2, 2) (nki-library's cascaded_max returns
    ``max_values.reshape(config.out_shape)``)."""
    n = x.shape[0]
    t = nl.ndarray((n, x.shape[1]), x.dtype, buffer=nl.sbuf)
    m = nl.ndarray((n, 1), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=t, axis=1)
    out = nl.ndarray((n, 1), x.dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray((n, 1), x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=m)
    nisa.dma_copy(dst=out2, src=m)
    return out.reshape((1, n)), out2.reshape((n // 4, 2, 2))


def test_returning_a_reshape_of_a_whole_tensor() -> None:
    x = RNG.standard_normal((64, 8)).astype(np.float32)
    flat, cube = row_max_reshaped(x)
    assert flat.shape == (1, 64) and cube.shape == (16, 2, 2)
    np.testing.assert_array_equal(flat[0], x.max(axis=1))
    np.testing.assert_array_equal(cube.reshape(-1), x.max(axis=1))
    traced = row_max_reshaped.trace(x)
    assert [o[1] for o in traced.outputs] == [(1, 64), (16, 2, 2)]


@pytest.mark.parametrize("view", ["slice", "transpose"])
def test_returning_a_part_or_a_reordering_of_a_tensor_is_an_error(view: str) -> None:
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x)
        return out[0:64, :] if view == "slice" else out.ap([[1, x.shape[1]], [x.shape[1], x.shape[0]]])

    with pytest.raises(NkiError, match="must return whole tensors, not views of"):
        k.trace(np.zeros((128, 4), np.float32))
