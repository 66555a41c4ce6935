"""Publishing a tick: the winner among the slots, their numbers, the tick's commit message, the batch memory."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from autoloop_py.loop.record.outcome import Outcome, OutcomeError, idle_outcome
from autoloop_py.loop.record.recovery import trailer_values
from autoloop_py.loop.slots.barrier_publish import (
    BatchMemory,
    check_tick,
    lost_note,
    numbered,
    side_ref,
    tick_message,
    winner,
)
from autoloop_py.program.objectives import Objective, Scalarisation
from autoloop_py.state.history import KEY_TRAILER, IterationRecord

NOW = datetime(2026, 1, 2, tzinfo=timezone.utc)


def _outcome(iteration: int, status: str, metric: float | None, program: str = "prog") -> Outcome:
    record = IterationRecord(status=status, timestamp=NOW, change=f"change {iteration}", metric=metric)
    return Outcome(program, iteration, f"{program}:{iteration}:{iteration:016x}", "a" * 40, 1.0, record)


def test_the_best_accepted_slot_wins_and_ties_go_to_the_lowest_iteration() -> None:
    slots = [_outcome(3, "accepted", 2.0), _outcome(1, "rejected", 0.5), _outcome(2, "accepted", 3.0),
             _outcome(4, "accepted", 3.0), _outcome(5, "error", None)]
    assert winner(slots, "higher") is slots[2]
    assert winner(slots, "lower") is slots[0]
    assert winner([slots[1], slots[4]], "higher") is None


def test_under_objectives_the_winner_is_one_no_sibling_dominates() -> None:
    """The winner is a slot acceptance would keep against its siblings, not the best primary metric (issue 37)."""
    objectives = (Objective("score", "higher"), Objective("cost", "lower"))

    def slot(iteration: int, score: float, cost: float, metric: float | None = None) -> Outcome:
        outcome = _outcome(iteration, "accepted", score if metric is None else metric)
        assert outcome.record is not None
        extra = (("Objectives", f"score {score:g} · cost {cost:g}"),)
        return replace(outcome, record=replace(outcome.record, extra=extra))

    traded, dominated, dominating = slot(1, 4.0, 1.0), slot(2, 6.0, 9.0), slot(3, 6.0, 8.0)  # 2 and 3 tie on score
    assert winner([traded, dominated, dominating], "higher") is dominated  # the primary metric alone
    assert winner([traded, dominated, dominating], "higher", objectives) is dominating
    assert winner([traded, dominated], "higher", objectives) is dominated  # a trade-off: the best score of the two
    # A primary metric that is not one of the objectives: the best of it is dominated.
    found = winner([slot(1, 1.0, 5.0, metric=9.0), slot(2, 2.0, 4.0, metric=1.0)], "higher", objectives)
    assert found is not None and found.iteration == 2
    cheap = Scalarisation((("score", 1.0), ("cost", -1.0)))
    assert winner([traded, dominated, dominating], "higher", objectives, cheap) is traded  # 4 - 1 beats -3 and -2
    assert winner([_outcome(4, "accepted", 9.0)], "higher", objectives) is None  # no objectives recorded: not judged


def test_a_tick_is_one_programs_slots_with_distinct_numbers() -> None:
    check_tick([_outcome(1, "rejected", 0.5), _outcome(2, "rejected", 0.5), idle_outcome("prog", "x")], "prog")
    with pytest.raises(OutcomeError, match="claim iteration 2"):
        check_tick([_outcome(2, "rejected", 0.5), _outcome(2, "accepted", 2.0)], "prog")
    with pytest.raises(OutcomeError, match="outcomes of 'prog' and other"):
        check_tick([_outcome(1, "rejected", 0.5), _outcome(2, "rejected", 0.5, program="other")], "prog")


def test_slots_are_numbered_from_the_next_iteration_keeping_their_tokens() -> None:
    arrived = [_outcome(4, "rejected", 0.5), _outcome(6, "accepted", 2.0)]  # slot 5's job failed
    again = numbered(arrived, 4)
    assert [(o.iteration, o.key) for o in again] == [(4, arrived[0].key), (5, f"prog:5:{6:016x}")]
    assert again[0] is arrived[0]


def test_the_ticks_commit_carries_every_slots_key_the_newest_last() -> None:
    slots = [_outcome(1, "accepted", 2.0), _outcome(2, "rejected", 0.5)]
    message = tick_message("prog", slots, {o.key: o.record for o in slots if o.record is not None})
    assert message.splitlines()[0] == "[Autoloop: prog] tick of 2 (iterations 1–2): 1 accepted, 2 rejected"
    assert trailer_values(message, KEY_TRAILER) == [slots[0].key, slots[1].key]


def test_a_lost_improver_says_who_won_and_where_its_commit_is() -> None:
    won, lost = _outcome(2, "accepted", 3.0), _outcome(3, "accepted", 2.5)
    assert lost.record is not None
    note = lost_note(lost.record, won, side_ref("prog", 3))
    assert note == ("improved on the best with 2.5, but slot iteration 2 of the same tick did better (3) and took "
                    "the branch; kept in the Population, its commit at refs/autoloop/slots/prog/3")
    assert note.replace("kept in the Population, its commit at", "its commit is kept at") == lost_note(
        lost.record, won, side_ref("prog", 3), population=False)


def test_batch_memory_reads_its_own_writes_and_commits_nothing() -> None:
    branch = {"prog.md": "old", "other.md": "kept"}
    batch = BatchMemory(branch.get)
    assert batch.update("prog.md", lambda text: f"{text}+1", "m", extra=lambda: {"trace.md": b"row"}) == ""
    batch.update("prog.md", lambda text: f"{text}+2", "m")
    assert batch.read("prog.md") == "old+1+2" and batch.read("trace.md") == "row" and batch.read("other.md") == "kept"
    assert branch == {"prog.md": "old", "other.md": "kept"}
