"""Tests for analysis/replay.py (choosing the event, applying replies, the measures) and replaying.py without a bench."""

from __future__ import annotations

from pathlib import Path

import pytest

import trace_samples as sample
from autoloop_py.analysis.replay import (
    NO_CHANGE,
    NO_EDIT,
    ReplayEvent,
    Trial,
    apply_text,
    choose_event,
    classify,
    measure,
    prompt_entry,
)
from autoloop_py.errors import AutoloopError
from autoloop_py.replaying import SOURCE_KEY, replay_event
from autoloop_py.trace import Trace, load_trace

PARENT = "x = 1\ny = 2\n"
CHILD = "x = 1\ny = 3\n"
TO_CHILD = "SUMMARY: raise y\n\ncode/value.py\n<<<<<<< SEARCH\ny = 2\n=======\ny = 3\n>>>>>>> REPLACE\n"


@pytest.fixture
def trace(tmp_path: Path) -> Trace:
    return load_trace(sample.write_run(tmp_path / "run"))


def _event(score: float | None = 4.0, parent_score: float | None = 2.0, response: str | None = TO_CHILD) -> ReplayEvent:
    return ReplayEvent("c", 2, "p", "iteration", "", "improve", response, CHILD, PARENT, score, parent_score, "m")


def test_best_is_the_final_best_with_its_saved_prompt(trace: Trace) -> None:
    event = choose_event(trace, "best")
    assert (event.id, event.iteration, event.parent_id, event.prompt_key) == ("D", 3, "C", "diff_user")
    assert (event.system, event.user, event.response) == ("sys", "improve C", "reply for D ✓")
    assert (event.source, event.parent_source) == (sample.D, sample.C)
    assert (event.score, event.parent_score, event.model) == (4.0, 3.0, "test/model")


def test_an_event_by_id(trace: Trace) -> None:
    event = choose_event(trace, "E")
    assert (event.parent_id, event.parent_source, event.score) == ("A", sample.A, 1.5)


def test_a_seed_cannot_be_replayed(trace: Trace) -> None:
    with pytest.raises(AutoloopError, match="candidate 'A' has no parent with a saved source to apply a reply to; "
                                            r"pick another candidate with --event ID"):
        choose_event(trace, "A")


def test_an_unknown_id_lists_the_known_ones(trace: Trace) -> None:
    with pytest.raises(AutoloopError, match="no row has id 'Z'; pass --event with one of the run's ids"):
        choose_event(trace, "Z")


def test_prompt_entry_skips_planner_calls() -> None:
    prompts = {"planner": {"user": "plan"}, "strategy_sampling_x": {"user": "pick"}, "diff_user": {"user": "edit"}}
    assert prompt_entry(prompts) == ("diff_user", {"user": "edit"})
    assert prompt_entry({"rewrite": {"system": "s", "user": ""}}) is None
    assert prompt_entry(None) is None


def test_apply_text_applies_a_block_to_the_named_file() -> None:
    files = {".autoloop/programs/demo/code/value.py": PARENT}
    applied = apply_text(TO_CHILD, files, ".autoloop/programs/demo/code/value.py", lambda path: True)
    assert applied.error is None
    assert applied.changed == {".autoloop/programs/demo/code/value.py": CHILD}


def test_apply_text_without_a_program_aims_every_edit_at_the_one_source() -> None:
    rewrite = "SUMMARY: rewrite\n\nsomewhere/else.py\n```python\n" + CHILD + "```\n"
    assert apply_text(rewrite, {SOURCE_KEY: PARENT}, SOURCE_KEY).changed == {SOURCE_KEY: CHILD}
    assert apply_text(TO_CHILD, {SOURCE_KEY: PARENT}, SOURCE_KEY).changed == {SOURCE_KEY: CHILD}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("SUMMARY: nothing to do\n", NO_EDIT),
        (TO_CHILD.replace("y = 3", "y = 2"), NO_CHANGE),
        (TO_CHILD.replace("y = 2\n=", "z = 9\n="), "matches no lines"),
        ("SUMMARY: broken\n\n<<<<<<< SEARCH\ny = 2\n", "SEARCH"),
    ],
    ids=["no-edit", "unchanged", "search-misses", "unterminated-block"],
)
def test_apply_text_failures(reply: str, expected: str) -> None:
    applied = apply_text(reply, {SOURCE_KEY: PARENT}, SOURCE_KEY)
    assert applied.changed == {} and applied.error is not None and expected in applied.error


def test_apply_text_refuses_files_outside_the_target() -> None:
    applied = apply_text(TO_CHILD, {"code/value.py": PARENT}, "code/value.py", lambda path: False)
    assert applied.error == "the reply changes code/value.py, outside the Target"


def test_classify_against_original_and_parent() -> None:
    event = _event(score=4.0, parent_score=2.0)
    assert classify(Trial("r", None, CHILD, True, None, 4.5), event, "higher") == "better"
    assert classify(Trial("r", None, CHILD, True, None, 4.003), event, "higher") == "similar"
    assert classify(Trial("r", None, CHILD, True, None, 3.0), event, "higher") == "still_improves_parent"
    assert classify(Trial("r", None, CHILD, True, None, 1.0), event, "higher") == "worse"
    assert classify(Trial("r", None, CHILD, True, None, 1.0), event, "lower") == "better"
    assert classify(Trial("r", "bad"), event, "higher") == "parse_failed"
    assert classify(Trial("r", None, CHILD, False, "boom"), event, "higher") == "eval_failed"
    assert classify(Trial("r", None, CHILD), event, "higher") == "not_evaluated"


def test_measure_a_hand_built_set() -> None:
    trials = [
        Trial(TO_CHILD, None, CHILD, True, None, 4.0),
        Trial("other", None, "x = 1\ny = 4\n", True, None, 3.0),
        Trial("other", None, CHILD, False, "exited with status 1"),
        Trial("junk", "the reply contains no edit", eval_ok=False),
    ]
    m = measure(trials, _event(), "higher")
    assert (m.repeats, m.parse_success_rate, m.evaluation_success_rate) == (4, 0.75, 0.5)
    assert (m.exact_solution_match_rate, m.exact_response_match_rate) == (0.5, 0.25)
    assert (m.score_mean, m.score_median, m.score_std) == (3.5, 3.5, 0.5)
    assert m.score_ratio == pytest.approx(3.5 / 4.0)
    assert {k: v for k, v in m.classes.items() if v} == {
        "similar": 1, "still_improves_parent": 1, "eval_failed": 1, "parse_failed": 1}


def test_measure_without_evaluation_or_original_reply() -> None:
    m = measure([Trial("r", None, CHILD), Trial("r", None, PARENT)], _event(score=None, response=None), "higher")
    assert (m.evaluation_success_rate, m.exact_response_match_rate, m.score_mean, m.score_ratio) == (None, None, None, None)
    assert m.exact_solution_match_rate == 0.5 and m.classes["not_evaluated"] == 2


def test_replay_event_without_a_bench_re_sends_the_saved_prompt() -> None:
    asked: list[tuple[str, str, str]] = []

    def ask(model: str, system: str, user: str) -> str:
        asked.append((model, system, user))
        if len(asked) == 2:
            raise RuntimeError("rate limited\nretry later")
        return TO_CHILD

    trials = replay_event(_event(), "other/model", 3, ask=ask)
    assert asked == [("other/model", "", "improve")] * 3
    assert [t.source for t in trials] == [CHILD, None, CHILD]
    assert trials[1].parse_error == "no reply from other/model: rate limited"
    assert all(t.eval_ok is None for t in trials)
