"""Tests for autoloop_py.state.save_limits: gh-aw's repo-memory save rules, its patch measure against git's own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autoloop_py.state import save_limits


def _git_added_bytes(folder: Path, path: str, old: str | None, new: str) -> int:
    """Returns what gh-aw's push job counts: the added lines of `git diff --cached`, each with its `+`."""
    run = lambda *args: subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, check=True).stdout
    run("init", "-q")
    run("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "empty")
    if old is not None:
        (folder / path).write_text(old)
        run("add", "-A")
        run("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "old")
    (folder / path).write_text(new)
    run("add", "-A")
    diff = run("diff", "--cached")
    return sum(len(line.encode()) for line in diff.split("\n") if line.startswith("+") and not line.startswith("+++"))


@pytest.mark.parametrize("old, new", [
    (None, "# state\n| a | 1 |\n"),
    ("a\nb\nc\n", "a\nB\nc\nd\n"),
    ("| Iteration Count | 1 |\n" + "keep\n" * 50, "| Iteration Count | 2 |\n" + "keep\n" * 50 + "new entry\n"),
    ("x = 1\n", "x = 1\ny = 2"),  # no final newline
    ("é\n", "é\nü\n"),
])
def test_the_patch_measure_is_gits(tmp_path: Path, old: str | None, new: str) -> None:
    assert save_limits.added_bytes(old, new) == _git_added_bytes(tmp_path, "f.md", old, new)


def test_the_extensions_are_the_workflows() -> None:
    assert save_limits.allowed("alpha.md") and save_limits.allowed("candidates/a/1.py.gz.b64.txt")
    assert save_limits.allowed("traces/a/rows/000001-1.JSON")
    assert not save_limits.allowed("candidates/a/1.sh") and not save_limits.allowed("candidates/a/README")
