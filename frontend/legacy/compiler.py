"""``neuronxcc.nki.compiler``: ``nki.compiler`` plus the legacy explicit allocations ``sbuf`` / ``psum``.

``nl.ndarray(shape, dtype, buffer=ncc.sbuf.mod_alloc(base_addr=1024))`` placed a tile at a chosen address. nkic
honours these as real allocations: the tile gets exactly the (partition, byte) address the allocation function
computes, and the memory allocator places every other tensor around it (``passes/allocate_memory.py`` keeps
explicit addresses as they are).

* ``sbuf.mod_alloc(base_addr, *, base_partition=0, num_par_tiles=(), num_free_tiles=())`` and
  ``psum.mod_alloc(base_bank=0, *, base_addr=0, base_partition=0, num_bank_tiles=(), num_par_tiles=(),
  num_free_tiles=())``: the documented modulo allocators — block index ``idx`` gets partition
  ``base_partition + lin(idx mod num_par_tiles) * pdim_size``, byte ``base_addr + lin(idx mod num_free_tiles) *
  fdim_size`` and (PSUM) bank ``base_bank + lin(idx mod num_bank_tiles)``.
* ``sbuf.alloc(func)`` / ``psum.alloc(func)``: a user allocation function ``func(idx, pdim_size, fdim_size)``
  returning ``(partition, byte)`` (SBUF) or ``(bank, partition, byte)`` (PSUM), as the SDK's own examples write.
* ``sbuf.auto_alloc()`` / ``psum.auto_alloc()``: the automatic allocator (the plain buffer).

nkic tensors have no block dims: a tile is one allocation, its block index is ``()``, so the modulo counts never
change its address. A PSUM tile must fit in its bank (legacy: "partial bank allocation is not allowed").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nkic.frontend.compiler import *  # noqa: F401,F403 — the modern option decorators
from nkic.frontend.dtypes import BUFFERS
from nkic.frontend.errors import NkiError
from nkic.frontend.unsupported import missing_names
from nkic.target.machine import DEFAULT_TARGET, get_target

AllocFunc = Callable[[tuple[int, ...], int, int], Sequence[int]]


@dataclass(frozen=True)
class Allocation:
    """An explicit placement in ``memory`` ("sbuf" or "psum") given by ``func(idx, pdim_size, fdim_size)``."""

    memory: str
    func: AllocFunc

    def address(self, pdim_size: int, fdim_bytes: int) -> tuple[int, int]:
        """The (partition, byte offset) of a block-less tile of ``pdim_size`` partitions, ``fdim_bytes`` each."""
        try:
            where = tuple(int(v) for v in self.func((), pdim_size, fdim_bytes))
        except NkiError:
            raise
        except Exception as e:  # the user's allocation function failed
            raise NkiError(f"the {self.memory} allocation function raised {type(e).__name__}: {e}") from None
        if self.memory == "sbuf":
            if len(where) != 2:
                raise NkiError(f"an SBUF allocation function returns (partition, byte), got {where}")
            partition, byte = where
        else:
            if len(where) != 3:
                raise NkiError(f"a PSUM allocation function returns (bank, partition, byte), got {where}")
            bank, partition, byte = where
            bank_bytes = get_target(DEFAULT_TARGET).psum_bank_bytes
            if byte < 0 or byte + fdim_bytes > bank_bytes:
                raise NkiError(f"PSUM allocation: bytes {byte}..{byte + fdim_bytes} leave the {bank_bytes}-byte bank "
                               f"{bank}", "partial bank allocation is not allowed")  # fmt: skip
            byte += bank * bank_bytes
        if partition < 0 or byte < 0:
            raise NkiError(f"{self.memory} allocation at partition {partition}, byte {byte}: negative address")
        return partition, byte


def _linear(idx: Sequence[int], tiles: Sequence[int]) -> int:
    counts = tuple(tiles) or (1,) * len(idx)
    wrapped = [i % n for i, n in zip(idx, counts)]
    return sum(i * math.prod(counts[d + 1:]) for d, i in enumerate(wrapped))


class _Memory:
    """``ncc.sbuf`` / ``ncc.psum``."""

    def __init__(self, memory: str):
        self.memory = memory

    def alloc(self, func: AllocFunc) -> Allocation:
        if not callable(func):
            raise NkiError(f"ncc.{self.memory}.alloc needs an allocation function, got {type(func).__name__}")
        return Allocation(self.memory, func)

    def auto_alloc(self) -> Any:
        return BUFFERS[self.memory]

    def __repr__(self) -> str:
        return f"ncc.{self.memory}"


class _Sbuf(_Memory):
    def mod_alloc(self, base_addr: int, *, base_partition: int = 0, num_par_tiles: Sequence[int] = (),
                  num_free_tiles: Sequence[int] = ()) -> Allocation:  # fmt: skip
        def func(idx: tuple[int, ...], pdim_size: int, fdim_size: int) -> tuple[int, int]:
            return (base_partition + _linear(idx, num_par_tiles) * pdim_size,
                    base_addr + _linear(idx, num_free_tiles) * fdim_size)  # fmt: skip

        return Allocation("sbuf", func)


class _Psum(_Memory):
    def mod_alloc(self, base_bank: int = 0, *, base_addr: int = 0, base_partition: int = 0,
                  num_bank_tiles: Sequence[int] = (), num_par_tiles: Sequence[int] = (),
                  num_free_tiles: Sequence[int] = ()) -> Allocation:  # fmt: skip
        def func(idx: tuple[int, ...], pdim_size: int, fdim_size: int) -> tuple[int, int, int]:
            return (base_bank + _linear(idx, num_bank_tiles),
                    base_partition + _linear(idx, num_par_tiles) * pdim_size,
                    base_addr + _linear(idx, num_free_tiles) * fdim_size)  # fmt: skip

        return Allocation("psum", func)


sbuf = _Sbuf("sbuf")
psum = _Psum("psum")

__getattr__ = missing_names("neuronxcc.nki.compiler")
