"""Output targets: ``neff`` (the NEFF printer, binary) and ``isa-dump`` (hex + JSON of the encoding, for FileCheck).

Both read the ISA-level module (``isa.core`` per NeuronCore subgraph) that ``bir-to-isa`` produces.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException
from xdsl.utils.target import Target

from nkic.target.machine import ENGINE_NAMES

BINARY_TARGETS = frozenset({"neff"})


def isa_module_to_neff(module: ModuleOp, name: str, metadata: Mapping[str, Any] | None = None,
                       sources: Sequence[Mapping[int, tuple[str, str]]] | None = None) -> Any:  # fmt: skip
    """Collect the cores, variables and per-engine instruction streams of an ISA module into a ``Neff``.
    ``sources`` (debug information, one map per core in order: instruction id -> (file:line, nki call)) becomes
    each subgraph's ``source.json``; see ``nkic.driver.source_map``."""
    from nkic.dialects.isa import program
    from nkic.runtime.neff import Neff, Subgraph, Variable
    from nkic.target.isa import StringTable

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


@dataclass(frozen=True)
class NeffTarget(Target):
    """``-t neff -o kernel.neff``: the NEFF file (nkic-opt writes the bytes itself; targets are text-only)."""

    name = "neff"
    kernel_name: str = "kernel"

    def to_bytes(self, ctx: Context, module: ModuleOp) -> bytes:
        from nkic.runtime.neff import write_neff

        return write_neff(isa_module_to_neff(module, self.kernel_name))

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(self.to_bytes(ctx, module).hex() + "\n")


@dataclass(frozen=True)
class IsaDumpTarget(Target):
    """``-t isa-dump``: per subgraph and engine, each 64-byte record in hex beside its decoded JSON."""

    name = "isa-dump"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from nkic.runtime.encoding import decode_stream, encode_stream, to_json

        neff = isa_module_to_neff(module, "dump")
        for var in neff.variables:
            output.write(f"var {var.name} id={var.var_id} {var.kind} {var.dtype}{list(var.shape)}\n")
        for sg in neff.subgraphs:
            for engine, instrs in sg.engines.items():
                if not instrs:
                    continue
                data = encode_stream(engine, instrs)
                _, decoded = decode_stream(data)
                output.write(f"{sg.name} {engine}: {len(instrs)} instructions, {len(data)} bytes\n")
                for i, (rec, js) in enumerate(zip(_records(data, len(instrs)), to_json(decoded))):
                    output.write(f"  [{i}] {rec}\n      {json.dumps(js, sort_keys=True)}\n")


def _records(data: bytes, n: int) -> list[str]:
    return [data[32 + 64 * i : 32 + 64 * (i + 1)].hex() for i in range(n)]


def get_all_targets() -> dict[str, Callable[[], type[Target]]]:
    return {"neff": lambda: NeffTarget, "isa-dump": lambda: IsaDumpTarget}
