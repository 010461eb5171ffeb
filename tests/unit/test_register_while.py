"""``while reg:`` on a register, the runtime loop nki-library's ``bwmm_shard_on_block_mx`` (dynamic blocks) and
``all_expert_mx_impl`` write: the condition is loaded into a register before the loop and reloaded at the end of the
body from a conditions vector indexed by a block counter kept in SBUF. The body is traced once; the device runs it
while the register is non-zero, so one NEFF runs every trip count."""

from __future__ import annotations

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.compiler.driver import compile_traced  # noqa: E402
from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.runtime.simulator import run_neff_bytes as simulate  # noqa: E402

RNG = np.random.default_rng(26)
N, P, F = 6, 4, 8  # blocks of P rows x F columns


@nki.jit
def double_blocks(x, conditions):
    """out = x with block b doubled for every leading b whose condition is set, and the number of blocks done.

    Written as bwmm_shard_on_block_mx's dynamic-block loop: register_load of the first condition, ``while reg:``,
    the block index advanced in SBUF by nisa.tensor_scalar, the next condition fetched with
    ``conditions.ap(scalar_offset=index)`` and reloaded into the register."""
    n, p, f = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    done = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    index = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(index, 0)
    cond = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cond, src=conditions[0:1, 0:1])
    reg = nisa.register_alloc()
    nisa.register_load(reg, cond)
    while reg:
        tile = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x.ap(pattern=[[f, p], [1, f]], offset=0, scalar_offset=index, indirect_dim=0))
        nisa.tensor_scalar(tile, tile, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out.ap(pattern=[[f, p], [1, f]], offset=0, scalar_offset=index, indirect_dim=0), src=tile)
        nisa.tensor_scalar(index, index, op0=nl.add, operand0=1)
        nisa.dma_copy(dst=cond,
                      src=conditions.ap(pattern=[[1, 1], [1, 1]], offset=0, scalar_offset=index, indirect_dim=1))
        nisa.register_load(reg, cond)  # fmt: skip
    nisa.dma_copy(dst=done, src=index)
    return out, done


def _conditions(k: int) -> np.ndarray:
    """k leading set conditions, then zeros; one entry past the last block terminates the loop (N + 1 entries)."""
    c = np.zeros((1, N + 1), np.int32)
    c[0, :k] = 1
    return c


def _expected(x: np.ndarray, k: int) -> np.ndarray:
    want = x.copy()
    want[:k] *= 2
    return want


@pytest.mark.parametrize("k", [0, 1, 4, N])
def test_while_register_runs_while_the_condition_is_set(k: int) -> None:
    x = RNG.standard_normal((N, P, F)).astype(np.float32)
    out, done = double_blocks(x, _conditions(k))
    np.testing.assert_array_equal(out, _expected(x, k))
    assert done[0, 0] == k


def test_one_neff_runs_every_trip_count() -> None:
    x = RNG.standard_normal((N, P, F)).astype(np.float32)
    traced = double_blocks.trace(x, _conditions(1))
    assert sum(op.name.endswith("loop_begin") for op in traced.module.walk()) == 1
    neff = compile_traced(traced).neff
    for k in (0, 3, N):
        outs = list(simulate(neff, {"x": x, "conditions": _conditions(k)}).outputs.values())
        np.testing.assert_array_equal(outs[0], _expected(x, k))
        assert outs[1][0, 0] == k


@nki.jit
def count_per_row(flags):
    """For each row r (a Python loop, unrolled), how many leading flags of the row are set: a ``while reg:`` at the
    same line traced once per row, its register made by ``nisa.register_alloc(tensor[0, 0])`` as
    nki-library's all_expert_mx_impl does."""
    rows, cols = flags.shape
    out = nl.ndarray((rows, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    row_sb = nl.ndarray((1, cols), dtype=nl.int32, buffer=nl.sbuf)
    count = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    flag = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    for r in range(rows):
        nisa.dma_copy(dst=row_sb, src=flags[r : r + 1, :])
        nisa.memset(count, 0)
        more = nisa.register_alloc(row_sb[0, 0])
        while more:
            nisa.tensor_scalar(count, count, op0=nl.add, operand0=1)
            nisa.dma_copy(dst=flag, src=flags.ap(pattern=[[cols, 1], [1, 1]], offset=r * cols, scalar_offset=count,
                                                 indirect_dim=1))  # fmt: skip
            nisa.register_load(more, flag)
        nisa.dma_copy(dst=out[r : r + 1, :], src=count)
    return out


def test_while_register_in_an_unrolled_loop_and_register_alloc_of_an_element() -> None:
    flags = np.array([[1, 1, 0, 1, 0], [0, 1, 1, 1, 0], [1, 1, 1, 1, 0]], np.int32)
    np.testing.assert_array_equal(count_per_row(flags)[:, 0], [2, 0, 4])


# -- what `while reg:` is not -------------------------------------------------------------------------------------
def _load(c):
    sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=sb, src=c)
    reg = nisa.register_alloc()
    nisa.register_load(reg, sb)
    return reg


def _line(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, text in enumerate(f, 1) if marker in text and "_line(" not in text)


def _error(kernel) -> NkiError:
    with pytest.raises(NkiError) as e:
        kernel.trace(np.array([[1]], np.int32))
    return e.value


def test_if_on_a_register_is_an_error_at_the_users_line() -> None:
    @nki.jit
    def k(c):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        if _load(c):  # IF-LINE
            nisa.dma_copy(dst=out, src=c)
        return out

    err = _error(k)
    assert "only known at run time" in str(err) and "while reg:" in str(err)
    assert f"test_register_while.py:{_line('# IF-LINE')}:" in str(err)


def test_a_compound_while_condition_is_an_error() -> None:
    @nki.jit
    def k(c):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        reg = _load(c)
        while reg and out is not None:  # AND-LINE
            nisa.register_load(reg, c)
        return out

    err = _error(k)
    assert "only known at run time" in str(err)
    assert f"test_register_while.py:{_line('# AND-LINE')}:" in str(err)


def test_break_out_of_a_while_register_is_an_error_at_the_loop() -> None:
    @nki.jit
    def k(c):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        reg = _load(c)
        while reg:  # BREAK-LINE
            break
        return out

    err = _error(k)
    assert "left with break" in str(err)
    assert f"test_register_while.py:{_line('# BREAK-LINE')}:" in str(err)


def test_break_then_the_same_while_again_is_an_error() -> None:
    """A break leaves the loop open; reaching the same ``while`` from the top again must not close it."""

    @nki.jit
    def k(c):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        reg = _load(c)
        for _ in range(2):
            while reg:  # AGAIN-LINE
                break
        return out

    err = _error(k)
    assert "left with break, continue or return" in str(err)
    assert f"test_register_while.py:{_line('# AGAIN-LINE')}:" in str(err)


def test_while_register_inside_no_reorder_is_an_error() -> None:
    """NKI: "Register-based dynamic loops (nl.fori_loop, nl.while_loop) are not supported inside a no_reorder
    block"; ``while reg:`` is the same loop."""

    @nki.jit
    def k(c):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        reg = _load(c)
        with nl.no_reorder():
            while reg:  # NO-REORDER-LINE
                nisa.register_load(reg, c)
        return out

    err = _error(k)
    assert "cannot be inside a no_reorder block" in str(err)
    assert f"test_register_while.py:{_line('# NO-REORDER-LINE')}:" in str(err)


def test_register_alloc_of_a_tensor_needs_one_element() -> None:
    @nki.jit
    def k(c):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        sb = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.sbuf)
        nisa.register_alloc(sb)
        return out

    assert "register_alloc: 'x' must hold exactly one element" in str(_error(k))
