"""``resolve-psum-accumulate``: decide NKI's implicit accumulate rule statically, per matmul.

With ``accumulate=None`` the first matmul write to a PSUM location overwrites and later ones add. After unrolling
every allocation is its own memloc, so tracking a "matmul-written" flag per element of each PSUM memloc in program
order gives each matmul an explicit ``accumulate`` the hardware executes directly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import BoolAttr, ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nkic.dialects import bir
from nkic.dialects.common import ap_indices
from nkic.dialects.traits import AccumulatesDst


@dataclass(frozen=True)
class ResolvePsumAccumulatePass(ModulePass):
    name = "resolve-psum-accumulate"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in [f for f in op.ops if isinstance(f, bir.FunctionOp)]:
            if any(isinstance(o, bir.LoopOp) for o in _ops(fn)):
                raise PassFailedException("resolve-psum-accumulate needs unrolled BIR (run bir-unroll first)")
            self.run_function(fn)

    @staticmethod
    def run_function(fn: bir.FunctionOp) -> None:
        locs = fn.memlocs()
        written: dict[str, np.ndarray] = {}
        for inst in _ops(fn):
            if not isinstance(inst, bir.BirInst) or not _accumulates(type(inst)):
                continue
            name, ap = inst.ref("dst"), inst.ap("dst")
            assert name is not None and ap is not None
            flags = written.get(name)
            if flags is None:
                flags = written[name] = np.zeros(math.prod(locs[name].dims), dtype=bool)
            view = _strided(flags, ap.offset_value, ap.pairs)
            idx = ap_indices(ap.offset_value, ap.pairs).ravel() if view is None else None
            if inst.accumulate is None:
                hit = view if view is not None else flags[idx]
                written_before = np.count_nonzero(hit)  # one reduction for "any" and "all"
                if 0 < written_before < hit.size:
                    raise PassFailedException(
                        f"matmul {inst.inst_id} ({inst.loc.data if inst.loc else '?'}) writes PSUM '{name}' "
                        "partly over earlier matmul results; pass accumulate=True/False explicitly"
                    )
                inst.properties["accumulate"] = _BOOL[written_before == hit.size]
            if view is not None:
                view[...] = True
            else:
                flags[idx] = True


def _ops(fn: bir.FunctionOp) -> list[Operation]:
    """Every op of ``fn`` in program order (``walk``'s order): its block's ops as they are when none has a region
    (unrolled BIR: memlocs and instructions), without walk's nested generators; else the walk."""
    ops = list(fn.body.block.ops)
    return ops if not any(o.regions for o in ops) else list(fn.body.walk())


_ACCUMULATES: dict[type[bir.BirInst], bool] = {}


def _accumulates(cls: type[bir.BirInst]) -> bool:
    """``has_trait(AccumulatesDst)`` (a class-level fact), looked up once per instruction class."""
    hit = _ACCUMULATES.get(cls)
    if hit is None:
        hit = _ACCUMULATES[cls] = cls.has_trait(AccumulatesDst)
    return hit


_BOOL = {b: BoolAttr.from_bool(b) for b in (False, True)}  # shared: attributes are immutable


def _strided(flags: np.ndarray, offset: int, pairs: Sequence[tuple[int, int]]) -> np.ndarray | None:
    """The elements of ``flags`` an access pattern touches as a writable strided view shaped like the pattern (a
    matmul's 128 x 512 tile is one view, not 64K gathered indices); None when a step is negative or the pattern
    leaves ``flags`` (then it is gathered by index, which raises as indexing does)."""
    if offset < 0 or any(step < 0 or num < 1 for step, num in pairs):
        return None
    if offset + sum(step * (num - 1) for step, num in pairs) >= flags.size:
        return None
    return np.lib.stride_tricks.as_strided(flags[offset:], shape=[n for _, n in pairs],
                                           strides=[s * flags.itemsize for s, _ in pairs])  # fmt: skip
