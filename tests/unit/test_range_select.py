"""``nisa.range_select`` end to end (trace, penguin, bir, ISA, NEFF, simulator) against NKI's numpy definition."""

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

FP32_MIN = -3.4028235e38
RNG = np.random.default_rng(7)
CMP = {"equal": np.equal, "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
       "greater_equal": np.greater_equal}  # fmt: skip


def reference(x, lo, hi, op0, op1, start):
    idx = np.zeros_like(x, dtype=np.float32)
    idx[:] = start + np.arange(x.shape[1])
    mask = CMP[op0](idx, lo) & CMP[op1](idx, hi)
    out = np.where(mask, x.astype(np.float32), np.float32(FP32_MIN))
    return out, out.max(axis=1, keepdims=True)


def make_kernel(op0: str, op1: str, start: int, via_psum: bool, out_dtype):
    @nki.jit
    def kernel(x, lo, hi):
        p, f = x.shape
        out = nl.ndarray((p, f), dtype=out_dtype, buffer=nl.shared_hbm)
        mx = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        xs = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
        b0 = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        b1 = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xs, src=x)
        nisa.dma_copy(dst=b0, src=lo)
        nisa.dma_copy(dst=b1, src=hi)
        src = xs
        if via_psum:  # nkilib fuses the PSUM -> SBUF copy of the scores into the select
            src = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.psum)
            nisa.tensor_copy(dst=src, src=xs)
        sel = nl.ndarray((p, f), dtype=out_dtype, buffer=nl.sbuf)
        red = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.range_select(
            dst=sel, on_true_tile=src, comp_op0=getattr(nl, op0), comp_op1=getattr(nl, op1), bound0=b0, bound1=b1,
            reduce_op=nl.maximum, reduce_res=red, range_start=start, on_false_value=FP32_MIN,
        )
        nisa.dma_copy(dst=out, src=sel)
        nisa.dma_copy(dst=mx, src=red)
        return out, mx

    return kernel


def _bounds(p: int, f: int) -> tuple[np.ndarray, np.ndarray]:
    lo = RNG.integers(-4, f, (p, 1)).astype(np.float32)
    return lo, (lo + RNG.integers(1, f, (p, 1))).astype(np.float32)


@pytest.mark.parametrize(
    "op0,op1,start,via_psum",
    [("greater_equal", "less", 0, False), ("greater", "less_equal", 37, True), ("equal", "greater_equal", 5, False),
     ("less_equal", "greater", -3, True)],
)  # fmt: skip
def test_range_select_matches_numpy(op0: str, op1: str, start: int, via_psum: bool) -> None:
    x = RNG.standard_normal((128, 96)).astype(np.float32)
    lo, hi = _bounds(128, 96)
    out, mx = nki.simulate(make_kernel(op0, op1, start, via_psum, nl.float32))(x, lo, hi)
    want, want_max = reference(x, lo, hi, op0, op1, start)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(mx, want_max)


def test_range_select_bf16_output_rounds_the_fill_to_minus_inf() -> None:
    # the documented behaviour: FP32_MIN downcast to bf16 becomes -inf; the fp32 reduce keeps FP32_MIN
    x = RNG.standard_normal((64, 40)).astype(ml_dtypes.bfloat16)
    lo = np.full((64, 1), 10, np.float32)
    hi = np.full((64, 1), 20, np.float32)
    out, mx = nki.simulate(make_kernel("greater_equal", "less", 0, False, nl.bfloat16))(x, lo, hi)
    want, want_max = reference(x, lo, hi, "greater_equal", "less", 0)
    np.testing.assert_array_equal(out.astype(np.float32), want.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert np.isneginf(out.astype(np.float32)[:, :10]).all()
    np.testing.assert_array_equal(mx, want_max)


def test_range_select_is_a_gen3_instruction() -> None:
    kernel = make_kernel("greater_equal", "less", 0, False, nl.float32)
    x, (lo, hi) = np.zeros((128, 8), np.float32), _bounds(128, 8)
    with pytest.raises(NkiError, match=r"nisa.range_select is not available on gen2.*gen3 or newer") as e:
        nki.jit(kernel.func, platform_target="trn1").trace(x, lo, hi)
    assert e.value.file == __file__


@pytest.mark.parametrize(
    "change,match",
    [({"comp_op0": "add"}, "comp_op0 must be one of"), ({"bound_dtype": "bfloat16"}, "'bound0' must be float32"),
     ({"reduce_op": "add"}, "reduce_op must be nl.maximum"), ({"bound_cols": 2}, r"'bound0' must be a \(128, 1\)")],
)  # fmt: skip
def test_range_select_validation_names_the_line(change: dict, match: str) -> None:
    @nki.jit
    def bad(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, change.get("bound_cols", 1)), dtype=getattr(nl, change.get("bound_dtype", "float32")))
        nisa.range_select(dst=xs, on_true_tile=xs, comp_op0=getattr(nl, change.get("comp_op0", "less")),  # E-rs
                          comp_op1=nl.less, bound0=b, bound1=b, reduce_op=getattr(nl, change.get("reduce_op", "maximum")))
        return out

    with pytest.raises(NkiError, match=match) as e:
        bad.trace(np.zeros((128, 16), np.float32))
    assert e.value.file == __file__
    assert e.value.line == next(n for n, t in enumerate(open(__file__), 1) if t.rstrip().endswith("# E-rs"))


def test_declared_role_rules_apply_to_every_instruction() -> None:
    """``_record`` checks what the declaration says of each role (memories, (P, 1) scalars) for any instruction,
    so a new instruction gets those errors without restating them."""
    from nkic.frontend.recorders.record import _declared_role
    from nkic.target.instructions import INSTRUCTIONS

    @nki.jit
    def probe(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        tile = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.psum)
        spec = INSTRUCTIONS["range_select"]
        with pytest.raises(NkiError, match=r"'bound0' must be a \(128, 1\) tile"):
            _declared_role("range_select", spec.role("bound0"), tile, tile)
        with pytest.raises(NkiError, match="'dst' must be in PSUM, not sbuf"):
            _declared_role("matmul", INSTRUCTIONS["matmul"].role("dst"), nl.ndarray((128, 4), nl.float32), None)
        return out

    probe.trace(np.zeros((128, 4), np.float32))
