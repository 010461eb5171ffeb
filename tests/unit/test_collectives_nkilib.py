"""nki-library's collective kernels, unmodified, on N simulated ranks against numpy translations of their references.

* ``experimental/collectives/sb2sb_allgather.py``: ``allgather_sb2sb`` and ``allgather_sb2sb_tiled`` (one program
  and an LNC=2 grid): every rank's output is the ranks' inputs concatenated along the last dim.
* ``fg_allgather.py``: ``fine_grained_allgather``, the ring of ``collective_permute_implicit`` with
  ``collective_permute_implicit_current_processing_rank_id`` as a dynamic DMA offset, SBUF and HBM paths: the result
  is every rank's ``lhs`` in rank order (its docstring's "Fully gathered tensor", laid out as the kernel reshapes it).
* ``fgcc.py``: ``allgather_compute_matmul``: rank r's result is ``gather(lhs) @ rhs_r`` (rhs column-sharded).

The kernels' docstrings give tp_degree 4 (and up) with one replica group; the tests run 4 ranks.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest

RANKS = 4
PKG = "nkilib.experimental.collectives"


def _ranks_data(shape: tuple[int, ...], seed: int) -> list[np.ndarray]:
    return [np.random.default_rng(seed + r).standard_normal(shape).astype(np.float32) for r in range(RANKS)]


@pytest.mark.parametrize("lnc", [1, 2])
def test_allgather_sb2sb(nkilib: Callable[[str], ModuleType], lnc: int) -> None:
    import nki
    from nki.collectives import ReplicaGroup

    m = nkilib(f"{PKG}.sb2sb_allgather")
    group = ReplicaGroup([list(range(RANKS))])
    xs = _ranks_data((128, 64), 0)
    if lnc == 1:  # the untiled kernel runs as one program
        for out in nki.simulate(m.allgather_sb2sb, ranks=RANKS)(xs, group, RANKS):
            np.testing.assert_array_equal(out, np.concatenate(xs, axis=1))
    xs = _ranks_data((256, 32), 10)  # two M tiles: one per LNC program under [2]
    kernel = m.allgather_sb2sb_tiled if lnc == 1 else m.allgather_sb2sb_tiled[lnc]
    for out in nki.simulate(kernel, ranks=RANKS)(xs, group, RANKS):
        np.testing.assert_array_equal(out, np.concatenate(xs, axis=1))


@pytest.mark.parametrize("lnc, force_hbm", [(1, False), (1, True), (2, False), (2, True)])
def test_fine_grained_allgather(nkilib: Callable[[str], ModuleType], lnc: int, force_hbm: bool) -> None:
    import nki

    m = nkilib(f"{PKG}.fg_allgather")
    xs = _ranks_data((128, 128), 20)
    kernel = m.fine_grained_allgather if lnc == 1 else m.fine_grained_allgather[lnc]
    outs = nki.simulate(kernel, ranks=RANKS)(xs, RANKS, 1, force_hbm)
    for out in outs:
        # result[rank, ...] is that rank's lhs (the kernel's reshape of it into LNC / channel slices)
        np.testing.assert_array_equal(out, np.stack(xs).reshape(out.shape))


@pytest.mark.parametrize("lnc, force_hbm", [(1, False), (1, True), (2, True)])
def test_allgather_compute_matmul(nkilib: Callable[[str], ModuleType], lnc: int, force_hbm: bool) -> None:
    import nki

    m = nkilib(f"{PKG}.fgcc")
    lhs, rhs = _ranks_data((128, 128), 30), _ranks_data((128, 256), 40)
    kernel = m.allgather_compute_matmul if lnc == 1 else m.allgather_compute_matmul[lnc]
    outs = nki.simulate(kernel, ranks=RANKS)(lhs, rhs, RANKS, 1, force_hbm)
    for r, out in enumerate(outs):
        want = np.stack([x @ rhs[r] for x in lhs])  # every rank's rows, in rank order, times this rank's columns
        np.testing.assert_allclose(out.reshape(want.shape), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tp_degree, num_groups", [(8, 1), (4, 2)])
def test_fine_grained_allgather_on_8_ranks(nkilib: Callable[[str], ModuleType], tp_degree: int, num_groups: int) -> None:
    """tp_degree 8 (one ring of 8), and two rings of 4 (num_groups=2: replica group [[0..3], [4..7]]): each rank
    gathers its own ring's inputs (the ring's rank ids are positions in the ring, as the result's first dim is)."""
    import nki

    m = nkilib(f"{PKG}.fg_allgather")
    xs = [np.random.default_rng(60 + r).standard_normal((64, 128)).astype(np.float32) for r in range(8)]
    outs = nki.simulate(m.fine_grained_allgather, ranks=8)(xs, tp_degree, num_groups, False)
    for r, out in enumerate(outs):
        ring = xs[r // tp_degree * tp_degree: (r // tp_degree + 1) * tp_degree]
        np.testing.assert_array_equal(out, np.stack(ring).reshape(out.shape))
