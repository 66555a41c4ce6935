"""Tests for program/direction.py: the metric's direction read from frontmatter and prose, nothing guessed."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py import markdown as md
from autoloop_py.program.direction import Reading, read_direction, sayings_of
from autoloop_py.program.objectives import Objective

REL = Path("program.md")


def _evaluation(prose: str) -> md.Section:
    text = f"# P\n\n## Evaluation\n\n```bash\necho\n```\n\n{prose}\n"
    found = [s for s in md.split_sections(text) if s.heading is not None]
    section = md.section_named(found, "evaluation")
    assert section is not None
    return section


@pytest.mark.parametrize(("prose", "direction"), [
    ("The metric is `s`. Higher is better.", "higher"),
    ("The metric is `s`. **Lower is better** (it is a loss).", "lower"),
    ("lower is better; LOWER IS BETTER", "lower"),
])
def test_upstream_prose_forms_are_read(prose: str, direction: str) -> None:
    assert read_direction(None, None, _evaluation(prose), REL).direction == direction
    assert read_direction(None, None, _evaluation(prose), REL).problem is None


@pytest.mark.parametrize(("prose", "message", "line"), [
    ("The metric is `max_error`. Lowr is better.", "cannot read the metric's direction from `Lowr is better`", 9),
    ("Smaller is better.", "cannot read the metric's direction from `Smaller is better`", 9),
    ("Higher is better.\nLower is better.", "`Higher is better` and line 10 `Lower is better` disagree; keep one", 9),
    ("The metric is `s`.", "no metric direction (run would assume higher is better)", 3),
])
def test_what_cannot_be_read_is_a_problem_at_its_line(prose: str, message: str, line: int) -> None:
    reading = read_direction(None, None, _evaluation(prose), REL)
    assert reading.direction is None and reading.problem is not None
    assert reading.problem.message.startswith(message) and reading.problem.line == line


def test_the_frontmatter_decides_unless_the_prose_says_the_opposite() -> None:
    assert read_direction("lower", 2, _evaluation("Lowr is better."), REL).problem is None
    reading = read_direction("lower", 2, _evaluation("Higher is better."), REL)
    assert reading.direction == "lower" and reading.problem is not None and reading.problem.line == 2
    unreadable = read_direction(None, 2, _evaluation("The metric is `s`."), REL)
    assert unreadable.problem is not None and unreadable.problem.message.startswith("an unreadable `metric_direction`")


SQRT_TRADEOFF = """The metric is `accuracy`. Higher is better.

`accuracy` is the mean number of correct decimal digits over 200 fixed inputs (at most 16); `cost`
is the mean number of arithmetic steps the routine reports per input (lower is better). The
evaluator prints both as JSON, with `combined_score` equal to `accuracy`, and prints
`{"error": ...}` and exits 1 when the routine raises or returns a non-finite value."""
OBJECTIVES = (Objective("accuracy", "higher"), Objective("cost", "lower"))


def test_the_shipped_sqrt_tradeoff_prose_agrees_with_its_frontmatter() -> None:
    section = _evaluation(SQRT_TRADEOFF)
    assert [(s.word, s.subject) for s in sayings_of(section, ["accuracy", "cost"])] == [
        ("Higher", None), ("lower", "cost")]
    reading = read_direction("higher", 3, section, REL, "accuracy", OBJECTIVES, 6)
    assert reading == Reading("higher")
    assert read_direction(None, None, section, REL, "accuracy", OBJECTIVES, 6) == Reading("higher")


@pytest.mark.parametrize(("prose", "subject"), [
    ("`cost` is the steps per input (lower is better).", "cost"),
    ("Lower is better for `cost`.", "cost"),
    ("Higher is better for `accuracy` and lower is better for `cost`.", "accuracy"),
    ("cost: lower is better.", "cost"),
    ("The metric is `accuracy` and lower is better.", "accuracy"),
    ("The metric is `accuracy`. Lower is better.", None),
    ("- `accuracy`: digits\n- lower is better", None),
])
def test_a_saying_belongs_to_the_name_its_sentence_gives_it(prose: str, subject: str | None) -> None:
    assert sayings_of(_evaluation(prose), ["accuracy", "cost"])[0].subject == subject


def test_a_sentence_naming_the_metric_decides_it() -> None:
    section = _evaluation("The metric is `accuracy`; for `accuracy`, lower is better.")
    reading = read_direction("higher", 3, section, REL, "accuracy", OBJECTIVES, 6)
    assert reading.problem is not None and reading.problem.line == 3
    assert "line 9 says `lower is better`" in reading.problem.message


def test_a_sentence_about_another_metric_never_decides_the_metric() -> None:
    section = _evaluation("The metric is `score`. Higher is better. `time_ms` is how long it took (lower is better).")
    assert read_direction("higher", 2, section, REL, "score") == Reading("higher")
    assert read_direction(None, None, section, REL, "score") == Reading("higher")
    alone = _evaluation("The metric is `score`. `time_ms` is how long it took: lower is better.")
    assert read_direction(None, None, alone, REL, "score").problem is not None  # nothing said of `score`


def test_a_sentence_giving_an_objective_the_other_direction_is_a_problem_at_objectives() -> None:
    section = _evaluation(SQRT_TRADEOFF.replace("(lower is better)", "(higher is better)"))
    reading = read_direction("higher", 3, section, REL, "accuracy", OBJECTIVES, 6)
    assert reading.direction == "higher" and reading.problem is not None and reading.problem.line == 6
    assert reading.problem.message.startswith("the frontmatter's `objectives:` says `cost: lower` but line 12 says "
                                              "`higher is better` of `cost`")
