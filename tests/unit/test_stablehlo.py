"""The StableHLO front door: JAX programs exported by JAX, compiled by nkic, simulated, compared with JAX on the CPU.

Attention (plain and causal, f32 and bf16) is routed to the library's flash_attention (an internal kernel node,
visible in the dump); near-misses of the idiom are not routed and still compute right op by op; the MLP block is
lowered op by op. Skipped without JAX (the dialect's own tests are in test_stablehlo_dialect.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from nkic.dialects import stablehlo as hlo

ROOT = Path(__file__).resolve().parents[2]


# -- JAX programs ---------------------------------------------------------------------------------------------------
jax = pytest.importorskip("jax")
jnp = jax.numpy

from nkic.interop.framework import compile_stablehlo, from_jax  # noqa: E402


def attention(q, k, v, causal=False, scale=True, axis=-1):  # type: ignore[no-untyped-def]
    s = jnp.einsum("...qd,...kd->...qk", q, k)
    if scale:
        s = s * (1.0 / np.sqrt(q.shape[-1]))
    if causal:
        n = s.shape[-1]
        s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -jnp.inf)
    p = jax.nn.softmax(s, axis=axis)
    return p @ v


def mlp(x, w1, b1, w2):  # type: ignore[no-untyped-def]
    h = jax.nn.gelu(x @ w1 + b1, approximate=True)
    return jnp.tanh(h @ w2) + x[:, :64], jnp.max(h, axis=0)


def _inputs(shape: tuple[int, ...], dtype: type, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(n)]


def _close(got: object, want: object, dtype: type) -> None:
    tol = 2e-2 if dtype == ml_dtypes.bfloat16 else 1e-5
    g, w = np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32)
    assert g.shape == w.shape
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _kernel_nodes(dump: Path) -> list[str]:
    """The host graph's kernel nodes, as "@callee kind"."""
    text = (dump / "00-penguin.mlir").read_text()
    return [f"{m.group(1)} {m.group(2)}" for m in re.finditer(r'penguin\.kernel_node (@\w+)\(.*kind = "(\w+)"', text)]


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_jax_attention_routes_to_flash_attention(tmp_path: Path, causal: bool, dtype: type) -> None:
    q, k, v = (jnp.asarray(a) for a in _inputs((2, 128, 64), dtype, 3))

    def fn(q, k, v):  # type: ignore[no-untyped-def]
        return attention(q, k, v, causal)

    got = from_jax(fn, dump_dir=tmp_path)(q, k, v)
    assert isinstance(got, jax.Array)
    _close(got, jax.jit(fn)(q, k, v), dtype)
    nodes = _kernel_nodes(tmp_path)
    assert "@flash_attention internal" in nodes, nodes
    routed = (tmp_path / "00-stablehlo-routed.mlir").read_text()
    variant = "CausalAttentionMMSoftmaxMMWithoutSwap" if causal else "AttentionMMSoftmaxMMWithoutSwap"
    assert f'call_target_name = "{variant}"' in routed
    assert "stablehlo.exponential" not in routed  # the whole softmax went into the kernel


def test_jax_mlp_is_lowered_op_by_op(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((128, 256)).astype(np.float32)
    w1 = (rng.standard_normal((256, 384)) * 0.05).astype(np.float32)
    b1 = rng.standard_normal(384).astype(np.float32)
    w2 = (rng.standard_normal((384, 64)) * 0.05).astype(np.float32)
    got = from_jax(mlp, routing=False, dump_dir=tmp_path)(x, w1, b1, w2)  # the cost model may route x @ w1
    want = jax.jit(mlp)(x, w1, b1, w2)
    assert isinstance(got, tuple) and isinstance(got[0], np.ndarray)  # numpy in, numpy out
    for g, w in zip(got, want):
        _close(g, w, np.float32)
    nodes = _kernel_nodes(tmp_path)
    assert nodes == ["@hlo_segment_0 external"], nodes


@pytest.mark.parametrize("miss", ["softmax_over_queries", "no_scale"])
def test_router_does_not_fire_on_near_misses(tmp_path: Path, miss: str) -> None:
    q, k, v = _inputs((128, 64), np.float32, 3, seed=2)

    def fn(q, k, v):  # type: ignore[no-untyped-def]
        if miss == "no_scale":
            return attention(q, k, v, scale=False)
        return attention(q, k, v, axis=0)

    got = from_jax(fn, dump_dir=tmp_path)(q, k, v)
    _close(got, jax.jit(fn)(q, k, v), np.float32)
    assert "stablehlo.custom_call" not in (tmp_path / "00-stablehlo-routed.mlir").read_text()
    assert all("flash_attention" not in n for n in _kernel_nodes(tmp_path))


def test_composite_attention_routes_by_name(tmp_path: Path) -> None:
    """``jax.lax.composite`` named attention: routed by its name with its attributes, whatever its body."""
    q, k, v = _inputs((1, 256, 64), np.float32, 3, seed=3)

    def fn(q, k, v):  # type: ignore[no-untyped-def]
        body = jax.lax.composite(lambda q, k, v, scale, causal: attention(q, k, v, causal=True),
                                 name="nkic.attention")  # fmt: skip
        return body(q, k, v, scale=np.float32(0.125), causal=True) * 2.0

    got = from_jax(fn, dump_dir=tmp_path)(q, k, v)
    _close(got, jax.jit(fn)(q, k, v), np.float32)
    penguin = (tmp_path / "00-penguin.mlir").read_text()
    node = next(line for line in penguin.splitlines() if "kernel_node @flash_attention" in line)
    attrs = json.loads(node.split('kernel_attrs = "')[1].split('"')[0].replace("\\22", '"'))
    assert attrs == {"is_causal": True, "scale": 0.125, "sliding_window": 0}


def test_decompose_attention_is_the_inverse() -> None:
    from nkic.compiler.driver import make_context
    from nkic.hlo.router import DecomposeAttention, RouteAttention

    q, k, v = _inputs((128, 64), np.float32, 3, seed=4)

    def fn(q, k, v):  # type: ignore[no-untyped-def]
        return attention(q, k, v, causal=True)

    text = jax.jit(fn).lower(q, k, v).compiler_ir("stablehlo").operation.get_asm(print_generic_op_form=True)
    module = hlo.parse_stablehlo(text)
    RouteAttention().apply(make_context(), module)
    assert any(isinstance(op, hlo.CustomCallOp) for op in module.walk())
    DecomposeAttention().apply(make_context(), module)
    assert not any(isinstance(op, hlo.CustomCallOp) for op in module.walk())
    program = compile_stablehlo(module, routing=False)
    (got,) = program.run(q, k, v)
    _close(got, jax.jit(fn)(q, k, v), np.float32)


def test_nki_custom_call_is_an_external_kernel_node(tmp_path: Path) -> None:
    text = """func.func @main(%a: tensor<128x512xf32>, %b: tensor<128x512xf32>) -> tensor<128x512xf32> {
      %s = "stablehlo.custom_call"(%a, %b) <{call_target_name = "AwsNeuronCustomNativeKernel",
          backend_config = "{\\"kernel_name\\": \\"nkic.kernels.tensor_add:tensor_add\\"}"}>
          : (tensor<128x512xf32>, tensor<128x512xf32>) -> tensor<128x512xf32>
      %o = stablehlo.exponential %s : tensor<128x512xf32>
      func.return %o : tensor<128x512xf32>
    }"""
    program = compile_stablehlo(text, dump_dir=tmp_path)
    a, b = _inputs((128, 512), np.float32, 2, seed=5)
    (got,) = program.run(a, b)
    np.testing.assert_allclose(got, np.exp(a + b), rtol=1e-5)
    assert _kernel_nodes(tmp_path) == ["@nki_tensor_add_0 external", "@hlo_segment_1 external"]


def test_two_calls_of_one_looping_kernel(tmp_path: Path) -> None:
    """Two kernel nodes of the library matmul in one graph (its PSUM tile allocated inside its loops): each
    inlined copy keeps loop labels of its own, so unrolling renames each copy's PSUM accesses (both kernels'
    loops labelled L0.. failed in resolve-psum-accumulate with KeyError 'nki_matmul_1.psum')."""
    cfg = '"{\\"kernel_name\\": \\"nkic.kernels.matmul:matmul\\"}"'
    ty = "(tensor<256x128xf32>, tensor<256x512xf32>) -> tensor<128x512xf32>"
    text = f"""func.func @main(%a: tensor<256x128xf32>, %b: tensor<256x512xf32>) -> tensor<128x512xf32> {{
      %s = stablehlo.custom_call @AwsNeuronCustomNativeKernel(%a, %b) {{backend_config = {cfg}}} : {ty}
      %n = stablehlo.negate %b : tensor<256x512xf32>
      %t = stablehlo.custom_call @AwsNeuronCustomNativeKernel(%a, %n) {{backend_config = {cfg}}} : {ty}
      %o = stablehlo.multiply %s, %t : tensor<128x512xf32>
      func.return %o : tensor<128x512xf32>
    }}"""
    program = compile_stablehlo(text, dump_dir=tmp_path)
    a, b = _inputs((256, 128), np.float32, 1, seed=15)[0], _inputs((256, 512), np.float32, 1, seed=16)[0]
    (got,) = program.run(a, b)
    np.testing.assert_allclose(got, -((a.T @ b) ** 2), rtol=1e-4, atol=1e-4)
    assert _kernel_nodes(tmp_path)[:3] == ["@nki_matmul_0 external", "@hlo_segment_1 external",
                                            "@nki_matmul_2 external"]  # fmt: skip


def test_names_tiling_and_ops() -> None:
    """arg0.. / out0.. in function order; a dot and a reduction larger than one tile; transpose, broadcast,
    select on a run-time predicate, convert, iota."""

    def fn(a, b, c):  # type: ignore[no-untyped-def]
        d = (a @ b).T  # (300, 200): K = 260 (3 tiles), N = 600 (2 tiles), M = 200 (2 tiles)
        row = jnp.sum(d, axis=1) + jnp.arange(300, dtype=jnp.float32)
        picked = jnp.where(c > 0, c, jnp.minimum(c, -1.0))
        return d.astype(jnp.bfloat16), row, picked, jnp.max(jnp.exp(c), axis=0)

    a, b = _inputs((200, 260), np.float32, 1, seed=6)[0], _inputs((260, 300), np.float32, 1, seed=7)[0]
    c = _inputs((4, 1000), np.float32, 1, seed=8)[0]
    text = jax.jit(fn).lower(a, b, c).compiler_ir("stablehlo").operation.get_asm(print_generic_op_form=True)
    program = compile_stablehlo(text)
    assert [n for n, _, _ in program.inputs] == ["arg0", "arg1", "arg2"]
    assert [n for n, _, _ in program.outputs] == ["out0", "out1", "out2", "out3"]
    got = program.run(a, b, c)
    for g, w in zip(got, jax.jit(fn)(a, b, c)):
        assert g.dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g.astype(np.float32), np.asarray(w).astype(np.float32), rtol=1e-2, atol=1e-3)


def test_cli_compiles_a_stablehlo_file(tmp_path: Path) -> None:
    q, k, v = _inputs((128, 64), np.float32, 3, seed=9)

    def fn(q, k, v):  # type: ignore[no-untyped-def]
        return attention(q, k, v, causal=True)

    model = tmp_path / "model.mlir"
    model.write_text(jax.jit(fn).lower(q, k, v).compiler_ir("stablehlo").operation.get_asm())
    neff, dump = tmp_path / "model.neff", tmp_path / "dump"
    res = subprocess.run([sys.executable, "-m", "nkic", "compile", str(model), "-o", str(neff), "--dump-dir",
                          str(dump)], capture_output=True, text=True, cwd=ROOT.parent)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "inputs arg0[128, 64], arg1[128, 64], arg2[128, 64]; outputs out0[128, 64]" in res.stdout
    assert "kernel_node @flash_attention" in (dump / "00-penguin.mlir").read_text()
    from nkic.compiler.driver import run_neff

    out = run_neff(neff.read_bytes(), {"arg0": q, "arg1": k, "arg2": v}).outputs["out0"]
    _close(out, jax.jit(fn)(q, k, v), np.float32)


def test_other_composites_scalars_and_names() -> None:
    """A composite of another name is lowered through its decomposition; a scalar result comes back as a 0-d
    array; ``nkic.name`` argument/result attributes name the NEFF's variables."""

    def fn(x):  # type: ignore[no-untyped-def]
        gelu = jax.lax.composite(lambda x: jax.nn.gelu(x, approximate=True), name="my.gelu")
        return jnp.sum(gelu(x)), gelu(x) * 3.0

    (x,) = _inputs((8, 16), np.float32, 1, seed=10)
    total, scaled = from_jax(fn)(x)
    want_total, want_scaled = jax.jit(fn)(x)
    assert np.shape(total) == ()
    _close(total, want_total, np.float32)
    _close(scaled, want_scaled, np.float32)
    text = """func.func @main(%a: tensor<4x8xf32> {nkic.name = "x"}) -> (tensor<4x8xf32> {nkic.name = "y"}) {
      %o = stablehlo.exponential %a : tensor<4x8xf32>
      func.return %o : tensor<4x8xf32>
    }"""
    program = compile_stablehlo(text)
    assert [n for n, _, _ in program.inputs] == ["x"] and [n for n, _, _ in program.outputs] == ["y"]


def test_sliding_window_heads_and_batch1_matmul(tmp_path: Path) -> None:
    """(batch, heads, seq, d) attention with a causal sliding window: routed with sliding_window = 64 (the heads
    flattened into the kernel's batch); the batch-1 form JAX writes as a 2-D matmul is routed too."""

    def fn(q, k, v):  # type: ignore[no-untyped-def]
        s = jnp.einsum("...qd,...kd->...qk", q, k) * 0.125
        i, j = jnp.arange(s.shape[-1])[:, None], jnp.arange(s.shape[-1])[None, :]
        s = jnp.where((i >= j) & (i - j < 64), s, -jnp.inf)
        return jax.nn.softmax(s, axis=-1) @ v

    for shape in [(2, 2, 128, 32), (1, 128, 32)]:
        q, k, v = _inputs(shape, np.float32, 3, seed=11)
        _close(from_jax(fn, dump_dir=tmp_path)(q, k, v), jax.jit(fn)(q, k, v), np.float32)
        penguin = (tmp_path / "00-penguin.mlir").read_text()
        assert '\\22sliding_window\\22: 64' in penguin and "kernel_node @flash_attention" in penguin


@pytest.mark.parametrize(("causal", "dtype"), [(False, np.float32), (True, ml_dtypes.bfloat16)], ids=["plain-f32", "causal-bf16"])
def test_jax_dot_product_attention_routes_to_flash_attention(tmp_path: Path, causal: bool, dtype: type) -> None:
    """``jax.nn.dot_product_attention`` (implementation=None on the CPU) emits the idiom on (batch, seq, heads, d)
    with a unit group dim, a transposed softmax and V as the second dot's lhs: routed all the same, Q/K/V
    transposed to (batch, heads, seq, d) around the call; the causal mask is its finfo.min select."""
    q, k, v = _inputs((1, 128, 2, 64), dtype, 3, seed=12)

    def fn(q, k, v):  # type: ignore[no-untyped-def]
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal)

    _close(from_jax(fn, dump_dir=tmp_path)(q, k, v), jax.jit(fn)(q, k, v), dtype)
    assert "@flash_attention internal" in _kernel_nodes(tmp_path)
    routed = (tmp_path / "00-stablehlo-routed.mlir").read_text()
    assert ("CausalAttentionMMSoftmaxMMWithoutSwap" in routed) == causal and "stablehlo.exponential" not in routed


def test_layout_router_fires_only_when_dims_line_up(tmp_path: Path) -> None:
    """Near-misses in the (batch, seq, heads, d) layout: the second dot contracting P over the queries (Pᵀ V), and
    a mask that is not the causal triangle in (query, key) order. Not routed, still right. (A V that is computed,
    e.g. jnp.roll over heads, is still attention: routed, checked for numerics.)"""

    def transposed_p(q, k, v):  # type: ignore[no-untyped-def]
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * 0.125
        return jnp.einsum("bhqk,bqhd->bkhd", jax.nn.softmax(s, axis=-1), v)

    def upper_mask(q, k, v):  # type: ignore[no-untyped-def]
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * 0.125
        n = s.shape[-1]
        s = jnp.where(jnp.triu(jnp.ones((n, n), bool)), s, -jnp.inf)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)

    q, k, v = _inputs((1, 64, 2, 16), np.float32, 3, seed=13)
    for fn in (transposed_p, upper_mask):
        _close(from_jax(fn, dump_dir=tmp_path)(q, k, v), jax.jit(fn)(q, k, v), np.float32)
        assert "@flash_attention internal" not in _kernel_nodes(tmp_path), fn.__name__
