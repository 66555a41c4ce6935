"""Tests for git_objects.py: one long-lived `cat-file --batch` that still sees refs and objects other processes write."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import gitdb.db.loose
import pytest

from autoloop_py.git.command import open_repo, push_branch
from autoloop_py.git.objects import KEPT_SIZE, GitSession, ObjectReader
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


def test_what_an_object_id_names_is_read_once_and_a_ref_is_read_each_time(git_repo: Path) -> None:
    memory = MemoryStore(git_repo)
    first = memory.commit({"a.md": "one\n", "big.bin": "x" * (KEPT_SIZE + 1)}, "one")
    reader = ObjectReader(open_repo(git_repo))
    for _ in range(3):
        assert reader.text(f"{first}:a.md") == "one\n"
        assert reader.commit_sha(first) == first and reader.tree_of(first) is not None
    assert reader.exchanges == 3  # the blob, the peeled commit and the commit, each asked once
    for _ in range(2):
        assert reader.commit_sha("refs/heads/memory/autoloop") == first
        assert reader.text(f"{first}:big.bin") is not None  # too large to keep
        assert reader.get(f"{first}:absent") is None  # what is absent may arrive: never kept
    assert reader.exchanges == 3 + 6
    second = memory.commit({"a.md": "two\n"}, "two")
    assert reader.commit_sha("refs/heads/memory/autoloop") == second  # a moved ref is seen at once
    assert reader.text(f"{second}:a.md") == "two\n" and reader.text(f"{first}:a.md") == "one\n"
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


def test_names_lists_a_tree_sorted(git_repo: Path) -> None:
    with GitSession(git_repo) as session:
        tip = MemoryStore(git_repo, session=session).commit({"b.txt": "b\n", "a dir/c.md": "c\n"}, "two")
        assert session.objects.names(f"{tip}:") == ["a dir", "b.txt"]
        assert session.objects.names(f"{tip}:b.txt") == []


def _git_processes(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the git processes started from now on, by subcommand (after the hardening `-c` pairs)."""
    started: Counter[str] = Counter()
    real = subprocess.Popen.__init__

    def popen(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        if isinstance(args, (list, tuple)) and args and Path(str(args[0])).name == "git":
            words = [str(word) for word in args[1:]]
            while words and words[0] == "-c":
                words = words[2:]
            started[words[0] if words else "?"] += 1
        real(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    return started


def test_one_listing_of_the_remote_serves_every_branch_the_session_asked_about(
    git_repo_with_origin: Path, run_git: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo_with_origin
    main = run_git(root, "rev-parse", "main")
    started = _git_processes(monkeypatch)
    with GitSession(root) as session:
        assert session.remote_tips("origin", ["main"]) == {"main": main}
        assert session.remote_tips("origin", ["absent"], reuse=True) == {}  # not listed yet: asks, for both
        assert started["ls-remote"] == 2
        assert session.remote_tips("origin", ["main", "absent"], reuse=True) == {"main": main}
        assert started["ls-remote"] == 2  # both were in the last listing
        run_git(root, "commit", "-q", "--allow-empty", "-m", "more")
        run_git(root, "push", "-q", "origin", "main")
        newer = run_git(root, "rev-parse", "main")
        assert session.remote_tips("origin", ["main"], reuse=True) == {"main": main}  # the kept listing
        assert session.remote_tips("origin", ["main"]) == {"main": newer}  # without reuse: asked now
        assert started["ls-remote"] == 3
        session.landed("origin", "absent", main)  # this runner's own push
        assert session.remote_tips("origin", ["absent"], reuse=True) == {"absent": main}
        session.forget_listing()
        assert session.remote_tips("origin", ["absent"], reuse=True) == {}
        assert started["ls-remote"] == 4


def test_a_commit_and_a_tree_entry_read_as_git_shows_them(git_repo: Path, run_git: Callable[..., str]) -> None:
    first = MemoryStore(git_repo).commit({"a.md": "a\n", "dir/b.txt": "b\n"}, "first\n\nAutoloop-Key: x:1:y")
    second = MemoryStore(git_repo).commit({"dir/b.txt": "c\n"}, "second")
    with GitSession(git_repo) as session:
        commit = session.objects.commit(second)
        assert commit is not None and commit.parents == (first,)
        assert commit.tree == run_git(git_repo, "rev-parse", f"{second}^{{tree}}")
        assert (commit.author, commit.date) == tuple(run_git(git_repo, "log", "-1", "--format=%an%n%aI", second).split("\n"))
        assert commit.message.strip() == "second"
        root = session.objects.commit(first)
        assert root is not None and root.parents == () and root.message.endswith("Autoloop-Key: x:1:y\n")
        listed = run_git(git_repo, "ls-tree", commit.tree, "dir/b.txt").split()
        assert session.objects.entry(commit.tree, "dir/b.txt") == (listed[0].encode(), listed[2])
        assert session.objects.entry(commit.tree, "dir/none") is None
        assert session.objects.entry(commit.tree, "a.md/x") is None  # a blob has no entries
        assert session.objects.commit(commit.tree) is None


@pytest.mark.parametrize("refspec", [True, False])
def test_a_push_leaves_the_tracking_ref_at_what_it_pushed(
    refspec: bool, git_repo_with_origin: Path, run_git: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo_with_origin
    if not refspec:  # git push moves the tracking ref only through the remote's fetch refspec
        run_git(root, "config", "--unset-all", "remote.origin.fetch")
    base = run_git(root, "rev-parse", "main")
    run_git(root, "commit", "-q", "--allow-empty", "-m", "next")
    child = run_git(root, "rev-parse", "HEAD")
    started = _git_processes(monkeypatch)
    with GitSession(root) as session:
        assert push_branch(session.repo, "origin", child, "main", base, built_on=base,
                           resolve=session.objects.commit_sha).ok
    assert run_git(root, "rev-parse", "refs/remotes/origin/main") == child
    assert started["update-ref"] == (0 if refspec else 1)


def test_an_object_folder_pruned_between_its_making_and_the_rename_is_made_again(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`git prune-packed` (repack -d, gc) removes an emptied objects/xx/ just after gitdb made it for a write."""
    renamed: list[str] = []

    def pruned_first(source: str, target: str) -> None:
        if not renamed:
            Path(target).parent.rmdir()  # what prune-packed does to a folder it emptied
        renamed.append(target)
        os.rename(source, target)

    monkeypatch.setattr(gitdb.db.loose, "rename", pruned_first)
    session = GitSession(git_repo)
    (sha,) = session.write_objects("blob", [b"written while pruned\n"])
    session.close()
    assert len(renamed) == 2  # the lost rename, then the write made again
    assert subprocess.run(["git", "cat-file", "-p", sha], cwd=git_repo, capture_output=True, text=True,
                          check=True).stdout == "written while pruned\n"
    objects = git_repo / ".git/objects"
    assert [p.name for p in objects.iterdir() if p.is_file() and p.name.startswith("obj")] == []  # no temp file left


def test_objects_written_while_a_pruner_removes_empty_folders_are_all_stored(git_repo: Path) -> None:
    """A real race: another process removes every empty objects/xx/ as prune-packed does, as fast as it can."""
    objects = git_repo / ".git/objects"
    pruner = subprocess.Popen(["sh", "-c", 'while :; do rmdir "$0"/?? 2>/dev/null; done', str(objects)])
    session = GitSession(git_repo)
    try:
        shas = [sha for i in range(0, 200, 20) for sha in session.write_objects(
            "blob", [f"blob {n}\n".encode() for n in range(i, i + 20)])]
    finally:
        pruner.kill()
        pruner.wait()
        session.close()
    listed = subprocess.run(["git", "cat-file", "--batch-check"], cwd=git_repo, input="\n".join(shas) + "\n",
                            capture_output=True, text=True, check=True).stdout
    assert "missing" not in listed and len(listed.splitlines()) == 200
