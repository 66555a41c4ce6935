"""Record integrity and state merges: what counts as a lost record, and an edit re-applied onto a newer file."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from autoloop_py.errors import StateError
from autoloop_py.loop.record.integrity import (
    Recorded,
    check_records,
    checked_state,
    key_iteration,
    lost,
    newest_record,
)
from autoloop_py.state import file as statefile
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.merge import merge_edit
from autoloop_py.state.textmerge import merge3
from tests.programs import small_program


def _state(iterations: int) -> statefile.StateFile:
    state = statefile.new_state("p", "goal", "score", "higher", None)
    for i in range(1, iterations + 1):
        record = IterationRecord("rejected", datetime(2026, 1, 1, i, tzinfo=timezone.utc), f"change {i}", float(i), key=f"p:{i}:k{i}")
        state = statefile.apply_iteration(state, record, direction="higher", target_metric=None)
    return state


def test_a_record_is_lost_when_its_entry_or_its_count_is_gone() -> None:
    state = _state(3)
    assert key_iteration("p:3:k3") == 3 and key_iteration("nonsense") is None
    assert lost(state, Recorded("p:3:k3", 3, "c")) is None
    older = _state(2)
    assert lost(older, Recorded("p:3:k3", 3, "c")) == "Iteration Count is 2, but iteration 3 was already recorded"
    counted = statefile.with_machine(older, replace(older.machine, iteration_count=3))
    assert lost(counted, Recorded("p:3:k3", 3, "c")) == "the history entry of iteration 3 (key p:3:k3) is gone"


def test_a_folded_record_is_not_lost() -> None:
    state = _state(14)  # the oldest entries are folded into a range, their keys with them
    assert any(entry.is_range for entry in state.history)
    assert lost(state, Recorded("p:2:k2", 2, "c")) is None


def test_merge3_applies_one_side_onto_the_other_and_counts_conflicts() -> None:
    base = "a\nb\nc\nd\ne\n"
    assert merge3(base, "A\nb\nc\nd\ne\n", "a\nb\nc\nd\nE\n").text == "A\nb\nc\nd\nE\n"
    assert merge3(base, "a\nX\nc\nd\ne\n", "a\nY\nc\nd\ne\n").conflicts == 1
    assert merge3(base, "same\n", "same\n").clean


def test_an_edit_of_the_table_merges_field_by_field_onto_a_newer_iteration() -> None:
    read = _state(1)
    newer = _state(2)
    edited = statefile.with_machine(read, replace(read.machine, paused=True, pause_reason="checking"))
    edited = statefile.add_item(edited, statefile.FORECLOSED, "negative x")
    merged = statefile.parse_state(
        merge_edit(statefile.render_state(read), statefile.render_state(edited), statefile.render_state(newer), "p.md"), "p.md"
    )
    assert merged.machine.iteration_count == 2 and merged.machine.paused and merged.machine.pause_reason == "checking"
    assert "negative x" in merged.foreclosed and [e.iteration for e in merged.history] == [2, 1]
    clash = statefile.with_machine(read, replace(read.machine, recent_statuses=("error",)))
    with pytest.raises(StateError, match="both changed the Machine State's recent statuses"):
        merge_edit(statefile.render_state(read), statefile.render_state(clash), statefile.render_state(newer), "p.md")


def test_a_count_below_the_history_would_reuse_a_number() -> None:
    from autoloop_py.loop.record.integrity import numbering, problem_of

    state = _state(3)
    assert numbering(state) is None and problem_of(state, None) is None
    lowered = statefile.with_machine(state, replace(state.machine, iteration_count=2))
    assert numbering(lowered) == "Iteration Count is 2, but the history already has iteration 3"
    assert problem_of(lowered, None) == numbering(lowered)
    folded = _state(14)
    lowered = statefile.with_machine(folded, replace(folded.machine, iteration_count=1))
    assert numbering(lowered) == "Iteration Count is 1, but the history already has iteration 14"


def test_the_newest_record_is_read_from_the_tip_when_the_tip_is_it(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = MemoryStore(git_repo)
    logs: list[str] = []
    real = MemoryStore.commits

    def commits(self: MemoryStore, path: str, **kwargs: Any) -> list[Any]:
        logs.append(path)
        return real(self, path, **kwargs)

    monkeypatch.setattr(MemoryStore, "commits", commits)
    first = memory.commit({"p.md": "one\n"}, "[Autoloop: p] rejected (1): a\n\nAutoloop-Key: p:1:aa")
    assert newest_record(memory, "p.md", "p") == Recorded("p:1:aa", 1, first)
    assert logs == []  # the tip is the record: no `git log`
    memory.commit({"other.md": "x\n"}, "[Autoloop: p] rejected (2): b\n\nAutoloop-Key: p:2:bb")  # not p.md
    assert newest_record(memory, "p.md", "p") == Recorded("p:1:aa", 1, first)
    memory.commit({"p.md": "edited\n"}, "a hand edit")
    assert newest_record(memory, "p.md", "p") == Recorded("p:1:aa", 1, first)
    assert len(logs) == 2 + 2  # each asked the log (and whether the file was deleted since)
    third = memory.commit({"p.md": "three\n"}, "[Autoloop: p] accepted (3): c\n\nAutoloop-Key: p:3:cc")
    assert newest_record(memory, "p.md", "p") == Recorded("p:3:cc", 3, third)
    assert newest_record(memory, "p.md", "q") is None and len(logs) == 5  # another program's key: the log


def test_a_record_made_while_a_slot_reads_the_state_is_not_a_lost_one(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot without a barrier reads the state while the run records the slot that ended before it (issue 37)."""
    program = small_program(git_repo, "p")
    memory = MemoryStore(git_repo)
    memory.commit({"p.md": statefile.render_state(_state(3))}, "[Autoloop: p] rejected (3): c\n\nAutoloop-Key: p:3:k3")
    real = MemoryStore.read_at
    racing = [4]  # the iteration the run records right after the slot read the file (none once popped)

    def read_at(self: MemoryStore, commit: str, path: str) -> str | None:
        text = real(self, commit, path)
        if path == "p.md" and racing:
            n = racing.pop()
            message = f"[Autoloop: p] (iteration {n})\n\nAutoloop-Key: p:{n}:k{n}"
            self.commit({"p.md": statefile.render_state(_state(n))}, message)
        return text

    monkeypatch.setattr(MemoryStore, "read_at", read_at)
    read = statefile.parse_state(memory.read_at(memory.tip() or "", "p.md") or "")  # the interleaving, read apart
    with pytest.raises(StateError, match="Iteration Count is 3, but iteration 4 was already recorded"):
        check_records(memory, "p.md", "p", read)
    racing.append(5)
    state = checked_state(memory, program, statefile.DEFAULT_BUDGET)  # the file and its record, at one commit
    assert state.machine.iteration_count == 4 and not racing
    assert checked_state(memory, program, statefile.DEFAULT_BUDGET).machine.iteration_count == 5
    # A copy that did lose the record is still refused.
    memory.commit({"p.md": statefile.render_state(_state(2))}, "a stale copy")
    with pytest.raises(StateError, match="Iteration Count is 2, but iteration 5 was already recorded"):
        checked_state(memory, program, statefile.DEFAULT_BUDGET)
