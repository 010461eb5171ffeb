"""``nl.shared_constant``: constant tensors embedded in the NEFF (``const`` variables) and loaded into HBM before the
kernel runs; through every layer (penguin ``data``, bir ``constant`` memloc, isa ``file`` var, NEFF member)."""

from __future__ import annotations

import dataclasses
import io
import tarfile

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()

import nki  # noqa: E402
import nki.language as nl  # noqa: E402

from nkic.compiler.driver import compile_traced, run_neff  # noqa: E402
from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.runtime.neff import HEADER_SIZE, NeffFormatError, read_neff  # noqa: E402

RNG = np.random.default_rng(11)


def _plus_constant(values: object):
    @nki.jit
    def kernel(a):
        c = nl.shared_constant(values)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(c), dtype=a.dtype))
        return out

    return kernel


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16, np.int32, np.uint8, np.int16])
def test_constant_reaches_the_kernel_bit_exactly(dtype) -> None:
    values = (RNG.standard_normal((64, 96)) * 20).astype(dtype)
    a = np.zeros((64, 96), dtype)
    got = nki.simulate(_plus_constant(values))(a)
    np.testing.assert_array_equal(got, values)


def test_npy_path_and_one_dimensional_constant(tmp_path) -> None:
    values = RNG.standard_normal(128).astype(np.float32)
    path = tmp_path / "row.npy"
    np.save(path, values)

    @nki.jit
    def kernel(a):
        c = nl.shared_constant(str(path))
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 128), nl.float32)
        nki.isa.dma_copy(dst=t, src=c.reshape((1, 128)))
        nl.store(out, nl.add(nl.load(a), t))
        return out

    a = RNG.standard_normal((1, 128)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel)(a), a + values[None, :])


def test_same_contents_are_one_variable_and_lnc2_programs_share_it() -> None:
    values = RNG.standard_normal((32, 16)).astype(np.float32)

    @nki.jit
    def kernel(a):
        c1, c2 = nl.shared_constant(values), nl.shared_constant(values.copy())
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(c1), nl.load(c2)))
        return out

    a = np.zeros((32, 16), np.float32)
    traced = kernel[2].trace(a)
    neff = read_neff(compile_traced(traced).neff)
    consts = [v for v in neff.variables if v.kind == "file"]
    assert len(consts) == 1 and consts[0].data == values.tobytes()
    np.testing.assert_array_equal(run_neff(compile_traced(traced).neff, {"a": a}).outputs[traced.outputs[0][0]],
                                  2 * values)  # fmt: skip


def test_constants_survive_every_carrier_format() -> None:
    values = RNG.standard_normal((16, 8)).astype(np.float32)
    traced = _plus_constant(values).trace(np.zeros((16, 8), np.float32))
    for fmt in ("bir", "klir"):  # FORM B (BIR JSON) and the KLIR binary carrier
        variant = dataclasses.replace(traced, options=dataclasses.replace(traced.options, carrier_format=fmt))
        out = run_neff(compile_traced(variant).neff, {"a": np.ones((16, 8), np.float32)}).outputs
        np.testing.assert_array_equal(out[traced.outputs[0][0]], values + 1)


def _members(neff: bytes) -> dict[str, bytes]:
    import gzip

    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(neff[HEADER_SIZE:]))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def test_neff_member_holds_the_bytes_and_the_reader_checks_it() -> None:
    values = np.arange(12, dtype=np.int32).reshape(3, 4)
    neff = compile_traced(_plus_constant(values).trace(np.zeros((3, 4), np.int32))).neff
    members = _members(neff)
    (name,) = [m for m in members if m.startswith("const/")]
    assert members[name] == values.tobytes()
    assert read_neff(neff).variables  # well formed


@pytest.mark.parametrize("corrupt", ["drop", "short", "orphan"])
def test_corrupt_constant_members_are_neff_format_errors(corrupt: str) -> None:
    from nkic.runtime import neff as neff_mod

    values = np.arange(12, dtype=np.int32).reshape(3, 4)
    parsed = read_neff(compile_traced(_plus_constant(values).trace(np.zeros((3, 4), np.int32))).neff)
    members = neff_mod._members(parsed)
    (name,) = [m for m in members if m.startswith("const/")]
    if corrupt == "drop":
        del members[name]
    elif corrupt == "short":
        members[name] = members[name][:-1]
    else:
        members["const/v999.bin"] = b"\0"
    payload = neff_mod._gzip(neff_mod._tar(members))  # re-signed: the header hash matches the new payload
    with pytest.raises(NeffFormatError, match="file variable|const/"):
        read_neff(neff_mod._header(parsed, payload) + payload)


def test_errors_at_the_users_line(tmp_path) -> None:
    with pytest.raises(NkiError, match=r"test_shared_constant.py:\d+: error: nl.shared_constant needs a numpy array"):
        _plus_constant([1.0, 2.0]).trace(np.zeros((1, 2), np.float32))
    with pytest.raises(NkiError, match=r"test_shared_constant.py:\d+: error: .*cannot read"):
        _plus_constant(str(tmp_path / "missing.npy")).trace(np.zeros((1, 2), np.float32))
    with pytest.raises(NkiError, match="unsupported dtype 'float64'"):
        _plus_constant(np.zeros((1, 2))).trace(np.zeros((1, 2), np.float32))

    @nki.jit
    def returns_constant(a):
        return nl.shared_constant(np.ones((2, 2), np.float32))

    with pytest.raises(NkiError, match=r"test_shared_constant.py:\d+: error: kernel 'returns_constant' returns the "):
        returns_constant.trace(np.zeros((2, 2), np.float32))
