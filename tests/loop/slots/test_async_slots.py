"""Slots without a barrier: what the run records of a slot that ended (its outcome, an error, or nothing)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from autoloop_py.loop.iteration.iteration import IterationOutcome
from autoloop_py.loop.record.outcome import Outcome, idle_outcome, write_outcome
from autoloop_py.loop.slots.async_slots import Launch, _outcome
from autoloop_py.loop.slots.lanes import Finished
from autoloop_py.program.model import Program
from autoloop_py.state.history import IterationRecord
from tests.conftest import GitRunner
from tests.programs import small_program


def _program(git_repo: Path, run_git: GitRunner) -> Program:
    program = small_program(git_repo, "demo")
    run_git(git_repo, "branch", "autoloop/demo")  # the run brought the program branch up to date before any slot
    return program


def test_a_slot_whose_process_failed_is_an_error_of_the_next_number(git_repo: Path, run_git: GitRunner) -> None:
    program = _program(git_repo, run_git)
    launch = Launch(3, 1, git_repo.parent / "launch-3")
    outcome = _outcome(launch, Finished(1, None, "the slot's process died (exit code 9)"), 5, git_repo, program, None)
    assert outcome is not None and outcome.record is not None
    assert (outcome.iteration, outcome.key.split(":")[:2], outcome.record.status) == (5, ["demo", "5"], "error")
    assert "slot 3 (lane 1) failed before its outcome: the slot's process died (exit code 9)" in outcome.record.notes
    assert outcome.base_tree == run_git(git_repo, "rev-parse", "autoloop/demo^{tree}").strip()


def test_a_slot_that_ran_no_iteration_records_nothing(git_repo: Path, run_git: GitRunner) -> None:
    program = _program(git_repo, run_git)
    paused = IterationOutcome("demo", 4, "paused", "no model call", None, 1.0, reason="the daily budget is spent")
    launch = Launch(0, 0, git_repo.parent / "launch-0")
    assert _outcome(launch, Finished(0, paused), 5, git_repo, program, None) is None
    write_outcome(launch.directory, idle_outcome("demo", "no iteration ran"))
    assert _outcome(launch, Finished(0, None, "died after its outcome"), 5, git_repo, program, None) is None


def test_a_slot_that_wrote_its_outcome_is_recorded_from_it_even_if_its_process_died_after(
    git_repo: Path, run_git: GitRunner
) -> None:
    program = _program(git_repo, run_git)
    launch = Launch(2, 0, git_repo.parent / "launch-2")
    record = IterationRecord(status="rejected", timestamp=datetime(2026, 1, 2, tzinfo=timezone.utc), change="c",
                             metric=0.5)
    written = Outcome("demo", 4, "demo:4:" + "ab" * 8, "a" * 40, 1.0, record)
    write_outcome(launch.directory, written)
    outcome = _outcome(launch, Finished(0, None, "the slot's process died (exit code 9)"), 5, git_repo, program, None)
    assert outcome is not None and (outcome.key, outcome.record) == (written.key, record)
