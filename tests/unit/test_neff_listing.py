"""The NEFF writer's fast JSON paths write exactly what ``json.dumps(indent=1, sort_keys=True)`` writes.

``_dumps`` (every JSON member) against the standard library on generated JSON values, and ``_ListingWriter`` (the
engine listings, written from memoised pieces) against ``_dumps(_engine_json(...))`` on generated instruction
streams: repeated and distinct operands, immediates, flags, semaphores, DMA transfers of every descriptor kind.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkic.runtime.encoding import Instr, Operand, f32_bits
from nkic.runtime.neff import ENGINE_MEMBERS, _dumps, _engine_json, _ListingWriter

_KEYS = st.text(min_size=0, max_size=6)  # any str, brackets, quotes, backslashes and non-ASCII included
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _KEYS
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=30,
)


def _reference(value: object) -> bytes:
    return (json.dumps(value, indent=1, sort_keys=True, allow_nan=False) + "\n").encode()


@settings(max_examples=150, deadline=None)
@given(_VALUES)
def test_dumps_is_json_dumps(value: object) -> None:
    assert _dumps(value) == _reference(value)


def test_dumps_odd_values() -> None:
    for value in ({1: "int key", 2: [1]}, {"a": [float("1e300"), -0.0]}, [[], {}, [[]]], "\u2028\x00"):
        assert _dumps(value) == _reference(value)
    with pytest.raises(ValueError):
        _dumps([{"x": float("inf")}])


_NAMES = {0: "lhsT", 1: "rhs", 2: 'o"ut[1]'}


@st.composite
def _operands(draw: st.DrawFn) -> Operand:
    memory = draw(st.sampled_from(["sbuf", "psum", "hbm", "none"]))
    dtype = draw(st.sampled_from(["bfloat16", "float32"]))
    pairs = draw(st.lists(st.tuples(st.integers(0, 4096), st.integers(1, 512)), min_size=1, max_size=3))
    if memory == "none":  # an iota pattern: no address in its text
        return Operand("none", dtype, tuple(pairs))
    if memory == "hbm":
        return Operand("hbm", dtype, tuple(pairs), address=draw(st.sampled_from([0, 256, 1 << 20])),
                       var_id=draw(st.integers(0, 3)))  # fmt: skip
    return Operand(memory, dtype, ((1, draw(st.sampled_from([32, 128]))), *pairs[:2]),
                   start_partition=draw(st.sampled_from([0, 32])), address=draw(st.sampled_from([0, 512])))  # fmt: skip


@st.composite
def _instrs(draw: st.DrawFn) -> Instr:
    kind = draw(st.sampled_from(["dma", "dma_compute", "act", "matmul", "copy"]))
    ops = st.one_of(_operands(), st.none())
    sems = st.none() | st.integers(0, 40)
    common = {"signal_sem": draw(sems), "inst_id": draw(st.integers(0, 9)), "wait_value": draw(st.integers(0, 3))}
    common["wait_sem"] = draw(sems)
    if kind == "dma":
        return Instr("DMA_COPY", "sp", (draw(_operands()), draw(_operands())), (draw(st.integers(0, 3)),),
                     flags=draw(st.integers(0, 3)), **common)  # fmt: skip
    if kind == "dma_compute":
        srcs = tuple(draw(ops) for _ in range(draw(st.integers(0, 3))))
        return Instr("DMA_COMPUTE", "sp", (draw(_operands()), draw(_operands()), *srcs),
                     (draw(st.integers(0, 3)), draw(st.integers(0, 2))), **common)  # fmt: skip
    if kind == "act":
        imms = (draw(st.integers(0, 3)), f32_bits(draw(st.sampled_from([0.5, -2.0, 1e-30]))))
        return Instr("ACTIVATE", "act", (draw(_operands()), draw(_operands()), draw(ops)), imms, **common)
    if kind == "matmul":
        return Instr("MATMUL", "pe", (draw(_operands()), draw(_operands()), draw(_operands())),
                     tuple(draw(st.lists(st.integers(0, 128), max_size=4))), flags=draw(st.integers(0, 31)),
                     **common)  # fmt: skip
    return Instr("TENSOR_COPY", "dve", (draw(_operands()), draw(_operands())), **common)


@settings(max_examples=25, deadline=None)
@given(st.lists(_instrs(), max_size=8), st.sampled_from(list(ENGINE_MEMBERS)))
def test_listing_writer_is_dumps_of_engine_json(instrs: list[Instr], engine: str) -> None:
    moved = [replace(i, operands=tuple(o and replace(o, address=o.address + 64) for o in i.operands)) for i in instrs]
    stream = instrs + moved + instrs[: len(instrs) // 2]  # repeats, and the same at other addresses: memo, templates
    writer = _ListingWriter(_NAMES)
    for _ in range(2):  # a second stream through the same writer (the next subgraph) reuses its memos
        assert writer.listing(engine, stream) == _dumps(_engine_json(engine, stream, _NAMES))
