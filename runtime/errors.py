"""Exceptions shared by the runtime modules (kept separate so the codec and the container do not import each other)."""

from __future__ import annotations


class NeffFormatError(Exception):
    """A NEFF file or one of its members is malformed, inconsistent or unsafe to load."""


class SimulationError(RuntimeError):
    """The simulator met an instruction it cannot execute (bad operand, out-of-bounds access, ...)."""


class SimulationDeadlock(SimulationError):
    """No engine can make progress and no transfer is in flight."""
