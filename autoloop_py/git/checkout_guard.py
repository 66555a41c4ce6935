"""What candidate code may not change in the user's checkout: its git config, attributes and refs.

With `isolation: none` an agent or an evaluation runs as the user and can find the checkout (through
`/proc/<ancestor>/cwd`, say) and write into its `.git`: a remote's `uploadpack`, a filter and the
`info/attributes` that switches it on, a ref. The runner's git overrides every command such config names
(`config_guard`), and the runner also notices the change itself: it snapshots the files before candidate
code runs and compares them after, and stops (the iteration is not recorded, nothing is pushed) saying what
changed. The snapshot is read from the files, with no git process.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from autoloop_py.errors import AutoloopError

# The files of the common git directory whose change lets a later git command run something or act elsewhere.
WATCHED = ("config", "config.worktree", "info/attributes", "HEAD", "commondir", "hooks")
# Refs the runner moves itself (and other runs sharing the clone): not candidate code's business, not compared.
OWN_REFS = ("refs/remotes/", "refs/autoloop/", "refs/heads/autoloop/")


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
        if name.startswith("worktrees/") and (name not in before.files or name not in after.files):
            continue
        if before.files.get(name) != after.files.get(name):
            old, new = before.files.get(name), after.files.get(name)
            verb = "appeared" if old is None else "was removed" if new is None else "changed"
            found.append(f"{before.git_dir / name} {verb}")
    for ref in sorted(set(before.refs) | set(after.refs)):
        old, new = before.refs.get(ref), after.refs.get(ref)
        if old != new:
            found.append(f"{ref} {'was created' if old is None else 'was deleted' if new is None else 'moved'}"
                         f"{f' (now {new[:12]})' if new else ''}")
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


def _digest(path: Path) -> str | None:
    """Returns the sha256 of a file, or of a folder's listing with each file's digest; None when absent."""
    try:
        if path.is_symlink():
            return "link:" + os.readlink(path)
        if path.is_dir():
            inner = "".join(f"{p.name}={_digest(p)}\n" for p in sorted(path.iterdir()))
            return "dir:" + hashlib.sha256(inner.encode()).hexdigest()
        if path.is_file():
            return hashlib.sha256(path.read_bytes()).hexdigest()
        return "special" if path.exists() else None
    except OSError as error:
        return f"unreadable: {error.strerror}"


def _refs(git_dir: Path) -> dict[str, str]:
    """Returns every ref of packed-refs and of loose files under refs/ (a loose one wins), by reading the files."""
    found: dict[str, str] = {}
    try:
        packed = (git_dir / "packed-refs").read_text("utf-8", "surrogateescape").splitlines()
    except OSError:
        packed = []
    for line in packed:
        if line and not line.startswith(("#", "^")) and " " in line:
            sha, name = line.split(" ", 1)
            found[name] = sha
    top = git_dir / "refs"
    for folder, _dirs, names in os.walk(top):
        for name in names:
            if name.endswith(".lock"):
                continue  # a ref git is updating right now: its old value is the file without .lock
            path = Path(folder) / name
            try:
                found[path.relative_to(git_dir).as_posix()] = path.read_text("utf-8", "surrogateescape").strip()
            except OSError:
                continue
    return found
