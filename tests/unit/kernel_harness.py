"""What kernel tests wrap around the instruction under test: a DMA of an HBM input into an on-chip tile, and of a
tile out to a new HBM output. Called inside a traced kernel, through the public NKI API."""

from __future__ import annotations

from typing import Any

from nkic import api as nki

nl, nisa = nki.language, nki.isa


def load(x: Any, buffer: Any = None) -> Any:
    """A new tile (SBUF unless ``buffer`` says otherwise) holding ``x``, by DMA."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf if buffer is None else buffer)
    nisa.dma_copy(dst=t, src=x)
    return t


def store(t: Any) -> Any:
    """A new shared-HBM output holding the tile ``t``, by DMA."""
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out
