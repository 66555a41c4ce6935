"""Tests for analysis/replay.py (choosing the event, applying replies, the measures) and replaying.py without a bench."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping

import pytest
import trace_samples as sample

from autoloop_py.analysis.replay import (
    NO_CHANGE,
    NO_EDIT,
    ReplayEvent,
    Trial,
    apply_text,
    choose_event,
    choose_events,
    classify,
    context_pool,
    event_cap,
    measure,
    prompt_entry,
    select_events,
)
from autoloop_py.analysis.replay_prompts import VariantPrompt
from autoloop_py.errors import AutoloopError
from autoloop_py.state.trace import Trace, TraceRow, export, load_trace, row_files
from autoloop_py.studies.replaying import SOURCE_KEY, Replay, replay_event

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

    trials = replay_event(_event(), Replay("other/model", 3), ask=ask)
    assert asked == [("other/model", "", "improve")] * 3
    assert [t.source for t in trials] == [CHILD, None, CHILD]
    assert trials[1].parse_error == "no reply from other/model: rate limited"
    assert all(t.eval_ok is None for t in trials)


# id, iteration, parent, score, saved prompt, migrant: events r1 (+1), r4 (+.5), r7 (+3), r8 (+.2), r20 (+.3).
CHAIN = (
    ("s0", 0, None, 1.0, False, False),
    ("r1", 1, "s0", 2.0, True, False),
    ("r2", 2, "r1", 2.0 + 1e-13, True, False),  # not above the best by more than 1e-12
    ("r3", 3, "r1", 9.0, True, True),  # a migrant: skipped, the best stays 2
    ("r4", 4, "r1", 2.5, True, False),
    ("r5", 5, "r4", 3.0, False, False),  # a new best without a saved prompt: raises the best, not replayable
    ("r6", 6, "r5", 2.9, True, False),
    ("r7", 7, "r5", 6.0, True, False),
    ("r8", 8, "r7", 6.2, True, False),
    ("r20", 20, "r8", 6.5, True, False),
)


def _chain(tmp_path: Path, direction: str = "higher") -> Trace:
    files: dict[str, str] = {}
    for id, iteration, parent, score, prompted, migrant in CHAIN:
        value = score if direction == "higher" else -score
        row = TraceRow(id, iteration, parent, {"value": value}, "accepted", model="test/model",
                       extra={"metadata": {"migrant": True}} if migrant else {})
        prompts = {"diff_user": {"system": "", "user": f"improve {parent}", "responses": []}} if prompted else {}
        files.update(row_files("chain", row, f"x = {score}\n", prompts))
    env = {"evaluation": {"metric": "value", "direction": direction}}
    files["traces/chain/replay_env.json"] = json.dumps(env)
    return load_trace(export(files.get, sorted(files), "chain", tmp_path / direction))


@pytest.mark.parametrize("direction", ["higher", "lower"])
def test_select_events_keeps_the_final_best_and_the_largest_gains(tmp_path: Path, direction: str) -> None:
    chain = _chain(tmp_path, direction)
    assert event_cap(chain) == 3  # max(1, ceil(15 · 20 / 100))
    assert [e.id for e in select_events(chain)] == ["r1", "r7", "r20"]
    assert [e.id for e in choose_events(chain, "all")] == ["r1", "r7", "r20"]
    assert [e.id for e in choose_events(chain, "r6")] == ["r6"]


def test_a_short_run_replays_only_its_final_best(trace: Trace) -> None:
    assert event_cap(trace) == 1  # 3 iterations: max(1, ceil(0.45))
    assert [e.id for e in select_events(trace)] == ["D"]


def test_no_replayable_best_so_far_event_is_an_error(tmp_path: Path) -> None:
    files: dict[str, str] = {}
    for row, program in zip(sample.rows(), sample.PROGRAMS):
        files.update(row_files("bare", row, program[3], {}))
    bare = load_trace(export(files.get, sorted(files), "bare", tmp_path / "bare"))
    with pytest.raises(AutoloopError, match="no best-so-far program of the run has a parent and a saved prompt"):
        choose_events(bare, "all")


def test_context_pool_holds_the_valid_programs_found_before_the_event(trace: Trace) -> None:
    pool = context_pool(trace, choose_event(trace, "D"))
    assert [(p.id, p.iteration, p.score, p.approach) for p in pool] == [
        ("A", 0, 1.0, "candidate A"), ("B", 1, 2.0, "candidate B"), ("E", 1, 1.5, "candidate E")]
    assert pool[0].source == sample.A


def test_a_failed_attempt_is_fed_back_into_the_next_prompt() -> None:
    asked: list[str] = []
    replies = iter(["SUMMARY: oops\n\n<<<<<<< SEARCH\ny = 2\n", TO_CHILD.replace("y = 2\n=", "z = 9\n="), TO_CHILD])

    def ask(model: str, system: str, user: str) -> str:
        asked.append(user)
        return next(replies)

    trial = replay_event(_event(), Replay("m", 1, attempts=3), ask=ask)[0]
    assert (trial.source, trial.attempts, trial.parsed) == (CHILD, 3, True)
    assert len(trial.earlier_errors) == 2 and "matches no lines" in trial.earlier_errors[1]
    assert asked[0] == "improve"
    assert asked[1].startswith("improve\n\n## Your previous reply\n") and "It could not be read" in asked[1]
    assert "Its edits could not be applied" in asked[2] and "z = 9" in asked[2] and "oops" not in asked[2]


def test_attempts_stop_at_the_limit_and_a_missing_reply_is_asked_again() -> None:
    asked: list[str] = []

    def ask(model: str, system: str, user: str) -> str:
        asked.append(user)
        if len(asked) == 1:
            raise RuntimeError("timeout")
        return "SUMMARY: nothing\n"

    trial = replay_event(_event(), Replay("m", 1, attempts=2), ask=ask)[0]
    assert asked == ["improve", "improve"]
    assert (trial.attempts, trial.parse_error, trial.earlier_errors) == (2, NO_EDIT, ("no reply from m: timeout",))
    once = replay_event(_event(), Replay("m", 2, attempts=1), ask=lambda *_: "SUMMARY: nothing\n")
    assert [(t.attempts, t.earlier_errors) for t in once] == [(1, ()), (1, ())]


class _Bench:
    """A bench whose first evaluation fails and whose later ones score 3."""

    primary = "code/value.py"
    files = {"code/value.py": PARENT}
    program = SimpleNamespace(target=SimpleNamespace(allows=lambda path: True))

    def __init__(self) -> None:
        self.runs = 0

    def evaluate(self, files: Mapping[str, str]) -> tuple[bool, float | None, str | None]:
        self.runs += 1
        return (False, None, "exited with status 1") if self.runs == 1 else (True, 3.0, None)


def test_an_evaluation_failure_is_fed_back_and_a_variant_prompt_is_sent() -> None:
    asked: list[tuple[str, str]] = []

    def ask(model: str, system: str, user: str) -> str:
        asked.append((system, user))
        return TO_CHILD

    bench: Any = _Bench()
    prompt = VariantPrompt("strict_diff", "sys", "improve, blocks only", "asked for SEARCH/REPLACE blocks only")
    trial = replay_event(_event(), Replay("m", 1, attempts=2, prompt=prompt), bench, ask)[0]
    assert (trial.eval_ok, trial.score, trial.attempts, trial.earlier_errors) == (True, 3.0, 2, ("exited with status 1",))
    assert asked[0] == ("sys", "improve, blocks only")
    assert "It applied, but the candidate failed its evaluation:\n\n```text\nexited with status 1\n```" in asked[1][1]
    assert measure([trial], _event(), "higher").attempts_mean == 2.0
