"""``neuronxcc.nki.language``: ``nki.language`` plus the names only the legacy generation has."""

from __future__ import annotations

from nkic.frontend.language import *  # noqa: F401,F403 — the legacy surface is a superset of nki.language
from nkic.frontend.unsupported import missing_names

__getattr__ = missing_names("neuronxcc.nki.language")


# -- index grids, block dims, masks (legacy-only names; the machinery is frontend/grid.py) --------------------
from nkic.frontend.grid import arange, mgrid, par_dim  # noqa: E402,F401
