"""Tests for git_objects.py: one long-lived `cat-file --batch` that still sees refs and objects other processes write."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from autoloop_py.git.command import open_repo
from autoloop_py.git.objects import GitSession, ObjectReader, tree_entries
from autoloop_py.state.memory import MemoryStore


def test_one_process_reads_blobs_trees_and_refs(git_repo: Path) -> None:
    MemoryStore(git_repo).commit({"a.md": "a\n", "dir/b.txt": "b\n", "dir/odd name.txt": "é\n"}, "files")
    reader = ObjectReader(open_repo(git_repo))
    tip = reader.commit_sha("refs/heads/memory/autoloop")
    assert tip is not None
    assert reader.text(f"{tip}:a.md") == "a\n"
    assert reader.text(f"{tip}:dir/odd name.txt") == "é\n"
    assert reader.names(f"{tip}:dir") == ["b.txt", "odd name.txt"]
    assert reader.text(f"{tip}:dir") is None and reader.names(f"{tip}:a.md") == []
    assert reader.get(f"{tip}:absent") is None and reader.commit_sha("refs/heads/nothing") is None
    assert reader.get("bad\nspec") is None
    assert reader.tree_of(tip) == reader.get(f"{tip}^{{tree}}").sha  # type: ignore[union-attr]
    assert reader.starts == 1
    reader.close()


def test_refs_moved_and_objects_packed_by_other_processes_are_seen(git_repo: Path, run_git: Callable[..., str]) -> None:
    memory = MemoryStore(git_repo)
    first = memory.commit({"a.md": "one\n"}, "one")
    reader = ObjectReader(open_repo(git_repo))
    assert reader.commit_sha("refs/heads/memory/autoloop") == first
    second = MemoryStore(git_repo).commit({"a.md": "two\n"}, "two")  # another store: another process wrote it
    assert reader.commit_sha("refs/heads/memory/autoloop") == second
    assert reader.text(f"{second}:a.md") == "two\n"
    run_git(git_repo, "pack-refs", "--all")
    run_git(git_repo, "repack", "-a", "-d", "-q")
    third = MemoryStore(git_repo).commit({"a.md": "three\n"}, "three")
    assert reader.commit_sha("refs/heads/memory/autoloop") == third
    assert reader.text(f"{first}:a.md") == "one\n"  # now in a pack the process had not opened
    assert reader.starts == 1
    reader.close()


def test_a_stopped_process_is_restarted(git_repo: Path) -> None:
    sha = MemoryStore(git_repo).commit({"a.md": "a\n"}, "a")
    reader = ObjectReader(open_repo(git_repo))
    assert reader.text(f"{sha}:a.md") == "a\n"
    reader.close()
    assert reader.text(f"{sha}:a.md") == "a\n"
    assert reader.starts == 2
    reader.close()


def test_a_session_shares_its_reader_between_stores(git_repo: Path) -> None:
    with GitSession(git_repo) as session:
        MemoryStore(git_repo, session=session).commit({"a.md": "a\n"}, "a")
        assert MemoryStore(git_repo, session=session).read("a.md") == "a\n"
        assert session.objects.starts == 1
        assert not session.has_remote("origin")


def test_tree_entries_parse_raw_trees() -> None:
    raw = b"100644 b.txt\0" + b"\1" * 20 + b"40000 a dir\0" + b"\2" * 20
    assert tree_entries(raw) == ["a dir", "b.txt"]
