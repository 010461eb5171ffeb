"""``assign-engines``: choose the engine of every instruction BIR codegen left ``unassigned``.

Fixed homes: DMAs on SP, matmul and PSUM-destined transposes on PE, activation on ACT, iota/affine_select on
Pool, reductions/reciprocal/fused vector ops on DVE. Elementwise ops that several engines can run go to the
least-loaded legal engine (estimated busy time), never to Pool when an operand is in PSUM. A user's engine
hint is kept, and rejected when that engine cannot run the op.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.instructions import str_field
from nkic.target.machine import DEFAULT_TARGET, get_target

CLOCK_GHZ = get_target(DEFAULT_TARGET).clock_ghz  # the cost model's clocks
ACT_TENSOR_SCALAR_OPS = {"multiply", "add", "subtract", "bypass"}


def _free_elems(inst: bir.BirInst) -> int:
    ap = inst.ap("dst")
    assert ap is not None
    return max(1, ap.num_elements // ap.shape[0])


def legal_engines(inst: bir.BirInst, locs: dict[str, bir.MemLocOp]) -> tuple[str, ...]:
    engines = inst.SPEC.engines
    mems = {locs[r].mem for r in inst.ref_names}
    if "psum" in mems:
        engines = tuple(e for e in engines if e != "pool")
    if inst.OPNAME == "transpose":
        engines = ("pe",) if locs[inst.ref("dst") or ""].mem == "psum" else ("dve",)
    if inst.OPNAME == "tensor_scalar" and not {str_field(inst, "op0"), str_field(inst, "op1") or "bypass"} <= (
        ACT_TENSOR_SCALAR_OPS
    ):
        engines = tuple(e for e in engines if e != "act")
    return engines


@dataclass(frozen=True)
class AssignEnginesPass(ModulePass):
    name = "assign-engines"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            locs = fn.memlocs()
            load = dict.fromkeys(CLOCK_GHZ, 0.0)
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
                inst.properties["engine"] = StringAttr(engine)
                load[engine] += max(64, _free_elems(inst)) / CLOCK_GHZ[engine]
