"""Locations and scalars through the framework front door (issue 27 item 4): every op knows its MLIR line and the
JAX source line the MLIR gives it (``#loc`` aliases and ranges included), each instruction it lowers to carries both
into the NEFF's source map and the profile, errors are one line at that place (parse errors through ``from_jax``
too), and 0-d inputs and outputs keep shape () through ``compile_stablehlo``, ``from_jax`` and ``nkic run``."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

from nkic.dialects import stablehlo as hlo
from nkic.interop.framework import compile_stablehlo
from nkic.frontend.errors import NkiError

# What MLIR prints with debug info: aliases defined after their use, a file:line:col range, a callsite chain.
LOCATED = """#loc1 = loc("x")
module @jit_f {
  func.func public @main(%arg0: tensor<4x8xf32> loc("x")) -> tensor<4x8xf32> {
    %0 = stablehlo.exponential %arg0 : tensor<4x8xf32> loc(#loc5)
    %1 = "stablehlo.negate"(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc(#loc6)
    return %1 : tensor<4x8xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc2 = loc("model.py":12:8 to :20)
#loc3 = loc("run.py":3:0 to 4:1)
#loc4 = loc("f"(#loc2))
#loc5 = loc("jit(f)/exp"(callsite(#loc4 at #loc3)))
#loc6 = loc("jit(f)/neg"(#loc2))
"""


def test_ops_know_their_mlir_and_source_lines() -> None:
    module = hlo.parse_stablehlo(LOCATED, filename="m.mlir")
    module.verify()
    exp, neg = [op for op in module.walk() if op.name in ("stablehlo.exponential", "stablehlo.negate")]
    assert hlo.mlir_location(exp) == ("m.mlir", 4, 5)
    assert hlo.mlir_location(neg) == ("m.mlir", 5, 5)  # the generic form too
    assert hlo.source_location(exp) == ("jit(f)/exp", "model.py", 12, 8)  # the callee of the call site
    assert hlo.source_location(neg) == ("jit(f)/neg", "model.py", 12, 8)
    ret = module.walk().__next__()
    assert hlo.source_location(ret) is None  # loc(unknown)


def test_instructions_carry_both_locations_into_the_profile() -> None:
    from nkic.compiler.driver import run_neff

    prog = compile_stablehlo(LOCATED, filename="m.mlir", debug_info=True)
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    result = run_neff(prog.result.neff, {"arg0": x})
    np.testing.assert_allclose(result.outputs["out0"], -np.exp(x), rtol=1e-5)
    sources = {src for src, _ in result.profile.by_source().items()}
    assert ("model.py:12:8", "stablehlo.exponential jit(f)/exp m.mlir:4:5 nl.exp") in sources, sources
    assert all(loc == "model.py:12:8" for loc, _ in sources), sources  # nothing at a line of nkic


def test_every_op_of_a_fused_chain_is_named_in_the_profile() -> None:
    """exp then negate are one fused pass over SBUF; each instruction still carries its own op: the load the exp's
    (its first reader), the negate's multiply and the store the negate's (the op producing the stored result)."""
    from nkic.compiler.driver import run_neff

    prog = compile_stablehlo(LOCATED, filename="m.mlir", debug_info=True)
    result = run_neff(prog.result.neff, {"arg0": np.ones((4, 8), np.float32)}, timing_only=True)
    calls = {call for _, call in result.profile.by_source()}
    neg = "stablehlo.negate jit(f)/neg m.mlir:5:5 "
    assert {neg + "nl.multiply", neg + "nl.store"} <= calls, calls
    assert "stablehlo.exponential jit(f)/exp m.mlir:4:5 nl.load" in calls, calls


def test_without_source_locations_the_mlir_line_is_the_location() -> None:
    text = "\n".join(line for line in LOCATED.splitlines() if not line.startswith("#loc"))
    text = text.replace(" loc(#loc5)", "").replace(" loc(#loc6)", "").replace(" loc(#loc)", "").replace(' loc("x")', "")
    with pytest.raises(NkiError) as err:
        compile_stablehlo(text.replace("stablehlo.negate", "stablehlo.remainder").replace(
            "(%0) : (tensor<4x8xf32>)", "(%0, %0) : (tensor<4x8xf32>, tensor<4x8xf32>)"), filename="m.mlir")  # fmt: skip
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("m.mlir:4: error: stablehlo.remainder: no tile lowering"), message


def test_parse_and_verify_errors_are_one_line_at_the_mlir_line() -> None:
    bad_op = LOCATED.replace('"stablehlo.negate"(%0)', '"stablehlo.frobnicate"(%0)')
    with pytest.raises(NkiError, match=r"^m\.mlir:5: error: stablehlo\.frobnicate: not an op nkic reads") as err:
        compile_stablehlo(bad_op, filename="m.mlir")
    assert "\n" not in str(err.value)
    syntax = LOCATED.replace("stablehlo.exponential %arg0 :", "stablehlo.exponential %arg0, :")
    with pytest.raises(NkiError, match=r"^m\.mlir:4: error: cannot read the StableHLO: ") as err:
        compile_stablehlo(syntax, filename="m.mlir")
    assert "\n" not in str(err.value)
    rule = LOCATED.replace("%1 = \"stablehlo.negate\"(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>",
                           '%1 = "stablehlo.reverse"(%0) <{dimensions = array<i64: 2>}> : (tensor<4x8xf32>) -> '
                           "tensor<4x8xf32>")  # fmt: skip
    with pytest.raises(NkiError, match=r"^model\.py:12: error: stablehlo\.reverse: dimension out of range "
                                       r"\(stablehlo\.reverse jit\(f\)/neg m\.mlir:5:5\)"):  # fmt: skip
        compile_stablehlo(rule, filename="m.mlir")


def test_scalar_inputs_and_outputs_keep_shape_zero_d(tmp_path: Path) -> None:
    from nkic.tools.cli import main

    text = """func.func @main(%x: tensor<4x8xf32>, %s: tensor<f32>) -> (tensor<4x8xf32>, tensor<f32>) {
  %b = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %y = stablehlo.multiply %x, %b : tensor<4x8xf32>
  %c = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %t = stablehlo.reduce(%x init: %c) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  %z = stablehlo.multiply %t, %s : tensor<f32>
  func.return %y, %z : tensor<4x8xf32>, tensor<f32>
}
"""
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    prog = compile_stablehlo(text)
    y, z = prog.run(x, np.float32(3.0))
    assert z.shape == () and float(z) == 3.0 * x.sum() and y.shape == (4, 8)
    (tmp_path / "m.mlir").write_text(text)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "s.npy", np.float32(3.0))
    assert main(["compile", str(tmp_path / "m.mlir"), "-o", str(tmp_path / "m.neff")]) == 0
    from nkic.runtime.neff import read_neff

    sources = {src for sg in read_neff((tmp_path / "m.neff").read_bytes()).subgraphs for src in sg.sources.values()}
    assert (f"{tmp_path / 'm.mlir'}:3:3", "stablehlo.multiply nl.multiply") in sources, sources  # nkic profile's lines
    assert main(["run", str(tmp_path / "m.neff"), "--input", f"arg0={tmp_path / 'x.npy'}", "--input",
                 f"arg1={tmp_path / 's.npy'}", "--output-dir", str(tmp_path / "out")]) == 0  # fmt: skip
    out1 = np.load(tmp_path / "out" / "out1.npy")
    assert out1.shape == () and float(out1) == 3.0 * x.sum()
    np.save(tmp_path / "bad.npy", np.zeros((1,), np.float32))
    assert main(["run", str(tmp_path / "m.neff"), "--input", f"arg0={tmp_path / 'x.npy'}", "--input",
                 f"arg1={tmp_path / 'bad.npy'}", "--output-dir", str(tmp_path / "out")]) == 1  # fmt: skip


def test_from_jax_errors_are_at_the_users_line() -> None:
    jnp = pytest.importorskip("jax").numpy
    from nkic.interop.framework import from_jax

    def f(x):  # type: ignore[no-untyped-def]
        return jnp.fmod(x, 3.0)  # stablehlo.remainder: folded when constant, no tile lowering

    line = inspect.getsourcelines(f)[1] + 1
    with pytest.raises(NkiError) as err:
        from_jax(f)(np.ones((4, 8), np.float32))
    message = str(err.value)
    assert message.startswith(f"{__file__}:{line}: error: stablehlo.remainder: no tile lowering"), message
    assert "(stablehlo.remainder rem jit(f).mlir:" in message and "\n" not in message

    def g(x):  # type: ignore[no-untyped-def]
        return jnp.round(x)  # stablehlo.round_nearest_even: not an op nkic reads

    with pytest.raises(NkiError, match=r"^jit\(g\)\.mlir:\d+: error: stablehlo\.round_nearest_even: not an op nkic "
                                       "reads") as err:  # fmt: skip
        from_jax(g)(np.ones((4, 8), np.float32))
    assert "\n" not in str(err.value)


def test_from_jax_scalars() -> None:
    jnp = pytest.importorskip("jax").numpy
    from nkic.interop.framework import from_jax

    out = from_jax(lambda x, s: (jnp.sum(x) * s, x * s))(np.ones((4, 8), np.float32), np.float32(2.0))
    assert np.shape(out[0]) == () and float(out[0]) == 64.0 and np.shape(out[1]) == (4, 8)


def test_an_unknown_custom_call_is_at_its_mlir_line() -> None:
    text = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  %1 = stablehlo.custom_call @Frob(%0) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
"""
    with pytest.raises(NkiError, match=r"^c\.mlir:3: error: custom_call @Frob is not a kernel nkic knows "
                                       r"\(stablehlo\.custom_call c\.mlir:3:3\)"):  # fmt: skip
        compile_stablehlo(text, filename="c.mlir")


def test_an_nki_kernel_a_custom_call_traces_keeps_its_own_lines() -> None:
    """The pinned position stands for nkic's front door only: the bundled tensor_add kernel's instructions are at its
    own lines, noted with the custom call; the exponential after it at its MLIR line."""
    text = """func.func @main(%a: tensor<128x512xf32>, %b: tensor<128x512xf32>) -> tensor<128x512xf32> {
  %s = stablehlo.custom_call @AwsNeuronCustomNativeKernel(%a, %b) {backend_config = "{\\"kernel_name\\": \\"nkic.kernels.tensor_add:tensor_add\\"}"} : (tensor<128x512xf32>, tensor<128x512xf32>) -> tensor<128x512xf32>
  %o = stablehlo.exponential %s : tensor<128x512xf32>
  func.return %o : tensor<128x512xf32>
}
"""
    from nkic.runtime.neff import read_neff

    prog = compile_stablehlo(text, filename="k.mlir", debug_info=True)
    sources = {src for sg in read_neff(prog.result.neff).subgraphs for src in sg.sources.values()}
    kernel_lines = {loc for loc, call in sources if call.startswith("stablehlo.custom_call ")}
    assert kernel_lines and all("tensor_add.py:" in loc for loc in kernel_lines), sources
    assert any(loc == "k.mlir:3:3" and call.startswith("stablehlo.exponential") for loc, call in sources), sources


def test_a_chlo_op_nkic_cannot_decompose_is_at_its_line() -> None:
    text = """func.func @main(%a: tensor<4xf64>) -> tensor<4xf64> {
  %0 = chlo.erf %a : tensor<4xf64> -> tensor<4xf64>
  func.return %0 : tensor<4xf64>
}
"""
    with pytest.raises(NkiError, match=r"^e\.mlir:2: error: chlo\.erf of f64: nkic computes erf/erfc/erf_inv in f16, "
                                       r"bf16 or f32 \(chlo\.erf e\.mlir:2:3\)"):  # fmt: skip
        compile_stablehlo(text, filename="e.mlir")


def test_a_custom_call_notes_its_copy_even_when_the_kernel_was_traced_before() -> None:
    """A kernel's trace is cached per specialisation: one traced earlier (here directly, in another test elsewhere)
    is reused, and its instructions are still noted with the custom call that inserted them (and only with it)."""
    from nkic.kernels.tensor_add import tensor_add
    from nkic.frontend import TensorSpec

    spec = TensorSpec((128, 512), "float32")
    tensor_add.trace(spec, spec)
    test_an_nki_kernel_a_custom_call_traces_keeps_its_own_lines()
    test_an_nki_kernel_a_custom_call_traces_keeps_its_own_lines()  # twice: the note is not stamped on the cache
