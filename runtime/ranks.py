"""Multi-rank launches: N ranks, each a NeuronCore program (or an LNC=2 pair) with its own HBM, in one schedule.

"Collective operations for multi-rank communication" (nki.collectives.rst) run between ranks: each rank loads a
NEFF (the same one, unless its arguments' shapes made it trace differently) onto its own core(s) with its own
inputs in its own HBM. :func:`simulate_ranks` runs every rank's subgraphs in **one** event-driven scheduler
(``scheduler._Scheduler``, as it runs the LNC=2 pair): rank r's program i is scheduler core ``r * programs + i``,
with its own SBUF, PSUM, semaphores, registers and DMA queues; the programs of one rank share that rank's HBM. The
collectives meet there (``runtime/collectives.py``); one that some rank never reaches leaves its members blocked
with nothing in flight: a ``SimulationDeadlock`` naming the waiting ranks and the collective.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from nkic.runtime.errors import SimulationError
from nkic.runtime.neff import Neff
from nkic.runtime.profile import RunResult
from nkic.runtime.scheduler import _Scheduler
from nkic.runtime.simulator import DEFAULT_MAX_EVENTS
from nkic.runtime.state import _Core, _init_hbm, print_line
from nkic.target.machine import DEFAULT_TARGET, get_target
from nkic.target.vocab import DTYPES

__all__ = ["simulate_ranks", "MAX_RANKS"]

# Ranks one simulation runs (a trn2 UltraServer has 64 chips x 8 NeuronCores): a bound on memory, not a rule.
MAX_RANKS = 512


@dataclass
class _Launch:
    """What the scheduler reads of a NEFF (its subgraphs), for every rank's programs together."""

    subgraphs: list


def simulate_ranks(
    neffs: Sequence[Neff], inputs: Sequence[Mapping[str, object]], *, target: str = DEFAULT_TARGET,
    max_events: int = DEFAULT_MAX_EVENTS, timing_only: bool = False,
    on_print: Callable[[str], None] = print_line,
) -> list[RunResult]:
    """Run rank r's ``neffs[r]`` on ``inputs[r]`` (its own HBM) for every rank at once; one ``RunResult`` per rank,
    sharing one profile (core ``r * programs + i`` is rank r's program i). ``max_events`` bounds each rank."""
    n = len(neffs)
    if not 1 <= n <= MAX_RANKS or len(inputs) != n:
        raise SimulationError(f"a launch of {n} rank(s) with {len(inputs)} input set(s): 1..{MAX_RANKS} ranks, one "
                              "input set each")  # fmt: skip
    programs = len(neffs[0].subgraphs)
    if any(len(neff.subgraphs) != programs for neff in neffs):
        raise SimulationError("every rank must run the same number of programs (SPMD programs per rank)")
    tgt = get_target(target)
    hbms = [_init_hbm(neff, inp, tgt.hbm_bytes, timing_only) for neff, inp in zip(neffs, inputs)]
    written = [{} if timing_only else {v.var_id: np.zeros(v.size, np.uint8) for v in neff.variables
                                       if v.kind == "output"} for neff in neffs]  # fmt: skip
    cores: list[_Core] = []
    for r, neff in enumerate(neffs):
        pair = [_Core(i, tgt, hbms[r]) for i in range(programs)]
        for core, sg in zip(pair, neff.subgraphs):
            core.sources = dict(sg.sources)  # type: ignore[attr-defined]  # kernel lines, for deadlock reports
            core.pair, core.rank, core.ranks = pair, r, n
            core.strings, core.written = tuple(neff.strings), written[r]
            core.on_print = _prefixed(on_print, r) if n > 1 else on_print
        cores += pair
    launch = _Launch([sg for neff in neffs for sg in neff.subgraphs])
    profile = _Scheduler(launch, cores, tgt, max_events * n, timing_only).run()  # type: ignore[arg-type]
    profile.sources = {(c, i): src for c, sg in enumerate(launch.subgraphs) for i, src in sg.sources.items()}
    return [_result(neff, hbms[r], written[r], profile) for r, neff in enumerate(neffs)]


def _prefixed(on_print: Callable[[str], None], rank: int) -> Callable[[str], None]:
    return lambda line: on_print(f"[rank {rank}] {line}")


def _result(neff: Neff, hbm: dict[int, np.ndarray], written: dict[int, np.ndarray], profile: object) -> RunResult:
    """One rank's outputs, final inputs and written-element masks (as ``simulator.simulate`` returns them)."""
    final = {v.name: hbm[v.var_id].view(DTYPES[v.dtype]).reshape(v.shape).copy()
             for v in neff.variables if v.kind in ("output", "input")}  # fmt: skip
    ins = {v.name: final.pop(v.name) for v in neff.variables if v.kind == "input"}
    elements = {v.name: written[v.var_id].reshape(-1, DTYPES[v.dtype].itemsize).all(axis=1).reshape(v.shape)
                for v in neff.variables if v.var_id in written}  # fmt: skip
    return RunResult(final, profile, ins, elements)  # type: ignore[arg-type]
