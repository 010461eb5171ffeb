"""The LNC=2 pair, two NeuronCores of one ``kernel[2]`` launch (ARCHITECTURE.md, "The LNC=2 pair"): ``sendrecv``,
``core_barrier``."""

from __future__ import annotations

from typing import Any

from nkic.frontend.context import nki_op
from nkic.frontend.errors import NkiError
from nkic.frontend.recorders.enums import _ENGINE, dma_engine
from nkic.frontend.recorders.record import _enum, _int_param, _record, _rules, _tensor
from nkic.frontend.tensor import NkiTensor
from nkic.target.instructions import LNC_MAX_RANKS, sendrecv_problem


# -- the LNC=2 pair: two NeuronCores of one kernel[2] launch (ARCHITECTURE.md, "The LNC=2 pair") ----------------
_DMA_ENGINE = dma_engine  # sendrecv's parameter named `dma_engine` shadows the enum


def _rank(ctx: Any, op: str, name: str, value: Any, in_launch: bool = True) -> int:
    """A core of the LNC=2 pair: 0 or 1, and (``in_launch``) a program of this launch (rank r is program r)."""
    rank = _int_param(op, name, value)
    if not 0 <= rank < LNC_MAX_RANKS:
        raise NkiError(f"{op}: {name} must be 0 or 1 (a core of the LNC=2 pair), got {rank}")
    if in_launch and rank >= ctx.grid:
        raise NkiError(
            f"{op}: {name} = {rank} names no core of this launch, which runs {ctx.grid} program(s)",
            "launch the kernel on the LNC=2 pair as kernel[2]; rank r is nl.program_id(0) == r",
        )
    return rank


@nki_op
def sendrecv(
    ctx: Any, src: NkiTensor, dst: NkiTensor, send_to_rank: Any, recv_from_rank: Any, pipe_id: Any,
    dma_engine: Any = None, **kw: Any,
) -> None:
    """Send ``src`` to the ``dst`` of core ``send_to_rank`` while receiving core ``recv_from_rank``'s ``src`` into
    this core's ``dst``. The cores' sendrecvs of one ``pipe_id`` pair up in the order each core issues them (nkic
    issues a core's sendrecvs in program order) and complete together; both tiles in SBUF, one dtype, equal
    partitions and elements per partition. A rank may be the core itself (a local copy)."""
    name = "sendrecv"
    src, dst = _tensor(name, "src", src), _tensor(name, "dst", dst)
    # memories, one dtype, equal sizes, ranks 0 or 1 (target/rules/pe.py); then the ranks this launch has
    _rules(ctx, name, {"dst": dst, "src": src}, {"send_to_rank": _int_param(name, "send_to_rank", send_to_rank),
                                                 "recv_from_rank": _int_param(name, "recv_from_rank", recv_from_rank)})
    send, recv = _rank(ctx, name, "send_to_rank", send_to_rank), _rank(ctx, name, "recv_from_rank", recv_from_rank)
    pipe = _int_param(name, "pipe_id", pipe_id)
    if pipe < 0:
        raise NkiError(f"{name}: pipe_id must be >= 0, got {pipe}")
    mode = _enum(dma_engine if dma_engine is not None else "dma", _DMA_ENGINE, "dma_engine")
    attrs = {"send_to_rank": send, "recv_from_rank": recv, "pipe_id": pipe, "gpsimd_dma": mode == "gpsimd_dma"}
    problem = sendrecv_problem(attrs.get, src.itemsize, src.free_size)
    if problem is not None:
        raise NkiError(problem, "use dma_engine=nisa.dma_engine.dma for larger tiles")
    # gpsimd_dma is GpSimd's own DMA: it implies GpSimd as the trigger engine.
    eng = "gpsimd" if attrs["gpsimd_dma"] else "unknown"
    _record(ctx, name, {"dst": dst, "src": src}, {**attrs, "engine": eng}, eng)


@nki_op
def core_barrier(ctx: Any, data: NkiTensor, cores: Any, engine: Any = None, **kw: Any) -> None:
    """Every core of ``cores`` waits here until all of them have arrived, with all their earlier work done (nkic
    stops every engine of the core, not only ``engine``: a stronger barrier that orders everything on the core).
    ``data`` is the tensor the cores synchronise on; ``cores`` is (0, 1) on the LNC=2 pair. A core the launch
    does not have waits for nobody: nki-library writes ``(0, 1)`` in kernels that also run as one program.
    The docs ask for shared HBM, but the barrier is a semaphore protocol that never touches ``data`` and
    nki-library's router_topk (moe_block_tkg's default selective path) barriers on an SBUF tensor: nkic accepts
    HBM or SBUF (PSUM is rejected: no core shares it)."""
    name = "core_barrier"
    data = _tensor(name, "data", data)
    if str(data.buffer) == "psum":
        raise NkiError(f"{name}: 'data' must be a tensor in HBM or SBUF, not {data.buffer}",
                       "the barrier orders the cores' accesses to a shared tensor")  # fmt: skip
    if not isinstance(cores, (tuple, list)) or not cores:
        raise NkiError(f"{name}: cores must be a tuple of core ranks such as (0, 1), got {cores!r}")
    # cores of the pair (0, 1) only (target/rules/pe.py)
    _rules(ctx, name, {"data": data}, {"cores_given": tuple(_int_param(name, f"cores[{i}]", c) for i, c in enumerate(cores))})
    ranks = [_rank(ctx, name, f"cores[{i}]", c, in_launch=False) for i, c in enumerate(cores)]
    if len(set(ranks)) != len(ranks):
        raise NkiError(f"{name}: cores {tuple(ranks)} names a core twice")
    if ctx.program_rank not in ranks:
        raise NkiError(f"{name}: cores {tuple(ranks)} does not include this core (program {ctx.program_rank})")
    ranks = [r for r in ranks if r < ctx.grid]
    eng = _enum(engine, _ENGINE, "engine")
    eng = "gpsimd" if eng == "unknown" else eng
    _record(ctx, name, {"data": data}, {"cores": tuple(sorted(ranks)), "engine": eng}, eng)
