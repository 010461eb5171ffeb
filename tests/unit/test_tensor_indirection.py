"""Tensor indirection (``t.indirect(index)`` views of compute operands, NeuronCore-v4) end to end against numpy: gathers
(a source view) and scatters (a dst view) on tensor_copy, tensor_tensor, tensor_scalar, activation and nc_matmul,
the snake order of the offsets (16-partition groups on VectorE/ScalarE/GpSimd, 32 on TensorE), the engine chosen,
the errors at the user's line (earlier generations, operands that take no view), the simulator's bounds check, and
the ISA encoding."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.compiler.driver import make_context  # noqa: E402
from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.passes.bir_sim import BirSimPass  # noqa: E402
from nkic.passes.bir_to_isa import BirToIsaPass  # noqa: E402
from nkic.runtime.encoding import decode_stream, encode_stream  # noqa: E402
from nkic.runtime.simulator import SimulationError  # noqa: E402
from nkic.target.costs import instr_ns  # noqa: E402
from nkic.target.isa import Instr, Operand  # noqa: E402
from nkic.target.machine import get_target  # noqa: E402
from pipeline_run import passes_on  # noqa: E402

RNG = np.random.default_rng(23)


def snake(index: np.ndarray, group: int, count: int | None = None) -> np.ndarray:
    """The offsets of a (P, K) index in the reference's order: "offset i comes from index[i % G, i // G]", one
    partition group after the other."""
    out = np.concatenate([index[g : g + group].T.reshape(-1) for g in range(0, index.shape[0], group)])
    return out[: index.size if count is None else count].astype(np.int64)


def load(a, buffer=nl.sbuf):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    if buffer is nl.psum:
        p = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=t)
        return p
    return t


def store(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    if t.buffer == "psum":
        s = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=t)
        t = s
    nisa.dma_copy(dst=out, src=t)
    return out


# -- gathers ---------------------------------------------------------------------------------------------------------
def copy_gather(data, index, num_elem, engine, in_psum):
    d, i = load(data, nl.psum if in_psum else nl.sbuf), load(index)
    o = nl.ndarray((data.shape[0], num_elem), dtype=data.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=d.indirect(i, num_elem=num_elem), engine=engine)
    return store(o)


@pytest.mark.parametrize("engine,in_psum", [(nisa.engine.unknown, False), (nisa.engine.scalar, False),
                                            (nisa.engine.vector, True)])  # fmt: skip
@pytest.mark.parametrize("index_dtype", [np.int32, np.uint16])
def test_tensor_copy_gathers_columns_in_snake_order(engine, in_psum, index_dtype) -> None:
    P, F, K = 40, 48, 3  # 40 partitions: two full 16-partition groups and one of 8
    data = RNG.standard_normal((P, F)).astype(np.float32)
    index = RNG.integers(0, F, (P, K)).astype(index_dtype)
    out = nki.jit(copy_gather, platform_target="trn3")(data, index, 100, engine, in_psum)
    np.testing.assert_array_equal(out, data[:, snake(index, 16, 100)])


def test_snake_order_reads_partitions_first() -> None:
    """Offset i = index[i % 16, i // 16] within the first group: the order is not the row-major one."""
    P, F = 16, 64
    data = np.tile(np.arange(F, dtype=np.float32), (P, 1))
    index = np.arange(P * 2, dtype=np.int32).reshape(P, 2)  # index[p, k] = 2p + k
    out = nki.jit(copy_gather, platform_target="trn3")(data, index, P * 2, nisa.engine.vector, False)
    want = np.concatenate([2 * np.arange(P), 2 * np.arange(P) + 1]).astype(np.float32)
    np.testing.assert_array_equal(out[0], want)


# -- scatters --------------------------------------------------------------------------------------------------------
def tensor_tensor_scatter(x, y, index):
    a, b, i = load(x), load(y), load(index)
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=o, value=0.0)
    nisa.tensor_tensor(dst=o.indirect(i), data1=a.indirect(i), data2=b, op=nl.add)
    return store(o)


def test_tensor_tensor_gathers_and_scatters() -> None:
    P, F, K = 32, 80, 2
    x = RNG.standard_normal((P, F)).astype(np.float32)
    index = RNG.permutation(F)[: P * K].reshape(K, P).T.astype(np.int32).copy()  # distinct offsets
    y = RNG.standard_normal((P, P * K)).astype(np.float32)
    out = nki.jit(tensor_tensor_scatter, platform_target="trn3")(x, y, index)
    offsets = snake(index, 16)
    want = np.zeros_like(x)
    want[:, offsets] = x[:, offsets] + y
    np.testing.assert_array_equal(out, want)


def scatter_last(src, index, F):
    s, i = load(src), load(index)
    o = nl.ndarray((src.shape[0], F), dtype=src.dtype, buffer=nl.sbuf)
    nisa.memset(dst=o, value=-1.0)
    nisa.tensor_copy(dst=o.indirect(i, num_elem=src.shape[1]), src=s)
    return store(o)


def test_repeated_scatter_offsets_the_last_column_wins() -> None:
    P, F = 16, 8
    src = RNG.standard_normal((P, 3)).astype(np.float32)
    index = np.zeros((P, 1), np.int32)
    index[:3, 0] = [5, 2, 5]  # columns 0 and 2 both go to offset 5
    out = nki.jit(scatter_last, platform_target="trn3")(src, index, F)
    want = np.full((P, F), -1.0, np.float32)
    want[:, 2], want[:, 5] = src[:, 1], src[:, 2]
    np.testing.assert_array_equal(out, want)


# -- tensor_scalar, activation, nc_matmul ----------------------------------------------------------------------------
def scalar_and_act(x, index):
    a, i = load(x), load(index)
    n = index.size
    o1 = nl.ndarray((x.shape[0], n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=o1, data=a.indirect(i), op0=nl.multiply, operand0=3.0, op1=nl.add, operand1=1.0)
    o2 = nl.ndarray((x.shape[0], n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=o2, op=nl.exp, data=a.indirect(i), scale=0.5)
    o3 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=o3, value=0.0)
    nisa.tensor_scalar(dst=o3.indirect(i), data=o1, op0=nl.subtract, operand0=1.0)
    return store(o1), store(o2), store(o3)


def test_tensor_scalar_and_activation_gather() -> None:
    P, F, K = 16, 40, 2
    x = RNG.standard_normal((P, F)).astype(np.float32)
    index = RNG.permutation(F)[: P * K].reshape(K, P).T.astype(np.int32).copy()
    o1, o2, o3 = nki.jit(scalar_and_act, platform_target="trn3")(x, index)
    offsets = snake(index, 16)
    np.testing.assert_allclose(o1, x[:, offsets] * 3 + 1, rtol=1e-6)
    np.testing.assert_allclose(o2, np.exp(x[:, offsets] * 0.5), rtol=1e-5)
    want = np.zeros_like(x)
    want[:, offsets] = x[:, offsets] * 3
    np.testing.assert_allclose(o3, want, rtol=1e-6, atol=1e-6)


def matmul_indirect(st, mv, si, mi):
    s, m, a, b = load(st), load(mv), load(si), load(mi)
    ps = nl.ndarray((si.size, mi.size), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=s.indirect(a), moving=m.indirect(b))
    return store(ps)


def matmul_scatter(st, mv, di, width):
    s, m, d = load(st), load(mv), load(di)
    ps = nl.ndarray((st.shape[1], width), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=ps, value=0.0)
    nisa.nc_matmul(dst=ps.indirect(d), stationary=s, moving=m)
    return store(ps)


def test_nc_matmul_gathers_stationary_and_moving_in_32_partition_groups() -> None:
    K, M, N = 64, 80, 120
    st = RNG.standard_normal((K, M)).astype(ml_dtypes.bfloat16)
    mv = RNG.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    si = RNG.integers(0, M, (K, 1)).astype(np.int32)
    mi = RNG.integers(0, N, (K, 2)).astype(np.int32)
    out = nki.jit(matmul_indirect, platform_target="trn3")(st, mv, si, mi)
    s = st.astype(np.float32)[:, snake(si, 32)]
    m = mv.astype(np.float32)[:, snake(mi, 32)]
    np.testing.assert_allclose(out, s.T @ m, rtol=2e-2, atol=2e-2)


def test_nc_matmul_scatters_its_result_columns() -> None:
    K, M, W = 32, 64, 200
    st = RNG.standard_normal((K, M)).astype(ml_dtypes.bfloat16)
    mv = RNG.standard_normal((K, M)).astype(ml_dtypes.bfloat16)  # M result columns, one per offset
    offsets = RNG.permutation(W)[:M].astype(np.int32)
    di = offsets[:, None].copy()  # (M, 1), dst's partitions: one column, so the snake is the row order
    out = nki.jit(matmul_scatter, platform_target="trn3")(st, mv, di, W)
    want = np.zeros((M, W), np.float32)
    want[:, snake(di, 32)] = st.astype(np.float32).T @ mv.astype(np.float32)
    np.testing.assert_allclose(out, want, rtol=2e-2, atol=2e-2)


# -- errors ----------------------------------------------------------------------------------------------------------
def _line_of(fn, text: str) -> int:
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(src) if text in line)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_indirect_before_neuroncore_v4_is_an_error_at_the_line(target) -> None:
    data = RNG.standard_normal((16, 8)).astype(np.float32)
    index = np.zeros((16, 1), np.int32)
    with pytest.raises(NkiError, match=r"tensor indirection is available on NeuronCore-v4") as e:
        nki.jit(copy_gather, platform_target=target)(data, index, 16, nisa.engine.vector, False)
    assert f":{_line_of(copy_gather, 'd.indirect(')}:" in str(e.value)


def act_scatter(x, index, fn):
    a, i = load(x), load(index)
    o = nl.ndarray((x.shape[0], 64), dtype=nl.float32, buffer=nl.sbuf)
    if fn == "activation":
        nisa.activation(dst=o.indirect(i), op=nl.exp, data=a)
    elif fn == "exponential":
        nisa.exponential(dst=o.indirect(i), src=a)
    else:
        nisa.tensor_tensor(dst=o[:, 0:16], data1=a, data2=a.indirect(i), op=nl.add)
    return store(o)


@pytest.mark.parametrize("fn,role,why", [("activation", "dst", "not implemented in nkic"),
                                         ("exponential", "dst", "not implemented in nkic"),
                                         ("tensor_tensor", "data2", "the reference lists the operands")])  # fmt: skip
def test_an_operand_nkic_cannot_index_is_an_error_at_the_line(fn, role, why) -> None:
    x = RNG.standard_normal((16, 16)).astype(np.float32)
    with pytest.raises(NkiError, match=rf"'{role}' cannot be a tensor indirection view.*{why}") as e:
        nki.jit(act_scatter, platform_target="trn3")(x, np.zeros((16, 1), np.int32), fn)
    assert f":{_line_of(act_scatter, f'nisa.{fn}(')}:" in str(e.value)


def test_an_offset_outside_the_partition_is_a_simulation_error() -> None:
    data = RNG.standard_normal((16, 8)).astype(np.float32)
    index = np.zeros((16, 1), np.int32)
    index[3, 0] = 1 << 20
    with pytest.raises(SimulationError, match=r"tensor indirection offset 3 is 1048576, outside the"):
        nki.jit(copy_gather, platform_target="trn3")(data, index, 16, nisa.engine.vector, False)


def test_the_encoding_round_trips_an_indirect_operand() -> None:
    dst = Operand("sbuf", "float32", ((1, 16), (1, 32)), 0, 0)
    src = Operand("psum", "bfloat16", ((1, 16), (2, 32)), 0, 64, dyn="indirect", dyn_ref=3, dyn_scale=2)
    idx = Operand("sbuf", "int32", ((1, 16), (1, 2)), 0, 512)
    ins = Instr("TENSOR_COPY", "dve", (dst, src, None, idx))
    assert decode_stream(encode_stream("dve", [ins]))[1] == [ins]


# -- the documented rules: a kernel breaking each is refused at its line; the edge of each runs ----------------------
def _tile(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


def rule_case(data, index, case):
    d, i = load(data), load(index)
    o = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.sbuf)
    if case == "gpsimd":
        nisa.tensor_copy(dst=o, src=d[0:32].indirect(i[0:32], num_elem=32), engine=nisa.engine.gpsimd)  # BREAKS
    elif case == "index_quadrant":
        nisa.tensor_copy(dst=o[16:32, 0:16], src=d[16:32].indirect(i[16:32]))  # BREAKS
    elif case == "src_on_index":
        nisa.tensor_copy(dst=o, src=d[32:64].indirect(i[0:32], num_elem=32))  # BREAKS
    elif case == "dst_index_on_src":
        nisa.tensor_copy(dst=_tile((64, 48))[32:64].indirect(i[32:64], num_elem=32), src=d[0:32, 0:32])  # BREAKS
    elif case == "scalar_psum_scatter":
        p = nl.ndarray((32, 48), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p.indirect(i[0:32], num_elem=32), src=o, engine=nisa.engine.scalar)  # BREAKS
    elif case == "addr":
        x = _tile((32, 48), nl.int32)
        nisa.tensor_scalar(dst=_tile((32, 32), nl.int32), data=x.indirect(i[0:32], num_elem=32),  # BREAKS
                           op0=nl.add, operand0=4)
    elif case == "quadrant_edge":  # legal: views and indices on partition 32, a quadrant boundary
        nisa.tensor_copy(dst=o, src=d[32:64].indirect(i[32:64], num_elem=32))
    elif case == "psum_scatter_edge":  # legal: a PSUM scatter on VectorE (engine left to nkic: not ScalarE)
        p = nl.ndarray((32, 48), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=p, value=0.0)
        nisa.tensor_copy(dst=p.indirect(i[0:32], num_elem=32), src=d[0:32, 0:32])
        nisa.tensor_copy(dst=o, src=p[:, 0:32])
    return store(o)


@pytest.mark.parametrize("case,match", [
    ("gpsimd", r"with tensor indirection it runs on vector or scalar, not gpsimd.*must run on the Vector or Scalar"),
    ("index_quadrant", r"the index of 'src'.indirect\(\) starts on partition 16, not on a quadrant boundary"),
    ("src_on_index", r"'src' starts on partition 32 but its index on 0"),
    ("dst_index_on_src", r"dst's index starts on partition 32 but 'src' on 0"),
    ("scalar_psum_scatter", r"on the Scalar engine a scattered \(indirect\) dst cannot be in PSUM"),
    ("addr", r"tensor_scalar: tensor indirection is not supported for int32 -> int32 integer arithmetic"),
])  # fmt: skip
def test_a_kernel_breaking_a_rule_is_refused_at_its_line(case, match) -> None:
    data, index = np.zeros((64, 48), np.float32), np.zeros((64, 1), np.int32)
    with pytest.raises(NkiError, match=match) as e:
        nki.jit(rule_case, platform_target="trn3")(data, index, case)
    src, first = inspect.getsourcelines(rule_case)
    at = src.index(next(line for line in src if f'"{case}"' in line))
    line = first + next(k for k in range(at, len(src)) if "# BREAKS" in src[k])
    assert f":{line}:" in str(e.value)


def test_the_edges_of_the_rules_run() -> None:
    data = RNG.standard_normal((64, 48)).astype(np.float32)
    index = RNG.integers(0, 48, (64, 1)).astype(np.int32)
    out = nki.jit(rule_case, platform_target="trn3")(data, index, "quadrant_edge")
    np.testing.assert_array_equal(out, data[32:64][:, snake(index[32:64], 16)])
    # the scatter reads index[0:32] (K = 1: its offsets are rows 0..31 in order); distinct offsets, no overwrite
    offsets = RNG.permutation(48)[:32].astype(np.int32)
    index = np.concatenate([offsets, offsets])[:, None].copy()
    out = nki.jit(rule_case, platform_target="trn3")(data, index, "psum_scatter_edge")
    want = np.zeros((32, 48), np.float32)
    want[:, offsets] = data[0:32, 0:32]
    np.testing.assert_array_equal(out, want[:, 0:32])


def matmul_rule_case(st, idx, case):
    s, i = load(st), load(idx)
    p = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.psum)
    if case == "transpose":
        nisa.nc_matmul(dst=p, stationary=s[0:32, 0:32], moving=s.indirect(i, num_elem=32), is_transpose=True)  # BREAKS
    elif case == "tile_position":
        nisa.nc_matmul(dst=p, stationary=s.indirect(i, num_elem=32), moving=s[0:32, 0:32],  # BREAKS
                       tile_position=(0, 32), tile_size=(32, 32))
    elif case == "dtype":
        f = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_matmul(dst=p, stationary=f.indirect(i, num_elem=32), moving=f[:, 0:32])  # BREAKS
    return store(p)


@pytest.mark.parametrize("case,match", [
    ("transpose", r"with is_transpose=True, moving cannot be a tensor indirection view"),
    ("tile_position", r"with tensor indirection tile_position must be \(0, 0\) or unset, got \(0, 32\)"),
    ("dtype", r"indirect 'stationary' must be one of float16, bfloat16.*got float32"),
])  # fmt: skip
def test_a_matmul_breaking_a_rule_is_refused_at_its_line(case, match) -> None:
    st, idx = np.zeros((32, 64), ml_dtypes.bfloat16), np.zeros((32, 1), np.int32)
    with pytest.raises(NkiError, match=match) as e:
        nki.jit(matmul_rule_case, platform_target="trn3")(st, idx, case)
    src, first = inspect.getsourcelines(matmul_rule_case)
    at = src.index(next(line for line in src if f'"{case}"' in line))
    line = first + next(k for k in range(at, len(src)) if "# BREAKS" in src[k])
    assert f":{line}:" in str(e.value)


# -- the other instructions whose paragraph nkic implements -----------------------------------------------------------
def more_instructions(x, pred, index):
    a, p, i = load(x), load(pred), load(index)
    P, n = x.shape[0], index.size
    red = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=red, op=nl.maximum, data=a.indirect(i), axis=1)
    tsr = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.sbuf)
    tsr_res = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=tsr, data=a.indirect(i), op0=nl.multiply, operand0=2.0, reduce_op=nl.add,
                              reduce_res=tsr_res)  # fmt: skip
    cum = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=cum, value=0.0)
    nisa.tensor_scalar_cumulative(dst=cum.indirect(i), src=a.indirect(i), op0=nl.multiply, op1=nl.add, imm0=1.0,
                                  reduce_cmd=nisa.reduce_cmd.reset_reduce)  # fmt: skip
    sel = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=sel, value=-1.0)
    nisa.tensor_copy_predicated(dst=sel.indirect(i), src=a[:, 0:n], predicate=p.indirect(i))
    ex = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(dst=ex, src=a.indirect(i))
    ar = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.sbuf)
    ar_res = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(dst=ar, op=nl.copy, data=a.indirect(i), reduce_op=nl.add, reduce_res=ar_res)
    return store(red), store(tsr), store(tsr_res), store(cum), store(sel), store(ex), store(ar_res)


def test_reduce_scan_select_and_exponential_gather_and_scatter() -> None:
    P, F, K = 16, 40, 2
    x = RNG.standard_normal((P, F)).astype(np.float32)
    pred = RNG.integers(0, 2, (P, F)).astype(np.uint8)
    index = RNG.permutation(F)[: P * K].reshape(K, P).T.astype(np.int32).copy()
    red, tsr, tsr_res, cum, sel, ex, ar_res = nki.jit(more_instructions, platform_target="trn3")(x, pred, index)
    o = snake(index, 16)
    g = x[:, o]
    np.testing.assert_array_equal(red, g.max(axis=1, keepdims=True))
    np.testing.assert_allclose(tsr, g * 2, rtol=1e-6)
    np.testing.assert_allclose(tsr_res, (g * 2).sum(axis=1, keepdims=True), rtol=1e-5)
    want = np.zeros_like(x)
    want[:, o] = np.cumsum(g, axis=1)
    np.testing.assert_allclose(cum, want, rtol=1e-5, atol=1e-5)
    want = np.full_like(x, -1.0)
    want[:, o] = np.where(pred[:, o] != 0, x[:, : len(o)], -1.0)
    np.testing.assert_array_equal(sel, want)
    np.testing.assert_allclose(ex, np.exp(g), rtol=1e-5)
    np.testing.assert_allclose(ar_res, g.sum(axis=1, keepdims=True), rtol=1e-5)


def test_program_order_agrees_with_the_concurrent_simulation(capsys: pytest.CaptureFixture[str]) -> None:
    """bir-sim runs the gathers and scatters one at a time (simulate_in_order) and on the engines: same outputs."""
    P, F, K = 32, 80, 2
    x, y = np.zeros((P, F), np.float32), np.zeros((P, P * K), np.float32)
    traced = nki.jit(tensor_tensor_scatter, platform_target="trn3").trace(x, y, np.zeros((P, K), np.int32))
    for p, module, ctx in passes_on(traced):
        if isinstance(p, BirToIsaPass):
            break
        p.apply(ctx, module)
    BirSimPass().apply(make_context(), module)
    assert "agree bit for bit" in capsys.readouterr().out


def test_an_indirect_operand_costs_what_its_elements_cost() -> None:
    """The reference states no cost of its own for tensor indirection: the (P, num_elem) elements are the cost."""
    dst = Operand("sbuf", "float32", ((1, 128), (1, 512)), 0, 0)
    plain = Operand("sbuf", "float32", ((1, 128), (1, 512)), 0, 4096)
    ti = Operand("sbuf", "float32", ((1, 128), (1, 512)), 0, 4096, dyn="indirect", dyn_ref=3, dyn_scale=1)
    idx = Operand("sbuf", "int32", ((1, 128), (1, 4)), 0, 8192)
    trn3 = get_target("trn3")
    plain_ns = instr_ns(Instr("TENSOR_COPY", "dve", (dst, plain)), trn3)
    assert instr_ns(Instr("TENSOR_COPY", "dve", (dst, ti, None, idx)), trn3) == plain_ns > 0


def sliced_view(data, index):
    d, i = load(data), load(index)
    v = d.indirect(i)
    return store(v[0:4])


def test_an_indirect_view_cannot_be_sliced() -> None:
    with pytest.raises(NkiError, match=r"or \.indirect\) cannot be indexed, reshaped or viewed again") as e:
        nki.jit(sliced_view, platform_target="trn3")(np.zeros((16, 8), np.float32), np.zeros((16, 1), np.int32))
    assert f":{_line_of(sliced_view, 'v[0:4]')}:" in str(e.value)


def int_gather(x, index):
    a, i = load(x), load(index)
    o = nl.ndarray((x.shape[0], index.size), dtype=nl.int32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=o, data=a.indirect(i), op0=nl.bitwise_and, operand0=255)
    return store(o)


def test_integer_bit_masking_of_a_gather_is_not_the_address_pattern() -> None:
    """The address-arithmetic form is read narrowly (scale and offset); other int32 tensor_scalar gathers run."""
    x = RNG.integers(0, 1 << 20, (16, 40)).astype(np.int32)
    index = RNG.integers(0, 40, (16, 2)).astype(np.int32)
    out = nki.jit(int_gather, platform_target="trn3")(x, index)
    np.testing.assert_array_equal(out, x[:, snake(index, 16)] & 255)
