"""The StableHLO dialect's parse boundary: hexadecimal float literals are bit patterns (no JAX needed)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nkic.dialects import stablehlo as hlo


# -- the parse boundary ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("literal", "dtype", "expected"),
    [
        ("dense<0xFF80> : tensor<bf16>", ml_dtypes.bfloat16, [-np.inf]),
        ("dense<0xFF800000> : tensor<f32>", np.float32, [-np.inf]),
        ("dense<0x7F800000> : tensor<2xf32>", np.float32, [np.inf, np.inf]),
        ("dense<[0x3F800000, 2.5, 0xFFF0000000000000]> : tensor<3xf64>", np.float64, [1.875, 2.5, -np.inf]),
        ("dense<0x10> : tensor<i32>", np.int32, [16]),
    ],
)
def test_hex_float_literals_are_bit_patterns(literal: str, dtype: type, expected: list[float]) -> None:
    text = f"func.func @main() -> () {{\n  %c = stablehlo.constant {literal}\n  func.return\n}}"
    const = next(op for op in hlo.parse_stablehlo(text).walk() if isinstance(op, hlo.ConstantOp))
    got = const.numpy()
    assert got.dtype == np.dtype(dtype)
    if literal.startswith("dense<[0x3F800000"):
        expected[0] = float(np.array([0x3F800000], np.uint64).view(np.float64)[0])  # f64 bits: not 1.0
    np.testing.assert_array_equal(got.reshape(-1), np.array(expected, dtype=dtype))


def test_plain_xdsl_misreads_hex_floats() -> None:
    """The reason for the boundary: xDSL's own parser takes 0xFF800000 for the integer 4286578688."""
    from xdsl.parser import Parser

    text = "func.func @main() -> () {\n  %c = stablehlo.constant dense<0xFF800000> : tensor<f32>\n  func.return\n}"
    const = next(op for op in Parser(hlo.stablehlo_context(), text).parse_module().walk()
                 if isinstance(op, hlo.ConstantOp))  # fmt: skip
    assert const.numpy()[()] == np.float32(4286578688.0)


def test_convert_follows_stablehlo() -> None:
    """Lowered convert (no JAX needed): to i1 is x != 0, float to integer rounds toward zero, i1 to float 0/1."""
    from nkic.interop.framework import compile_stablehlo

    text = """func.func @main(%a: tensor<2x4xf32>) -> (tensor<2x4xi32>, tensor<2x4xi1>, tensor<2x4xf32>) {
      %i = stablehlo.convert %a : (tensor<2x4xf32>) -> tensor<2x4xi32>
      %b = stablehlo.convert %a : (tensor<2x4xf32>) -> tensor<2x4xi1>
      %f = stablehlo.convert %b : (tensor<2x4xi1>) -> tensor<2x4xf32>
      func.return %i, %b, %f : tensor<2x4xi32>, tensor<2x4xi1>, tensor<2x4xf32>
    }"""
    a = np.array([[1.7, -1.7, 2.5, -2.5], [0.5, 0.0, -0.2, 300.0]], np.float32)
    i, b, f = compile_stablehlo(text).run(a)
    np.testing.assert_array_equal(i, np.trunc(a).astype(np.int32))
    np.testing.assert_array_equal(b, a != 0)
    np.testing.assert_array_equal(f, (a != 0).astype(np.float32))


def test_logical_ops_and_runtime_select() -> None:
    from nkic.interop.framework import compile_stablehlo

    text = """func.func @main(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> (tensor<2x4xf32>) {
      %p = stablehlo.compare GT, %a, %b, FLOAT : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
      %z = stablehlo.constant dense<0.0> : tensor<2x4xf32>
      %q = stablehlo.compare GT, %a, %z, FLOAT : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
      %x = stablehlo.and %p, %q : tensor<2x4xi1>
      %o = stablehlo.or %x, %q : tensor<2x4xi1>
      %n = stablehlo.not %o : tensor<2x4xi1>
      %s = stablehlo.select %n, %a, %b : tensor<2x4xi1>, tensor<2x4xf32>
      func.return %s : tensor<2x4xf32>
    }"""
    a, b = np.random.default_rng(0).standard_normal((2, 2, 4)).astype(np.float32)
    (got,) = compile_stablehlo(text).run(a, b)
    np.testing.assert_array_equal(got, np.where(~(((a > b) & (a > 0)) | (a > 0)), a, b))


def test_returned_values_inputs_constants_and_repeats() -> None:
    """Every returned position is its own NEFF output out<i>: a value returned twice, an input, a constant, a kernel
    node's result (also read by a later segment)."""
    from nkic.interop.framework import compile_stablehlo

    t, q_t = "tensor<4x8xf32>", "tensor<1x128x64xf32>"
    text = f"""func.func @main(%a: {t}, %q: {q_t}) -> ({t}, {t}, {t}, tensor<f32>, {q_t}, {q_t}) {{
      %e = stablehlo.exponential %a : {t}
      %c = stablehlo.constant dense<2.0> : tensor<f32>
      %o = "stablehlo.custom_call"(%q, %q, %q) <{{call_target_name = "AttentionMMSoftmaxMMWithoutSwap",
          backend_config = "{{\\"scale\\": 0.125}}"}}> : ({q_t}, {q_t}, {q_t}) -> {q_t}
      func.return %e, %e, %a, %c, %o, %o : {t}, {t}, {t}, tensor<f32>, {q_t}, {q_t}
    }}"""
    program = compile_stablehlo(text)
    assert [n for n, _, _ in program.outputs] == [f"out{i}" for i in range(6)]
    rng = np.random.default_rng(0)
    a, q = rng.random((4, 8), np.float32), rng.random((1, 128, 64), np.float32)
    e, e2, a2, c, o, o2 = program.run(a, q)
    s = q[0] @ q[0].T * 0.125
    p = np.exp(s - s.max(1, keepdims=True))
    att = (p / p.sum(1, keepdims=True)) @ q[0]
    np.testing.assert_allclose(e, np.exp(a), rtol=1e-6)
    np.testing.assert_array_equal(e2, e)
    np.testing.assert_array_equal(a2, a)
    assert c.shape == () and c == 2.0
    np.testing.assert_allclose(o[0], att, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(o2, o)
