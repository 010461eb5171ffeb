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

from kernel_harness import on_chip_case

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
    from nkic.tools.commands import load_kernel

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


# -- the restrictions once checked elsewhere, now rules: each broken at its line, each at its legal edge ------------
def rules_template(a0: Any, a1: Any, psum: tuple[int, ...], outs: tuple[Any, ...], body: Any) -> Any:
    """Load a0, a1 (those given) on chip (SBUF, or PSUM for the indices in ``psum``), run ``body(*tiles, *outs)``
    with ``outs`` fresh SBUF tiles, and store the outputs."""
    return on_chip_case((a0, a1), psum, outs, body)


def _run_rules(gen: int, inputs: list[np.ndarray], outs: list[Any], body: Any, psum: tuple[int, ...] = ()) -> Any:
    args = [*inputs, *[None] * (2 - len(inputs))]
    return nki.jit(rules_template, platform_target=TARGETS[gen])(*args, psum, tuple(outs), body)


def tile(shape: tuple[int, ...], dtype: Any = nl.float32, buffer: Any = None) -> Any:
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf if buffer is None else buffer)


P, F = 128, 8
A = RNG.standard_normal((P, F)).astype(np.float32)
COL = RNG.standard_normal((P, 1)).astype(np.float32)
U32 = np.arange(P * F, dtype=np.uint32).reshape(P, F)
MASK = [(i + 1) % 32 for i in range(32)]

# (name, generation, inputs, outputs, body, PSUM inputs, what the error says)
MOVED: list[tuple[str, int, list[np.ndarray], list[Any], Any, tuple[int, ...], str]] = [
    ("iota dst in SBUF", 3, [], [], lambda: nisa.iota(dst=tile((P, F), nl.int32, nl.psum), pattern=[[1, F]]), (),
     "iota: 'dst' must be in SBUF, not psum"),
    ("tensor_copy no GpSimd on PSUM", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.tensor_copy(dst=d, src=x, engine=nisa.engine.gpsimd), (0,), "GpSimdE) cannot read PSUM ('src')"),
    ("tensor_copy no ScalarE on v2", 2, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.tensor_copy(dst=d, src=x, engine=nisa.engine.scalar), (),
     "runs on act only from NeuronCore-v3, not on NeuronCore-v2"),
    ("tensor_scalar bitvec on VectorE", 3, [U32.view(np.int32)], [((P, F), nl.int32)],
     lambda x, d: nisa.tensor_scalar(dst=d, data=x, op0=nl.bitwise_and, operand0=1, engine=nisa.engine.scalar), (),
     "does not compute op0=bitwise_and"),
    ("scalar_tensor_tensor operand0 column", 3, [A, A], [((P, F), nl.float32)],
     lambda x, y, d: nisa.scalar_tensor_tensor(dst=d, data=x, op0=nl.add, operand0=tile((64, 1)), op1=nl.add,
                                               operand1=y), (), "'operand0' must be a (128, 1) tile, got 64 x 1"),
    ("tensor_scalar_reduce reduce_res column", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.tensor_scalar_reduce(dst=d, data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add,
                                            reduce_res=tile((P, 2))), (), "'reduce_res' must be a (128, 1) tile"),
    ("tensor_scalar_reduce reduce_init only for load", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.tensor_scalar_reduce(dst=d, data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add,
                                            reduce_res=tile((P, 1)), reduce_init=1.0), (),
     "reduce_init is set but reduce_cmd is reset_reduce"),
    ("tensor_scalar_reduce load needs reduce_init", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.tensor_scalar_reduce(dst=d, data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add,
                                            reduce_res=tile((P, 1)), reduce_cmd=nisa.reduce_cmd.load_reduce), (),
     "reduce_cmd=load_reduce needs reduce_init"),
    ("affine_select on_true in SBUF", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.affine_select(dst=d, pattern=[[1, F]], channel_multiplier=0, on_false_value=0.0,
                                     on_true_tile=nl.ndarray((P, F), nl.float32, buffer=nl.shared_hbm)), (),
     "affine_select: 'on_true' must be in SBUF, not shared_hbm"),
    ("range_select on v3+", 2, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.range_select(dst=d, on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less,
                                    bound0=tile((P, 1)), bound1=tile((P, 1))), (),
     "nisa.range_select is not available on gen2: it needs gen3 or newer"),
    ("range_select bounds one element", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.range_select(dst=d, on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less,
                                    bound0=tile((P, 2)), bound1=tile((P, 1))), (),
     "'bound0' must be a (128, 1) tile, got 128 x 2"),
    ("select_reduce reduce_res column", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.select_reduce(dst=d, predicate=tile((P, F), nl.uint8), on_true=x, on_false=0.0,
                                     reduce_res=tile((P, 4))), (), "'reduce_res' must be a (128, 1) tile"),
    ("bn_aggr triples", 3, [A], [((P, 2), nl.float32)], lambda x, d: nisa.bn_aggr(dst=d, data=x), (),
     "its elements per partition must be a multiple of 3"),
    ("max8 dst partitions", 3, [A], [((64, 8), nl.float32)], lambda x, d: nisa.max8(dst=d, src=x), (),
     "max8: dst must be a 2-D [128, 8] tile"),
    ("topk in SBUF", 3, [A.astype(ml_dtypes.bfloat16)], [((P, 1), nl.bfloat16), ((P, 1), nl.uint32)],
     lambda x, v, i: nisa.topk(val_dst=v, idx_dst=i, src=x, n=16), (0,), "topk: 'src' must be in SBUF, not psum"),
    ("local_gather partitions", 3, [A], [((P, 16), nl.float32)],
     lambda x, d: nisa.local_gather(dst=d, src_buffer=x, index=tile((64, 1), nl.uint16)), (),
     "src_buffer has 128 partitions and index 64"),
    ("nc_n_gather in SBUF", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.nc_n_gather(dst=d, data=x, indices=tile((P, F), nl.uint32)), (0,),
     "nc_n_gather: 'data' must be in SBUF, not psum"),
    ("nc_stream_shuffle mask entries", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.nc_stream_shuffle(dst=d, src=x, shuffle_mask=[40] * 32), (),
     "shuffle_mask entries must be 0..31 (a partition of the quadrant) or 255 (keep), got [40"),
    ("nc_stream_shuffle starts at 64", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.nc_stream_shuffle(dst=d[32:96], src=x[32:96], shuffle_mask=MASK), (),
     "with 64 active partitions 'src' must start at partition 0 or 64, not 32"),
    ("sequence_bounds one partition", 3, [np.ones((2, 8), np.int32)], [((2, 16), nl.int32)],
     lambda s, d: nisa.sequence_bounds(dst=d, segment_ids=s), (), "'dst' must have one partition, got 2"),
    ("set_rng_seed on chip", 3, [], [],
     lambda: nisa.set_rng_seed(src_seeds=nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)), (),
     "set_rng_seed: 'src_seeds' must be in SBUF or PSUM, not shared_hbm"),
    ("rand_set_state in SBUF", 3, [], [],
     lambda: nisa.rand_set_state(src_seeds=tile((P, 6), nl.uint32, nl.psum)), (),
     "rand_set_state: 'src_seeds' must be in SBUF, not psum"),
    ("exponential on v4", 3, [A], [((P, F), nl.float32)], lambda x, d: nisa.exponential(dst=d, src=x), (),
     "nisa.exponential is not available on gen3: it needs gen4 or newer"),
    ("nonzero_with_count on v3+", 2, [A], [((P, F + 1), nl.int32)],
     lambda x, d: nisa.nonzero_with_count(dst=d, src=x), (), "nisa.nonzero_with_count is not available on gen2"),
]  # fmt: skip


@pytest.mark.parametrize("gen,inputs,outs,body,psum,wrong", [c[1:] for c in MOVED], ids=[c[0] for c in MOVED])
def test_moved_checks_are_rules_at_the_users_line(gen: int, inputs: list[np.ndarray], outs: list[Any], body: Any,
                                                  psum: tuple[int, ...], wrong: str) -> None:  # fmt: skip
    with pytest.raises(NkiError) as e:
        _run_rules(gen, inputs, outs, body, psum)
    assert (e.value.file, e.value.line) == (__file__, body.__code__.co_firstlineno), str(e.value)
    assert wrong in str(e.value)
    assert "(the NKI reference: " in str(e.value)  # the sentence, cited


def _shift_rows(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for q in range(0, x.shape[0], 32):
        out[q:q + 32] = x[q:q + 32][MASK]
    return out


# (name, generation, inputs, outputs, body, PSUM inputs, numpy's answer)
EDGES: list[tuple[str, int, list[np.ndarray], list[Any], Any, tuple[int, ...], Any]] = [
    ("tensor_copy VectorE from PSUM", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.tensor_copy(dst=d, src=x, engine=nisa.engine.vector), (0,), lambda: [A]),
    ("tensor_copy ScalarE on v3", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.tensor_copy(dst=d, src=x, engine=nisa.engine.scalar), (0,), lambda: [A]),
    ("scalar_tensor_tensor (P, 1) operand0 tile", 3, [A, COL], [((P, F), nl.float32)],
     lambda x, c, d: nisa.scalar_tensor_tensor(dst=d, data=x, op0=nl.multiply, operand0=c, op1=nl.add, operand1=x),
     (), lambda: [A * COL + A]),
    ("tensor_scalar_reduce PSUM reduce_res", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.tensor_scalar_reduce(dst=d, data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add,
                                            reduce_res=tile((P, 1), nl.float32, nl.psum)), (), lambda: [A + 1.0]),
    ("range_select (P, 1) bounds", 3, [A, COL], [((P, F), nl.float32)],
     lambda x, c, d: nisa.range_select(dst=d, on_true_tile=x, comp_op0=nl.greater_equal, comp_op1=nl.less,
                                       bound0=c, bound1=c), (),
     lambda: [np.full((P, F), np.finfo(np.float32).min, np.float32)]),  # x >= b and x < b: never
    ("max8 reads 8 elements", 3, [A], [((P, 8), nl.float32)], lambda x, d: nisa.max8(dst=d, src=x), (),
     lambda: [-np.sort(-A, axis=1)]),
    ("nc_stream_shuffle on all quadrants", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.nc_stream_shuffle(dst=d, src=x, shuffle_mask=MASK), (), lambda: [_shift_rows(A)]),
    ("nc_stream_shuffle 64 from partition 64", 3, [A], [((P, F), nl.float32)],
     lambda x, d: nisa.nc_stream_shuffle(dst=d[64:], src=x[64:], shuffle_mask=MASK), (), None),
    ("sequence_bounds one partition", 3, [np.array([[3, 3, 1, 0]], np.int32)], [((1, 8), nl.int32)],
     lambda s, d: nisa.sequence_bounds(dst=d, segment_ids=s), (),
     lambda: [np.array([[0, 0, 2, 4, 2, 2, 3, -1]], np.int32)]),
]  # fmt: skip


@pytest.mark.parametrize("gen,inputs,outs,body,psum,want", [c[1:] for c in EDGES], ids=[c[0] for c in EDGES])
def test_moved_rules_accept_their_edges(gen: int, inputs: list[np.ndarray], outs: list[Any], body: Any,
                                        psum: tuple[int, ...], want: Any) -> None:  # fmt: skip
    got = _run_rules(gen, inputs, outs, body, psum)
    for g, w in zip(got, want() if want else [], strict=False):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-6, atol=1e-6)


def test_size_rules_read_the_sentence_not_the_allocation() -> None:
    """A tile larger than an SBUF partition cannot be allocated at a nisa call, but IR text can name one: the rule
    is asked of the operands as every level sees them."""
    big = Operand("sbuf", "float32", (128, (256 << 10) // 4))  # 256 KiB: more than any generation's partition
    for instr, role in (("tensor_reduce", "data"), ("iota", "dst"), ("affine_select", "dst")):
        found = [p for _, p in problems(Call(instr, {role: big}, gen=3))]
        assert any("more than one SBUF partition" in p for p in found), (instr, found)
        assert not problems(Call(instr, {role: Operand("sbuf", "float32", (128, 1024))}, gen=3))


def test_the_encoded_share() -> None:
    """The coverage report's share: >= 90% of the real restrictions (the issue's bar: advice, semantics and
    signature notes left out) are encoded, and so of those on features nkic implements."""
    if not STUBS.exists():
        pytest.skip("the NKI API reference stubs are not in ../shared/corpus")
    from nkic.target.rules.coverage import report, share

    n = share(report(STUBS.parent.parent)[0])
    assert n["encoded"] >= 0.9 * n["real"], n
    assert n["encoded"] >= 0.9 * n["implemented"], n
    assert n["implemented"] < n["real"]  # activate2's indirection sentences (no view in nkic) are counted, apart


def wide_matmul_kernel(a: Any, b: Any, dst_dtype: Any) -> Any:
    """One matmul into the entire PSUM (v4), copied out a bank at a time (a read stays in one bank)."""
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=b)
    p = nl.ndarray((a.shape[1], b.shape[1]), dtype=dst_dtype, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=x, moving=y)  # the line the errors name
    r = nl.ndarray(p.shape, dtype=nl.float32, buffer=nl.sbuf)
    bank = 2048 // (2 if dst_dtype == nl.bfloat16 else 4)
    for j in range(b.shape[1] // bank):
        nisa.tensor_copy(dst=r[:, j * bank:(j + 1) * bank], src=p[:, j * bank:(j + 1) * bank])
    nisa.dma_copy(dst=out, src=r)
    return out


def test_v4_bf16_matmul_result_spans_8192_columns() -> None:
    """The reference: "Starting NeuronCore-v4, the free dimension size of moving tile can go up to 4096 for float32
    dst or 8192 for bfloat16 dst" (nkic capped both at 4096)."""
    bf16 = ml_dtypes.bfloat16
    a = RNG.integers(-2, 3, (32, 16)).astype(bf16)
    b = RNG.integers(-2, 3, (32, 8192)).astype(bf16)
    got = nki.jit(wide_matmul_kernel, platform_target="trn3")(a, b, nl.bfloat16)
    want = (a.astype(np.float32).T @ b.astype(np.float32)).astype(bf16).astype(np.float32)
    np.testing.assert_array_equal(got, want)

    def call(dst: str, n: int, gen: int = 4) -> list[str]:  # (a PSUM tile past 16 KiB cannot even be allocated)
        return [p for _, p in problems(Call("matmul", {"dst": Operand("psum", dst, (16, n)), "stationary": Operand(
            "sbuf", "bfloat16", (32, 16)), "moving": Operand("sbuf", "bfloat16", (32, n))}, gen=gen))]  # fmt: skip

    assert any("N=8193 (max 8192)" in p for p in call("bfloat16", 8193))
    assert any("N=8192 (max 4096)" in p for p in call("float32", 8192))
    assert not call("float32", 4096) and any("(max 512)" in p for p in call("bfloat16", 8192, gen=3))
