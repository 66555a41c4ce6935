"""Tests for autoloop_py.sandbox.cgroup: the pids cgroup that bounds a root runner's commands."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoloop_py.sandbox import cgroup
from autoloop_py.sandbox.cgroup import own_cgroup, pids_limit, pids_parent

V1 = "12:pids:/docker/abc\n4:memory:/docker/abc\n0::/\n"
V2 = "0::/user.slice/runner.scope\n"


def test_own_cgroup_reads_v1_and_v2_lines() -> None:
    assert own_cgroup("pids", V1) == "/docker/abc"
    assert own_cgroup("", V1) == "/"
    assert own_cgroup("pids", V2) is None
    assert own_cgroup("", V2) == "/user.slice/runner.scope"


def test_a_v1_pids_hierarchy_is_used_and_a_container_falls_back_to_its_root(tmp_path: Path) -> None:
    (tmp_path / "pids").mkdir()
    (tmp_path / "pids/cgroup.procs").write_text("")
    (tmp_path / "pids/tasks").write_text("")
    # /proc names /docker/abc, which a container's mount does not show: its root is the container's group.
    assert pids_parent(tmp_path, V1) == tmp_path / "pids"
    (tmp_path / "pids/docker/abc").mkdir(parents=True)
    (tmp_path / "pids/docker/abc/pids.max").write_text("max\n")
    assert pids_parent(tmp_path, V1) == tmp_path / "pids/docker/abc"


def test_v2_needs_the_pids_controller_delegated_to_children(tmp_path: Path) -> None:
    own = tmp_path / "user.slice/runner.scope"
    own.mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.subtree_control").write_text("cpu memory\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    assert pids_parent(tmp_path, V2) is None
    (own / "cgroup.subtree_control").write_text("cpu memory pids\n")
    assert pids_parent(tmp_path, V2) == own


def test_no_cgroup_mount_means_no_group(tmp_path: Path) -> None:
    assert pids_parent(tmp_path, V1) is None


def test_a_non_root_runner_needs_no_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cgroup.os, "geteuid", lambda: 1000)
    with pids_limit(10) as group:
        assert group is None


def _running(pid: int, wait: float = 5.0) -> bool:
    """Returns whether pid is still a live (non-zombie) process after up to `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in ("Z", "X") or time.monotonic() > deadline:
            return state not in ("Z", "X")
        time.sleep(0.02)


STORM = """\
import os, time
children = 0
try:
    for _ in range(2000):
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        children += 1
except OSError as err:
    print(f"blocked after {children}: {err.strerror}", flush=True)
"""

needs_group = pytest.mark.skipif(
    os.geteuid() != 0 or pids_parent() is None, reason="needs root and a writable pids cgroup (this is root's case)"
)


@needs_group
def test_a_fork_storm_stops_at_the_limit_and_nothing_of_it_survives(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pids_limit(32) as group:
        assert group is not None
        with out.open("w") as handle:
            subprocess.run(group.wrap([sys.executable, "-c", STORM]), stdout=handle, stderr=subprocess.STDOUT, timeout=60)
        stormers = group.members()
        path = group.path
    assert out.read_text().startswith("blocked after 3")  # 31 children plus the storm itself
    assert stormers and not [pid for pid in stormers if _running(pid)]
    assert not path.exists()


@needs_group
def test_the_group_a_killed_runner_left_is_emptied_and_removed_by_the_next(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs: the owner of the stale group
    parent = pids_parent()
    assert parent is not None
    stale = parent / f"{cgroup.PREFIX}{dead.pid}-feedbeef"
    stale.mkdir()
    sleeper = subprocess.Popen(["sh", "-c", f'echo $$ > "{stale}/cgroup.procs" && exec sleep 120'])
    try:
        deadline = time.monotonic() + 10
        while str(sleeper.pid) not in (stale / "cgroup.procs").read_text().split() and time.monotonic() < deadline:
            time.sleep(0.01)
        with pids_limit(8):
            pass
        assert sleeper.wait(timeout=10) == -9
        assert not stale.exists()
    finally:
        sleeper.kill()
        if stale.exists():
            stale.rmdir()


@needs_group
def test_only_a_process_that_moved_out_of_the_group_counts_as_escaped() -> None:
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "AUTOLOOP_TEST_MARK": mark}
    with pids_limit(32) as group:
        assert group is not None
        parent = group.path.parent / "cgroup.procs"
        stays = subprocess.Popen(group.wrap(["sleep", "60"]), env=env)
        leaves = subprocess.Popen(group.wrap(["sh", "-c", f'echo $$ > "{parent}" && exec sleep 60']), env=env)
        try:
            deadline = time.monotonic() + 10  # a bound for a broken test, not a measure
            while not all(_sleeping(p.pid) for p in (stays, leaves)) and time.monotonic() < deadline:
                time.sleep(0.01)  # each has moved where it goes once it runs `sleep` (it starts in the runner's group)
            assert stays.pid in group.members() and leaves.pid not in group.members()
            assert group.escaped("AUTOLOOP_TEST_MARK", mark).startswith("1 of its processes left its pids cgroup")
            leaves.kill()
            leaves.wait()
            assert group.escaped("AUTOLOOP_TEST_MARK", mark) == ""  # a gone process escaped nothing
        finally:
            for process in (stays, leaves):
                process.kill()
                process.wait()


def _sleeping(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0")
    except OSError:
        return False
