"""Legacy block tensors larger than the memory (``split-blocks``): the device compiler allocates the blocks that are
live, so a ``(B, nl.par_dim(P), F)`` tensor declared at twice SBUF or PSUM whose blocks live one at a time compiles,
simulates and matches numpy; one block that cannot fit is still an error at the user's line, and blocks that are all
live at once beyond SBUF are spilled through HBM."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.target.machine import get_target  # noqa: E402

GEN3 = get_target("gen3")
SBUF_BLOCKS = 2 * GEN3.sbuf_bytes_per_partition // (2048 * 4) + 1  # fp32 [128, 2048] blocks: over twice SBUF
PSUM_BLOCKS = 2 * GEN3.psum_bytes_per_partition // (512 * 4)  # fp32 [128, 512] blocks (one bank each): twice PSUM


@nki.jit
def scale_blocks(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((a.shape[0], nl.par_dim(128), a.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(a.shape[0]):
        buf[b] = nl.load(a[b])
        buf[b] = nl.multiply(buf[b], 2.0)
        nl.store(out[b], buf[b])
    return out


@nki.jit
def matmul_blocks(w, x):
    n = x.shape[0]
    out = nl.ndarray((n, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((n, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    wt = nl.load(w)
    for b in nl.affine_range(n):
        acc[b] = nisa.nc_matmul(wt, nl.load(x[b]))
        nl.store(out[b], acc[b])
    return out


@nki.jit
def two_block_tensors(a):
    """Each block tensor fits SBUF alone, the two together do not: allocation splits them and tries again."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray((a.shape[0], nl.par_dim(128), a.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
    y = nl.ndarray((a.shape[0], nl.par_dim(128), a.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(a.shape[0]):
        x[b] = nl.load(a[b])
        y[b] = nl.add(x[b], 1.0)
        nl.store(out[b], y[b])
    return out


@nki.jit
def all_blocks_live(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((a.shape[0], nl.par_dim(128), a.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
    total = nl.zeros((nl.par_dim(128), a.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(a.shape[0]):
        buf[b] = nl.load(a[b])
        total[...] = nl.add(total, buf[b])
    for b in nl.affine_range(a.shape[0]):  # every block is read again after the total needed all of them
        nl.store(out[b], nl.subtract(buf[b], total))
    return out


@nki.jit
def one_huge_block(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((2, nl.par_dim(128), 2 * 65536), dtype=nl.float32, buffer=nl.sbuf)  # 512 KiB per block
    nl.store(out, nl.load(a))
    return out


def _quiet(fn, *args):  # noqa: ANN001, ANN202
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy idioms' migration hints
        return nki.simulate_kernel(fn, *args)


def test_an_sbuf_block_tensor_of_twice_sbuf_whose_blocks_live_one_at_a_time() -> None:
    a = np.random.default_rng(0).standard_normal((SBUF_BLOCKS, 128, 2048)).astype(np.float32)
    assert SBUF_BLOCKS * 2048 * 4 > 2 * GEN3.sbuf_bytes_per_partition
    np.testing.assert_array_equal(_quiet(scale_blocks, a), 2 * a)


def _quiet_but_allocation(fn, *args):  # noqa: ANN001, ANN202
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)  # the legacy idioms' migration hints
        return nki.simulate_kernel(fn, *args)


def test_a_psum_block_tensor_of_twice_psum_one_matmul_per_block() -> None:
    rng = np.random.default_rng(1)
    w = rng.integers(-2, 3, (128, 128)).astype(np.float32)
    x = rng.integers(-2, 3, (PSUM_BLOCKS, 128, 512)).astype(np.float32)
    assert PSUM_BLOCKS * 512 * 4 == 2 * GEN3.psum_bytes_per_partition
    np.testing.assert_array_equal(_quiet(matmul_blocks, w, x), np.einsum("km,bkn->bmn", w, x))


def test_block_tensors_that_fit_alone_but_not_together() -> None:
    blocks = GEN3.sbuf_bytes_per_partition // (4096 * 4)
    assert 2 * blocks * 4096 * 4 > GEN3.sbuf_bytes_per_partition >= blocks * 4096 * 4
    a = np.random.default_rng(2).standard_normal((blocks, 128, 4096)).astype(np.float32)
    np.testing.assert_array_equal(_quiet(two_block_tensors, a), a + 1)


def test_blocks_live_together_beyond_sbuf_are_spilled() -> None:
    """Every block is live until the total needs it again: 2x SBUF live at once, so blocks round-trip through HBM
    (passes/spill.py) and the result is still exact."""
    from nkic.passes.spill import AllocationWarning

    a = np.random.default_rng(3).integers(-4, 5, (SBUF_BLOCKS, 128, 2048)).astype(np.float32)
    with pytest.warns(AllocationWarning, match="spilled to HBM"):
        got = _quiet_but_allocation(all_blocks_live, a)
    np.testing.assert_array_equal(got, a - a.sum(axis=0))


def test_one_block_larger_than_sbuf_is_an_error_at_the_users_line() -> None:
    line = one_huge_block.func.__code__.co_firstlineno + 3
    with pytest.raises(NkiError, match=re.escape(f"test_block_tensors.py:{line}: error: sbuf tensor needs 524288 bytes")):
        _quiet(one_huge_block, np.zeros((128, 64), np.float32))


def test_pre_schedules_trial_allocation_leaves_split_blocks_unplaced() -> None:
    """pre-schedule asks allocate-memory whether its order fits, then takes the addresses off again: that includes
    the per-block memlocs the allocator split off while trying, or they would stay fixed where the trial put them."""
    from nkic.dialects import bir
    from nkic.compiler.driver import make_context
    from nkic.library import RESOLVER
    from nkic.passes.bir_unroll import BirUnrollPass
    from nkic.passes.pipelines import frontend_lowering
    from nkic.passes.pre_schedule import _fits
    from nkic.passes.resolver import use_resolver
    from nkic.frontend import TensorSpec

    blocks = GEN3.sbuf_bytes_per_partition // (4096 * 4)
    module = two_block_tensors.trace(TensorSpec((blocks, 128, 4096), "float32")).module.clone()
    ctx = make_context()
    with warnings.catch_warnings(), use_resolver(RESOLVER):
        warnings.simplefilter("ignore")
        for p in (*frontend_lowering(), BirUnrollPass()):
            p.apply(ctx, module)
        assert _fits(module, ctx, "rotate")
    locs = [m for f in module.ops if isinstance(f, bir.FunctionOp) for m in f.memlocs().values()]
    assert any(".b0" in m.sym_name.data for m in locs)  # the trial split the block tensors ...
    assert all(m.addr is None for m in locs if m.mem in ("sbuf", "psum"))  # ... and left every one unplaced


@nki.jit
def matmul_blocks_384(w, x):
    """Blocks of 1536 bytes: laid out whole (6 KiB from a bank's start) block 1 would cover bytes 1536..3071."""
    n = x.shape[0]
    out = nl.ndarray((n, 128, 384), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((n, nl.par_dim(128), 384), dtype=nl.float32, buffer=nl.psum)
    wt = nl.load(w)
    for b in nl.affine_range(n):
        acc[b] = nisa.nc_matmul(wt, nl.load(x[b]))
        nl.store(out[b], acc[b])
    return out


def _psum_byte_ranges(kernel, *specs):  # noqa: ANN001, ANN202
    """(first, last) byte within its partition of every PSUM operand once allocated."""
    from nkic.compiler.driver import make_context
    from nkic.dialects import bir
    from nkic.library import RESOLVER
    from nkic.passes.allocate_memory import AllocateMemoryPass
    from nkic.passes.pipelines import backend, frontend_lowering
    from nkic.passes.resolver import use_resolver
    from nkic.target.vocab import dtype_size

    module = kernel.trace(*specs).module.clone()
    ctx = make_context()
    with warnings.catch_warnings(), use_resolver(RESOLVER):
        warnings.simplefilter("ignore")
        for p in frontend_lowering():
            p.apply(ctx, module)
        for p in backend():
            p.apply(ctx, module)
            if isinstance(p, AllocateMemoryPass):
                break
    out = []
    for fn in (f for f in module.ops if isinstance(f, bir.FunctionOp)):
        locs = fn.memlocs()
        for inst in fn.instructions():
            for ref, ap in zip(inst.ref_names, inst.aps.data):
                loc = locs[ref]
                if loc.mem != "psum":
                    continue
                elem = dtype_size(ap.view_dtype or loc.dtype.data)
                row = elem * int(np.prod(loc.dims[1:]))
                first = loc.addr[1] + (ap.offset_value * elem) % row
                out.append((first, first + elem * sum((n - 1) * s for s, n in ap.pairs[1:]) + elem - 1))
    return out


def test_a_psum_block_never_spans_banks() -> None:
    """The bank rule for a PSUM block tensor that fits PSUM whole: each block gets its own memloc, placed inside one
    2 KiB bank, and the products still match numpy."""
    from nkic.frontend import TensorSpec

    bank = GEN3.psum_bank_bytes
    ranges = _psum_byte_ranges(matmul_blocks_384, TensorSpec((128, 128), "float32"), TensorSpec((4, 128, 384), "float32"))
    assert ranges and all(first // bank == last // bank for first, last in ranges)
    rng = np.random.default_rng(4)
    w = rng.integers(-2, 3, (128, 128)).astype(np.float32)
    x = rng.integers(-2, 3, (4, 128, 384)).astype(np.float32)
    np.testing.assert_array_equal(_quiet(matmul_blocks_384, w, x), np.einsum("km,bkn->bmn", w, x))


@nki.jit
def zeroed_blocks(a):
    """Each block of a zeroed block tensor accumulates its input twice: the blocks live one at a time."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    z = nl.zeros((a.shape[0], nl.par_dim(128), a.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(a.shape[0]):
        x = nl.load(a[b])
        z[b] = nl.add(z[b], x)
        z[b] = nl.add(z[b], x)
        nl.store(out[b], z[b])
    return out


@nki.jit
def zeroed_psum_blocks(w, x):
    n = x.shape[0]
    out = nl.ndarray((n, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((n, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    wt = nl.load(w)
    for b in nl.affine_range(n):
        acc[b] += nisa.nc_matmul(wt, nl.load(x[b]))
        nl.store(out[b], acc[b])
    return out


@nki.jit
def filled_blocks(a):
    """nl.full and nisa.memset of a block shape: every block holds the value."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    f = nl.full((a.shape[0], nl.par_dim(128), a.shape[2]), 3.0, dtype=nl.float32, buffer=nl.sbuf)
    m = nisa.memset(shape=(a.shape[0], nl.par_dim(128), a.shape[2]), value=2.0, dtype=nl.float32)
    for b in nl.affine_range(a.shape[0]):
        nl.store(out[b], nl.add(nl.multiply(f[b], m[b]), nl.load(a[b])))
    return out


def test_zeros_on_a_block_tensor_of_twice_sbuf_fills_every_block() -> None:
    """One memset per block (a single one over the declaration would keep its 2x-SBUF blocks together)."""
    a = np.random.default_rng(5).integers(-4, 5, (SBUF_BLOCKS, 128, 2048)).astype(np.float32)
    np.testing.assert_array_equal(_quiet(zeroed_blocks, a), 2 * a)


def test_zeros_on_a_psum_block_tensor_of_twice_psum() -> None:
    """Zeroing a PSUM block tensor fills it bank by bank (a PSUM tile never spans banks): it was an error."""
    rng = np.random.default_rng(6)
    w = rng.integers(-2, 3, (128, 128)).astype(np.float32)
    x = rng.integers(-2, 3, (PSUM_BLOCKS, 128, 512)).astype(np.float32)
    np.testing.assert_array_equal(_quiet(zeroed_psum_blocks, w, x), np.einsum("km,bkn->bmn", w, x))


def test_full_and_memset_of_a_block_shape_fill_every_block() -> None:
    a = np.random.default_rng(7).standard_normal((4, 128, 64)).astype(np.float32)
    np.testing.assert_array_equal(_quiet(filled_blocks, a), a + 6)


@nki.jit
def one_huge_psum_block(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((2, nl.par_dim(128), 4608), dtype=nl.float32, buffer=nl.psum)  # 18 KiB per block
    nl.store(out, nl.load(a))
    return out


@nki.jit
def psum_block_over_a_bank(a):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((4, nl.par_dim(128), 1024), dtype=nl.float32, buffer=nl.psum)  # 4 KiB blocks: two banks each
    nl.store(out, nl.add(acc[0], 1.0))
    return out


def test_one_psum_block_larger_than_psum_is_an_error_at_the_users_line() -> None:
    line = one_huge_psum_block.func.__code__.co_firstlineno + 3
    with pytest.raises(NkiError, match=re.escape(f"test_block_tensors.py:{line}: error: psum tensor needs 18432 bytes")):
        _quiet(one_huge_psum_block, np.zeros((128, 64), np.float32))


def test_a_psum_block_over_a_bank_is_an_error_at_the_users_line() -> None:
    """The bank rule at trace time: a block fill (4 KiB of a 16 KiB PSUM block tensor) would span two banks."""
    line = psum_block_over_a_bank.func.__code__.co_firstlineno + 3
    with pytest.raises(NkiError, match=re.escape(f"test_block_tensors.py:{line}: error: memset: PSUM tile 'dst' needs "
                                                 "4096 bytes per partition, more than one 2048-byte bank")):
        _quiet(psum_block_over_a_bank, np.zeros((128, 64), np.float32))
