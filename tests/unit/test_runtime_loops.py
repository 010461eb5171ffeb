"""Registers and runtime loops end to end: ``nisa.register_*``, ``nl.dynamic_range``, ``nl.fori_loop``,
``nl.while_loop``. The trip counts come from input data, so one compiled NEFF runs every count."""

from __future__ import annotations

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.compiler as ncc  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.compiler.driver import compile_traced  # noqa: E402
from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.runtime.errors import SimulationError  # noqa: E402
from nkic.runtime.simulator import run_neff_bytes as simulate  # noqa: E402

ROW = np.arange(1, 5, dtype=np.float32).reshape(1, 4)


def _count(n: int) -> np.ndarray:
    return np.array([[n]], np.int32)


def _load_register(count):
    c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=count)
    reg = nisa.register_alloc()
    nisa.register_load(reg, c)
    return reg


@nki.jit
def repeat_add(data, count):
    """out = data * count, by adding data count times in a loop whose trip count is read from HBM."""
    out = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((1, 4), dtype=nl.float32, buffer=nl.sbuf)
    val = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=val, src=data)
    for _ in nl.dynamic_range(_load_register(count)):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=val, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_dynamic_range_trip_count_from_data(n: int) -> None:
    np.testing.assert_array_equal(repeat_add(ROW, _count(n)), ROW * n)


def test_one_neff_runs_every_trip_count() -> None:
    traced = repeat_add.trace(ROW, _count(1))
    neff = compile_traced(traced).neff
    for n in (0, 3, 11):
        out = simulate(neff, {"data": ROW, "count": _count(n)}).outputs
        np.testing.assert_array_equal(next(iter(out.values())), ROW * n)


@nki.jit
def induction_values(count):
    """Sum of the induction values of dynamic_range(2, count, 3), and the last one, through register_store."""
    total = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    last = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    acc = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    iv = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    last_sb = nl.full((1, 1), -1, dtype=nl.int32, buffer=nl.sbuf)
    for i in nl.dynamic_range(2, _load_register(count), 3):
        nisa.register_store(iv, i)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=iv, op=nl.add)
        nisa.register_store(last_sb, i)
    nisa.dma_copy(dst=total, src=acc)
    nisa.dma_copy(dst=last, src=last_sb)
    return total, last


@pytest.mark.parametrize("stop", [2, 3, 10, 14])
def test_dynamic_range_start_step_and_induction_value(stop: int) -> None:
    values = list(range(2, stop, 3))
    total, last = induction_values(_count(stop))
    assert total[0, 0] == sum(values)
    assert last[0, 0] == (values[-1] if values else -1)


@nki.jit
def fori_sum(data, count):
    """The docs' fori_loop shape: a counted loop with a register bound; writing i does not change the loop."""
    out = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((1, 4), dtype=nl.float32, buffer=nl.sbuf)
    val = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=val, src=data)

    def body(i):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=val, op=nl.add)
        nisa.register_move(i, 1000)  # passed by value: the loop's own counter is untouched

    nl.fori_loop(0, _load_register(count), body)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("n", [0, 4])
def test_fori_loop(n: int) -> None:
    np.testing.assert_array_equal(fori_sum(ROW, _count(n)), ROW * n)


@nki.jit
def while_countdown(data, count_input):
    """The docs' while_loop example: acc += val while the count, decremented in SBUF, is non-zero."""
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    val = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=val, src=data)
    acc = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    count_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=count_sb, src=count_input)
    one_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=one_sb, value=1)
    reg = nisa.register_alloc()
    nisa.register_load(reg, count_sb)

    def body(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=val, op=nl.add)
        nisa.tensor_tensor(dst=count_sb, data1=count_sb, data2=one_sb, op=nl.subtract)
        nisa.register_load(r, count_sb)
        return r

    nl.while_loop(reg, body)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("n", [0, 1, 6])
def test_while_loop(n: int) -> None:
    assert while_countdown(np.array([[2.5]], np.float32), _count(n))[0, 0] == 2.5 * n


@nki.jit
def nested(a, count):
    """A runtime loop inside a rolled affine_range over row tiles, with a rolled loop inside the runtime one."""
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    reg = _load_register(count)
    for t in nl.affine_range(a.shape[0] // 128):
        x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[t * 128:(t + 1) * 128, :])
        acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        for _ in nl.dynamic_range(reg):
            for h in nl.affine_range(2):
                nisa.tensor_tensor(dst=acc[:, h * 32:(h + 1) * 32], data1=acc[:, h * 32:(h + 1) * 32],
                                   data2=x[:, h * 32:(h + 1) * 32], op=nl.add)  # fmt: skip
        nisa.dma_copy(dst=out[t * 128:(t + 1) * 128, :], src=acc)
    return out


def test_nested_static_and_runtime_loops() -> None:
    a = np.random.default_rng(3).standard_normal((256, 64)).astype(np.float32)
    np.testing.assert_allclose(nested(a, _count(3)), a * 3, rtol=1e-6)


@ncc.enable_stack_allocator
@nki.jit
def reused_across_iterations(data, count):
    """``x`` is read early in the body and a body tile is allocated after that read: with lowest-offset
    allocation the body tile would take x's bytes if x were not kept live over the whole loop."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=data)
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for _ in nl.dynamic_range(_load_register(count)):
        y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=2.0)
        z = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=z, value=-7.0)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=y, op=nl.add)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=z, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_tensors_used_across_a_runtime_loop_stay_live() -> None:
    x = np.random.default_rng(4).standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_allclose(reused_across_iterations(x, _count(4)), 4 * (2 * x - 7), rtol=1e-5)


@nki.jit
def register_moves(out_dtype_probe):
    """register_alloc with a value, register_move from a constant and from a register, stores to SBUF and HBM."""
    out = nl.ndarray((1, 3), dtype=out_dtype_probe.dtype, buffer=nl.shared_hbm)
    a = nisa.register_alloc(-5)
    b = nisa.register_alloc()
    nisa.register_move(b, a)
    c = nisa.register_alloc(0)
    nisa.register_move(c, 123456)
    sb = nl.ndarray((1, 3), dtype=out_dtype_probe.dtype, buffer=nl.sbuf)
    nisa.register_store(sb[:, 0:1], a)
    nisa.register_store(sb[:, 1:2], b)
    nisa.dma_copy(dst=out, src=sb)
    nisa.register_store(out[:, 2:3], c)
    return out


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_register_moves_and_stores(dtype) -> None:
    np.testing.assert_array_equal(register_moves(np.zeros((1, 1), dtype)), np.array([[-5, -5, 123456]], dtype))


def test_register_load_reads_float_elements_as_integers() -> None:
    @nki.jit
    def k(v):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        sb = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=sb, src=v)
        r = nisa.register_alloc()
        nisa.register_load(r, sb)
        nisa.register_store(out, r)
        return out

    assert k(np.array([[7.0]], np.float32))[0, 0] == 7


# -- errors ------------------------------------------------------------------------------------------------------
def _trace_error(kernel, *args) -> NkiError:
    with pytest.raises(NkiError) as e:
        kernel.trace(*args)
    return e.value


def test_break_out_of_a_runtime_loop_is_an_error_at_the_loop() -> None:
    @nki.jit
    def k(count):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        for _ in nl.dynamic_range(_load_register(count)):  # LOOP-LINE
            break
        return out

    err = _trace_error(k, _count(2))
    assert "left with break or return" in str(err)
    assert f"test_runtime_loops.py:{_line('# LOOP-LINE')}:" in str(err)


def _line(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, text in enumerate(f, 1) if marker in text and "_line(" not in text)


def test_a_register_has_no_trace_time_value() -> None:
    @nki.jit
    def k(count):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        for i in nl.dynamic_range(_load_register(count)):
            x = out[int(i), 0]  # noqa: F841
        return out

    assert "only known at run time" in str(_trace_error(k, _count(2)))


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda r: nl.dynamic_range(0, r, 0), "step must be a compile-time positive integer"),
        (lambda r: nl.while_loop(3, lambda c: c), "init must be a VirtualRegister"),
        (lambda r: nl.while_loop(r, lambda c: None), "must return the next condition register"),
        (lambda r: nisa.register_move(5, r), "'dst' must be a VirtualRegister"),
        (lambda r: nisa.register_move(r, 2.5), "must be an int or a VirtualRegister"),
        (lambda r: nisa.register_move(r, 1 << 40), "does not fit in a 32-bit register"),
    ],
)
def test_bad_register_and_loop_calls(call, match) -> None:
    @nki.jit
    def k(count):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        call(_load_register(count))
        return out

    assert match in str(_trace_error(k, _count(2)))


def test_register_load_needs_one_element() -> None:
    @nki.jit
    def k(v):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        sb = nl.ndarray((2, 2), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=sb, src=v)
        nisa.register_load(nisa.register_alloc(), sb)
        return out

    assert "exactly one element" in str(_trace_error(k, np.zeros((2, 2), np.int32)))


def test_too_many_registers() -> None:
    @nki.jit
    def k(count):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        for _ in range(64):
            nisa.register_alloc(1)
        return out

    assert "more than 63 registers" in str(_trace_error(k, _count(2)))


def test_a_loop_that_never_ends_is_a_clean_simulation_error() -> None:
    @nki.jit
    def forever(count):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        reg = _load_register(count)
        nl.while_loop(reg, lambda r: r)  # the condition never changes
        nisa.register_store(out, reg)
        return out

    neff = compile_traced(forever.trace(_count(1))).neff
    with pytest.raises(SimulationError, match="runaway simulation"):
        simulate(neff, {"count": _count(1)}, max_events=20_000)
    assert simulate(neff, {"count": _count(0)}).outputs  # a zero condition skips the loop
