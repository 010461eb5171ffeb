"""Every frontend validation error names the user's file:line."""

from __future__ import annotations

import numpy as np
import pytest

import nkic.frontend.isa as nisa
import nkic.frontend.language as nl
from nkic.frontend.errors import NkiError
from nkic.frontend.tracer import TensorSpec, jit

A = np.zeros((128, 512), np.float32)


def line_of(marker: str) -> int:
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# {marker}"):
                return n
    raise AssertionError(marker)


def expect(kernel_fn, marker: str, match: str, *args: object) -> NkiError:
    with pytest.raises(NkiError, match=match) as e:
        jit(kernel_fn).trace(*(args or (A,)))
    assert str(e.value).startswith(f"{__file__}:{line_of(marker)}: error: "), str(e.value)
    return e.value


def out_like(x):
    return nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)


# -- dynamic control flow -----------------------------------------------------------------------------------
def k_if(x):
    t = nl.ndarray((128, 512), x.dtype)
    if t > 0:  # E-if
        pass
    return out_like(x)


def k_while(x):
    t = nl.ndarray((128, 512), x.dtype)
    while t != 0:  # E-while
        break
    return out_like(x)


def k_compare(x):
    ok = x < 3  # E-compare
    return out_like(x) if ok else None


@pytest.mark.parametrize("fn,marker", [(k_if, "E-if"), (k_while, "E-while"), (k_compare, "E-compare")])
def test_dynamic_control_flow(fn, marker) -> None:
    expect(fn, marker, "dynamic control flow on a tensor is not supported; use nisa.affine_select / static bounds")


# -- shapes and limits --------------------------------------------------------------------------------------
def k_partitions(x):
    nl.ndarray((256, 512), x.dtype, buffer=nl.psum)  # E-partitions
    return out_like(x)


def test_partition_dim_limit() -> None:
    expect(k_partitions, "E-partitions", "Size of partition dimension 256 exceeds architecture limitation of 128")


def _mm(dst_shape, st_shape, mv_shape, dst_buf=nl.psum, in_buf=nl.sbuf):
    def k(x):
        dst = nl.ndarray(dst_shape, nl.float32, buffer=dst_buf)
        st = nl.ndarray(st_shape, nl.float32, buffer=in_buf)
        mv = nl.ndarray(mv_shape, nl.float32, buffer=in_buf)
        nisa.nc_matmul(dst, st, mv)  # E-matmul
        return out_like(x)

    return k


@pytest.mark.parametrize(
    "case,match",
    [
        (((128, 512), (128, 256), (128, 512)), r"matmul limits exceeded on gen3: K=128 \(max 128\), M=256"),
        (((128, 1024), (128, 128), (128, 1024)), r"N=1024 \(max 512\)"),
        (((128, 512), (128, 128), (64, 512)), "partition count mismatch"),
        (((128, 256), (128, 128), (128, 512)), "does not match the"),
    ],
)
def test_matmul_limits(case, match) -> None:
    expect(_mm(*case), "E-matmul", match)


def test_matmul_memories() -> None:
    expect(_mm((128, 512), (128, 128), (128, 512), dst_buf=nl.sbuf), "E-matmul", "'dst' must be in PSUM")
    expect(_mm((128, 512), (128, 128), (128, 512), in_buf=nl.psum), "E-matmul", "'stationary' must be in SBUF")


def k_bank(x):
    p = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)
    s = nl.ndarray((128, 1024), nl.float32)
    nisa.tensor_copy(p[:, 0:512], s[:, 0:512])  # a bank-sized view is fine
    nisa.tensor_copy(p, s)  # E-bank
    return out_like(x)


def test_psum_bank_limit() -> None:
    expect(k_bank, "E-bank", "PSUM tile 'dst' needs 4096 bytes per partition, more than one 2048-byte bank")


def k_mismatch(x):
    a = nl.ndarray((128, 512), x.dtype)
    b = nl.ndarray((64, 512), x.dtype)
    nisa.tensor_tensor(a, a, b, op=nl.add)  # E-mismatch
    return out_like(x)


def test_partition_mismatch() -> None:
    expect(k_mismatch, "E-mismatch", "partition count mismatch: 'dst' has 128 partitions, 'data2' has 64")


def k_dma_count(x):
    t = nl.ndarray((128, 256), x.dtype)
    nisa.dma_copy(t, x)  # E-dma
    return out_like(x)


def test_dma_element_count() -> None:
    expect(k_dma_count, "E-dma", "element count mismatch: dst has 32768 elements, src has 65536")


# -- kernel interface ---------------------------------------------------------------------------------------
def k_sbuf_out(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)  # E-output-alloc
    nisa.dma_copy(out, x)
    return out  # E-output


def k_int_out(x):
    out = out_like(x)
    if x.shape[0] > 1:
        return 3  # E-int-output
    return out


def test_output_not_shared_hbm() -> None:
    """An error about what a kernel returns is at the return line, with the allocation line as a note."""
    e = expect(k_sbuf_out, "E-output", "The input and output tensor of a NKI kernel must be in shared_hbm address")
    assert "buffer=nl.shared_hbm" in str(e)
    assert f"note: 'out' is allocated at {__file__}:{line_of('E-output-alloc')}" in str(e), str(e)
    expect(k_int_out, "E-int-output", "kernel 'k_int_out' returned a int")


def test_unsupported_input_dtype() -> None:
    with pytest.raises(NkiError, match="unsupported dtype 'float64' for kernel argument 'x'") as e:
        jit(k_sbuf_out).trace(np.zeros((128, 512)))  # E-float64
    assert str(e.value).startswith(f"{__file__}:{line_of('E-float64')}:")


def k_bad_act(x):
    t = nl.ndarray((128, 512), x.dtype)
    nisa.activation(t, op=nl.add, data=t)  # E-act
    return out_like(x)


def k_bad_alu(x):
    t = nl.ndarray((128, 512), x.dtype)
    nisa.tensor_tensor(t, t, t, op=nl.exp)  # E-alu
    return out_like(x)


def test_unsupported_ops() -> None:
    expect(k_bad_act, "E-act", "unsupported activation function 'add'")
    expect(k_bad_alu, "E-alu", "unsupported ALU operation 'exp'")


def k_float_bound(x):
    for _ in nl.affine_range(2.5):  # E-bound
        pass
    return out_like(x)


def test_loop_bounds_must_be_int() -> None:
    expect(k_float_bound, "E-bound", "loop bounds must be int")


def k_escaped(x):
    out = out_like(x)
    for i in nl.affine_range(2):
        view = x[:, nl.ds(i * 128, 128)]
    t = nl.ndarray((128, 128), x.dtype)
    nisa.dma_copy(t, view)  # E-escaped
    return out


def test_loop_variable_outside_loop() -> None:
    expect(k_escaped, "E-escaped", "used outside its loop")


def test_outside_kernel_error_location() -> None:
    with pytest.raises(NkiError) as e:
        nl.zeros((128, 1), nl.float32)  # E-outside
    assert str(e.value).startswith(f"{__file__}:{line_of('E-outside')}: error: nki API called outside of an NKI kernel")


def k_bad_kwarg(x):
    t = nl.ndarray((128, 512), x.dtype)
    nisa.memset(t, 0.0, dtype=nl.float32, name="fill")  # stray keywords are tolerated
    nisa.tensor_copy(t)  # E-signature
    return out_like(x)


def test_bad_call_signature() -> None:
    expect(k_bad_kwarg, "E-signature", "bad call of isa.tensor_copy")


def test_the_two_fp8_e4m3_dtypes_differ_as_the_hardware_generations_do() -> None:
    # float8_e4m3 (NeuronCore v2/v3): IEEE-style, max 240, overflow to inf; float8_e4m3fn (OCP, v4): max 448, no inf.
    from nkic.target.vocab import numpy_dtype

    e4m3, e4m3fn = numpy_dtype("float8_e4m3"), numpy_dtype("float8_e4m3fn")
    assert float(np.float32(240).astype(e4m3)) == 240 and np.isinf(np.float32(-3.4e38).astype(e4m3).astype(np.float32))
    assert float(np.float32(448).astype(e4m3fn)) == 448


def test_a_modern_kernel_cannot_return_an_on_chip_tile() -> None:
    # (the legacy surface hands a returned tile back through an HBM copy: tests/unit/test_legacy.py)
    @jit
    def kernel(a):
        return nl.load(a)

    with pytest.raises(NkiError, match="must be in shared_hbm address space"):
        kernel.trace(TensorSpec((4, 4), "float32"))
