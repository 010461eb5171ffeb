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

import difflib
import inspect
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, NoReturn

from nkic.frontend.context import is_nki_op
from nkic.frontend.errors import NkiError

# How kernels spell the modules in code: a suggestion reads ``nl.exp``, not ``nki.language.exp``.
_SPELLED = {"nki.language": "nl", "nki.isa": "nisa", "neuronxcc.nki.language": "nl", "neuronxcc.nki.isa": "nisa",
            "neuronxcc.nki": "nki"}  # fmt: skip


class Unsupported:
    """Stands for the NKI name ``qualname`` that nkic lacks; calling it raises ``NkiError`` at the call site."""

    __slots__ = ("qualname", "_children", "_why", "_near")

    def __init__(self, qualname: str, why: tuple[str, str] = ("", ""),
                 near: Callable[[], list[str]] | None = None):  # fmt: skip
        self.qualname = qualname
        self._children: dict[str, Unsupported] = {}
        self._why = why  # (what follows the name, hint); empty: the generic "not supported" message
        self._near = near  # the module's API names close to this one (asked only when the call fails)

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        what, hint = self._why
        near = self._near() if self._near is not None and not what else []
        if near:
            # Every name of the API reference nkic lacks is listed by its module, so a name close to one nkic has
            # is most likely a misspelling of it: say so instead of implying NKI has the name.
            module, _, _ = self.qualname.rpartition(".")
            spelled = _SPELLED.get(module, module)
            raise NkiError(f"{self.qualname} is not an NKI name nkic knows",
                           "did you mean " + " or ".join(f"{spelled}.{n}" for n in near) + "?")  # fmt: skip
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
    one raises ``NkiError("<module>.<name> <what>. <hint>")`` (by default: "is not supported by nkic"), or, when the
    name is close to one the calling module defines (``nl.expp``), an error suggesting that name."""
    cache: dict[str, Unsupported] = {}
    namespace = sys._getframe(1).f_globals  # the module installing the hook: its names are the suggestions

    def __getattr__(name: str) -> Unsupported:  # noqa: N807 — the module hook's name
        # Private and dunder names keep Python's AttributeError: import machinery, inspect and pickling probe them.
        if name.startswith("_"):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        placeholder = cache.get(name)
        if placeholder is None:
            placeholder = cache[name] = Unsupported(f"{module}.{name}", (what, hint),
                                                    lambda: close_names(name, api_names(namespace)))  # fmt: skip
        return placeholder

    return __getattr__


def close_names(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The ``candidates`` that ``name`` is most likely a misspelling of, best first (difflib's ratio >= 0.75)."""
    return difflib.get_close_matches(name, sorted(set(candidates)), n=n, cutoff=0.75)


# Where the values an nki module exports as API live (dtypes, buffers, op tokens, enums, tensor classes); a function
# counts only if it is an nki op, the module defines it itself or lists it in ``_API_REEXPORTS``, so imported helpers
# (``nki_op``, ``masked``, ``Any``) are never suggested.
_API_HOMES = ("nkic.frontend.dtypes", "nkic.frontend.ops", "nkic.frontend.tensor", "nkic.frontend.grid",
              "nkic.frontend.control", "nkic.frontend.instruction", "nkic.frontend.language", "nkic.frontend.isa",
              "nkic.frontend.legacy")  # fmt: skip


def api_names(namespace: dict[str, Any]) -> list[str]:
    """The public NKI names an nki module's namespace holds (see ``_API_HOMES``)."""
    own = namespace.get("__name__")
    reexports = namespace.get("_API_REEXPORTS", ())  # functions from another module the module exports as API
    names = []
    for name, value in list(namespace.items()):
        if name.startswith("_") or name.isupper() or isinstance(value, ModuleType):
            continue
        if is_nki_op(value):
            names.append(name)
            continue
        if inspect.isfunction(value):
            if value.__module__ == own or name in reexports:
                names.append(name)
            continue
        home = value.__module__ if inspect.isclass(value) else type(value).__module__
        if home == own or isinstance(home, str) and home.startswith(_API_HOMES):
            names.append(name)
    return names


def keyword_hint(func: Callable[..., Any], kwargs: dict[str, Any]) -> str:
    """For a call of ``func`` that did not bind: each keyword it was given that is none of its parameters, with the
    parameter it is most likely a misspelling of (``dat=`` -> ``data=``); "" when every keyword is a parameter.

    nki functions take ``**kw`` for options they accept and ignore, so a misspelt keyword is swallowed there and the
    binding error names only the parameter it left unset (``missing a required argument: 'data'``)."""
    params = [p.name for p in inspect.signature(func).parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]  # fmt: skip
    notes = []
    for key in kwargs:
        if key in params:
            continue
        near = close_names(key, params, n=1)
        notes.append(f"unknown keyword {key}=" + (f": did you mean {near[0]}=?" if near else ""))
    return "; ".join(notes)
