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


def on_chip_case(inputs: tuple[Any, ...], psum: tuple[int, ...], outs: tuple[Any, ...], body: Any) -> tuple[Any, ...]:
    """Load each given input (None: left out) into SBUF, or through SBUF into PSUM for the indices in ``psum``; run
    ``body(*tiles, *outputs)`` with ``outs`` fresh (shape, dtype) SBUF tiles; store the outputs."""
    tiles = []
    for i, a in enumerate(inputs):
        if a is None:
            continue
        t = load(a)
        if i in psum:
            p = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.psum)
            nisa.tensor_copy(dst=p, src=t)
            t = p
        tiles.append(t)
    out = [nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf) for shape, dtype in outs]
    body(*tiles, *out)
    return tuple(store(t) for t in out)
