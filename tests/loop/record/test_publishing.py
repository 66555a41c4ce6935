"""Publishing a decided iteration: when a candidate made on an older branch tree still rebuilds what was evaluated."""

from __future__ import annotations

from pathlib import Path

from autoloop_py.loop.record.publishing import rebuilds
from tests.conftest import GitRunner


def _tree(repo: Path, run_git: GitRunner, files: dict[str, str]) -> str:
    for path, text in files.items():
        (repo / path).write_text(text)
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "step")
    return run_git(repo, "rev-parse", "HEAD^{tree}").strip()


def test_a_candidate_rebuilds_its_tree_only_when_it_rewrites_every_file_the_branch_changed(
    git_repo: Path, run_git: GitRunner
) -> None:
    old = _tree(git_repo, run_git, {"a.py": "x = 1\n", "b.py": "y = 1\n"})
    moved_a = _tree(git_repo, run_git, {"a.py": "x = 2\n"})  # a sibling kept its own a.py
    moved_b = _tree(git_repo, run_git, {"b.py": "y = 2\n"})  # then b.py changed too
    assert rebuilds(git_repo, old, moved_a, {"a.py": "x = 3\n"})
    assert rebuilds(git_repo, old, moved_a, {"a.py": None, "c.py": "z\n"})  # a deletion rewrites the path too
    assert not rebuilds(git_repo, old, moved_b, {"a.py": "x = 3\n"})  # b.py would not be the evaluated one
    assert not rebuilds(git_repo, old, "0" * 40, {"a.py": "x = 3\n"})  # an unknown tree rebuilds nothing
