"""nkic's ISA level: the structural ``isa`` dialect plus one instruction dialect per engine (generated).

``ISA_OPS[(engine, key)]`` is the op class of an instruction (``key`` = the lower-case ISA mnemonic, e.g.
``("act", "activate")``); ``from_instr`` turns a decoded ``nkic.target.isa.Instr`` back into an op.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Dialect

from nkic.dialects.isa.base import IsaInst, IsaLocAttr
from nkic.dialects.isa.ops import ENGINE_DIALECTS, FORMATS, ISA_OPS, isa_op
from nkic.dialects.isa.program import CoreOp, Isa, StreamOp, VarOp, core_streams, core_vars
from nkic.target.isa import Instr

__all__ = [
    "Isa", "DIALECTS", "ENGINE_DIALECTS", "ISA_OPS", "FORMATS", "IsaInst", "IsaLocAttr", "CoreOp", "VarOp",
    "StreamOp", "core_streams", "core_vars", "from_instr", "isa_op",
]  # fmt: skip

DIALECTS: dict[str, Dialect] = {"isa": Isa, **{d.name: d for d in ENGINE_DIALECTS.values()}}


def from_instr(instr: Instr, strings: Sequence[str] | None = None) -> IsaInst:
    """The op for a decoded instruction (inverse of ``IsaInst.to_instr``; ``strings``: the NEFF's string table);
    ValueError when none can hold it."""
    op = isa_op(instr.engine, instr.opcode)
    if op is None:
        raise ValueError(f"no ISA op for {instr.opcode} on engine '{instr.engine}'")
    return op.from_instr(instr, strings)
