"""``bir-sim``: a functional check of the backend. The BIR is run in program order, one instruction at a time, and
compared bit for bit with the concurrent NEFF simulation of the same code.

BIR's meaning is sequential: each instruction sees the effects of every earlier one. The backend turns it into
per-engine streams that run concurrently, ordered only by semaphores. This pass lowers a copy of the module with
``bir-to-isa`` (the IR itself is left unchanged), runs it twice with the runtime's own executors and the same
seeded inputs: once in instruction-id order with no concurrency (``runtime.simulator.simulate_in_order``, which is
BIR's program order since ids increase along it), once through the event-driven simulator with engines, queues and
semaphores (``simulate``). A missing ordering (a dropped dependency edge, a wrong wait) that changes a result makes
the outputs differ, and the pass fails naming the first differing element. It prints one line per module.

Runs after ``insert-semaphores`` (it needs addresses, engines and waits); ``max_instructions`` bounds the
instructions it agrees to run (the simulation is slow on big kernels); kernels whose cores meet (``sendrecv``,
``core_barrier``, the collectives between ranks) have no one-at-a-time order and are skipped with a note.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.passes.bir_to_isa import BirToIsaPass
from nkic.passes.neff_assembly import isa_module_to_neff
from nkic.passes.targeting import target_of
from nkic.runtime.neff import Neff
from nkic.runtime.simulator import simulate, simulate_in_order
from nkic.target.collectives import COLLECTIVE_OPCODES
from nkic.target.instructions import INSTRUCTIONS
from nkic.target.vocab import DTYPES

# Instructions that make cores (or ranks) meet: the LNC=2 pair's and the collectives (target/collectives.py).
_MEETINGS = frozenset(n for n, s in INSTRUCTIONS.items() if "meets" in s.traits or s.opcode in COLLECTIVE_OPCODES)


def inputs_for(neff: Neff, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs: normal values (cast) for float dtypes, small integers for the rest."""
    rng = np.random.default_rng(seed)
    out = {}
    for v in neff.variables:
        if v.kind != "input":
            continue
        dtype = np.dtype(DTYPES[v.dtype])
        if dtype.kind in "iub":
            out[v.name] = rng.integers(0, 4, v.shape).astype(dtype)
        else:
            out[v.name] = rng.standard_normal(v.shape).astype(np.float32).astype(dtype)
    return out


def _first_difference(a: np.ndarray, b: np.ndarray) -> str:
    ra, rb = a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)
    size = a.dtype.itemsize
    k = int(np.flatnonzero(ra != rb)[0]) // size
    idx = np.unravel_index(k, a.shape)
    show = (lambda x: x.astype(np.float32)) if a.dtype == ml_dtypes.bfloat16 else (lambda x: x)
    return f"element {tuple(int(i) for i in idx)}: in order {show(a.reshape(-1)[k:k + 1])[0]}, " \
           f"concurrent {show(b.reshape(-1)[k:k + 1])[0]}"


def check(module: ModuleOp, seed: int, max_instructions: int) -> str:
    """Run the check on a copy of ``module`` for its generation; returns the report line, raises
    PassFailedException on a mismatch."""
    fns = [f for f in module.ops if isinstance(f, bir.FunctionOp)]
    count = sum(1 for fn in fns for _ in fn.instructions())
    if count > max_instructions:
        return f"bir-sim: skipped ({count} instructions, more than max_instructions={max_instructions})"
    if any(i.OPNAME in _MEETINGS for fn in fns for i in fn.instructions()):
        return "bir-sim: skipped (the cores meet: sendrecv/core_barrier/collectives have no one-at-a-time order)"
    lowered = module.clone()
    BirToIsaPass().apply(Context(), lowered)
    neff = isa_module_to_neff(lowered, "bir_sim")
    inputs = inputs_for(neff, seed)
    target = target_of(module).name
    # device prints are compared too (same lines, same order: they are chained in program order), not shown
    printed: tuple[list[str], list[str]] = ([], [])
    want = simulate_in_order(neff, inputs, target=target, on_print=printed[0].append)
    got = simulate(neff, inputs, target=target, on_print=printed[1].append).outputs
    if printed[0] != printed[1]:
        raise PassFailedException("bir-sim: the device prints differ between program order and the concurrent "
                                  "simulation")  # fmt: skip
    for name in sorted(want):
        if want[name].tobytes() != got[name].tobytes():
            raise PassFailedException(f"bir-sim: output '{name}' differs between program order and the concurrent "
                                      f"simulation, {_first_difference(want[name], got[name])}")  # fmt: skip
    return (f"bir-sim: {count} instructions in program order agree bit for bit with the concurrent simulation "
            f"on {len(want)} output(s) (seed {seed})")


@dataclass(frozen=True)
class BirSimPass(ModulePass):
    name = "bir-sim"
    seed: int = 0
    max_instructions: int = 20000

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        print(check(op, self.seed, self.max_instructions), file=sys.stdout, flush=True)
