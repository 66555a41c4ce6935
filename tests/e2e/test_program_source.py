"""End to end (issue 28, point 5): iterations read program.md from the commit they run on, not the working tree.

The README says iterations run on the remote's default branch, yet an uncommitted Evaluation command in the
working tree was used. Now the committed program.md is the one source, and a warning says the working
tree's copy differs (and is not used).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_run import PROG, _git, _plan, _run, _state, _value, counter_repo  # noqa: F401 - fixture

CHEAT = "cd \"$AUTOLOOP_PROGRAM_DIR\" && echo '{\"score\": 100}'"


def test_an_uncommitted_evaluation_command_is_not_used_and_a_warning_says_so(
    counter_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = counter_repo / PROG / "program.md"
    committed = program.read_text()
    program.write_text(committed.replace("cd \"$AUTOLOOP_PROGRAM_DIR\" && python3 code/evaluate.py", CHEAT))
    assert _run(counter_repo, _plan(tmp_path, [_value(2.0)]), 1) == 0
    entry = _state(counter_repo).history[0]
    assert (entry.status, entry.metric) == ("accepted", 2.0)  # origin/main's command scored it, not `echo 100`
    err = " ".join(capsys.readouterr().err.split())
    assert (f"{PROG}/program.md differs from the copy on origin/main: this iteration uses origin/main's "
            "(commit and push the edit to use it)") in err
    assert program.read_text() != committed  # the user's edit is left alone


def test_the_committed_and_pushed_edit_is_used_without_a_warning(
    counter_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = counter_repo / PROG / "program.md"
    program.write_text(program.read_text().replace("evaluation-timeout: 3", "evaluation-timeout: 4"))
    _git(counter_repo, "commit", "-qam", "longer evaluations")
    _git(counter_repo, "push", "-q", "origin", "main")
    assert _run(counter_repo, _plan(tmp_path, [_value(2.0)]), 1) == 0
    assert _state(counter_repo).history[0].status == "accepted"
    assert "differs from the copy" not in capsys.readouterr().err
