"""Diagnostics about the user's code (issue 26): every message names the user's file:line, never nkic's own files;
tensors carry the user's names; silent surprises (a tile read after its loop, outputs never written) warn; 0.2-era
``import nki`` kernels run under their meaning with one migration warning; the README's claims hold."""

from __future__ import annotations

import os

import numpy as np
import pytest

import nkic

nkic.install_nki_alias()

import nki  # noqa: E402
import nki.language as nl  # noqa: E402


def line_of(marker: str) -> int:
    """The line of this file ending with ``# marker``."""
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# {marker}"):
                return n
    raise AssertionError(marker)


def at_marker(message: str, marker: str) -> bool:
    return message.startswith(f"{__file__}:{line_of(marker)}: ")


def copy_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out


# -- 1. errors raised while checking a call's arguments name the call site -------------------------------------------
def test_bad_argument_dtype_names_the_call_site() -> None:
    kernel = nki.jit(copy_kernel)
    with pytest.raises(nki.NkiError, match="unsupported dtype 'float64' for kernel argument 'a'") as e:
        kernel(np.ones((128, 64), np.float64))  # D-f64
    assert at_marker(str(e.value), "D-f64"), str(e.value)


def test_bad_argument_dtype_through_simulate_names_the_call_site() -> None:
    with pytest.raises(nki.NkiError, match="float64") as e:
        nki.simulate(copy_kernel)(np.ones((128, 64), np.float64))  # D-sim-f64
    assert at_marker(str(e.value), "D-sim-f64"), str(e.value)


def test_profile_overwrite_refusal_names_the_call_site(tmp_path) -> None:
    a = np.ones((128, 64), np.float32)
    nki.profile(working_directory=tmp_path, save_neff_name="sm.neff")(copy_kernel)(a)
    again = nki.profile(working_directory=tmp_path, save_neff_name="sm.neff")(copy_kernel)
    with pytest.raises(nki.NkiError, match="sm.neff exists") as e:
        again(a)  # D-profile
    assert at_marker(str(e.value), "D-profile"), str(e.value)


# -- 2. a syntax error in the kernel's file is reported at that file's line -------------------------------------------
BAD_SYNTAX = """import nki
import nki.language as nl


@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, t)
    x = (1,
    return out
"""


def test_syntax_error_in_the_kernel_file_names_its_line(tmp_path, monkeypatch, capsys) -> None:
    from nkic.tools.cli import main

    (tmp_path / "bad_syntax.py").write_text(BAD_SYNTAX)
    monkeypatch.chdir(tmp_path)
    assert main(["compile", "bad_syntax.py:k", "-o", "k.neff"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    file, sep, what = lines[0].partition(":10: error: ")
    assert sep and os.path.samefile(file, tmp_path / "bad_syntax.py"), lines
    assert what == "SyntaxError: '(' was never closed.", lines


def test_syntax_error_in_a_script_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    from nkic.tools.script import main

    (tmp_path / "bad_syntax.py").write_text(BAD_SYNTAX)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))  # the script's folder is put first on sys.path
    assert main(["bad_syntax.py"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["bad_syntax.py:10: error: SyntaxError: '(' was never closed."], lines


# -- 4. tensors in messages carry the user's names --------------------------------------------------------------------
def uninitialised_read(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    named = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf, name="partial_sums")
    total = nl.add(acc, nl.load(a))  # D-uninit-acc
    nl.store(out, nl.add(total, named))  # D-uninit-named
    return out


def unwritten_messages(kernel, *args: object) -> list[str]:
    import warnings

    from nkic.frontend.errors import NkiWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nki.jit(kernel).trace(*args)
    return [str(w.message) for w in caught if issubclass(w.category, NkiWarning)]


def test_uninitialised_read_names_the_variable() -> None:
    messages = unwritten_messages(uninitialised_read, np.ones((128, 64), np.float32))
    assert any("sbuf tensor 'acc' (allocated at test_diagnostics.py:" in m for m in messages), messages
    assert any("sbuf tensor 'partial_sums'" in m for m in messages), messages  # name= wins over the variable
    assert not any("sbuf_" in m for m in messages), messages
    # only the call assigned to the name takes it: the inner allocation of `s = nl.add(nl.ndarray(...), ...)` is not 's'
    messages = unwritten_messages(nested_calls, np.ones((128, 64), np.float32))
    assert len(messages) == 1 and "tensor 's'" not in messages[0] and "tensor 'sbuf" in messages[0], messages


def returns_a_tile(a):
    result = nl.load(a)
    return result


def test_error_about_a_tensor_names_the_variable() -> None:
    with pytest.raises(nki.NkiError, match="must be in shared_hbm") as e:
        nki.jit(returns_a_tile).trace(np.ones((128, 64), np.float32))
    assert "'result' is in sbuf" in str(e.value), str(e.value)


def nested_calls(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    s = nl.add(nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf), nl.load(a))  # inner: not 's'
    nl.store(out, s)
    return out


# -- 5. a tile read after the loop that defines it --------------------------------------------------------------------
def tile_after_its_loop(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):  # D-loop
        t = nl.load(a[i * 128:(i + 1) * 128, :])
    nl.store(out, t)  # D-after-loop
    return out


def carried_accumulator(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        acc = nl.add(acc, nl.load(a[i * 128:(i + 1) * 128, :]))  # each iteration reads the previous one's tile
    nl.store(out, acc)
    return out


def tiles_kept_per_iteration(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tiles = []
    for i in nl.affine_range(4):
        tiles.append(nl.load(a[i * 128:(i + 1) * 128, :]))
    for i in range(4):  # every iteration's tile is read after the loop: the tutorial's hoist_load
        nl.store(out[i * 128:(i + 1) * 128, :], tiles[i])
    return out


def reused_after_its_loop(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.load(a[i * 128:(i + 1) * 128, :])
        nl.store(out, t)
    t[...] = nl.exp(nl.load(a[0:128, :]))  # written before it is read: a scratch tile reused, not a surprise
    nl.store(out, t)
    return out


def loop_warnings(kernel, a: np.ndarray) -> tuple[list[str], object]:
    import warnings

    from nkic.frontend.errors import NkiWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = nki.simulate(kernel)(a)
    return [f"{w.lineno}: {w.message}" for w in caught if issubclass(w.category, NkiWarning)], result


def test_tile_read_after_its_loop_warns() -> None:
    a = np.random.default_rng(5).standard_normal((512, 64)).astype(np.float32)
    messages, result = loop_warnings(tile_after_its_loop, a)
    np.testing.assert_array_equal(result, a[384:512])  # the last iteration's tile, as the warning says
    after = [m for m in messages if "after the loop" in m]
    assert len(after) == 1, messages
    assert after[0].startswith(f"{line_of('D-after-loop')}: ") and "tile 't'" in after[0], after
    assert f"test_diagnostics.py:{line_of('D-loop')}" in after[0] and "last iteration" in after[0], after
    assert "iteration 3 of 4" in after[0], after
    # no warning where the last tile is what the loop meant: loop-carried state, a tile per iteration, a reused tile
    messages, result = loop_warnings(carried_accumulator, a)
    assert not [m for m in messages if "after the loop" in m], messages
    np.testing.assert_allclose(result, a.reshape(4, 128, 64).sum(axis=0), rtol=1e-5, atol=1e-5)
    messages, result = loop_warnings(tiles_kept_per_iteration, a)
    assert not [m for m in messages if "after the loop" in m], messages
    np.testing.assert_array_equal(result, a)
    messages, result = loop_warnings(reused_after_its_loop, a)
    assert not [m for m in messages if "after the loop" in m], messages
    np.testing.assert_allclose(result, np.exp(a[0:128]), rtol=1e-5)


# -- 6. outputs the kernel never writes -------------------------------------------------------------------------------
def half_written(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):  # rows 256..511 are forgotten
        nl.store(out[i * 128:(i + 1) * 128, :], nl.load(a[i * 128:(i + 1) * 128, :]))
    return out


def corner_written(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out[0:128, 0:32], nl.load(a[0:128, 0:32]))
    nl.store(out[128:256, :], nl.load(a[128:256, :]))
    return out


def copy_256(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        nl.store(out[i * 128:(i + 1) * 128, :], nl.load(a[i * 128:(i + 1) * 128, :]))
    return out


def coverage_warnings(kernel, a: np.ndarray, **options: object) -> tuple[list[str], np.ndarray]:
    import warnings

    from nkic.frontend.errors import NkiWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = nki.simulate(kernel, **options)(a)  # D-coverage-call
    return [f"{os.path.basename(w.filename)}:{w.lineno}: {w.message}" for w in caught
            if issubclass(w.category, NkiWarning)], result


def test_unwritten_output_rows_warn_once() -> None:
    a = np.random.default_rng(7).standard_normal((512, 64)).astype(np.float32)
    messages, result = coverage_warnings(half_written, a)
    np.testing.assert_array_equal(result[:256], a[:256])
    assert np.isnan(result[256:]).all()  # the simulator's fill: the warning says why
    assert messages == [f"test_diagnostics.py:{line_of('D-coverage-call')}: output 'out' rows 256..511 were never "
                        "written"], messages
    a = a[:256]
    messages, result = coverage_warnings(corner_written, a)
    assert messages == [f"test_diagnostics.py:{line_of('D-coverage-call')}: output 'out' has 4096 of 16384 "
                        "elements never written, in rows 0..127 (columns 32..63)"], messages
    messages, _ = coverage_warnings(copy_256, a)  # every element written: silence
    assert messages == [], messages


def test_strict_makes_unwritten_output_an_error() -> None:
    a = np.ones((512, 64), np.float32)
    with pytest.raises(nki.NkiError, match=r"output 'out' rows 256\.\.511 were never written") as e:
        nki.simulate(half_written, strict=True)(a)  # D-strict
    assert at_marker(str(e.value), "D-strict"), str(e.value)
    np.testing.assert_array_equal(nki.simulate(copy_256, strict=True)(a[:256]), a[:256])


def test_nkic_run_reports_unwritten_outputs(tmp_path, monkeypatch, capsys) -> None:
    from nkic.tools.cli import main

    (tmp_path / "k.py").write_text(
        "import nki\nimport nki.language as nl\n\n\n@nki.jit\ndef half(a):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    for i in nl.affine_range(2):\n"
        "        nl.store(out[i * 128:(i + 1) * 128, :], nl.load(a[i * 128:(i + 1) * 128, :]))\n    return out\n"
    )
    np.save(tmp_path / "a.npy", np.ones((512, 64), np.float32))
    monkeypatch.chdir(tmp_path)
    assert main(["compile", "k.py:half", "--arg", "a=float32[512,64]", "-o", "k.neff"]) == 0
    capsys.readouterr()
    assert main(["run", "k.neff", "--input", "a=a.npy", "--output-dir", "o"]) == 0
    assert capsys.readouterr().err.strip().splitlines() == [
        "nkic: warning: output 'out' rows 256..511 were never written"]
    assert main(["run", "k.neff", "--input", "a=a.npy", "--output-dir", "o2", "--strict"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "nkic: error: output 'out' rows 256..511 were never written"]


# -- 7. NKI 0.2 kernels under `import nki` ----------------------------------------------------------------------------
V02_KERNEL = '''import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit(mode="torchxla")
def exp_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer="sbuf")
    nisa.dma_copy(dst=t, src=a)
    nl.store(out, nl.exp(t))
    return out


@nki.jit
def private_output(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.private_hbm)
    nl.store(out, nl.load(a))
    return out
'''


def v02_module(tmp_path):
    import importlib.util
    import sys

    path = tmp_path / "v02_kernels.py"
    path.write_text(V02_KERNEL)
    spec = importlib.util.spec_from_file_location(f"v02_kernels_{tmp_path.name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module, path


def test_v02_idioms_run_with_one_warning_each(tmp_path) -> None:
    import warnings

    from nkic.frontend.legacy import migration

    migration.reset()
    migration.set_action("default")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module, path = v02_module(tmp_path)
            a = np.random.default_rng(8).standard_normal((128, 64)).astype(np.float32)
            np.testing.assert_allclose(module.exp_kernel(a), np.exp(a), rtol=1e-5)
            module.exp_kernel(a)  # a second call warns no more
        got = sorted((w.lineno, str(w.message)) for w in caught if issubclass(w.category, migration.NkiLegacyWarning))
        assert got == [
            (6, "nki.jit(mode='torchxla') is the NKI 0.2 spelling; the modern one is @nki.jit without mode (the "
                "framework comes from the arguments)"),
            (8, "returning the nl.hbm tensor 'out' as the output is the NKI 0.2 spelling; the modern one is "
                "buffer=nl.shared_hbm"),
            (9, "buffer='sbuf' is the NKI 0.2 spelling; the modern one is buffer=nl.sbuf"),
        ], got
        assert all(w.filename == str(path) for w in caught if issubclass(w.category, migration.NkiLegacyWarning))
        with pytest.raises(nki.NkiError, match="must be in shared_hbm"):  # an explicit private_hbm output is 0.3's
            module.private_output(a)
    finally:
        migration.set_action(None)
        migration.reset()


def test_v02_idiom_is_an_error_under_nki_legacy_error(tmp_path) -> None:
    from nkic.frontend.legacy import migration

    migration.reset()
    migration.set_action("error")
    try:
        with pytest.raises(nki.NkiError, match=r"legacy construct nki.jit\(mode='torchxla'\) \(nki-legacy=error\)") as e:
            v02_module(tmp_path)
        assert str(e.value).startswith(f"{tmp_path / 'v02_kernels.py'}:6: error: "), str(e.value)
    finally:
        migration.set_action(None)
        migration.reset()


# -- 8. the README: how to reach nkic, and no stale "missing" list ----------------------------------------------------
README = os.path.join(os.path.dirname(os.path.abspath(nkic.__file__)), "README.md")
# A sentence saying nkic lacks something: every nki name it shows in backticks must really be missing.
_MISSING_CLAIM = r"\blacks?\b|\bnot yet\b|\bmissing\b|\bnot (?:supported|implemented)\b|\bunsupported\b"
_NKI_NAME = r"(?:nl|nisa|nki)(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\.\*)?"


def _claimed_missing(text: str) -> list[str]:
    """The nki names (``nl.x``, ``nisa.x``, ``nki.mod.x``, ``nki.mod.*``) in backticks in the sentences of ``text``
    that claim something is missing."""
    import re

    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold kernels, not claims
    names: list[str] = []
    # sentences and the clauses of a semicolon ("... work; a name nkic lacks raises ..." claims nothing of the first)
    for sentence in re.split(r"(?<=\.)\s+(?=[A-Z(`])|(?<=;)\s+|\n\s*\n|\n\s*[-*|] ", text):
        if re.search(_MISSING_CLAIM, sentence, flags=re.I):
            names += [m.group(0) for tick in re.findall(r"`([^`\n]+)`", sentence)
                      if (m := re.match(_NKI_NAME, tick)) is not None]
    return names


def _missing(name: str) -> bool:
    """Whether the nki name is one nkic lacks: a placeholder (``frontend/unsupported.py``), or, for a module or
    ``module.*``, a module defining no public function of its own (every name in it is a placeholder)."""
    import importlib
    import types

    from nkic.frontend.unsupported import is_unsupported

    path = name.removesuffix(".*").split(".")
    root = {"nl": "nki.language", "nisa": "nki.isa"}.get(path[0], "nki")
    value: object = importlib.import_module(root)
    for part in path[1:]:
        value = getattr(value, part)
    if isinstance(value, types.ModuleType):
        own = [k for k, v in vars(value).items() if not k.startswith("_") and callable(v)
               and getattr(v, "__module__", None) == value.__name__]
        return not own
    return is_unsupported(value)


def test_readme_says_how_to_run_nkic_and_lists_no_present_name_as_missing() -> None:
    import sys

    with open(README) as f:
        text = f.read()
    first = text.split("\n## ", 1)[0]
    assert ".venv/bin/nkic" in first, "the README's first section must show .venv/bin/nkic"
    assert ". .venv/bin/activate" in first, "the README's first section must show activating the venv"
    if sys.prefix != sys.base_prefix:  # the tests run in a venv: the command the README shows is there
        assert os.path.exists(os.path.join(os.path.dirname(sys.executable), "nkic"))
    # every name it calls missing is missing (no stale list survives)
    claims = _claimed_missing(text)
    assert "nki.language.no_such_function" in claims, claims  # the parser finds the claims it is meant to check
    present = [name for name in claims if not _missing(name)]
    assert not present, f"the README says nkic lacks {present}, but nkic has them: update the README"
    # and the check can tell: names nkic has are not missing, misspellings are
    assert not _missing("nl.where") and not _missing("nisa.bn_stats") and _missing("nl.expp")
    assert _claimed_missing("Not yet there: `nisa.bn_stats` and `nl.where`.") == ["nisa.bn_stats", "nl.where"]


def half_written_result(a):
    result = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(result[0:128, :], nl.load(a[0:128, :]))
    return result


def test_unwritten_output_is_named_as_the_kernel_names_it() -> None:
    messages, _ = coverage_warnings(half_written_result, np.ones((256, 64), np.float32))
    assert messages == [f"test_diagnostics.py:{line_of('D-coverage-call')}: output 'result' rows 128..255 were never "
                        "written"], messages


def _hbm_tensor_like(a):
    return nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)


def hbm_output_through_a_helper(a):
    out = _hbm_tensor_like(a)
    nl.store(out, nl.load(a))
    return out


def test_an_undetected_hbm_output_says_it_is_the_nki_02_meaning() -> None:
    with pytest.raises(nki.NkiError, match="must be in shared_hbm") as e:
        nki.jit(hbm_output_through_a_helper).trace(np.ones((128, 64), np.float32))
    assert "NKI 0.2" in str(e.value) and "nl.hbm" in str(e.value), str(e.value)
