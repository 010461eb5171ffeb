"""A faster IRDL check for the instruction ops, with the same verdict and the same diagnostics.

xDSL's generated ``verify_`` runs ``OpDef.verify`` (operand, result, region and successor lists, every property
against its constraint through a generic constraint tree, attributes, traits) and then the op's own verifier. For
the tens of thousands of instruction ops of a large kernel that generic walk is a large share of verification.

``fast_verify(cls)`` replaces it with a check compiled once per op class from the same ``OpDef``: property
constraints of the shapes the dialects use (a base class, a parametrized attribute with such parameters, an
equality, an array of a base class, anything) become direct ``isinstance``/equality tests, and other constraints
are verified by their own ``verify``. The compiled check only ever accepts what ``OpDef.verify`` accepts; when it
rejects, ``OpDef.verify`` itself runs, so a malformed op gets exactly xDSL's diagnostic (or, if the compiled check
was merely stricter, the op goes on as before). The op's own verifier runs afterwards either way, as before.
Classes whose ``OpDef`` has shapes not covered (operands other than one variadic list of a base type, results
other than one of a base type, regions, successors, attribute definitions) keep xDSL's verifier.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, ArrayOfConstraint
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation, OpDef, OptPropertyDef, ParsePropInAttrDict, ResultDef, VarOperandDef
from xdsl.irdl.constraints import (
    AnyAttr,
    AttrConstraint,
    BaseAttr,
    EqAttrConstraint,
    EqIntConstraint,
    ParamAttrConstraint,
    RangeLengthConstraint,
    RangeOf,
    VerificationContext,
)
from xdsl.utils.exceptions import VerifyException

Check = Callable[[Attribute], bool]


def _generic(constr: AttrConstraint[Any]) -> Check:
    def check(attr: Attribute) -> bool:
        try:
            constr.verify(attr, VerificationContext())
        except VerifyException:
            return False
        return True

    return check


def compile_constraint(constr: AttrConstraint[Any]) -> Check:
    """A predicate that holds only if ``constr.verify`` would accept the attribute (constraints without type
    variables: the dialects' properties have none)."""
    kind = type(constr)
    if kind is AnyAttr:
        return lambda a: True
    if kind is BaseAttr:
        base = constr.attr  # type: ignore[attr-defined]
        return lambda a: isinstance(a, base)
    if kind is EqAttrConstraint:
        want = constr.attr  # type: ignore[attr-defined]
        return lambda a: a is want or a == want
    if kind is ParamAttrConstraint:
        base = constr.base_attr  # type: ignore[attr-defined]
        params = tuple(compile_constraint(c) for c in constr.param_constrs)  # type: ignore[attr-defined]
        names = tuple(f for f, _ in base.get_irdl_definition().parameters)
        if len(names) != len(params):
            return _generic(constr)
        # the exact class: a subclass might declare other parameters (OpDef.verify then decides)
        if len(names) == 2:  # IntegerAttr, FloatAttr, DenseArrayBase: unrolled (the hot case)
            (n0, n1), (p0, p1) = names, params
            return lambda a: type(a) is base and p0(getattr(a, n0)) and p1(getattr(a, n1))
        pairs = tuple(zip(names, params))
        return lambda a: type(a) is base and all(p(getattr(a, n)) for n, p in pairs)
    if kind is ArrayOfConstraint:
        elems = constr.elem_range_constraint  # type: ignore[attr-defined]
        if type(elems) is RangeOf:
            if type(elems.constr) is BaseAttr:
                elem_base = elems.constr.attr
                return lambda a: isinstance(a, ArrayAttr) and all(isinstance(x, elem_base) for x in a.data)
            elem = compile_constraint(elems.constr)
            return lambda a: isinstance(a, ArrayAttr) and all(elem(x) for x in a.data)
    return _generic(constr)


def _plan(cls: type[IRDLOperation]) -> Callable[[IRDLOperation], bool] | None:
    """The compiled check of ``cls``'s OpDef (None: a shape this module does not cover)."""
    op_def = cls.get_irdl_definition()
    if op_def.regions or op_def.successors or op_def.attributes:
        return None
    result_base = _single_result_base(op_def)
    if op_def.results and result_base is None:
        return None
    operand_base: type[Attribute] | None = None
    if op_def.operands:
        if len(op_def.operands) != 1:
            return None
        odef = op_def.operands[0][1]
        if not isinstance(odef, VarOperandDef) or type(odef.constr) is not RangeOf \
                or type(odef.constr.constr) is not BaseAttr:  # fmt: skip
            return None
        operand_base = odef.constr.constr.attr
    props = tuple((name, not isinstance(d, OptPropertyDef), compile_constraint(d.constr))
                  for name, d in op_def.properties.items())  # fmt: skip
    known = frozenset(op_def.properties)

    def accepts(op: IRDLOperation) -> bool:
        if op.regions or op.successors:
            return False
        if result_base is None:
            if op.results:
                return False
        elif len(op.results) != 1 or not isinstance(op.results[0].type, result_base):
            return False
        if operand_base is None:
            if op.operands:
                return False
        elif not all(isinstance(v.type, operand_base) for v in op.operands):
            return False
        values = op.properties
        for name, required, check in props:
            a = values.get(name)
            if a is None:
                if required:
                    return False
            elif not check(a):
                return False
        return all(k in known for k in values)

    return accepts


def _single_result_base(op_def: OpDef) -> type[Attribute] | None:
    """The base type of the one result an op declares (``result_def(Base)``: exactly one result of that base), or
    None for any other result list, or for options other than parsing properties from the attribute dictionary
    (segment sizes would need their own check); a penguin allocation has such a result."""
    if len(op_def.results) != 1 or any(type(o) is not ParsePropInAttrDict for o in op_def.options):
        return None
    rdef = op_def.results[0][1]
    c = rdef.constr
    if type(rdef) is not ResultDef or type(c) is not RangeLengthConstraint or type(c.constraint) is not RangeOf \
            or type(c.constraint.constr) is not BaseAttr or type(c.length) is not EqIntConstraint \
            or c.length.value != 1:  # fmt: skip
        return None
    return c.constraint.constr.attr  # type: ignore[no-any-return]


def fast_verify(cls: type[IRDLOperation]) -> type[IRDLOperation]:
    """Install the compiled check as ``cls.verify_`` (in place of ``OpDef.verify``); returns ``cls``."""
    wrapper = cls.__dict__.get("verify_")
    if wrapper is None or getattr(wrapper, "__closure__", None) is None:
        return cls
    cells = dict(zip(wrapper.__code__.co_freevars, wrapper.__closure__))
    if "op_def" not in cells or cells["op_def"].cell_contents is not cls.get_irdl_definition():
        return cls  # not xDSL's generated wrapper: leave it
    accepts = _plan(cls)
    if accepts is None:
        return cls
    op_def = cls.get_irdl_definition()
    custom = cells["custom_verify"].cell_contents if "custom_verify" in cells else None

    def verify_(self: IRDLOperation) -> None:
        if accepts(self):
            for trait in op_def.traits:
                trait.verify(self)
        else:
            op_def.verify(self)  # xDSL's own check and diagnostic
        if custom is not None:
            custom(self)

    verify_.__qualname__ = f"{cls.__qualname__}.verify_"
    cls.verify_ = verify_  # type: ignore[method-assign]
    return cls
