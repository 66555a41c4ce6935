"""The memory cap's cgroup: where it is made, and how the runner tells that the kernel killed for it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoloop_py.sandbox import cgroup
from autoloop_py.sandbox.cgroup import PidsGroup, owner_pid, remove_group
from autoloop_py.sandbox.memory_cgroup import MemoryGroup, memory_limit, memory_parent

PROC = "4:memory:/process_api/abc\n8:pids:/\n0::/\n"


def test_the_v1_memory_group_of_this_process_is_the_parent(tmp_path: Path) -> None:
    own = tmp_path / "memory/process_api/abc"
    own.mkdir(parents=True)
    assert memory_parent(tmp_path, PROC) is None  # not a memory hierarchy: no memory.limit_in_bytes
    (own / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert memory_parent(tmp_path, PROC) == own
    assert memory_parent(tmp_path, "0::/\n") is None  # v2 only: the cap goes into the pids group


def test_oom_kills_are_read_from_v2_events_v1_oom_control_or_failcnt(tmp_path: Path) -> None:
    group = MemoryGroup(PidsGroup(tmp_path), 1 << 28, separate=True)
    assert group.oom_kills() == 0
    (tmp_path / "memory.failcnt").write_text("3\n")
    assert group.oom_kills() == 1
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert group.oom_kills() == 2
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n")
    assert group.oom_kills() == 1


def test_on_v2_the_cap_is_written_into_the_commands_pids_group(tmp_path: Path) -> None:
    (tmp_path / "memory.max").write_text("max\n")
    (tmp_path / "memory.swap.max").write_text("max\n")
    with memory_limit(1 << 28, PidsGroup(tmp_path)) as memory:
        assert memory is not None and not memory.separate and memory.wrap(["true"]) == ["true"]
    assert (tmp_path / "memory.max").read_text() == f"{1 << 28}\n" and (tmp_path / "memory.swap.max").read_text() == "0\n"
    with memory_limit(None, PidsGroup(tmp_path)) as memory:
        assert memory is None


def test_the_owner_of_a_group_is_read_from_its_name() -> None:
    assert owner_pid("autoloop-123-feedbeef") == 123
    assert owner_pid("autoloop-mem-123-feedbeef") == 123
    for name in ("autoloop-mem-x-1", "autoloop-123", "other-123-ab", "autoloop-ci", "autoloop-mem-"):
        assert owner_pid(name) is None, name


@pytest.mark.skipif(os.geteuid() != 0 or memory_parent() is None, reason="needs root and a writable v1 memory cgroup")
def test_the_empty_memory_groups_a_killed_runner_left_are_removed_at_the_next_start(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cgroup, "STALE_AFTER", 0.0)  # these groups were made just now: old enough at once
    parent = memory_parent()
    assert parent is not None
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs: the owner of the stale groups
    empty, busy = parent / f"autoloop-mem-{dead.pid}-feedbeef", parent / f"autoloop-mem-{dead.pid}-0ddba11"
    alive = parent / f"autoloop-mem-{os.getpid()}-c0ffee00"  # a live runner's: never touched
    for path in (empty, busy, alive):
        path.mkdir()
    sleeper = subprocess.Popen(["sh", "-c", f'echo $$ > "{busy}/cgroup.procs" && exec sleep 120'])
    try:
        deadline = time.monotonic() + 10
        while str(sleeper.pid) not in (busy / "cgroup.procs").read_text().split() and time.monotonic() < deadline:
            time.sleep(0.01)
        with memory_limit(1 << 28, None) as memory:
            assert memory is not None
        assert not empty.exists()
        assert busy.exists() and sleeper.poll() is None  # a process still in it: left, and not killed
        assert alive.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
        for path in (empty, busy, alive):
            remove_group(path)
