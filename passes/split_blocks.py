"""``split-blocks``: an on-chip tensor whose instructions each touch one block becomes one memloc per block.

A legacy block tensor ``nl.ndarray((B, nl.par_dim(P), F), buffer=nl.sbuf)`` is laid out as one ``[P, B, F]``
memloc: block ``b`` is the byte range ``[b * F, (b + 1) * F)`` of every partition. Kernels written this way use
their blocks one iteration at a time, and the device compiler allocates the blocks that are live, not the whole
declaration. After ``bir-unroll`` each access pattern has a constant offset, so this pass asks of every internal
SBUF/PSUM memloc of rank 3 or more: does every access stay inside one block of its second dim? If so, the memloc is
replaced by one ``[P, rest...]`` memloc per block used (``<name>.b<k>``), each access re-based onto its block, and
``allocate-memory`` gives every block its own live range: blocks live one or two at a time share space, and a PSUM
block of one bank never spans two. The pass works on any tensor with that access property, a modern one included:
splitting changes no value, only where bytes live.

Splitting is not free: blocks in one memloc are contiguous, so ``dma-optimization`` can merge the loads of
neighbouring blocks into one DMA. So by default only a tensor that cannot be allocated whole (more bytes per
partition than its memory has on the target) is split; ``allocate-memory`` splits every candidate and tries again
when a kernel does not fit otherwise (``always``).

A memloc is kept whole when it has a fixed address, a scope (a rolled loop's rotating buffer), or an access that
is dynamic, still loop-indexed (a rolled loop), spans two blocks, or whose partition step is not the row length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp
from xdsl.passes import ModulePass

from nkic.passes.targeting import target_of
from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr, names_attr
from nkic.target.machine import Target
from nkic.target.vocab import ON_CHIP, dtype_size


@dataclass(frozen=True)
class SplitBlocksPass(ModulePass):
    name = "split-blocks"
    always: bool = False  # split every qualifying memloc, not only those larger than their memory

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        limit = None if self.always else _capacity(target_of(op))
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            split_function(fn, limit)


def _capacity(t: Target) -> dict[str, int]:
    return {"sbuf": t.sbuf_bytes_per_partition, "psum": t.psum_bytes_per_partition, "psum_bank": t.psum_bank_bytes}


def _straddles(row: int, block: int, bank: int) -> bool:
    """Whether a block of a PSUM tensor laid out whole would cross a bank boundary. A tensor of at most one bank is
    placed inside one (allocate-memory); a larger one starts on a bank, so block ``b`` covers bytes
    ``[b * block, (b + 1) * block)`` from a bank's start. The NKI reference gives PSUM as ``psum_num_banks`` banks of
    ``psum_bank_fmax_bytes`` ("Maximum free dimension per PSUM bank per partition, in bytes", nki.language.tile_size)
    and a matmul output must fit one bank on gen2/3 (shared/reference/nki-api.md): a block that spans banks could not
    hold one."""
    if not bank or row <= bank:
        return False
    return any((b * block) // bank != ((b + 1) * block - 1) // bank for b in range(row // block))


@dataclass(frozen=True)
class BlockGeometry:
    row: int  # bytes per partition of the whole memloc
    block: int  # bytes per partition of one block


def block_candidates(locs: dict[str, bir.MemLocOp], limit: dict[str, int] | None) -> dict[str, BlockGeometry]:
    """The memlocs that may be split: internal, unplaced, on chip, rank >= 3 with two or more blocks, and (with a
    ``limit`` per memory) larger than that limit, or PSUM whose blocks would span banks laid out whole (the bank rule:
    a block never spans banks, so each gets its own memloc, which allocation keeps inside a bank)."""
    out = {}
    for name, loc in locs.items():
        dims = loc.dims
        if (loc.mem not in ON_CHIP or loc.kind.data != "internal" or loc.addr is not None or loc.scope is not None
                or loc.data is not None or len(dims) < 3 or dims[1] < 2):  # fmt: skip
            continue
        size = dtype_size(loc.dtype.data)
        row, block = math.prod(dims[1:]) * size, math.prod(dims[2:]) * size
        straddles = loc.mem == "psum" and limit is not None and _straddles(row, block, limit.get("psum_bank", 0))
        if limit is not None and row <= limit.get(loc.mem, row) and not straddles:
            continue
        out[name] = BlockGeometry(row, block)
    return out


def rebased_in_block(ap: AccessPatternAttr, g: BlockGeometry, elem: int) -> tuple[int, AccessPatternAttr] | None:
    """(block, the pattern within that block's memloc), or None when the access is not inside one block."""
    if ap.is_dynamic or any(ap.iv_coeffs) or not ap.pairs or any(n <= 0 for _, n in ap.pairs):
        return None
    if g.row % elem or g.block % elem:
        return None
    (pstep, nparts), *free = ap.pairs
    if nparts > 1 and pstep * elem != g.row:
        return None
    first, within = divmod(ap.offset_value * elem, g.row)
    lo = within + elem * sum(min(0, (n - 1) * s) for s, n in free)
    hi = within + elem * sum(max(0, (n - 1) * s) for s, n in free) + elem
    b = lo // g.block
    if lo < 0 or hi > (b + 1) * g.block:
        return None
    offset = (first * g.block + within - b * g.block) // elem
    return b, AccessPatternAttr(offset, [(g.block // elem, nparts), *free], (), ap.view_dtype or "", ap.dyn)


def split_function(fn: bir.FunctionOp, limit: dict[str, int] | None = None) -> int:
    """Split every qualifying memloc of ``fn`` (a block of several block dims in turn); the number split. With
    ``limit`` (bytes per partition by memory) only memlocs larger than it."""
    total = 0
    while (n := _split_once(fn, limit)) > 0:
        total += n
    return total


def _split_once(fn: bir.FunctionOp, limit: dict[str, int] | None) -> int:
    locs = fn.memlocs()
    geometry = block_candidates(locs, limit)
    if not geometry:
        return 0
    plans: dict[str, list[tuple[bir.BirInst, int, int, AccessPatternAttr]]] = {n: [] for n in geometry}
    for inst in fn.instructions():
        for i, (ref, ap) in enumerate(zip(inst.ref_names, inst.aps.data)):
            if ref not in plans:
                continue
            elem = dtype_size(ap.view_dtype or locs[ref].dtype.data)
            rebased = rebased_in_block(ap, geometry[ref], elem)
            if rebased is None:
                del plans[ref]
            else:
                plans[ref].append((inst, i, *rebased))
    for name, uses in plans.items():
        if uses:
            _split(locs[name], uses)
    return sum(1 for uses in plans.values() if uses)


def _split(loc: bir.MemLocOp, uses: list[tuple[bir.BirInst, int, int, AccessPatternAttr]]) -> None:
    name, dims = loc.sym_name.data, loc.dims
    blocks = sorted({b for _, _, b, _ in uses})
    for b in blocks:
        piece = bir.MemLocOp(f"{name}.b{b}", loc.mem, [dims[0], *dims[2:]], loc.dtype.data, "internal")
        if loc.loc is not None:
            piece.properties["loc"] = loc.loc
        loc.parent_block().insert_op_before(piece, loc)  # type: ignore[union-attr]
    for inst, i, b, ap in uses:
        refs = inst.ref_names
        refs[i] = f"{name}.b{b}"
        aps = list(inst.aps.data)
        aps[i] = ap
        inst.properties["refs"] = names_attr(refs)
        inst.properties["aps"] = ArrayAttr(aps)
    loc.detach()
    loc.erase()
