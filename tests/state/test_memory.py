"""Tests for memory.py against real temporary repositories and a bare origin."""

from __future__ import annotations

import logging
import random
import subprocess
import threading
from pathlib import Path
from typing import Callable

import pytest

from autoloop_py.errors import GitError, StateError
from autoloop_py.git.objects import GitSession
from autoloop_py.state.memory import MEMORY_BRANCH, PACK_EVERY, MemoryConfig, MemoryStore, pack_every, pack_if_due

GitRunner = Callable[..., str]
FAST = MemoryConfig(backoff=0.005, max_attempts=6)


def _append(line: str) -> Callable[[str | None], str]:
    return lambda text: (text or "") + line + "\n"


def _parents(run_git: GitRunner, repo: Path, rev: str) -> list[str]:
    return run_git(repo, "rev-list", "--parents", "-n", "1", rev).split()[1:]


def test_first_commit_is_an_orphan_root_without_the_main_tree(git_repo: Path, run_git: GitRunner) -> None:
    store = MemoryStore(git_repo)
    sha = store.commit({"demo.md": "# Autoloop: demo\n"}, "[Autoloop: demo] Iteration 1")
    assert run_git(git_repo, "rev-parse", MEMORY_BRANCH) == sha
    assert _parents(run_git, git_repo, sha) == []
    assert run_git(git_repo, "ls-tree", "-r", "--name-only", sha).splitlines() == ["demo.md"]
    assert run_git(git_repo, "log", "-1", "--format=%s|%an", sha) == "[Autoloop: demo] Iteration 1|Test User"


def test_read_write_and_list(git_repo: Path, run_git: GitRunner) -> None:
    store = MemoryStore(git_repo)
    assert store.read("demo.md") is None
    assert store.list() == []
    store.commit({"demo.md": "one\n", "traces/demo/0001.md": "trace\n"}, "first")
    second = store.commit({"demo.md": "two\r\nno final newline", "other.md": b"\xc3\xa9\n"}, "second")
    assert store.read("demo.md") == "two\r\nno final newline"
    assert store.read("other.md") == "é\n"
    assert store.read("traces/demo/0001.md") == "trace\n"
    assert store.read("missing.md") is None
    assert store.read("traces") is None
    assert store.list() == ["demo.md", "other.md", "traces/demo/0001.md"]
    assert store.list("traces/") == ["traces/demo/0001.md"]
    assert len(_parents(run_git, git_repo, second)) == 1


def test_binary_file_is_a_state_error_naming_line_and_byte(git_repo: Path) -> None:
    store = MemoryStore(git_repo)
    store.commit({"demo.md": b"# fine\n\nthen \xff garbage\n"}, "binary")
    with pytest.raises(StateError) as raised:
        store.read("demo.md")
    assert str(raised.value) == "demo.md:3: not UTF-8 text on memory/autoloop (byte 13); fix or delete the file"


def test_unchanged_files_make_no_commit(git_repo: Path) -> None:
    store = MemoryStore(git_repo)
    first = store.commit({"demo.md": "same\n"}, "first")
    assert store.commit({"demo.md": "same\n"}, "again") == first


def test_invalid_paths_are_refused(git_repo: Path) -> None:
    store = MemoryStore(git_repo)
    for bad in ("", "/abs.md", "../up.md", "a//b.md", "./x.md"):
        with pytest.raises(StateError, match="invalid memory path"):
            store.commit({bad: "x"}, "bad")


def test_user_working_tree_index_and_head_untouched(git_repo: Path, run_git: GitRunner) -> None:
    (git_repo / "staged.txt").write_text("staged\n")
    run_git(git_repo, "add", "staged.txt")
    (git_repo / "README.md").write_text("edited, not staged\n")
    (git_repo / "untracked.txt").write_text("untracked\n")
    before = [run_git(git_repo, *args) for args in _SNAPSHOT]
    store = MemoryStore(git_repo)
    store.commit({"demo.md": "a\n"}, "commit")
    store.update("demo.md", _append("b"), "update")
    assert [run_git(git_repo, *args) for args in _SNAPSHOT] == before
    assert (git_repo / "README.md").read_text() == "edited, not staged\n"
    assert not (git_repo / "demo.md").exists()


_SNAPSHOT = [
    ("status", "--porcelain"),
    ("rev-parse", "HEAD"),
    ("symbolic-ref", "HEAD"),
    ("ls-files", "--stage"),
    ("diff", "--cached"),
]


def test_update_without_remote_commits_locally(git_repo: Path) -> None:
    store = MemoryStore(git_repo)
    assert not store.has_remote()
    store.update("demo.md", _append("one"), "1")
    store.update("demo.md", _append("two"), "2", extra=lambda: {"traces/demo/2.md": "t\n"})
    assert store.read("demo.md") == "one\ntwo\n"
    assert store.read("traces/demo/2.md") == "t\n"


def test_update_pushes_to_origin(git_repo_with_origin: Path, run_git: GitRunner) -> None:
    store = MemoryStore(git_repo_with_origin, FAST)
    assert store.has_remote()
    sha = store.update("demo.md", _append("record"), "[Autoloop: demo] Iteration 1")
    origin = git_repo_with_origin.parent / "origin.git"
    assert run_git(origin, "rev-parse", MEMORY_BRANCH) == sha
    assert run_git(git_repo_with_origin, "rev-parse", f"origin/{MEMORY_BRANCH}") == sha


def test_sync_creates_the_branch_in_a_fresh_clone(
    git_repo_with_origin: Path, clone_origin: Callable[[str], Path]
) -> None:
    MemoryStore(git_repo_with_origin, FAST).update("demo.md", _append("from the first clone"), "1")
    fresh = MemoryStore(clone_origin("fresh"), FAST)
    assert fresh.read("demo.md") is None
    fresh.sync()
    assert fresh.read("demo.md") == "from the first clone\n"


def test_sync_fast_forwards_and_keeps_local_commits_when_ahead(
    git_repo_with_origin: Path, clone_origin: Callable[[str], Path], run_git: GitRunner
) -> None:
    first = MemoryStore(git_repo_with_origin, FAST)
    first.update("demo.md", _append("1"), "1")
    clone = clone_origin("other")
    other = MemoryStore(clone, FAST)
    other.sync()
    first.update("demo.md", _append("2"), "2")
    other.sync()
    assert other.read("demo.md") == "1\n2\n"
    local_only = other.commit({"demo.md": "local\n"}, "local only")
    other.sync()
    assert other.read("demo.md") == "local\n"
    assert run_git(clone, "rev-parse", MEMORY_BRANCH) == local_only


def test_diverged_sync_keeps_local_commits_under_orphaned_ref(
    git_repo_with_origin: Path,
    clone_origin: Callable[[str], Path],
    run_git: GitRunner,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # cli.main() turns propagation off on the package logger; caplog listens at the root.
    monkeypatch.setattr(logging.getLogger("autoloop_py"), "propagate", True)
    first = MemoryStore(git_repo_with_origin, FAST)
    first.update("demo.md", _append("shared"), "1")
    clone = clone_origin("clone")
    other = MemoryStore(clone, FAST)
    other.sync()
    remote_sha = first.update("demo.md", _append("pushed"), "2")
    local_sha = other.commit({"demo.md": "diverged\n"}, "local")
    with caplog.at_level(logging.WARNING, logger="autoloop_py.state.memory"):
        other.sync()
    assert run_git(clone, "rev-parse", MEMORY_BRANCH) == remote_sha
    orphaned = run_git(clone, "for-each-ref", "--format=%(refname) %(objectname)", "refs/autoloop/orphaned/")
    assert orphaned.split()[1] == local_sha
    assert orphaned.startswith("refs/autoloop/orphaned/2")
    assert "diverged" in caplog.text


def test_rejected_push_reapplies_change_on_fresh_remote_text(
    git_repo_with_origin: Path, clone_origin: Callable[[str], Path], run_git: GitRunner
) -> None:
    first = MemoryStore(git_repo_with_origin, FAST)
    first.update("demo.md", _append("header"), "0")
    second = MemoryStore(clone_origin("second"), FAST, rng=random.Random(1))
    second.sync()
    first.update("demo.md", _append("record from first"), "1")
    seen: list[str | None] = []

    def change(text: str | None) -> str:
        seen.append(text)
        return (text or "") + "record from second\n"

    sha = second.update("demo.md", change, "2")
    assert seen == ["header\n", "header\nrecord from first\n"]
    assert second.read("demo.md") == "header\nrecord from first\nrecord from second\n"
    origin = git_repo_with_origin.parent / "origin.git"
    assert run_git(origin, "rev-parse", MEMORY_BRANCH) == sha
    assert run_git(origin, "rev-list", "--count", MEMORY_BRANCH) == "3"


def test_an_owning_sessions_push_is_left_running_until_the_next_update_or_its_close(
    git_repo_with_origin: Path, run_git: GitRunner
) -> None:
    origin = git_repo_with_origin.parent / "origin.git"
    with GitSession(git_repo_with_origin, owns_pushes=True) as session:
        store = MemoryStore(git_repo_with_origin, FAST, session=session)
        first = store.update("demo.md", _append("one"), "1")
        assert session.deferred(f"push origin {MEMORY_BRANCH}")  # the local commit is the record meanwhile
        assert store.read("demo.md") == "one\n"
        assert not store.publish()  # reconcile does not push it a second time
        second = MemoryStore(git_repo_with_origin, FAST, session=session).update("demo.md", _append("two"), "2")
        assert run_git(origin, "rev-parse", MEMORY_BRANCH) == first  # the second update finished the first's push
    assert run_git(origin, "rev-parse", MEMORY_BRANCH) == second  # closing the session finished the second's
    assert run_git(git_repo_with_origin, "rev-parse", f"origin/{MEMORY_BRANCH}") == second


def test_a_push_left_running_that_lost_to_another_writer_is_redone_on_their_records(
    git_repo_with_origin: Path, clone_origin: Callable[[str], Path], run_git: GitRunner
) -> None:
    MemoryStore(git_repo_with_origin, FAST).update("demo.md", _append("header"), "0")
    other = MemoryStore(clone_origin("other"), FAST)
    other.sync()
    seen: list[str | None] = []

    def change(text: str | None) -> str:
        seen.append(text)
        return (text or "") + "ours\n"

    with GitSession(git_repo_with_origin, owns_pushes=True) as session:
        store = MemoryStore(git_repo_with_origin, FAST, session=session)
        other.update("demo.md", _append("theirs"), "their record")  # lands before ours: ours is refused
        store.update("demo.md", change, "our record", extra=lambda: {"traces/demo/1.md": f"{len(seen)}\n"})
        assert store.read("demo.md") == "header\nours\n"  # what this run reads until the push is settled
    origin = git_repo_with_origin.parent / "origin.git"
    assert seen == ["header\n", "header\ntheirs\n"]
    assert run_git(origin, "show", f"{MEMORY_BRANCH}:demo.md") == "header\ntheirs\nours"
    assert run_git(origin, "show", f"{MEMORY_BRANCH}:traces/demo/1.md") == "2"  # extra() ran again, after change()
    assert run_git(origin, "rev-list", "--count", MEMORY_BRANCH) == "3"
    assert run_git(git_repo_with_origin, "rev-parse", MEMORY_BRANCH) == run_git(origin, "rev-parse", MEMORY_BRANCH)


def test_concurrent_updates_from_four_clones_keep_every_line(
    git_repo_with_origin: Path, clone_origin: Callable[[str], Path], run_git: GitRunner
) -> None:
    config = MemoryConfig(backoff=0.01, max_attempts=40)
    stores = [MemoryStore(clone_origin(f"c{n}"), config, rng=random.Random(n)) for n in range(4)]
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(5):
                stores[n].update("demo.md", _append(f"clone {n} line {i}"), f"clone {n} update {i}")
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    origin = git_repo_with_origin.parent / "origin.git"
    lines = run_git(origin, "show", f"{MEMORY_BRANCH}:demo.md").splitlines()
    assert sorted(lines) == sorted(f"clone {n} line {i}" for n in range(4) for i in range(5))
    for n in range(4):  # each clone's own lines stay in order
        assert [line for line in lines if line.startswith(f"clone {n} ")] == [f"clone {n} line {i}" for i in range(5)]
    assert run_git(origin, "rev-list", "--count", MEMORY_BRANCH) == "20"
    assert run_git(origin, "rev-list", "--min-parents=2", MEMORY_BRANCH) == ""


def _refuse_pushes(repo: Path, message: str) -> None:
    """Gives origin a pre-receive hook that prints `message` and refuses every push."""
    hook = repo.parent / "origin.git" / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    hook.chmod(0o755)


def test_update_gives_up_after_max_attempts_without_reapplying_its_own_change(
    git_repo_with_origin: Path, run_git: GitRunner
) -> None:
    _refuse_pushes(git_repo_with_origin, "closed for maintenance")
    seen: list[str | None] = []

    def change(text: str | None) -> str:
        seen.append(text)
        return (text or "") + "record\n"

    store = MemoryStore(git_repo_with_origin, MemoryConfig(backoff=0.001, max_attempts=3))
    with pytest.raises(GitError, match=r"could not record demo.md on memory/autoloop after 3 attempts") as caught:
        store.update("demo.md", change, "1")
    assert "push rejected: remote: closed for maintenance" in str(caught.value)
    assert seen == [None, None, None]
    assert store.read("demo.md") == "record\n"
    assert run_git(git_repo_with_origin, "rev-list", "--count", MEMORY_BRANCH) == "1"


def test_default_identity_when_repo_has_none(git_repo: Path, run_git: GitRunner) -> None:
    run_git(git_repo, "config", "--unset", "user.name")
    run_git(git_repo, "config", "--unset", "user.email")
    sha = MemoryStore(git_repo).commit({"demo.md": "x\n"}, "no identity")
    author = run_git(git_repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", sha)
    assert author == "autoloop <autoloop@users.noreply.github.com>|autoloop <autoloop@users.noreply.github.com>"


def test_unreachable_remote_is_a_git_error_naming_the_command(git_repo: Path, run_git: GitRunner) -> None:
    run_git(git_repo, "remote", "add", "origin", str(git_repo.parent / "no-such-origin.git"))
    store = MemoryStore(git_repo, FAST)
    with pytest.raises(GitError) as caught:
        store.update("demo.md", _append("x"), "1")
    message = str(caught.value)
    assert message.startswith(f"{git_repo}: ")
    assert "`git " in message and "failed (exit" in message


def test_sync_without_remote_is_a_no_op(git_repo: Path) -> None:
    store = MemoryStore(git_repo)
    store.sync()
    assert store.read("demo.md") is None


def _loose_objects(repo: Path) -> int:
    out = subprocess.run(["git", "count-objects", "-v"], cwd=repo, capture_output=True, text=True, check=True).stdout
    return int(next(line.split()[1] for line in out.splitlines() if line.startswith("count:")))


@pytest.mark.parametrize("packing", [True, False])
def test_loose_objects_stay_bounded_when_packed_every_few_recordings(git_repo: Path, packing: bool) -> None:
    store = MemoryStore(git_repo)
    every, most = 10, 0
    for number in range(1, 61):
        files = {f"traces/p/rows/{number:06d}-it{number}.json": f"{{\"n\": {number}}}\n",
                 f"traces/p/blobs/{number:02d}/{number}.txt": f"x = {number}\n"}
        store.update("p.md", lambda text, n=number: f"iteration {n}\n", f"record {number}", extra=lambda f=files: f)
        if packing:
            pack_if_due(git_repo, number, every)
        most = max(most, _loose_objects(git_repo))
    # Each recording leaves 10 objects: 3 blobs, 6 trees (root, traces, p, rows, blobs, NN), the commit.
    if packing:
        assert most <= 10 * every + 10
    else:
        assert most > 10 * every + 10  # without packing the count grows with the recordings


def test_packing_runs_only_on_every_nth_iteration(git_repo: Path) -> None:
    assert not pack_if_due(git_repo, 7, 5)
    assert not pack_if_due(git_repo, 0, 5)
    assert pack_if_due(git_repo, 10, 5)


def test_an_owning_session_leaves_the_packing_running_and_finishes_it(git_repo: Path) -> None:
    with GitSession(git_repo, owns_pushes=True) as session:
        store = MemoryStore(git_repo, session=session)
        for number in range(1, 6):
            store.update("p.md", lambda text, n=number: f"iteration {n}\n", f"record {number}")
        assert _loose_objects(git_repo) >= 5 * 3
        assert pack_if_due(git_repo, 5, 5, session=session)
        assert session.deferred("pack")
        store.update("p.md", _append("after"), "a record while packing")
    assert not session.deferred("pack")
    assert _loose_objects(git_repo) <= 3  # the packing finished with the session; the last record may stay loose
    assert MemoryStore(git_repo).read("p.md") == "iteration 5\nafter\n"


def test_a_push_refused_as_too_large_is_not_retried_and_says_why(git_repo_with_origin: Path) -> None:
    _refuse_pushes(git_repo_with_origin, "error: File demo.md is 120.00 MB; this exceeds the file size limit")
    calls: list[str | None] = []

    def change(text: str | None) -> str:
        calls.append(text)
        return "record\n"

    store = MemoryStore(git_repo_with_origin, MemoryConfig(backoff=0.001, max_attempts=5))
    with pytest.raises(GitError, match="could not record demo.md on memory/autoloop: origin refused it as too large: pre-receive hook declined; "
                                       "File demo.md is 120.00 MB; this exceeds the file size limit"):
        store.update("demo.md", change, "1")
    assert calls == [None]  # one attempt: another would be refused the same way


def test_the_packing_interval_comes_from_the_environment_when_it_is_a_whole_number() -> None:
    assert pack_every({}) == PACK_EVERY
    assert pack_every({"AUTOLOOP_PACK_EVERY": "5"}) == 5
    assert pack_every({"AUTOLOOP_PACK_EVERY": "0"}) == 0  # never
    assert pack_every({"AUTOLOOP_PACK_EVERY": "often"}) == PACK_EVERY


def test_a_record_left_to_commit_is_read_at_once_and_committed_later(git_repo_with_origin: Path, run_git: GitRunner) -> None:
    store = MemoryStore(git_repo_with_origin, session=GitSession(git_repo_with_origin, owns_pushes=True))
    store.update("demo.md", _append("one"), "first")
    tip = run_git(git_repo_with_origin, "rev-parse", MEMORY_BRANCH)
    store.update_later("demo.md", _append("two"), "second", extra=lambda: {"traces/demo/2.json": "{}\n"})
    assert run_git(git_repo_with_origin, "rev-parse", MEMORY_BRANCH) == tip  # nothing committed yet
    assert store.read("demo.md") == "one\ntwo\n" and store.read_many(["traces/demo/2.json"]) == {
        "traces/demo/2.json": "{}\n"}
    assert MemoryStore(git_repo_with_origin, session=store.session).read("demo.md") == "one\ntwo\n"  # the run's stores
    store.commit_unwritten()
    assert store.unwritten() == {} and run_git(git_repo_with_origin, "rev-parse", f"{MEMORY_BRANCH}~1") == tip
    assert store.session.pushed[f"refs/heads/{MEMORY_BRANCH}"] == run_git(git_repo_with_origin, "rev-parse", MEMORY_BRANCH)
    store.session.close()  # the push left running lands
    assert run_git(git_repo_with_origin, "show", f"origin/{MEMORY_BRANCH}:traces/demo/2.json") == "{}"


def test_a_record_left_to_commit_is_applied_again_when_the_branch_moved_meanwhile(
    git_repo: Path, run_git: GitRunner
) -> None:
    store = MemoryStore(git_repo, session=GitSession(git_repo, owns_pushes=True))
    store.update("demo.md", _append("one"), "first")
    store.update_later("demo.md", _append("mine"), "mine")
    MemoryStore(git_repo).update("demo.md", _append("theirs"), "theirs")  # e.g. `autoloop edit`, under its own lock
    store.update("other.md", _append("next"), "next")  # any later write commits the record left first
    assert run_git(git_repo, "show", f"{MEMORY_BRANCH}:demo.md") == "one\ntheirs\nmine"
    assert run_git(git_repo, "log", "--format=%s", MEMORY_BRANCH).splitlines()[:2] == ["next", "mine"]
    store.session.close()
