"""A loader that imports a module only when first called: the dialect and pass registries name their entries as
(module, attribute) so a tool loads only the dialects and passes it meets, and one loader serves all of them."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_attr(module: str, attr: str, item: str | None = None) -> Callable[[], Any]:
    """A function returning ``module.attr`` (``module.attr[item]`` when an item is given), importing ``module`` on
    its first call."""

    def load() -> Any:
        value = getattr(importlib.import_module(module), attr)
        return value if item is None else value[item]

    return load
