"""The ``dma`` table of a NEFF's SP stream: one descriptor per queue transfer (DMA_COPY, DMA_COMPUTE), none for
the DMA-triggered instructions whose data goes elsewhere (DEBUG_PRINT to the host, a collective to its group) or
for compute instructions. The writer tells them apart by the opcodes' declared traits and immediates."""

from __future__ import annotations

from nkic.runtime.neff import dma_descriptors
from nkic.target.isa import Instr, Operand, encode_imm


def _hbm(var_id: int) -> Operand:
    return Operand("hbm", "float32", ((4, 2), (1, 4)), var_id=var_id)


def _sbuf() -> Operand:
    return Operand("sbuf", "float32", ((1, 2), (1, 4)))


def test_only_queue_transfers_have_descriptors() -> None:
    add = encode_imm("alu", "add")
    stream = [
        Instr("DMA_COPY", "sp", (_sbuf(), _hbm(0)), (1,)),
        Instr("DMA_COMPUTE", "sp", (_hbm(1), _hbm(0), _hbm(2)), (2, add)),
        Instr("DEBUG_PRINT", "sp", (_sbuf(),), (3,)),
        Instr("ALL_REDUCE", "sp", (_hbm(1), _hbm(0)), (0, 0, 4, add)),
        Instr("TENSOR_COPY", "sp", (_sbuf(), _sbuf())),
    ]
    table = dma_descriptors(stream, {0: "a", 1: "out", 2: "b"})
    assert [(e["id"], e["queue"], e["desc"]["op"]) for e in table] == [(0, "q1", "copy"), (1, "q2", "compute_add")]
    assert table[1]["desc"]["from1"] == "b"
