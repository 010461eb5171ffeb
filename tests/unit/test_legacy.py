"""The legacy ``neuronxcc.nki`` surface: value-returning ``nisa`` signatures, the legacy ``nl`` differences, explicit
allocations and the migration warnings, each compiled and simulated against numpy (no index grids: those are tested
with the grid module)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import nkic

nkic.install_nki_alias()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.compiler as ncc  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.frontend.legacy import migration  # noqa: E402

RNG = np.random.default_rng(21)


@pytest.fixture(autouse=True)
def quiet_legacy():
    """Legacy warnings are silenced except in the tests that check them (which set their own action)."""
    migration.set_action("ignore")
    migration.reset()
    yield
    migration.set_action(None)
    migration.reset()


def _out(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.hbm)  # legacy: nl.hbm outputs
    nl.store(out, t)
    return out


# -- value-returning instructions ---------------------------------------------------------------------------
def test_nc_matmul_returns_an_fp32_psum_tile() -> None:
    @nki.jit
    def kernel(a, b):
        c = nisa.nc_matmul(nl.load(a), nl.load(b))
        assert c.buffer == nl.psum and c.dtype == "float32" and c.shape == (64, 256)
        return _out(c)

    a = RNG.standard_normal((128, 64)).astype(np.float32)
    b = RNG.standard_normal((128, 256)).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b), a.T @ b, rtol=1e-4, atol=1e-4)


def test_psum_accumulation_with_plus_equals() -> None:
    @nki.jit
    def kernel(a, b):
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            acc += nisa.nc_matmul(nl.load(a[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, :]))
        return _out(acc)

    a = RNG.standard_normal((256, 128)).astype(np.float32)
    b = RNG.standard_normal((256, 512)).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b), a.T @ b, rtol=1e-4, atol=1e-3)


def test_operators_stay_an_error_in_modern_kernels() -> None:
    import nki as modern_nki

    source = ("def kernel(a):\n    t = nl.load(a)\n    t += nl.load(a)\n"
              "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n    nl.store(out, t)\n"
              "    return out\n")  # fmt: skip
    scope = {"nl": modern_nki.language}  # a module that imports nki, not neuronxcc.nki
    exec(compile(source, "modern_kernel.py", "exec"), scope)
    with pytest.raises(NkiError, match="arithmetic operators on tensors are not supported"):
        modern_nki.jit(scope["kernel"])(np.ones((128, 8), np.float32))


@pytest.mark.parametrize("shape,engine,buffer", [((32, 16), None, "sbuf"), ((128, 64), None, "psum"),
                                                 ((128, 64), "tensor", "psum"), ((16, 8), "vector", "sbuf")])
def test_nc_transpose_engine_and_result_buffer(shape, engine, buffer) -> None:
    @nki.jit
    def kernel(a):
        eng = {None: None, "tensor": nisa.tensor_engine, "vector": nisa.vector_engine}[engine]
        t = nisa.nc_transpose(nl.load(a), engine=eng)
        assert t.buffer == buffer and t.shape == shape[::-1]
        return _out(t)

    a = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(kernel(a), a.T)


def test_elementwise_results_and_dtypes() -> None:
    @nki.jit
    def kernel(a, b, c):
        x, y, z = nl.load(a), nl.load(b), nl.load(c)
        tt = nisa.tensor_tensor(x, y, op=nl.add)  # bf16 + fp32 -> fp32
        ts = nisa.tensor_scalar(x, np.subtract, 1.0, reverse0=True, dtype=nl.float32)
        act = nisa.activation(op=nl.exp, data=y, bias=z, scale=0.5)
        rec = nisa.reciprocal(y)
        cp = nisa.tensor_copy(y, dtype=nl.bfloat16)
        assert tt.dtype == "float32" and cp.dtype == "bfloat16" and act.buffer == nl.sbuf
        return _out(tt), _out(ts), _out(act), _out(rec), _out(cp)

    a = RNG.standard_normal((128, 32)).astype(ml_dtypes.bfloat16)
    b = (RNG.random((128, 32)) + 0.5).astype(np.float32)
    c = RNG.standard_normal((128, 1)).astype(np.float32)
    tt, ts, act, rec, cp = kernel(a, b, c)
    af = a.astype(np.float32)
    np.testing.assert_allclose(tt, af + b, rtol=1e-6)
    np.testing.assert_allclose(ts, 1.0 - af, rtol=1e-6)
    np.testing.assert_allclose(act, np.exp(0.5 * b + c), rtol=1e-5)
    np.testing.assert_allclose(rec, 1.0 / b, rtol=1e-6)
    np.testing.assert_array_equal(cp, b.astype(ml_dtypes.bfloat16))


def test_reductions_and_statistics_shapes() -> None:
    @nki.jit
    def kernel(a):
        x = nl.load(a)
        s = nisa.tensor_reduce(np.add, x, axis=[1])
        m = nisa.tensor_reduce(nl.maximum, x, axis=1, keepdims=True)
        p = nisa.tensor_partition_reduce(np.add, x)
        mv = nisa.bn_aggr(nisa.bn_stats(x, dtype=nl.float32))
        assert s.shape == (128, 1) and m.shape == (128, 1) and p.shape == (1, 64) and mv.shape == (128, 2)
        return _out(s), _out(m), _out(p), _out(mv)

    a = RNG.standard_normal((128, 64)).astype(np.float32)
    s, m, p, mv = kernel(a)
    np.testing.assert_allclose(s[:, 0], a.sum(axis=1), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(m[:, 0], a.max(axis=1))
    np.testing.assert_allclose(p[0], a.sum(axis=0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mv, np.stack([a.mean(axis=1), a.var(axis=1)], axis=1), rtol=1e-4, atol=1e-5)


def test_max8_find_index8_and_memset() -> None:
    @nki.jit
    def kernel(a):
        x = nl.load(a)
        top = nisa.max8(src=x)
        idx = nisa.nc_find_index8(data=x, vals=top)
        fill = nisa.memset(shape=(32, 8), value=3, dtype=nl.int32)
        assert idx.dtype == "uint32" and top.shape == (32, 8)
        return _out(top), _out(idx), _out(fill)

    a = RNG.permutation(32 * 64).reshape(32, 64).astype(np.float32)
    top, idx, fill = kernel(a)
    want = -np.sort(-a, axis=1)[:, :8]
    np.testing.assert_array_equal(top, want)
    np.testing.assert_array_equal(np.take_along_axis(a, idx.astype(np.int64), axis=1), want)
    np.testing.assert_array_equal(fill, np.full((32, 8), 3, np.int32))


def test_dual_form_dst_keyword_writes_into_dst_without_a_warning() -> None:
    migration.set_action("error")  # a legacy construct would fail: the modern form must not be one

    @nki.jit
    def kernel(a):
        x = nl.load(a)
        t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nisa.tensor_scalar(x, np.multiply, 2.0, dst=t)
        assert r is t
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = RNG.standard_normal((128, 16)).astype(np.float32)
    np.testing.assert_array_equal(kernel(a), 2 * a)


def test_dual_form_dtype_must_agree_with_dst() -> None:
    @nki.jit
    def kernel(a):
        x = nl.load(a)
        t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(x, dtype=nl.bfloat16, dst=t)
        return _out(t)

    with pytest.raises(NkiError, match="dtype=bfloat16 disagrees with dst's float32"):
        kernel(np.ones((128, 4), np.float32))


def test_select_reduce_reads_a_bool_predicate_as_uint8() -> None:
    @nki.jit
    def kernel(p, a):
        dst = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(dst=dst, predicate=nl.load(p), on_true=nl.load(a), on_false=-1.0)
        return _out(dst)

    p = RNG.integers(0, 2, (128, 32)).astype(np.bool_)
    a = RNG.standard_normal((128, 32)).astype(np.float32)
    np.testing.assert_array_equal(kernel(p, a), np.where(p, a, -1.0))


def test_dma_copy_dst_rmw_op_accumulates() -> None:
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        nisa.dma_copy(dst=out, src=nl.load(b), dst_rmw_op=np.add)
        return out

    a = RNG.standard_normal((128, 16)).astype(np.float32)
    b = RNG.standard_normal((128, 16)).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b), a + b, rtol=1e-6)


def test_iota_needs_an_index_expression() -> None:
    @nki.jit
    def scalar(a):
        return _out(nisa.iota(5, dtype=nl.int32))  # a scalar expression: its value in a (1, 1) tile

    @nki.jit
    def kernel(a):
        return _out(nisa.iota("5", dtype=nl.int32))

    np.testing.assert_array_equal(scalar(np.ones((1, 1), np.float32)), [[5]])
    with pytest.raises(NkiError, match="nisa.iota: expected an index expression of nl.arange / nl.mgrid, got str"):
        kernel(np.ones((1, 1), np.float32))


# -- legacy nl ----------------------------------------------------------------------------------------------
def test_hbm_output_is_shared_but_private_hbm_is_still_rejected() -> None:
    @nki.jit
    def hbm(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
        assert out.buffer == nl.shared_hbm
        nl.store(out, nl.load(a))
        return out

    @nki.jit
    def private(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.private_hbm)
        nl.store(out, nl.load(a))
        return out

    a = RNG.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_array_equal(hbm(a), a)
    np.testing.assert_array_equal(nki.simulate_kernel(nl_empty_like_kernel, a), a)
    with pytest.raises(NkiError, match="must be in shared_hbm"):
        private(a)


def nl_empty_like_kernel(a):
    b = nl.empty_like(a, buffer=nl.hbm)
    nl.store(b, value=nl.load(a))
    return b


def test_rand_defaults_to_float32_and_store_of_a_number_fills() -> None:
    @nki.jit
    def kernel(a):
        r = nl.rand((32, 128))
        assert r.dtype == "float32"
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, 100)
        return _out(r), out

    r, filled = kernel(np.zeros((128, 4), np.int32))
    assert r.dtype == np.float32 and np.all((r >= 0) & (r < 1)) and len(np.unique(r)) > 1000
    np.testing.assert_array_equal(filled, np.full((128, 4), 100, np.int32))


def test_loop_reduce_accumulates_over_the_loop_and_restarts_per_outer_iteration() -> None:
    @nki.jit
    def kernel(a):
        out = nl.ndarray((2, 128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            for k in nl.affine_range(3):
                acc = nl.loop_reduce(nl.load(a[i, k]), op=np.add, loop_indices=[k], dtype=nl.float32)
            nl.store(out[i], acc)
        return out

    a = RNG.standard_normal((2, 3, 128, 16)).astype(np.float32)
    np.testing.assert_allclose(kernel(a), a.sum(axis=1), rtol=1e-5, atol=1e-6)


def test_sbuf_and_psum_allocations_are_real_placements() -> None:
    def psum_func(idx, pdim_size, fdim_size):
        return (1, 0, 0)  # bank 1, partition 0, byte 0

    @nki.jit
    def kernel(a):
        x = nl.ndarray((128, 64), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=1024))
        assert x.storage.address == (0, 1024)
        x[...] = nl.load(a)
        p = nl.ndarray((64, 128), dtype=nl.float32, buffer=ncc.psum.alloc(psum_func))
        assert p.storage.address == (0, 2048)
        q = nl.ndarray((64, 128), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=2))
        assert q.storage.address == (0, 4096)
        p[...] = nisa.nc_transpose(x, engine=nisa.tensor_engine)
        return _out(p)

    a = RNG.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(kernel(a), a.T)


def test_psum_allocation_must_stay_in_its_bank() -> None:
    @nki.jit
    def kernel(a):
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=0, base_addr=64))
        return _out(t)

    with pytest.raises(NkiError, match="partial bank allocation is not allowed"):
        kernel(np.ones((1, 1), np.float32))


# -- migration warnings -------------------------------------------------------------------------------------
def _two_calls(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for _ in nl.static_range(2):  # the same line twice: one warning
        t = nisa.tensor_copy(nl.load(a))
    nl.store(out, t)
    return out


_CALL_LINE = _two_calls.__code__.co_firstlineno + 3


def test_one_warning_per_site_naming_file_line_and_modern_spelling() -> None:
    migration.set_action("default")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nki.jit(_two_calls)(np.ones((128, 4), np.float32))
        nki.jit(_two_calls)(np.ones((128, 8), np.float32))  # a new trace of the same site: still one
    legacy = [w for w in caught if issubclass(w.category, migration.NkiLegacyWarning)]
    assert len(legacy) == 1, [str(w.message) for w in legacy]
    w = legacy[0]
    assert (w.filename, w.lineno) == (__file__, _CALL_LINE)
    assert "nisa.tensor_copy(dst=<tile>, src=)" in str(w.message)


def test_jit_mode_warns_at_the_decorator() -> None:
    migration.set_action("default")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        nki.jit(_two_calls, mode="simulation")
    (w,) = [w for w in caught if issubclass(w.category, migration.NkiLegacyWarning)]
    assert w.lineno == line and "nki.simulate(kernel)" in str(w.message)


def test_error_action_fails_at_the_kernel_line_and_ignore_is_silent() -> None:
    migration.set_action("error")
    with pytest.raises(NkiError, match=rf"{Path(__file__).name}:{_CALL_LINE}: error: legacy construct "
                                       r"nisa.tensor_copy\(...\) returning a new tile"):  # fmt: skip
        nki.jit(_two_calls)(np.ones((128, 4), np.float32))
    migration.set_action("ignore")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nki.jit(_two_calls)(np.ones((128, 2), np.float32))


def test_environment_variable_and_switch_parsing(monkeypatch) -> None:
    migration.set_action(None)
    monkeypatch.setenv(migration.ENV, "error")
    assert migration.action() == "error"
    monkeypatch.setenv(migration.ENV, "loud")
    with pytest.raises(NkiError, match="NKIC_LEGACY='loud'"):
        migration.action()
    assert migration.parse_switch("nki-legacy=ignore") == "ignore"
    with pytest.raises(ValueError):
        migration.parse_switch("nki-legacy=maybe")


def test_python_m_nkic_W_switch(tmp_path) -> None:
    script = tmp_path / "legacy_kernel.py"
    script.write_text(
        "import numpy as np\nimport neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n"
        "import neuronxcc.nki.isa as nisa\n\n@nki.jit\ndef k(a):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)\n"
        "    nl.store(out, nisa.reciprocal(nl.load(a)))\n    return out\n\n"
        "print(k(np.full((128, 4), 2.0, np.float32))[0, 0])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(nkic.__file__).resolve().parents[1])}
    env.pop(migration.ENV, None)
    run = [sys.executable, "-m", "nkic"]
    strict = subprocess.run([*run, "-W", "nki-legacy=error", str(script)], capture_output=True, text=True, env=env)
    assert strict.returncode == 1 and "legacy_kernel.py:9: error: legacy construct nisa.reciprocal" in strict.stderr
    quiet = subprocess.run([*run, "-Wnki-legacy=ignore", str(script)], capture_output=True, text=True, env=env)
    assert quiet.returncode == 0 and quiet.stdout.strip() == "0.5" and "Warning" not in quiet.stderr
    loud = subprocess.run([*run, str(script)], capture_output=True, text=True, env=env)
    assert loud.returncode == 0 and "legacy_kernel.py:9: NkiLegacyWarning" in loud.stderr


def test_nc_stream_shuffle_takes_the_legacy_argument_order() -> None:
    @nki.jit
    def kernel(a):
        x = nl.load(a)
        y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(x, y, [31 - i for i in range(32)])  # (src, dst, shuffle_mask) positionally
        return _out(y)

    a = RNG.standard_normal((32, 16)).astype(np.float32)
    np.testing.assert_array_equal(kernel(a), a[::-1])


def test_atomic_rmw_adds_into_hbm_and_rejects_other_ops() -> None:
    @nki.jit
    def kernel(a, b, op):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        nl.atomic_rmw(out, nl.load(b), op=op)
        return out

    a = RNG.standard_normal((128, 8)).astype(np.float32)
    b = RNG.standard_normal((128, 8)).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b, np.add), a + b, rtol=1e-6)
    with pytest.raises(NkiError, match="reduce_op must be nl.add"):
        kernel(a, b, np.multiply)


def test_an_instruction_mask_warns_and_is_passed_on() -> None:
    migration.set_action("default")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @nki.jit
        def kernel(a):
            return _out(nisa.tensor_copy(nl.load(a), mask=object()))

        with pytest.raises(NkiError, match="mask"):  # the modern function decides (nkic's grid module makes it real)
            kernel(np.ones((128, 4), np.float32))
    assert any("mask= on an instruction" in str(w.message) for w in caught)


def test_legacy_tiles_have_arithmetic_operators() -> None:
    @nki.jit
    def kernel(a, b):
        x, y = nl.load(a), nl.load(b)
        s = x + y
        s += 1.0
        return _out(s), _out(2.0 * x - y / 4.0), _out(-x), _out(10.0 - y)

    a = RNG.standard_normal((128, 16)).astype(np.float32)
    b = RNG.standard_normal((128, 16)).astype(np.float32)
    s, e, n, r = kernel(a, b)
    np.testing.assert_allclose(s, a + b + 1.0, rtol=1e-6)
    np.testing.assert_allclose(e, 2.0 * a - b / 4.0, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(n, -a)
    np.testing.assert_allclose(r, 10.0 - b, rtol=1e-6)


def test_legacy_isa_is_a_superset_and_its_value_returning_calls_take_dst() -> None:
    import inspect

    import nki.isa as modern

    from nkic.frontend.unsupported import is_unsupported

    public = [n for n in vars(modern) if not n.startswith("_") and callable(getattr(modern, n))]
    assert all(not is_unsupported(getattr(nisa, n)) for n in public)
    legacy_own = [n for n in public
                  if getattr(nisa, n) is not getattr(modern, n) and hasattr(getattr(nisa, n), "__nki_impl__")]
    assert {"nc_matmul", "activation", "memset", "iota", "tensor_reduce", "max8", "local_gather"} <= set(legacy_own)
    for n in legacy_own:
        assert "dst" in inspect.signature(getattr(nisa, n).__nki_impl__).parameters, n


def test_a_returned_on_chip_tile_is_handed_back_through_a_new_hbm_output() -> None:
    @nki.jit
    def kernel(a):
        t = nl.exp(nl.load(a))
        return t, nl.copy(t)  # SBUF tiles: the legacy simulator returned their values

    a = RNG.standard_normal((8, 16)).astype(np.float32)
    migration.set_action("default")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = kernel(a)
    np.testing.assert_allclose(first, np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(second, np.exp(a), rtol=1e-6)
    assert any("returning an on-chip tile" in str(w.message) for w in caught)

