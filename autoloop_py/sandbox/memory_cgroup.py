"""A memory cgroup per command, where one is writable: `max-memory` as resident memory, not only address space.

RLIMIT_AS bounds each process's address space, which numpy and pandas reserve far beyond what they use, and not
what a command's processes hold together. Where the runner may make memory cgroups (a v1 `memory` hierarchy, or a
v2 group with the memory controller enabled for its children, as for the pids group) the command also gets
`memory.limit_in_bytes` (v1) or `memory.max` (v2): the kernel then kills the command's processes that would
hold more, and the runner reads the group's OOM-kill count to say that the cap did it.
"""

from __future__ import annotations

import logging
import os
import secrets
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from autoloop_py.sandbox.cgroup import (
    CGROUP_MOUNT, MEMORY_PART, PREFIX, PidsGroup, limited_group, own_cgroup, read_file, remove_stale,
)

logger = logging.getLogger(__name__)

# What a process says when an allocation is refused (Python, C, C++, Node): RLIMIT_AS at work.
REFUSED_ALLOCATION = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")


@dataclass(frozen=True)
class MemoryGroup:
    """One command's memory cap.

    Attributes:
        group: the cgroup holding it (v1: a group of the memory hierarchy; v2: the command's pids group).
        limit: the cap in bytes.
        separate: the command must enter `group` itself (v1); False when it is the pids group it enters anyway.
    """

    group: PidsGroup
    limit: int
    separate: bool

    def wrap(self, argv: list[str]) -> list[str]:
        """Returns argv started inside the group (unchanged when the pids group is the same group)."""
        return self.group.wrap(argv) if self.separate else argv

    def oom_kills(self) -> int:
        """Returns how many processes the kernel killed for the cap (v1: memory.oom_control, else failcnt)."""
        path = self.group.path
        for name in ("memory.events", "memory.oom_control"):
            for line in read_file(str(path / name)).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    return int(value)
        failed = read_file(str(path / "memory.failcnt")).strip()
        return 1 if failed.isdigit() and int(failed) > 0 else 0


def memory_parent(mount: Path = CGROUP_MOUNT, proc_cgroup: str | None = None) -> Path | None:
    """Returns a writable v1 memory-hierarchy group whose children get a `memory.limit_in_bytes`, or None."""
    own = own_cgroup("memory", proc_cgroup if proc_cgroup is not None else read_file("/proc/self/cgroup"))
    if own is None:
        return None
    for candidate in (mount / "memory" / own.lstrip("/"), mount / "memory"):
        if candidate.is_dir() and os.access(candidate, os.W_OK) and (candidate / "memory.limit_in_bytes").is_file():
            return candidate
    return None


@contextmanager
def memory_limit(limit: int | None, pids_group: PidsGroup | None) -> Iterator[MemoryGroup | None]:
    """Yields the command's memory cap, or None where no memory cgroup can hold it (RLIMIT_AS then holds alone).

    pids_group: the command's pids group; on cgroup v2 the cap is set there (a process is in one group only).
    """
    if limit is None:
        yield None
        return
    if pids_group is not None and (pids_group.path / "memory.max").is_file():
        try:
            (pids_group.path / "memory.max").write_text(f"{limit}\n")
            if (pids_group.path / "memory.swap.max").is_file():
                (pids_group.path / "memory.swap.max").write_text("0\n")  # the cap is not to be dodged into swap
        except OSError as err:
            logger.debug("no memory cap in %s (%s): RLIMIT_AS holds alone", pids_group.path, err)
            yield None
            return
        yield MemoryGroup(pids_group, limit, separate=False)
        return
    parent = memory_parent()
    if parent is None:
        yield None
        return
    remove_stale(parent)  # the empty groups a killed runner left
    name = f"{PREFIX}{MEMORY_PART}{os.getpid()}-{secrets.token_hex(4)}"
    with limited_group(parent, name, "memory.limit_in_bytes", limit, "RLIMIT_AS holds alone") as group:
        yield None if group is None else MemoryGroup(group, limit, separate=True)
