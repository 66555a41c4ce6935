"""End to end (issue 28, point 1): `check` refuses what would go wrong silently.

A metric direction that is missing or unreadable (`Lowr is better.`) passed `check` with ✓ and the run then
maximised the error; unknown frontmatter keys were ignored in silence; `proposer: lml` passed `check`.
Now each is a `file:line` line of `check`, and `run` says which direction it assumes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autoloop_py.cli import main
from tests.e2e.test_run import PROG, _git, _plan, _run, _state, _value, counter_repo  # noqa: F401 - fixture

PROGRAM = f"{PROG}/program.md"


def _rewrite(repo: Path, old: str, new: str, *, commit: bool = True) -> None:
    """Replaces old by new in the counter's program.md, committed and pushed (iterations run on origin/main)."""
    path = repo / PROGRAM
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    if commit:
        _git(repo, "commit", "-qam", "edit program.md")
        _git(repo, "push", "-q", "origin", "main")


def _line_of(repo: Path, text: str) -> int:
    return next(n for n, line in enumerate((repo / PROGRAM).read_text().splitlines(), 1) if text in line)


def _check(repo: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["check", "--repo", str(repo)])
    return code, " ".join(capsys.readouterr().out.split())


def test_an_unreadable_direction_is_refused_by_check_and_run_says_what_it_assumes(
    counter_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _rewrite(counter_repo, "Higher is better.", "Lowr is better.")
    code, out = _check(counter_repo, capsys)
    line = _line_of(counter_repo, "Lowr is better")
    assert code == 1 and "✓ counter" not in out
    assert (f"✗ {PROGRAM}:{line}: cannot read the metric's direction from `Lowr is better`: write `Higher is better.` "
            "or `Lower is better.` under `## Evaluation`, or `metric_direction: higher` (or `lower`)") in out
    # run keeps upstream's default (higher) and says so: the candidate raising the score is kept.
    assert _run(counter_repo, _plan(tmp_path, [_value(2.0)]), 1) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "warning:" in out and "`Lowr is better`" in out and "running with higher is better" in out
    assert _state(counter_repo).history[0].status == "accepted"


def test_no_direction_at_all_is_refused(counter_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _rewrite(counter_repo, " Higher is better.", "", commit=False)
    code, out = _check(counter_repo, capsys)
    heading = _line_of(counter_repo, "## Evaluation")
    assert code == 1
    assert f"✗ {PROGRAM}:{heading}: no metric direction (run would assume higher is better)" in out


def test_a_readable_lower_is_better_makes_the_run_minimise(
    counter_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _rewrite(counter_repo, "Higher is better.", "**Lower is better.**")
    code, out = _check(counter_repo, capsys)
    assert code == 0 and "✓ counter" in out
    assert _run(counter_repo, _plan(tmp_path, [_value(2.0), _value(0.5)]), 2) == 0
    assert "warning:" not in capsys.readouterr().out
    assert [e.status for e in _state(counter_repo).history] == ["accepted", "rejected"]  # newest first


def test_frontmatter_and_prose_that_disagree_are_refused(counter_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _rewrite(counter_repo, "schedule: every 6h\n", "schedule: every 6h\nmetric-direction: lower\n", commit=False)
    code, out = _check(counter_repo, capsys)
    line, prose = _line_of(counter_repo, "metric-direction"), _line_of(counter_repo, "Higher is better")
    assert code == 1
    assert (f"✗ {PROGRAM}:{line}: the frontmatter says `metric_direction: lower` but line {prose} says "
            "`Higher is better`; make them agree") in out


def test_unknown_keys_warn_with_the_nearest_known_key(
    counter_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = "evaluation-timout: 5\nisolaton: none\nSchedule: every 1h\nmystery-knob: 3\n"
    _rewrite(counter_repo, "schedule: every 6h\n", "schedule: every 6h\n" + keys)
    code, out = _check(counter_repo, capsys)
    assert code == 0 and "✓ counter" in out  # warnings: the program runs as before
    for key, hint in (("evaluation-timout", "; did you mean `evaluation-timeout`?"),
                      ("isolaton", "; did you mean `isolation`?"), ("Schedule", "; did you mean `schedule`?"),
                      ("mystery-knob", " (known keys: ")):
        assert f"! {PROGRAM}:{_line_of(counter_repo, key + ':')}: unknown frontmatter key `{key}`, ignored{hint}" in out
    # run says it too, once, before its first iteration.
    assert _run(counter_repo, _plan(tmp_path, [_value(2.0), _value(3.0)]), 2) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("unknown frontmatter key `isolaton`, ignored; did you mean `isolation`?") == 1


def test_a_misspelt_proposer_is_refused_with_file_and_line_by_check_and_run(
    counter_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _rewrite(counter_repo, "schedule: every 6h\n", "schedule: every 6h\nproposer: lml\n")
    line = _line_of(counter_repo, "proposer:")
    message = f"{PROGRAM}:{line}: frontmatter `proposer`: must be one of tune, llm, agent, got 'lml'"
    code, out = _check(counter_repo, capsys)
    assert code == 1 and f"✗ {message}" in out
    assert main(["run", "--repo", str(counter_repo), "--program", "counter"]) == 1
    assert message in " ".join(capsys.readouterr().err.split())
    assert _git(counter_repo, "ls-remote", "origin", "memory/autoloop") == ""  # no iteration was recorded


@pytest.mark.parametrize(("setting", "expected"), [
    ("model: lml/nothing", "frontmatter `model`: litellm cannot tell the provider of model 'lml/nothing'"),
    ("isolation: sandboxy", "frontmatter `isolation`: must be one of auto, bwrap, none, got 'sandboxy'"),
])
def test_model_and_isolation_values_are_checked_with_file_and_line(
    counter_repo: Path, capsys: pytest.CaptureFixture[str], setting: str, expected: str
) -> None:
    _rewrite(counter_repo, "schedule: every 6h\n", f"schedule: every 6h\n{setting}\n", commit=False)
    code, out = _check(counter_repo, capsys)
    assert code == 1 and f"✗ {PROGRAM}:{_line_of(counter_repo, setting)}: {expected}" in out


def test_a_model_whose_key_is_missing_here_is_a_warning(
    counter_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    _rewrite(counter_repo, "schedule: every 6h\n", "schedule: every 6h\nmodel: anthropic/claude-3-5-haiku-latest\n",
             commit=False)
    code, out = _check(counter_repo, capsys)
    line = _line_of(counter_repo, "model:")
    assert code == 0 and "✓ counter" in out
    assert (f"! {PROGRAM}:{line}: model 'anthropic/claude-3-5-haiku-latest' needs ANTHROPIC_API_KEY in the "
            "environment where it runs (not set here)") in out


def test_without_litellm_check_says_the_model_was_not_checked(
    counter_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # as where the `llm` extra is not installed
    _rewrite(counter_repo, "schedule: every 6h\n", "schedule: every 6h\nmodel: lml/nothing\n", commit=False)
    code, out = _check(counter_repo, capsys)
    assert code == 0 and "✓ counter" in out
    assert (f"! {PROGRAM}:{_line_of(counter_repo, 'model:')}: model 'lml/nothing' not checked: the llm proposer "
            "needs litellm: python3 -m pip install litellm") in out
