"""Engine legality (ARCHITECTURE.md, "Engine legality"): every instruction's declared engines agree with the NKI ISA
reference, compiled kernels place nothing on an engine the reference excludes, and an ``engine=`` outside the
declaration is an error at the user's line.

The reference is the API stubs of the NKI docs, read by path from ``../shared/corpus`` (the corpus README): each
``nki.isa`` function's docstring starts with a sentence naming its engines ("... using Vector Engine or GpSimd
Engine"). The tests that need the corpus skip only when it is absent.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import nkic.api as nki
from nkic.api import isa as nisa
from nkic.api import language as nl
from nkic.compiler.driver import compile_kernel
from nkic.frontend.errors import NkiError
from nkic.runtime.neff import read_neff
from nkic.target.instructions import INSTRUCTIONS, InstrSpec, legal_engines
from nkic.target.isa import OPCODES
from nkic.target.machine import ENGINE_BY_NAME, TARGETS

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
ISA_STUBS = CORPUS / "aws-neuron-sdk" / "nki" / "api" / "nki" / "isa" / "__init__.py"
MAMBA = CORPUS / "aws-neuron-sdk" / "nki" / "examples" / "fused_mamba" / "mamba_nki_kernels.py"
GENERATIONS = sorted(t.nc_version for t in TARGETS.values())

# The reference's engine names -> nkic's. DMA engines are driven by the SP queues in nkic (a ``dma`` instruction).
ENGINE_WORDS = {"tensor": "pe", "vector": "dve", "scalar": "act", "gpsimd": "pool", "sync": "sp", "dma": "sp"}
_ENGINE_RE = re.compile(r"\b(Tensor|Vector|Scalar|GpSimd|GpSIMD|Sync|DMA)\b(?=[\w\s,]*?\b[Ee]ngines?\b)")

# nisa functions implemented through another instruction's declaration.
ALIASES = {"activation_reduce": "activation"}
# Functions whose first sentence names no engine: what nkic declares, and the sentence of the docstring that says
# where it runs instead (None: the docstring names no engine at all; the declaration follows the function's family).
NO_ENGINE_SENTENCE: dict[str, tuple[tuple[str, ...], str | None]] = {
    "max8": (("dve",), None),  # the *8 family: nc_match_replace8 runs "using the Vector engine"
    "nc_find_index8": (("dve",), None),
    "rand_set_state": (("pool", "dve"), "Supported engines:"),
    "rand_get_state": (("pool", "dve"), "Supported engines:"),
    "core_barrier": (("pool", "act", "dve", "pe", "sp"),
                     "allows specifying which engine inside the NeuronCores should execute the barrier"),
    # the register instructions run on every engine sequencer (a copy in every stream: "control")
    "register_move": (("sp",), "different engine sequencers as needed"),
    "register_load": (("sp",), "different engine sequencers as needed"),
    "register_store": (("sp",), "different engine sequencers as needed"),
}  # fmt: skip
# Functions whose first sentence names the DMA engines, but whose trigger engine nkic declares.
TRIGGERS: dict[str, tuple[tuple[str, ...], str]] = {
    "sendrecv": (("sp", "pool", "act", "dve"), "Can be triggered from any engine."),
}

needs_corpus = pytest.mark.skipif(not ISA_STUBS.is_file(), reason=f"{ISA_STUBS} (the NKI API reference) is absent")


def _docstrings() -> dict[str, str]:
    tree = ast.parse(ISA_STUBS.read_text())
    return {n.name: ast.get_docstring(n) or "" for n in tree.body if isinstance(n, ast.FunctionDef)}


def first_sentence(doc: str) -> str:
    """The docstring's first sentence: its first paragraph up to a period that ends a sentence (outside ``code``)."""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    plain = re.sub(r"``[^`]*``", lambda m: "x" * len(m.group(0)), paragraph)  # periods inside code do not count
    end = re.search(r"\.(\s|$)", plain)
    return paragraph[: end.start() + 1] if end else paragraph


def named_engines(sentence: str) -> set[str]:
    """nkic's names of the engines a sentence of the reference names ("using Vector or GpSimd Engine")."""
    return {ENGINE_WORDS[m.lower()] for m in _ENGINE_RE.findall(sentence)}


def _spec_of(function: str) -> InstrSpec | None:
    by_nki = {s.nki_name or s.name: s for s in INSTRUCTIONS.values()}
    return by_nki.get(ALIASES.get(function, function))


def test_first_sentence_parser() -> None:
    assert named_engines("Initialize ``dst`` by filling it with a compile-time constant ``value``, using Vector or "
                         "GpSimd Engine.") == {"dve", "pool"}  # fmt: skip
    assert named_engines("Perform a transpose on input ``src`` using DMA Engine.") == {"sp"}
    assert named_engines("Find the 8 largest values in each partition of the source tile.") == set()
    assert first_sentence("Apply ``a.b`` using Vector Engine. More.\n\nLater.") == "Apply ``a.b`` using Vector Engine."


@needs_corpus
def test_declared_engines_match_the_reference() -> None:
    """Every declaration's engines (over all generations) are the ones its nisa docstring's first sentence names."""
    problems = []
    docs = _docstrings()
    checked = 0
    for function, doc in docs.items():
        spec = _spec_of(function)
        if spec is None:
            continue
        checked += 1
        sentence = first_sentence(doc)
        named = named_engines(sentence)
        if function in NO_ENGINE_SENTENCE:
            engines, says = NO_ENGINE_SENTENCE[function]
            if named:
                problems.append(f"{function}: the first sentence now names {sorted(named)}: {sentence!r}")
            if says is None and named_engines(doc):
                problems.append(f"{function}: the docstring now names engines {sorted(named_engines(doc))}")
            if says is not None and says not in doc:
                problems.append(f"{function}: the docstring no longer says {says!r}")
            if spec.engines != engines:
                problems.append(f"{function}: declared {spec.engines}, the table says {engines}")
            continue
        if function in TRIGGERS:
            engines, says = TRIGGERS[function]
            if says not in doc or spec.engines != engines:
                problems.append(f"{function}: declared {spec.engines}; expected {engines} because {says!r}")
            continue
        if not named:
            problems.append(f"{function}: no engine in the first sentence {sentence!r}; add it to NO_ENGINE_SENTENCE")
        elif set(spec.engines) != named:
            problems.append(f"{function}: declared {sorted(spec.engines)}, the reference says {sorted(named)}: "
                            f"{sentence!r}")  # fmt: skip
        if "sp" in named and not spec.is_dma:
            problems.append(f"{function}: the reference runs it on DMA engines, the declaration is not a DMA")
    assert checked >= 45, checked
    assert not problems, "\n".join(problems)


_SUPPORTED = re.compile(r"Supported engines: (.*)")
_GEN_PART = re.compile(r"NeuronCore-v(\d)(\+?): ([A-Za-z, ]+)")


@needs_corpus
def test_per_generation_engines_match_the_reference() -> None:
    """The "Supported engines: NeuronCore-v2: Vector. NeuronCore-v3+: GpSimd, Vector." lines and "On NeuronCore
    v2, X is not supported on the Scalar Engine" sentences hold for every generation the instruction has."""
    problems = []
    for function, doc in _docstrings().items():
        spec = _spec_of(function)
        if spec is None:
            continue
        flat = " ".join(doc.split())
        for line in _SUPPORTED.findall(doc):
            for gen, plus, names in _GEN_PART.findall(line):
                want = {ENGINE_WORDS[w.strip().lower()] for w in names.split(",") if w.strip()}
                for g in GENERATIONS:
                    if (g == int(gen) or (plus and g > int(gen))) and g >= spec.since:
                        if set(spec.engines_on(g)) != want:
                            problems.append(f"{function} on v{g}: declared {spec.engines_on(g)}, reference {want}")
        for gen, name in re.findall(r"On NeuronCore[- ]v(\d), \w+ is not supported on the (\w+) Engine", flat):
            if ENGINE_WORDS[name.lower()] in spec.engines_on(int(gen)):
                problems.append(f"{function}: declared on {name} for v{gen}, which the reference excludes")
    assert not problems, "\n".join(problems)


@needs_corpus
def test_operator_restrictions_match_the_reference() -> None:
    """The engine sentences about ALU ops: tensor_scalar's gpsimd "only allowed for rsqrt", tensor_tensor's
    nl.power "runs on the GpSimd engine"."""
    docs = {k: " ".join(v.split()) for k, v in _docstrings().items()}
    assert "`nki.isa.engine.gpsimd` (only allowed for rsqrt)" in docs["tensor_scalar"]
    assert INSTRUCTIONS["tensor_scalar"].engine_ops["pool"] == {"rsqrt"}
    assert "``nl.power``. (Which runs on the GpSimd engine.)" in docs["tensor_tensor"]
    spec = INSTRUCTIONS["tensor_tensor"]
    assert legal_engines(spec, 3, fields={"op": "power"}) == ("pool",)
    assert legal_engines(spec, 3, fields={"op": "add"}) == ("dve", "pool")


@needs_corpus
def test_engine_memories_match_the_reference() -> None:
    """GpSimd never touches PSUM ("Since GpSimd Engine cannot access PSUM"); VectorE and ScalarE read and write
    it; TensorE reads SBUF and writes PSUM."""
    docs = {k: " ".join(v.split()) for k, v in _docstrings().items()}
    assert "Since GpSimd Engine cannot access PSUM" in docs["tensor_tensor"]
    assert not ENGINE_BY_NAME["pool"].psum
    assert "Both the input ``data`` and ``dst`` tiles can be in SBUF or PSUM." in docs["tensor_reduce"]
    for e in ("dve", "act"):
        assert ENGINE_BY_NAME[e].reaches("psum", True) and ENGINE_BY_NAME[e].reaches("psum", False)
    assert "must read the input tile from SBUF and write the transposed result to PSUM" in docs["nc_transpose"]
    assert ENGINE_BY_NAME["pe"].reads == {"sbuf"} and ENGINE_BY_NAME["pe"].writes == {"psum"}
    assert legal_engines(INSTRUCTIONS["tensor_copy"], 3, {"dst": "sbuf", "src": "psum"}) == ("dve", "act")


def test_opcode_engines_derive_from_the_declarations() -> None:
    """An opcode's ISA ops exist on exactly the engines of the instructions lowering to it (the control ones on
    every stream)."""
    for mnemonic, op in OPCODES.items():
        specs = [s for s in INSTRUCTIONS.values() if s.opcode == mnemonic]
        if not specs or "control" in op.traits:
            continue
        assert set(op.engines) == {e for s in specs for e in s.engines}, mnemonic


# -- compiled kernels --------------------------------------------------------------------------------------------


def excluded_placements(neff_bytes: bytes, nc_version: int) -> list[str]:
    """Instructions of a NEFF on an engine no declaration of their opcode allows on ``nc_version``."""
    out = []
    for sg in read_neff(neff_bytes).subgraphs:
        for engine, instrs in sg.engines.items():
            for ins in instrs:
                specs = [s for s in INSTRUCTIONS.values() if s.opcode == ins.opcode]
                if not specs or "control" in ins.spec.traits:
                    continue
                fields = {f.name: ins.value(f.isa_name) for s in specs for f in s.fields
                          if f.kind == "alu" and f.isa_name and f.isa_name in {i.prop for i in ins.spec.imms}}
                if not any(engine in legal_engines(s, nc_version, fields={
                        k: v for k, v in fields.items() if k in {f.name for f in s.fields}}) for s in specs):
                    out.append(f"{sg.name} {engine}.{ins.opcode} (id {ins.inst_id})")  # fmt: skip
    return out


def _load_mamba() -> Any:
    spec = importlib.util.spec_from_file_location("nki_docs_fused_mamba_engines", MAMBA)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not MAMBA.is_file(), reason=f"{MAMBA} (the NKI docs' fused mamba) is absent")
@pytest.mark.parametrize("kernel", ["mamba_v1", "mamba_v2", "mamba_v3"])
def test_fused_mamba_places_nothing_on_an_excluded_engine(kernel: str) -> None:
    import nkic

    nkic.install_nki_alias()
    module = _load_mamba()
    f32 = np.float32
    b, c, s, n = 1, 256, 512, 16  # mamba_torch.py's shapes
    args = tuple(np.zeros(shape, f32) for shape in ((b, c, s), (b, c, s), (c, n), (b, n, s), (b, n, s)))
    neff = compile_kernel(getattr(module, kernel), args).neff
    assert excluded_placements(neff, 3) == []


@pytest.mark.parametrize("target", ["gen2", "gen3"])
def test_flash_attention_places_nothing_on_an_excluded_engine(target: str) -> None:
    from nkic.kernels.flash_attention import flash_attention

    q = np.zeros((1, 1024, 128), ml_dtypes.bfloat16)
    kernel = flash_attention.with_options(target=target)
    neff = compile_kernel(kernel, (q, q, q), {"scale": 0.088}).neff
    assert excluded_placements(neff, TARGETS[target].nc_version) == []


def test_nkilib_attention_cte_places_nothing_on_an_excluded_engine(nkilib) -> None:
    """nki-library's ``attention_cte``, unmodified (skips without the corpus: ``conftest.py``)."""
    attention_cte = nkilib("nkilib.core.attention.attention_cte").attention_cte
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
               for shape in ((1, 1024, 128), (1, 128, 1024), (1, 1024, 128)))  # q (bs, s, d), k (bs, d, s)
    neff = compile_kernel(attention_cte, (q, k, v), {"scale": 0.125}).neff
    assert excluded_placements(neff, 3) == []


# -- engine= at the user's line ------------------------------------------------------------------------------


def _out(t: Any) -> Any:
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize(
    ("body", "target", "message"),
    [
        (lambda t: nisa.memset(dst=t, value=0.0, engine=nisa.scalar_engine), "trn2",
         r"memset: engine=scalar is not allowed: nisa.memset runs on dve, pool \(the NKI ISA reference\), not act"),
        (lambda t: nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add, engine=nisa.scalar_engine), "trn2",
         "nisa.tensor_tensor runs on dve, pool"),
        (lambda t: nisa.tensor_copy(dst=t, src=t, engine=nisa.scalar_engine), "trn1",
         "nisa.tensor_copy runs on act only from NeuronCore-v3, not on NeuronCore-v2"),
        (lambda t: nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0, engine=nisa.gpsimd_engine),
         "trn2", r"POOL \(GpSimdE\) does not compute op0=multiply \(it computes rsqrt\)"),
    ],
)  # fmt: skip
def test_an_excluded_engine_is_an_error_at_the_users_line(body: Any, target: str, message: str) -> None:
    @nki.jit(platform_target=target)
    def kernel(x):
        t = nl.load(x)
        body(t)
        return _out(t)

    with pytest.raises(NkiError, match=message) as e:
        kernel.trace(np.zeros((128, 4), np.float32))
    assert e.value.file == __file__


def test_a_legal_engine_is_kept() -> None:
    @nki.jit(platform_target="trn2")
    def kernel(x):
        t = nl.load(x)
        nisa.memset(dst=t, value=3.0, engine=nisa.gpsimd_engine)
        nisa.tensor_copy(dst=t, src=t, engine=nisa.scalar_engine)
        return _out(t)

    got = nki.simulate(kernel)(np.zeros((128, 4), np.float32))
    np.testing.assert_array_equal(got, np.full((128, 4), 3.0, np.float32))


def test_pool_only_instruction_on_psum_is_an_error() -> None:
    """An instruction whose only engines cannot reach its operand's memory has nowhere to run."""

    @nki.jit(platform_target="trn2")
    def kernel(x):
        t = nl.load(x)
        p = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=t)
        r = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(dst=r, op=nl.add, data=p)
        return _out(t)

    with pytest.raises(NkiError, match=r"cannot read PSUM \('data'\)") as e:
        kernel.trace(np.zeros((128, 4), np.float32))
    assert e.value.file == __file__
