"""A wall-clock limit for the fuzz tests: a mutant that hangs fails its test instead of stalling the suite."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any


class Hang(Exception):
    """Raised inside the limited block when it runs past its limit."""


@contextlib.contextmanager
def time_limit(seconds: int, what: str = "the block") -> Iterator[None]:
    """Raise `Hang` in the limited block after `seconds` (SIGALRM: main thread, POSIX)."""

    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"{what} ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
