"""Tests for program/holdout.py: `evaluation-holdout` and `holdout-must-not-drop`, as `check` reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_program import PROGRAM, write

from autoloop_py.program.holdout import Holdout, drops, parse_holdout, parse_tolerance
from autoloop_py.program.model import check_all


def test_a_command_or_a_mapping_names_the_held_out_evaluation() -> None:
    assert parse_holdout("  python3 holdout.py ") == Holdout("python3 holdout.py")
    assert parse_holdout({"command": "python3 h.py", "metric": "acc"}) == Holdout("python3 h.py", "acc")
    for bad, said in (("", "must be a command"), ({"metric": "acc"}, "needs a `command`"),
                      ({"command": "x", "threshold": 1}, "unknown key(s) threshold"), (3, "must be a command")):
        with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(")", r"\)")):
            parse_holdout(bad)


def test_must_not_drop_is_a_tolerance() -> None:
    assert (parse_tolerance(True), parse_tolerance(False), parse_tolerance(0.05), parse_tolerance(2)) == (0, None, .05, 2)
    for bad in (-1, "yes", float("nan"), None):
        with pytest.raises(ValueError, match="true, false or a tolerance"):
            parse_tolerance(bad)


@pytest.mark.parametrize("direction, candidate, incumbent, tolerance, dropped", [
    ("higher", 0.8, 0.9, 0.0, True), ("higher", 0.85, 0.9, 0.1, False), ("higher", 0.95, 0.9, 0.0, False),
    ("lower", 1.2, 1.0, 0.1, True), ("lower", 0.9, 1.0, 0.0, False), ("higher", 0.9, 0.9, 0.0, False),
])
def test_drops_reads_the_direction(direction: str, candidate: float, incumbent: float, tolerance: float,
                                   dropped: bool) -> None:
    assert drops(candidate, incumbent, direction, tolerance) is dropped


def _frontmatter(repo: Path, lines: str) -> list[str]:
    write(repo, ".autoloop/programs/demo/program.md", PROGRAM.replace("custom-key: kept\n", lines))
    programs, problems = check_all(repo)
    return [str(p) for p in problems] if problems else [repr(programs[0].config.evaluation_holdout),
                                                        repr(programs[0].config.holdout_must_not_drop)]


def test_check_reads_and_refuses_the_keys(tmp_path: Path) -> None:
    write(tmp_path, ".autoloop/programs/demo/code/search.py", "x = 1\n")
    write(tmp_path, ".autoloop/programs/demo/code/lib/util.py", "y = 2\n")
    ok = _frontmatter(tmp_path, "evaluation-holdout: python3 code/holdout.py\nholdout-must-not-drop: 0.01\n")
    assert ok == [repr(Holdout("python3 code/holdout.py")), "0.01"]
    [alone] = _frontmatter(tmp_path, "holdout-must-not-drop: true\n")
    assert alone == (".autoloop/programs/demo/program.md:10: frontmatter `holdout-must-not-drop` needs an "
                     "`evaluation-holdout:` command to compare with")
    [bad] = _frontmatter(tmp_path, "evaluation-holdout: python3 h.py\nholdout-must-not-drop: lots\n")
    assert bad.endswith("frontmatter `holdout-must-not-drop`: must be true, false or a tolerance >= 0 (e.g. 0.01), "
                        "got 'lots'")
