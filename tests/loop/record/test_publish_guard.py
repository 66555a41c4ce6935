"""publish_guard: the values publish checks against what its own job knows, before it writes a record."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from autoloop_py.loop.record import publish_guard as guard
from autoloop_py.loop.record.outcome import BestRecheck, Outcome, OutcomeError
from autoloop_py.program.models import ModelSpec
from autoloop_py.program.objectives import Objective
from autoloop_py.state.trace import Evaluated
from autoloop_py.state.file import new_state, with_machine
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


# ---------------------------------------------------------------- the bullets that feed the Models table and acceptance

MODELS = frozenset({"openai/good", "anthropic/guide"})
OBJECTIVES = (Objective("score", "higher"), Objective("cost", "lower"))


def used(*extra: tuple[str, str], model: str | None = "openai/good") -> Outcome:
    """Returns the outcome with these record bullets, its candidate proposed by `model`."""
    record = replace(rec("accepted", 1, 0.7), extra=extra)
    return outcome(record=record, evaluated=Evaluated("x = 1\n", {"score": 0.7}, model=model))


HONEST = (("Operator", "mutate — explore"), ("Model", "openai/good"),
          ("Model spend", "openai/good: 120 tokens, $0.002; anthropic/guide: 30 tokens"),
          ("Objectives", "score 3 · cost 2"), ("Acceptance", "pareto: not dominated"))


def test_an_honest_model_use_and_objectives_have_no_problem() -> None:
    assert guard.bullet_problems(used(*HONEST), OBJECTIVES, MODELS) == []
    assert guard.bullet_problems(used(model=None), (), frozenset()) == []  # no model, no objectives: nothing to check


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ((("Model spend", "openai/evil: 5 tokens, $-1e300"),),
         "record.extra Model spend: 'openai/evil' is not one of the program's models (anthropic/guide, openai/good)"),
        ((("Model spend", "openai/good: 5 tokens, $-1e300"),), "openai/good's '-1e300' is not a cost between 0 and"),
        ((("Model spend", "openai/good: 5 tokens, $1e400"),), "openai/good's '1e400' is not a cost"),
        ((("Model spend", "openai/good: 5 tokens, $nan"),), "'openai/good: 5 tokens, $nan' is not `<model>: <n>"),
        ((("Model spend", "openai/good: -5 tokens"),), "'openai/good: -5 tokens' is not `<model>: <n> tokens"),
        ((("Model spend", "openai/good: 999999999999999 tokens"),), "used 999999999999999 tokens, over"),
        ((("Model spend", "openai/good: 1 tokens; openai/good: 2 tokens"),), "'openai/good' is listed twice"),
        ((("Model", "anthropic/guide"), ("Model spend", "anthropic/guide: 1 tokens")),
         "record.extra Model: credits 'anthropic/guide', but 'openai/good' proposed the candidate"),
        ((("Model", "openai/good"),), "record.extra Model: 'openai/good' is credited without a spend of its own"),
        ((("Model", "openai/evil"), ("Model spend", "openai/evil: 1 tokens")),
         "record.extra Model: 'openai/evil' is not one of the program's models"),
        ((("Status", "accepted"),), "record.extra: 'Status' is not a bullet autoloop writes"),
        ((("Model", "openai/good"), ("Model", "openai/good")), "record.extra: 'Model' appears 2 times"),
        ((("Objectives", "score 1e300 · cost -1e300 · bonus 4"),),
         "record.extra Objectives: 'score 1e300 · cost -1e300 · bonus 4' is not each of the program's objectives"),
        ((("Baseline objectives", "score inf · cost 1"),), "record.extra Baseline objectives: 'score inf · cost 1'"),
    ],
)
def test_each_forged_bullet_is_named(extra: tuple[tuple[str, str], ...], says: str) -> None:
    found = guard.bullet_problems(used(*extra), OBJECTIVES, MODELS)
    assert any(says in problem for problem in found), found


def test_the_candidates_own_model_must_be_the_programs_and_objectives_need_declared_ones() -> None:
    found = guard.bullet_problems(used(model="openai/evil"), OBJECTIVES, MODELS)
    assert found == ["evaluated.model: 'openai/evil' is not one of the program's models (anthropic/guide, openai/good)"]
    found = guard.bullet_problems(used(("Objectives", "score 3")), (), MODELS)
    assert found == ["record.extra Objectives: the program declares no objectives"]
    found = guard.bullet_problems(used(("Model spend", "x: 1 tokens"), model=None), (), frozenset())
    assert "(none: the program names no `model:`/`models:` and AUTOLOOP_MODEL is unset)" in found[0]


def test_the_programs_models_are_its_entries_its_model_and_autoloop_model_here(tmp_path: Path) -> None:
    program = small_program(tmp_path)
    assert guard.program_models(program, {}) == frozenset()
    assert guard.program_models(program, {"AUTOLOOP_MODEL": " openai/env "}) == {"openai/env"}
    listed = replace(program, config=replace(program.config, model="openai/one", models=(
        ModelSpec("openai/a"), ModelSpec("anthropic/g", role="guide"))))
    assert guard.program_models(listed, {}) == {"openai/one", "openai/a", "anthropic/g"}



def test_the_held_out_bullets_the_runner_writes_are_published() -> None:
    held = (("Holdout", "0.5 (search 0.7, gap +0.2)"), ("Incumbent holdout", "0.6 (the best's)"))
    assert guard.bullet_problems(used(*HONEST, *held), OBJECTIVES, MODELS) == []


def test_publish_refuses_a_re_check_that_raises_the_best() -> None:
    base, old = "a" * 40, "b" * 40
    outcome = Outcome("counter", 3, "counter:3:" + "0" * 16, None, 4.0, None, base_commit=base)
    fresh = new_state("counter", "Make x large.", "score", "higher", None)
    state = with_machine(fresh, replace(fresh.machine, best_metric=4.0, best_base=old))
    assert guard.recheck_to_record(outcome, state, "higher") is None
    honest = BestRecheck(base, 4.0, 2.0, "the default branch moved")
    assert guard.recheck_to_record(replace(outcome, recheck=honest), state, "higher") == honest
    assert guard.recheck_to_record(replace(outcome, recheck=honest), with_machine(state, honest.applied_to(state.machine)),
                             "higher") is None  # recorded already (another slot's outcome)
    for forged, why in ((BestRecheck(base, 4.0, 9.0, "moved"), "best 9 is not what a re-check of 4 records"),
                        (BestRecheck(base, 4.0, 2.0, None), "best 2 is not what a re-check of 4 records"),
                        (BestRecheck(old, 4.0, 2.0, "moved"), "not on the outcome's base commit")):
        with pytest.raises(OutcomeError, match=why):
            guard.recheck_to_record(replace(outcome, recheck=forged), state, "higher")
