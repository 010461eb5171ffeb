"""ISA record codec: round trips, determinism, operand dedupe, text forms and malformed-stream rejection."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nkic.target.isa import MAX_SLOTS, OPCODE_BY_CODE, OPCODES
from nkic.target.machine import NUM_SEMAPHORES
from nkic.target.vocab import ACT_FUNCS, ALU_OPS, DTYPE_CODES, DTYPES, ISA_MEMORIES, REDUCE_CMDS, Vocabulary
from nkic.runtime.encoding import (
    ENGINES, MEMORIES, OP_SPECS, Instr, Operand, bits_f32, bits_i32, decode_stream, disassemble, encode_stream,
    engine_sem, f32_bits, i32_bits, imm_values, queue_sem, to_json,
)  # fmt: skip
from nkic.runtime.neff import NeffFormatError

U32 = st.integers(0, 0xFFFFFFFF)
SEMS = st.one_of(st.none(), st.sampled_from([engine_sem(e) for e in ENGINES] + [queue_sem(q) for q in range(16)]))
# The codes each enum vocabulary assigns (explicit, not necessarily contiguous), and one code none of them has.
ENUM_CODES = {"alu": sorted(ALU_OPS.codes.values()), "act": sorted(ACT_FUNCS.codes.values()),
              "reduce_cmd": sorted(REDUCE_CMDS.codes.values())}  # fmt: skip
BAD_ACT_CODE = next(c for c in range(256) if ACT_FUNCS.name_of(c) is None)

operands = st.builds(
    Operand,
    memory=st.sampled_from(MEMORIES),
    dtype=st.sampled_from(list(DTYPES)),
    pattern=st.lists(st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), U32), min_size=1, max_size=5),
    start_partition=st.integers(0, 255),
    address=U32,
    var_id=st.integers(0, 0xFFFF),
)


@st.composite
def instrs_for(draw: st.DrawFn, engine: str) -> Instr:
    name = draw(st.sampled_from(sorted(n for n, s in OP_SPECS.items() if engine in s.engines)))
    spec = OP_SPECS[name]
    # A small operand pool makes dedupe across instructions likely.
    ops = draw(st.lists(st.one_of(st.none(), operands), max_size=len(spec.slots)))
    imms = [draw(st.sampled_from(ENUM_CODES[kind])) if kind in ENUM_CODES else draw(U32) for kind in (i.kind for i in spec.imms)]
    imms += draw(st.lists(U32, max_size=9 - len(imms)))
    return Instr(
        name, engine, tuple(ops), tuple(imms), draw(st.integers(0, (1 << len(spec.flags)) - 1)), draw(SEMS),
        draw(U32), draw(SEMS), draw(U32),
    )  # fmt: skip


@st.composite
def streams(draw: st.DrawFn) -> tuple[str, list[Instr]]:
    engine = draw(st.sampled_from(ENGINES))
    items = draw(st.lists(instrs_for(engine), max_size=12))
    return engine, items + draw(st.lists(st.sampled_from(items), max_size=3)) if items else items


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_round_trip(stream: tuple[str, list[Instr]]) -> None:
    engine, items = stream
    data = encode_stream(engine, items)
    assert decode_stream(data) == (engine, items)
    assert encode_stream(engine, items) == data  # deterministic
    assert len(disassemble(items).splitlines()) == len(items)
    json.dumps(to_json(items))


@settings(max_examples=80, deadline=None)
@given(streams(), st.data())
def test_mutated_streams_never_crash(stream: tuple[str, list[Instr]], data: st.DataObject) -> None:
    raw = bytearray(encode_stream(*stream))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] ^= 1 << data.draw(st.integers(0, 7))
    try:
        decode_stream(bytes(raw))
    except NeffFormatError:
        pass


SB = Operand("sbuf", "float32", ((1, 128), (1, 512)))
PS = Operand("psum", "float32", ((1, 128), (1, 512)))


def _matmul_stream() -> bytes:
    ins = Instr("MATMUL", "pe", (PS, SB, SB), flags=1, signal_sem=engine_sem("pe"))
    return encode_stream("pe", [ins, ins])


def test_layout_and_dedupe() -> None:
    data = _matmul_stream()
    assert data[:4] == b"NKIS" and struct.unpack_from("<HBBII", data, 4) == (1, 0, 0, 2, 2)
    assert len(data) == 32 + 2 * 64 + 2 * 56  # two distinct operands shared by both records
    assert struct.unpack_from("<BBHBB", data, 32) == (0x02, 0, 1, 0xFF, 0)
    assert struct.unpack_from("<6H", data, 32 + 16) == (0, 1, 1, 0xFFFF, 0xFFFF, 0xFFFF)


def test_canonical_form_and_accessors() -> None:
    a = Instr("TENSOR_SCALAR", "dve", (SB, SB, None), (3, f32_bits(2.0), 0, 0))
    assert a == Instr("TENSOR_SCALAR", "dve", (SB, SB), (3, f32_bits(2.0)))
    assert a.imm(7) == 0 and a.operand("operand0") is None and a.operand("src") == SB
    assert imm_values(a) == {"op0": "multiply", "operand0": 2.0, "op1": "bypass", "operand1": 0.0}


def test_scalar_helpers() -> None:
    assert f32_bits(1.0) == 0x3F800000 and bits_f32(0x3F800000) == 1.0
    assert i32_bits(-1) == 0xFFFFFFFF and bits_i32(0xFFFFFFFF) == -1
    assert queue_sem(0) == 8 and queue_sem(15) == 23 and engine_sem("sp") == 4
    with pytest.raises(ValueError):
        queue_sem(16)


def test_disassemble_and_json() -> None:
    ins = Instr("DMA_COPY", "sp", (SB, Operand("hbm", "bfloat16", ((64, 128), (1, 64)), var_id=3)), (2,),
                wait_sem=engine_sem("act"), wait_value=4, signal_sem=queue_sem(2), inst_id=9)  # fmt: skip
    text = disassemble([ins], {3: "x"})
    assert "DMA_COPY" in text and "hbm:x" in text and "wait S[1](act)>=4" in text and "S[10](q2)" in text
    (entry,) = to_json([ins], {3: "x"})
    assert entry["mnemonic"] == "DMA_COPY" and entry["imms"] == {"queue": 2}
    assert entry["operands"]["src"]["var"] == "x" and entry["wait"] == {"sem": 1, "value": 4}


@pytest.mark.parametrize(
    "ins",
    [
        Instr("MATMUL", "dve", (PS, SB, SB)),  # wrong engine for the opcode
        Instr("BOGUS", "pe"),
        Instr("MEMSET", "dve", (SB, SB)),  # too many operands
        Instr("MEMSET", "dve", (SB,), flags=2),  # undefined flag bit
        Instr("ACTIVATE", "act", (SB, SB), (BAD_ACT_CODE,)),  # bad enum code
        Instr("SEM_WAIT", "pe", wait_sem=5),  # not a semaphore id
        Instr("SEM_WAIT", "pe", imms=(1 << 32,)),
    ],
)
def test_encode_rejects_invalid(ins: Instr) -> None:
    with pytest.raises(ValueError):
        encode_stream(ins.engine if ins.engine in ENGINES else "pe", [ins])


def test_operand_rejects_invalid() -> None:
    with pytest.raises(ValueError):
        Operand("dram", "float32", ((1, 1),))
    with pytest.raises(ValueError):
        Operand("sbuf", "float64", ((1, 1),))
    with pytest.raises(ValueError):
        Operand("sbuf", "float32", ((1, 1),) * 6)


def _past(vocabulary: Vocabulary) -> int:
    """A code no name of ``vocabulary`` has (the next after the largest): adding a name moves it along."""
    return max(vocabulary.codes.values()) + 1


# the first one-byte opcode no OpSpec has
_UNUSED_OPCODE = next(c for c in range(256) if c not in OPCODE_BY_CODE)


def _patched(data: bytes, offset: int, fmt: str, *values: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


REC, OPS = 32, 32 + 2 * 64


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: b"XXXX" + d[4:], "magic"),
        (lambda d: _patched(d, 4, "<H", 2), "version"),
        (lambda d: _patched(d, 6, "<B", 7), "engine id"),
        (lambda d: d[:-1], "size"),
        (lambda d: d + b"\0", "size"),
        (lambda d: d[:10], "shorter"),
        (lambda d: _patched(d, 8, "<I", 3), "size"),
        (lambda d: _patched(d, REC, "<B", _UNUSED_OPCODE), "unknown opcode"),
        (lambda d: _patched(d, REC, "<B", 0x07), "not allowed"),  # ACTIVATE in the PE stream
        (lambda d: _patched(d, REC + 1, "<B", 2), "engine id"),
        (lambda d: _patched(d, REC + 16, "<H", 5), "bad index"),
        (lambda d: _patched(d, REC + 4, "<B", NUM_SEMAPHORES), "semaphore"),
        (lambda d: _patched(d, REC + 2, "<H", 0x40), "flag"),  # MATMUL defines bits 0..4
        (lambda d: _patched(d, OPS, "<B", _past(ISA_MEMORIES)), "memory code"),
        (lambda d: _patched(d, OPS + 1, "<B", _past(DTYPE_CODES)), "dtype code"),
        (lambda d: _patched(d, OPS + 3, "<B", 5), "free dims"),
    ],
)
def test_decode_rejects_malformed(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(NeffFormatError, match=message):
        decode_stream(mutate(_matmul_stream()))


# An opcode with slots to spare (fewer than MAX_SLOTS), no immediates or flags: two tile operands encode it.
_SPARE = next(s for s in OPCODES.values() if 2 <= len(s.slots) < MAX_SLOTS and not s.imms and not s.flags)


def test_decode_rejects_an_operand_in_a_slot_the_opcode_lacks() -> None:
    data = encode_stream(_SPARE.engines[0], [Instr(_SPARE.mnemonic, _SPARE.engines[0], (SB, SB))])
    decode_stream(data)  # valid as written
    first_missing = REC + 16 + 2 * len(_SPARE.slots)  # the record's slot words start at byte 16, two bytes each
    with pytest.raises(NeffFormatError, match="bad index"):
        decode_stream(_patched(data, first_missing, "<H", 0))


def test_decode_rejects_bad_enum_immediate() -> None:
    data = encode_stream("act", [Instr("ACTIVATE", "act", (SB, SB), (1,))])
    with pytest.raises(NeffFormatError, match="act code"):
        decode_stream(_patched(data, 32 + 28, "<I", BAD_ACT_CODE))
