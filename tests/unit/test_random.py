"""Random numbers: ``nisa.rng``/``rand2``/``dropout``/``set_rng_seed``/``rand_set_state``/``rand_get_state`` and
``nl.rand``/``random_seed``/``dropout``, simulated and compared bit for bit with a trace-level numpy reference.

The reference replays the kernel's instructions on ``nkic.runtime.rng`` (the generator the simulator uses); that
module is itself checked against independent scalar transcriptions of XORWOW (Marsaglia 2003) and SplitMix64.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.runtime import rng  # noqa: E402

M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
VECTOR_GENERATORS, GPSIMD_GENERATORS = 4, 1


def _out(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _seed_tile(value: int, dtype=nl.int32):
    seed = nl.ndarray((1, 1), dtype=dtype, buffer=nl.sbuf)
    nisa.memset(dst=seed, value=value)
    return seed


def _engine_state(seed: int, generators: int) -> np.ndarray:
    return rng.seed_states(seed, 128, generators)


def _reference_draw(state: np.ndarray, rows: slice, n: int) -> np.ndarray:
    lanes = state[rows].copy()
    bits = rng.draw(lanes, n)
    state[rows] = lanes
    return bits


# -- the generator itself, against scalar transcriptions of the published algorithms ---------------------------
def _xorwow_scalar(x: list[int]) -> int:
    """Marsaglia's xorwow() (J. Stat. Softw. 8(14), 2003), with x = [x, y, z, w, v, d]."""
    t = x[0] ^ (x[0] >> 2)
    x[0], x[1], x[2], x[3] = x[1], x[2], x[3], x[4]
    x[4] = (x[4] ^ ((x[4] << 4) & M32)) ^ (t ^ ((t << 1) & M32))
    x[5] = (x[5] + 362437) & M32
    return (x[5] + x[4]) & M32


def test_xorwow_step_is_marsaglias_xorwow() -> None:
    # The paper names the words x, y, z, w, v (v newest); nkic stores (x0..x4) newest first: x0 = v, x4 = x.
    paper = [123456789, 362436069, 521288629, 88675123, 5783321, 6615241]
    nkic_order = np.array([[paper[4], paper[3], paper[2], paper[1], paper[0], paper[5]]], np.uint32)
    want = [_xorwow_scalar(paper) for _ in range(1000)]
    np.testing.assert_array_equal(rng.draw(nkic_order, 1000)[0], np.array(want, np.uint32))


def _splitmix64_scalar(state: int, i: int) -> int:
    z = (state + i * 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


@pytest.mark.parametrize("seed", [0, 42, 0xFFFFFFFF])
def test_seeding_is_splitmix64_per_generator(seed: int) -> None:
    states = rng.seed_states(seed, 128, VECTOR_GENERATORS).reshape(128 * VECTOR_GENERATORS, 6)
    for k in (0, 1, 5, 511):
        words = []
        for i in (1, 2, 3):
            z = _splitmix64_scalar(seed << 32 | k, i)
            words += [z & M32, z >> 32]
        assert states[k].tolist() == words


def test_vector_lanes_interleave_four_generators() -> None:
    state = rng.seed_states(9, 2, VECTOR_GENERATORS)
    gens = [state[:, 6 * g : 6 * g + 6].copy() for g in range(4)]
    bits = rng.draw(state, 10)  # 3 steps of every generator (the last group is partial)
    for g in range(4):
        col = np.stack([rng.xorwow_step(gens[g]) for _ in range(3)], axis=1)
        np.testing.assert_array_equal(bits[:, g::4], col[:, : bits[:, g::4].shape[1]])
        np.testing.assert_array_equal(state[:, 6 * g : 6 * g + 6], gens[g])


# -- nisa.rng ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.uint16, np.int16, np.uint8, np.int8])
@pytest.mark.parametrize("engine", ["vector", "gpsimd"])
def test_rng_equals_the_reference_bit_for_bit(dtype, engine: str) -> None:
    eng = nisa.vector_engine if engine == "vector" else nisa.gpsimd_engine

    @nki.jit
    def kernel(x):
        nisa.set_rng_seed(src_seeds=_seed_tile(1234))  # seeds VectorE only
        a = nl.ndarray((128, 37), dtype=x.dtype, buffer=nl.sbuf)
        nisa.rng(dst=a, engine=eng)
        b = nl.ndarray((128, 5), dtype=x.dtype, buffer=nl.sbuf)
        nisa.rng(dst=b[32:96, :], engine=eng)  # lanes 32..95 only
        return _out(a), _out(b[32:96, :])

    a, b = nki.simulate(kernel)(np.zeros((1, 1), dtype))
    gens = VECTOR_GENERATORS if engine == "vector" else GPSIMD_GENERATORS
    state = _engine_state(1234 if engine == "vector" else 0, gens)
    np.testing.assert_array_equal(a, rng.truncate(_reference_draw(state, slice(0, 128), 37), dtype))
    np.testing.assert_array_equal(b, rng.truncate(_reference_draw(state, slice(32, 96), 5), dtype))


def test_rng_into_psum_and_three_free_dims() -> None:
    @nki.jit
    def kernel(x):
        p = nl.ndarray((64, 2, 3, 4), dtype=nl.uint32, buffer=nl.psum)
        nisa.rng(dst=p)
        s = nl.ndarray(p.shape, dtype=nl.uint32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        return _out(s)

    got = nki.simulate(kernel)(np.zeros((1, 1), np.float32))
    state = _engine_state(0, VECTOR_GENERATORS)
    np.testing.assert_array_equal(got.reshape(64, 24), _reference_draw(state, slice(0, 64), 24))


# -- nl.random_seed / nl.rand -----------------------------------------------------------------------------------
def _rand_kernel(seeds: tuple[int, ...], shape=(128, 512), dtype=nl.float32):
    @nki.jit
    def kernel(x):
        outs = []
        for s in seeds:
            nl.random_seed(_seed_tile(s))
            outs.append(_out(nl.rand(shape, dtype=dtype)))
        return tuple(outs)

    return kernel


def _rand_reference(state: np.ndarray, shape, digits: int) -> np.ndarray:
    bits = _reference_draw(state, slice(0, shape[0]), int(np.prod(shape[1:])))
    return ((bits >> np.uint32(32 - digits)).astype(np.float64) * 2.0**-digits).reshape(shape)


def test_same_seed_same_numbers_different_seed_different() -> None:
    a, b, c = nki.simulate(_rand_kernel((42, 42, 43)))(np.zeros((1, 1), np.float32))
    np.testing.assert_array_equal(a, b)
    assert np.mean(a == c) < 1e-3
    d, = nki.simulate(_rand_kernel((42,)))(np.zeros((1, 1), np.float32))  # and across runs of the NEFF
    np.testing.assert_array_equal(a, d)


@pytest.mark.parametrize(("dtype", "digits"), [(nl.float32, 24), (nl.bfloat16, 8), (nl.float16, 11),
                                               (nl.float8_e4m3, 4)])  # fmt: skip
def test_rand_is_uniform_in_0_1_and_equals_the_reference(dtype, digits: int) -> None:
    (got,) = nki.simulate(_rand_kernel((7,), dtype=dtype))(np.zeros((1, 1), np.float32))
    want = _rand_reference(_engine_state(7, VECTOR_GENERATORS), (128, 512), digits)
    np.testing.assert_array_equal(got.astype(np.float64), want)
    x = got.astype(np.float64)
    assert x.min() >= 0.0 and x.max() < 1.0  # never rounds up to 1.0, even in 8-bit floats
    n = x.size
    assert abs(x.mean() - (0.5 - 2.0**-digits / 2)) < 4 * np.sqrt(1 / 12 / n) + 1e-9
    if digits >= 8:
        assert abs(x.var() - 1 / 12) < 0.003
        hist = np.histogram(x, bins=8, range=(0, 1))[0] / n
        assert np.all(np.abs(hist - 1 / 8) < 0.005)


def test_rand_in_a_loop_draws_in_program_order() -> None:
    """Four unrolled nl.rand calls and a reseed in between: the RNG-state edges keep the scheduler from reordering
    draws or seeds, so the numbers are the sequential reference's."""

    @nki.jit
    def kernel(seed6):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.random_seed(_seed_tile(5))
        for i in nl.affine_range(4):
            if i == 2:
                nl.random_seed(seed6)  # loaded by a DMA: without the edges, draws would overtake it
            nl.store(out[i], nl.rand((128, 64), dtype=nl.float32))
        return out

    got = nki.simulate(kernel)(np.array([[6]], np.int32))
    state = _engine_state(5, VECTOR_GENERATORS)
    want = [_rand_reference(state, (128, 64), 24) for _ in range(2)]
    state = _engine_state(6, VECTOR_GENERATORS)
    want += [_rand_reference(state, (128, 64), 24) for _ in range(2)]
    np.testing.assert_array_equal(got, np.stack(want).astype(np.float32))


def test_random_seed_from_hbm_and_its_bits() -> None:
    @nki.jit
    def kernel(seed):
        nl.random_seed(seed)
        return _out(nl.rand((16, 8), dtype=nl.float32))

    got = nki.simulate(kernel)(np.array([[3.0]], np.float32))
    seed = int(np.array(3.0, np.float32).view(np.uint32))  # the seed is the 32 bits as stored
    np.testing.assert_array_equal(got, _rand_reference(_engine_state(seed, VECTOR_GENERATORS), (16, 8), 24))


# -- nisa.rand2 -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32])
def test_rand2_uniform_in_min_max(dtype) -> None:
    @nki.jit(platform_target="trn3")
    def kernel(lo):
        lo_t = nl.ndarray(lo.shape, dtype=lo.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=lo_t, src=lo)
        nisa.set_rng_seed(src_seeds=_seed_tile(99))
        d = nl.ndarray((128, 256), dtype=dtype, buffer=nl.sbuf)
        nisa.rand2(dst=d, min=lo_t, max=100.0)
        return _out(d)

    lo = np.linspace(-100, 50, 128, dtype=np.float32).reshape(128, 1)
    got = nki.simulate(kernel)(lo)
    bits = _reference_draw(_engine_state(99, VECTOR_GENERATORS), slice(0, 128), 256)
    want = rng.uniform(bits, lo, 100.0)
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(got, np.rint(want).astype(dtype))
    else:
        np.testing.assert_array_equal(got, want.astype(dtype))
        x = got.astype(np.float32)
        assert np.all(x >= lo.astype(dtype).astype(np.float32)) and np.all(x <= 100.0)  # bounds as dst rounds them
        mid = ((lo + 100.0) / 2).ravel()
        assert np.all(np.abs(x.mean(axis=1) - mid) < 0.2 * (100.0 - lo.ravel()) / np.sqrt(12))


def test_rand2_needs_gen4_and_min_below_max() -> None:
    @nki.jit
    def gen3(x):
        d = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.rand2(dst=d, min=0.0, max=1.0)
        return _out(d)

    with pytest.raises(NkiError, match="nisa.rand2 is not available on gen3"):
        gen3.trace(np.zeros((1, 1), np.float32))

    @nki.jit(platform_target="trn3")
    def bad(x):
        d = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.rand2(dst=d, min=1.0, max=1.0)
        return _out(d)

    with pytest.raises(NkiError, match="min must be less than max") as e:
        bad.trace(np.zeros((1, 1), np.float32))
    assert e.value.file == __file__


# -- nisa.dropout / nl.dropout ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32, np.uint8])
def test_dropout_equals_the_reference(dtype) -> None:
    @nki.jit
    def kernel(x, p):
        xt = nl.load(x)
        pt = nl.load(p)
        nisa.set_rng_seed(src_seeds=_seed_tile(2024))
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dropout(dst=a, data=xt, prob=pt)
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dropout(dst=b, data=xt, prob=0.25)
        return _out(a), _out(b)

    x = (np.random.default_rng(3).uniform(1, 100, (128, 300))).astype(dtype)
    p = np.linspace(0, 1, 128, dtype=np.float32).reshape(128, 1)
    a, b = nki.simulate(kernel)(x, p)
    state = _engine_state(2024, VECTOR_GENERATORS)
    keep_a = rng.dropout_keep(_reference_draw(state, slice(0, 128), 300), p)
    keep_b = rng.dropout_keep(_reference_draw(state, slice(0, 128), 300), 0.25)
    np.testing.assert_array_equal(a, np.where(keep_a, x, 0).astype(dtype))  # kept elements bit for bit
    np.testing.assert_array_equal(b, np.where(keep_b, x, 0).astype(dtype))
    assert np.all(a[0] == x[0]) and np.all(a[-1] == 0)  # prob 0 keeps all, prob 1 drops all
    rates = (a == 0).mean(axis=1)
    assert np.all(np.abs(rates - p.ravel()) < 0.12)
    assert abs((b == 0).mean() - 0.25) < 0.01


def test_nl_dropout_rate_and_dtype() -> None:
    @nki.jit
    def kernel(x):
        return _out(nl.dropout(nl.load(x), 0.4, dtype=nl.bfloat16))

    x = np.full((128, 512), 3.0, np.float32)
    got = nki.simulate(kernel)(x)
    assert got.dtype == ml_dtypes.bfloat16
    assert set(np.unique(got.astype(np.float32))) <= {0.0, 3.0}  # zeroed, not rescaled
    keep = rng.dropout_keep(_reference_draw(_engine_state(0, VECTOR_GENERATORS), slice(0, 128), 512), 0.4)
    np.testing.assert_array_equal(got.astype(np.float32), np.where(keep, 3.0, 0.0))
    assert abs((got == 0).mean() - 0.4) < 0.01


def test_dropout_checks() -> None:
    def trace(body, dtype=np.float32):
        @nki.jit
        def kernel(x):
            xt = nl.load(x)
            return _out(body(xt))

        kernel.trace(np.zeros((128, 8), dtype))

    def mismatch(xt):
        d = nl.ndarray(xt.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dropout(dst=d, data=xt, prob=0.5)
        return d

    def out_of_range(xt):
        return nl.dropout(xt, 1.5)

    def int_prob(xt):
        p = nl.ndarray((128, 1), dtype=nl.bfloat16, buffer=nl.sbuf)
        return nl.dropout(xt, p)

    with pytest.raises(NkiError, match="dst dtype bfloat16 must match data dtype float32"):
        trace(mismatch)
    with pytest.raises(NkiError, match=r"prob is a probability in \[0, 1\], got 1.5"):
        trace(out_of_range)
    with pytest.raises(NkiError, match="prob must be float32 for int32 data, got bfloat16"):
        trace(int_prob, np.int32)


# -- rand_get_state / rand_set_state ----------------------------------------------------------------------------
def test_gpsimd_state_round_trip() -> None:
    @nki.jit
    def kernel(st):
        s0 = nl.ndarray((128, 6), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(dst=s0)  # the power-on state (seed 0)
        mine = nl.load(st)
        nisa.rand_set_state(src_seeds=mine)
        r = nl.ndarray((128, 10), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(dst=r, engine=nisa.gpsimd_engine)
        s1 = nl.ndarray((128, 6), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(dst=s1, engine=nisa.engine.gpsimd)
        nisa.rand_set_state(src_seeds=s0)  # restore: the next draws repeat the power-on sequence
        again = nl.ndarray((128, 10), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(dst=again, engine=nisa.gpsimd_engine)
        return _out(s0), _out(r), _out(s1), _out(again)

    st = np.random.default_rng(1).integers(1, 2**32, (128, 6), dtype=np.uint64).astype(np.uint32)
    s0, r, s1, again = nki.simulate(kernel)(st)
    np.testing.assert_array_equal(s0, _engine_state(0, GPSIMD_GENERATORS))
    state = st.copy()
    np.testing.assert_array_equal(r, rng.draw(state, 10))
    np.testing.assert_array_equal(s1, state)
    np.testing.assert_array_equal(again, rng.draw(_engine_state(0, GPSIMD_GENERATORS), 10))


def test_vector_state_round_trip_on_gen4() -> None:
    @nki.jit(platform_target="trn3")
    def kernel(x):
        nisa.set_rng_seed(src_seeds=_seed_tile(77))
        saved = nl.ndarray((128, 24), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(dst=saved, engine=nisa.vector_engine)
        a = nl.ndarray((128, 50), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(dst=a)
        nisa.rand_set_state(src_seeds=saved, engine=nisa.vector_engine)
        b = nl.ndarray((128, 50), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(dst=b)
        p = nl.ndarray((128, 24), dtype=nl.uint32, buffer=nl.psum)  # gen4: the state may go to PSUM
        nisa.rand_get_state(dst=p, engine=nisa.vector_engine)
        after = nl.ndarray((128, 24), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=after, src=p)
        return _out(saved), _out(a), _out(b), _out(after)

    saved, a, b, after = nki.simulate(kernel)(np.zeros((1, 1), np.float32))
    state = _engine_state(77, VECTOR_GENERATORS)
    np.testing.assert_array_equal(saved, state)
    np.testing.assert_array_equal(a, _reference_draw(state, slice(0, 128), 50))
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(after, state)


@pytest.mark.parametrize(
    ("body", "target", "message"),
    [
        (lambda: nisa.rand_get_state(dst=nl.ndarray((128, 24), dtype=nl.uint32, buffer=nl.sbuf)), "trn2",
         r"'dst' must hold 6 uint32 words per partition \(XORWOW state on gpsimd\), got 24"),
        (lambda: nisa.rand_set_state(src_seeds=nl.ndarray((128, 24), dtype=nl.uint32, buffer=nl.sbuf),
                                     engine=nisa.vector_engine), "trn2",
         "the vector engine has no PRNG instruction on gen3"),
        (lambda: nisa.rand_set_state(src_seeds=nl.ndarray((128, 6), dtype=nl.int32, buffer=nl.sbuf)), "trn2",
         "'src_seeds' must be uint32, got int32"),
        (lambda: nisa.rand_get_state(dst=nl.ndarray((128, 6), dtype=nl.uint32, buffer=nl.psum)), "trn2",
         "dst must be in SBUF, not psum on NeuronCore-v3"),
        (lambda: nisa.rand_get_state(dst=nl.ndarray((128, 6), dtype=nl.uint32, buffer=nl.sbuf)), "trn1",
         "the gpsimd engine has no PRNG instruction on gen2"),
        (lambda: nisa.rng(dst=nl.ndarray((128, 6), dtype=nl.uint32, buffer=nl.psum), engine=nisa.gpsimd_engine),
         "trn2", r"POOL \(GpSimdE\) cannot write PSUM \('dst'\)"),
        (lambda: nisa.rng(dst=nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.sbuf)), "trn2",
         "rng: dst must be an integer tile"),
        (lambda: nisa.rng(dst=nl.ndarray((128, 6), dtype=nl.uint32, buffer=nl.sbuf), engine=nisa.scalar_engine),
         "trn2", "engine must be nisa.engine.vector or nisa.engine.gpsimd, got scalar"),
        (lambda: nisa.set_rng_seed(src_seeds=nl.ndarray((2, 1), dtype=nl.int32, buffer=nl.sbuf)), "trn2",
         r"src_seeds must be \[1, 1\], got \(2, 1\)"),
        (lambda: nisa.set_rng_seed(src_seeds=nl.ndarray((1, 1), dtype=nl.int16, buffer=nl.sbuf)), "trn2",
         "src_seeds must hold a 32-bit value, got int16"),
        (lambda: nl.rand((128, 4), dtype=nl.int32), "trn2", "nl.rand: dtype must be a float type"),
    ],
)  # fmt: skip
def test_rng_errors_name_the_users_line(body, target: str, message: str) -> None:
    @nki.jit(platform_target=target)
    def kernel(x):
        body()
        return _out(nl.load(x))

    with pytest.raises(NkiError, match=message) as e:
        kernel.trace(np.zeros((128, 4), np.float32))
    assert e.value.file == __file__
