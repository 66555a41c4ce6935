"""A tick on one machine: how its slot processes start, and the account of each slot."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest

from autoloop_py.loop.iteration.iteration import IterationOutcome
from autoloop_py.loop.record.outcome import Outcome, idle_outcome
from autoloop_py.loop.slots.barrier import account_of, start_method
from autoloop_py.loop.slots.barrier_publish import Published
from autoloop_py.state.history import IterationRecord


def test_slots_fork_only_when_no_other_thread_could_hold_a_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert start_method() == "fork"
    monkeypatch.setattr(threading, "active_count", lambda: 2)  # e.g. litellm's import, a progress display
    assert start_method() == "spawn"


def test_a_slots_account_is_what_the_tick_recorded() -> None:
    record = IterationRecord(status="rejected", timestamp=datetime(2026, 1, 1, tzinfo=timezone.utc), change="c",
                             metric=2.0, notes="lost to a sibling")
    outcome = Outcome("prog", 3, "prog:3:" + "1" * 16, "a" * 40, 1.0, record)
    ran = IterationOutcome("prog", 3, "accepted", "c", 2.0, 1.0, timings={"evaluate": 1.5})
    account = account_of(Published(outcome, record), ran)
    assert (account.iteration, account.status, account.reason, account.timings) == (
        3, "rejected", "lost to a sibling", {"evaluate": 1.5})
    failed = account_of(Published(idle_outcome("prog", "no iteration ran in this slot"), None))
    assert (failed.status, failed.reason) == ("error", "no iteration ran in this slot")
