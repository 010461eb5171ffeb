"""Bounds on the work one compile may do, so that a wrong or hostile kernel gets an error instead of a hang.

* ``max_trip_count``: iterations of one loop the tracer runs or records (``nl.static_range``, ``nl.affine_range``,
  ``nl.sequential_range``); runtime loops (``nl.dynamic_range``) are not unrolled and not bounded.
* ``max_instructions``: instructions one kernel may have, counted while tracing (every traced call) and again by
  ``bir-unroll`` before it expands any loop (loop bodies times trip counts).
* ``max_retraces``: how many times the tracer may re-trace a kernel to unroll loops it traced rolled. Every re-trace
  unrolls a loop it had not (one that is not new is an error: it would repeat forever), and a loop line's second
  occurrence unrolls all of its occurrences, so a kernel needs at most two per loop line of its source; nki-library's
  ``allgather_compute_matmul`` on an LNC=2 grid needs 74 (42 loop lines). The bound only caps the time spent.

Raise them with the environment variables ``NKIC_MAX_TRIP_COUNT``, ``NKIC_MAX_INSTRUCTIONS`` and
``NKIC_MAX_RETRACES``, or, for ``nkic-opt``, the pass option ``bir-unroll{max-instructions=N}``.
"""

from __future__ import annotations

import os

__all__ = ["DEFAULT_MAX_TRIP_COUNT", "DEFAULT_MAX_INSTRUCTIONS", "DEFAULT_MAX_RETRACES", "max_trip_count",
           "max_instructions", "max_retraces"]  # fmt: skip

DEFAULT_MAX_TRIP_COUNT = 1 << 16
DEFAULT_MAX_INSTRUCTIONS = 1 << 19
TRIP_COUNT_VAR = "NKIC_MAX_TRIP_COUNT"
INSTRUCTIONS_VAR = "NKIC_MAX_INSTRUCTIONS"
DEFAULT_MAX_RETRACES = 1024  # two per loop line for 512 loop lines
RETRACES_VAR = "NKIC_MAX_RETRACES"


def _env_int(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} must be a positive integer") from None
    if value <= 0:
        raise ValueError(f"{name}={text!r} must be a positive integer")
    return value


def max_trip_count() -> int:
    return _env_int(TRIP_COUNT_VAR, DEFAULT_MAX_TRIP_COUNT)


def max_instructions() -> int:
    return _env_int(INSTRUCTIONS_VAR, DEFAULT_MAX_INSTRUCTIONS)


def max_retraces() -> int:
    return _env_int(RETRACES_VAR, DEFAULT_MAX_RETRACES)
