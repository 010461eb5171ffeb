"""nki.collectives between ranks: ``nki.simulate(kernel, ranks=N)`` runs N ranks (each its own HBM) in one schedule.

Each collective is checked against numpy on per-rank data; a collective some rank never reaches is a
``SimulationDeadlock`` naming the waiting ranks; ranks whose traces disagree on a collective are an ``NkiError`` at
the kernel line.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()

import nki  # noqa: E402
import nki.collectives as ncc  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.runtime.errors import SimulationDeadlock  # noqa: E402

RANKS = 4
GROUP = ncc.ReplicaGroup([[0, 1, 2, 3]])


def _line_of(fn: object, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def _data(shape: tuple[int, ...], seed: int, dtype: type = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _per_rank(shape: tuple[int, ...]) -> list[np.ndarray]:
    return [_data(shape, r) for r in range(RANKS)]


# -- the collectives, each against numpy -----------------------------------------------------------------------
@nki.jit
def sbuf_all_reduce(x, op_name):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    ncc.all_reduce(srcs=[t], dsts=[r], replica_group=GROUP, op=getattr(nl, op_name))
    nisa.dma_copy(dst=out, src=r)
    return out


@pytest.mark.parametrize("op_name, ref", [("add", np.sum), ("maximum", np.max), ("minimum", np.min)])
def test_all_reduce_sbuf(op_name: str, ref) -> None:
    xs = _per_rank((128, 64))
    outs = nki.simulate(sbuf_all_reduce, ranks=RANKS)(xs, op_name)
    want = ref(np.stack(xs), axis=0)
    assert len(outs) == RANKS
    for out in outs:
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


@nki.jit
def hbm_collectives(x):
    """all_reduce, all_gather, reduce_scatter and all_to_all on HBM tensors (dim 0), coalesced where allowed."""
    n = 4
    s = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.ndarray((x.shape[0] * n, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    rs = nl.ndarray((x.shape[0] // n, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    a2a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_reduce(srcs=[x], dsts=[s], replica_group=GROUP, op=nl.add)
    ncc.all_gather(srcs=[x], dsts=[g], replica_group=GROUP, collective_dim=0)
    ncc.reduce_scatter(srcs=[x], dsts=[rs], replica_group=GROUP, collective_dim=0, op=nl.add)
    ncc.all_to_all(srcs=[x], dsts=[a2a], replica_group=GROUP, collective_dim=0)
    return s, g, rs, a2a


def test_hbm_collectives_match_numpy() -> None:
    xs = _per_rank((8, 16))
    outs = nki.simulate(hbm_collectives, ranks=RANKS)(xs)
    total = np.sum(np.stack(xs), axis=0)
    chunks = [np.split(x, RANKS) for x in xs]
    for r, (s, g, rs, a2a) in enumerate(outs):
        np.testing.assert_allclose(s, total, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(g, np.concatenate(xs))
        np.testing.assert_allclose(rs, np.split(total, RANKS)[r], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(a2a, np.concatenate([chunks[j][r] for j in range(RANKS)]))


@nki.jit
def sbuf_all_gather(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    g = nl.ndarray((x.shape[0], x.shape[1] * 4), dtype=x.dtype, buffer=nl.sbuf)
    ncc.all_gather(srcs=[t], dsts=[g], replica_group=GROUP, collective_dim=1)
    out = nl.ndarray(g.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=g)
    return out


def test_all_gather_sbuf_free_dim_bf16_is_bit_exact() -> None:
    import ml_dtypes

    xs = [x.astype(ml_dtypes.bfloat16) for x in _per_rank((64, 32))]
    for out in nki.simulate(sbuf_all_gather, ranks=RANKS)(xs):
        np.testing.assert_array_equal(out, np.concatenate(xs, axis=1))


@nki.jit
def permutes(x):
    ring = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    swap = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    red = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.collective_permute_implicit(srcs_by_channel=[[x]], dsts_by_channel=[[ring]], replica_group=GROUP)
    ncc.collective_permute(srcs=[x], dsts=[swap], source_target_pairs=[(0, 1), (1, 0), (2, 3), (3, 2)])
    ncc.collective_permute_implicit_reduce(srcs0_by_channel=[[x]], srcs1_by_channel=[[ring]],
                                           dsts_by_channel=[[red]], replica_group=GROUP, op=nl.add)
    # the rank registers, stored through a one-element tile
    ids = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.register_store(ids[0:1, 0:1], ncc.rank_id())
    prev = ncc.collective_permute_implicit_current_processing_rank_id(iteration_id=1, replica_group=GROUP)
    nisa.register_store(ids[0:1, 1:2], prev)
    return ring, swap, red, ids


def test_permutes_and_rank_registers() -> None:
    xs = _per_rank((4, 8))
    outs = nki.simulate(permutes, ranks=RANKS)(xs)
    for r, (ring, swap, red, ids) in enumerate(outs):
        prev, prev2 = (r - 1) % RANKS, (r - 2) % RANKS
        np.testing.assert_array_equal(ring, xs[prev])
        np.testing.assert_array_equal(swap, xs[r ^ 1])
        np.testing.assert_allclose(red, xs[prev] + xs[prev2], rtol=1e-6)  # the predecessor's x + its ring
        assert ids.tolist() == [[r, prev]]


@nki.jit
def gather_v(x, meta):
    out = nl.ndarray((4 * 4,), dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_gather_v(srcs=[x], dsts=[out], replica_group=GROUP, metadata_tensor=meta)
    return out


def test_all_gather_v_variable_chunks() -> None:
    xs = [np.arange(8, dtype=np.float32) + 10 * r for r in range(RANKS)]
    metas = [np.array([[r + 1] * 4, [1] * 4, [0] * 4], np.uint32) for r in range(RANKS)]  # count r+1 from 1
    outs = nki.simulate(gather_v, ranks=RANKS)(xs, metas)
    for out in outs:
        for s in range(RANKS):
            np.testing.assert_array_equal(out[4 * s: 4 * s + s + 1], xs[s][1: s + 2])
    for meta in metas:  # row 2: the counts received (recv_counts_known=False)
        assert meta[2].tolist() == [1, 2, 3, 4]


@nki.jit
def to_all_v(x, meta):
    out = nl.ndarray((4 * 4,), dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_to_all_v(srcs=[x], dsts=[out], replica_group=GROUP, metadata_tensor=meta)
    return out


def test_all_to_all_v_per_destination_chunks() -> None:
    """Rank s sends (s + r) % 3 + 1 elements from offset 4r of its src to rank r, which lays them at slot s."""
    xs = [np.arange(16, dtype=np.float32) + 100 * s for s in range(RANKS)]
    counts = [[(s + r) % 3 + 1 for r in range(RANKS)] for s in range(RANKS)]
    metas = [np.array([counts[s], [4 * r for r in range(RANKS)], [0] * RANKS], np.uint32) for s in range(RANKS)]
    outs = nki.simulate(to_all_v, ranks=RANKS)(xs, metas)
    for r, out in enumerate(outs):
        for s in range(RANKS):
            n = counts[s][r]
            np.testing.assert_array_equal(out[4 * s: 4 * s + n], xs[s][4 * r: 4 * r + n])
        assert metas[r][2].tolist() == [counts[s][r] for s in range(RANKS)]


# -- tensor-parallel MLP: column-parallel up projection, row-parallel down projection, all_reduce ---------------
@nki.jit
def tp_mlp(x, w_up, w_down):
    """y = relu(x @ w_up) @ w_down with w_up split by columns and w_down by rows over the ranks: each rank computes
    its partial product and one all_reduce sums them. x: [T, D] (T <= 128), w_up: [D, F/n], w_down: [F/n, D]."""
    T, D = x.shape
    F = w_up.shape[1]
    xT = nl.ndarray((D, T), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xT, src=x.ap(pattern=[[1, D], [D, T]]))  # x transposed by the access pattern
    wu = nl.ndarray((D, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=wu, src=w_up)
    h_ps = nl.ndarray((F, T), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=h_ps, stationary=wu, moving=xT)  # hT[F, T] = w_up^T @ x^T
    hT = nl.ndarray((F, T), dtype=x.dtype, buffer=nl.sbuf)
    nisa.activation(dst=hT, op=nl.relu, data=h_ps)
    wd = nl.ndarray((F, D), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=wd, src=w_down)
    y_ps = nl.ndarray((T, D), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=y_ps, stationary=hT, moving=wd)  # y[T, D] = h @ w_down
    part = nl.ndarray((T, D), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=part, src=y_ps)
    y = nl.ndarray((T, D), dtype=x.dtype, buffer=nl.sbuf)
    ncc.all_reduce(srcs=[part], dsts=[y], replica_group=GROUP, op=nl.add)
    out = nl.ndarray((T, D), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=y)
    return out


def test_tensor_parallel_mlp_matches_numpy() -> None:
    T, D, F = 64, 128, 512
    x = _data((T, D), 1) * 0.5
    w_up, w_down = _data((D, F), 2) * 0.1, _data((F, D), 3) * 0.1
    ups, downs = np.split(w_up, RANKS, axis=1), np.split(w_down, RANKS, axis=0)
    outs = nki.simulate(tp_mlp, ranks=RANKS)(x, ups, downs)  # x to every rank, one shard of each weight per rank
    want = np.maximum(x @ w_up, 0) @ w_down
    for out in outs:
        np.testing.assert_allclose(out, want, rtol=2e-4, atol=2e-4)


# -- errors ---------------------------------------------------------------------------------------------------------
@nki.jit
def extra_collective(x, flag):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_reduce(srcs=[x], dsts=[out], replica_group=GROUP, op=nl.add)
    if flag.shape[0] == 2:  # only the rank given a 2-element flag
        ncc.all_reduce(srcs=[x], dsts=[out], replica_group=GROUP, op=nl.add)
    return out


def test_a_collective_some_rank_never_reaches_deadlocks_cleanly() -> None:
    flags = [np.zeros(1, np.float32)] * 3 + [np.zeros(2, np.float32)]
    with pytest.raises(SimulationDeadlock) as e:
        nki.simulate(extra_collective, ranks=RANKS)(np.ones((4, 8), np.float32), flags)
    text = str(e.value)
    where = f"{__file__}:{_line_of(extra_collective, 'only the rank given') + 1}"
    assert f"rank 3 waits at its all_reduce (collective #1 at {where}" in text, text
    for r in range(3):
        assert f"rank {r}, which has finished its streams without reaching collective #1" in text, text
    assert "\n" not in text


@nki.jit
def shape_dependent_group(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    groups = [[0, 1, 2, 3]] if x.shape[0] == 4 else [[0, 1], [2, 3]]
    ncc.all_reduce(srcs=[x], dsts=[out], replica_group=ncc.ReplicaGroup(groups), op=nl.add)  # the collective
    return out


def test_mismatched_replica_groups_across_ranks_are_an_error_at_the_kernel_line() -> None:
    xs = [np.ones((4, 8), np.float32)] * 3 + [np.ones((8, 8), np.float32)]
    with pytest.raises(NkiError, match=r"collective mismatch across ranks: rank 0 runs all_reduce over \[0,1,2,3\]"
                                       r".*rank 3 runs all_reduce over \[0,1;2,3\]") as e:  # fmt: skip
        nki.simulate(shape_dependent_group, ranks=RANKS)(xs)
    assert (e.value.file, e.value.line) == (__file__, _line_of(shape_dependent_group, "the collective"))


def test_a_group_naming_ranks_beyond_the_launch_is_an_error() -> None:
    with pytest.raises(NkiError, match=r"names rank 3, but the launch has 2 rank\(s\)"):
        nki.simulate(sbuf_all_reduce, ranks=2)(np.ones((128, 64), np.float32), "add")


@pytest.mark.parametrize("call, message", [
    (lambda t: ncc.all_reduce(srcs=t, dsts=[t], replica_group=GROUP, op=nl.add), "'srcs' is a list of tensors"),
    (lambda t: ncc.all_reduce(srcs=[t], dsts=[t], replica_group=GROUP, op=nl.multiply), "op must be nl.add"),
    (lambda t: ncc.all_gather(srcs=[t], dsts=[t], replica_group=GROUP, collective_dim=0), "expected shape"),
    (lambda t: ncc.all_to_all(srcs=[t], dsts=[t], replica_group=GROUP, collective_dim=0), "must reside on HBM"),
    (lambda t: ncc.ReplicaGroup([[0, 1], [1, 2]]), "must not overlap"),
])  # fmt: skip
def test_bad_calls_are_errors_at_the_kernel_line(call, message: str) -> None:
    @nki.jit
    def kernel(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        call(t)
        return x

    with pytest.raises(NkiError, match=message):
        kernel.trace(np.zeros((128, 8), np.float32))


def test_nkic_run_ranks(tmp_path, capsys) -> None:
    """``nkic run --ranks 4``: NAME=FILE goes to every rank, NAME@R=FILE to rank R; rank r writes NAME.rank<r>.npy."""
    from nkic.compiler.driver import compile_kernel
    from nkic.tools import cli

    x = np.ones((128, 64), np.float32)
    neff = tmp_path / "ar.neff"
    neff.write_bytes(compile_kernel(sbuf_all_reduce, (x, "add"), {}).neff)
    np.save(tmp_path / "ones.npy", x)
    np.save(tmp_path / "threes.npy", 3 * x)
    out = tmp_path / "out"
    assert cli.main(["run", str(neff), "--ranks", "4", "--input", f"x={tmp_path / 'ones.npy'}",
                     "--input", f"x@2={tmp_path / 'threes.npy'}", "--output-dir", str(out)]) == 0  # fmt: skip
    for r in range(RANKS):
        np.testing.assert_array_equal(np.load(out / f"out.rank{r}.npy"), 6 * x)  # 1 + 1 + 3 + 1
    assert cli.main(["run", str(neff), "--ranks", "4", "--input", f"x@7={tmp_path / 'ones.npy'}",
                     "--output-dir", str(out)]) != 0  # fmt: skip
    assert "the rank after '@' must be 0..3" in capsys.readouterr().err


def test_bir_sim_skips_a_kernel_whose_ranks_meet() -> None:
    """A collective has no one-at-a-time meaning (the group applies it): bir-sim says so instead of failing."""
    from nkic.compiler.driver import make_context
    from nkic.passes.bir_sim import check
    from nkic.passes.bir_to_isa import BirToIsaPass
    from nkic.passes.pipelines import backend, frontend_lowering

    module = sbuf_all_reduce.trace(np.zeros((128, 64), np.float32), "add").module.clone()
    ctx = make_context()
    for p in (*frontend_lowering(), *backend()):
        if isinstance(p, BirToIsaPass):
            break
        p.apply(ctx, module)
    assert "skipped (the cores meet: sendrecv/core_barrier/collectives" in check(module, 0, 10_000)


def test_collective_cost_is_the_ring_at_the_published_link_bandwidth() -> None:
    """all_reduce of 256 KiB over 4 ranks on trn2: 2(n-1) = 6 ring steps of (DMA start 1.3 us + semaphore round
    0.5 us) plus 2(n-1)/n of the buffer at 1.28 TB/s per chip over its 8 NeuronCores (160 B/ns); all_gather is half
    the steps and bytes; trn3's 2.56 TB/s halves the transfer."""
    from nkic.target.collectives import collective_ns
    from nkic.target.isa import Instr, Operand
    from nkic.target.machine import get_target

    def instr(opcode: str, n: int) -> Instr:
        op = Operand("sbuf", "float32", ((1, 128), (1, 512)))
        return Instr(opcode, "sp", (op, op), (0, 0, n, 0))  # queue, replica_groups, group_size, op

    nbytes = 128 * 512 * 4
    trn2, trn3 = get_target("trn2"), get_target("trn3")
    assert collective_ns(instr("ALL_REDUCE", 4), trn2) == pytest.approx(6 * 1800 + 1.5 * nbytes / 160)
    assert collective_ns(instr("ALL_GATHER", 4), trn2) == pytest.approx(3 * 1800 + 0.75 * nbytes / 160)
    assert collective_ns(instr("ALL_REDUCE", 8), trn2) > collective_ns(instr("ALL_REDUCE", 4), trn2)
    assert collective_ns(instr("ALL_REDUCE", 4), trn3) == pytest.approx(6 * 1800 + 1.5 * nbytes / 320)


def test_a_timing_only_launch_prices_the_collectives() -> None:
    """SP triggers each rank's all_reduce like a DMA (a short issue on its track); the transfer runs on a DMA queue
    once the whole group has triggered, on every rank at once, for its modelled cost."""
    from nkic.api.execute import neff_of
    from nkic.runtime.neff import read_neff
    from nkic.runtime.ranks import simulate_ranks

    traced = sbuf_all_reduce.trace(np.zeros((128, 64), np.float32), "add")
    neff = read_neff(neff_of(traced))
    runs = simulate_ranks([neff] * RANKS, [{}] * RANKS, target="trn2", timing_only=True)
    events = [e for e in runs[0].profile.events if e.mnemonic == "ALL_REDUCE"]
    issues = [e for e in events if e.track == "sp"]
    transfers = [e for e in events if e.track.startswith("q")]
    assert len(issues) == len(transfers) == RANKS
    assert all(e.dur_ns < 100 for e in issues)  # SP_DMA_ISSUE_CYCLES
    assert len({e.start_ns for e in transfers}) == 1  # the group moves together ...
    assert min(e.start_ns for e in transfers) >= max(e.end_ns for e in issues)  # ... after the last trigger
    assert all(e.dur_ns >= 6 * 1800 for e in transfers)


def test_a_rank_outside_every_list_of_the_group_is_an_error() -> None:
    with pytest.raises(NkiError, match=r"all_reduce: rank 4 is in no list of its replica group \[0,1,2,3\]"):
        nki.simulate(sbuf_all_reduce, ranks=6)(np.ones((128, 64), np.float32), "add")


@nki.jit
def data_dependent_collectives(x, trips):
    """Every rank runs the same program; how many all_reduces it reaches comes from its own data."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = nisa.register_alloc()
    nisa.register_load(n, trips)
    for _ in nl.dynamic_range(n):
        ncc.all_reduce(srcs=[x], dsts=[out], replica_group=GROUP, op=nl.add)
    return out


def test_a_data_dependent_missing_collective_deadlocks_on_one_neff() -> None:
    x = np.ones((4, 8), np.float32)
    ok = nki.simulate(data_dependent_collectives, ranks=RANKS)(x, np.full((1, 1), 2, np.int32))
    assert all(np.array_equal(o, 4 * x) for o in ok)
    trips = [np.full((1, 1), 2, np.int32)] * 2 + [np.full((1, 1), 1, np.int32)] * 2
    with pytest.raises(SimulationDeadlock) as e:
        nki.simulate(data_dependent_collectives, ranks=RANKS)(x, trips)
    text = str(e.value)
    for r in (0, 1):
        assert f"rank {r} waits at its all_reduce (collective #1" in text, text
    assert "rank 2, which has finished its streams without reaching collective #1" in text, text


@nki.jit
def pair_then_all_reduce(a):
    """Each rank is an LNC=2 pair: its two programs swap halves (sendrecv, core_barrier: the rank's own pair), then
    each program all-reduces what it received with the same program of the other ranks."""
    pid = nl.program_id(0)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    mine = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[pid])
    got = nl.ndarray(mine.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
    total = nl.ndarray(mine.shape, dtype=a.dtype, buffer=nl.sbuf)
    ncc.all_reduce(srcs=[got], dsts=[total], replica_group=ncc.ReplicaGroup([[0, 1]]), op=nl.add)
    nisa.dma_copy(dst=out[pid], src=total)
    nisa.core_barrier(out, (0, 1))
    return out


def test_lnc_pairs_inside_ranks() -> None:
    xs = [_data((2, 128, 8), r) for r in range(2)]
    outs = nki.simulate(pair_then_all_reduce[2], ranks=2)(xs)
    for out in outs:  # program p received the other program's half; the ranks' programs p summed it
        for p in range(2):
            np.testing.assert_allclose(out[p], xs[0][1 - p] + xs[1][1 - p], rtol=1e-6)


@nki.jit
def coalesced_and_printed(x, y):
    """A coalesced all_reduce (two HBM tensors, one call) and a device print, which says which rank printed it."""
    sx = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    sy = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.shared_hbm)
    ncc.all_reduce(srcs=[x, y], dsts=[sx, sy], replica_group=GROUP, op=nl.maximum)
    nl.device_print("sy", sy)
    return sx, sy


def test_coalesced_all_reduce_and_rank_prints(capsys) -> None:
    xs, ys = _per_rank((4, 8)), [_data((2, 3), 10 + r) for r in range(RANKS)]
    outs = nki.simulate(coalesced_and_printed, ranks=RANKS)(xs, ys)
    for sx, sy in outs:
        np.testing.assert_array_equal(sx, np.max(np.stack(xs), axis=0))
        np.testing.assert_array_equal(sy, np.max(np.stack(ys), axis=0))
    lines = capsys.readouterr().out.splitlines()
    assert sorted(line.split("]")[0] for line in lines if line.startswith("[rank")) == \
        [f"[rank {r}" for r in range(RANKS)]  # fmt: skip
