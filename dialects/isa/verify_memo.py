"""ISA op verification memoised on the op's shared, immutable attributes; the same verdict and diagnostics.

Most of what ``IsaInst`` verifies (the IRDL constraints of the fields and patterns, the operand roles, the
immediates, the shape rules, the format's own rules, the record's immediate and flag words) is a function of the op
class and of its properties other than the instruction id, the semaphores and the physical locations. Those
properties are shared attribute objects (bir-to-isa builds one access pattern per tile shape, one attribute per
field value), so a kernel's tens of thousands of instructions have a few hundred distinct combinations of them.

``memo_verify(cls)`` installs a ``verify_`` that runs the class's full verifier once per such combination (keyed by
the identity of the attribute objects; the memo entry holds them, so an id in a key always names a live object and
an equal-but-different attribute simply misses) and, for the other ops with that combination, only the checks that
read the per-instruction properties: the id, the semaphores (the signalled one must be the class's, as the entry
records), and every operand's location against its pattern (memory rules, partitions, byte bounds, encoding
widths), from facts the entry precomputed per operand. Whenever one of those checks fails, or anything is not of the
expected form, the full verifier runs instead, so a malformed op gets exactly the diagnostic it always got.

Format classes whose own rules read the locations either key on the locations too (``KEY_LOCS``) or name those
rules (``LOC_RULES``, the matmul's PSUM bank rule), which then run on every op: keyed on its locations, every
matmul of an unrolled kernel was a miss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from xdsl.dialects.builtin import I64, ArrayAttr, IntAttr, IntegerAttr, i64
from xdsl.ir import Attribute
from xdsl.irdl import irdl_to_attr_constraint
from xdsl.utils.exceptions import VerifyException

from nkic.dialects.fastverify import Check, compile_constraint
from nkic.dialects.isa.base import CAPACITY, MEMO_LIMIT, MEMORIES, U32_MAX, IsaInst, IsaLocAttr, _span, shape_key
from nkic.target.machine import NUM_PARTITIONS, valid_sem
from nkic.target.vocab import DTYPES

_HEADER = ("id", "wait_sem", "wait_value", "signal_sem")
_I64_CONSTR = irdl_to_attr_constraint(IntegerAttr[I64])  # what IsaInst declares for every _HEADER property
_I64_CHECK = compile_constraint(_I64_CONSTR)
_ITEMSIZE = {name: dt.itemsize for name, dt in DTYPES.items()}
_U8, _U16 = 0xFF, 0xFFFF


class _OperandFacts(NamedTuple):
    """What the location of one operand is checked against (from its slot's memory rule and its pattern)."""

    memories: frozenset[str]  # memories the slot may be in with this pattern
    nparts: int  # partitions of an on-chip operand
    lo: int  # element span of the free pairs (on chip), relative to the address
    hi: int
    hbm_lo: int  # lowest element offset in HBM (all pairs, or the free ones under a vector dynamic offset)


class _Verified(NamedTuple):
    keep: tuple[Attribute, ...]  # the keyed attributes: alive while the entry is, so their ids are not reused
    signal: int  # the semaphore this op may signal
    operands: tuple[_OperandFacts, ...]


_MEMO: dict[tuple[object, ...], _Verified] = {}


def _memories(op: IsaInst, role: str, pairs: tuple[tuple[int, int], ...], vector: bool) -> frozenset[str]:
    """The memories ``role`` may be in: the op's memory rule, the partition pair rule on chip, a vector dynamic
    offset's HBM operand."""
    allowed = set()
    for mem in MEMORIES:
        try:
            op._verify_memory(role, mem)
        except VerifyException:
            continue
        if mem in CAPACITY and pairs[0][0] != 1:
            continue
        if vector and mem != "hbm":
            continue
        allowed.add(mem)
    return frozenset(allowed)


def _entry(op: IsaInst, keep: list[Attribute]) -> _Verified:
    """The facts of an op that has just passed the full verifier."""
    facts = []
    for role_attr, ap in zip(op.roles.data, op.aps.data):
        pairs = ap.pair_tuple
        vector = ap.dyn[0] == "vector"
        lo, hi = _span(pairs[2:] if ap.dyn[0] == "indirect" else pairs[1:])  # indirect: elements placed at run time
        hbm_lo = lo if vector else _span(pairs)[0]
        facts.append(_OperandFacts(_memories(op, role_attr.data, pairs, vector), pairs[0][1], lo, hi, hbm_lo))
    return _Verified(tuple(keep), op.signalled_sem(), tuple(facts))


def _header_ok(op: IsaInst, checks: dict[str, Check] | None, signal: int) -> bool:
    """The per-instruction properties pass their IRDL constraints, the header checks and the encoding widths.
    ``checks`` None: every header constraint is ``IntegerAttr[I64]``, tested directly (the generic test compares
    the type parameter by value)."""
    props = op.properties
    values: list[int | None] = []
    for name in _HEADER:
        attr = props.get(name)
        if attr is None:
            values.append(None)
            continue
        if checks is None:
            if type(attr) is not IntegerAttr or attr.type is not i64 or type(attr.value) is not IntAttr:
                if not _I64_CHECK(attr):
                    return False
        elif not checks[name](attr):
            return False
        values.append(attr.value.data)  # type: ignore[attr-defined]
    inst_id, wait, wait_value, sig = values
    if inst_id is None or not 0 <= inst_id <= U32_MAX:
        return False
    if wait is not None:  # its wait_value is there too (the names are part of the key)
        if wait_value is None or not valid_sem(wait) or not 0 <= wait_value <= U32_MAX:
            return False
    return sig is None or (sig == signal and valid_sem(signal))


def _locations_ok(op: IsaInst, facts: tuple[_OperandFacts, ...]) -> bool:
    """Every location is one the operand's slot and pattern allow (``_verify_operand``) and fits the record."""
    locs = op.properties["locs"]
    if type(locs) is not ArrayAttr or len(locs.data) != len(facts):
        return False
    for loc, f in zip(locs.data, facts):
        if type(loc) is not IsaLocAttr:
            return False
        mem = loc.memory.data
        if mem not in f.memories:
            return False
        start, addr = loc.start_partition.data, loc.address.data
        if not (0 <= start <= _U8 and 0 <= addr <= U32_MAX and 0 <= loc.var_id.data <= _U16):
            return False
        if mem in CAPACITY:
            size = _ITEMSIZE[loc.dtype.data]
            if start + f.nparts > NUM_PARTITIONS or addr + size * f.lo < 0 or \
                    addr + size * (f.hi + 1) > CAPACITY[mem]:  # fmt: skip
                return False
        elif mem == "hbm" and addr + _ITEMSIZE[loc.dtype.data] * f.hbm_lo < 0:
            return False
    return True


def _quick(op: IsaInst, checks: dict[str, Check] | None, hit: _Verified) -> bool:
    """The per-instruction checks of an op whose memo entry ``hit`` is (anything unexpected: not established)."""
    try:
        return _header_ok(op, checks, hit.signal) and _locations_ok(op, hit.operands)
    except Exception:  # e.g. an attribute of an unexpected form: the full verifier decides
        return False


def _rules_pass(op: IsaInst, rules: tuple[Callable[[IsaInst], None], ...]) -> bool:
    """The format's location rules hold for ``op`` (a failure: the full verifier reports it)."""
    try:
        for rule in rules:
            rule(op)
    except Exception:
        return False
    return True


def memo_verify(cls: type[IsaInst]) -> type[IsaInst]:
    """Install the memoised check in front of ``cls.verify_`` (its full verifier); returns ``cls``."""
    full: Callable[[IsaInst], None] = cls.verify_
    op_def = cls.get_irdl_definition()
    constrs = {name: op_def.properties[name].constr for name in _HEADER}
    checks = None if all(c == _I64_CONSTR for c in constrs.values()) else \
        {name: compile_constraint(c) for name, c in constrs.items()}  # fmt: skip
    key_locs = cls.KEY_LOCS
    loc_rules = tuple(getattr(cls, name) for name in cls.LOC_RULES)

    def verify_(self: IsaInst) -> None:
        if self._operands or self.results or self.regions or self._successors:
            full(self)
            return
        keyed = shape_key(self, key_locs)
        if keyed is None:
            full(self)
            return
        key, keep = keyed
        hit = _MEMO.get(key)
        if hit is None:
            full(self)  # raises the op's diagnostic if it is invalid
            if len(_MEMO) >= MEMO_LIMIT:
                _MEMO.clear()
            _MEMO[key] = _entry(self, keep)
        elif not _quick(self, checks, hit) or not _rules_pass(self, loc_rules):
            full(self)

    verify_.__qualname__ = f"{cls.__qualname__}.verify_"
    cls.verify_ = verify_  # type: ignore[method-assign]
    return cls
