"""``dependency-analysis`` keeps its chunk tables as intervals: the edges must be exactly those of tables kept chunk
by chunk (the previous implementation, here as the reference), on random access sequences and on real kernels."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp

from nkic.dialects import bir
from nkic.dialects.instructions import reads_dst
from nkic.dialects.traits import IsControl
from nkic.compiler.driver import make_context
from nkic.frontend import TensorSpec
from nkic.kernels.flash_attention import flash_attention
from nkic.kernels.matmul import matmul
from nkic.library import RESOLVER
from nkic.passes import dependency_analysis as da
from nkic.passes.dependency_analysis import DependencyAnalysisPass, _ChunkTables, accesses, footprint_chunks
from nkic.passes.pipelines import backend, frontend_lowering
from nkic.passes.resolver import use_resolver

Chunk = tuple[object, int]


def _reference(seq: list[tuple[set[Chunk], set[Chunk]]]) -> list[dict[int, str]]:
    """Edges from per-chunk tables: flow on the last writer of a read chunk, output on the last writer of a written
    chunk, anti on its readers since; an instruction that is both an output and an anti producer is output."""
    writer: dict[Chunk, int] = {}
    readers: dict[Chunk, list[int]] = {}
    out = []
    for me, (reads, writes) in enumerate(seq):
        flow = {writer[c] for c in reads if c in writer}
        output = {writer[c] for c in writes if c in writer}
        anti = {r for c in writes for r in readers.get(c, ()) if r != me}
        edges = {d: "anti" for d in anti}
        edges.update({d: "output" for d in output})
        edges.update({d: "flow" for d in flow})
        out.append(edges)
        for c in reads:
            readers.setdefault(c, []).append(me)
        for c in writes:
            writer[c] = me
            readers[c] = []
    return out


_span = st.tuples(st.sampled_from([("hbm", "a"), ("hbm", "b"), ("sbuf", "")]), st.integers(0, 30),
                  st.integers(1, 12)).map(lambda t: (t[0], t[1], t[1] + t[2]))  # fmt: skip
_inst = st.tuples(st.lists(_span, max_size=3), st.lists(_span, max_size=2))


@settings(max_examples=150, deadline=None)
@given(st.lists(_inst, min_size=1, max_size=25))
def test_interval_tables_give_the_chunk_tables_edges(seq: list[tuple[list, list]]) -> None:
    def chunks(spans: list) -> set[Chunk]:
        return {(key, k) for key, lo, hi in spans for k in range(lo, hi)}

    want = _reference([(chunks(r), chunks(w)) for r, w in seq])
    for bits in (da.PAGE_BITS, 2):  # the real pages, and pages of 4 chunks (spans cross page boundaries)
        saved, da.PAGE_BITS = da.PAGE_BITS, bits
        try:
            tables = _ChunkTables()
            for me, (reads, writes) in enumerate(seq):
                got: dict[int, str] = {}
                tables.edges(me, reads, writes, got)
                tables.record(me, reads, writes)
                assert got == want[me], f"instruction {me}, pages of {1 << bits} chunks"
        finally:
            da.PAGE_BITS = saved


def _before_dependency_analysis(traced: object) -> ModuleOp:
    module = traced.module.clone()  # type: ignore[attr-defined]
    ctx = make_context()
    with use_resolver(RESOLVER):
        for p in (*frontend_lowering(), *backend()):
            if isinstance(p, DependencyAnalysisPass):
                return module
            p.apply(ctx, module)
    raise AssertionError("no dependency-analysis in the pipeline")


def _chunk_edges(fn: bir.FunctionOp) -> list[set[int]]:
    """The edges on memory alone, from chunk sets, per instruction (control instructions restart the tables)."""
    locs = fn.memlocs()
    seq: list[tuple[set[Chunk], set[Chunk]]] = []
    out: list[set[int]] = []
    insts = list(fn.instructions())
    for inst in insts + [None]:
        if inst is None or inst.has_trait(IsControl):
            ids = [i.inst_id for i in insts[len(out) : len(out) + len(seq)]]
            out += [{ids[d] for d in e} for e in _reference(seq)]
            seq = []
            if inst is not None:
                out.append(set())
            continue
        reads: set[Chunk] = set()
        writes: set[Chunk] = set()
        for role in inst.role_names:
            cs = {((m, v), k) for m, v, k in footprint_chunks(inst, role, locs)}
            (writes if role in inst.SPEC.write_roles else reads).update(cs)
            if role == "dst" and reads_dst(inst):
                reads.update(cs)
        seq.append((reads, writes))
    return out


def _interval_edges(fn: bir.FunctionOp) -> list[set[int]]:
    locs = fn.memlocs()
    tables, out = _ChunkTables(), []
    for inst in fn.instructions():
        if inst.has_trait(IsControl):
            tables = _ChunkTables()
            out.append(set())
            continue
        edges: dict[int, str] = {}
        reads, writes = accesses(inst, locs)
        tables.edges(inst.inst_id, reads, writes, edges)
        tables.record(inst.inst_id, reads, writes)
        out.append(set(edges))
    return out


def test_real_kernels_memory_edges_match_chunk_sets() -> None:
    """The memory edges are exactly the chunk sets' and all are in the result (state and explicit edges come on
    top of them)."""
    for traced in (matmul.trace(TensorSpec((256, 128), "bfloat16"), TensorSpec((256, 512), "bfloat16")),
                   flash_attention.trace(*[TensorSpec((1, 512, 64), "bfloat16")] * 3, scale=0.125)):  # fmt: skip
        module = _before_dependency_analysis(traced)
        DependencyAnalysisPass().apply(make_context(), module)
        for fn in [f for f in module.ops if isinstance(f, bir.FunctionOp)]:
            want = _chunk_edges(fn)
            assert _interval_edges(fn) == want
            for inst, w in zip(fn.instructions(), want, strict=True):
                got = {d for _, d in inst.dep_list}
                assert w <= got, f"instruction {inst.inst_id}: chunk edges {sorted(w - got)} missing"
