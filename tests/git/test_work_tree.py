"""work_tree: the working tree's git tree, through a private copy of the index."""

from __future__ import annotations

import os
from pathlib import Path

import git

from autoloop_py.git.work_tree import work_tree


def test_a_same_size_edit_in_the_second_of_the_commit_is_a_new_tree(git_repo: Path, run_git) -> None:  # type: ignore[no-untyped-def]
    # An edit of the same size within the second the index was written leaves the file's stat as the index has it;
    # only the index's own mtime tells git to read the file again (racy git), so the private copy must keep it.
    value = git_repo / "value.py"
    value.write_text("x = 1.5\n")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "value")
    second = int(value.stat().st_mtime) - 5
    for path in (value, git_repo / ".git/index"):
        os.utime(path, (second, second))
    run_git(git_repo, "update-index", "--really-refresh")  # the entry now holds that second too
    os.utime(git_repo / ".git/index", (second, second))
    repo = git.Repo(git_repo)
    with work_tree(repo) as before:
        pass
    value.write_text("x = 2.5\n")
    os.utime(value, (second, second))
    with work_tree(repo) as after:
        assert after.sha != before.sha
