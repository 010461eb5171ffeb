"""NEFF assembly: the in-memory ``Neff`` of an ISA-level module (``isa.core`` per NeuronCore subgraph, what
``bir-to-isa`` produces). The backend's last step, below the driver (which prints it with
``nkic.runtime.neff.write_neff``), ``nkic-opt -t neff`` and ``bir-sim``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException

from nkic.dialects.isa import program
from nkic.runtime.neff import Neff, Subgraph, Variable
from nkic.target.isa import StringTable
from nkic.target.machine import ENGINE_NAMES


def isa_module_to_neff(module: ModuleOp, name: str, metadata: Mapping[str, Any] | None = None,
                       sources: Sequence[Mapping[int, tuple[str, str]]] | None = None) -> Neff:  # fmt: skip
    """Collect the cores, variables and per-engine instruction streams of an ISA module into a ``Neff``.
    ``sources`` (debug information, one map per core in order: instruction id -> (file:line, nki call)) becomes
    each subgraph's ``source.json``; see ``nkic.compiler.driver.source_map``."""
    cores = [op for op in module.ops if isinstance(op, program.CoreOp)]
    if not cores:
        raise DiagnosticException("no isa.core in the module: run the backend (-p nkic-pipeline) first")
    variables: dict[str, Variable] = {}
    subgraphs = []
    strings = StringTable()  # the NEFF's string table: str immediates (debug print prefixes) index it
    for n, core in enumerate(cores):
        for var in program.core_vars(core).values():
            v = Variable(var.sym_name.data, var.id, var.kind.data, var.dims, var.dtype.data, var.contents())
            if variables.setdefault(v.name, v) != v:
                raise DiagnosticException(f"variable '{v.name}' differs between subgraphs")
        streams = program.core_streams(core)
        engines = {e: [inst.to_instr(strings) for inst in streams.get(e, [])] for e in ENGINE_NAMES}
        sg_sources = dict(sources[n]) if sources is not None and n < len(sources) else {}
        subgraphs.append(Subgraph(core.sym_name.data, engines, sg_sources))
    return Neff(name, sorted(variables.values(), key=lambda v: v.var_id), subgraphs, dict(metadata or {}),
                tuple(strings.strings))
