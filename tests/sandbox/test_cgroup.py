"""Tests for autoloop_py.sandbox.cgroup: the pids cgroup that bounds a root runner's commands."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

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


@pytest.fixture
def test_parent() -> Iterator[Path]:
    """Yields a pids group of this test's own (not named like a runner's), under which its groups are made."""
    parent = pids_parent()
    assert parent is not None
    own = parent / f"autoloop-test-{secrets.token_hex(4)}"
    own.mkdir()
    try:
        yield own
    finally:
        for group in own.iterdir():
            if group.is_dir():
                cgroup.PidsGroup(group).kill_all()
                cgroup.remove_group(group)
        cgroup.remove_group(own)


def _dead_pid() -> int:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return dead.pid


def _entered(group: Path, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10  # a bound for a broken test, not a measure
    while (group / "pids.current").read_text().strip() == "0" and time.monotonic() < deadline:
        assert process.poll() is None
        time.sleep(0.01)


@needs_group
def test_a_stale_group_is_removed_once_empty_and_old_and_its_processes_are_never_killed(test_parent: Path) -> None:
    owner = _dead_pid()  # the owner's pid means nothing here: it may be another PID namespace's
    empty, busy = test_parent / f"{cgroup.PREFIX}{owner}-feedbeef", test_parent / f"{cgroup.PREFIX}{owner}-0ddba11"
    mine = test_parent / f"{cgroup.PREFIX}{os.getpid()}-c0ffee00"  # a runner of this namespace that still runs
    for path in (empty, busy, mine):
        path.mkdir()
    sleeper = subprocess.Popen(["sh", "-c", f'echo $$ > "{busy}/cgroup.procs" && exec sleep 120'])
    try:
        _entered(busy, sleeper)
        assert cgroup.remove_stale(test_parent) == []  # young: maybe made by a runner whose command enters next
        assert cgroup.remove_stale(test_parent, older_than=0) == [empty]
        assert busy.exists() and mine.exists() and sleeper.poll() is None
        sleeper.kill()
        sleeper.wait()
        deadline = time.monotonic() + 10
        while busy.exists() and time.monotonic() < deadline:  # the kernel uncounts a reaped process soon after
            cgroup.remove_stale(test_parent, older_than=0)
            time.sleep(0.01)
        assert not busy.exists() and mine.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


# Runner A: what it sees of runner B's group, then its cleanup (as a runner starting an evaluation does).
RUNNER_A = """
import json, sys
from pathlib import Path
from autoloop_py.sandbox import cgroup
parent, group, owner = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
seen = {"owner_runs": Path(f"/proc/{owner}").exists()}
removed = cgroup.remove_stale(parent, older_than=0)
print(json.dumps({**seen, "removed": [str(p) for p in removed]}))
"""


@needs_group
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare for the PID namespaces")
@pytest.mark.parametrize("runner_a", ["a sibling PID namespace", "the parent PID namespace"])
def test_a_runner_of_another_pid_namespace_never_removes_or_kills_a_group_whose_processes_run(
    test_parent: Path, runner_a: str
) -> None:
    """Two runners share the hierarchy: B's evaluation runs in its group, in a PID namespace of its own, while A
    starts and cleans up. B's group is named after B's pid in B's namespace, which does not run in A's: the
    pid-based check killed B's evaluations (from the parent namespace, which sees them) and removed its groups."""
    owner = _dead_pid()
    group = test_parent / f"{cgroup.PREFIX}{owner}-feedbeef"
    runner_b = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
                                 'mkdir "$0" && echo $$ > "$0/cgroup.procs" && exec sleep 120', str(group)])
    try:
        deadline = time.monotonic() + 10
        while not group.is_dir() and time.monotonic() < deadline:
            time.sleep(0.01)
        _entered(group, runner_b)
        prefix = ["unshare", "--pid", "--fork", "--mount-proc"] if runner_a.startswith("a sibling") else []
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        seen = subprocess.run([*prefix, sys.executable, "-c", RUNNER_A, str(test_parent), str(group), str(owner)],
                              env=env, capture_output=True, text=True, timeout=60, check=True)
        assert json.loads(seen.stdout) == {"owner_runs": False, "removed": []}
        assert group.is_dir() and (group / "pids.current").read_text().strip() == "1"
        assert runner_b.poll() is None  # B's evaluation still runs
    finally:
        runner_b.kill()
        runner_b.wait()


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
