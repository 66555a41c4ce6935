"""Tests for worktree_restore.py: a kept worktree's written files put back as its commit has them, without git."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

from autoloop_py.git.objects import GitSession
from autoloop_py.loop.checkout.workspace import Workspace, Worktrees
from autoloop_py.loop.checkout.worktree_restore import restore

GitRunner = Callable[..., str]


def _tracked_tree(run_git: GitRunner, repo: Path) -> None:
    (repo / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    (repo / "tool.sh").chmod(0o755)
    (repo / "src").mkdir()
    (repo / "src" / "a.py").write_text("a = 1\n")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "tree")


def _git_processes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    started: list[str] = []
    real_popen = subprocess.Popen.__init__

    def popen(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        if isinstance(args, (list, tuple)) and args and Path(str(args[0])).name == "git":
            started.append(" ".join(str(a) for a in args))
        real_popen(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    return started


def test_the_files_a_rejected_candidate_wrote_are_put_back_without_git(
    git_repo: Path, run_git: GitRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tracked_tree(run_git, git_repo)
    with GitSession(git_repo) as session, Worktrees(git_repo) as worktrees:
        with Workspace(git_repo, "demo", session=session, worktrees=worktrees) as ws:
            ws.prepare()
            first = ws.path
            ws.write({"src/a.py": "a = 2\n", "tool.sh": None, "new/deep/b.py": "b = 1\n", "README.md": "changed\n"})
            (first / "tool.sh").write_text("plain file now\n")  # as an edit of the same path would leave it
        started = _git_processes(monkeypatch)
        with Workspace(git_repo, "demo", session=session, worktrees=worktrees) as ws:
            ws.prepare()
            assert ws.path == first
            assert not [c for c in started if " checkout " in c or " clean " in c]
            assert run_git(first, "status", "--porcelain", "--ignored") == ""  # exactly the commit again
            assert (first / "tool.sh").stat().st_mode & 0o777 == 0o755
            assert not (first / "new").exists()  # the folders made for a new file go with it
            assert ws.files(["src/a.py", "README.md"]) == {"src/a.py": "a = 1\n", "README.md": "# repo\n"}


def test_a_worktree_that_moved_or_holds_what_it_cannot_put_back_is_checked_out(
    git_repo: Path, run_git: GitRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tracked_tree(run_git, git_repo)
    with GitSession(git_repo) as session, Worktrees(git_repo) as worktrees:
        with Workspace(git_repo, "demo", session=session, worktrees=worktrees) as ws:
            ws.prepare()
            first = ws.path
            ws.write({"src/a.py": "a = 3\n"})
        (first / "src" / "a.py").unlink()
        (first / "src" / "a.py").mkdir()  # not a file the runner wrote: restore gives up
        assert not restore(first, session.objects, run_git(git_repo, "rev-parse", "HEAD"), ["src/a.py"])
        started = _git_processes(monkeypatch)
        with Workspace(git_repo, "demo", session=session, worktrees=worktrees) as ws:
            ws.prepare()
            assert [c for c in started if " checkout " in c] and [c for c in started if " clean " in c]
            assert run_git(first, "status", "--porcelain", "--ignored") == ""
        started.clear()
        run_git(git_repo, "commit", "-q", "--allow-empty", "-m", "main moved")
        with Workspace(git_repo, "demo", session=session, worktrees=worktrees) as ws:
            ws.prepare()  # the branch moves to main's new commit: checked out anew
            assert [c for c in started if " checkout " in c]
            assert run_git(first, "rev-parse", "HEAD") == run_git(git_repo, "rev-parse", "main")
            assert ws.files(["src/a.py"]) == {"src/a.py": "a = 1\n"}
