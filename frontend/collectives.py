"""``nki.collectives``: nkic simulates one NeuronCore and implements no collective; every name is a placeholder
that raises ``NkiError`` when called (see ``unsupported.py``)."""

from __future__ import annotations

from nkic.frontend.unsupported import missing_names

__getattr__ = missing_names("nki.collectives")
