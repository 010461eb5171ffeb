"""``active_context`` outside every trace answers from a module global, never from the ContextVar: torch.compile's
dynamo inlines a kernel's call and cannot trace ``ContextVar.get`` (a graph break that failed every fullgraph
compile of a kernel, tests/unit/test_interop_torch.py). Inside a trace, each thread still sees its own."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from nkic.frontend import context


class _Unreadable:
    """A ContextVar stand-in that fails if read (as dynamo does)."""

    def get(self) -> Any:
        raise AssertionError("the ContextVar was read")


def test_no_trace_open_answers_without_the_context_var(monkeypatch: pytest.MonkeyPatch) -> None:
    assert context._open_activations == 0
    monkeypatch.setattr(context, "_ACTIVE", _Unreadable())
    assert context.active_context() is None


def test_an_open_trace_is_seen_by_its_thread_only() -> None:
    marker, seen = object(), {}
    token = context.activate(marker)
    try:
        assert context.active_context() is marker
        other = threading.Thread(target=lambda: seen.setdefault("other", context.active_context()))
        other.start()
        other.join()
        assert seen["other"] is None  # another thread has no trace although one is open here
    finally:
        context.deactivate(token)
    assert context._open_activations == 0 and context.active_context() is None
