"""The flash-attention kernel end to end (trace -> NEFF -> simulator) against a float64 numpy reference, plus the
algorithm's signature in the traced penguin IR (negated running max, bias-folded exp, causal affine_select, compute
skipping, KV sections)."""

from __future__ import annotations

import re
from collections import Counter

import ml_dtypes
import numpy as np
import pytest

from nkic.api.execute import simulate
from nkic.frontend import TensorSpec
from nkic.frontend.tracer import TraceCache
from nkic.kernels import flash_attention as fa
from nkic.kernels.flash_attention import flash_attention

BF16 = ml_dtypes.bfloat16
FP32_TOL, BF16_TOL, FP16_TOL = 1e-4, 2e-2, 5e-3


def attention_ref(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool, window: int
) -> np.ndarray:
    """``softmax(scale·QKᵀ + mask)·V`` in float64; query batch b reads KV batch b // (bs / bs_kv)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    bs, seqlen_q, _ = q.shape
    group = bs // k.shape[0]
    qi = np.arange(seqlen_q)[:, None]
    ki = np.arange(k.shape[1])[None, :]
    keep = np.ones((seqlen_q, k.shape[1]), bool)
    if causal:
        keep &= qi >= ki
    if window:
        keep &= qi - ki < window
    out = np.empty_like(q)
    for b in range(bs):
        s = np.where(keep, scale * q[b] @ k[b // group].T, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[b] = (p / p.sum(axis=1, keepdims=True)) @ v[b // group]
    return out


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    got = np.asarray(got, np.float64)
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def run_case(
    bs: int, bs_kv: int, seqlen_q: int, seqlen_kv: int, d: int, dtype: object, *, scale: float | None = None,
    causal: bool = True, window: int = 0, seed: int = 0,
) -> float:  # fmt: skip
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((bs, seqlen_q, d)).astype(dtype)
    k = rng.standard_normal((bs_kv, seqlen_kv, d)).astype(dtype)
    v = rng.standard_normal((bs_kv, seqlen_kv, d)).astype(dtype)
    scale = d**-0.5 if scale is None else scale
    out = simulate(flash_attention)(q, k, v, scale=scale, causal_mask=causal, sliding_window=window)
    assert out.shape == (bs, seqlen_q, d) and out.dtype == q.dtype
    assert np.isfinite(np.asarray(out, np.float32)).all()
    return rel_err(out, attention_ref(q, k, v, scale, causal, window))


# -- numerics ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("causal", [True, False])
def test_fp32(causal: bool) -> None:
    assert run_case(1, 1, 256, 384, 64, np.float32, causal=causal) < FP32_TOL


@pytest.mark.parametrize("causal", [True, False])
def test_ragged_lengths(causal: bool) -> None:
    # 200 query rows = a full and a 72-row group; 700 KV = a full 512 tile and a 188-wide one (MM2 blocks of 128
    # and 60 rows)
    assert run_case(1, 1, 200, 700, 64, np.float32, causal=causal) < FP32_TOL


def test_bf16_causal_d128() -> None:
    assert run_case(1, 1, 512, 1024, 128, BF16) < BF16_TOL


def test_bf16_scale_above_one() -> None:
    # masked scores times scale > 1 must not overflow to -inf (exp(-inf + inf) would be NaN)
    assert run_case(1, 1, 256, 256, 32, BF16, scale=2.0) < BF16_TOL


def test_fp16() -> None:
    assert run_case(1, 1, 256, 256, 64, np.float16) < FP16_TOL


def test_gqa_2_to_1_bf16() -> None:
    assert run_case(4, 2, 256, 640, 64, BF16) < BF16_TOL


def test_gqa_4_to_1_fp32() -> None:
    assert run_case(4, 1, 128, 384, 32, np.float32, causal=False) < FP32_TOL


@pytest.mark.parametrize("causal", [True, False])
def test_sliding_window(causal: bool) -> None:
    # window 200 < 512: tiles wholly outside the window are skipped, straddling ones get the second affine_select
    assert run_case(1, 1, 700, 700, 64, np.float32, causal=causal, window=200) < FP32_TOL


@pytest.mark.parametrize("causal", [False, True])
def test_kv_sections_fp32(causal: bool) -> None:
    # 12000 > 10240 KV positions: two sections (8192 + 3808) merged through the HBM scratch. Causal with 128 query
    # rows only ever reaches KV tile 0: the second section (and all K/V loads of it) is skipped.
    assert run_case(1, 1, 128, 12000, 16, np.float32, causal=causal) < FP32_TOL


def test_kv_sections_bf16_ragged_three_sections() -> None:
    assert run_case(1, 1, 72, 16500, 16, BF16, causal=False, scale=1.0) < BF16_TOL


# -- the algorithm in the traced IR ----------------------------------------------------------------------------
def _trace(seqlen_q: int, seqlen_kv: int, d: int = 64, **kw: object) -> object:
    q = TensorSpec((1, seqlen_q, d), "bfloat16")
    kv = TensorSpec((1, seqlen_kv, d), "bfloat16")
    return flash_attention.trace(q, kv, kv, **kw).module


def _ops(module: object, name: str) -> list:
    return [op for op in module.walk() if op.name == f"penguin.{name}"]  # type: ignore[attr-defined]


def _prop(op: object, key: str) -> object:
    """A property as a Python value (StringAttr, IntegerAttr, FloatAttr and BoolAttr unwrapped)."""
    value = op.properties.get(key)  # type: ignore[attr-defined]
    if hasattr(value, "value") and hasattr(value.value, "data"):
        return value.value.data
    return getattr(value, "data", value)


def test_penguin_ir_signature_ops() -> None:
    module = _trace(1024, 1024, scale=0.125)  # groups 4-7 see an unmasked tile: the TensorScalarReduce path
    reduces = _ops(module, "tensor_reduce")
    assert any(_prop(r, "negate") and _prop(r, "op") == "maximum" for r in reduces)
    exps = [a for a in _ops(module, "activation") if _prop(a, "func") == "exp"]
    assert exps and all(a.has("bias") and a.has("reduce_res") for a in exps)
    assert all(_prop(a, "reduce_op") == "add" for a in exps)
    selects = _ops(module, "affine_select")
    assert selects and all(_prop(s, "cmp_op") == "greater_equal" for s in selects)
    assert all(_prop(s, "channel_multiplier") == 1 for s in selects)
    tsr = _ops(module, "tensor_scalar_reduce")
    assert tsr and all(_prop(t, "op0") == "multiply" and _prop(t, "reduce_op") == "maximum" for t in tsr)
    assert {_prop(t, "operand0") for t in tsr} == {0.125}  # the scale is folded in here ...
    # ... or, for masked tiles and every MAX_ON_POOL_EVERY-th tile, into ScalarE's copy out of PSUM, whose max
    # GpSimd takes
    copies = [a for a in _ops(module, "activation") if _prop(a, "func") == "copy" and not a.has("scale")]
    assert copies and {_prop(a, "scale") for a in copies} == {0.125}
    assert any(_prop(r, "op") == "maximum" and not _prop(r, "negate") for r in reduces)


def test_causal_compute_skipping_reduces_matmuls() -> None:
    causal = Counter(op.name for op in _trace(1024, 1024).walk())
    full = Counter(op.name for op in _trace(1024, 1024, causal_mask=False).walk())
    # 8 groups x 2 KV tiles. Causal: MM1 on 12 of the 16 (group, tile) pairs, MM2 on the 36 of 64 (group, 128-block)
    # pairs on or below the diagonal; non-causal: 16 + 64.
    assert causal["penguin.matmul"] == 12 + 36
    assert full["penguin.matmul"] == 16 + 64
    assert causal["penguin.affine_select"] == 8 and full["penguin.affine_select"] == 0


def test_sliding_window_skips_tiles_outside_the_window() -> None:
    swa = Counter(op.name for op in _trace(2048, 2048, sliding_window=128).walk())
    causal = Counter(op.name for op in _trace(2048, 2048).walk())
    assert swa["penguin.matmul"] < causal["penguin.matmul"] // 3
    assert swa["penguin.affine_select"] > causal["penguin.affine_select"]  # the second, lower-diagonal mask


def test_kv_sections_ir() -> None:
    module = _trace(128, 12000, d=16, causal_mask=False)
    assert len(_merges(module)) == 1  # the running max: min of the negated maxima
    alpha = [a for a in _ops(module, "activation") if _prop(a, "func") == "exp" and not a.has("reduce_res")]
    assert len(alpha) == 1 and alpha[0].has("bias")  # α = exp(-(-m_old) + (-m_new))
    assert len(_ops(module, "scalar_tensor_tensor")) == 1  # O = α·O_prev + O_section
    assert len(_ops(module, "tensor_scalar")) == 1  # l = α·l + l_section
    scratch = [a for a in _ops(module, "alloc") if "hbm" in str(a.results[0].type) and "shared" not in str(a)]
    assert len(scratch) == 1  # the partial O between sections
    # one section: none of the cross-section merge
    single = _trace(128, 10240, d=16, causal_mask=False)
    assert not _merges(single) and not _ops(single, "scalar_tensor_tensor")


def _merges(module: object) -> list:
    """The tensor_tensor ops other than the GpSimd max folds (``_pool_folded_max``)."""
    return [op for op in _ops(module, "tensor_tensor") if _prop(op, "op") != "maximum"]


def test_pool_tiles_fold_their_max_on_gpsimd() -> None:
    """The tiles ScalarE scales out of PSUM (every masked tile, every MAX_ON_POOL_EVERY-th other one) are folded in
    halves on GpSimd before VectorE's row max; the other tiles keep VectorE's tensor_scalar_reduce."""
    module = _trace(1024, 1024)  # causal: 8 groups, 12 kept tiles, 8 of them on the diagonal (masked)
    folds = [op for op in _ops(module, "tensor_tensor") if _prop(op, "op") == "maximum"]
    pool_tiles = 12 - len(_ops(module, "tensor_scalar_reduce"))
    assert pool_tiles >= len(_ops(module, "affine_select")) == 8
    assert fa.POOL_MAX_FOLDS > 0 and pool_tiles <= len(folds) <= fa.POOL_MAX_FOLDS * pool_tiles
    assert all(_prop(op, "engine") == "gpsimd" for op in folds)



@pytest.mark.parametrize("window", [0, 96])
def test_causal_kv_sections_at_small_scale(monkeypatch: pytest.MonkeyPatch, window: int) -> None:
    """The section logic with causal skipping, at a scale the real 10240/8192 constants would need ~10k rows for.

    With 512-wide sections of 1100 KV positions, early groups finish in an early section (later sections are wholly
    above the diagonal) and with a 96 window group [512, 640) computes in section 0 although its rows >= 608 have no
    key left there: their garbage first-section statistics must be discarded by α = exp(m_old - m_new) = 0 (scale 2
    also checks that the masked value stays finite after scaling).
    """
    import nkic.kernels.flash_attention as fa

    monkeypatch.setattr(fa, "SECTION_THRESHOLD", 640)
    monkeypatch.setattr(fa, "SECTION_SIZE", 512)
    monkeypatch.setattr(fa.flash_attention, "cache", TraceCache())  # traces made with other constants must not be reused
    assert run_case(1, 1, 1100, 1100, 16, np.float32, window=window, scale=2.0) < FP32_TOL
    module = _trace(1100, 1100, d=16, sliding_window=window)
    assert _ops(module, "scalar_tensor_tensor")  # sections were merged


def test_attention_profile_is_a_chrome_trace_with_a_row_per_engine_and_queue(tmp_path) -> None:
    import json

    from nkic.compiler.driver import compile_traced, run_neff

    spec = TensorSpec((1, 256, 64), "bfloat16")
    neff = compile_traced(flash_attention.trace(spec, spec, spec, scale=0.125)).neff
    rng = np.random.default_rng(5)
    arrays = {n: rng.standard_normal((1, 256, 64)).astype(ml_dtypes.bfloat16) for n in ("q", "k", "v")}
    profile = run_neff(neff, arrays).profile
    profile.write_chrome_trace(tmp_path / "trace.json")
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    rows = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert {"PE (TensorE)", "ACT (ScalarE)", "DVE (VectorE)", "POOL (GpSimdE)", "SP (SyncE)", "DMA q0"} <= rows
    spans = [e for e in events if e.get("ph") == "X"]
    assert {e["name"] for e in spans} >= {"MATMUL", "ACTIVATE", "AFFINE_SELECT", "DMA_COPY"}
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)


def test_diagonal_tiles_stop_at_the_last_kept_block() -> None:
    """A diagonal tile is cut after the last 128-column block any query of its group keeps: group g's tile at
    k0 = 512·(g // 4) keeps 128·(g % 4 + 1) columns, and the fully masked blocks are never computed."""
    module = _trace(1024, 1024)
    widths = [int(re.findall(r"\[1, (\d+)\]", str(op.properties["aps"]))[0]) for op in _ops(module, "affine_select")]
    assert widths == [128 * (g % 4 + 1) for g in range(8)]
    mm1 = [op for op in _ops(module, "matmul") if str(op.operands[0].type) == "!penguin.tensor<psum, 128x512xf32>"]
    mm1_widths = [int(re.findall(r"\[1, (\d+)\]", str(op.properties["aps"].data[0]))[0]) for op in mm1]
    assert sorted(mm1_widths) == sorted(widths + [512] * 4)  # + the unmasked tiles of groups 4-7
