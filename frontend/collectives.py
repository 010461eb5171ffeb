"""``nki.collectives``: nkic simulates the LNC=2 pair of one logical NeuronCore (``nisa.sendrecv``,
``nisa.core_barrier``) but no collective across ranks (``all_reduce``, ``all_gather``, ``ReplicaGroup`` …): every name
imports, and calling one raises ``NkiError`` at the kernel's line (see ``unsupported.py``)."""

from __future__ import annotations

from nkic.frontend.unsupported import missing_names

__getattr__ = missing_names(
    "nki.collectives",
    "is not simulated yet: nkic simulates no collective communication between ranks",
    "between the two cores of an LNC=2 launch use nisa.sendrecv and nisa.core_barrier",
)
