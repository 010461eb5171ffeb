"""``neuronxcc.nki.language``: ``nki.language`` plus the names only the legacy generation has."""

from __future__ import annotations

from nkic.frontend.language import *  # noqa: F401,F403 — the legacy surface is a superset of nki.language
from nkic.frontend.unsupported import missing_names

__getattr__ = missing_names("neuronxcc.nki.language")
