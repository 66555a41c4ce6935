"""Tests for candidate_dir.py: the standalone copy, its snapshot and the changes read back from file contents."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from autoloop_py.sandbox import candidate_dir
from autoloop_py.sandbox.candidate_dir import Entry


def _tree(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a = 1\n")
    (root / ".hidden").write_text("h\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "link").symlink_to("src/a.py")
    (root / ".git").write_text("gitdir: /somewhere/.git/worktrees/x\n")
    return root


def test_copy_leaves_out_the_git_file_and_keeps_links_and_modes(tmp_path: Path) -> None:
    source = _tree(tmp_path / "source")
    with candidate_dir.copy_of(source) as tree:
        assert not (tree / ".git").exists()
        assert (tree / "src" / "a.py").read_text() == "a = 1\n" and (tree / ".hidden").is_file()
        assert os.readlink(tree / "link") == "src/a.py"
        assert os.access(tree / "run.sh", os.X_OK)
        holder = tree.parent
    assert not holder.exists()


def test_a_copy_removed_later_is_gone_once_its_removal_thread_ends(tmp_path: Path) -> None:
    with candidate_dir.copy_of(_tree(tmp_path / "source"), later=True) as tree:
        (tree / "locked").mkdir()
        (tree / "locked" / "f").write_text("x")
        (tree / "locked").chmod(0o500)  # what a candidate may leave: removed all the same
        holder = tree.parent
    for thread in [t for t in threading.enumerate() if t.name == "autoloop-removal"]:
        thread.join(timeout=10)
    assert not holder.exists()


def test_snapshot_covers_hidden_files_and_links_but_not_the_scratch_git(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    shot = candidate_dir.snapshot(root)
    assert set(shot) == {"src/a.py", ".hidden", "run.sh", "link"}
    assert shot["link"] == Entry("link", "src/a.py")


def test_changes_are_read_from_contents(tmp_path: Path) -> None:
    with candidate_dir.copy_of(_tree(tmp_path / "source")) as tree:
        candidate_dir.init_scratch_repo(tree)
        before = candidate_dir.snapshot(tree)
        (tree / "src" / "a.py").write_text("a = 2\n")
        (tree / ".hidden").unlink()
        (tree / "src" / "new.py").write_text("n = 1\n")
        (tree / "src" / "__pycache__").mkdir()
        (tree / "src" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0\1")
        (tree / "out").symlink_to("/etc/passwd")
        (tree / "blob.bin").write_bytes(b"\xff\xfe")
        (tree / "sub" / ".git").mkdir(parents=True)
        (tree / "sub" / ".git" / "config").write_text("[core]\n")
        (tree / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")  # the scratch repository: ignored
        changed = candidate_dir.changes(before, tree)
    assert changed.files == {"src/a.py": "a = 2\n", ".hidden": None, "src/new.py": "n = 1\n"}
    assert changed.dropped == ("src/__pycache__/a.cpython-311.pyc",)
    assert len(changed.problems) == 3
    assert any(p.startswith("out is a symbolic link (to /etc/passwd)") for p in changed.problems)
    assert any(p.startswith("blob.bin is not UTF-8 text") for p in changed.problems)
    assert any(p.startswith("sub/.git/config is inside a `.git` directory") for p in changed.problems)


def test_a_changed_mode_alone_is_no_change(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    before = candidate_dir.snapshot(root)
    (root / "run.sh").chmod(0o644)
    assert candidate_dir.changes(before, root).files == {}


def test_scratch_repository_is_a_standalone_git_of_the_tree(tmp_path: Path) -> None:
    with candidate_dir.copy_of(_tree(tmp_path / "source")) as tree:
        candidate_dir.init_scratch_repo(tree)
        assert (tree / ".git").is_dir() and not (tree / ".git" / "commondir").exists()
        listed = subprocess.run(["git", "ls-files"], cwd=tree, capture_output=True, text=True, check=True).stdout
        assert set(listed.split()) == {".hidden", "link", "run.sh", "src/a.py"}
        status = subprocess.run(["git", "status", "--porcelain"], cwd=tree, capture_output=True, text=True).stdout
        assert status == ""


def test_a_tree_made_undeletable_is_still_removed(tmp_path: Path) -> None:
    with candidate_dir.copy_of(_tree(tmp_path / "source")) as tree:
        (tree / "src").chmod(0o500)
        holder = tree.parent
    assert not holder.exists()
