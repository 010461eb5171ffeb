"""Issue 26, "the kernels people actually wrote": each construct public NKI kernels use that nkic used to reject,
written the way those kernels write it, compiled, simulated and checked against numpy.

The module-level kernels are legacy (this module imports ``neuronxcc.nki``, which is how nkic tells a legacy kernel);
the ``import nki`` kernels are written to a file of their own by :func:`modern` and imported from there.
"""

from __future__ import annotations

import importlib.util
import itertools
import textwrap
import warnings
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkic.frontend.errors import NkiError  # noqa: E402
from nkic.frontend.legacy import migration  # noqa: E402

RNG = np.random.default_rng(26)
_MODULES = itertools.count()


@pytest.fixture(autouse=True)
def quiet_legacy():
    """Legacy warnings are silenced except in the tests that check them (which set their own action)."""
    migration.set_action("ignore")
    migration.reset()
    yield
    migration.set_action(None)
    migration.reset()


def modern(tmp_path: Path, source: str) -> ModuleType:
    """The module of ``source`` (after ``import nki`` and its ``nl``/``nisa``), from a file of its own: a kernel
    there is a modern one, and its errors name that file's lines."""
    path = tmp_path / f"modern_{next(_MODULES)}.py"
    path.write_text("import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n" + textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def line_of(path: str, text: str) -> int:
    """The 1-based line of the first line of ``path`` containing ``text``."""
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in {path}")


def rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-2.0, 2.0, shape).astype(np.float32)


# -- 1. the tile method t.broadcast_to(shape) ------------------------------------------------------------------
def test_legacy_tile_broadcast_to_partition_row() -> None:
    """The LayerNorm tutorial's form: one row of an HBM tensor loaded as a (1, F) tile, broadcast to 128 partitions."""

    @nki.jit
    def add_row(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
        t = nl.load(a)
        s = nl.add(t, nl.load(b[0:1, 0:64]).broadcast_to((128, 64)))
        nl.store(out, s)
        return out

    a, b = rand(128, 64), rand(4, 64)
    np.testing.assert_array_equal(add_row(a, b), a + b[0:1])


def test_legacy_tile_broadcast_to_warns_with_the_modern_spelling() -> None:
    @nki.jit
    def column(a):
        out = nl.ndarray((128, 32), dtype=a.dtype, buffer=nl.hbm)
        nl.store(out, nl.load(a[:, 0:1]).broadcast_to(shape=(128, 32)))
        return out

    migration.set_action("default")
    a = rand(128, 8)
    with pytest.warns(migration.NkiLegacyWarning, match=r"nl\.broadcast_to\(t, shape=shape\)"):
        got = column(a)
    np.testing.assert_array_equal(got, np.repeat(a[:, 0:1], 32, axis=1))


def test_modern_tile_broadcast_to_and_broadcast(tmp_path: Path) -> None:
    module = modern(tmp_path, """
        @nki.jit
        def kernel(a, b):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            row = nl.load(b[0:1, 0:64]).broadcast_to((128, 64))          # partition broadcast: a new tile
            col = nl.load(b[0:128, 0:1])
            both = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=both, data1=row, data2=col.broadcast(1, 64), op=nl.multiply)  # a stride-0 view
            nl.store(out, nl.add(nl.load(a), both))
            return out
    """)
    a, b = rand(128, 64), rand(128, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", migration.NkiLegacyWarning)  # a modern kernel is not told about legacy
        got = module.kernel(a, b)
    np.testing.assert_allclose(got, a + b[0:1, :] * b[:, 0:1], rtol=1e-6)


def test_tile_broadcast_errors_name_the_kernel_line(tmp_path: Path) -> None:
    module = modern(tmp_path, """
        @nki.jit
        def bad_partition(a):
            out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.load(a[0:1, :]).broadcast(0, 128))
            return out

        @nki.jit
        def bad_shape(a):
            out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.load(a[0:2, :]).broadcast_to((128, 8)))
            return out
    """)
    a = rand(4, 8)
    with pytest.raises(NkiError, match=r"partition dim of an on-chip tensor cannot be broadcast") as bad:
        module.bad_partition(a)
    assert (bad.value.file, bad.value.line) == (module.__file__, line_of(module.__file__, ".broadcast(0, 128)"))
    with pytest.raises(NkiError, match=r"nl.broadcast_to: shapes \(2, 8\) and \(128, 8\) cannot be broadcast") as bad:
        module.bad_shape(a)
    assert (bad.value.file, bad.value.line) == (module.__file__, line_of(module.__file__, ".broadcast_to((128, 8))"))


# -- 2. rank-1 nl.load(bias[0:128]) -----------------------------------------------------------------------------
def test_rank1_load_is_a_partition_vector() -> None:
    """A 1-D bias slice loaded as one element per partition, then added to every column of its row, as the
    repositories' linear layers write it; the (128, 1) tile also stores back into a 1-D slice."""

    @nki.jit
    def bias_add(x, bias):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
        twice = nl.ndarray((256,), dtype=x.dtype, buffer=nl.hbm)
        for i in nl.affine_range(2):
            b = nl.load(bias[i * 128:(i + 1) * 128])
            assert b.shape == (128, 1)
            nl.store(out[i * 128:(i + 1) * 128, :], nl.add(nl.load(x[i * 128:(i + 1) * 128, :]), b))
            nl.store(twice[i * 128:(i + 1) * 128], nl.multiply(b, 2.0))
        return out, twice

    x, bias = rand(256, 96), rand(256)
    got, twice = bias_add(x, bias)
    np.testing.assert_array_equal(got, x + bias[:, None])
    np.testing.assert_array_equal(twice, 2 * bias)


def test_rank1_load_modern_and_a_scalar_element(tmp_path: Path) -> None:
    module = modern(tmp_path, """
        @nki.jit
        def kernel(x, bias):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            column = nl.load(bias[0:128])        # (128, 1)
            first = nl.load(bias[0])             # one element: (1, 1)
            shifted = nl.add(nl.load(x), column)
            nl.store(out, nl.subtract(shifted, nl.broadcast_to(first, (128, 1))))
            return out
    """)
    x, bias = rand(128, 64), rand(128)
    np.testing.assert_allclose(module.kernel(x, bias), x + bias[:, None] - bias[0], rtol=1e-6, atol=1e-6)


# -- 3. t.reshape(shape=...) ------------------------------------------------------------------------------------
def test_reshape_with_a_shape_keyword() -> None:
    """nki-samples' adaptive average pool flattens the image with ``reshape(shape=...)``, on HBM and on chip."""

    @nki.jit
    def row_means(img):
        c, h, w = img.shape
        out = nl.ndarray((c, h), dtype=img.dtype, buffer=nl.hbm)
        flat = nl.load(img.reshape(shape=(c, h * w)))            # an HBM view
        rows = flat.reshape(shape=[c, h, w])                      # an on-chip view
        nl.store(out.reshape(shape=(c, h, 1)), nl.mean(rows, axis=2, keepdims=True))
        return out

    img = rand(64, 8, 16)
    np.testing.assert_allclose(row_means(img), img.mean(axis=2), rtol=1e-5, atol=1e-6)


def test_reshape_shape_given_twice_is_an_error() -> None:
    @nki.jit
    def both(a):
        return nl.load(a).reshape((128, 2, 4), shape=(128, 8))

    with pytest.raises(NkiError, match="reshape: give the shape either positionally or as shape=, not both") as bad:
        both(rand(128, 8))
    assert bad.value.line == line_of(__file__, "shape=(128, 8))")


# -- 4. nl.range ------------------------------------------------------------------------------------------------
def test_nl_range_unrolls_like_python_range(tmp_path: Path) -> None:
    """nki-library's MX loader (``mxfp_load_utils.py``): nested ``nl.range`` loops whose indices build ``.ap``
    offsets; here each 256-column block is de-interleaved (even columns first, then odd). The index is a plain int,
    so it may also pick from a Python list."""
    module = modern(tmp_path, """
        @nki.jit
        def deinterleave(x):
            p, n = x.shape
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=src, src=x)
            dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            scale = [1.0, -1.0]
            for k in nl.range(n // 256):
                for s in nl.range(2):
                    assert isinstance(k, int) and isinstance(s, int)
                    strided = src.ap(pattern=[[n, p], [2, 128]], offset=k * 256 + s)
                    packed = dst.ap(pattern=[[n, p], [1, 128]], offset=k * 256 + s * 128)
                    nisa.activation(dst=packed, op=nl.copy, data=strided, scale=scale[s])
            nisa.dma_copy(dst=out, src=dst)
            return out
    """)
    x = rand(128, 512)
    want = np.concatenate([np.concatenate([x[:, b:b + 256:2], -x[:, b + 1:b + 256:2]], axis=1)
                           for b in (0, 256)], axis=1)
    np.testing.assert_array_equal(module.deinterleave(x), want)


# -- 5. language-level reductions over any free axes ------------------------------------------------------------
def test_legacy_pooling_reduces_non_trailing_axes() -> None:
    """The pooling tutorials' form: the image tile split into windows and reduced over the window axes, which are
    not the trailing free dims (``axis=(2, 4)`` of a rank-5 tile, ``axis=(1, 3)`` of a rank-4 tile)."""

    @nki.jit
    def pools(img):
        c, h, w = img.shape
        maxed = nl.ndarray((c, h // 2, w // 2), dtype=img.dtype, buffer=nl.hbm)
        summed = nl.ndarray((c, 4), dtype=img.dtype, buffer=nl.hbm)
        t = nl.load(img)
        windows = t.reshape((c, h // 2, 2, w // 2, 2))
        nl.store(maxed, nl.max(windows, axis=(2, 4)))
        quads = t.reshape((c, 2, 4, h * w // 8))
        nl.store(summed, nl.sum(quads, axis=(1, 3)))
        return maxed, summed

    img = rand(128, 8, 16)
    maxed, summed = pools(img)
    np.testing.assert_array_equal(maxed, img.reshape(128, 4, 2, 8, 2).max(axis=(2, 4)))
    np.testing.assert_allclose(summed, img.reshape(128, 2, 4, 16).sum(axis=(1, 3)), rtol=1e-5, atol=1e-5)


def test_modern_reductions_over_any_free_axes(tmp_path: Path) -> None:
    module = modern(tmp_path, """
        @nki.jit
        def stats(x):
            p, a, b = x.shape
            outs = []
            for name, fn in (("mean", nl.mean), ("min", nl.min), ("prod", nl.prod)):
                r = fn(nl.load(x), axis=1, keepdims=True)             # the middle axis: (p, 1, b)
                out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm, name=name)
                nl.store(out, r)
                outs.append(out)
            s = nl.softmax(nl.load(x), axis=1)
            out = nl.ndarray(s.shape, dtype=s.dtype, buffer=nl.shared_hbm, name="softmax")
            nl.store(out, s)
            return (*outs, out)
    """)
    x = RNG.uniform(0.5, 1.5, (64, 6, 10)).astype(np.float32)
    mean, low, prod, soft = module.stats(x)
    np.testing.assert_allclose(mean, x.mean(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_array_equal(low, x.min(axis=1, keepdims=True))
    np.testing.assert_allclose(prod, x.prod(axis=1, keepdims=True), rtol=1e-5)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(soft, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_nisa_tensor_reduce_keeps_the_trailing_axes_rule(tmp_path: Path) -> None:
    module = modern(tmp_path, """
        @nki.jit
        def kernel(x):
            t = nl.load(x)
            r = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=1)
            out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
            nl.store(out, r)
            return out
    """)
    with pytest.raises(NkiError, match=r"tensor_reduce: axes \(1,\) must be the trailing free axes") as bad:
        module.kernel(rand(128, 4, 8))
    assert bad.value.line == line_of(module.__file__, "nisa.tensor_reduce(")


# -- 6. the legacy decorators stacked on a kernel -----------------------------------------------------------------
def _doubled(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    nl.store(out, nl.multiply(nl.load(a), 2.0))
    return out


def test_jit_stacked_over_baremetal_and_benchmark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``@nki.jit`` over ``@nki.baremetal(...)``, ``@nki.baremetal`` over ``@nki.benchmark(...)``: each stack still
    runs the kernel, keeps every decorator's artifacts, and can be launched by ``simulate_kernel``."""

    @nki.jit
    @nki.baremetal(save_neff_name=str(tmp_path / "bm.neff"))
    def doubled(a):
        return _doubled(a)

    @nki.baremetal(save_neff_name=str(tmp_path / "bench.neff"))
    @nki.benchmark(warmup=2, iters=3)
    def benched(a):
        return _doubled(a)

    a = rand(128, 16)
    np.testing.assert_array_equal(doubled(a), 2 * a)
    assert (tmp_path / "bm.neff").stat().st_size > 0
    np.testing.assert_array_equal(nki.simulate_kernel(doubled, a), 2 * a)
    np.testing.assert_array_equal(benched(a), 2 * a)
    assert (tmp_path / "bench.neff").stat().st_size > 0
    assert benched.benchmark_result.nc_latency.get_latency_percentile(50) > 0
    assert "nki.benchmark benched" in capsys.readouterr().out
    assert (doubled.__name__, benched.__name__) == ("doubled", "benched")


def test_a_decorated_runner_called_from_a_kernel_is_inlined(tmp_path: Path) -> None:
    @nki.profile(working_directory=str(tmp_path), save_neff_name="p.neff", save_trace_name="p.json", overwrite=True)
    def inner(a):
        return _doubled(a)

    @nki.jit
    def outer(a):
        twice = inner(a)                 # a sub-kernel: traced into outer, no NEFF of its own
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
        nl.store(out, nl.add(nl.load(twice), 1.0))
        return out

    a = rand(128, 16)
    np.testing.assert_array_equal(outer(a), 2 * a + 1)
    assert not (tmp_path / "p.neff").exists()
    np.testing.assert_array_equal(nki.trace(inner)(a), 2 * a)   # and run on its own, it profiles
    assert (tmp_path / "p.neff").exists() and (tmp_path / "p.json").exists()


# -- 7. legacy nl.zeros / nl.full of a block tensor -------------------------------------------------------------
def test_block_tensor_fills_cover_every_block() -> None:
    """Accumulators allocated per block with ``nl.zeros((B, nl.par_dim(128), F))`` and constants with ``nl.full`` /
    ``nl.ones`` (two block dims), then updated and stored block by block."""

    @nki.jit
    def blocks(a):
        nb = a.shape[0]
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
        acc = nl.zeros((nb, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        five = nl.full((nb + 1, nl.par_dim(128), 64), 5.0, dtype=nl.float32, buffer=nl.sbuf)
        ones = nl.ones((2, nb, nl.par_dim(128), 64), dtype=nl.float32)
        for b in nl.affine_range(nb):
            acc[b] = nl.add(acc[b], nl.load(a[b]))
            acc[b] = nl.add(acc[b], five[b + 1])
            acc[b] = nl.subtract(acc[b], ones[1, b])
            nl.store(out[b], acc[b])
        return out

    a = RNG.uniform(-2.0, 2.0, (3, 128, 64)).astype(np.float32)
    np.testing.assert_array_equal(blocks(a), (a + np.float32(5.0)) - np.float32(1.0))


def test_block_tensor_fill_with_a_mask_is_an_error() -> None:
    @nki.jit
    def masked(a):
        i = nl.arange(128)[:, None]
        t = nl.zeros((2, nl.par_dim(128), 64), dtype=nl.float32, mask=(i < 64))
        return t

    with pytest.raises(NkiError, match=r"mask= on the fill of a block tensor") as bad:
        masked(rand(128, 64))
    assert bad.value.line == line_of(__file__, "mask=(i < 64))")


# -- 8. "did you mean" for unknown names and keywords -----------------------------------------------------------
def test_misspelt_names_suggest_the_api_name(tmp_path: Path) -> None:
    module = modern(tmp_path, """
        @nki.jit
        def typo(a):
            return nl.expp(nl.load(a))

        @nki.jit
        def isa_typo(a):
            t = nl.load(a)
            nisa.activaton(dst=t, op=nl.exp, data=t)
            return t
    """)
    a = rand(128, 8)
    with pytest.raises(NkiError, match=r"nki\.language\.expp is not an NKI name nkic knows\. did you mean nl\.exp\?"
                       ) as bad:  # fmt: skip
        module.typo(a)
    assert (bad.value.file, bad.value.line) == (module.__file__, line_of(module.__file__, "nl.expp("))
    with pytest.raises(NkiError, match=r"nki\.isa\.activaton is not an NKI name nkic knows\. did you mean "
                                       r"nisa\.activation") as bad:  # fmt: skip
        module.isa_typo(a)
    assert bad.value.line == line_of(module.__file__, "nisa.activaton(")


def test_legacy_misspelt_name_and_a_name_nothing_resembles() -> None:
    @nki.jit
    def grid_typo(a):
        i = nl.arang(128)[:, None]
        return nl.load(a[i, 0])

    @nki.jit
    def far(a):
        return nl.frobnicate(nl.load(a))

    with pytest.raises(NkiError, match=r"neuronxcc\.nki\.language\.arang is not an NKI name nkic knows\. did you "
                                       r"mean nl\.arange") as bad:  # fmt: skip
        grid_typo(rand(128, 8))
    assert bad.value.line == line_of(__file__, "nl.arang(128)")
    # No close name: maybe a real NKI name nkic lacks, so no suggestion and the old wording.
    with pytest.raises(NkiError, match=r"neuronxcc\.nki\.language\.frobnicate is not supported by nkic\. nkic "
                                       r"implements a subset"):  # fmt: skip
        far(rand(128, 8))


def test_misspelt_keyword_is_named_with_a_suggestion(tmp_path: Path) -> None:
    module = modern(tmp_path, """
        @nki.jit
        def kernel(a):
            t = nl.load(a)
            r = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
            nisa.activation(dst=r, op=nl.exp, dat=t)
            return r
    """)
    with pytest.raises(NkiError, match=r"bad call of isa\.activation: missing a required argument: 'data'\. "
                                       r"unknown keyword dat=: did you mean data=\?") as bad:  # fmt: skip
        module.kernel(rand(128, 8))
    assert (bad.value.file, bad.value.line) == (module.__file__, line_of(module.__file__, "dat=t)"))

    @nki.jit
    def legacy_kernel(a):
        return nl.exp(nl.load(a), dtyp=nl.float32)

    with pytest.raises(NkiError, match=r"nl\.exp: unknown keyword dtyp=\. did you mean dtype=\?") as bad:
        legacy_kernel(rand(128, 8))
    assert bad.value.line == line_of(__file__, "dtyp=nl.float32)")


# -- 9. nisa.iota of a scalar expression ------------------------------------------------------------------------
def test_legacy_iota_of_the_program_id_and_a_loop_index() -> None:
    """``head_id = nl.program_id(1)``; ``nisa.iota(head_id, dtype=nl.int32)``: the scalar as a (1, 1) tile, here
    added to that head's rows (and a loop index combined with it, which unrolls the loop)."""

    @nki.jit
    def shift_by_head(x):
        b, h = nl.program_id(0), nl.program_id(1)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
        head = nisa.iota(h, dtype=nl.int32)
        assert head.shape == (1, 1)
        shift = nl.broadcast_to(nl.copy(head, dtype=nl.float32), shape=(128, 16))
        for i in nl.affine_range(2):
            step = nisa.iota(i * 100 + h, dtype=nl.float32)
            cols = nl.add(nl.load(x[b, h, :, i * 16:(i + 1) * 16]), shift)
            nl.store(out[b, h, :, i * 16:(i + 1) * 16], nl.add(cols, nl.broadcast_to(step, shape=(128, 16))))
        return out

    x = rand(2, 3, 128, 32)
    want = x.copy()
    for h in range(3):
        want[:, h, :, :16] += 2 * h
        want[:, h, :, 16:] += 2 * h + 100
    np.testing.assert_allclose(nki.simulate_kernel(shift_by_head[2, 3], x), want, rtol=1e-6)


def test_legacy_iota_rejects_what_is_no_index() -> None:
    @nki.jit
    def bad(x):
        return nisa.iota(1.5, dtype=nl.int32)

    with pytest.raises(NkiError, match=r"nisa\.iota: expected an index expression of nl\.arange / nl\.mgrid, got "
                                       r"float") as err:  # fmt: skip
        bad(rand(128, 4))
    assert err.value.line == line_of(__file__, "nisa.iota(1.5,")


def test_legacy_broadcast_to_takes_src() -> None:
    """The legacy signature ``nl.broadcast_to(src, *, shape)`` spelled with keywords, as the docs' example does."""

    @nki.jit
    def spread(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.hbm)
        nl.store(out, nl.broadcast_to(src=nl.load(a), shape=(128, 64)))
        return out

    a = rand(1, 64)
    np.testing.assert_array_equal(spread(a), np.repeat(a, 128, axis=0))


# -- affine_select of matmul scores (PSUM) ------------------------------------------------------------------------
def _causal_scores(q_t: np.ndarray, k_t: np.ndarray, fill: float) -> np.ndarray:
    scores = q_t.T.astype(np.float64) @ k_t.astype(np.float64)
    keep = np.arange(scores.shape[0])[:, None] >= np.arange(scores.shape[1])[None, :]
    return np.where(keep, scores, fill).astype(np.float32)


def test_legacy_affine_select_of_psum_scores_keeps_the_reference_error() -> None:
    """The legacy attention form: the Qᵀ·K scores straight from ``nisa.nc_matmul`` (a PSUM tile) as the causal
    ``affine_select``'s ``on_true_tile``. The NKI ISA reference runs affine_select on GpSimd, which cannot access
    PSUM, and requires ``on_true_tile`` in SBUF: still an error, at the kernel's line, with the reference's reason
    and the copy that fixes it."""

    @nki.jit
    def causal(q_t, k_t):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.hbm)
        scores = nisa.nc_matmul(nl.load(q_t), nl.load(k_t))
        ip, jf = nl.mgrid[0:128, 0:128]
        masked = nisa.affine_select(pred=(ip >= jf), on_true_tile=scores[ip, jf], on_false_value=-9984.0)
        nl.store(out, masked)
        return out

    with pytest.raises(NkiError, match=r"affine_select: 'on_true_tile' must be in SBUF, not psum\. the NKI ISA "
                                       r"reference: nisa\.affine_select runs on the GpSimd engine, its tiles must be "
                                       r"in SBUF, and GpSimd cannot access PSUM .*copy the PSUM tile to SBUF first "
                                       r"with nisa\.tensor_copy") as bad:  # fmt: skip
        causal(rand(64, 128), rand(64, 128))
    assert bad.value.line == line_of(__file__, "on_true_tile=scores[ip, jf], on_false_value=-9984.0)")


def test_legacy_causal_mask_of_matmul_scores_copied_to_sbuf() -> None:
    """What the hint says, as nki-library's attention_cte does it: the scores copied out of PSUM
    (``nisa.tensor_copy``), then masked causally per key tile (``pred=(ip >= i_k * 128 + jf)``, the legacy flash
    attention's form), checked against numpy."""

    @nki.jit
    def causal(q_t, k_t):
        n_k = k_t.shape[1] // 128
        out = nl.ndarray((128, k_t.shape[1]), dtype=nl.float32, buffer=nl.hbm)
        q = nl.load(q_t)
        for i_k in nl.affine_range(n_k):
            scores = nisa.nc_matmul(q, nl.load(k_t[:, i_k * 128:(i_k + 1) * 128]))
            scores_sb = nisa.tensor_copy(scores, dtype=nl.float32)
            ip, jf = nl.mgrid[0:128, 0:128]
            masked = nisa.affine_select(pred=(ip >= i_k * 128 + jf), on_true_tile=scores_sb[ip, jf],
                                        on_false_value=-9984.0, dtype=nl.float32)
            nl.store(out[:, i_k * 128:(i_k + 1) * 128], masked)
        return out

    q_t, k_t = rand(64, 128), rand(64, 256)
    got = causal(q_t, k_t)
    np.testing.assert_allclose(got, _causal_scores(q_t, k_t, -9984.0), rtol=1e-5, atol=1e-5)
    assert (got[:, 128:] == np.float32(-9984.0)).all()
