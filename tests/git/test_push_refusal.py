"""Tests for push_refusal.py: git's own stderr, from real refused pushes, read as the reason."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autoloop_py.git import push_refusal
from autoloop_py.git.push_refusal import read_refusal
from tests.conftest import GitRunner

# What GitHub's pre-receive hook prints for a file over 100 MB.
GITHUB_SIZE_HOOK = """#!/bin/sh
echo "error: Trace: 0123456789abcdef" >&2
echo "error: See https://gh.io/lfs for more information." >&2
echo "error: File big.bin is 120.00 MB; this exceeds GitHub's file size limit of 100.00 MB" >&2
echo "error: GH001: Large files detected. You may want to try Git Large File Storage - https://git-lfs.github.com." >&2
exit 1
"""
PROTECTED_HOOK = """#!/bin/sh
echo "error: GH006: Protected branch update failed for refs/heads/main." >&2
exit 1
"""


def _push(repo: Path) -> str:
    done = subprocess.run(["git", "push", "origin", "HEAD:main"], cwd=repo, capture_output=True, text=True)
    assert done.returncode != 0
    return done.stderr


def _hook(origin: Path, text: str) -> None:
    hook = origin / "hooks/pre-receive"
    hook.write_text(text)
    hook.chmod(0o755)


@pytest.fixture
def pushed(git_repo_with_origin: Path, run_git: GitRunner) -> Path:
    """A clone with a new local commit on main, ready to push."""
    (git_repo_with_origin / "big.bin").write_text("data\n")
    run_git(git_repo_with_origin, "add", "big.bin")
    run_git(git_repo_with_origin, "commit", "-qm", "big")
    return git_repo_with_origin


def test_a_size_limit_hook_is_read_as_too_large(pushed: Path, tmp_path: Path) -> None:
    _hook(tmp_path / "origin.git", GITHUB_SIZE_HOOK)
    refusal = read_refusal(_push(pushed))
    assert refusal.kind == push_refusal.SIZE and not refusal.is_race
    assert "this exceeds GitHub's file size limit of 100.00 MB" in refusal.detail
    assert "pre-receive hook declined" in refusal.detail
    assert push_refusal.describe(refusal, "origin").startswith("origin refused it as too large: ")


def test_a_pack_over_receive_max_input_size_is_read_as_too_large(pushed: Path, tmp_path: Path, run_git: GitRunner) -> None:
    run_git(tmp_path / "origin.git", "config", "receive.maxInputSize", "10")
    assert read_refusal(_push(pushed)).kind == push_refusal.SIZE


def test_a_protected_branch_is_read_as_no_access(pushed: Path, tmp_path: Path) -> None:
    _hook(tmp_path / "origin.git", PROTECTED_HOOK)
    refusal = read_refusal(_push(pushed))
    assert refusal.kind == push_refusal.ACCESS
    assert "GH006: Protected branch update failed" in refusal.detail


def test_a_branch_another_run_moved_is_a_race(pushed: Path, clone_origin, run_git: GitRunner) -> None:  # type: ignore[no-untyped-def]
    other = clone_origin("other")
    (other / "x.txt").write_text("x\n")
    run_git(other, "add", "x.txt")
    run_git(other, "commit", "-qm", "x")
    run_git(other, "push", "-q", "origin", "main")
    refusal = read_refusal(_push(pushed))
    assert refusal.kind == push_refusal.RACE and refusal.is_race
    assert "fetch first" in refusal.detail or "rejected" in refusal.detail


def test_an_unreachable_remote_is_a_network_failure(pushed: Path, run_git: GitRunner, tmp_path: Path) -> None:
    run_git(pushed, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    refusal = read_refusal(_push(pushed))
    assert refusal.kind == push_refusal.NETWORK
    assert "does not appear to be a git repository" in refusal.detail


def test_the_detail_is_one_bounded_line() -> None:
    refusal = read_refusal("remote: " + "x" * 1000 + "\nremote: second\n")
    assert "\n" not in refusal.detail and len(refusal.detail) == 300


def test_a_remote_that_lost_the_ref_lock_to_another_push_is_a_race() -> None:
    # What a bare origin said when four clones pushed memory/autoloop at once.
    stderr = ("To /tmp/origin.git\n ! [remote rejected] memory/autoloop -> memory/autoloop (failed to update ref)\n"
              "error: failed to push some refs to '/tmp/origin.git'\n"
              "remote: error: cannot lock ref 'refs/heads/memory/autoloop': reference already exists\n")
    assert read_refusal(stderr).kind == push_refusal.RACE


def test_a_race_with_403_in_the_remote_path_is_still_a_race() -> None:
    # Seen as "no permission to push there" when pytest's temporary folder was pytest-403.
    said = ("To /tmp/pytest-of-root/pytest-403/origin.git\n ! [rejected]        memory/autoloop -> memory/autoloop "
            "(stale info)\nerror: failed to push some refs to '/tmp/pytest-of-root/pytest-403/origin.git'\n")
    assert read_refusal(said).kind == push_refusal.RACE
    assert read_refusal("fatal: unable to access 'https://x/': The requested URL returned error: 403").kind == \
        push_refusal.ACCESS
