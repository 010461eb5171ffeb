"""Traced kernels through the real PenguinEmitter: the printed penguin IR of every instruction, and execution."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nkic.frontend.isa as nisa
import nkic.frontend.language as nl
from nkic.api import execute
from nkic.api.execute import simulate
from nkic.frontend import tracer
from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import TensorSpec, jit
from nkic.runtime.simulator import RunResult

BF16 = ml_dtypes.bfloat16


@jit
def softmax_block(q, k):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    qs = nl.ndarray((128, 128), nl.bfloat16, name="q_sb")
    ks = nl.ndarray((128, 512), nl.bfloat16, name="k_sb")
    nisa.dma_copy(qs, q)
    nisa.dma_copy(ks, k)
    ps = nl.ndarray((128, 512), nl.float32, buffer=nl.psum, name="scores_ps")
    nisa.nc_matmul(ps, qs, ks)
    s = nl.ndarray((128, 512), nl.float32, name="s")
    nisa.tensor_copy(s, ps, engine=nisa.engine.vector)
    nisa.affine_select(s, pattern=[[-1, 512]], channel_multiplier=1, on_true_tile=s, on_false_value=nl.fp32.min,
                       cmp_op=nl.greater_equal)  # fmt: skip
    mx = nl.ndarray((128, 1), nl.float32, name="mx")
    nisa.tensor_scalar_reduce(s, s, op0=nl.multiply, operand0=0.125, reduce_op=nl.maximum, reduce_res=mx)
    nisa.tensor_reduce(mx, nl.maximum, s.reshape((128, 4, 128)), axis=(1, 2), negate=True)
    sm = nl.ndarray((128, 1), nl.float32, name="sm")
    e = nl.ndarray((128, 512), nl.bfloat16, name="e")
    nisa.activation_reduce(e, nl.exp, s, reduce_op=nl.add, reduce_res=sm, bias=mx)
    nisa.reciprocal(sm, sm)
    nisa.tensor_scalar(s, s, nl.multiply, sm, op1=nl.add, operand1=1.0)
    nisa.scalar_tensor_tensor(s, s, nl.multiply, 2.0, nl.add, s)
    io = nl.ndarray((128, 512), nl.int32, name="io")
    nisa.iota(io, [[1, 512]], offset=3, channel_multiplier=512)
    tp = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.psum, name="tp")
    nisa.nc_transpose(tp, qs)
    for i in nl.affine_range(4):
        nisa.tensor_tensor(s[:, nl.ds(i * 128, 128)], s[:, nl.ds(i * 128, 128)], e[:, nl.ds(i * 128, 128)],
                           op=nl.subtract)  # fmt: skip
    nisa.dma_copy(out, s)
    return out


def test_every_instruction_prints() -> None:
    traced = softmax_block.trace(TensorSpec((128, 128), "bfloat16"), TensorSpec((128, 512), "bfloat16"))
    text = str(traced.module)
    expected = [
        "penguin.matmul dst %scores_ps[0 : [512, 128], [1, 512]], stationary %q_sb[0 : [128, 128], [1, 128]], "
        "moving %k_sb[0 : [512, 128], [1, 512]]",
        'penguin.tensor_copy dst %s[0 : [512, 128], [1, 512]], src %scores_ps[0 : [512, 128], [1, 512]]',
        'engine = "vector"',
        'pattern = #nkic.ap<0 : [-1, 512]>, channel_multiplier = 1 : i64, cmp_op = "greater_equal", '
        "on_false_value = -3.40282347e+38 : f32",
        'reduce_res %mx[0 : [1, 128], [1, 1]]',
        'op0 = "multiply", operand0 = 1.250000e-01 : f32, reduce_op = "maximum"',
        "penguin.tensor_reduce dst %mx[0 : [1, 128], [1, 1]], data %s[0 : [512, 128], [128, 4], [1, 128]]",
        'op = "maximum", axes = array<i64: 1, 2>, negate = true, keepdims = false',
        "bias %mx[0 : [1, 128], [1, 1]], reduce_res %sm[0 : [1, 128], [1, 1]]",
        'func = "exp", scale = 1.000000e+00 : f32, reduce_op = "add", reduce_cmd = "reset_reduce"',
        "penguin.reciprocal dst %sm[0 : [1, 128], [1, 1]], data %sm[0 : [1, 128], [1, 1]]",
        'operand0 %sm[0 : [1, 128], [1, 1]] {loc = ',
        'op0 = "multiply", reverse0 = false, op1 = "add", operand1 = 1.000000e+00 : f32',
        'penguin.scalar_tensor_tensor dst %s[0 : [512, 128], [1, 512]], data %s[0 : [512, 128], [1, 512]], '
        "operand1 %s[0 : [512, 128], [1, 512]]",
        "pattern = #nkic.ap<3 : [1, 512]>, channel_multiplier = 512 : i64",
        "penguin.transpose dst %tp[0 : [128, 128], [1, 128]], data %q_sb[0 : [128, 128], [1, 128]]",
        'penguin.loop "affine" 0 to 4 step 1 {',
        "penguin.tensor_tensor dst %s[0 + 128*i0 : [512, 128], [1, 128]], data1 %s[0 + 128*i0 : [512, 128], "
        "[1, 128]], data2 %e[0 + 128*i0 : [512, 128], [1, 128]]",
        "penguin.return %out",
    ]
    for piece in expected:
        assert piece in text, piece
    with open(__file__) as f:
        line = next(n for n, src in enumerate(f, 1) if "nisa.nc_matmul(ps, qs, ks)" in src)
    assert f'{__file__}:{line}:5"' in text  # the nc_matmul call's file:line:col


def test_symbolic_and_unrolled_loops_in_ir() -> None:
    @jit
    def k(x):
        out = nl.ndarray((512, 512), x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            t = nl.ndarray((128, 512), x.dtype, name="t")
            nisa.dma_copy(t, x[nl.ds(i * 128, 128)])
            for j in nl.sequential_range(2):
                nisa.dma_copy(out[i * 128 : (i + 1) * 128, nl.ds(j * 256, 256)], t[:, nl.ds(j * 256, 256)])
            if i == 3:  # forces the i loop to unroll on a re-trace
                nisa.memset(t, 0.0)
        return out

    text = str(k.trace(np.zeros((512, 512), np.float32)).module)
    assert text.count('penguin.loop "affine"') == 0 and text.count('penguin.loop "sequential" 0 to 2') == 4
    assert "src %x_1[196608 : [512, 128], [1, 512]]" in text
    assert "dst %out[196608 + 256*i0 : [512, 128], [1, 256]]" in text
    assert text.count("penguin.memset") == 1


def test_call_and_simulate_use_the_execution_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    received = {}

    def run(traced, inputs, build=None):
        received.update(inputs)
        outputs = {name: np.full(shape, 7, np.float32) for name, shape, _ in traced.outputs}
        return outputs, RunResult(outputs, None)  # type: ignore[arg-type]  (no profile; nothing tracked as written)

    monkeypatch.setattr(execute, "_run", run)
    monkeypatch.setattr(tracer, "_executor", execute.run_kernel)

    @jit
    def k(a, b, scale=2):
        o1 = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype)
        nisa.dma_copy(t, a)
        nisa.dma_copy(o1, t)
        nisa.dma_copy(o2, t)
        return o1, o2

    a, b = np.ones((128, 64), np.float32), np.zeros((128, 64), BF16)
    r1, r2 = k(a, b)
    assert r1.shape == (128, 64) and set(received) == {"a", "b"} and received["b"] is b
    out = simulate(k[1])(a, b=b, scale=3)
    assert isinstance(out, tuple) and len(out) == 2


def test_call_without_an_executor_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The frontend cannot compile: with no execution layer registered, a call says so instead of failing deep."""
    monkeypatch.setattr(tracer, "_executor", None)

    @jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, a)
        return out

    with pytest.raises(NkiError, match="kernel 'k' was called outside a trace, but no executor is registered"):
        k(np.ones((128, 64), np.float32))
    assert tracer.set_executor(execute.run_kernel) is None and tracer._executor is execute.run_kernel
