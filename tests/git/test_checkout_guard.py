"""The checkout's git config, attributes and refs are compared before and after candidate code ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.git.checkout_guard import CheckoutTampered, changes, snapshot, verify


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
