"""``stablehlo.while`` with a run-time condition: a device loop on a register.

NKI runs data-dependent loops on the engines' sequencers: a ``VirtualRegister`` loaded from a tensor
(``nisa.register_load``: "dst = the one element of src (SBUF or HBM), read as a 32-bit integer") is the condition
of ``nl.while_loop`` ("r = init; while r != 0: r = body_fun(r)"), traced once between ``loop_begin``/``loop_end``
(``frontend/control.py``). The loop values live in HBM tensors of their own (the *state*): the condition region is
evaluated on them into an i1 tensor whose element is loaded into the register; each trip runs the body region on
the state and copies its results back into it. The body is traced once, so its own tensors are reused by every trip.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nkic.dialects import stablehlo as hlo
from nkic.frontend import isa as nisa
from nkic.frontend import language as nl
from nkic.hlo import common, tiles
from nkic.hlo.tiles import Hbm, SegmentInterpreter, Value


@common.lowering("while.runtime")
def runtime_while(interp: SegmentInterpreter, op: hlo.WhileOp, values: Sequence[Value]) -> list[Value]:
    """The rest of ``op`` from ``values`` (the loop values after any unrolled trips) as a device loop."""
    state = [_state(interp, v, r) for v, r in zip(values, op.result)]
    reg = nisa.register_alloc(0)
    if not _load_condition(interp, op, state, reg):
        return list(state)

    def body(_: object) -> object:
        _write_back(interp, state, interp._run_region(op.body, state))
        _load_condition(interp, op, state, reg)
        return reg

    nl.while_loop(reg, body)
    return list(state)


def _state(interp: SegmentInterpreter, v: Value, result: object) -> Hbm:
    """A loop value's own HBM tensor, holding its initial value."""
    shape, dt = hlo.shape_of(result), tiles.nki_dtype(tiles.result_dtype(result))  # type: ignore[arg-type]
    s = common.scratch(interp, shape, dt)
    common.copy_all(s, interp.hbm(v))
    return s


def _load_condition(interp: SegmentInterpreter, op: hlo.WhileOp, state: Sequence[Hbm], reg: object) -> bool:
    """Evaluate the condition on the state into ``reg``; False when it is a compile-time false (no trip)."""
    (pred,) = interp._run_region(op.cond, list(state))
    if isinstance(pred, np.ndarray):
        if bool(pred.reshape(-1)[0]):
            raise common.unsupported(op, "a loop whose condition is always true (it never ends)")
        return False
    nisa.register_load(reg, pred.tensor)
    return True


def _write_back(interp: SegmentInterpreter, state: Sequence[Hbm], new: Sequence[Value]) -> None:
    """``state[i] = new[i]``; a new value that is another loop value's tensor is copied aside first, so a rotation
    of the loop values (``(a, b) -> (b, a)``) reads each before it is overwritten."""
    own = {id(s.tensor) for s in state}
    staged: list[Hbm | None] = []
    for i, v in enumerate(new):
        if isinstance(v, Hbm) and v.tensor is state[i].tensor:
            staged.append(None)
        elif isinstance(v, Hbm) and id(v.tensor) in own:
            tmp = common.scratch(interp, v.shape, v.dtype)
            common.copy_all(tmp, v)
            staged.append(tmp)
        else:
            staged.append(interp.hbm(v))
    for s, v in zip(state, staged):
        if v is not None:
            common.copy_all(s, v)
