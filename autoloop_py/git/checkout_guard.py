"""What candidate code may not change in the user's checkout: its git config, attributes and refs.

With `isolation: none` an agent or an evaluation runs as the user and can find the checkout (through
`/proc/<ancestor>/cwd`, say) and write into its `.git`: a remote's `uploadpack`, a filter and the
`info/attributes` that switches it on, a ref. The runner's git overrides every command such config names
(`config_guard`), and the runner also notices the change itself: it snapshots the files before candidate
code runs and compares them after, and stops (the iteration is not recorded, nothing is pushed) saying what
changed. The snapshot is read from the files, with no git process.

The refs the runner moves itself (its memory branch, `autoloop/<name>`, `refs/autoloop/…`, the remote-tracking
refs) are left out of that snapshot, since the run moves them between its steps; they are watched instead over
each window in which candidate code runs and the runner moves none (`runner_refs_held`: snapshot right before the
proposer or the evaluation starts, compare right after it ended). A change there is another run's only when
another program's run of this clone is active (its lock is held) and the ref is not this program's own.
"""

from __future__ import annotations

import errno
import hashlib
import os
import logging
import stat
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import AbstractSet, Callable, Iterable, Iterator, Mapping

from autoloop_py.errors import AutoloopError

logger = logging.getLogger(__name__)

# The files of the common git directory whose change lets a later git command run something or act elsewhere.
WATCHED = ("config", "config.worktree", "info/attributes", "HEAD", "commondir", "hooks")
# Refs the runner moves itself (and other runs sharing the clone): left out of the whole-run snapshot, compared over
# each window in which candidate code runs instead (runner_refs_held).
OWN_REFS = ("refs/remotes/", "refs/autoloop/", "refs/heads/autoloop/")
# The runner's refs that name the program they belong to: `autoloop/<name>` and a tick's `slots/<name>/<iteration>`.
_PROGRAM_REFS = ("refs/heads/autoloop/", "refs/autoloop/slots/")
# What a missing path (or one under a file or a link loop) raises: pathlib's checks read these as absent.
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


class CheckoutTampered(AutoloopError):
    """Candidate code changed the checkout's git config, attributes or refs while it ran."""


@dataclass(frozen=True)
class CheckoutSnapshot:
    """The watched files and refs of a checkout at one moment.

    Attributes:
        git_dir: the common git directory.
        files: path relative to git_dir → sha256 of its bytes (None: absent; a folder: its listing).
        refs: ref name → the value its file (or packed-refs) holds.
    """

    git_dir: Path
    files: Mapping[str, str | None]
    refs: Mapping[str, str]


def snapshot(git_dir: Path, own: Iterable[str] = ()) -> CheckoutSnapshot:
    """Reads the watched files and the refs (but the runner's own, `OWN_REFS` and `own`) of a common git directory."""
    skipped = (*OWN_REFS, *own)
    files = {name: _digest(git_dir / name) for name in WATCHED}
    worktrees = git_dir / "worktrees"
    if worktrees.is_dir():
        for entry in sorted(worktrees.iterdir()):
            files[f"worktrees/{entry.name}/config.worktree"] = _digest(entry / "config.worktree")
    refs = {name: value for name, value in _refs(git_dir).items() if not name.startswith(skipped)}
    return CheckoutSnapshot(git_dir, files, refs)


def changes(before: CheckoutSnapshot, after: CheckoutSnapshot) -> list[str]:
    """Returns what differs between two snapshots, one phrase each (worktrees the runner added or removed aside)."""
    found = []
    for name in sorted(set(before.files) | set(after.files)):
        old, new = before.files.get(name), after.files.get(name)
        if old == new or (name.startswith("worktrees/") and (name not in before.files or name not in after.files)):
            continue
        verb = "appeared" if old is None else "was removed" if new is None else "changed"
        found.append(f"{before.git_dir / name} {verb}")
    for ref in sorted(set(before.refs) | set(after.refs)):
        old, new = before.refs.get(ref), after.refs.get(ref)
        if old != new:
            found.append(_ref_change(ref, old, new))
    return found


def verify(before: CheckoutSnapshot, own: Iterable[str] = (), during: str = "candidate code ran") -> None:
    """Raises CheckoutTampered naming every change since `before`; the run stops before recording or pushing."""
    found = changes(before, snapshot(before.git_dir, own))
    if found:
        raise CheckoutTampered(
            f"the checkout's git directory changed while {during}: {'; '.join(found)}. autoloop stopped: this "
            "iteration is not recorded and nothing was pushed. Something with the user's rights wrote there (with "
            "`isolation: none` candidate code runs as you): restore what you did not write (`git config --list "
            "--show-origin`, `git for-each-ref`), and run with bubblewrap (`isolation: bwrap`)",
            path=before.git_dir,
        )


@contextmanager
def runner_refs_held(
    git_dir: Path, program: str, memory_ref: str, during: str, busy: Callable[[float], AbstractSet[str]],
    recorder: Callable[[float], bool] = lambda start: False, pushed: Mapping[str, str] | None = None,
) -> Iterator[None]:
    """Raises CheckoutTampered when candidate code moved, made or deleted a runner ref while the block ran.

    memory_ref: the memory branch (`refs/heads/memory/autoloop`). busy(start): the other programs whose runs of
    this clone were active since the time.time() `start` (their locks held by another process, or taken since),
    asked before and after the block: a change to a ref they may move (their own refs, the shared memory branch,
    remote-tracking or orphaned refs) is theirs, and
    only logged; a change to this program's refs, or to any runner ref while no other run is active, stops the run.
    recorder(start): whether this slot's own run recorded a sibling slot since `start` (a run without a barrier
    records each slot as it ends): then a change to this program's refs and the shared ones is the run's own.
    pushed: remote-tracking ref → the sha of this run's own push left running (it moves the ref when it lands).
    """
    start = time.time()
    before, active = _runner_refs(git_dir, memory_ref), set(busy(start))
    yield
    after = _runner_refs(git_dir, memory_ref)
    if before == after:
        return
    active |= busy(start)
    ours = recorder(start)
    tampered, excused = [], []
    for ref in sorted(set(before) | set(after)):
        old, new = before.get(ref), after.get(ref)
        if old == new or (new is not None and pushed is not None and pushed.get(ref) == new):
            continue
        # The program the ref belongs to (`autoloop/<name>`, `slots/<name>/…`); None for the shared ones.
        owner = next((ref[len(prefix):].split("/", 1)[0] for prefix in _PROGRAM_REFS if ref.startswith(prefix)), None)
        theirs = bool(active) and owner != program and (owner is None or owner in active)
        theirs = theirs or (ours and owner in (None, program))
        (excused if theirs else tampered).append(_ref_change(ref, old, new))
    if excused:
        logger.info(
            "runner refs moved while %s, by another run of this clone or this run's recorder: %s",
            during,
            "; ".join(excused),
        )
    if tampered:
        raise CheckoutTampered(
            f"the checkout's autoloop refs changed while {during}: {'; '.join(tampered)}. autoloop stopped: this "
            "iteration is not recorded and nothing was pushed. autoloop moves these refs only between the steps "
            "that run candidate code, so something with the user's rights wrote them (with `isolation: none` "
            "candidate code runs as you): check them (`git for-each-ref refs/autoloop refs/heads/autoloop "
            f"{memory_ref}`, `git reflog {memory_ref}`), delete or reset what you did not write, and run with "
            "bubblewrap (`isolation: bwrap`)",
            path=git_dir,
        )


def _runner_refs(git_dir: Path, memory_ref: str) -> dict[str, str]:
    """Returns the refs the runner moves itself: OWN_REFS and the memory branch."""
    # Only their folders are walked (asked around every step that runs candidate code, in a clone of many refs).
    folders = (*(prefix.rstrip("/") for prefix in OWN_REFS), memory_ref.rpartition("/")[0])
    found = _refs(git_dir, folders)
    return {name: sha for name, sha in found.items() if name.startswith(OWN_REFS) or name == memory_ref}


def _ref_change(ref: str, old: str | None, new: str | None) -> str:
    """Returns one phrase saying how a ref changed."""
    verb = "was created" if old is None else "was deleted" if new is None else "moved"
    return f"{ref} {verb}{f' (now {new[:12]})' if new else ''}"


def _digest(path: Path | str) -> str | None:
    """Returns the sha256 of a file, or of a folder's listing with each file's digest; None when absent (one lstat
    a path, as it runs around every step that runs candidate code)."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            return "link:" + os.readlink(path)
        if stat.S_ISDIR(mode):
            inner = "".join(f"{name}={_digest(os.path.join(path, name))}\n" for name in sorted(os.listdir(path)))
            return "dir:" + hashlib.sha256(inner.encode()).hexdigest()
        if stat.S_ISREG(mode):
            with open(path, "rb") as handle:
                return hashlib.sha256(handle.read()).hexdigest()
        return "special"
    except OSError as error:
        if error.errno in _ABSENT:
            return None
        return f"unreadable: {error.strerror}"


def _refs(git_dir: Path, folders: Iterable[str] = ("refs",)) -> dict[str, str]:
    """Returns every ref of packed-refs and of loose files under `folders` (a loose one wins), by reading the files."""
    found: dict[str, str] = {}
    base = os.fspath(git_dir)
    try:
        packed = (git_dir / "packed-refs").read_text("utf-8", "surrogateescape").splitlines()
    except OSError:
        packed = []
    for line in packed:
        if line and not line.startswith(("#", "^")) and " " in line:
            sha, name = line.split(" ", 1)
            found[name] = sha
    for folder, _dirs, names in (walked for top in folders for walked in os.walk(os.path.join(base, top))):
        for name in names:
            if name.endswith(".lock"):
                continue  # a ref git is updating right now: its old value is the file without .lock
            path = os.path.join(folder, name)
            with suppress(OSError), open(path, encoding="utf-8", errors="surrogateescape") as handle:
                found[path[len(base) + 1:]] = handle.read().strip()
    return found
