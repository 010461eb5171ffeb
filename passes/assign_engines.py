"""``assign-engines``: choose the engine of every instruction BIR codegen left ``unassigned``.

The candidates are the instruction's legal engines (``nkic.target.instructions.legal_engines``): those its
declaration lists for the target's generation (the NKI ISA reference's "using Vector Engine or GpSimd Engine"),
that may read and write the memories its operands are in (GpSimd and the PE inputs never touch PSUM), and that
compute its ALU ops. Among them the engine that would finish it earliest wins (ties: the declaration's preference
order), except for an instruction whose engine follows its shape rather than the load (trait ``first_engine``: the
first legal one). Finishing is the engine's load plus the instruction's occupancy there, both as the simulator's
timeline prices them (``schedule_instructions.duration_ns``), and no earlier than the load of a port the engine
would hold (``costs.shared_ports``): on trn1 VectorE and GpSimd share SBUF access, so moving SBUF work from one to
the other gains nothing while ScalarE may. A user's engine hint is kept, and rejected when that engine cannot run
the instruction there.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.passes.targeting import target_of
from nkic.dialects import bir
from nkic.dialects.common import string_attr
from nkic.dialects.instructions import str_field
from nkic.passes.lowering import cost_record
from nkic.passes.schedule_instructions import duration_ns
from nkic.target.costs import shared_ports
from nkic.target.instructions import engine_problem
from nkic.target.instructions import legal_engines as declared_legal_engines
from nkic.target.machine import ENGINE_BY_NAME, Target


def _operands(inst: bir.BirInst, locs: dict[str, bir.MemLocOp]) -> tuple[dict[str, str], dict[str, str | None]]:
    """The instruction's operand memories by role and its ALU fields, as ``legal_engines`` asks them."""
    memories = {role: locs[ref].mem for role, ref in zip(inst.role_names, inst.ref_names)}
    fields = {f.name: str_field(inst, f.name) for f in inst.SPEC.fields if f.kind == "alu"}
    return memories, fields


def legal_engines(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], target: Target | None = None) -> tuple[str, ...]:
    """The engines that may run ``inst`` on ``target`` (None: on some generation), preferred first."""
    memories, fields = _operands(inst, locs)
    return declared_legal_engines(inst.SPEC, target.nc_version if target else None, memories, fields)


def _illegal(inst: bir.BirInst, why: str) -> PassFailedException:
    where = f", {inst.loc.data}" if inst.loc else ""
    return PassFailedException(f"instruction {inst.inst_id} ({inst.OPNAME}{where}): {why}")


def _finish(inst: bir.BirInst, locs: dict[str, bir.MemLocOp], target: Target, engine: str,
            load: dict[str, float]) -> float:  # fmt: skip
    """When ``inst`` would end on ``engine`` after everything assigned so far: the engine's and its ports' loads."""
    ports = shared_ports(cost_record(inst, locs, engine), target)
    return max([load[engine], *(load.get(p, 0.0) for p in ports)]) + duration_ns(inst, locs, target, engine)


def assign(fn: bir.FunctionOp, target: Target) -> None:
    """The legal engine finishing earliest for every unassigned instruction, under the simulator's costs."""
    locs = fn.memlocs()
    load = dict.fromkeys(ENGINE_BY_NAME, 0.0)  # and per shared port (costs.shared_ports)
    for inst in fn.instructions():
        memories, fields = _operands(inst, locs)
        engine = inst.engine.data
        if engine == "unassigned":
            legal = declared_legal_engines(inst.SPEC, target.nc_version, memories, fields)
            if not legal:
                why = "; ".join(p for e in inst.SPEC.engines if (p := engine_problem(
                    inst.SPEC, e, target.nc_version, memories, fields)))  # fmt: skip
                raise _illegal(inst, f"no engine may run it on {target.name}: {why}")
            first = "first_engine" in inst.SPEC.traits
            engine = legal[0] if first else min(legal, key=lambda e: (_finish(inst, locs, target, e, load),
                                                                      legal.index(e)))  # fmt: skip
        else:
            problem = engine_problem(inst.SPEC, engine, target.nc_version, memories, fields)
            if problem is not None:
                raise _illegal(inst, f"cannot run on {engine}: {problem}")
        inst.properties["engine"] = string_attr(engine)
        load[engine] = end = _finish(inst, locs, target, engine, load)
        for port in shared_ports(cost_record(inst, locs, engine), target):
            load[port] = end


@dataclass(frozen=True)
class AssignEnginesPass(ModulePass):
    name = "assign-engines"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            assign(fn, target_of(op))
