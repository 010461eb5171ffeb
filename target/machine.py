"""The machine description: engines, semaphores, DMA queues, memories and limits of each NeuronCore generation.

One ``Target`` per generation (gen2 = trn1/inf2, gen3 = trn2, gen4 = trn3). Everything that sizes or checks a
kernel reads these objects; nothing restates their numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from nkic.target.vocab import HBM_MEMORIES, ON_CHIP, Vocabulary

__all__ = [
    "Engine", "ENGINES", "ENGINE_NAMES", "ENGINE_BY_NAME", "NKI_ENGINES", "ENGINE_OF_HINT", "Target", "TARGETS",
    "DEFAULT_TARGET", "TARGET_ALIASES", "get_target", "NUM_PARTITIONS", "NUM_DMA_QUEUES", "QUEUE_SEM_BASE",
    "NUM_SEMAPHORES", "PE_ARRAY", "engine_sem", "queue_sem", "valid_sem", "sem_name", "MAX_SBUF_BYTES",
    "MAX_PSUM_BYTES",
    "MAX_MATMUL_K", "MAX_MATMUL_M", "MAX_MATMUL_N", "REFERENCE_CLOCK_GHZ", "XORWOW_WORDS",
]  # fmt: skip


@dataclass(frozen=True)
class Engine:
    """One engine of a NeuronCore. ``code`` is its id in instruction records and also its semaphore id.

    ``reads`` / ``writes``: the memories its data-path instructions may read / write (IR names; HBM only through
    DMA). Which instructions it may run is each instruction's declaration (``InstrSpec.engines``); these are the
    memories, whatever the instruction.
    """

    name: str  # IR / ISA name
    nki: str  # the nki.isa.engine member that selects it
    code: int
    label: str
    reads: frozenset[str] = frozenset(ON_CHIP)
    writes: frozenset[str] = frozenset(ON_CHIP)
    # XORWOW generators per compute lane (0: the engine has no PRNG). The docs size rand_get_state/rand_set_state
    # at 6 words per lane on GpSimd and 24 on VectorE: one XORWOW state (x0..x4, d) is 6 words, so VectorE lanes
    # hold 4 generators.
    rng_generators: int = 0

    @property
    def psum(self) -> bool:
        """Whether any of its instructions may touch PSUM."""
        return "psum" in self.reads | self.writes

    def reaches(self, memory: str, write: bool) -> bool:
        """Whether it may write (``write``) or read ``memory`` (an IR or ISA memory name)."""
        return memory in (self.writes if write else self.reads)


# The memories of each engine, from the NKI ISA reference (nki/api/nki/isa/__init__.py):
# - TensorE: nisa.nc_matmul "must read inputs from SBUF and write outputs to PSUM"; nisa.nc_transpose "Tensor Engine
#   nc_transpose must read the input tile from SBUF and write the transposed result to PSUM".
# - ScalarE: nisa.activation "The input data tile can be an SBUF or PSUM tile. Similarly, the instruction can write
#   the output dst tile into either SBUF or PSUM."
# - VectorE: nisa.tensor_reduce "Both the input data and dst tiles can be in SBUF or PSUM."
# - GpSimd: nisa.tensor_tensor "Since GpSimd Engine cannot access PSUM, ..." (also nisa.nc_n_gather, nisa.rng).
# - SyncE issues the DMAs: nisa.dma_copy moves data "between memory locations (SBUF or HBM) using DMA engines"
#   (a PSUM source was dropped in NKI 0.3).
_SBUF = frozenset({"sbuf"})
_DMA_MEMS = frozenset({"sbuf", *HBM_MEMORIES})
ENGINES: tuple[Engine, ...] = (
    Engine("pe", "tensor", 0, "PE (TensorE)", reads=_SBUF, writes=frozenset({"psum"})),
    Engine("act", "scalar", 1, "ACT (ScalarE)"),
    Engine("dve", "vector", 2, "DVE (VectorE)", rng_generators=4),
    Engine("pool", "gpsimd", 3, "POOL (GpSimdE)", reads=_SBUF, writes=_SBUF, rng_generators=1),
    Engine("sp", "sync", 4, "SP (SyncE)", reads=_DMA_MEMS, writes=_DMA_MEMS),
)
ENGINE_NAMES: tuple[str, ...] = tuple(e.name for e in ENGINES)
ENGINE_BY_NAME: dict[str, Engine] = {e.name: e for e in ENGINES}

# nki.isa.engine members and their codes (the NKI enum); "unknown" lets the compiler choose.
NKI_ENGINES = Vocabulary(
    "engine", {"unknown": 0, "tensor": 1, "scalar": 2, "gpsimd": 3, "dma": 4, "vector": 5, "sync": 6}
)
# An NKI engine hint -> the engine; DMA triggers are issued by SP.
ENGINE_OF_HINT: dict[str, str] = {**{e.nki: e.name for e in ENGINES}, "dma": "sp"}

NUM_PARTITIONS = 128
PE_ARRAY = 128  # rows and columns of TensorE's systolic array (the unit of matmul tiling mode)
XORWOW_WORDS = 6  # one XORWOW generator's state: x0..x4 and the Weyl counter d, uint32 each
NUM_DMA_QUEUES = 16
QUEUE_SEM_BASE = 8  # DMA queue q signals semaphore QUEUE_SEM_BASE + q; 0..4 are the engines'
NUM_SEMAPHORES = QUEUE_SEM_BASE + NUM_DMA_QUEUES
REFERENCE_CLOCK_GHZ = 1.4  # profile "cycles" are reported at this clock (the gen2 ScalarE/GpSimd clock)


def engine_sem(engine: str) -> int:
    """Semaphore id owned by a compute/sync engine (signalled by its instructions at completion)."""
    return ENGINE_BY_NAME[engine].code


def queue_sem(queue: int) -> int:
    """Semaphore id of DMA queue ``queue`` (signalled when a transfer on that queue completes)."""
    if not 0 <= queue < NUM_DMA_QUEUES:
        raise ValueError(f"DMA queue {queue} out of range 0..{NUM_DMA_QUEUES - 1}")
    return QUEUE_SEM_BASE + queue


def valid_sem(sem: int) -> bool:
    return 0 <= sem < len(ENGINES) or QUEUE_SEM_BASE <= sem < NUM_SEMAPHORES


def sem_name(sem: int) -> str:
    """Profiler-style name, e.g. ``S[2](dve)`` or ``S[8](q0)``."""
    if sem < len(ENGINES):
        return f"S[{sem}]({ENGINES[sem].name})"
    return f"S[{sem}](q{sem - QUEUE_SEM_BASE})"


@dataclass(frozen=True)
class Target:
    """One NeuronCore generation.

    Engine clocks in GHz and the DMA bandwidth per DMA engine in bytes/ns are public figures; the SBUF bytes are
    those usable by kernels per partition; SyncE's clock is unpublished, so it is taken to run at the ScalarE clock.
    """

    name: str
    nc_version: int
    clock_ghz: Mapping[str, float]
    dma_bytes_per_ns: float
    sbuf_bytes_per_partition: int
    sbuf_physical_bytes: int
    psum_bytes_per_partition: int = 16384
    psum_bank_bytes: int = 2048
    num_partitions: int = NUM_PARTITIONS
    num_dma_queues: int = NUM_DMA_QUEUES
    matmul_max_k: int = 128
    matmul_max_m: int = 128
    matmul_max_n: int = 512
    bn_stats_fmax: int = 512  # elements per partition one bn_stats reads
    # nki.isa.dma_transpose: "src.shape[-1] <= 128" (the columns one DMA transpose moves)
    dma_transpose_max_cols: int = 128
    # Whether a matmul result may span several PSUM banks (gen4 accepts N up to 4096).
    matmul_spans_banks: bool = False
    # HBM bytes one NeuronCore can address (the device's HBM over its cores): trn1 32 GiB / 2, trn2 96 GiB / 8,
    # trn3 144 GiB / 8. Every declared tensor, and all of a NEFF's variables together, must fit.
    hbm_bytes: int = 16 << 30
    # TensorE's dense bf16 roofline in FLOP/ns, the figure PE utilisation is quoted against. trn2/trn3: "79 TF"
    # per core (the Trn2/Trn3 architecture guides); trn1: its 128x128 MACs at 2.8 GHz, 91.75 TF (the guide's "92").
    bf16_peak_flops_per_ns: float = 79e3
    aliases: tuple[str, ...] = field(default=())

    @property
    def psum_banks(self) -> int:
        return self.psum_bytes_per_partition // self.psum_bank_bytes

    # Which instructions a generation has is each declaration's ``since`` (target/instructions.py available_on,
    # first_generation): the declarations import this module, not the other way round.


def _clocks(pe: float, dve: float, act: float, pool: float) -> dict[str, float]:
    return {"pe": pe, "dve": dve, "act": act, "pool": pool, "sp": act}


TARGETS: dict[str, Target] = {
    "gen2": Target("gen2", 2, _clocks(2.8, 1.12, 1.4, 1.4), 17.0, 180224, 24 << 20, hbm_bytes=16 << 30,
                   bf16_peak_flops_per_ns=2 * 128 * 128 * 2.8, aliases=("trn1", "inf2")),
    "gen3": Target("gen3", 3, _clocks(2.4, 0.96, 1.2, 1.2), 23.0, 212984, 28 << 20, hbm_bytes=12 << 30,
                   aliases=("trn2",)),
    "gen4": Target("gen4", 4, _clocks(2.4, 1.2, 1.2, 1.2), 33.0, 245752, 32 << 20, matmul_max_n=4096,
                   matmul_spans_banks=True, hbm_bytes=18 << 30, aliases=("trn3",)),
}  # fmt: skip
DEFAULT_TARGET = "gen3"
TARGET_ALIASES: dict[str, str] = {a: t.name for t in TARGETS.values() for a in (t.name, *t.aliases)}

# Static bounds for verifiers that do not know the target: no target is larger.
MAX_SBUF_BYTES = max(t.sbuf_bytes_per_partition for t in TARGETS.values())
MAX_PSUM_BYTES = max(t.psum_bytes_per_partition for t in TARGETS.values())
MAX_HBM_BYTES = max(t.hbm_bytes for t in TARGETS.values())
MAX_MATMUL_K = max(t.matmul_max_k for t in TARGETS.values())
MAX_MATMUL_M = max(t.matmul_max_m for t in TARGETS.values())
MAX_MATMUL_N = max(t.matmul_max_n for t in TARGETS.values())


def get_target(target: str | Target) -> Target:
    if isinstance(target, Target):
        return target
    if target not in TARGET_ALIASES:
        raise ValueError(f"unknown target '{target}', expected one of {', '.join(TARGET_ALIASES)}")
    return TARGETS[TARGET_ALIASES[target]]
