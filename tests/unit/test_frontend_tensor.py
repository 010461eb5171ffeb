"""NkiTensor view arithmetic: indexing / reshape / view / ap produce the access patterns numpy views imply."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkic.frontend.affine import DynSlice, IndexExpr, LoopVar
from nkic.frontend.dtypes import BUFFERS
from nkic.frontend.errors import NeedsUnroll, NkiError
from nkic.frontend.tensor import NkiTensor, Storage, contiguous_pairs


def make(shape: tuple[int, ...], buffer: str = "hbm", dtype: str = "float32") -> NkiTensor:
    storage = Storage("t", shape, dtype, BUFFERS[buffer], None, None, None)
    return NkiTensor(storage, 0, contiguous_pairs(shape))


def flat_indices(t: NkiTensor) -> list[int]:
    """The storage elements the view enumerates, in row-major view order."""
    assert isinstance(t.offset, int)
    out = []
    for idx in itertools.product(*(range(n) for n in t.shape)):
        out.append(t.offset + sum(s * i for (s, _), i in zip(t.pairs, idx)))
    return out


@st.composite
def shapes_and_keys(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[object, ...]]:
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    keys: list[object] = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "full", "ds"]))
        if kind == "int":
            keys.append(draw(st.integers(-n, n - 1)))
        elif kind == "full":
            keys.append(slice(None))
        elif kind == "ds":
            start = draw(st.integers(0, n - 1))
            keys.append(("ds", start, draw(st.integers(1, n - start))))
        else:
            step = draw(st.sampled_from([1, 1, 2, 3, -1, -2]))
            start = draw(st.one_of(st.none(), st.integers(-n, n)))
            stop = draw(st.one_of(st.none(), st.integers(-n, n)))
            if len(range(*slice(start, stop, step).indices(n))) == 0:
                keys.append(slice(None))
            else:
                keys.append(slice(start, stop, step))
    cut = draw(st.integers(0, len(keys)))
    if draw(st.booleans()) and cut < len(keys):
        keys = keys[:cut] + [Ellipsis]  # the remaining dims become full slices
    return shape, tuple(keys)


def to_numpy_key(key: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(slice(k[1], k[1] + k[2]) if isinstance(k, tuple) else k for k in key)


def to_nki_key(key: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(DynSlice(k[1], k[2]) if isinstance(k, tuple) else k for k in key)


@settings(max_examples=300, deadline=None)
@given(shapes_and_keys())
def test_hbm_indexing_matches_numpy(case: tuple[tuple[int, ...], tuple[object, ...]]) -> None:
    shape, key = case
    ref = np.arange(int(np.prod(shape))).reshape(shape)[to_numpy_key(key)]
    view = make(shape)[to_nki_key(key)]
    assert view.shape == ref.shape
    assert flat_indices(view) == list(np.asarray(ref).ravel())


@settings(max_examples=300, deadline=None)
@given(shapes_and_keys(), shapes_and_keys())
def test_on_chip_indexing_enumerates_numpy_elements(case, case2) -> None:
    """On-chip views keep size-1 dims for ints, but enumerate the same storage elements in the same order."""
    shape, key = case
    if len(shape) < 2:
        shape = (*shape, 3)
    ref = np.arange(int(np.prod(shape))).reshape(shape)[to_numpy_key(key)]
    view = make(shape, "sbuf")[to_nki_key(key)]
    assert flat_indices(view) == list(np.asarray(ref).ravel())
    assert view.ndim >= 2
    assert view.pairs[0][0] % int(np.prod(shape[1:])) == 0  # pair 0 steps over whole partitions


@settings(max_examples=150, deadline=None)
@given(shapes_and_keys(), st.data())
def test_view_of_view_composes(case, data) -> None:
    shape, key = case
    ref = np.arange(int(np.prod(shape))).reshape(shape)[to_numpy_key(key)]
    view = make(shape)[to_nki_key(key)]
    if ref.ndim == 0:
        return
    dim = data.draw(st.integers(0, ref.ndim - 1))
    n = ref.shape[dim]
    start = data.draw(st.integers(0, n - 1))
    step = data.draw(st.sampled_from([1, 2, -1]))
    sub = [slice(None)] * ref.ndim
    sub[dim] = slice(start, None, step)
    assert flat_indices(view[tuple(sub)]) == list(ref[tuple(sub)].ravel())


def test_on_chip_int_rules() -> None:
    t = make((128, 4, 512), "sbuf")
    assert t[:, 0].shape == (128, 512)
    assert t[:, 0, 0].shape == (128, 1)
    assert t[0].shape == (1, 4, 512)
    assert t[0, 0, 0].shape == (1, 1)
    h = make((128, 4, 512), "hbm")
    assert h[:, 0, 0].shape == (128,)
    assert h[1, 2, 3].shape == ()


def test_reshape_and_view() -> None:
    h = make((4, 6))
    assert flat_indices(h.reshape(3, 8)) == list(range(24))
    assert h.reshape((2, -1)).shape == (2, 12)
    s = make((128, 4, 8), "sbuf")
    r = s[:, 1].reshape((128, 2, 4))
    assert r.shape == (128, 2, 4) and r.offset == 8 and r.pairs[0] == (32, 128)
    with pytest.raises(NkiError, match="partition dim"):
        s.reshape((64, 64))
    with pytest.raises(NkiError, match="element counts"):
        h.reshape(5, 5)
    b = make((128, 64), "sbuf", "float32").view("bfloat16")
    assert b.shape == (128, 128) and b.dtype == "bfloat16" and b.pairs == ((128, 128), (1, 128))


def test_ap_addresses_storage() -> None:
    s = make((128, 512), "sbuf")
    v = s[0:64, 256:].ap([[512, 64], [2, 128]])
    assert v.shape == (64, 128) and v.offset == 256  # offset inherited from the view
    assert v.ap([[512, 64], [1, 8]], offset=0).offset == 0
    with pytest.raises(NkiError, match="first pair"):
        s.ap([[1, 128], [128, 4]])
    # an overrunning pattern is a value like any other; only an instruction using it is an error
    assert s.ap([[512, 128], [1, 1024]]).bounds_problem() == "access pattern touches elements 0..66047 of 't', " \
        "which has 65536"  # fmt: skip
    assert v.bounds_problem() is None


def test_loop_var_indices_are_affine() -> None:
    i = LoopVar(("f", 1, 0), 0, 4, 1, None)
    h = make((512, 64))
    v = h[i * 128 : (i + 1) * 128, :]
    assert v.shape == (128, 64)
    assert isinstance(v.offset, IndexExpr) and v.offset.terms == ((i, 128 * 64),)
    w = h[DynSlice(i * 128 + 1, 16), 3]
    assert isinstance(w.offset, IndexExpr) and w.offset.const == 64 + 3
    with pytest.raises(NkiError, match="out of bounds"):
        h[i * 256 : i * 256 + 256]  # i = 3 reaches row 1023
    with pytest.raises(NeedsUnroll):
        [0, 1, 2, 3][i]
    with pytest.raises(NeedsUnroll):
        bool(i == 0)
    assert (i * 4) // 2 is not None and ((i * 4) // 2).terms == ((i, 2),)
    assert i - i == 0


def test_index_errors() -> None:
    h = make((4, 6))
    with pytest.raises(NkiError, match="out of bounds"):
        h[4]
    with pytest.raises(NkiError, match="too many indices"):
        h[0, 0, 0]
    assert h[2:2].shape == (0, 6) and h[2:2].size == 0  # an empty view is legal (a no-op in instructions)
    assert bool(h)  # a tensor is truthy, as NKI's NkiTensor: `if bias:` asks whether one was given
    with pytest.raises(NkiError, match="dynamic control flow"):
        h < 3  # noqa: B015 — its values are unknown at trace time
