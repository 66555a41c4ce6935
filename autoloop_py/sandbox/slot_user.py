"""A uid of its own for each command of a root runner without bubblewrap (`isolation: none`).

As root and without namespaces, an evaluation could write its pid into any cgroup's `cgroup.procs` (leaving its
pids and memory caps), and read or rewrite the copy a parallel slot evaluates. So a root runner runs each such
command as an unprivileged uid of its own, allocated from a high range for as long as the command runs:

- its copy (and the folders it may write) are chowned to that uid, the top folders 0700: no other slot's uid can
  enter them; the holder above them stays root's (0711), so nothing of the runner's can be replaced;
- cgroup files are root's: the write that would move it out of its cgroup is refused;
- the user's checkout is root's: it can read what is world-readable, write nothing that is not world-writable;
- HOME and TMPDIR are a private folder beside the copy, removed with every process of the uid when it ends.

A uid is held by an exclusive `flock` on `/run/autoloop-slot-users/<uid>` (root's, 0700; /tmp without /run): runners
(the slots of a tick are separate processes) never share one, and a killed runner's lock goes with it. A uid still
running a process (a killed runner's stray) is skipped. `AUTOLOOP_SLOT_USER=off` runs commands as root again.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import stat
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from autoloop_py.errors import SandboxError
from autoloop_py.sandbox import process_limit
from autoloop_py.sandbox.process import kill_until_gone

logger = logging.getLogger(__name__)

ENV_VAR = "AUTOLOOP_SLOT_USER"
FIRST_UID = 1_500_000_000
UID_COUNT = 1 << 16
LOCK_FOLDER = "autoloop-slot-users"
# Where the lock folder lives: the first that exists and the runner may write, the same for every runner whatever
# its TMPDIR (runners that looked in different folders could hold the same uid).
LOCK_ROOTS = (Path("/run"), Path("/tmp"))
HOME_PREFIX = "slot-home-"
_TRIES = 256
_KILL_ROUNDS = 50
_KILL_WAIT = 0.01


@dataclass(frozen=True)
class SlotUser:
    """The uid one command runs as, and the private folder it gets.

    Attributes:
      uid: the uid (and gid) the command runs as.
      home: its HOME and TMPDIR, beside its copy, owned by it and 0700.
    """

    uid: int
    home: Path

    def prefix(self) -> list[str]:
        """Returns the argv prefix that runs a command as this uid, without groups and unable to regain privileges."""
        return process_limit.setpriv_prefix(self.uid)

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """Returns env with HOME and the temporary directory variables pointing at the private folder."""
        folder = str(self.home)
        return {**env, "HOME": folder, "TMPDIR": folder, "TMP": folder, "TEMP": folder}


def wanted(sandboxed: bool, environ: Mapping[str, str], facts: process_limit.Facts) -> str:
    """Returns why a command does not get a uid of its own ('' when it does): only root runners without bwrap need one.

    facts: this machine's (process_limit.facts for the command's directory).
    """
    if sandboxed or not facts.root:
        return "not needed"  # bwrap's namespaces, or the runner's own uid, hold it already
    if environ.get(ENV_VAR, "").strip().lower() in ("off", "0", "no", "false"):
        return f"{ENV_VAR}=off"
    return process_limit.why_no_setpriv(facts, needs_prlimit=False)


def hardlinks_protected(setting: Path = Path("/proc/sys/fs/protected_hardlinks")) -> bool:
    """Returns whether users cannot hard-link files they do not own (else a uid could link root's files into its copy
    for the runner to read back, as root could read them itself)."""
    try:
        return setting.read_text().strip() == "1"
    except OSError:
        return False


def exposed(paths: Sequence[Path]) -> list[str]:
    """Returns which of paths (the user's checkout, its `.git` and config) any user may write: not protected."""
    found = []
    for path in paths:
        try:
            mode = path.lstat().st_mode
        except OSError:
            continue
        if mode & stat.S_IWOTH and not stat.S_ISLNK(mode):
            found.append(str(path))
    return found


def closed_to_others(path: Path) -> Path | None:
    """Returns the first folder on the way to path (or path itself) a uid of its own cannot pass: one that is neither
    the owner nor in the group needs o+x on every folder, o+x on the file, and o+r too when it is a script."""
    for way in dict.fromkeys((path, path.resolve())):  # the folders of the link and of what it points to
        for folder in reversed(way.parents):
            try:
                if not folder.stat().st_mode & stat.S_IXOTH:
                    return folder
            except OSError:
                return folder
    try:
        mode = path.stat().st_mode
        with path.open("rb") as handle:
            script = handle.read(2) == b"#!"
    except OSError:
        return path
    needed = stat.S_IXOTH | (stat.S_IROTH if script else 0)
    return None if mode & needed == needed else path


def unreachable_python(search_path: str) -> str:
    """Returns why a uid of its own gets another `python3` than the runner does ('' when it gets the same): the first
    one on PATH is closed to other users (a pyenv or venv under a 0700 /root)."""
    first = shutil.which("python3", path=search_path)
    if first is None:
        return ""
    closed = closed_to_others(Path(first))
    if closed is None:
        return ""
    found = (shutil.which("python3", path=folder) for folder in search_path.split(os.pathsep) if folder)
    theirs = next((python for python in found if python and closed_to_others(Path(python)) is None), None)
    instead = f"they get {theirs} instead" if theirs else "they find no python3 at all"
    return (f"evaluations and agents run as a uid of their own, which cannot reach {first}, the first python3 on PATH "
            f"({closed} is closed to other users): {instead}; make it reachable (chmod o+rx) or set {ENV_VAR}=off")


@contextmanager
def slot_user(workdir: Path, writable: Sequence[Path], lock_root: Path | None = None) -> Iterator[SlotUser]:
    """Yields a fresh uid owning workdir and writable (each 0700), with a private home; afterwards every process
    of the uid is killed, its home removed and the uid released.

    lock_root: where the lock folder lives (None: the first of LOCK_ROOTS that exists and is writable).
    """
    holder = process_limit.holder_of(workdir)
    if holder is None:
        raise SandboxError(f"{workdir} is not one of autoloop's temporary copies: it cannot be given to another uid")
    closed = [str(folder) for folder in holder.parents if not os.stat(folder).st_mode & stat.S_IXOTH]
    if closed:
        raise SandboxError(
            f"{closed[0]} cannot be entered by other users, so an evaluation running as a uid of its own (isolation: "
            f"none as root) cannot reach its copy in {holder}; set TMPDIR to a folder such as /tmp, or {ENV_VAR}=off"
        )
    if not hardlinks_protected():
        logger.warning("fs.protected_hardlinks is not 1: an evaluation running as a uid of its own can hard-link files "
                       "of root's into its copy, which the runner reads back; set the sysctl fs.protected_hardlinks=1")
    with _allocated(_lock_folder(lock_root)) as uid:
        home = holder / f"{HOME_PREFIX}{uid}"
        _remove(home)
        home.mkdir(mode=0o700)
        try:
            process_limit.hand_over([workdir, *writable, home], uid)
            for path in (workdir, *writable, home):
                if path.is_dir() and not path.is_symlink() and process_limit.holder_of(path) is not None:
                    os.chmod(path, 0o700, follow_symlinks=False)
            yield SlotUser(uid, home)
        finally:
            kill_all(uid)
            _remove(home)
            for path in (workdir, *writable):  # the next holder of the uid cannot enter them (their holder is root's)
                if process_limit.holder_of(path) is not None and path.exists():
                    os.chown(path, os.geteuid(), os.getegid(), follow_symlinks=False)


def _lock_folder(root: Path | None) -> Path:
    """Returns the root-owned 0700 folder of the uid locks, made if missing; refuses one anybody else could touch."""
    if root is None:
        root = next((path for path in LOCK_ROOTS if path.is_dir() and os.access(path, os.W_OK)), None)
        if root is None:
            raise SandboxError(f"none of {', '.join(map(str, LOCK_ROOTS))} is writable: the uids of evaluations "
                               f"cannot be allocated; set {ENV_VAR}=off to run evaluations as root")
    folder = root / LOCK_FOLDER
    with suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise SandboxError(
            f"{folder} is not a folder of the runner's own user with mode 0700, so the uids of evaluations cannot be "
            f"allocated safely; remove it (or set {ENV_VAR}=off to run evaluations as root)"
        )
    return folder


@contextmanager
def _allocated(folder: Path) -> Iterator[int]:
    """Yields a uid no other runner holds and no process runs as, locked until the block ends."""
    start = os.getpid() % UID_COUNT
    for step in range(_TRIES):
        uid = FIRST_UID + (start + step * 7919) % UID_COUNT
        fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            if process_limit.pids_of(uid):  # a killed runner's stray still runs as it
                continue
            yield uid
            return
        finally:
            os.close(fd)  # releases the lock
    raise SandboxError(f"no free uid for an evaluation among {_TRIES} tried from {FIRST_UID}: too many runs at once")


def kill_all(uid: int) -> int:
    """Kills every process running as uid, again until none is left (one may fork meanwhile); returns the count."""
    return kill_until_gone(lambda: process_limit.pids_of(uid), _KILL_ROUNDS, _KILL_WAIT, _KILL_WAIT)


def _remove(path: Path) -> None:
    """Removes a folder the uid wrote (never following its links), if it is there."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)
