"""The process limit of sandboxed commands: which mechanism holds it here (a pure decision), and handing a copy over.

RLIMIT_NPROC (`prlimit --nproc`) bounds the processes of a user, but Linux never applies it to uid 0.
A root runner (CI containers, most `docker run`s) therefore needs another mechanism. In order:

- cgroup: a pids cgroup per command (`sandbox/cgroup.py`), whose `pids.max` the kernel holds for every user;
- uid: the command runs as uid 65534 (nobody) through `setpriv`, so RLIMIT_NPROC applies to it again;
  autoloop's temporary copy it works in is handed over to that uid first;
- none: the limit is NOT ENFORCED, and `autoloop check` and `status` say so.

`AUTOLOOP_PROCESS_LIMIT=auto|cgroup|uid|off` chooses; a forced mechanism that cannot run here is an error,
as `isolation: bwrap` is when bubblewrap cannot run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from autoloop_py import tempdirs
from autoloop_py.sandbox.cgroup import pids_parent
from autoloop_py.sandbox.process import process_ids

logger = logging.getLogger(__name__)

ENV_VAR = "AUTOLOOP_PROCESS_LIMIT"
AUTO, CGROUP, UID, OFF = "auto", "cgroup", "uid", "off"
CHOICES = (AUTO, CGROUP, UID, OFF)
# The mechanisms: RLIMIT_NPROC as the runner's own user, the two above, or nothing.
RLIMIT, NONE = "rlimit", "none"
NOBODY = 65534
_CAP_SETGID, _CAP_SETUID = 6, 7


@dataclass(frozen=True)
class Facts:
    """What decides the mechanism on this machine.

    Attributes:
      root: the runner runs as uid 0, which RLIMIT_NPROC exempts.
      cgroup_parent: a writable pids cgroup whose new children get a `pids.max` ("" when there is none).
      prlimit: `prlimit` is installed (every RLIMIT is set through it).
      setpriv: `setpriv` (util-linux) is installed.
      can_setuid: the runner holds CAP_SETUID and CAP_SETGID.
      own_copy: the command's directory is one of autoloop's temporary copies (only those are handed over).
    """

    root: bool
    cgroup_parent: str = ""
    prlimit: bool = True
    setpriv: bool = False
    can_setuid: bool = False
    own_copy: bool = True


@dataclass(frozen=True)
class ProcessLimit:
    """How the process limit of a command holds.

    Attributes:
      mechanism: rlimit, cgroup, uid or none (not enforced).
      reason: the detail behind it (where the cgroup is, why nothing holds).
      problem: a forced mechanism that cannot run here: the command is refused ("" when none).
      requested: what AUTOLOOP_PROCESS_LIMIT asked for.
    """

    mechanism: str
    reason: str = ""
    problem: str = ""
    requested: str = AUTO

    @property
    def enforced(self) -> bool:
        """Whether the kernel bounds the command's processes."""
        return self.mechanism != NONE and not self.problem


def decide(requested: str, facts: Facts) -> ProcessLimit:
    """Returns the mechanism that bounds a command's processes, for a requested choice on a machine like `facts`."""
    choice = (requested or AUTO).strip().lower()
    if choice not in CHOICES:
        problem = f"{ENV_VAR} must be one of {', '.join(CHOICES)}, got {requested!r}"
        return ProcessLimit(NONE, problem, problem, choice)
    if choice == OFF:
        return ProcessLimit(NONE, f"{ENV_VAR}=off", requested=OFF)
    cgroup = ProcessLimit(CGROUP, f"a pids cgroup per command under {facts.cgroup_parent}", requested=choice)
    no_uid = _why_not_uid(facts)
    uid = ProcessLimit(UID, f"RLIMIT_NPROC, commands run as uid {NOBODY} (nobody) through setpriv", requested=choice)
    if choice == CGROUP:
        if facts.cgroup_parent:
            return cgroup
        why = "no writable pids cgroup (a v1 `pids` hierarchy, or a v2 group with the pids controller delegated)"
        return ProcessLimit(NONE, why, f"{ENV_VAR}=cgroup, but there is {why}", choice)
    if choice == UID:
        return uid if not no_uid else ProcessLimit(NONE, no_uid, f"{ENV_VAR}=uid, but {no_uid}", choice)
    if not facts.root:
        if facts.prlimit:
            return ProcessLimit(RLIMIT, "RLIMIT_NPROC (prlimit)", requested=choice)
        return ProcessLimit(NONE, "prlimit (util-linux) is not installed", requested=choice)
    if facts.cgroup_parent:
        return cgroup
    if not no_uid:
        return uid
    return ProcessLimit(
        NONE,
        f"running as root, which RLIMIT_NPROC exempts, with no writable pids cgroup, and {no_uid}",
        requested=choice,
    )


def _why_not_uid(facts: Facts) -> str:
    """Returns why commands cannot run as uid 65534 here ("" when they can)."""
    if not facts.root:
        return "only a root runner can run commands as another user (as any other, RLIMIT_NPROC holds already)"
    return why_no_setpriv(facts, needs_prlimit=True)


def why_no_setpriv(facts: Facts, needs_prlimit: bool) -> str:
    """Returns what keeps a root runner from running commands as another uid through setpriv ("" when nothing).

    needs_prlimit: the uid is there for RLIMIT_NPROC, which is set through prlimit.
    """
    for met, why in (
        (facts.setpriv, "setpriv (util-linux) is not installed"),
        (facts.prlimit or not needs_prlimit, "prlimit (util-linux) is not installed"),
        (facts.can_setuid, "the runner lacks CAP_SETUID or CAP_SETGID"),
        (facts.own_copy, "the command's directory is not one of autoloop's temporary copies"),
    ):
        if not met:
            return why
    return ""


def describe(limit: ProcessLimit) -> str:
    """Returns one line saying how the process limit holds (for `status` and `check`)."""
    if limit.problem or limit.mechanism == NONE:
        return f"NOT ENFORCED: the process limit of evaluations and agents ({limit.problem or limit.reason})"
    if limit.mechanism == UID:
        why = f"{ENV_VAR}=uid" if limit.requested == UID else "running as root, no writable pids cgroup"
        return f"process limit: {limit.reason} ({why})"
    return f"process limit: {limit.reason}"


def setpriv_prefix(uid: int = NOBODY) -> list[str]:
    """Returns the argv prefix that runs a command as uid (nobody), without groups and unable to regain privileges."""
    ids = str(uid)
    return ["setpriv", f"--reuid={ids}", f"--regid={ids}", "--clear-groups", "--no-new-privs", "--"]


def has_capabilities(status: str, *bits: int) -> bool:
    """Returns whether /proc/<pid>/status text shows each capability bit in CapEff."""
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            value = int(line.split()[1], 16)
            return all(value >> bit & 1 for bit in bits)
    return False


def requested(environ: Mapping[str, str]) -> str:
    """Returns the mechanism asked for in the environment (auto when unset)."""
    return environ.get(ENV_VAR, "").strip() or AUTO


def facts(workdir: Path | None = None) -> Facts:
    """Returns this machine's facts (workdir: the command's directory; None: one of autoloop's copies)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        status = ""
    parent = pids_parent()
    return Facts(
        root=os.geteuid() == 0,
        cgroup_parent=str(parent) if parent is not None else "",
        prlimit=shutil.which("prlimit") is not None,
        setpriv=shutil.which("setpriv") is not None,
        can_setuid=has_capabilities(status, _CAP_SETUID, _CAP_SETGID),
        own_copy=workdir is None or holder_of(workdir) is not None,
    )


def resolve(choice: str, workdir: Path | None = None) -> ProcessLimit:
    """Returns the mechanism for `choice` on this machine."""
    return decide(choice, facts(workdir))


def holder_of(path: Path) -> Path | None:
    """Returns the autoloop temporary directory (marked with its owner) that holds path, or None."""
    resolved = path.resolve()
    ours = (folder for folder in (resolved, *resolved.parents) if folder.name.startswith(tempdirs.PREFIX))
    return next((folder for folder in ours if (folder / tempdirs.OWNER_FILE).is_file()), None)


def hand_over(paths: list[Path], uid: int = NOBODY) -> None:
    """Gives uid (65534) the trees at paths that lie in autoloop's temporary directories; others are left alone.

    Their holder becomes traversable (not listable) by others so that, without bubblewrap, nobody reaches them.
    The walk goes by directory descriptors and never follows a link: a process of that uid (a concurrent
    evaluation) that swaps a directory for a link to /etc meanwhile only gets its own link chowned.
    """
    for path in paths:
        holder = holder_of(path)
        if holder is None:
            logger.debug("not handing %s to uid %d: it is not one of autoloop's temporary directories", path, uid)
            continue
        os.chmod(holder, 0o711)
        os.chown(path, uid, uid, follow_symlinks=False)  # its parent is root's: it cannot have been swapped
        if not path.is_dir() or path.is_symlink():
            continue
        for _folder, dirs, files, fd in os.fwalk(path, follow_symlinks=False):
            for name in [*dirs, *files]:
                with contextlib.suppress(FileNotFoundError):  # removed meanwhile
                    os.chown(name, uid, uid, dir_fd=fd, follow_symlinks=False)


def processes_of(uid: int | None) -> int:
    """Returns how many processes run as uid (None: all of them, an upper bound on those of the runner's user)."""
    if uid is None:
        return len(process_ids())
    count = 0
    for pid in process_ids():
        with contextlib.suppress(OSError):
            count += os.stat(f"/proc/{pid}").st_uid == uid
    return count


def pids_of(uid: int) -> list[int]:
    """Returns the live (not zombie) processes whose real, effective or saved uid is uid.

    Read from /proc/<pid>/status, not the owner of /proc/<pid>: a process that made itself non-dumpable shows as root's.
    """
    found = []
    wanted = str(uid).encode()
    for pid in process_ids():
        try:
            with open(f"/proc/{pid}/status", "rb") as handle:
                status = handle.read()
        except OSError:
            continue
        uids = _field(status, b"Uid:").split()[:3]
        if wanted in uids and _field(status, b"State:")[:1] not in (b"Z", b"X"):
            found.append(pid)
    return found


def _field(status: bytes, name: bytes) -> bytes:
    """Returns the value of one `Name:\tvalue` line of /proc/<pid>/status (b'' when absent)."""
    start = status.find(b"\n" + name)
    if start < 0:
        return b""
    end = status.find(b"\n", start + 1)
    return status[start + 1 + len(name):end if end >= 0 else None].strip()
