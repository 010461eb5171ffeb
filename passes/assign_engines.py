"""``assign-engines``: choose the engine of every instruction BIR codegen left ``unassigned``.

Fixed homes: DMAs on SP, matmul and PSUM-destined transposes on PE, activation on ACT, iota/affine_select on
Pool, reductions/reciprocal/fused vector ops on DVE. Elementwise ops that several engines can run go to the
least-loaded legal engine, never to an engine that cannot reach PSUM when an operand is there. Load is the busy
time the shared cost model (``nkic.target.costs``, the simulator's) gives each instruction on its engine. A user's
engine hint is kept, and rejected when that engine cannot run the op.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.common import string_attr
from nkic.dialects.instructions import str_field
from nkic.passes.lowering import cost_ns
from nkic.target.machine import ENGINE_BY_NAME, TARGETS, Target, get_target


def legal_engines(inst: bir.BirInst, locs: dict[str, bir.MemLocOp]) -> tuple[str, ...]:
    """The declaration's engines, minus those that cannot reach the operands' memories or run the ALU ops."""
    engines = inst.SPEC.engines
    if any(locs[r].mem == "psum" for r in inst.ref_names):
        engines = tuple(e for e in engines if ENGINE_BY_NAME[e].psum)
    if inst.OPNAME == "transpose":  # PE transposes land in PSUM, VectorE ones in SBUF
        engines = ("pe",) if locs[inst.ref("dst") or ""].mem == "psum" else ("dve",)
    if inst.OPNAME == "tensor_scalar":  # ScalarE's scalar stages have a reduced ALU
        ops = {str_field(inst, "op0"), str_field(inst, "op1") or "bypass"}
        engines = tuple(e for e in engines if ENGINE_BY_NAME[e].alu_ops is None or ops <= ENGINE_BY_NAME[e].alu_ops)
    return engines


def assign(fn: bir.FunctionOp, target: Target) -> None:
    """Least-loaded legal engine for every unassigned instruction; load is the cost model's busy time."""
    locs = fn.memlocs()
    load = dict.fromkeys(ENGINE_BY_NAME, 0.0)
    for inst in fn.instructions():
        legal = legal_engines(inst, locs)
        engine = inst.engine.data
        if engine == "unassigned":
            engine = min(legal, key=lambda e: (load[e], legal.index(e)))
        elif engine not in legal:
            raise PassFailedException(
                f"instruction {inst.inst_id} ({inst.OPNAME}"
                f"{', ' + inst.loc.data if inst.loc else ''}) cannot run on {engine}; "
                f"legal engines: {', '.join(legal)}"
            )
        inst.properties["engine"] = string_attr(engine)
        load[engine] += cost_ns(inst, locs, target, False, engine)


@dataclass(frozen=True)
class AssignEnginesPass(ModulePass):
    name = "assign-engines"
    target: str = "gen3"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.target not in TARGETS:
            raise PassFailedException(f"unknown target '{self.target}' (expected {', '.join(TARGETS)})")
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            assign(fn, get_target(self.target))
