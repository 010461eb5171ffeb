"""One record per vocabulary entry (target/vocab.py): every table the compiler reads is that record's projection,
every part of nkic that needs a dtype or an ALU op finds it there, and runtime/ISA_FORMAT.md's code tables agree.
Adding a dtype or an ALU op is one record; these tests then check it reached everything."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from nkic import api as nki
from nkic.dialects.common import dtype_of_element_type, element_type
from nkic.frontend.ops import TOKENS, alu_op
from nkic.runtime import semantics
from nkic.target.vocab import (
    ACT_FUNCS,
    ACT_RECORDS,
    ALU_OPS,
    ALU_RECORDS,
    DTYPE_CODES,
    DTYPE_RECORDS,
    DTYPES,
    FLOAT_DTYPES,
    PACKED_DTYPES,
    REDUCE_CMDS,
    REDUCE_RECORDS,
    dtype_size,
)

ROOT = Path(__file__).resolve().parents[2]
nl = nki.language


def test_the_tables_are_the_records() -> None:
    assert list(DTYPES) == [r.name for r in DTYPE_RECORDS] == list(DTYPE_CODES)
    assert all(DTYPE_CODES.code(r.name) == r.code and DTYPES[r.name] == r.storage for r in DTYPE_RECORDS)
    assert FLOAT_DTYPES == {r.name for r in DTYPE_RECORDS if r.is_float}
    assert set(PACKED_DTYPES) == {r.name for r in DTYPE_RECORDS if r.packed is not None}
    assert [(r.name, r.code) for r in ALU_RECORDS] == list(ALU_OPS.codes.items())
    assert [(r.name, r.code) for r in ACT_RECORDS] == list(ACT_FUNCS.codes.items())
    assert [(r.name, r.code) for r in REDUCE_RECORDS] == list(REDUCE_CMDS.codes.items())
    assert semantics.UNARY_OPS == {r.name for r in ALU_RECORDS if r.unary}
    assert semantics.BITVEC_OPS == {r.name for r in ALU_RECORDS if r.bitvec}
    assert semantics.INT_EXACT_OPS == {r.name for r in ALU_RECORDS if r.int_exact}
    assert semantics.ALU_FUNCS == {r.name: r.fn for r in ALU_RECORDS}  # the arithmetic is the record's too


@pytest.mark.parametrize("record", DTYPE_RECORDS, ids=lambda r: r.name)
def test_every_dtype_reaches_the_language_and_the_ir(record) -> None:  # type: ignore[no-untyped-def]
    assert str(getattr(nl, record.name)) == record.name  # nl.<name>
    assert dtype_of_element_type(element_type(record.name)) == record.name  # penguin's element type, one-to-one
    assert dtype_size(record.name) == record.storage.itemsize
    assert record.is_float == (record.packed is None and _has_finfo(record.storage))  # a float iff its storage is
    if record.packed is not None:  # count values of ``bits`` fill the storage word
        assert record.packed.count * record.packed.bits == 8 * record.storage.itemsize


def _has_finfo(storage: np.dtype) -> bool:
    try:
        ml_dtypes.finfo(storage)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("record", ALU_RECORDS, ids=lambda r: r.name)
def test_every_alu_op_is_an_nl_operator(record) -> None:  # type: ignore[no-untyped-def]
    assert alu_op(TOKENS[record.name]) == record.name  # op=nl.<name>
    if record.tile_function:
        assert callable(getattr(nl, record.name))  # nl.<name>(x, y)
    assert not (record.unary and record.tile_function)  # a binary tile function takes two operands


def _isa_format_codes(label: str) -> list[tuple[str, int]]:
    """The ``code name`` pairs of the paragraph of runtime/ISA_FORMAT.md that starts with ``label:``
    (parenthesised notes left out)."""
    text = (ROOT / "runtime" / "ISA_FORMAT.md").read_text()
    start = text.index(f"\n{label}: ") + len(label) + 3
    paragraph = re.sub(r"\([^)]*\)", "", text[start : text.index("\n\n", start)].replace("\n", " "))
    return [(name, int(code, 0)) for code, name in re.findall(r"(0x[0-9a-f]+|\d+) ([a-z_][a-z0-9_]*)", paragraph)]


@pytest.mark.parametrize("label,records", [("dtype", DTYPE_RECORDS), ("ALU ops", ALU_RECORDS),
                                           ("Activation functions", ACT_RECORDS), ("reduce_cmd", REDUCE_RECORDS)])
def test_isa_format_lists_the_records(label: str, records) -> None:  # type: ignore[no-untyped-def]
    pairs = _isa_format_codes(label)
    if label == "dtype":  # its last sentence ("Packed dtypes count elements in words") names no code
        pairs = [p for p in pairs if p[0] in DTYPES]
    assert pairs == [(r.name, r.code) for r in records]


def test_numpy_storage_round_trips() -> None:
    from nkic.target.vocab import dtype_from_numpy

    for record in DTYPE_RECORDS:
        if record.packed is None and record.name not in ("bool_", "tfloat32"):  # those share another's storage
            assert dtype_from_numpy(np.dtype(record.storage)) == record.name
