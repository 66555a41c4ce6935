"""Tests for outcome.py: render/parse round trip, the checks publish relies on, and fuzzed input."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.loop.record.outcome import (
    BestRecheck,
    Outcome,
    OutcomeError,
    idle_outcome,
    parse_outcome,
    problems,
    read_outcome,
    render_outcome,
    write_outcome,
)
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.trace import Evaluated

WHEN = datetime(2025, 5, 1, 12, 0, tzinfo=timezone.utc)
TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def accepted(**changes: object) -> Outcome:
    record = IterationRecord("accepted", WHEN, "set x to 2", 2.0, notes="score improved to 2", lesson="bigger is better",
                             baseline=1.0, tokens=12, cost=0.5, extra=(("Operator", "exploit"),))
    evaluated = Evaluated("x = 2\n", {"score": 2.0, "note": "ok"}, "the prompt", ("reply",), "seed", None, "m", 12, 0.5)
    outcome = Outcome("counter", 3, "counter:3:0123456789abcdef", TREE, 1.0, record,
                      {"code/value.py": "x = 2\n", "code/old.py": None}, "the prompt", evaluated,
                      Evaluated("x = 1\n", {"score": 1.0}))
    return Outcome(**{**outcome.__dict__, **changes})


def allows(path: str) -> bool:
    return path.startswith("code/") and path != "code/evaluate.py"


def test_render_then_parse_is_the_same_outcome() -> None:
    text, files = render_outcome(accepted())
    assert set(files) == {"code/value.py"}
    assert parse_outcome(text, files) == accepted()


def test_a_re_check_of_the_best_round_trips() -> None:
    outcome = accepted(base_commit=TREE, recheck=BestRecheck(TREE, 4.0, 2.0, "the default branch moved"))
    assert parse_outcome(*render_outcome(outcome)) == outcome


def test_an_evaluations_artifacts_round_trip() -> None:
    outcome = accepted()
    assert outcome.evaluated is not None
    told = Evaluated(**{**outcome.evaluated.__dict__, "artifacts": {"feedback": "circle 3 overlaps", "stderr_tail": "w\n"}})
    outcome = Outcome(**{**outcome.__dict__, "evaluated": told})
    text, files = render_outcome(outcome)
    assert parse_outcome(text, files) == outcome


def test_each_repeats_metric_round_trips() -> None:
    outcome = accepted()
    assert outcome.evaluated is not None
    repeated = Evaluated(**{**outcome.evaluated.__dict__, "runs": (2.0, 2.5, 3.0)})
    outcome = Outcome(**{**outcome.__dict__, "evaluated": repeated})
    assert parse_outcome(*render_outcome(outcome)) == outcome


def test_write_then_read_a_directory(tmp_path: Path) -> None:
    write_outcome(tmp_path / "out", accepted())
    assert read_outcome(tmp_path / "out") == accepted()
    with pytest.raises(Exception, match="not empty"):
        write_outcome(tmp_path / "out", accepted())


def test_an_idle_outcome_round_trips() -> None:
    idle = idle_outcome("my prog", "waiting for CI on abc")
    assert parse_outcome(*render_outcome(idle)) == idle
    assert problems(idle, "my prog", allows) == []


def test_a_valid_outcome_has_no_problems() -> None:
    assert problems(accepted(), "counter", allows) == []


@pytest.mark.parametrize(
    ("outcome", "problem"),
    [
        (accepted(program="other"), "is for program 'other'"),
        (accepted(changes={"code/evaluate.py": "x"}), "code/evaluate.py is outside the program's Target"),
        (accepted(changes={"code/../x.py": "x"}), "not a plain relative path"),
        (accepted(changes={"/etc/passwd": "x"}), "not a plain relative path"),
        (accepted(changes={".git/config": "x"}), "not a plain relative path"),
        (accepted(changes={"code//value.py": "x"}), "not a plain relative path"),
        # The rule every proposer's paths pass (program/paths.py): publish refuses what git would misstore.
        (accepted(changes={"code/.GIT": "gitdir: /home/user/project/.git"}), "`.GIT` is git's own directory name"),
        (accepted(changes={"code/Value.py": "x", "code/value.py": "y"}), "differ only in case"),
        (accepted(changes={"code/value.py": "x" * 2_000_000}), "over the 1048576-byte cap"),
        (accepted(changes={}), "an accepted outcome changes no file"),
        (accepted(record=IterationRecord("rejected", WHEN, "no", 0.5)), "a rejected outcome carries files"),
        (accepted(base_tree=None), "names no base tree"),
    ],
)
def test_problems(outcome: Outcome, problem: str) -> None:
    assert any(problem in found for found in problems(outcome, "counter", allows))


def test_the_size_cap_is_the_programs() -> None:
    assert problems(accepted(changes={"code/value.py": "x" * 50}), "counter", allows, max_file_bytes=10)


def _doc() -> dict:
    return json.loads(render_outcome(accepted())[0])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(format=2), "format 2"),
        (lambda d: d.update(key="counter:4:0123456789abcdef"), "is not `<program>:3:"),
        (lambda d: d.update(base_tree="HEAD"), "not a git object id"),
        (lambda d: d["record"].update(status="pending-ci"), "status 'pending-ci'"),
        (lambda d: d["record"].update(metric=None), "needs a metric"),
        (lambda d: d["record"].update(change="two\nlines"), "one non-empty line"),
        (lambda d: d["record"].update(timestamp="2025-05-01T12:00:00"), "no time zone"),
        (lambda d: d["record"].update(tokens=True), "tokens must be"),
        (lambda d: d["record"].update(commit="0" * 40), "unknown ['commit']"),
        (lambda d: d["evaluated"].update(replies="one"), "replies must be a list"),
        (lambda d: d["evaluated"].update(artifacts={"shell": "rm -rf /"}), "artifacts must be an object of feedback"),
        (lambda d: d["evaluated"].update(artifacts={"feedback": "x" * 9000}), "each artifact must be a string of at most"),
        (lambda d: d["evaluated"].update(artifacts={"feedback": 3}), "each artifact must be a string"),
        (lambda d: d["evaluated"].update(runs=[1, "2"]), "runs must be a list of at most"),
        (lambda d: d["evaluated"].update(runs=[True]), "runs must be a list of at most"),
        (lambda d: d["evaluated"].update(runs=[1.0] * 101), "runs must be a list of at most"),
        (lambda d: d.update(changed={"code/value.py": "0" * 64}), "not the file outcome.json lists"),
        (lambda d: d.update(deleted=["code/value.py"]), "both changed and deleted"),
        (lambda d: d.update(recheck={"base": "HEAD", "recorded": 4, "best": 2, "stale": None}), "a git object id"),
        (lambda d: d.update(recheck={"base": TREE, "recorded": 4, "best": None, "stale": None}), "finite numbers"),
        (lambda d: d.update(recheck={"base": TREE, "recorded": 4, "best": 2}), "missing ['stale']"),
    ],
)
def test_malformed_outcomes_are_refused(change, message: str) -> None:  # type: ignore[no-untyped-def]
    doc = _doc()
    change(doc)
    with pytest.raises(OutcomeError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        parse_outcome(json.dumps(doc), render_outcome(accepted())[1])


def test_the_texts_of_a_forged_record_lose_their_escapes() -> None:
    # The proposing job ran candidate code: its record's texts reach the state file, commit messages and the terminal.
    doc = _doc()
    doc["record"].update(change="set x\x1b]0;pwned\x07 to 2\u202e", notes="\x1b[2Jnotes", lesson="l\x9b2Jesson",
                         extra=[["Oper\x1b[0mator", "expl\x07oit"]])
    doc["approach"] = "appr\x1b]8;;http://evil.example\x1b\\oach"
    outcome = parse_outcome(json.dumps(doc), render_outcome(accepted())[1])
    assert outcome.record is not None
    assert (outcome.record.change, outcome.record.notes, outcome.record.lesson) == ("set x to 2", "notes", "lesson")
    assert outcome.record.extra == (("Operator", "exploit"),) and outcome.approach == "approach"
    doc["record"].update(change="\x1b[2J")  # nothing left once stripped
    with pytest.raises(OutcomeError, match="one non-empty line"):
        parse_outcome(json.dumps(doc), render_outcome(accepted())[1])


def test_nan_and_infinity_are_refused() -> None:
    text = render_outcome(accepted())[0].replace('"metric": 2.0', '"metric": NaN')
    with pytest.raises(OutcomeError, match="not valid JSON"):
        parse_outcome(text, render_outcome(accepted())[1])


def test_special_files_and_links_are_refused(tmp_path: Path) -> None:
    write_outcome(tmp_path / "out", accepted())
    value = tmp_path / "out/files/code/value.py"
    value.unlink()
    os.mkfifo(value)  # a reader that opened it blindly would block forever
    with pytest.raises(OutcomeError, match="not a regular file"):
        read_outcome(tmp_path / "out")
    value.unlink()
    (tmp_path / "out/files/code").rename(tmp_path / "elsewhere")
    (tmp_path / "out/files/code").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutcomeError, match="a link or a special file is refused"):
        read_outcome(tmp_path / "out")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_parses_or_raises_outcome_error(text: str) -> None:
    try:
        parse_outcome(text, {})
    except OutcomeError:
        pass


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(_doc())), JSON)
def test_any_value_in_any_field_parses_or_raises_outcome_error(field: str, value: object) -> None:
    doc = _doc()
    doc[field] = value
    try:
        parse_outcome(json.dumps(doc), render_outcome(accepted())[1])
    except OutcomeError:
        pass
