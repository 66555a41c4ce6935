"""Tests for recording.py: the state file's hard size cap."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from autoloop_py.errors import StateError
from autoloop_py.loop.record import recording
from autoloop_py.loop.record.outcome import Outcome
from autoloop_py.loop.record.publishing import next_of_state
from autoloop_py.program.model import Program
from autoloop_py.state import file as statefile
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.memory import MemoryStore
from tests.programs import small_program


@pytest.fixture
def program(tmp_path: Path) -> Program:
    return small_program(tmp_path)


def test_the_hard_cap_is_ten_budgets_but_never_below_the_floor() -> None:
    assert recording.hard_cap(statefile.DEFAULT_BUDGET) == recording.HARD_CAP_FLOOR == 8 << 20
    assert recording.hard_cap(2 << 20) == 20 << 20


def test_a_state_file_over_the_hard_cap_is_refused_without_being_parsed(
    program: Program, monkeypatch: pytest.MonkeyPatch
) -> None:
    def parse(*_: object) -> None:
        raise AssertionError("parsed a state file over the hard cap")

    monkeypatch.setattr(statefile, "parse_state", parse)
    text = "# Autoloop: demo\n" + "é" * (recording.HARD_CAP_FLOOR // 2)  # 2 bytes a character: just over
    with pytest.raises(StateError) as caught:
        recording.parse_or_new(text, program, "demo.md")
    size = len(text.encode())
    assert str(caught.value) == (
        f"demo.md: the state file is {size} bytes, over the hard cap of {8 << 20} (10x its 30720-byte budget, "
        f"at least {8 << 20}), so it is not read; fold or delete old history entries on the memory branch by hand"
    )


def test_a_state_file_under_the_cap_is_parsed(program: Program, monkeypatch: pytest.MonkeyPatch) -> None:
    text = statefile.render_state(statefile.new_state("demo", "Grow x.", "score", "higher", None))
    assert recording.parse_or_new(text, program, "demo.md").machine.iteration_count == 0
    monkeypatch.setattr(statefile, "parse_state", lambda text, path: f"parsed {len(text)}")
    big = text + "a" * (9 << 20)
    assert recording.parse_or_new(big, program, "demo.md", budget=1 << 20) == f"parsed {len(big)}"  # type: ignore[comparison-overlap]


def test_a_failed_evaluations_note_carries_its_log_tail_and_stage() -> None:
    from autoloop_py.loop.evaluation.evaluate import EvaluationResult
    from autoloop_py.loop.record.recording import failure_note, rejected_note

    failed = EvaluationResult(False, None, {}, "exited with status 1: OOM", (), "", "", 1.0,
                              feedback="step 1\nstep 2: CUDA out of memory")
    assert failure_note(failed) == "evaluation failed: exited with status 1: OOM — step 2: CUDA out of memory"
    staged = EvaluationResult(False, None, {}, "exited with status 2: x", (), "", "", 1.0, stopped="stage 1 of 2: x")
    assert failure_note(staged) == "evaluation failed: stopped at stage 1 of 2: x"
    rejected = EvaluationResult(True, 0.0, {}, None, (0.0,), "", "", 1.0, rejection="negative radii")
    assert rejected_note(rejected) == "the evaluation rejected it: negative radii (metric 0)"
    assert rejected_note(EvaluationResult(True, 0.5, {}, None, (0.5,), "", "", 1.0, stopped="stage 1 of 2: low"), 4.25) \
        == "stopped at stage 1 of 2: low (metric 0.5); later stages not run; saved about 4.2 s"


def test_a_record_whose_entry_was_folded_is_not_recorded_again(git_repo: Path) -> None:
    """A publish re-run, or a retried record, after the history folded the entry (and its key) into a range."""
    program = small_program(git_repo, "demo")
    memory = MemoryStore(git_repo)
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    first = IterationRecord("accepted", when, "raise x", 2.0, key="demo:1:0123456789abcdef")
    for n in range(1, 15):
        record = first if n == 1 else IterationRecord("rejected", when, f"try {n}", 1.0, key=f"demo:{n}:{n:016x}")
        recording.record_iteration(memory, program, record, statefile.DEFAULT_BUDGET)
    state = recording.load_state(memory, program)
    assert state.machine.iteration_count == 14 and not any(e.key == first.key for e in state.history)  # folded
    for key in (first.key, "demo:3:0123456789abcdef"):  # as recorded, and as a slot numbered 3 at launch
        assert recording.recorded_before(state, key, memory, "demo.md")
        recording.record_iteration(memory, program, replace(first, key=key), statefile.DEFAULT_BUDGET)
        outcome = Outcome("demo", 3, key, None, None, replace(first, key=key))
        assert next_of_state(outcome, program, state, statefile.DEFAULT_BUDGET, memory) is outcome  # not renumbered
    assert recording.load_state(memory, program).machine.iteration_count == 14
    assert not recording.recorded_before(state, "demo:3:fedcba9876543210", memory, "demo.md")
    assert not recording.recorded_before(state, "demo:15:0123456789abcdef", memory, "demo.md")  # past every range
