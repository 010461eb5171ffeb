"""How close op-by-op StableHLO programs get to the PE roofline in nkic's timing model (issue 27 item 3).

Each program is exported from JAX (``jax.jit(f).lower(...)``), compiled by ``compile_stablehlo`` (routing
off, so everything is op by op, unless --routing: attention to flash_attention, and each plain matmul to the library
matmul kernel when the timing model finds the whole program faster; --matmul-always routes every such matmul) and
simulated timing-only on gen3 (trn2). PE roofline = the program's matmul FLOPs at the dense bf16 peak of one NeuronCore (the target's bf16_peak_flops_per_ns, 79 TFLOP/s on trn2, which every bench
uses). Prints per program: simulated us, roofline us, % of roofline, PE busy %, the busiest engine, instructions.

    .venv/bin/python bench/hlo_roofline.py [mlp|block|masked|all] [--d 1024] [--tokens 512] [--routing]
        [--matmul-always]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

from nkic.compiler.driver import make_context, run_neff  # noqa: E402
from nkic.hlo.route_matmul import RouteMatmul  # noqa: E402
from nkic.interop.framework import compile_stablehlo, parse_program, route  # noqa: E402
from nkic.target.machine import DEFAULT_TARGET, get_target  # noqa: E402

PEAK_FLOPS_PER_NS = get_target(DEFAULT_TARGET).bf16_peak_flops_per_ns  # the programs run on the default target
BF16 = ml_dtypes.bfloat16


def mlp(x, w1, w2):  # type: ignore[no-untyped-def]
    return jax.nn.gelu(x @ w1) @ w2


def block(x, g, wq, wk, wv, wo, w1, w2, heads=8):  # type: ignore[no-untyped-def]
    t, d = x.shape
    h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
    q, k, v = ((h @ w).reshape(t, heads, d // heads).transpose(1, 0, 2) for w in (wq, wk, wv))
    s = jnp.einsum("hqd,hkd->hqk", q, k) / np.sqrt(d // heads)
    s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -jnp.inf)
    a = jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v).transpose(1, 0, 2).reshape(t, d)
    x = x + a @ wo
    return x + mlp(x, w1, w2)


def masked(q, k, v, mask):  # type: ignore[no-untyped-def]
    """Padding-masked multi-head attention as einsums over [batch, seq, heads, d] (batch dims not leading)."""
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    s = jnp.where(mask[:, None, None, :], s, -1e9)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)


def programs(d: int, tokens: int) -> dict[str, tuple[object, list[np.ndarray], float]]:
    """name -> (function, bf16 arguments, matmul FLOPs)."""
    rng = np.random.default_rng(0)

    def arr(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(BF16)

    ff = 4 * d
    mlp_flops = 2.0 * tokens * d * ff * 2
    attn_flops = 2.0 * tokens * d * d * 4 + 2.0 * 2 * tokens * tokens * d
    heads, batch = 8, 2
    qkv = [arr(batch, tokens, heads, d // heads) for _ in range(3)]
    mask = rng.random((batch, tokens)) > 0.2
    return {
        "masked": (masked, [*qkv, mask], 4.0 * batch * heads * tokens * tokens * (d // heads)),
        "mlp": (mlp, [arr(tokens, d), arr(d, ff), arr(ff, d)], mlp_flops),
        "block": (block, [arr(tokens, d), arr(d), *(arr(d, d) for _ in range(4)), arr(d, ff), arr(ff, d)],
                  mlp_flops + attn_flops),
    }  # fmt: skip


def measure(fn: object, args: list[np.ndarray], flops: float, routing: bool = False,
            matmul_always: bool = False) -> dict[str, float]:  # fmt: skip
    text = jax.jit(fn).lower(*args).as_text()  # type: ignore[arg-type]
    t0 = time.process_time()
    module = parse_program(text)
    if matmul_always:
        if routing:
            route(module)  # attention first, as compile_stablehlo routes
        RouteMatmul(decide="always").apply(make_context(), module)
    prog = compile_stablehlo(module, routing=routing and not matmul_always, name="bench")
    compile_s = time.process_time() - t0
    profile = run_neff(prog.result.neff, {}, timing_only=True).profile
    busy = profile.busy_ns
    top = max(busy, key=lambda e: busy[e])
    roof = flops / PEAK_FLOPS_PER_NS
    return {"us": profile.total_ns / 1e3, "roof_us": roof / 1e3, "pe": roof / profile.total_ns,
            "pe_busy": busy.get("pe", 0.0) / profile.total_ns, "top": top, "top_busy": busy[top] / profile.total_ns,
            "compile_s": compile_s}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("which", nargs="?", default="all")
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--routing", action="store_true",
                    help="route attention, and matmuls where the timing model says so (default: op by op)")
    ap.add_argument("--matmul-always", action="store_true", help="route every plain matmul to the matmul kernel")
    a = ap.parse_args()
    for name, (fn, args, flops) in programs(a.d, a.tokens).items():
        if a.which not in ("all", name):
            continue
        r = measure(fn, args, flops, a.routing, a.matmul_always)
        print(f"{name:6s} d={a.d} tokens={a.tokens} bf16{' routed' if a.routing else ''}{' matmul-always' if a.matmul_always else ''}: {r['us']:10.1f} us simulated, roofline {r['roof_us']:.1f} us"
              f" -> {r['pe']:.2%} of PE roofline; PE busy {r['pe_busy']:.1%}; busiest {r['top']} "
              f"{r['top_busy']:.1%}; compile {r['compile_s']:.1f} s CPU")  # fmt: skip


if __name__ == "__main__":
    main()
