"""``nki.typing``: annotation helpers (``nt.tensor`` / ``nt.tensor[shape, dtype]``); they check nothing."""

from __future__ import annotations

from typing import Any

from nkic.frontend.unsupported import missing_names


class tensor:  # noqa: N801 — NKI's spelling
    """Annotation-only tensor type; subscripting returns the class itself."""

    def __class_getitem__(cls, _item: Any) -> type["tensor"]:
        return cls


mutable_tensor = tensor

# Names nkic lacks are placeholders that raise NkiError when called (``frontend/unsupported.py``).
__getattr__ = missing_names("nki.typing")
