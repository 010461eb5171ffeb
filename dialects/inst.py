"""The instruction-op pattern shared by penguin, bir and the ISA dialects.

Every NKI instruction has named tensor operands ("roles": ``dst``, ``data``, ``bias``…), each an access pattern over
some storage, plus scalar fields. All three IR levels print them the same way; here one activation of a kernel at
each level, as the printer writes it (wrapped at operand boundaries)::

    penguin.activation dst %y[0 : [512, 128], [1, 512]], data %x[0 : [512, 128], [1, 512]] {func = "exp"}
    bir.activation dst @k.y[0 : [512, 128], [1, 512]], data @k.x[0 : [512, 128], [1, 512]]
        {func = "exp", id = 1 : i64, engine = "unassigned", deps = [#bir.dep<flow, 0>]}
    isa_act.activate dst sbuf(p0, 0x800, float32)[0 : [1, 128], [1, 512]],
        src sbuf(p0, 0x0, float32)[0 : [1, 128], [1, 512]]
        {id = 2 : i64, func = "exp", wait_sem = 8 : i64, wait_value = 1 : i64, signal_sem = 1 : i64}

Only the operand reference differs: an SSA tensor (penguin), a memory-location symbol (bir) or a physical location
(ISA: memory, start partition, byte address and dtype, e.g. ``sbuf(p0, 0x800, float32)`` or ``hbm(var 0, 0x0,
float32)``). Subclasses declare ``ROLES`` (canonical order) and ``REQUIRED``; the scalar fields are ordinary IRDL
properties, printed and parsed through one attribute dictionary.
"""

from __future__ import annotations

from typing import ClassVar, Self

from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation, prop_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from nkic.dialects.common import AccessPatternAttr, ap_body_str, parse_ap_body


class RoleOperandOp(IRDLOperation):
    """Base of every instruction op: ``roles`` names the operands, ``aps`` their access patterns."""

    ROLES: ClassVar[tuple[str, ...]] = ()
    REQUIRED: ClassVar[tuple[str, ...]] = ("dst",)
    # Properties that are part of the operand list syntax rather than the attribute dictionary.
    OPERAND_PROPS: ClassVar[tuple[str, ...]] = ("roles", "aps")

    roles = prop_def(ArrayAttr[StringAttr])
    aps = prop_def(ArrayAttr[AccessPatternAttr])

    # -- operand kinds: overridden per IR level ------------------------------------------------------
    def _num_refs(self) -> int:
        raise NotImplementedError

    def _print_ref(self, printer: Printer, index: int) -> None:
        raise NotImplementedError

    @classmethod
    def _parse_ref(cls, parser: Parser) -> object:
        raise NotImplementedError

    @classmethod
    def _build(cls, refs: list[object], props: dict[str, Attribute], attrs: dict[str, Attribute]) -> Self:
        raise NotImplementedError

    # -- accessors -----------------------------------------------------------------------------------
    @property
    def role_names(self) -> list[str]:
        return [r.data for r in self.roles.data]

    def role_index(self, role: str) -> int | None:
        for i, r in enumerate(self.roles.data):  # no list of names: operand lookups are the passes' hot path
            if r.data == role:
                return i
        return None

    def ap(self, role: str) -> AccessPatternAttr | None:
        i = self.role_index(role)
        return None if i is None else self.aps.data[i]

    def has(self, role: str) -> bool:
        return self.role_index(role) is not None

    # -- verification ---------------------------------------------------------------------------------
    def verify_(self) -> None:
        names = self.role_names
        if len(names) != len(self.aps.data) or len(names) != self._num_refs():
            raise VerifyException("every operand needs exactly one role and one access pattern")
        if len(set(names)) != len(names):
            raise VerifyException(f"duplicate operand role in {names}")
        for r in names:
            if r not in self.ROLES:
                raise VerifyException(f"'{self.name}' has no operand role '{r}' (roles: {', '.join(self.ROLES)})")
        for r in self.REQUIRED:
            if r not in names:
                raise VerifyException(f"'{self.name}' requires a '{r}' operand")
        order = [self.ROLES.index(r) for r in names]
        if order != sorted(order):
            raise VerifyException(f"operand roles must appear in the order {', '.join(self.ROLES)}")
        self.verify_fields()

    def verify_fields(self) -> None:
        """Op-specific checks; subclasses override."""

    # -- syntax ---------------------------------------------------------------------------------------
    def print(self, printer: Printer) -> None:
        for i, (role, ap) in enumerate(zip(self.role_names, self.aps.data)):
            printer.print_string(("," if i else "") + f" {role} ")
            self._print_ref(printer, i)
            printer.print_string(f"[{ap_body_str(ap)}]")
        fields: dict[str, Attribute] = {
            k: v for k, v in self.properties.items() if k not in self.OPERAND_PROPS
        }
        fields.update(self.attributes)
        if fields:
            printer.print_string(" ")
            printer.print_attr_dict(fields)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        roles: list[StringAttr] = []
        aps: list[AccessPatternAttr] = []
        refs: list[object] = []
        role = parser.parse_optional_identifier()
        while role is not None:
            roles.append(StringAttr(role))
            refs.append(cls._parse_ref(parser))
            parser.parse_punctuation("[")
            aps.append(parse_ap_body(parser))
            parser.parse_punctuation("]")
            if parser.parse_optional_punctuation(",") is None:
                break
            role = parser.parse_identifier()
        fields = parser.parse_optional_attr_dict()
        known = cls.get_irdl_definition().properties
        props: dict[str, Attribute] = {"roles": ArrayAttr(roles), "aps": ArrayAttr(aps)}
        attrs: dict[str, Attribute] = {}
        for k, v in fields.items():
            (props if k in known else attrs)[k] = v
        return cls._build(refs, props, attrs)
