"""A pids cgroup per command when the runner is root: Linux never applies RLIMIT_NPROC to uid 0.

As any other user, `prlimit --nproc` bounds the processes a command may start. As root (CI containers,
most `docker run`s) that limit is ignored, so each command gets a cgroup of its own whose `pids.max`
the kernel enforces for every user: a fork past it fails with EAGAIN. The command enters the group
itself (a `sh` wrapper writes its pid to `cgroup.procs`, then execs), so everything it starts is counted,
and whatever is still in the group when the command is over is killed before the group is removed.
Both cgroup v1 (a `pids` hierarchy) and v2 (a writable cgroup with the pids controller enabled for its
children) are used; process_limit.py decides when (and what holds the limit without either).
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from autoloop_py.sandbox.process import is_marked, kill_until_gone, marked_pids

logger = logging.getLogger(__name__)

CGROUP_MOUNT = Path("/sys/fs/cgroup")
PREFIX = "autoloop-"
# After PREFIX in the name of a memory group (v1), before the pid.
MEMORY_PART = "mem-"
# `$0` is the cgroup.procs file, the rest the command: the shell moves itself into the group, then execs.
_ENTER = 'echo $$ > "$0" && exec "$@"'
_KILL_ROUNDS = 60
_FIRST_WAIT, _LAST_WAIT = 0.001, 0.02
# An empty group younger than this may be one another runner made and has not entered yet (its command starts).
STALE_AFTER = 600.0


@dataclass(frozen=True)
class PidsGroup:
    """One command's pids cgroup.

    Attributes:
      path: the cgroup's directory.
    """

    path: Path

    def wrap(self, argv: list[str]) -> list[str]:
        """Returns argv started inside this group."""
        return ["sh", "-c", _ENTER, str(self.path / "cgroup.procs"), *argv]

    def members(self) -> list[int]:
        """Returns the pids in the group."""
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(line) for line in text.split() if line.isdigit()]

    def escaped(self, name: str, value: str) -> str:
        """Returns why the command broke out ('' when it did not): its marked processes (`name=value` in their
        environment) that are alive outside this group, having moved themselves out of the pids limit."""
        # Each process's own cgroup is read, not a listing of the group taken before the scan (a fork bomb's
        # children born between the two would count as escaped), and then its mark again: an exiting process is
        # shown in the root cgroup, but only after it released the memory its mark is read from.
        outside = [pid for pid in marked_pids(name, value) if not self.holds(pid) and is_marked(pid, name, value)]
        if not outside:
            return ""
        return (f"{len(outside)} of its processes left its pids cgroup {self.path} (moved into another cgroup, out "
                f"of the process limit); they were killed")

    def holds(self, pid: int) -> bool:
        """Whether the process is in this group or a group under it (True when it is gone: nothing of it runs)."""
        try:
            text = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            return True
        return any(self.path.name in line.rpartition(":")[2].split("/") for line in text.splitlines())

    def kill_all(self) -> int:
        """Kills every process in the group, again until none is left (a fork may race a kill); returns the count."""
        # Short waits at first: most groups are empty once their killed members are reaped.
        return kill_until_gone(self.members, _KILL_ROUNDS, _FIRST_WAIT, _LAST_WAIT)


def own_cgroup(hierarchy: str, proc_cgroup: str) -> str | None:
    """Returns this process's path in a hierarchy, from /proc/self/cgroup's text ('' for v2's `0::`)."""
    for line in proc_cgroup.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if (hierarchy == "" and number == "0" and controllers == "") or hierarchy in controllers.split(","):
            return path
    return None


def pids_parent(mount: Path = CGROUP_MOUNT, proc_cgroup: str | None = None) -> Path | None:
    """Returns a writable cgroup directory whose new children get a `pids.max`, or None when there is none."""
    text = proc_cgroup if proc_cgroup is not None else read_file("/proc/self/cgroup")
    v1_own = own_cgroup("pids", text)
    candidates: list[Path] = []
    if (mount / "pids" / "cgroup.procs").is_file():
        # In a container the path /proc shows may not exist under the mount, whose root is its own group.
        candidates += [mount / "pids" / (v1_own or "").lstrip("/"), mount / "pids"]
    v2_own = own_cgroup("", text)
    for unified in (mount, mount / "unified"):
        if (unified / "cgroup.controllers").is_file():
            candidates += [unified / (v2_own or "").lstrip("/"), unified]
    return next((parent for parent in candidates if _usable(parent)), None)


@contextmanager
def pids_limit(max_pids: int, *, root_only: bool = True) -> Iterator[PidsGroup | None]:
    """Yields a fresh pids cgroup limited to max_pids, or None when none is needed or can be made.

    root_only: make one only when this process runs as root (for others RLIMIT_NPROC holds).
    """
    if root_only and os.geteuid() != 0:
        yield None
        return
    parent = pids_parent()
    if parent is None:
        logger.warning("running as root without a writable pids cgroup: the process limit is not enforced")
        yield None
        return
    remove_stale(parent)
    name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    refused = "the process limit is not enforced"
    with limited_group(parent, name, "pids.max", max_pids, refused, logging.WARNING) as group:
        yield group


@contextmanager
def limited_group(
    parent: Path, name: str, limit_file: str, limit: int, without: str, level: int = logging.DEBUG
) -> Iterator[PidsGroup | None]:
    """Yields a new cgroup `parent/name` with `limit_file` set to limit (None when the kernel refuses either).

    without: what a refusal means, logged at `level`. Whatever is still in the group afterwards is killed,
    and the group removed.
    """
    path = parent / name
    try:
        path.mkdir()
        (path / limit_file).write_text(f"{limit}\n")
    except OSError as err:
        logger.log(level, "could not make the cgroup %s (%s): %s", path, err, without)
        remove_group(path)
        yield None
        return
    group = PidsGroup(path)
    try:
        yield group
    finally:
        group.kill_all()
        remove_group(path)


def _usable(parent: Path) -> bool:
    """Whether children made under parent get a pids.max (v1 always; v2 when the controller is delegated)."""
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        return False
    if (parent / "pids.max").is_file() or parent.name == "pids" or (parent / "tasks").is_file():
        return True  # v1: every group of the pids hierarchy has the controller
    try:
        return "pids" in (parent / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


def remove_stale(parent: Path, older_than: float | None = None) -> list[Path]:
    """Removes the groups a killed run left under parent (ours by name: `autoloop-<pid>-…` for the pids groups,
    `autoloop-mem-<pid>-…` for the memory ones); returns those removed.

    A group is stale only when its own files say nothing runs in it (see idle) and it was made more than
    `older_than` seconds ago (default STALE_AFTER). Its owner's pid says little: runners in other PID namespaces
    (containers on one machine) share the hierarchy, and their pids mean other processes here, so it only spares a
    group whose owner runs here. Nothing is killed: a process still in a group is another runner's, or a dead
    one's that its sandbox (`--die-with-parent`) ends.
    """
    try:
        found = [p for p in parent.iterdir() if p.name.startswith(PREFIX) and p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    removed = []
    now, older_than = time.time(), STALE_AFTER if older_than is None else older_than
    for path in found:
        owner = owner_pid(path.name)
        if owner is None or Path(f"/proc/{owner}").exists() or not idle(path) or now - _made(path) < older_than:
            continue
        try:
            path.rmdir()  # the kernel refuses a group that holds a process, whichever namespace it runs in
        except FileNotFoundError:
            continue
        except OSError as err:
            logger.debug("left the cgroup %s: %s", path, err)
            continue
        removed.append(path)
    return removed


def idle(path: Path) -> bool:
    """Whether nothing runs in a group, by the group's own counts (False when they cannot be read).

    cgroup.procs alone cannot say: v1 lists only the processes of the reader's PID namespace, so a group
    of a runner in another container looks empty there. pids.current and v2's `populated` count every process.
    """
    try:
        if (path / "pids.current").is_file() and int((path / "pids.current").read_text().strip() or "0") > 0:
            return False
        if (path / "cgroup.events").is_file() and "populated 0" not in (path / "cgroup.events").read_text():
            return False
        return not (path / "cgroup.procs").read_text().split()
    except (OSError, ValueError):
        return False


def _made(path: Path) -> float:
    """Returns when a group was made (a cgroup directory's mtime is its creation; now when it is gone)."""
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()


def owner_pid(name: str) -> int | None:
    """Returns the runner's pid a group's name holds (`autoloop-<pid>-<hex>`, `autoloop-mem-<pid>-<hex>`), else None."""
    rest = name[len(PREFIX):] if name.startswith(PREFIX) else ""
    rest = rest[len(MEMORY_PART):] if rest.startswith(MEMORY_PART) else rest
    pid, sep, token = rest.partition("-")
    return int(pid) if pid.isdigit() and sep and token else None


def remove_group(path: Path) -> None:
    delay = _FIRST_WAIT
    for _ in range(_KILL_ROUNDS):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # still busy: the last killed processes are being reaped
            time.sleep(delay)
            delay = min(delay * 2, _LAST_WAIT)
    logger.warning("could not remove the cgroup %s", path)


def read_file(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""
