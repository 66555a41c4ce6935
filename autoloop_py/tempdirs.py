"""Temporary directories of a run: each marked with the process that owns it, and those of dead runs swept away."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

log = logging.getLogger(__name__)

PREFIX = "autoloop-"
# Inside each directory: `<pid> <process start time> <host>`; older runs wrote the pid alone.
OWNER_FILE = "autoloop-owner"


@dataclass(frozen=True)
class Owner:
    """The process a temporary directory belongs to.

    Attributes:
      pid: its process id.
      started: its start time in clock ticks since boot (Linux), so a reused pid is not taken for it.
      host: the host it ran on; a directory shared with another host is never judged.
    """

    pid: int
    started: str | None = None
    host: str | None = None

    def render(self) -> str:
        """Returns the owner file's text."""
        return " ".join([str(self.pid), self.started or "-", self.host or "-"]) + "\n"


def current_owner() -> Owner:
    """Returns this process as an owner."""
    return Owner(os.getpid(), _start_time(os.getpid()), socket.gethostname())


def read_owner(text: str) -> Owner | None:
    """Returns the owner an owner file names (None when unreadable)."""
    parts = text.split()
    if not parts or not parts[0].isdigit():
        return None
    started, host = (parts + ["-", "-"])[1:3]
    return Owner(int(parts[0]), None if started == "-" else started, None if host == "-" else host)


def make(prefix: str) -> Path:
    """Creates a temporary directory named `<prefix>…` (prefix starting with `autoloop-`) marked with its owner."""
    if not prefix.startswith(PREFIX):
        raise ValueError(f"temporary directories of a run are named {PREFIX}*, not {prefix}*")
    path = Path(tempfile.mkdtemp(prefix=prefix))
    (path / OWNER_FILE).write_text(current_owner().render(), encoding="utf-8")
    return path


@contextmanager
def temporary(prefix: str) -> Iterator[Path]:
    """Yields a marked temporary directory (see make) and removes it afterwards."""
    path = make(prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def dead_owner(owner_file: Path) -> int | None:
    """Returns the pid of the owner file's process when it surely no longer runs (None when alive or unknown)."""
    try:
        owner = read_owner(owner_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    if owner is None or owner.pid <= 0 or (owner.host is not None and owner.host != socket.gethostname()):
        return None
    if pid_is_dead(owner.pid):
        return owner.pid
    if owner.started is not None and _start_time(owner.pid) not in (None, owner.started):
        return owner.pid  # the pid now names another process: the owner died and its pid was reused
    return None


def sweep(base: Path | None = None, before_remove: Callable[[int], object] | None = None) -> list[Path]:
    """Removes this user's `autoloop-*` directories under base (the temp directory) whose owner is dead.

    before_remove(pid) runs once per dead owner before its directories go (e.g. to kill what it left running).
    """
    root = Path(base) if base is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    handled: set[int] = set()
    for path in sorted(_candidates(root)):
        pid = dead_owner(path / OWNER_FILE)
        if pid is None:
            continue
        if before_remove is not None and pid not in handled:
            before_remove(pid)
        handled.add(pid)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    if removed:
        log.info("removed %d temporary folder(s) left by interrupted runs", len(removed))
    return removed


def _candidates(root: Path) -> Iterator[Path]:
    """Yields the real (not linked) `autoloop-*` directories under root that this user owns."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(PREFIX) or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            mine = entry.stat(follow_symlinks=False).st_uid == os.getuid()
        except OSError:
            continue
        if mine:
            yield Path(entry.path)


def _start_time(pid: int) -> str | None:
    """Returns the process's start time (field 22 of /proc/<pid>/stat), or None where there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else None


def pid_is_dead(pid: int) -> bool:
    """Returns whether no process has this id (False when unsure)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
