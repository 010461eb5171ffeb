"""nki-library's dynamic-addressing kernels, unmodified, against numpy translations of their torch references.

``experimental/dynamic_shapes/dynamic_elementwise_add``: a runtime loop (``nl.dynamic_range`` over a register
loaded from the input) whose DMAs address HBM through ``.ap(scalar_offset=<SBUF counter>)``; one NEFF serves
every trip count. ``core/subkernels/indexed_flatten``: scalar-offset scatters with ``oob_mode.skip``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nkic import api as nki

BF16 = ml_dtypes.bfloat16


def dynamic_elementwise_add_ref(a: np.ndarray, b: np.ndarray, num_m_tiles: int) -> np.ndarray:
    """``dynamic_elementwise_add_torch_ref`` is ``a + b``; the kernel computes it for the first
    ``num_m_tiles * 128`` rows and leaves the rest of its fresh output unwritten, so only those rows compare."""
    rows = num_m_tiles * 128
    return (a[:rows].astype(np.float32) + b[:rows].astype(np.float32)).astype(BF16)


@pytest.mark.parametrize("num_m_tiles", [0, 1, 2])
def test_dynamic_elementwise_add(nkilib, num_m_tiles: int) -> None:
    mod = nkilib("nkilib.experimental.dynamic_shapes.dynamic_elementwise_add")
    rng = np.random.default_rng(num_m_tiles)
    m, h = 256, 512  # the smallest shape the kernel accepts: M a multiple of 128, H of 512 (two M-tiles)
    a = rng.standard_normal((m, h)).astype(BF16)
    b = rng.standard_normal((m, h)).astype(BF16)
    count = np.array([[num_m_tiles]], np.int32)
    out = nki.simulate(mod.dynamic_elementwise_add)(a, b, count)
    rows = num_m_tiles * 128
    np.testing.assert_array_equal(out[:rows].astype(np.float32),
                                  dynamic_elementwise_add_ref(a, b, num_m_tiles).astype(np.float32))


def indexed_flatten_ref(x: np.ndarray, f_len: int, output_len: int, row_offsets: np.ndarray,
                        start: int = 0, padding_val: int = -1) -> np.ndarray:  # fmt: skip
    """numpy translation of ``indexed_flatten_torch_ref``."""
    e, t = x.shape
    out = np.full(output_len, padding_val, x.dtype)
    blocks = out.reshape(output_len // f_len, f_len)
    rows = x.reshape(e, t // f_len, f_len)
    for r in range(e):
        offset = int(row_offsets[start + r])
        for p in range(t // f_len):
            if 0 <= offset + p < output_len // f_len:
                blocks[offset + p] = rows[r, p]
    return out


def test_indexed_flatten(nkilib) -> None:
    mod = nkilib("nkilib.core.subkernels.indexed_flatten")
    e, t, f_len, output_len = 2, 64, 4, 256  # (T // f_len) a multiple of 16, output_len of 128 and f_len
    x = np.arange(e * t, dtype=np.int32).reshape(e, t)
    row_offsets = np.array([3, 50], np.int32)  # row 1's blocks 50..65 run past the 64 output blocks: skipped
    out = nki.simulate(mod.indexed_flatten[2])(x, f_len, output_len, row_offsets)
    np.testing.assert_array_equal(out, indexed_flatten_ref(x, f_len, output_len, row_offsets))
