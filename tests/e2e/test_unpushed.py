"""End to end: a program that exists only in unpushed local commits stops before evaluating, with what to do."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from autoloop_py.cli import main
from tests.programs import program_md


def _add_program(repo: Path, run_git: Callable[..., str]) -> None:
    folder = repo / ".autoloop/programs/local_only"
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(program_md("Local", "Raise x."))
    (folder / "code/value.py").write_text("x = 1.5\n")
    (folder / "code/evaluate.py").write_text('import json\nprint(json.dumps({"score": 1}))\n')
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "a program, committed but not pushed")


def test_an_unpushed_program_says_push_it_first(
    git_repo_with_origin: Path, run_git: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    _add_program(git_repo_with_origin, run_git)
    assert main(["run", "--repo", str(git_repo_with_origin), "--program", "local_only"]) == 1
    err = capsys.readouterr().err
    assert "program local_only is not on origin/main yet: push it first" in err
    assert "evaluate.py" not in err and "can't open file" not in err
    run_git(git_repo_with_origin, "push", "-q", "origin", "main")
    assert main(["run", "--repo", str(git_repo_with_origin), "--program", "local_only"]) == 0


def test_an_uncommitted_program_without_a_remote_says_commit_it_first(
    git_repo: Path, run_git: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    _add_program(git_repo, run_git)
    run_git(git_repo, "reset", "-q", "--soft", "HEAD~1")  # the files stay, the commit goes
    assert main(["run", "--repo", str(git_repo), "--program", "local_only"]) == 1
    assert "program local_only is not on main yet: commit it first" in capsys.readouterr().err
