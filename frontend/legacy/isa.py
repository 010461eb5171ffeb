"""``neuronxcc.nki.isa``: the instructions with their legacy signatures. Where a legacy call returns its result,
the function here allocates the result tile and calls the dst-first ``nki.isa`` function."""

from __future__ import annotations

from nkic.frontend.isa import *  # noqa: F401,F403 — names whose legacy signature is the modern one
from nkic.frontend.unsupported import missing_names

__getattr__ = missing_names("neuronxcc.nki.isa")
