"""``nki.typing``: annotation helpers (``nt.tensor`` / ``nt.tensor[shape, dtype]``); they check nothing."""

from __future__ import annotations

from typing import Any


class tensor:  # noqa: N801 — NKI's spelling
    """Annotation-only tensor type; subscripting returns the class itself."""

    def __class_getitem__(cls, _item: Any) -> type["tensor"]:
        return cls


mutable_tensor = tensor
