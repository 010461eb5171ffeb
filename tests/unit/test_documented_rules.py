"""The documented restrictions (``nkic.target.rules``): each rule cites a sentence that is really in the reference,
and each is checked with a kernel that breaks exactly it (an error at the kernel's line, on the generations the rule
names) and a legal kernel at its edge (compiles and matches numpy). Table-driven: one kernel template per
instruction, the cases as parameters."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from nkic import api as nki
from nkic.frontend import NkiError
from nkic.target.rules import GENERATIONS, RULES, Call, Operand, problems

nl, nisa = nki.language, nki.isa
STUBS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "aws-neuron-sdk" / "nki" / "api" / "nki" / "isa" / "__init__.py"
TARGETS = {2: "trn1", 3: "trn2", 4: "trn3"}
NP = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16,
      "float8_e4m3": ml_dtypes.float8_e4m3, "float8_e5m2": ml_dtypes.float8_e5m2}  # fmt: skip
RNG = np.random.default_rng(7)


def _docstrings(stubs: Path = STUBS) -> dict[str, str]:
    tree = ast.parse(stubs.read_text())
    return {f.name: ast.get_docstring(f) or "" for f in tree.body if isinstance(f, ast.FunctionDef)}


def _plain(text: str) -> str:
    """Docstring text without reST markup and line breaks, for comparing sentences."""
    return re.sub(r"\s+", " ", text.replace("``", "").replace("**", "").replace("*", ""))


def test_every_rule_cites_a_sentence_of_the_reference() -> None:
    if not STUBS.exists():
        pytest.skip("the NKI API reference stubs are not in ../shared/corpus")
    from nkic.target.instructions import INSTRUCTIONS

    docs = {f"nisa.{name}": _plain(text) for name, text in _docstrings().items()}
    language = STUBS.parent.parent / "language" / "__init__.py"  # nl.* rules (target/rules/language.py)
    docs.update({f"nl.{name}": _plain(text) for name, text in _docstrings(language).items()})
    for instr, rules in RULES.items():
        for r in rules:
            api = r.api or f"nisa.{INSTRUCTIONS[instr].nki_name or instr}"
            assert _plain(r.says) in docs[api], f"{instr}: not a sentence of {api}: {r.says!r}"


# -- nc_matmul ----------------------------------------------------------------------------------------------------
def matmul_kernel(a: Any, b: Any, dst_dtype: Any) -> Any:
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=b)
    p = nl.ndarray((a.shape[1], b.shape[1]), dtype=dst_dtype, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=x, moving=y)  # the line the errors name
    r = nl.ndarray(p.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=p)
    nisa.dma_copy(dst=out, src=r)
    return out


MATMUL_LINE = matmul_kernel.__code__.co_firstlineno + 7


def _run_matmul(gen: int, st: str, mv: str, dst: str) -> np.ndarray:
    a = RNG.integers(-3, 4, (64, 32)).astype(NP[st])  # small integers: exact in every dtype, so any order matches
    b = RNG.integers(-3, 4, (64, 48)).astype(NP[mv])
    got = nki.jit(matmul_kernel, platform_target=TARGETS[gen])(a, b, getattr(nl, dst))
    np.testing.assert_array_equal(got, a.astype(np.float32).T @ b.astype(np.float32))
    return got


@pytest.mark.parametrize("gen,st,mv,dst,wrong", [
    (3, "float32", "bfloat16", "float32", "a tfloat32/float32 operand needs a tfloat32/float32 partner"),
    (2, "bfloat16", "float32", "float32", "a tfloat32/float32 operand needs a tfloat32/float32 partner"),
    (3, "bfloat16", "bfloat16", "bfloat16", "the PSUM result 'dst' is bfloat16, it must be float32 on NeuronCore-v3"),
    (2, "bfloat16", "bfloat16", "bfloat16", "the PSUM result 'dst' is bfloat16, it must be float32 on NeuronCore-v2"),
    (4, "bfloat16", "bfloat16", "float16", "it must be float32 or bfloat16 on NeuronCore-v4"),
])  # fmt: skip
def test_matmul_rejects(gen: int, st: str, mv: str, dst: str, wrong: str) -> None:
    with pytest.raises(NkiError, match=re.escape(f"test_documented_rules.py:{MATMUL_LINE}: error: nc_matmul: ")) as e:
        _run_matmul(gen, st, mv, dst)
    assert wrong in str(e.value)


@pytest.mark.parametrize("gen,st,mv,dst", [
    (3, "float32", "float32", "float32"),  # the fp32 pair
    (3, "bfloat16", "float8_e4m3", "float32"),  # mixed dtypes are fine unless one is fp32
    (2, "float16", "bfloat16", "float32"),
    (4, "bfloat16", "bfloat16", "bfloat16"),  # v4: a bf16 PSUM result
])  # fmt: skip
def test_matmul_accepts_the_edges(gen: int, st: str, mv: str, dst: str) -> None:
    _run_matmul(gen, st, mv, dst)


def test_generation_specific_rules_follow_the_target() -> None:
    call = Call("matmul", {"dst": Operand("psum", "bfloat16"), "stationary": Operand("sbuf", "bfloat16"),
                           "moving": Operand("sbuf", "bfloat16")})  # fmt: skip
    assert [g for g in GENERATIONS if problems(Call(**{**call.__dict__, "gen": g}))] == [2, 3]
    assert problems(call) == []  # IR text names no generation: a rule of some generations is not checked there
    double = Call("matmul", call.operands, {"double_row": True}, 2)
    assert any("double_row" in p for _, p in problems(double))  # v2 has no performance mode


# -- activation ---------------------------------------------------------------------------------------------------
def activation_kernel(a: Any, reduce_op: Any, reduce_api: bool) -> Any:
    out = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    e = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    if reduce_api:
        nisa.activation_reduce(dst=e, op=nl.copy, data=x, reduce_op=reduce_op, reduce_res=s)
    else:
        nisa.activation(dst=e, op=nl.copy, data=x, reduce_op=reduce_op, reduce_res=s,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)  # fmt: skip
    nisa.dma_copy(dst=out, src=s)
    return out


@pytest.mark.parametrize("gen", [2, 3, 4])
def test_activation_reduce_op_must_be_add(gen: int) -> None:
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    kernel = nki.jit(activation_kernel, platform_target=TARGETS[gen])
    np.testing.assert_allclose(kernel(a, nl.add, False)[:, 0], a.sum(axis=1), rtol=1e-5, atol=1e-5)
    with pytest.raises(NkiError, match="activation: reduce_op must be nl.add, got nl.maximum"):
        kernel(a, nl.maximum, False)


def test_activation_reduce_takes_other_reductions_after_v2() -> None:
    """nisa.activation_reduce's docstring restricts reduce_op only "On NeuronCore-v2"."""
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    got = nki.jit(activation_kernel, platform_target="trn2")(a, nl.maximum, True)
    np.testing.assert_array_equal(got[:, 0], a.max(axis=1))
    with pytest.raises(NkiError, match="reduce_op must be nl.add, got nl.maximum on NeuronCore-v2"):
        nki.jit(activation_kernel, platform_target="trn1")(a, nl.maximum, True)


# -- tensor_tensor --------------------------------------------------------------------------------------------------
def psum_inputs_kernel(a: Any, both_psum: bool, op: Any) -> Any:
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    p = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
    q = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=p, src=x)
    nisa.tensor_copy(dst=q, src=x)
    r = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=r, data1=p, data2=q if both_psum else x, op=op)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_tensor_tensor_reads_at_most_one_psum_tile() -> None:
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(psum_inputs_kernel)(a, False, nl.add), a + a)
    with pytest.raises(NkiError, match="data1 and data2 cannot both be in PSUM"):
        nki.simulate(psum_inputs_kernel)(a, True, nl.add)
    with pytest.raises(NkiError, match=r"op=nl.power runs on GpSimd, which cannot read PSUM \('data1'\)"):
        nki.simulate(psum_inputs_kernel)(a, False, nl.power)


LEGACY_ACCUMULATE = """
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def accumulate(a, b):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 256), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(2):
        x = nl.load(a[k * 128 : (k + 1) * 128, :])
        y = nl.load(b[k * 128 : (k + 1) * 128, :])
        acc += nisa.nc_matmul(x, y)
    nl.store(out, acc)
    return out
"""


def test_legacy_psum_accumulation_stays_legal(tmp_path: Path) -> None:
    """The legacy ``psum += nisa.nc_matmul(...)`` adds a PSUM tile to a PSUM tile: nkic stages one in SBUF, so the
    instruction it emits keeps tensor_tensor's rule."""
    import nkic
    from nkic.tools.cli import load_kernel

    nkic.install_nki_alias()
    (tmp_path / "legacy_acc.py").write_text(LEGACY_ACCUMULATE)
    kernel = load_kernel(f"{tmp_path / 'legacy_acc.py'}:accumulate")
    a = RNG.integers(-3, 4, (256, 128)).astype(np.float32)
    b = RNG.integers(-3, 4, (256, 256)).astype(np.float32)
    with pytest.warns(Warning):  # the legacy idiom's migration hint
        np.testing.assert_array_equal(nki.simulate(kernel)(a, b), a.T @ b)


# -- nc_transpose ---------------------------------------------------------------------------------------------------
def transpose_kernel(a: Any, dst_dtype: Any) -> Any:
    out = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    p = nl.ndarray((a.shape[1], a.shape[0]), dtype=dst_dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=p, data=x)
    r = nl.ndarray(p.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=p)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_nc_transpose_keeps_its_dtype() -> None:
    a = RNG.standard_normal((64, 32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(nki.simulate(transpose_kernel)(a, nl.bfloat16), a.T)
    with pytest.raises(NkiError, match="nc_transpose: dst is float32 but data is bfloat16"):
        nki.simulate(transpose_kernel)(a, nl.float32)


def test_language_functions_are_not_held_to_the_instruction_rules_at_the_users_line() -> None:
    """``nl.matmul`` of a float32 and a bf16 tile is the language's to lower (the device compiler casts): the rule is
    about the instruction a ``nisa`` call names."""

    @nki.jit
    def mixed(a, b):  # noqa: ANN001, ANN202
        out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        y = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        nisa.dma_copy(dst=y, src=b)
        r = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=nl.matmul(x, y, transpose_x=True))
        nisa.dma_copy(dst=out, src=r)
        return out

    a = RNG.integers(-3, 4, (64, 32)).astype(np.float32)
    b = RNG.integers(-3, 4, (64, 48)).astype(ml_dtypes.bfloat16)
    try:
        got = mixed(a, b)
    except NkiError as e:
        pytest.fail(f"nl.matmul of mixed dtypes was rejected: {e}")
    np.testing.assert_array_equal(got, a.T @ b.astype(np.float32))


def test_the_coverage_report_finds_every_rule(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m nkic.target.rules --report``: every rule's sentence is one of the restriction sentences it lists."""
    if not STUBS.exists():
        pytest.skip("the NKI API reference stubs are not in ../shared/corpus")
    from nkic.target.rules.__main__ import main
    from nkic.target.rules.coverage import report

    rows, counts = report(STUBS.parent.parent)
    encoded = {(s.api, why) for s, st, why in rows if st == "encoded"}
    assert {r.instr for rules in RULES.values() for r in rules} <= {instr for _, instr in encoded}
    assert counts["encoded"] + counts["waived"] + counts["open"] == len(rows) > 300
    status = main(["--report", str(STUBS.parent.parent)])
    out = capsys.readouterr().out
    assert f"{len(rows)} restriction sentences: {counts['encoded']} encoded" in out
    assert status == (1 if counts["open"] else 0)
    assert "[rule of matmul] The dst tile must be a float32 tile in NeuronCore-v2 and NeuronCore-v3." in out


def test_every_restriction_sentence_is_encoded_or_waived() -> None:
    """The reference's restriction sentences, each a rule or a waiver with its reason: a new sentence in the docs,
    or a rule's sentence edited away, fails here until someone decides what it is."""
    if not STUBS.exists():
        pytest.skip("the NKI API reference stubs are not in ../shared/corpus")
    from nkic.target.rules.coverage import report

    rows, counts = report(STUBS.parent.parent)
    still_open = [f"{s.api}: {s.text}" for s, st, _ in rows if st == "open"]
    assert not still_open, "restriction sentences neither encoded nor waived:\n" + "\n".join(still_open)
    assert all(why for _, st, why in rows if st == "waived"), "a waiver without a reason"
