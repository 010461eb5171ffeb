"""The machine and its instructions, as plain Python: the bottom layer of nkic.

``target`` imports no xDSL and nothing else of nkic. It holds the vocabularies (dtypes, ALU ops, activation
functions, reduce commands, each with explicit binary codes), one ``Target`` per NeuronCore generation (engines,
clocks, semaphores, DMA queues, memories, limits, instruction availability), the ISA opcode specs and the NKI
instruction declarations. Dialects, passes, the frontend and the runtime all read from here.
"""

from nkic.target import instructions, isa, machine, vocab
from nkic.target.instructions import INSTRUCTIONS, Field, InstrSpec, Role
from nkic.target.isa import OPCODES, Imm, Instr, Operand, OpSpec
from nkic.target.machine import DEFAULT_TARGET, ENGINES, TARGETS, Engine, Target, get_target

__all__ = [
    "instructions", "isa", "machine", "vocab", "INSTRUCTIONS", "Field", "InstrSpec", "Role", "OPCODES", "Imm",
    "Instr", "Operand", "OpSpec", "DEFAULT_TARGET", "ENGINES", "TARGETS", "Engine", "Target", "get_target",
]  # fmt: skip
