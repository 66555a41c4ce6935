"""The memory cap's cgroup: where it is made, and how the runner tells that the kernel killed for it."""

from __future__ import annotations

from pathlib import Path

from autoloop_py.sandbox.cgroup import PidsGroup
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
