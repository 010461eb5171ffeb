"""Placeholders for NKI names nkic does not implement: an error when used, never when imported.

NKI modules are imported, and tables built from their names, at module level (nki-library keys import-time dicts by
``nisa.*`` functions and dtypes). A missing name must therefore not fail at ``from nki.isa import foo`` or at
``nisa.foo``; it fails where the kernel *calls* it, as an ``NkiError`` located at the calling line. Each public NKI
module defines ``__getattr__ = missing_names("nki.isa")``: any attribute the module lacks becomes a
:class:`Unsupported` placeholder (one per name, hashable, so it works as a dict key or value), including the names of
the API reference that nkic has not implemented. A placeholder for a class also works in ``isinstance`` (always
false) and as a base class (constructing the subclass is the error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from nkic.frontend.errors import NkiError


class Unsupported:
    """Stands for the NKI name ``qualname`` that nkic lacks; calling it raises ``NkiError`` at the call site."""

    __slots__ = ("qualname", "_children", "_why")

    def __init__(self, qualname: str, why: tuple[str, str] = ("", "")):
        self.qualname = qualname
        self._children: dict[str, Unsupported] = {}
        self._why = why  # (what follows the name, hint); empty: the generic "not supported" message

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        what, hint = self._why
        raise NkiError(
            f"{self.qualname} {what or 'is not supported by nkic'}",
            hint or "nkic implements a subset of the NKI API; see the README for what is supported",
        )

    def __getattr__(self, name: str) -> Unsupported:
        # `nisa.foo.bar` (an enum member, a submodule function) is as unsupported as `nisa.foo`.
        if name.startswith("__"):
            raise AttributeError(name)
        child = self._children.get(name)
        if child is None:
            child = self._children[name] = Unsupported(f"{self.qualname}.{name}", self._why)
        return child

    def __repr__(self) -> str:
        return f"<unsupported {self.qualname}>"

    # A missing class stays usable where a module uses classes at import time: nothing nkic makes is an instance of
    # it, and subclassing it defines a class whose construction is the error.
    def __instancecheck__(self, instance: object) -> bool:
        return False

    def __subclasscheck__(self, subclass: type) -> bool:
        return False

    def __mro_entries__(self, bases: tuple[object, ...]) -> tuple[type, ...]:
        qualname = self.qualname

        def __init__(obj: object, *args: Any, **kwargs: Any) -> None:  # noqa: N807
            raise NkiError(f"{qualname} is not supported by nkic", "a subclass of it cannot be constructed")

        return (type(f"Unsupported_{qualname.replace('.', '_')}", (), {"__init__": __init__}),)


def is_unsupported(value: object) -> bool:
    """True if ``value`` is a placeholder for a name nkic lacks."""
    return isinstance(value, Unsupported)


def missing_names(module: str, what: str = "", hint: str = "") -> Callable[[str], Unsupported]:
    """A module-level ``__getattr__`` that turns every missing public name of ``module`` into a placeholder; calling
    one raises ``NkiError("<module>.<name> <what>. <hint>")`` (by default: "is not supported by nkic")."""
    cache: dict[str, Unsupported] = {}

    def __getattr__(name: str) -> Unsupported:  # noqa: N807 — the module hook's name
        # Private and dunder names keep Python's AttributeError: import machinery, inspect and pickling probe them.
        if name.startswith("_"):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        placeholder = cache.get(name)
        if placeholder is None:
            placeholder = cache[name] = Unsupported(f"{module}.{name}", (what, hint))
        return placeholder

    return __getattr__
