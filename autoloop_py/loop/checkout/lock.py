"""Program locks: no two runs of one program in the same repository evaluate at the same time."""

from __future__ import annotations

import errno
import fcntl
import functools
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from autoloop_py.errors import AutoloopError
from autoloop_py.git.command import common_dir, open_repo

log = logging.getLogger(__name__)

DEFAULT_WAIT = 600.0
# File times lag the clock by up to a timer tick: a lock taken just after `since` must not look older.
_CLOCK_SLACK = 1.0


@dataclass(frozen=True)
class HeldLock:
    """A program lock being held.

    Attributes:
      path: the lock file.
      waited: whether another run held it when it was asked for (so the remote may have moved meanwhile).
      previous: the pid of the process that took it last before (None: unknown), e.g. this one's own.
    """

    path: Path
    waited: bool
    previous: int | None = None


@contextmanager
def program_lock(root: Path, program: str, wait: float = DEFAULT_WAIT, poll: float = 0.2) -> Iterator[Path]:
    """Holds an exclusive lock on the program for the block; waits up to `wait` seconds for another run to finish.

    The lock is an flock on a file under the repository's git directory, so it is shared by every
    worktree of the repository and released by the kernel if the process dies.
    """
    with held_program_lock(root, program, wait, poll) as held:
        yield held.path


@contextmanager
def held_program_lock(root: Path, program: str, wait: float = DEFAULT_WAIT, poll: float = 0.2) -> Iterator[HeldLock]:
    """program_lock, telling whether it had to wait for another run."""
    path = _lock_path(root, program)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        waited = _acquire(handle, path, program, wait, poll)
        previous = os.pread(handle, 32, 0).strip()
        os.ftruncate(handle, 0)
        os.write(handle, f"{os.getpid()}\n".encode())
        yield HeldLock(path, waited, int(previous) if previous.isdigit() else None)
    finally:
        os.close(handle)  # closing the descriptor releases the flock


def _acquire(handle: int, path: Path, program: str, wait: float, poll: float) -> bool:
    """Takes the flock; returns whether it had to wait for it."""
    deadline = time.monotonic() + wait
    announced = False
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return announced
        except OSError as err:
            if err.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            raise AutoloopError(
                f"another autoloop run of '{program}' holds {path} for more than {wait:g} s; "
                "wait for it to finish or stop it"
            )
        if not announced:
            log.warning("waiting for another run of '%s' to finish (%s)", program, path)
            announced = True
        time.sleep(poll)


def others_running(root: Path, program: str, since: float | None = None) -> frozenset[str]:
    """Returns the programs (but `program`) whose lock another run of this clone holds now or took after `since`
    (a time.time(); a run writes its pid into the lock file when it takes it).

    Each lock file is probed with a shared, non-blocking flock of its own (released at once), which fails while
    a run holds it; it never waits.
    """
    folder = _lock_path(root, program).parent
    held = set()
    for path in sorted(folder.glob("*.lock")) if folder.is_dir() else ():
        if path.stem == program:
            continue
        try:
            handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if since is not None and os.fstat(handle).st_mtime >= since - _CLOCK_SLACK:
                held.add(path.stem)
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno in (errno.EAGAIN, errno.EACCES):
                held.add(path.stem)
        finally:
            os.close(handle)  # closing the descriptor releases the probe's flock
    return frozenset(held)


# The lock a person's write of the memory branch holds (`autoloop edit`, `pause`, `resume`): no program has this
# name, and a run whose candidate code was running meanwhile takes the moved memory branch for that person's.
HAND_EDIT = "@hand-edit"


@contextmanager
def hand_edit_lock(root: Path) -> Iterator[Path]:
    """Holds the hand-edit lock while a person's change is written to the memory branch."""
    with program_lock(root, HAND_EDIT) as path:
        yield path


def taken_by(root: Path, program: str, pid: int, since: float) -> bool:
    """Returns whether process `pid` holds the program's lock, or took it after `since` (a time.time()).

    A slot of a run without a barrier asks it of the run's own process, which records its siblings meanwhile.
    """
    path = _lock_path(root, program)
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        if os.read(handle, 32).strip() != str(pid).encode():
            return False
        if os.fstat(handle).st_mtime >= since - _CLOCK_SLACK:
            return True
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError as err:
        return err.errno in (errno.EAGAIN, errno.EACCES)
    finally:
        os.close(handle)


def _lock_path(root: Path, program: str) -> Path:
    return _locks_folder(Path(root)) / f"{program}.lock"


# An iteration asks for its locks several times (taking one, probing the others around each step that runs candidate
# code); opening the repository to find its git directory took more than the probes.
@functools.lru_cache(maxsize=8)
def _locks_folder(root: Path) -> Path:
    with open_repo(root) as repo:
        common = common_dir(repo)
    # A folder of their own: `locks/worktrees.lock` is the worktree lock, and a program once named
    # `worktrees` locked it first, then waited for itself in `git worktree add`.
    return common / "autoloop" / "locks" / "programs"
