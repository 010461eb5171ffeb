"""nkic's ISA level: the structural ``isa`` dialect plus one instruction dialect per engine.

``ISA_OPS[(engine, format_key)]`` is the op class of an instruction (``format_key`` = the lower-case ISA mnemonic,
e.g. ``("act", "activate")``); ``from_instr`` turns a decoded ``runtime.encoding.Instr`` back into an op.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from nkic.dialects.isa.act import IsaAct
from nkic.dialects.isa.base import FORMATS, IsaInst, IsaLocAttr
from nkic.dialects.isa.dve import IsaDve
from nkic.dialects.isa.pe import IsaPe
from nkic.dialects.isa.pool import IsaPool
from nkic.dialects.isa.program import CoreOp, Isa, StreamOp, VarOp, core_streams, core_vars
from nkic.dialects.isa.sp import IsaSp
from nkic.runtime.encoding import Instr

__all__ = [
    "Isa", "IsaPe", "IsaAct", "IsaDve", "IsaPool", "IsaSp", "DIALECTS", "ENGINE_DIALECTS", "ISA_OPS", "FORMATS",
    "IsaInst", "IsaLocAttr", "CoreOp", "VarOp", "StreamOp", "core_streams", "core_vars", "from_instr",
]  # fmt: skip

ENGINE_DIALECTS: dict[str, Dialect] = {"pe": IsaPe, "act": IsaAct, "dve": IsaDve, "pool": IsaPool, "sp": IsaSp}
DIALECTS: dict[str, Dialect] = {"isa": Isa, **{d.name: d for d in ENGINE_DIALECTS.values()}}


def _op_table() -> dict[tuple[str, str], type[IsaInst]]:
    table: dict[tuple[str, str], type[IsaInst]] = {}
    for dialect in ENGINE_DIALECTS.values():
        for op in dialect.operations:
            assert issubclass(op, IsaInst)
            table[(op.ENGINE, op.format_key())] = op
    return table


ISA_OPS: dict[tuple[str, str], type[IsaInst]] = _op_table()


def from_instr(instr: Instr) -> IsaInst:
    """The op for a decoded instruction (inverse of ``IsaInst.to_instr``); ValueError when none can hold it."""
    op = ISA_OPS.get((instr.engine, instr.opcode.lower()))
    if op is None:
        raise ValueError(f"no ISA op for {instr.opcode} on engine '{instr.engine}'")
    return op.from_instr(instr)
