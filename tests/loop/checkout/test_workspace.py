"""Tests for workspace.py against real temporary repositories and a bare origin."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

from autoloop_py.errors import AutoloopError, EditError, GitError
from autoloop_py.git.objects import GitSession
from autoloop_py.loop.checkout.workspace import BranchSync, Workspace, Worktrees, default_branch

GitRunner = Callable[..., str]
BRANCH = "autoloop/demo"


def _commit_file(run_git: GitRunner, repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    run_git(repo, "add", name)
    run_git(repo, "commit", "-q", "-m", f"edit {name}")
    return run_git(repo, "rev-parse", "HEAD")


def _candidate(repo: Path, name: str, text: str) -> str:
    with Workspace(repo, "demo") as ws:
        ws.prepare()
        ws.write({name: text})
        return ws.commit_candidate(f"candidate: {name}")


def _worktrees(run_git: GitRunner, repo: Path) -> list[str]:
    listing = run_git(repo, "worktree", "list", "--porcelain").splitlines()
    return [line.split(" ", 1)[1] for line in listing if line.startswith("worktree ")]


def test_prepare_creates_the_branch_from_main(git_repo: Path, run_git: GitRunner) -> None:
    with Workspace(git_repo, "demo") as ws:
        assert ws.prepare() == BranchSync("created")
        assert ws.branch == BRANCH
        assert run_git(git_repo, "rev-parse", BRANCH) == run_git(git_repo, "rev-parse", "main")
        assert ws.files(["README.md", "missing.md"]) == {"README.md": "# repo\n"}
        assert git_repo.resolve() not in ws.path.resolve().parents
        assert run_git(ws.path, "status", "--porcelain", "--branch").startswith("## HEAD (no branch)")


def test_a_runs_kept_worktree_is_checked_out_anew_and_removed_at_its_end(git_repo: Path, run_git: GitRunner) -> None:
    with Worktrees(git_repo) as worktrees:
        with Workspace(git_repo, "demo", worktrees=worktrees) as ws:
            ws.prepare()
            first = ws.path
            ws.write({"README.md": "changed, not committed\n", "stray.txt": "left behind\n"})
            (first / "build").mkdir()
            (first / "build" / "out.bin").write_bytes(b"\0")
        assert first.is_dir()  # kept for the next iteration
        run_git(first, "checkout", "-q", "-b", "stray")  # a branch checked out there is never moved by the reuse
        stray = run_git(git_repo, "rev-parse", "stray")
        with Workspace(git_repo, "demo", worktrees=worktrees) as ws:
            ws.prepare()
            assert ws.path == first
            assert run_git(git_repo, "rev-parse", "stray") == stray
            assert run_git(first, "status", "--porcelain", "--branch").startswith("## HEAD (no branch)")
            assert ws.files(["README.md", "stray.txt"]) == {"README.md": "# repo\n"}
            assert not (first / "build").exists()
            assert run_git(first, "status", "--porcelain", "--ignored") == ""
            ws.write({"new.md": "kept\n"})
            sha = ws.commit_candidate("candidate: new.md")
        with Workspace(git_repo, "demo", worktrees=worktrees) as ws:
            ws.prepare()
            assert run_git(ws.path, "rev-parse", "HEAD") == sha
            assert ws.files(["new.md"]) == {"new.md": "kept\n"}
    assert not first.exists()
    assert _worktrees(run_git, git_repo) == [str(git_repo)]


def test_a_kept_worktree_that_vanished_is_replaced(git_repo: Path, run_git: GitRunner) -> None:
    with Worktrees(git_repo) as worktrees:
        with Workspace(git_repo, "demo", worktrees=worktrees) as ws:
            ws.prepare()
            first = ws.path
        run_git(git_repo, "worktree", "remove", "--force", str(first))
        with Workspace(git_repo, "demo", worktrees=worktrees) as ws:
            ws.prepare()
            assert ws.path != first and ws.files(["README.md"]) == {"README.md": "# repo\n"}
    assert _worktrees(run_git, git_repo) == [str(git_repo)]


def test_worktree_is_private_and_removed_on_close(git_repo: Path, run_git: GitRunner) -> None:
    ws = Workspace(git_repo, "demo")
    with pytest.raises(AutoloopError, match="call prepare"):
        ws.path
    with ws:
        ws.prepare()
        path = ws.path
        assert path.is_dir()
        assert str(path.resolve()) in [str(Path(p).resolve()) for p in _worktrees(run_git, git_repo)]
    assert not path.exists()
    assert _worktrees(run_git, git_repo) == [str(git_repo)]
    ws.close()  # closing twice is harmless


def test_second_prepare_is_up_to_date_or_ahead(git_repo: Path) -> None:
    with Workspace(git_repo, "demo") as ws:
        ws.prepare()
        assert ws.prepare() == BranchSync("up-to-date")
        ws.write({"new.txt": "x\n"})
        ws.commit_candidate("add new.txt")
        assert ws.prepare() == BranchSync("ahead")


def test_fast_forward_when_main_moved_and_branch_has_nothing_new(git_repo: Path, run_git: GitRunner) -> None:
    with Workspace(git_repo, "demo") as ws:
        ws.prepare()
    main = _commit_file(run_git, git_repo, "later.txt", "later\n")
    with Workspace(git_repo, "demo") as ws:
        assert ws.prepare() == BranchSync("fast-forwarded")
        assert run_git(git_repo, "rev-parse", BRANCH) == main
        assert run_git(ws.path, "rev-parse", "HEAD") == main
        assert ws.files(["later.txt"]) == {"later.txt": "later\n"}


def test_merge_when_both_moved(git_repo: Path, run_git: GitRunner) -> None:
    candidate = _candidate(git_repo, "candidate.txt", "from the loop\n")
    main = _commit_file(run_git, git_repo, "user.txt", "from the user\n")
    with Workspace(git_repo, "demo") as ws:
        assert ws.prepare() == BranchSync("merged")
        tip = run_git(git_repo, "rev-parse", BRANCH)
        assert run_git(git_repo, "rev-list", "--parents", "-n", "1", tip).split()[1:] == [candidate, main]
        assert run_git(git_repo, "log", "-1", "--format=%s", tip) == f"Merge main into {BRANCH}"
        assert ws.files(["candidate.txt", "user.txt"]) == {
            "candidate.txt": "from the loop\n",
            "user.txt": "from the user\n",
        }
    assert run_git(git_repo, "symbolic-ref", "--short", "HEAD") == "main"


def test_conflict_aborts_with_git_error(git_repo: Path, run_git: GitRunner) -> None:
    candidate = _candidate(git_repo, "README.md", "# loop version\n")
    _commit_file(run_git, git_repo, "README.md", "# user version\n")
    ws = Workspace(git_repo, "demo")
    with pytest.raises(GitError, match=r"conflicts in README\.md; resolve it by hand \(`git checkout autoloop/demo"):
        ws.prepare()
    assert run_git(git_repo, "rev-parse", BRANCH) == candidate
    assert _worktrees(run_git, git_repo) == [str(git_repo)]
    assert run_git(git_repo, "status", "--porcelain") == ""


def test_user_checkout_of_the_program_branch_is_not_modified(git_repo: Path, run_git: GitRunner) -> None:
    _candidate(git_repo, "candidate.txt", "first\n")
    run_git(git_repo, "checkout", "-q", BRANCH)
    (git_repo / "README.md").write_text("user's uncommitted edit\n")
    with Workspace(git_repo, "demo") as ws:
        ws.prepare()
        ws.write({"candidate.txt": "second\n"})
        sha = ws.commit_candidate("second candidate")
    assert run_git(git_repo, "rev-parse", BRANCH) == sha
    assert run_git(git_repo, "symbolic-ref", "--short", "HEAD") == BRANCH
    assert (git_repo / "README.md").read_text() == "user's uncommitted edit\n"
    assert (git_repo / "candidate.txt").read_text() == "first\n"


def test_commit_candidate_moves_the_branch(git_repo: Path, run_git: GitRunner) -> None:
    main = run_git(git_repo, "rev-parse", "main")
    with Workspace(git_repo, "demo") as ws:
        ws.prepare()
        with pytest.raises(GitError, match="nothing to commit"):
            ws.commit_candidate("empty")
        ws.write({"src/new.py": "x = 1\n", "README.md": None})
        sha = ws.commit_candidate("[Autoloop: demo] Iteration 1: add new.py")
        assert ws.changed_paths() == []
    assert run_git(git_repo, "rev-parse", BRANCH) == sha
    assert run_git(git_repo, "rev-parse", f"{sha}^") == main
    assert run_git(git_repo, "log", "-1", "--format=%s|%an", sha) == "[Autoloop: demo] Iteration 1: add new.py|Test User"
    assert run_git(git_repo, "ls-tree", "-r", "--name-only", sha) == "src/new.py"
    assert run_git(git_repo, "rev-parse", "main") == main


def test_commit_candidate_refuses_when_the_branch_moved(git_repo: Path, run_git: GitRunner) -> None:
    with Workspace(git_repo, "demo") as ws:
        ws.prepare()
        _candidate(git_repo, "elsewhere.txt", "another run\n")
        ws.write({"mine.txt": "mine\n"})
        with pytest.raises(GitError, match="autoloop/demo moved meanwhile"):
            ws.commit_candidate("mine")


def test_push_to_origin(git_repo_with_origin: Path, run_git: GitRunner) -> None:
    origin = git_repo_with_origin.parent / "origin.git"
    with Workspace(git_repo_with_origin, "demo") as ws:
        ws.prepare()
        ws.write({"a.txt": "a\n"})
        sha = ws.commit_candidate("a")
        ws.push()
    assert run_git(origin, "rev-parse", BRANCH) == sha
    assert run_git(git_repo_with_origin, "rev-parse", f"origin/{BRANCH}") == sha


def test_prepare_takes_the_remote_branch_in_a_fresh_clone(
    git_repo_with_origin: Path, clone_origin: Callable[[str], Path], run_git: GitRunner
) -> None:
    with Workspace(git_repo_with_origin, "demo") as ws:
        ws.prepare()
        ws.write({"a.txt": "a\n"})
        sha = ws.commit_candidate("a")
        ws.push()
    clone = clone_origin("clone")
    with Workspace(clone, "demo") as ws:
        assert ws.prepare() == BranchSync("created")
        assert run_git(clone, "rev-parse", BRANCH) == sha
        assert ws.files(["a.txt"]) == {"a.txt": "a\n"}


def test_push_rejected_when_remote_has_other_commits(
    git_repo_with_origin: Path, clone_origin: Callable[[str], Path], run_git: GitRunner
) -> None:
    with Workspace(git_repo_with_origin, "demo") as ws:
        ws.prepare()
        ws.push()
    with Workspace(git_repo_with_origin, "demo") as ws:
        ws.prepare()
        with Workspace(clone_origin("clone"), "demo") as other:  # another run pushes first
            other.prepare()
            other.write({"theirs.txt": "theirs\n"})
            theirs = other.commit_candidate("theirs")
            other.push()
        ws.write({"mine.txt": "mine\n"})
        ws.commit_candidate("mine")
        with pytest.raises(GitError, match="has commits autoloop/demo lacks; rerun prepare"):
            ws.push()
    assert run_git(git_repo_with_origin.parent / "origin.git", "rev-parse", BRANCH) == theirs


def test_push_retries_with_lease_when_nothing_would_be_lost(git_repo_with_origin: Path, run_git: GitRunner) -> None:
    origin = git_repo_with_origin.parent / "origin.git"
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nif [ ! -e rejected-once ]; then touch rejected-once; echo busy >&2; exit 1; fi\n")
    hook.chmod(0o755)
    with Workspace(git_repo_with_origin, "demo") as ws:
        ws.prepare()
        ws.write({"a.txt": "a\n"})
        ws.commit_candidate("a")
        ws.push()  # the branch is new on origin: leased on "must not exist"
        (origin / "rejected-once").unlink()
        ws.write({"b.txt": "b\n"})
        sha = ws.commit_candidate("b")
        ws.push()  # origin's tip is an ancestor: leased on that tip
    assert (origin / "rejected-once").exists()
    assert run_git(origin, "rev-parse", BRANCH) == sha


def test_write_refuses_paths_outside_the_worktree(git_repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    with Workspace(git_repo, "demo") as ws:
        ws.prepare()
        os.symlink(outside, ws.path / "link")
        for bad in ("../x", "link/x", "/etc/passwd", ".git/config", "", "."):
            with pytest.raises(EditError, match="refusing path"):
                ws.write({bad: "escape\n"})
        with pytest.raises(EditError, match="refusing path"):
            ws.files(["link/x"])
        with pytest.raises(EditError, match="refusing path"):
            ws.write({"ok.txt": "fine\n", "../y": "escape\n"})
        assert not (ws.path / "ok.txt").exists()
    assert list(outside.iterdir()) == []


def test_changed_paths_and_reset(git_repo: Path, run_git: GitRunner) -> None:
    run_git(git_repo, "commit", "-q", "--allow-empty", "-m", "nothing")
    (git_repo / ".gitignore").write_text("*.log\n")
    _commit_file(run_git, git_repo, "keep.txt", "keep\n")
    run_git(git_repo, "add", ".gitignore")
    run_git(git_repo, "commit", "-q", "-m", "ignore logs")
    with Workspace(git_repo, "demo") as ws:
        ws.prepare()
        ws.write({"README.md": "changed\n", "keep.txt": None, "new/dir/file.txt": "new\n"})
        (ws.path / "build.log").write_text("ignored\n")
        assert ws.changed_paths() == ["README.md", "keep.txt", "new/dir/file.txt"]
        ws.reset()
        assert ws.changed_paths() == []
        assert ws.files(["README.md", "keep.txt"]) == {"README.md": "# repo\n", "keep.txt": "keep\n"}
        assert not (ws.path / "new").exists()
        assert not (ws.path / "build.log").exists()


def test_default_branch(
    git_repo_with_origin: Path, clone_origin: Callable[[str], Path], run_git: GitRunner
) -> None:
    clone = clone_origin("clone")
    run_git(clone, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/trunk")
    assert default_branch(clone) == "trunk"
    assert default_branch(git_repo_with_origin) == "main"
    run_git(git_repo_with_origin, "branch", "-m", "main", "master")
    run_git(git_repo_with_origin, "update-ref", "-d", "refs/remotes/origin/main")
    assert default_branch(git_repo_with_origin) == "master"
    run_git(git_repo_with_origin, "branch", "-m", "master", "develop")
    assert default_branch(git_repo_with_origin) == "develop"


def test_missing_base_branch_is_a_git_error(git_repo: Path) -> None:
    with pytest.raises(GitError, match="base branch 'release' exists neither locally nor on 'origin'; create it "
                       r"\(a new repository: commit your files first\) or name another with --base-branch"):
        Workspace(git_repo, "demo", base_branch="release").prepare()


def test_the_tracked_files_of_a_folder_are_what_git_ls_files_lists(git_repo: Path, run_git: GitRunner) -> None:
    folder = git_repo / "prog"
    (folder / "code" / "deep").mkdir(parents=True)
    for name in ("program.md", "code/evaluate.py", "code/deep/odd name é.txt", "code/z.py"):
        (folder / name).write_text("x\n")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "program")
    with GitSession(git_repo) as session, Workspace(git_repo, "demo", session=session) as ws:
        ws.prepare()
        (ws.path / "prog" / "code" / "untracked.log").write_text("output\n")
        listed = run_git(ws.path, "-c", "core.quotePath=false", "ls-files", "--", "prog").splitlines()
        assert ws.tracked(Path("prog")) == set(listed) and len(listed) == 4
        assert ws.tracked(Path("absent")) == set()
    with Workspace(git_repo, "demo") as ws:
        ws.prepare()
        assert ws.tracked(Path("prog")) is None  # no session: checks.protected_hashes asks `git ls-files`
