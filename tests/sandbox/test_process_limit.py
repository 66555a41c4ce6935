"""Tests for autoloop_py.sandbox.process_limit: which mechanism bounds a command's processes, and the hand-over."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from autoloop_py import tempdirs
from autoloop_py.sandbox import process_limit
from autoloop_py.sandbox.process_limit import (
    CGROUP,
    NOBODY,
    NONE,
    RLIMIT,
    UID,
    Facts,
    decide,
    describe,
    hand_over,
    has_capabilities,
    holder_of,
)

ROOT_ALL = Facts(root=True, cgroup_parent="/sys/fs/cgroup/pids", setpriv=True, can_setuid=True)
ROOT_NO_CGROUP = Facts(root=True, setpriv=True, can_setuid=True)
USER = Facts(root=False, setpriv=True)


def test_auto_prefers_rlimit_for_a_user_then_cgroup_then_uid_for_root() -> None:
    assert decide("auto", USER).mechanism == RLIMIT
    assert decide("auto", ROOT_ALL) == process_limit.ProcessLimit(
        CGROUP, "a pids cgroup per command under /sys/fs/cgroup/pids", requested="auto"
    )
    assert decide("auto", ROOT_NO_CGROUP).mechanism == UID
    assert decide("", ROOT_NO_CGROUP).mechanism == UID


def test_auto_says_why_nothing_holds_when_nothing_can() -> None:
    limit = decide("auto", Facts(root=True, setpriv=False, can_setuid=True))
    assert (limit.mechanism, limit.enforced, limit.problem) == (NONE, False, "")
    assert "no writable pids cgroup" in limit.reason and "setpriv (util-linux) is not installed" in limit.reason
    assert describe(limit).startswith("NOT ENFORCED: the process limit of evaluations and agents (running as root")
    assert "lacks CAP_SETUID" in decide("auto", Facts(root=True, setpriv=True, can_setuid=False)).reason
    assert decide("auto", Facts(root=False, prlimit=False)).reason == "prlimit (util-linux) is not installed"


def test_uid_is_never_chosen_for_a_directory_that_is_not_autoloops_copy() -> None:
    facts = Facts(root=True, setpriv=True, can_setuid=True, own_copy=False)
    assert decide("auto", facts).mechanism == NONE
    assert "not one of autoloop's temporary copies" in decide("uid", facts).problem


def test_a_forced_mechanism_that_cannot_run_is_a_problem_never_a_fallback() -> None:
    assert decide("cgroup", ROOT_ALL).mechanism == CGROUP
    assert decide("uid", ROOT_ALL).mechanism == UID  # forced past an available cgroup
    no_group = decide("cgroup", ROOT_NO_CGROUP)
    assert no_group.mechanism == NONE and no_group.problem.startswith("AUTOLOOP_PROCESS_LIMIT=cgroup, but there is no")
    as_user = decide("uid", USER)
    assert as_user.problem.startswith("AUTOLOOP_PROCESS_LIMIT=uid, but only a root runner can run commands as another")
    assert decide(" CGroup ", Facts(root=False, cgroup_parent="/g")).mechanism == CGROUP
    bad = decide("docker", ROOT_ALL)
    assert bad.problem == "AUTOLOOP_PROCESS_LIMIT must be one of auto, cgroup, uid, off, got 'docker'"
    assert not bad.enforced


def test_off_enforces_nothing_and_says_so() -> None:
    for facts in (USER, ROOT_ALL):
        limit = decide("off", facts)
        assert (limit.mechanism, limit.problem) == (NONE, "")
        assert describe(limit) == "NOT ENFORCED: the process limit of evaluations and agents (AUTOLOOP_PROCESS_LIMIT=off)"


def test_each_mechanism_is_described_in_one_line() -> None:
    assert describe(decide("auto", USER)) == "process limit: RLIMIT_NPROC (prlimit)"
    assert describe(decide("auto", ROOT_ALL)) == "process limit: a pids cgroup per command under /sys/fs/cgroup/pids"
    assert describe(decide("auto", ROOT_NO_CGROUP)) == (
        "process limit: RLIMIT_NPROC, commands run as uid 65534 (nobody) through setpriv "
        "(running as root, no writable pids cgroup)"
    )


def test_capabilities_are_read_from_capeff() -> None:
    root = "Name:\tpython3\nCapInh:\t0000000000000000\nCapEff:\t000001fffeffffff\n"
    assert has_capabilities(root, 6, 7)
    assert not has_capabilities("CapEff:\t0000000000000040\n", 6, 7)  # CAP_SETGID only
    assert not has_capabilities("Name:\tx\n", 7)


def test_setpriv_drops_to_nobody_without_groups_or_new_privileges() -> None:
    prefix = process_limit.setpriv_prefix()
    assert prefix[0] == "setpriv" and prefix[-1] == "--"
    assert {"--reuid=65534", "--regid=65534", "--clear-groups", "--no-new-privs"} <= set(prefix)


def test_only_autoloops_own_temporary_directories_have_a_holder(tmp_path: Path) -> None:
    holder = tempdirs.make("autoloop-eval-")
    try:
        (holder / "repo/code").mkdir(parents=True)
        assert holder_of(holder / "repo/code") == holder
        assert holder_of(tmp_path) is None
        fake = tmp_path / "autoloop-fake"
        fake.mkdir()
        assert holder_of(fake) is None  # named like one, but not marked with an owner
    finally:
        shutil.rmtree(holder)


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a tree to uid 65534 needs root (the case it exists for)")
def test_hand_over_gives_the_copy_to_nobody_and_leaves_everything_else(tmp_path: Path) -> None:
    holder = tempdirs.make("autoloop-eval-")
    outside = tmp_path / "operator-script.sh"
    outside.write_text("true\n")
    try:
        tree = holder / "repo"
        (tree / "code").mkdir(parents=True)
        (tree / "code/value.py").write_text("x = 1\n")
        os.symlink("/etc/passwd", tree / "link")
        os.symlink(tmp_path, tree / "code/folder-link")  # never walked into
        hand_over([tree, outside])
        owners = {(p.lstat().st_uid, p.lstat().st_gid) for p in [tree, *tree.rglob("*")]}
        assert owners == {(NOBODY, NOBODY)}
        assert Path("/etc/passwd").stat().st_uid == 0  # the link itself, never its target
        assert stat.S_IMODE(holder.stat().st_mode) == 0o711
        assert holder.stat().st_uid == 0 and (holder / tempdirs.OWNER_FILE).stat().st_uid == 0
        assert outside.stat().st_uid == 0 and tmp_path.stat().st_uid == 0
    finally:
        shutil.rmtree(holder)


def test_processes_are_counted_for_one_uid_or_all() -> None:
    everyone = process_limit.processes_of(None)
    mine = process_limit.processes_of(os.getuid())
    assert everyone >= mine >= 1  # this process at least
