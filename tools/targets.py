"""Output targets: ``neff`` (the NEFF printer, binary) and ``isa-dump`` (hex + JSON of the encoding, for FileCheck).

Both read the ISA-level module (``isa.core`` per NeuronCore subgraph) that ``bir-to-isa`` produces, assembled by
the backend (``nkic.passes.neff_assembly``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from nkic.passes.neff_assembly import isa_module_to_neff
from nkic.runtime.encoding import decode_stream, encode_stream, to_json
from nkic.runtime.neff import write_neff

BINARY_TARGETS = frozenset({"neff"})


@dataclass(frozen=True)
class NeffTarget(Target):
    """``-t neff -o kernel.neff``: the NEFF file (nkic-opt writes the bytes itself; targets are text-only)."""

    name = "neff"
    kernel_name: str = "kernel"

    def to_bytes(self, ctx: Context, module: ModuleOp) -> bytes:
        return write_neff(isa_module_to_neff(module, self.kernel_name))

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(self.to_bytes(ctx, module).hex() + "\n")


@dataclass(frozen=True)
class IsaDumpTarget(Target):
    """``-t isa-dump``: per subgraph and engine, each 64-byte record in hex beside its decoded JSON."""

    name = "isa-dump"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
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
