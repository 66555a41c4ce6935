"""The iterations of one `autoloop run` share its git work: one worktree, one set of lookups, no fetch of what is here."""

from __future__ import annotations

import subprocess
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pytest

from autoloop_py.git.objects import GitSession
from autoloop_py.loop.checkout.workspace import Worktrees
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import Program, load_program
from tests.e2e.test_bounded_reads import _repo, _subcommand

START = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _bench(origin_repo: Path, run_git: Callable[..., str]) -> tuple[Path, Program]:
    """Returns the bench repository, its main pushed, and its program."""
    root = _repo(origin_repo, run_git)
    run_git(root, "push", "-q", "origin", "main")
    return root, load_program(root, Path(".autoloop/programs/bench/program.md"))


def _count_git(monkeypatch: pytest.MonkeyPatch, per_iteration: list[Counter[str]],
               name_of: Callable[[list[str]], str | None]) -> None:
    """Counts each git process started into per_iteration[-1], under name_of(its arguments) (None: not counted)."""
    real_popen = subprocess.Popen.__init__

    def popen(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        if isinstance(args, (list, tuple)) and args and Path(str(args[0])).name == "git":
            name = name_of([str(a) for a in args[1:]])
            if name is not None:
                per_iteration[-1][name] += 1
        real_popen(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)


def test_later_iterations_of_a_run_reuse_its_worktree_and_lookups(
    git_repo_with_origin: Path, run_git: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, program = _bench(git_repo_with_origin, run_git)
    per_iteration: list[Counter[str]] = []
    counting = [True]

    def name_of(words: list[str]) -> str | None:
        if not counting[0]:
            return None
        name = _subcommand(words)
        after = words[words.index(name) + 1:] if name in words else []
        # `worktree add` and `worktree remove` apart from the stale-worktree check's `worktree list`; the config
        # listing that neutralises the commands a config names apart from the `config --get` lookups
        if name == "config" and after[:1] == ["--list"]:
            return "config --list"
        return f"{name} {after[0]}" if name == "worktree" and after else name

    _count_git(monkeypatch, per_iteration, name_of)
    with GitSession(root) as session, Worktrees(root) as worktrees:
        for number in range(3):
            per_iteration.append(Counter())
            outcome = run_iteration(root, program, RunOptions(proposer="tune"), START, session, worktrees)
            assert outcome.iteration == number + 1
        counting[0] = False
        worktrees_during = run_git(root, "worktree", "list", "--porcelain")
    first, *later = per_iteration
    assert first["worktree add"] == 1 and first["fetch"] == 0  # the branches the run pushed need no fetch
    for counts in later:
        assert counts["worktree add"] == counts["worktree remove"] == counts["fetch"] == 0
        # The kept worktree: on the commit it was left at, the files written since are put back without git.
        assert counts["checkout"] == counts["clean"] == 0
        for lookup in ("remote", "config", "symbolic-ref", "check-ref-format", "for-each-ref"):
            assert counts[lookup] == 0, lookup
        assert counts["ls-remote"] >= 1  # the remote is still asked what it holds
    # The config git reads is listed once per checkout and content in a run: the user's checkout, the kept worktree.
    assert sum(counts["config --list"] for counts in per_iteration) <= 2
    assert worktrees_during.count("worktree ") == 2  # the checkout and the run's kept worktree
    assert run_git(root, "worktree", "list", "--porcelain").count("worktree ") == 1  # removed at the run's end
    assert run_git(root, "rev-parse", "memory/autoloop") == run_git(root, "rev-parse", "origin/memory/autoloop")


def test_a_later_iteration_lists_the_remote_twice_and_reads_no_log_it_already_holds(
    git_repo_with_origin: Path, run_git: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, program = _bench(git_repo_with_origin, run_git)
    per_iteration: list[Counter[str]] = []
    _count_git(monkeypatch, per_iteration, _subcommand)
    statuses = []
    with GitSession(root) as session, Worktrees(root) as worktrees:
        for _ in range(5):
            per_iteration.append(Counter())
            statuses.append(run_iteration(root, program, RunOptions(proposer="tune"), START, session, worktrees).status)
    # A rejected iteration after a rejected one (the first created the program branch): nothing moved but memory.
    later = [per_iteration[n] for n in range(2, len(statuses)) if statuses[n - 1] == statuses[n] == "rejected"]
    assert later, (statuses, per_iteration)
    for counts in later:
        # One listing for the memory sync and reconcile, one for prepare (what was pushed meanwhile is built on).
        assert counts["ls-remote"] == 2
        # The newest record is the memory tip, the newest candidate's key is in the history, the branches
        # did not move: no `git log`, no `rev-list`.
        assert counts["log"] == counts["rev-list"] == 0
        assert counts["update-ref"] == 1  # the memory branch; git push moved the tracking ref itself
        assert counts["ls-files"] == 0  # the protected files are listed from the tip's tree


def test_a_run_that_owns_its_pushes_lists_the_remote_once_and_leaves_each_record_push_running(
    git_repo_with_origin: Path, run_git: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, program = _bench(git_repo_with_origin, run_git)
    per_iteration: list[Counter[str]] = []
    _count_git(monkeypatch, per_iteration, _subcommand)
    origin = git_repo_with_origin.parent / "origin.git"
    pushed_before_next: list[str] = []
    with GitSession(root, owns_pushes=True, listing_seconds=3600) as session, Worktrees(root) as worktrees:
        for number in range(4):
            per_iteration.append(Counter())
            outcome = run_iteration(root, program, RunOptions(proposer="tune"), START, session, worktrees)
            assert outcome.iteration == number + 1
            assert session.deferred("push origin memory/autoloop")  # the record's push overlaps what comes next
            pushed_before_next.append(run_git(root, "rev-parse", "memory/autoloop"))
    first, *later = per_iteration
    assert first["ls-remote"] >= 1
    for counts in later:
        # The run's own pushes keep its listing up to date; a kept candidate's record alone asks the remote (a best
        # raised meanwhile withdraws it).
        assert counts["ls-remote"] == (1 if counts["commit"] else 0) and counts["fetch"] == 0, per_iteration
        assert counts["push"] >= 1
    # Every record reached origin: each push was finished by the next record, the last by the session's end.
    assert run_git(origin, "rev-parse", "memory/autoloop") == pushed_before_next[-1]
    history = run_git(origin, "log", "--format=%H", "memory/autoloop").split()
    assert all(sha in history for sha in pushed_before_next)


def test_a_run_that_owns_its_pushes_builds_on_a_base_pushed_meanwhile_once_its_listing_is_old(
    git_repo_with_origin: Path, run_git: Callable[..., str], clone_origin: Callable[[str], Path]
) -> None:
    root, program = _bench(git_repo_with_origin, run_git)
    other = clone_origin("other")
    with GitSession(root, owns_pushes=True, listing_seconds=0) as session, Worktrees(root) as worktrees:
        run_iteration(root, program, RunOptions(proposer="tune"), START, session, worktrees)
        (other / "NEWS.md").write_text("pushed to main while the run went on\n")
        run_git(other, "add", "NEWS.md")
        run_git(other, "commit", "-qm", "news")
        run_git(other, "push", "-q", "origin", "main")
        run_iteration(root, program, RunOptions(proposer="tune"), START, session, worktrees)
    main = run_git(other, "rev-parse", "HEAD")
    assert run_git(root, "merge-base", "--is-ancestor", main, "autoloop/bench") == ""
