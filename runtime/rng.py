"""XORWOW, the engines' pseudo random number generator, as pure numpy: the simulator's RNG instructions and the
tests' numpy references both use these functions.

What the NKI docs say: ``nisa.rand2`` "uses the XORWOW PRNG algorithm"; ``rand_get_state``/``rand_set_state`` move
6 uint32 words per compute lane on GpSimd and 24 on VectorE; the state lives in the engine for the rest of the NEFF
execution; ``rng`` writes 32 random bits per element, truncated to the dtype's least significant bits;
``set_rng_seed`` seeds VectorE from one 32-bit value.

XORWOW (Marsaglia, "Xorshift RNGs", J. Stat. Softw. 8(14), 2003) keeps five xorshift words x0..x4 and a Weyl
counter d; one step is::

    t = x4; s = x0; x4, x3, x2, x1 = x3, x2, x1, s
    t ^= t >> 2; t ^= t << 1; t ^= s ^ (s << 4); x0 = t
    d += 362437; output t + d

A generator's 6 words are stored in that order (x0, x1, x2, x3, x4, d). Where the docs are silent nkic decides,
and the tests pin these decisions:

* Layout: a VectorE lane holds ``rng_generators = 4`` generators (24 words = 4 states) and produces 4 elements per
  step: element ``j`` of a partition's row comes from generator ``j % 4``; every generator of the lane advances
  once per group of 4 elements, a partial last group included. GpSimd lanes hold one generator.
* Seeding (``set_rng_seed``, and the power-on state = seed 0): generator ``k = lane * G + g`` of an engine with
  ``G`` generators per lane takes its six words from three outputs of SplitMix64 (Steele, Lea, Flood 2014) started
  at ``seed << 32 | k``: output ``i`` (1..3) gives the low and high halves of words ``2(i-1)`` and ``2(i-1)+1``. An
  all-zero x0..x4 (which XORWOW's xorshift part cannot leave) becomes x0 = 1.
* Uniform floats (``rand2``, ``dropout``, ``nl.rand``): the top 24 bits of an output as ``u = (bits >> 8) * 2^-24``,
  in [0, 1) exactly in fp32; ``rand2`` is ``min + u * (max - min)`` in fp32 (so within [min, max]); ``dropout``
  zeroes an element when ``u < prob`` (prob 1.0 drops all, 0.0 none).
"""

from __future__ import annotations

import numpy as np

from nkic.target.machine import XORWOW_WORDS

__all__ = ["WEYL", "seed_states", "xorwow_step", "draw", "truncate", "unit_uniform", "uniform", "dropout_keep"]

WEYL = 362437  # XORWOW's Weyl-sequence increment
_GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment
_MASK32 = np.uint64(0xFFFFFFFF)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function (uint64 arithmetic wraps)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def seed_states(seed: int, lanes: int, generators: int) -> np.ndarray:
    """The (lanes, generators * 6) uint32 state of an engine seeded with the 32-bit ``seed``."""
    start = (np.uint64(seed & 0xFFFFFFFF) << np.uint64(32)) | np.arange(lanes * generators, dtype=np.uint64)
    words = []
    for i in range(1, 4):
        z = _splitmix64(start + np.uint64(i * _GOLDEN % 2**64))
        words += [z & _MASK32, z >> np.uint64(32)]
    states = np.stack(words, axis=-1).astype(np.uint32)
    states[~states[:, :5].any(axis=1), 0] = 1
    return states.reshape(lanes, generators * XORWOW_WORDS)


def xorwow_step(st: np.ndarray) -> np.ndarray:
    """Advance every generator of ``st`` (..., 6) uint32 by one step, in place; its outputs (...) uint32."""
    t, s = st[..., 4].copy(), st[..., 0].copy()
    st[..., 4], st[..., 3], st[..., 2] = st[..., 3], st[..., 2], st[..., 1]
    st[..., 1] = s
    t ^= t >> np.uint32(2)
    t ^= t << np.uint32(1)
    t ^= s ^ (s << np.uint32(4))
    st[..., 0] = t
    st[..., 5] += np.uint32(WEYL)
    return t + st[..., 5]


def draw(state: np.ndarray, n: int) -> np.ndarray:
    """``n`` outputs per lane (lanes, n) uint32 from an engine state (lanes, G * 6), advancing it in place.

    Element ``j`` comes from generator ``j % G``; all G generators step once per group of G elements."""
    lanes, width = state.shape
    generators = width // XORWOW_WORDS
    st = state.reshape(lanes, generators, XORWOW_WORDS)
    if not np.shares_memory(st, state):
        raise ValueError("the RNG state must be a contiguous (lanes, G * 6) uint32 array")
    steps = -(-n // generators)
    out = np.empty((lanes, steps, generators), np.uint32)
    for i in range(steps):
        out[:, i] = xorwow_step(st)
    return out.reshape(lanes, steps * generators)[:, :n]


def truncate(bits: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """32-bit outputs reduced to an integer dtype's least significant bits (``nisa.rng``)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        raise ValueError(f"rng writes integer dtypes, not {dtype}")
    return bits.astype(np.dtype(f"u{dtype.itemsize}")).view(dtype)


def unit_uniform(bits: np.ndarray) -> np.ndarray:
    """The top 24 bits as an fp32 in [0, 1) (exact)."""
    return (bits >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)


def uniform(bits: np.ndarray, low: np.ndarray | float, high: np.ndarray | float) -> np.ndarray:
    """``low + u * (high - low)`` in fp32 (``nisa.rand2``); ``low``/``high`` broadcast (a (P, 1) column or a number)."""
    low32, high32 = np.float32(low) if np.ndim(low) == 0 else low, np.float32(high) if np.ndim(high) == 0 else high
    low32, high32 = np.asarray(low32, np.float32), np.asarray(high32, np.float32)
    return (low32 + unit_uniform(bits) * (high32 - low32)).astype(np.float32)


def dropout_keep(bits: np.ndarray, prob: np.ndarray | float) -> np.ndarray:
    """Which elements ``dropout`` keeps: ``u >= prob`` (prob broadcast: a (P, 1) column or a number)."""
    return unit_uniform(bits) >= np.asarray(prob, np.float32)
