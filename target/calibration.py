"""The public measurements the cost model (``target/costs.py``) is calibrated and checked against, as one table.

Each ``Measurement`` is a latency published for real hardware (with its source), the shape it was published at, the
shape nkic runs it at (smaller where the published size takes minutes to compile; the published figure is then
scaled by the work, see ``Measurement.scale``), and the model's prediction at that shape *as last measured*.
``tests/unit/test_cost_calibration.py`` re-measures every prediction and fails when a stored one is no longer
current (so a change to the model updates this table in the same commit), and checks each against its published
figure. The stored predictions let ``status_line()``, which ``nkic run --timing-only``, ``nkic profile`` and
``nki.benchmark`` print, state the model's error without simulating anything at run time.

Sources:

* MMT: aws-neuron-sdk general/nki/tutorials/matrix_multiplication.rst, "Performance": the four tutorial kernels at
  lhsT [8192, 4096] @ rhs [8192, 8192] bf16 on one trn1 NeuronCore, 51.80 / 42.96 / 22.07 / 6.97 ms, the last at 85%
  of the PE roofline. ``bench/matmul_tutorial.py`` runs the published size; ``bench/README.md`` has that table.
* MAMBA: aws-neuron-sdk nki/guides/tutorials/fused_mamba.rst: ``mamba_v1`` (the kernel of
  nki/examples/fused_mamba/mamba_nki_kernels.py) at batch 1, channels 256, seq 512, state 16, fp32, on trn1:
  172.93 µs (the tutorial's PyTorch 151.83 ms -> NKI 172.93 µs). The shape is (batch, channels, seq, state).
* DMAO: aws-neuron-sdk nki/get-started/about/nki-dma-overview.rst: one [4, 4096] bf16 HBM -> SBUF transfer (32 KiB,
  4 partitions, so one DMA engine) on trn2 takes 1,416 ns in the profile shown, i.e. the transfer's span on its
  DMA queue; the model's figure is that transfer's data phase on its queue track (its trigger-to-start latency
  is the separate fixed cost of DBW, not part of the span).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

__all__ = ["MEASUREMENTS", "MMT_PE_ROOFLINE", "Measurement", "median_error", "status_line"]

MMT = "MMT: aws-neuron-sdk general/nki/tutorials/matrix_multiplication.rst (Performance table, trn1)"
MMT_SHAPE = (8192, 4096, 8192)  # (K, M, N): lhsT [K, M] @ rhs [K, N], bf16
MMT_PE_ROOFLINE = 0.85  # MMT: fully_optimized reaches 85% of the PE roofline (checked by the calibration test)
MAMBA = "MAMBA: aws-neuron-sdk nki/guides/tutorials/fused_mamba.rst (mamba_v1, trn1)"
MAMBA_SHAPE = (1, 256, 512, 16)  # (batch, channels, seq, state), fp32
DMAO = "DMAO: aws-neuron-sdk nki/get-started/about/nki-dma-overview.rst (one [4, 4096] bf16 HBM->SBUF transfer, trn2)"
DMAO_SHAPE = (4, 4096)  # partitions, bf16 elements per partition


@dataclass(frozen=True)
class Measurement:
    """One published latency and the model's prediction for it.

    ``shape`` is what nkic runs (for the matmul tutorial, (K, M, N): lhsT [K, M] @ rhs [K, N]); when it differs from
    ``published_shape`` the published figure is scaled by the ratio of the products of the dimensions (the FLOPs of a
    matmul), which holds when the kernel's bottleneck grows with that work (the calibration test explains why it does
    for each row). ``predicted_ns`` is the model's latency at ``shape``, as last measured by that test."""

    name: str  # the kernel as its source names it
    generation: str  # nkic's target name: "gen2" is trn1, "gen3" trn2
    published_ns: float  # at published_shape
    source: str
    published_shape: tuple[int, ...]
    shape: tuple[int, ...]
    predicted_ns: float

    @property
    def scale(self) -> float:
        """The work at ``shape`` relative to ``published_shape`` (1 when nkic runs the published shape)."""
        return math.prod(self.shape) / math.prod(self.published_shape)

    @property
    def expected_ns(self) -> float:
        """The published latency, scaled to ``shape``."""
        return self.published_ns * self.scale

    @property
    def error(self) -> float:
        """The stored prediction relative to the published (scaled) latency, minus 1: 0.05 is 5% slow."""
        return self.predicted_ns / self.expected_ns - 1.0


MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement("nki_matmul_tiled_", "gen2", 51.80e6, MMT, MMT_SHAPE, (1024, 512, 8192), 896015.4),
    Measurement("nki_matmul_hoist_load_", "gen2", 42.96e6, MMT, MMT_SHAPE, (1024, 512, 8192), 641701.0),
    Measurement("nki_matmul_block_free_dimension_", "gen2", 22.07e6, MMT, MMT_SHAPE, (1024, 512, 8192), 333281.9),
    Measurement("nki_matmul_fully_optimized_", "gen2", 6.97e6, MMT, MMT_SHAPE, (1024, 2048, 8192), 434385.5),
    Measurement("mamba_v1", "gen2", 172.93e3, MAMBA, MAMBA_SHAPE, MAMBA_SHAPE, 171268.3),
    Measurement("dma_hbm_to_sbuf", "gen3", 1416.0, DMAO, DMAO_SHAPE, DMAO_SHAPE, 1424.7),
)  # fmt: skip


def median_error(measurements: tuple[Measurement, ...] | None = None) -> float:
    """The median of |predicted / published - 1| over ``measurements`` (the table by default), in percent."""
    measurements = MEASUREMENTS if measurements is None else measurements
    return 100.0 * statistics.median(abs(m.error) for m in measurements)


def status_line(measurements: tuple[Measurement, ...] | None = None) -> str:
    """The one line the timing commands print about how far the model is from the hardware it was checked against:
    the median error and the number of measurements of ``measurements`` (the table by default)."""
    measurements = MEASUREMENTS if measurements is None else measurements
    return (f"model: trn1/trn2 cost model, median error {median_error(measurements):.1f}% on {len(measurements)} "
            f"public measurements (see docs)")  # fmt: skip
