"""Tests for git_trees.py: trees computed in Python are the ones git itself builds through an index."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.git.trees import TREE_MODE, object_id, overlay, parse_tree, render_tree
from autoloop_py.state.memory import MemoryStore


def _git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, input=data, capture_output=True, check=True).stdout


def _index_tree(repo: Path, files: dict[str, str]) -> str:
    """Returns the tree git builds for files through a fresh index."""
    env_index = repo / ".git" / "test-index"
    env_index.unlink(missing_ok=True)
    for path, text in files.items():
        blob = _git(repo, "hash-object", "-w", "--stdin", data=text.encode()).decode().strip()
        subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"], cwd=repo, check=True,
                       env={"GIT_INDEX_FILE": str(env_index), "PATH": "/usr/bin:/bin"})
    return subprocess.run(["git", "write-tree"], cwd=repo, capture_output=True, check=True, text=True,
                          env={"GIT_INDEX_FILE": str(env_index), "PATH": "/usr/bin:/bin"}).stdout.strip()


def test_trees_sort_folders_as_if_they_ended_in_a_slash() -> None:
    entries = {b"a.b": (b"100644", b"\1" * 20), b"a": (TREE_MODE, b"\2" * 20), b"a-": (b"100644", b"\3" * 20)}
    assert [name for _, name, _ in parse_tree(render_tree(entries))] == [b"a-", b"a.b", b"a"]


def test_overlaying_matches_an_index_built_tree(git_repo: Path) -> None:
    memory = MemoryStore(git_repo)
    first = {"x.md": "x\n", "traces/p/rows/1.json": "{}\n", "traces/p/blobs/ab/ab.txt": "a\n", "a-b": "dash\n"}
    memory.commit(first, "first")
    later = {"traces/p/rows/2.json": "{}\n", "traces/p/blobs/cd/cd.txt": "c\n", "x.md": "changed\n", "a/b": "nested\n"}
    sha = memory.commit(later, "second")
    assert _git(git_repo, "rev-parse", f"{sha}^{{tree}}").decode().strip() == _index_tree(git_repo, {**first, **later})
    assert _git(git_repo, "fsck", "--strict").decode() == ""


names = st.text(alphabet="ab.-_/", min_size=1, max_size=6).filter(
    lambda p: not p.startswith("/") and not p.endswith("/") and "//" not in p and all(c not in (".", "..") for c in p.split("/")))


@settings(max_examples=25, deadline=None)
@given(st.dictionaries(names, st.text(alphabet="xyz\n", max_size=5), min_size=1, max_size=6))
def test_any_set_of_files_gives_git_s_own_tree(tmp_path_factory, files: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    # Paths that are both a file and a folder cannot coexist in one tree; keep the first of each clash.
    kept: dict[str, str] = {}
    for path, text in files.items():
        if not any(path.startswith(k + "/") or k.startswith(path + "/") for k in kept):
            kept[path] = text
    repo = tmp_path_factory.mktemp("trees")
    _git(repo, "init", "-q")
    blobs = {path: object_id("blob", text.encode()) for path, text in kept.items()}
    raw: dict[str, bytes] = {}
    root, made = overlay(raw.get, None, blobs)
    for data in made.values():
        _git(repo, "hash-object", "-w", "-t", "tree", "--stdin", data=data)
    assert root == _index_tree(repo, kept)


def test_a_memory_commit_writes_its_objects_without_a_git_process(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = MemoryStore(git_repo)
    memory.commit({"x.md": "x\n", "dir/y.md": "y\n"}, "first")
    started: list[str] = []
    real = subprocess.Popen.__init__

    def popen(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        if isinstance(args, (list, tuple)) and "hash-object" in map(str, args):
            started.append("hash-object")
        real(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    sha = memory.commit({"dir/y.md": "changed\n", "dir/z/w.md": "new\n"}, "second")
    assert started == []
    monkeypatch.undo()
    assert _git(git_repo, "show", f"{sha}:dir/z/w.md") == b"new\n"
    assert _git(git_repo, "fsck", "--strict", "--no-dangling") == b""


def test_a_sha256_repository_gets_sha256_objects(tmp_path: Path, isolated_git_config: None) -> None:
    repo = tmp_path / "repo256"
    _git(tmp_path, "init", "-q", "--object-format=sha256", "-b", "main", str(repo))
    _git(repo, "config", "user.name", "Test User")
    _git(repo, "config", "user.email", "test@example.invalid")
    memory = MemoryStore(repo)
    memory.commit({"x.md": "x\n"}, "first")
    sha = memory.commit({"dir/y.md": "y\n"}, "second")
    assert len(sha) == 64 and memory.read("dir/y.md") == "y\n" and memory.read("x.md") == "x\n"
    assert _git(repo, "fsck", "--strict", "--no-dangling") == b""
