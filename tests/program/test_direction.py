"""Tests for program/direction.py: the metric's direction read from frontmatter and prose, nothing guessed."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py import markdown as md
from autoloop_py.program.direction import read_direction

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
