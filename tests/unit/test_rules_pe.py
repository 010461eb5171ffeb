"""The documented restrictions of the Tensor Engine, MX, DMA, collective and register instructions
(``target/rules/pe.py``): for each rule a kernel that breaks exactly it (an error at the kernel's line naming the
rule, on the generations it names) and a legal kernel at its edge (compiles and matches numpy; traces, where the
simulator cannot run it cheaply). Table-driven: one small kernel template per instruction, the cases as rows."""

from __future__ import annotations

import inspect
import re
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from nkic import api as nki
from nkic.frontend import NkiError
from nkic.target.rules import Call, Operand, problems

nl, nisa = nki.language, nki.isa
TARGETS = {2: "trn1", 3: "trn2", 4: "trn3"}
RNG = np.random.default_rng(11)
BF16, FP8 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3


def _line(fn: Any) -> int:
    """The line of ``fn`` marked ``# RULE``: the instruction whose rules the cases break."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if text.rstrip().endswith("# RULE"))


def _rejects(fn: Any, gen: int, args: tuple[Any, ...], fragment: str, grid: int = 1) -> str:
    kernel = nki.jit(fn, platform_target=TARGETS[gen])
    with pytest.raises(NkiError) as e:
        (kernel[grid] if grid > 1 else kernel)(*args)
    text = str(e.value)
    assert f"test_rules_pe.py:{_line(fn)}: error:" in text, text
    assert fragment in text, text
    assert "the NKI reference" in text, text  # the rule, not some other check, said it
    return text


def _ints(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    return RNG.integers(-3, 4, shape).astype(dtype)  # small integers: exact in every dtype and summation order


# -- nc_matmul ------------------------------------------------------------------------------------------------------
def mm_kernel(a, b, dst_dtype, dst_buf, st_buf, tile_position, tile_size, perf_mode):  # noqa: ANN001, ANN201
    m, n = a.shape[-1], b.shape[-1]
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=st_buf)
    y = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    if st_buf == nl.sbuf:
        nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=b)
    p = nl.ndarray((min(m, 128), n), dtype=dst_dtype, buffer=dst_buf)  # M > 128: the rule speaks first
    kw = {"tile_position": tile_position, "tile_size": tile_size} if tile_position or tile_size else {}
    if tile_position and not tile_size:
        kw = {"tile_position": tile_position}
    if tile_size and not tile_position:
        kw = {"tile_size": tile_size}
    if perf_mode:
        kw["perf_mode"] = nisa.matmul_perf_mode.double_row
    nisa.nc_matmul(dst=p, stationary=x, moving=y, **kw)  # RULE
    r = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    bank = 2048 // (4 if dst_dtype == nl.float32 else 2)  # PSUM is read one bank at a time
    for j in range(0, n, bank):
        nisa.tensor_copy(dst=r[:, j : min(j + bank, n)], src=p[:, j : min(j + bank, n)])
    nisa.dma_copy(dst=out, src=r)
    return out


def _mm_args(st: tuple[int, ...], mv: tuple[int, ...], dt: Any = np.float32, dst: Any = None, dst_buf: Any = None,
             st_buf: Any = None, tp: Any = None, ts: Any = None, perf: bool = False) -> tuple[Any, ...]:  # fmt: skip
    return (_ints(st, dt), _ints(mv, dt), dst or nl.float32, dst_buf or nl.psum, st_buf or nl.sbuf, tp, ts, perf)


MATMUL_REJECTS = [
    (3, dict(st=(64, 32), mv=(64, 48), dst_buf=nl.sbuf), "'dst' must be in PSUM, not sbuf"),
    (3, dict(st=(64, 32), mv=(64, 48), st_buf=nl.psum), "'stationary' must be in SBUF, not psum"),
    (3, dict(st=(64, 32), mv=(32, 48)), "partition count mismatch: stationary has K=64 partitions, moving has 32"),
    (3, dict(st=(128, 256), mv=(128, 64)), "M=256 (max 128)"),
    (3, dict(st=(128, 32), mv=(128, 64), tp=(0, 0), ts=(64, 128)), "K=128 (max 64)"),
    (3, dict(st=(32, 128), mv=(32, 64), tp=(0, 0), ts=(32, 64)), "M=128 (max 64)"),
    (3, dict(st=(64, 32), mv=(64, 1024)), "N=1024 (max 512)"),
    (2, dict(st=(64, 32), mv=(64, 1024)), "N=1024 (max 512)"),
    (3, dict(st=(64, 32), mv=(64, 48), tp=(0, 0)), "tile_position and tile_size must both be set"),
    (3, dict(st=(64, 32), mv=(64, 48), ts=(64, 128)), "tile_position and tile_size must both be set"),
    (3, dict(st=(32, 32), mv=(32, 48), tp=(16, 0), ts=(32, 32)), "start_row must be a multiple of 32 below 128"),
    (3, dict(st=(32, 32), mv=(32, 48), tp=(0, 32), ts=(32, 64)), "start_column must be a multiple of 64 below 128"),
    (2, dict(st=(64, 2, 32), mv=(64, 2, 48), dt=FP8, perf=True), "double_row is not available on gen2"),
    (3, dict(st=(64, 2, 32), mv=(64, 2, 48), dt=BF16, perf=True), "needs float8 'stationary', got bfloat16"),
    (3, dict(st=(64, 4, 32), mv=(64, 4, 48), dt=FP8, perf=True), "needs 'stationary' shaped [K, 2, ...]"),
    (3, dict(st=(64, 2, 32), mv=(64, 2, 48), dt=FP8, perf=True, tp=(0, 0), ts=(128, 64)),
     "cannot be combined with column tiling"),
]  # fmt: skip


@pytest.mark.parametrize("gen,case,fragment", MATMUL_REJECTS)
def test_nc_matmul_rejects(gen: int, case: dict[str, Any], fragment: str) -> None:
    _rejects(mm_kernel, gen, _mm_args(**case), fragment)


MATMUL_ACCEPTS = [
    (3, dict(st=(128, 128), mv=(128, 512))),  # the full array, a whole PSUM bank
    (2, dict(st=(128, 128), mv=(128, 512))),
    (3, dict(st=(64, 64), mv=(64, 48), tp=(64, 64), ts=(64, 64))),  # the last 64x64 tile
    (3, dict(st=(32, 128), mv=(32, 48), tp=(96, 0), ts=(32, 128))),  # the last 32-row tile (v3+)
    (2, dict(st=(64, 128), mv=(64, 48), tp=(64, 0), ts=(64, 128))),  # the bottom half (v2)
    (3, dict(st=(64, 2, 32), mv=(64, 2, 48), dt=FP8, perf=True)),  # double_row, full array
    (3, dict(st=(64, 2, 32), mv=(64, 2, 48), dt=FP8, perf=True, tp=(64, 0), ts=(64, 128))),  # + row tiling
    (4, dict(st=(32, 32), mv=(32, 4096), dt=BF16, dst=nl.bfloat16)),  # v4: 8 PSUM banks of fp32 (a bf16 dst)
]  # fmt: skip


@pytest.mark.parametrize("gen,case", MATMUL_ACCEPTS)
def test_nc_matmul_accepts_the_edges(gen: int, case: dict[str, Any]) -> None:
    args = _mm_args(**case)
    a, b = (x.astype(np.float32) for x in args[:2])
    if a.ndim == 2:
        a, b = a[:, None, :], b[:, None, :]
    want = np.einsum("kjm,kjn->mn", a, b)
    got = nki.jit(mm_kernel, platform_target=TARGETS[gen])(*args)
    if case.get("dst") == nl.bfloat16:
        want = want.astype(BF16).astype(np.float32)
    np.testing.assert_array_equal(got, want)


def test_nc_matmul_moving_limit_on_v4_follows_the_dst_dtype() -> None:
    """v4: N up to 4096 for a float32 dst, 8192 for a bfloat16 one (an fp32 PSUM tile larger cannot be allocated,
    so the rule is asked directly; test_documented_rules runs the bf16 8192 matmul)."""

    def call(n: int, dst: str) -> Call:
        return Call("matmul", {"dst": Operand("psum", dst, (32, n)), "stationary": Operand("sbuf", "bfloat16", (32, 32)),
                               "moving": Operand("sbuf", "bfloat16", (32, n))}, {}, 4)  # fmt: skip

    assert problems(call(4096, "float32")) == [] and problems(call(4096, "bfloat16")) == []
    assert "N=8192 (max 4096)" in problems(call(8192, "float32"))[0][1]
    assert problems(call(8192, "bfloat16")) == []
    assert "N=8193 (max 8192)" in problems(call(8193, "bfloat16"))[0][1]


# -- nc_transpose ---------------------------------------------------------------------------------------------------
def transpose_kernel(a, engine, dst_buf):  # noqa: ANN001, ANN201
    out = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    p = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=dst_buf)
    nisa.nc_transpose(dst=p, data=x, engine=engine)  # RULE
    r = nl.ndarray(p.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=p)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_nc_transpose_on_the_tensor_engine_writes_psum() -> None:
    a = RNG.standard_normal((32, 32)).astype(np.float32)
    _rejects(transpose_kernel, 3, (a, nisa.engine.tensor, nl.sbuf), "'dst' must be in PSUM, not sbuf")
    np.testing.assert_array_equal(nki.jit(transpose_kernel)(a, nisa.engine.tensor, nl.psum), a.T)
    np.testing.assert_array_equal(nki.jit(transpose_kernel)(a, nisa.engine.vector, nl.sbuf), a.T)
    np.testing.assert_array_equal(nki.jit(transpose_kernel)(a, nisa.engine.vector, nl.psum), a.T)  # VectorE: PSUM too


# -- dma_copy -------------------------------------------------------------------------------------------------------
def copy_kernel(a, rows, priority, dge, engine):  # noqa: ANN001, ANN201
    out = nl.ndarray((rows, 4), dtype=a.dtype, buffer=nl.shared_hbm)
    kw = {} if priority is None else {"priority": priority}
    nisa.dma_copy(dst=out, src=a, dge_mode=dge, engine=engine, **kw)  # RULE
    return out


COPY_REJECTS = [
    (3, (16, 4, None, None, None), "element count mismatch: dst has 32 elements, src has 64"),  # dst (8, 4)
    (3, (16, 4, 1, None, None), "priority needs NeuronCore-v4 (gen4), the target is gen3 on NeuronCore-v3"),
    (2, (16, 4, None, "hwdge", None), "dge_mode=hwdge needs NeuronCore-v3 (gen3) or newer"),
    (3, (16, 4, None, "swdge", "sync"), "only valid with dge_mode=hwdge"),
]  # fmt: skip


@pytest.mark.parametrize("gen,args,fragment", COPY_REJECTS)
def test_dma_copy_rejects(gen: int, args: tuple[Any, ...], fragment: str) -> None:
    rows, cols, priority, dge, engine = args
    a = RNG.standard_normal((rows, cols)).astype(np.float32)
    out_rows = rows // 2 if "mismatch" in fragment else rows  # half the elements: dst has 8 x 4
    _rejects(copy_kernel, gen, (a, out_rows, priority, getattr(nisa.dge_mode, dge or "unknown"),
                                getattr(nisa.engine, engine or "unknown")), fragment)


@pytest.mark.parametrize("gen,priority,dge,engine", [(4, 3, "unknown", "unknown"), (3, None, "hwdge", "scalar"),
                                                     (3, None, "swdge", "unknown")])  # fmt: skip
def test_dma_copy_accepts_the_edges(gen: int, priority: Any, dge: str, engine: str) -> None:
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    got = nki.jit(copy_kernel, platform_target=TARGETS[gen])(a, 32, priority, getattr(nisa.dge_mode, dge),
                                                              getattr(nisa.engine, engine))  # fmt: skip
    np.testing.assert_array_equal(got, a.reshape(32, 4))


# -- dma_transpose --------------------------------------------------------------------------------------------------
def dma_transpose_kernel(a, dge, dst_dtype, dst_buf, oob):  # noqa: ANN001, ANN201
    perm = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}[a.ndim]
    shape = tuple(a.shape[i] for i in perm)
    out = nl.ndarray(shape, dtype=dst_dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(shape, dtype=dst_dtype, buffer=dst_buf)
    nisa.dma_transpose(dst=t, src=a, dge_mode=dge, oob_mode=oob)  # RULE
    if dst_buf == nl.sbuf:
        nisa.dma_copy(dst=out, src=t)
    return out


DMA_T_REJECTS = [
    (3, (16, 8), BF16, "swdge", None, None, None, "takes dge_mode unknown or hwdge, got swdge"),
    (2, (16, 8), BF16, "hwdge", None, None, None, "dge_mode=hwdge needs NeuronCore-v3 (gen3) or newer"),
    (3, (8, 8), BF16, "hwdge", None, None, None, "a 2-d tile needs src.shape[0] == 16"),
    (3, (16, 8), np.float32, "hwdge", None, None, None, "this DMA transpose moves 2-byte elements, src is float32"),
    (3, (3, 16, 8), BF16, "hwdge", None, None, None, "needs src.shape[0] in {1, 2, 4, 8, 16}"),
    (3, (2, 4, 8), BF16, "hwdge", None, None, None, "src.shape[0] * src.shape[-2] a multiple of 16"),
    (3, (16, 8), np.float32, "unknown", nl.bfloat16, None, None, "dst is bfloat16 but src is float32"),
    (3, (16, 8), np.float32, "unknown", None, nl.shared_hbm, None, "'dst' must be in SBUF, not shared_hbm"),
    (3, (16, 8), np.float32, "unknown", None, None, "skip", "oob_mode=skip is only valid when src uses indirect"),
]  # fmt: skip


@pytest.mark.parametrize("gen,shape,dt,dge,dst_dt,dst_buf,oob,fragment", DMA_T_REJECTS)
def test_dma_transpose_rejects(gen: int, shape: tuple[int, ...], dt: Any, dge: str, dst_dt: Any, dst_buf: Any,
                               oob: Any, fragment: str) -> None:  # fmt: skip
    a = RNG.standard_normal(shape).astype(dt)
    args = (a, getattr(nisa.dge_mode, dge), dst_dt or (nl.bfloat16 if dt is BF16 else nl.float32),
            dst_buf or nl.sbuf, getattr(nisa.oob_mode, oob or "error"))  # fmt: skip
    _rejects(dma_transpose_kernel, gen, args, fragment)


@pytest.mark.parametrize("gen,shape,dt,dge", [
    (3, (16, 128), BF16, "hwdge"),  # the largest 2-d hardware-DGE transpose
    (3, (1, 16, 128), BF16, "hwdge"),  # 3-d: 1 x 16 rows
    (3, (16, 4, 8, 32), np.float16, "hwdge"),  # 4-d: 16 * 8 rows
    (2, (8, 8), np.float32, "unknown"),  # the compiler's choice: no hardware-DGE limits
    (3, (8, 8), np.float32, "none"),  # no DGE (nki-library's mlp_tkg does this): no hardware-DGE limits
])  # fmt: skip
def test_dma_transpose_accepts_the_edges(gen: int, shape: tuple[int, ...], dt: Any, dge: str) -> None:
    a = RNG.standard_normal(shape).astype(dt)
    perm = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}[a.ndim]
    got = nki.jit(dma_transpose_kernel, platform_target=TARGETS[gen])(
        a, getattr(nisa.dge_mode, dge), nl.float16 if dt is np.float16 else nl.bfloat16 if dt is BF16 else nl.float32,
        nl.sbuf, nisa.oob_mode.error)  # fmt: skip
    np.testing.assert_array_equal(got, a.transpose(perm))


def gather_transpose_kernel(src, idx, dge, oob):  # noqa: ANN001, ANN201
    p, f = idx.shape[0], src.shape[1]
    i = nl.ndarray(idx.shape, dtype=idx.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=i, src=idx)
    t = nl.ndarray((f, p), dtype=src.dtype, buffer=nl.sbuf)
    view = src.ap(pattern=[[f, p], [1, f]], vector_offset=i, indirect_dim=0)
    nisa.dma_transpose(dst=t, src=view, axes=(1, 0), dge_mode=dge, oob_mode=oob)  # RULE
    out = nl.ndarray((f, p), dtype=src.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("gen,dt,idx_dt,dge,fragment", [
    (3, BF16, np.uint32, "hwdge", "an indirect DMA transpose (a gather) takes dge_mode unknown or swdge"),
    (2, BF16, np.uint32, "unknown", "an indirect (gather) transpose needs trn2 or newer"),
    (3, np.float32, np.uint32, "unknown", "this DMA transpose moves 2-byte elements"),
    (3, BF16, np.int32, "unknown", "the indices of an indirect transpose must be uint32, got int32"),
])  # fmt: skip
def test_indirect_dma_transpose_rejects(gen: int, dt: Any, idx_dt: Any, dge: str, fragment: str) -> None:
    src = RNG.standard_normal((40, 32)).astype(dt)
    idx = RNG.integers(0, 40, (16, 1)).astype(idx_dt)
    _rejects(gather_transpose_kernel, gen, (src, idx, getattr(nisa.dge_mode, dge), nisa.oob_mode.error), fragment)


@pytest.mark.parametrize("dge,oob", [("swdge", "error"), ("unknown", "skip")])
def test_indirect_dma_transpose_accepts_the_edges(dge: str, oob: str) -> None:
    src = RNG.standard_normal((40, 128)).astype(BF16)  # src.shape[-1] == 128
    idx = RNG.integers(0, 40, (16, 1)).astype(np.uint32)
    got = nki.jit(gather_transpose_kernel)(src, idx, getattr(nisa.dge_mode, dge), getattr(nisa.oob_mode, oob))
    np.testing.assert_array_equal(got, src[idx[:, 0]].T)


# -- dma_compute ----------------------------------------------------------------------------------------------------
def dma_compute_kernel(a, n, reduce_op, scales, dst_dtype):  # noqa: ANN001, ANN201
    out = nl.ndarray((a.shape[1], a.shape[2]), dtype=dst_dtype, buffer=nl.shared_hbm)
    srcs = [a[i] for i in range(n)]
    nisa.dma_compute(dst=out, srcs=srcs, reduce_op=reduce_op, scales=scales)  # RULE
    return out


def test_dma_compute_rejects() -> None:
    a = _ints((17, 8, 16), np.float32)
    _rejects(dma_compute_kernel, 3, (a, 17, nl.add, None, nl.float32), "17 sources, at most 16")
    _rejects(dma_compute_kernel, 3, (a, 2, nl.multiply, None, nl.float32), "reduce_op must be nl.add, got multiply")
    _rejects(dma_compute_kernel, 3, (a, 2, nl.add, [1.0, 0.5], nl.float32), "every scale must be 1.0")


@pytest.mark.parametrize("n,dst_dtype", [(16, nl.float32), (16, nl.bfloat16), (6, nl.float32), (5, nl.float32),
                                         (9, nl.bfloat16)])  # fmt: skip
def test_dma_compute_sums_up_to_16_sources(n: int, dst_dtype: Any) -> None:
    """The reference's 16 sources (nkic chains records of 5 through a float32 running sum: one cast at the end)."""
    a = RNG.standard_normal((n, 8, 16)).astype(np.float32)
    got = nki.jit(dma_compute_kernel)(a, n, nl.add, [1.0] * n, dst_dtype)
    want = a[0].copy()
    for i in range(1, n):
        want = (want + a[i]).astype(np.float32)
    np.testing.assert_array_equal(got, want.astype(BF16) if dst_dtype == nl.bfloat16 else want)


def test_dma_compute_element_counts_must_match() -> None:
    @nki.jit
    def kernel(a, b):  # noqa: ANN001, ANN202
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_compute(dst=out, srcs=[a, b], reduce_op=nl.add)  # RULE
        return out

    a = RNG.standard_normal((8, 16)).astype(np.float32)
    with pytest.raises(NkiError, match="element count mismatch: dst has 128 elements, srcs\\[1\\] has 64"):
        kernel(a, a[:4])
    np.testing.assert_array_equal(kernel(a, a.reshape(16, 8)), a + a)  # shapes may differ, counts may not


# -- MX: nc_matmul_mx, quantize_mx (v4; traced: the numerics are test_mx.py's) ----------------------------------------
def mx_kernel(x, k, m, n, st_dtype, scale_dtype, dst_dtype, tile_position, tile_size):  # noqa: ANN001, ANN201
    st = nl.ndarray((k, m), dtype=st_dtype, buffer=nl.sbuf)
    mv = nl.ndarray((k, n), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    sst = nl.ndarray((k, m), dtype=scale_dtype, buffer=nl.sbuf)
    smv = nl.ndarray((k, n), dtype=scale_dtype, buffer=nl.sbuf)
    dst = nl.ndarray((m, n), dtype=dst_dtype, buffer=nl.psum)
    kw = {k_: v for k_, v in (("tile_position", tile_position), ("tile_size", tile_size)) if v is not None}
    nisa.nc_matmul_mx(dst=dst, stationary=st, moving=mv, stationary_scale=sst, moving_scale=smv, **kw)  # RULE
    return x


def _mx(k: int = 128, m: int = 128, n: int = 512, st: Any = None, scale: Any = None, dst: Any = None, tp: Any = None,
        ts: Any = None) -> tuple[Any, ...]:  # fmt: skip
    return (np.zeros((1, 1), np.float32), k, m, n, st or nl.float8_e4m3fn_x4, scale or nl.float8_e8m0fnu,
            dst or nl.float32, tp, ts)  # fmt: skip


MX_REJECTS = [
    (3, _mx(), "nisa.nc_matmul_mx is not available on gen3: it needs gen4 or newer"),
    (4, _mx(st=nl.bfloat16), "'stationary' must be float8_e4m3fn_x4 or float8_e5m2_x4 or float4_e2m1fn_x4"),
    (4, _mx(scale=nl.int8), "'stationary_scale' must be float8_e8m0fnu or uint8, got int8"),
    (4, _mx(dst=nl.float16), "'dst' must be float32 or bfloat16, got float16"),
    (4, _mx(k=48, m=32), "must be a multiple of 32 and at most 128, got 48"),
    (4, _mx(m=126 + 1), "must be even and at most 128, got 127"),
    (4, _mx(k=64, tp=(0, 0), ts=(64, 64)), "only row tiling"),
    (4, _mx(k=64, tp=(0, 64), ts=(64, 128)), "only row tiling"),
    (4, _mx(k=64, tp=(32, 0), ts=(64, 128)), "start_row must be a multiple of 64 below 128"),
    (4, _mx(k=96, tp=(0, 0), ts=(64, 128)), "exceeds the row tile size 64"),
    (4, _mx(tp=(0, 0)), "tile_position and tile_size must both be set"),
]  # fmt: skip


@pytest.mark.parametrize("gen,args,fragment", MX_REJECTS)
def test_nc_matmul_mx_rejects(gen: int, args: tuple[Any, ...], fragment: str) -> None:
    with pytest.raises(NkiError) as e:
        nki.jit(mx_kernel, platform_target=TARGETS[gen]).trace(*args)
    assert f"test_rules_pe.py:{_line(mx_kernel)}: error:" in str(e.value) and fragment in str(e.value), str(e.value)


@pytest.mark.parametrize("args", [_mx(k=32, m=128, n=4096), _mx(k=32, m=2, n=8192, dst=nl.bfloat16),
                                  _mx(k=32, tp=(96, 0), ts=(32, 128)), _mx(scale=nl.uint8)])  # fmt: skip
def test_nc_matmul_mx_accepts_the_edges(args: tuple[Any, ...]) -> None:
    nki.jit(mx_kernel, platform_target="trn3").trace(*args)


def quantize_kernel(x, p, f, src_dtype, dst_dtype, scale_dtype, src_buf):  # noqa: ANN001, ANN201
    src = nl.ndarray((p, f), dtype=src_dtype, buffer=src_buf)
    dst = nl.ndarray((p, f // 4), dtype=dst_dtype, buffer=nl.sbuf)
    scale = nl.ndarray((p, f // 4), dtype=scale_dtype, buffer=nl.sbuf)
    nisa.quantize_mx(dst=dst, src=src, dst_scale=scale)  # RULE
    return x


def _q(p: int = 32, f: int = 16, src: Any = None, dst: Any = None, scale: Any = None, buf: Any = None) -> tuple[Any, ...]:
    return (np.zeros((1, 1), np.float32), p, f, src or nl.bfloat16, dst or nl.float8_e4m3fn_x4,
            scale or nl.float8_e8m0fnu, buf or nl.sbuf)  # fmt: skip


@pytest.mark.parametrize("gen,args,fragment", [
    (3, _q(), "nisa.quantize_mx is not available on gen3"),
    (4, _q(src=nl.float32), "'src' must be float16 or bfloat16, got float32"),
    (4, _q(dst=nl.float8_e4m3), "'dst' must be float8_e4m3fn_x4 or float8_e5m2_x4"),
    (4, _q(scale=nl.int8), "'dst_scale' must be float8_e8m0fnu or uint8, got int8"),
    (4, _q(buf=nl.psum), "'src' must be in SBUF, not psum"),
    (4, _q(p=48), "must be a multiple of 32 and at most 128, got 48"),
    (4, _q(f=18), "free dimension size of src must be a multiple of 4, got 18"),
])  # fmt: skip
def test_quantize_mx_rejects(gen: int, args: tuple[Any, ...], fragment: str) -> None:
    with pytest.raises(NkiError) as e:
        nki.jit(quantize_kernel, platform_target=TARGETS[gen]).trace(*args)
    assert f"test_rules_pe.py:{_line(quantize_kernel)}: error:" in str(e.value) and fragment in str(e.value), str(e.value)


@pytest.mark.parametrize("args", [_q(p=128, f=4), _q(src=nl.float16, dst=nl.float8_e5m2_x4, scale=nl.uint8)])
def test_quantize_mx_accepts_the_edges(args: tuple[Any, ...]) -> None:
    nki.jit(quantize_kernel, platform_target="trn3").trace(*args)


def test_quantize_mx_src_fits_an_sbuf_partition() -> None:
    """A src larger than an SBUF partition cannot be allocated: the rule is asked directly."""
    ops = {"src": Operand("sbuf", "bfloat16", (32, 200_000)), "dst": Operand("sbuf", "float8_e4m3fn_x4", (32, 50_000)),
           "dst_scale": Operand("sbuf", "float8_e8m0fnu", (32, 50_000))}  # fmt: skip
    assert any("more than an SBUF partition" in p for _, p in problems(Call("quantize_mx", ops, {}, 4)))


# -- sendrecv, core_barrier (the LNC=2 pair: kernel[2]) ----------------------------------------------------------------
def sendrecv_kernel(a, dst_dtype, dst_buf, rank):  # noqa: ANN001, ANN201
    pid = nl.program_id(0)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    mine = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[pid])
    got = nl.ndarray(a.shape[1:], dtype=dst_dtype, buffer=dst_buf)
    peer = 1 - pid if rank is None else rank
    nisa.sendrecv(src=mine, dst=got, send_to_rank=peer, recv_from_rank=peer, pipe_id=0)  # RULE
    nisa.dma_copy(dst=out[pid], src=got)
    return out


@pytest.mark.parametrize("gen,args,fragment", [
    (3, (nl.bfloat16, nl.sbuf, None), "src is float32 but dst is bfloat16; sendrecv cannot cast"),
    (3, (nl.float32, nl.shared_hbm, None), "'dst' must be in SBUF, not shared_hbm"),
    (3, (nl.float32, nl.sbuf, 2), "send_to_rank must be 0 or 1 (a core of the LNC=2 pair), got 2"),
    (2, (nl.float32, nl.sbuf, None), "nisa.sendrecv is not available on gen2: it needs gen3 or newer"),
])  # fmt: skip
def test_sendrecv_rejects(gen: int, args: tuple[Any, ...], fragment: str) -> None:
    a = RNG.standard_normal((2, 16, 8)).astype(np.float32)
    _rejects(sendrecv_kernel, gen, (a, *args), fragment, grid=2)


def test_sendrecv_accepts_the_edge() -> None:
    a = RNG.standard_normal((2, 128, 8)).astype(np.float32)  # all 128 partitions, ranks 0 and 1
    np.testing.assert_array_equal(nki.simulate(nki.jit(sendrecv_kernel)[2])(a, nl.float32, nl.sbuf, None), a[::-1])


def barrier_kernel(a, cores):  # noqa: ANN001, ANN201
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.core_barrier(data=out, cores=cores)  # RULE
    nisa.dma_copy(dst=out, src=t)
    return out


def test_core_barrier_names_the_pair() -> None:
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    _rejects(barrier_kernel, 3, (a, (0, 2)), "cores[1] must be 0 or 1 (a core of the LNC=2 pair), got 2", grid=2)
    _rejects(barrier_kernel, 2, (a, (0, 1)), "nisa.core_barrier is not available on gen2")
    np.testing.assert_array_equal(nki.simulate(nki.jit(barrier_kernel)[2])(a, (0, 1)), a)
    np.testing.assert_array_equal(nki.jit(barrier_kernel)(a, (0,)), a)  # a subset of the pair (nki-library does)


# -- register_load / register_store -------------------------------------------------------------------------------
def register_kernel(a, buf, store):  # noqa: ANN001, ANN201
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=buf)
    if buf == nl.sbuf:
        nisa.dma_copy(dst=t, src=a)
    r = nisa.register_alloc(7)
    if store:
        nisa.register_store(t, r)  # RULE
    else:
        nisa.register_load(r, t)  # RULE
    nisa.register_store(out, r)
    return out


def test_register_rules_on_the_call() -> None:
    """register_load/store: one element in SBUF or HBM (every NKI dtype is at most 32 bits); the frontend's own checks see a tile
    first (frontend/control.py), so the rules are asked as the verifier asks them."""
    for instr, role in (("register_load", "src"), ("register_store", "dst")):
        assert problems(Call(instr, {role: Operand("sbuf", "int32", (1, 1))})) == []
        assert problems(Call(instr, {role: Operand("hbm", "uint32", (1, 1))})) == []
        assert "exactly one element, got 2 elements" in problems(Call(instr, {role: Operand("sbuf", "int32", (1, 2))}))[0][1]
        assert "must be in SBUF or HBM, not psum" in problems(Call(instr, {role: Operand("psum", "int32", (1, 1))}))[0][1]


def test_register_load_takes_one_element() -> None:
    a = np.array([[5]], np.int32)
    assert nki.jit(register_kernel)(a, nl.sbuf, False)[0, 0] == 5
    with pytest.raises(NkiError, match=re.escape(f"test_rules_pe.py:{_line(register_kernel) + 2}: error:")):
        nki.jit(register_kernel)(np.array([[5, 6]], np.int32), nl.sbuf, False)
