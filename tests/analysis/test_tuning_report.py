"""Tests of the tuning-gap report: candidate choice, penalties, the best-so-far curve and the verdict."""

from __future__ import annotations

import pytest

from autoloop_py.analysis.tuning import find_knobs
from autoloop_py.analysis.tuning_report import (
    Choice,
    Trial,
    best_trial,
    build_report,
    choose,
    curve,
    initial_points,
    objective,
    outcome,
    penalty,
    trial_kind,
)
from autoloop_py.errors import AutoloopError

CHOICES = (
    Choice("seed", 0, 1.0),
    Choice("it1", 1, 3.0),
    Choice("it2", 2, None),
    Choice("it3", 3, 3.0),
    Choice("it4", 4, 5.0, has_source=False),
    Choice("it10", 10, 2.0),
)


def test_choose_takes_the_runs_best_with_a_source_first_to_reach_it() -> None:
    assert choose(CHOICES, "higher").id == "it1"
    assert choose(CHOICES, "lower").id == "seed"


def test_choose_at_iteration_takes_the_latest_of_the_tied_best_at_or_before_it() -> None:
    assert choose(CHOICES, "higher", at_iteration=3).id == "it3"
    assert choose(CHOICES, "higher", at_iteration=0).id == "seed"


def test_choose_by_id_or_unique_prefix() -> None:
    assert choose(CHOICES, "higher", candidate="it2").id == "it2"  # an invalid program may still be named
    assert choose(CHOICES, "higher", candidate="se").id == "seed"
    assert choose(CHOICES, "higher", candidate="it1").id == "it1"  # exact beats the prefix of it10
    with pytest.raises(AutoloopError, match="matches 5 programs; give more of the id"):
        choose(CHOICES, "higher", candidate="it")
    with pytest.raises(AutoloopError, match="no program 'zz' in the trace; known ids: seed, it1, it2"):
        choose(CHOICES, "higher", candidate="zz")


def test_choose_without_a_valid_program_says_what_to_do() -> None:
    with pytest.raises(AutoloopError, match="no program with a valid score and a saved source at or before iteration"):
        choose((Choice("seed", 0, None),), "higher", at_iteration=5)


def test_initial_points_are_eight_of_twenty_four_and_fewer_for_short_searches() -> None:
    assert [initial_points(n) for n in (2, 3, 8, 17, 24, 100)] == [1, 1, 3, 8, 8, 8]
    assert [trial_kind(call, 3) for call in (1, 2, 4, 5)] == ["original", "random", "random", "gp"]


def test_the_objective_is_minimised_and_a_failure_is_worse_than_every_trial() -> None:
    assert objective(0.7, "higher") == -0.7 and objective(0.7, "lower") == 0.7
    assert penalty([-0.7, -0.2]) == pytest.approx(-0.2 + 0.5)
    assert penalty([-5.0]) == pytest.approx(-4.5)  # negative scores: never the fixed 0.0 of the reference code
    assert penalty([3.0, 3.0]) == pytest.approx(3.3)
    assert penalty([]) == 1.0


def test_the_curve_tracks_the_best_so_far_and_the_regret_to_the_final_best() -> None:
    trials = [Trial(1, {}, 0.5), Trial(2, {}, None, "exited with status 1"), Trial(3, {}, 0.8), Trial(4, {}, 0.6)]
    rows = curve(trials, "higher", 1)
    assert [r["best_so_far"] for r in rows] == [0.5, 0.5, 0.8, 0.8]
    assert [r["regret"] for r in rows] == [pytest.approx(0.3), pytest.approx(0.3), 0.0, 0.0]
    assert [r["kind"] for r in rows] == ["original", "random", "gp", "gp"]
    assert curve(trials, "lower", 1)[3]["best_so_far"] == 0.5
    assert best_trial(trials, "lower") == trials[0]
    assert best_trial([Trial(1, {}, None, "x")], "higher") is None


def test_the_outcome_compares_the_ceiling_with_the_original() -> None:
    assert outcome(0.8, 0.5, "higher") == "improves"
    assert outcome(0.5, 0.5, "higher") == "no change"
    assert outcome(0.8, 0.5, "lower") == "regresses"
    assert outcome(None, 0.5, "higher") == "no trials"


def test_the_report_puts_the_ceiling_next_to_the_candidate_and_the_runs_best() -> None:
    knobs = find_knobs("step = 0.25\nbudget = 100\n")
    trials = [Trial(1, {"step": 0.25, "budget": 100}, 2.0), Trial(2, {"step": 0.1, "budget": 140}, 1.5),
              Trial(3, {"step": 0.3, "budget": 20}, None, "timed out after 60 s")]
    run = {"program": "p", "direction": "lower", "run_best": 1.2, "metric": "loss"}
    report = build_report(run=run, candidate=Choice("it3", 3, 2.0), knobs=knobs, trials=trials, baseline=2.0,
                          n_initial=1)
    assert report["ceiling"] == 1.5 and report["best_call"] == 2 and report["outcome"] == "improves"
    assert report["gain"] == pytest.approx(0.5) and report["relative_gain"] == pytest.approx(0.25)
    assert report["versus_run_best"] == pytest.approx(-0.3) and report["matches_run_best"] is False
    assert [(k["name"], k["original"], k["tuned"]) for k in report["knobs"]] == [("step", 0.25, 0.1), ("budget", 100, 140)]
    assert report["failed_trials"] == 1 and report["candidate"] == {"id": "it3", "iteration": 3, "recorded_score": 2.0}
