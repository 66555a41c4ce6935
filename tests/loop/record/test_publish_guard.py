"""publish_guard: the values publish checks against what its own job knows, before it writes a record."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from autoloop_py.loop.record import publish_guard as guard
from autoloop_py.loop.record.outcome import Outcome, OutcomeError
from autoloop_py.state.trace import Evaluated
from autoloop_py.strategies.slots import MAX_SLOTS
from tests.programs import small_program
from tests.state_helpers import T0, fresh, rec, run

NOW = T0 + timedelta(hours=3)
WINDOW = guard.publish_window(NOW, T0)
KEY = "demo:1:0123456789abcdef"


def outcome(**changes: object) -> Outcome:
    """Returns an accepted outcome of iteration 1 of `demo`, recorded an hour into the window."""
    made = Outcome("demo", 1, KEY, "a" * 40, 0.5, rec("accepted", 1, 0.7))
    return replace(made, **changes)  # type: ignore[arg-type]


def test_the_window_runs_from_the_plans_start_to_now_with_slack() -> None:
    assert WINDOW == guard.PublishWindow(T0 - guard.SLACK, NOW + guard.SLACK)
    assert guard.publish_window(NOW).not_before == NOW - guard.DEFAULT_WINDOW - guard.SLACK


def test_an_honest_outcome_has_no_problem() -> None:
    assert guard.field_problems(outcome(), "demo", WINDOW) == []


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"program": "other"}, "program: the outcome is for 'other', the workflow publishes 'demo'"),
        ({"key": "other:1:0123456789abcdef"}, "key: 'other:1:0123456789abcdef' is not a key of 'demo'"),
        ({"iteration": 0, "key": "demo:0:0123456789abcdef"}, "iteration: 0 is not an iteration number"),
        ({"record": rec("accepted", -2, 0.7)}, "record.timestamp: 2026-11-21T14:40:00+00:00 is before this run"),
        ({"record": rec("accepted", 4, 0.7)}, "record.timestamp: 2026-11-21T20:40:00+00:00 is in the future"),
        ({"record": replace(rec("accepted", 1, 0.7), timestamp=datetime.min.replace(
            tzinfo=timezone(timedelta(hours=5))))}, "record.timestamp: 0001-01-01T00:00:00+05:00 is out of range"),
        ({"record": rec("accepted", 1, 0.7, cost=-1.0)}, "record.cost: -1 is not between 0 and"),
        ({"record": rec("accepted", 1, 0.7, tokens=10**13)}, "record.tokens: 10000000000000 is over"),
        ({"evaluated": Evaluated("x = 1\n", {"score": 0.7}, cost=-5.0)}, "evaluated.cost: -5 is not between"),
    ],
)
def test_each_forged_field_is_named(changes: dict[str, object], says: str) -> None:
    found = guard.field_problems(outcome(**changes), "demo", WINDOW)
    assert any(says in problem for problem in found), found


def test_refuse_names_every_problem_and_is_quiet_without_one() -> None:
    guard.refuse("demo", [])
    with pytest.raises(OutcomeError, match="refusing the outcome of 'demo', nothing was written: a; b"):
        guard.refuse("demo", ["a", "b"])


def test_numbers_past_any_slot_are_claims_older_ones_are_renumbered() -> None:
    state = run(fresh(), [rec("accepted", 0, 0.5)])  # iteration 1 recorded: the next is 2
    assert guard.numbered_claims([outcome(iteration=2, key="demo:2:0123456789abcdef")], state) == []
    assert guard.numbered_claims([outcome()], state) == []  # a run recorded meanwhile: renumbered, not refused
    last = 1 + MAX_SLOTS
    slot = outcome(iteration=last, key=f"demo:{last}:0123456789abcdef")  # the last slot of the widest tick
    assert guard.numbered_claims([slot], state) == []
    claims = guard.numbered_claims([outcome(iteration=last + 1, key=f"demo:{last + 1}:0123456789abcdef")], state)
    assert claims == [f"iteration: {last + 1} is not the next iteration of 'demo' (2, or up to {last} for the slots "
                      "of a tick)"]
    assert guard.renumbered(outcome(), 2).key == "demo:2:0123456789abcdef"


def test_a_record_that_would_leave_an_unparseable_state_is_named(tmp_path: Path) -> None:
    program = small_program(tmp_path)
    honest = rec("accepted", 1, 0.7)
    assert guard.state_problems(fresh(), program, [honest], 30_000) == []
    # The year 1 renders as `1-01-01T…` in Last Run, which the parser refuses.
    ancient = replace(honest, timestamp=datetime(1, 1, 1, tzinfo=timezone.utc))
    found = guard.state_problems(fresh(), program, [ancient], 30_000)
    assert len(found) == 1 and found[0].startswith("record: the state file would not parse back once written")
    assert "Last Run" in found[0]
