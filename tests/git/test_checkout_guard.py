"""The checkout's git config, attributes and refs are compared before and after candidate code ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.git.checkout_guard import CheckoutTampered, changes, runner_refs_held, snapshot, verify


def test_a_changed_config_new_attributes_and_a_moved_ref_are_each_named(git_repo: Path, run_git) -> None:  # type: ignore[no-untyped-def]
    git_dir = git_repo / ".git"
    before = snapshot(git_dir, own=("refs/heads/memory/autoloop",))
    verify(before, own=("refs/heads/memory/autoloop",))  # nothing changed: no error
    head = run_git(git_repo, "rev-parse", "HEAD")
    run_git(git_repo, "pack-refs", "--all")  # packing moves no ref
    assert changes(before, snapshot(git_dir, own=("refs/heads/memory/autoloop",))) == []
    run_git(git_repo, "update-ref", "refs/heads/autoloop/demo", head)  # the runner's own namespaces are not compared
    run_git(git_repo, "update-ref", "refs/heads/memory/autoloop", head)
    run_git(git_repo, "config", "remote.origin.uploadpack", "evil")
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info/attributes").write_text("* filter=evil\n")
    run_git(git_repo, "update-ref", "refs/heads/planted", head)
    found = changes(before, snapshot(git_dir, own=("refs/heads/memory/autoloop",)))
    assert found == [f"{git_dir}/config changed", f"{git_dir}/info/attributes appeared",
                     f"refs/heads/planted was created (now {head[:12]})"]
    with pytest.raises(CheckoutTampered, match="while the proposer ran: .*config changed.*nothing was pushed"):
        verify(before, own=("refs/heads/memory/autoloop",), during="the proposer ran")


def _write_ref(git_dir: Path, ref: str, sha: str) -> None:
    (git_dir / ref).parent.mkdir(parents=True, exist_ok=True)
    (git_dir / ref).write_text(sha + "\n")


SHA_A, SHA_B = "a" * 40, "b" * 40


def test_another_programs_active_run_may_move_the_shared_and_its_own_refs(tmp_path: Path) -> None:
    _write_ref(tmp_path, "refs/heads/memory/autoloop", SHA_A)
    with runner_refs_held(tmp_path, "mine", "refs/heads/memory/autoloop", "x", lambda start: {"other"}):
        _write_ref(tmp_path, "refs/heads/memory/autoloop", SHA_B)
        _write_ref(tmp_path, "refs/heads/autoloop/other", SHA_B)
        _write_ref(tmp_path, "refs/autoloop/orphaned/other-1234", SHA_B)
    # ... but never this program's refs, nor a third program's.
    for ref in ("refs/heads/autoloop/mine", "refs/autoloop/slots/mine/3", "refs/autoloop/slots/third/1"):
        with pytest.raises(CheckoutTampered, match=f"{ref} was created"):
            with runner_refs_held(tmp_path, "mine", "refs/heads/memory/autoloop", "x",
                                                 lambda start: {"other"}):  # fmt: skip
                _write_ref(tmp_path, ref, SHA_A)


def test_with_no_other_run_every_runner_ref_holds_still(tmp_path: Path) -> None:
    _write_ref(tmp_path, "refs/remotes/origin/main", SHA_A)
    with pytest.raises(CheckoutTampered, match="refs/remotes/origin/main moved"):
        with runner_refs_held(tmp_path, "mine", "refs/heads/memory/autoloop", "x", lambda start: set()):
            _write_ref(tmp_path, "refs/remotes/origin/main", SHA_B)
    with runner_refs_held(tmp_path, "mine", "refs/heads/memory/autoloop", "x", lambda start: set()):
        _write_ref(tmp_path, "refs/heads/main", SHA_B)  # not a runner ref: the whole-run snapshot watches it
    with pytest.raises(CheckoutTampered, match="refs/heads/memory/autoloop was created"):  # its folder is walked too
        with runner_refs_held(tmp_path, "mine", "refs/heads/memory/autoloop", "x", lambda start: set()):
            _write_ref(tmp_path, "refs/heads/memory/autoloop", SHA_B)


def test_the_runs_own_push_landing_moves_its_tracking_ref_to_the_pushed_sha_only(tmp_path: Path) -> None:
    tracking = "refs/remotes/origin/memory/autoloop"
    pushed = {tracking: SHA_B}
    with runner_refs_held(tmp_path, "mine", "refs/heads/memory/autoloop", "x", lambda start: set(), pushed=pushed):
        _write_ref(tmp_path, tracking, SHA_B)  # the push left running landed meanwhile
    with pytest.raises(CheckoutTampered, match=f"{tracking} moved"):  # any other value is not the run's
        with runner_refs_held(tmp_path, "mine", "refs/heads/memory/autoloop", "x", lambda start: set(), pushed=pushed):
            _write_ref(tmp_path, tracking, SHA_A)


def test_the_recorder_of_a_run_without_a_barrier_may_move_this_programs_and_the_shared_refs(tmp_path: Path) -> None:
    with runner_refs_held(tmp_path, "mine", "refs/heads/memory/autoloop", "x", lambda start: set(),
                          recorder=lambda start: True):  # fmt: skip
        _write_ref(tmp_path, "refs/heads/memory/autoloop", SHA_A)
        _write_ref(tmp_path, "refs/heads/autoloop/mine", SHA_A)
    with pytest.raises(CheckoutTampered, match="refs/heads/autoloop/third was created"):  # not another program's
        with runner_refs_held(tmp_path, "mine", "refs/heads/memory/autoloop", "x", lambda start: set(),
                              recorder=lambda start: True):  # fmt: skip
            _write_ref(tmp_path, "refs/heads/autoloop/third", SHA_A)
    with pytest.raises(CheckoutTampered, match="refs/heads/autoloop/mine moved"):  # nor when it recorded nothing
        with runner_refs_held(tmp_path, "mine", "refs/heads/memory/autoloop", "x", lambda start: set(),
                              recorder=lambda start: False):  # fmt: skip
            _write_ref(tmp_path, "refs/heads/autoloop/mine", SHA_B)
