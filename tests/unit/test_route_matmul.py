"""route-matmul: plain matmuls routed to the library matmul kernel when the timing model says the program is faster
(issue 27 item 3's last point)."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from nkic.compiler.driver import make_context
from nkic.hlo.route_matmul import RouteMatmul
from nkic.interop.framework import compile_stablehlo, parse_program, program_ns

BF16 = ml_dtypes.bfloat16


def _dot(k: int, m: int, n: int, ty: str, lhs_kxm: bool) -> str:
    lhs = (k, m) if lhs_kxm else (m, k)
    a, b, o = (f"tensor<{x}x{y}x{ty}>" for x, y in (lhs, (k, n), (m, n)))
    return (f"func.func @main(%a: {a}, %b: {b}) -> {o} {{\n  %o = stablehlo.dot_general %a, %b, contracting_dims = "
            f"[{0 if lhs_kxm else 1}] x [0] : ({a}, {b}) -> {o}\n  return %o : {o}\n}}\n")  # fmt: skip


def _nodes(dump: Path) -> list[str]:
    text = (dump / "00-penguin.mlir").read_text()
    return [f"{m.group(1)} {m.group(2)}" for m in re.finditer(r'penguin\.kernel_node (@\w+)\(.*kind = "(\w+)"', text)]


def _routed_ns(text: str) -> float:
    module = parse_program(text)
    RouteMatmul(decide="always").apply(make_context(), module)
    return program_ns(module)


@pytest.mark.parametrize(
    "k, m, n, ty, lhs_kxm",
    [(512, 256, 1024, "bf16", False), (512, 256, 1024, "bf16", True), (256, 128, 512, "f32", False)],
    ids=["bf16-mk", "bf16-km", "f32-mk"],
)
def test_the_timing_model_decides(tmp_path: Path, k: int, m: int, n: int, ty: str, lhs_kxm: bool) -> None:
    """The default compile routes the dot exactly when the routed program simulates faster than op by op, and the
    result matches numpy either way."""
    text = _dot(k, m, n, ty, lhs_kxm)
    faster = _routed_ns(text) < program_ns(parse_program(text))
    program = compile_stablehlo(text, dump_dir=tmp_path)
    assert ("@matmul internal" in _nodes(tmp_path)) == faster
    dtype = BF16 if ty == "bf16" else np.float32
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if lhs_kxm else (m, k)).astype(dtype)
    b = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(dtype)
    (got,) = program.run(a, b)
    lhs = a.astype(np.float32).T if lhs_kxm else a.astype(np.float32)
    want = lhs @ b.astype(np.float32)
    tol = 2e-2 if ty == "bf16" else 1e-4
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=tol, atol=tol)


def test_routing_off_routes_nothing(tmp_path: Path) -> None:
    compile_stablehlo(_dot(512, 256, 1024, "bf16", True), routing=False, dump_dir=tmp_path)
    assert _nodes(tmp_path) == ["@hlo_segment_0 external"]


def test_decide_is_checked() -> None:
    from xdsl.utils.exceptions import PassFailedException

    with pytest.raises(PassFailedException, match="decide must be 'model' or 'always'"):
        RouteMatmul(decide="sometimes").apply(make_context(), parse_program(_dot(128, 128, 128, "f32", True)))


def test_the_program_decides_not_the_dot_alone(tmp_path: Path) -> None:
    """The d = 1024 bf16 MLP's down projection is faster as the kernel alone, but not in the program: op by op the
    fused GELU stores its result as that matmul's lhsT in the same pass, where the call transposes it on its own.
    So the model keeps it op by op (bench/README.md has the figures)."""
    jax = pytest.importorskip("jax")
    t, d, f = 512, 1024, 4096
    alone = _dot(f, t, d, "bf16", False)
    assert _routed_ns(alone) < program_ns(parse_program(alone))

    def mlp(x, w1, w2):  # type: ignore[no-untyped-def]
        return jax.nn.gelu(x @ w1) @ w2

    args = [np.zeros(s, BF16) for s in ((t, d), (d, f), (f, d))]
    compile_stablehlo(jax.jit(mlp).lower(*args).as_text(), dump_dir=tmp_path)
    assert "@matmul internal" not in _nodes(tmp_path)
