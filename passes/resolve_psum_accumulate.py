"""``resolve-psum-accumulate``: decide NKI's implicit accumulate rule statically, per matmul.

With ``accumulate=None`` the first matmul write to a PSUM location overwrites and later ones add. After unrolling
every allocation is its own memloc, so tracking a "matmul-written" flag per element of each PSUM memloc in program
order gives each matmul an explicit ``accumulate`` the hardware executes directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import BoolAttr, ModuleOp
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
            if any(isinstance(o, bir.LoopOp) for o in fn.body.walk()):
                raise PassFailedException("resolve-psum-accumulate needs unrolled BIR (run bir-unroll first)")
            self.run_function(fn)

    @staticmethod
    def run_function(fn: bir.FunctionOp) -> None:
        locs = fn.memlocs()
        written: dict[str, np.ndarray] = {}
        for inst in fn.instructions():
            if not inst.has_trait(AccumulatesDst):
                continue
            name, ap = inst.ref("dst"), inst.ap("dst")
            assert name is not None and ap is not None
            flags = written.setdefault(name, np.zeros(int(np.prod(locs[name].dims)), dtype=bool))
            idx = ap_indices(ap.offset_value, ap.pairs).ravel()
            if inst.accumulate is None:
                hit = flags[idx]
                if hit.any() and not hit.all():
                    raise PassFailedException(
                        f"matmul {inst.inst_id} ({inst.loc.data if inst.loc else '?'}) writes PSUM '{name}' "
                        "partly over earlier matmul results; pass accumulate=True/False explicitly"
                    )
                inst.properties["accumulate"] = BoolAttr.from_bool(bool(hit.all()))
            flags[idx] = True
