"""Physical placement of BIR operands, shared by dependency analysis and ISA lowering."""

from __future__ import annotations

from typing import NamedTuple

from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.common import AccessPatternAttr
from nkic.target.machine import NUM_PARTITIONS
from nkic.target.vocab import dtype_size

ON_CHIP = ("sbuf", "psum")


class Placement(NamedTuple):
    """Where an operand lives: on-chip partitions + byte offset, or an HBM variable + byte offset. (A named tuple:
    one is built per operand by dependency analysis, twice, and by bir-to-isa; a frozen dataclass cost ~2 us.)"""

    memory: str  # 'sbuf' | 'psum' | 'hbm'
    var: str  # memloc name for HBM; '' on chip
    start_partition: int
    num_partitions: int
    address: int  # bytes (within each partition on chip; within the variable in HBM)
    free_pairs: tuple[tuple[int, int], ...]  # element steps; for HBM all pairs
    dtype: str

    def byte_span(self) -> tuple[int, int]:
        """[lo, hi) bytes touched, per partition on chip or within the variable in HBM."""
        es = dtype_size(self.dtype)
        lo = hi = 0
        for s, n in self.free_pairs:
            lo += min(0, s * (n - 1))
            hi += max(0, s * (n - 1))
        return self.address + lo * es, self.address + (hi + 1) * es


def place(loc: bir.MemLocOp, ap: AccessPatternAttr, inst: bir.BirInst, role: str) -> Placement:
    dtype = ap.operand_dtype(loc.dtype.data)
    es = dtype_size(dtype)
    if ap.iv_coeffs:
        raise PassFailedException(f"instruction {inst.inst_id} still uses a loop index (run bir-unroll first)")
    mem = loc.mem
    if mem not in ON_CHIP:
        return Placement("hbm", loc.sym_name.data, 0, 0, ap.offset_value * es, tuple(ap.pairs), dtype)
    addr = loc.addr
    if addr is None:
        raise PassFailedException(f"memloc '{loc.sym_name.data}' has no address (run allocate-memory first)")
    row = dtype_size(loc.dtype.data)  # bytes per partition, then elements of the operand dtype
    for d in loc.dims[1:]:
        row *= d
    row //= es
    (pstep, nparts), *free = ap.pairs
    if nparts > 1 and pstep != row:
        raise PassFailedException(
            f"instruction {inst.inst_id} {role}: the partition step {pstep} must equal the row size {row} of "
            f"'{loc.sym_name.data}'"
        )
    p0, off = divmod(ap.offset_value, row)
    part, base = addr
    if p0 + part + nparts > NUM_PARTITIONS:
        raise PassFailedException(f"instruction {inst.inst_id} {role} reaches past partition {NUM_PARTITIONS - 1}")
    return Placement(mem, "", part + p0, nparts, base + off * es, tuple(free), dtype)
