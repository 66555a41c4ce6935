"""The candidate directory: a standalone copy of the repository tree where untrusted code runs, and its snapshot.

An outside agent and every evaluation work in such a copy, never in a git worktree of the user's
repository: it holds no `.git` of theirs, so nothing done there reaches their refs, config or hooks.
What an agent changed is learnt by comparing the copy's files with a snapshot the runner took before
it ran (every file, hidden or ignored ones included), never by asking git in a directory it touched.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import subprocess
import threading
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterator, Mapping

from autoloop_py import tempdirs
from autoloop_py.git.command import DEFAULT_EMAIL, DEFAULT_NAME, git_environment, guarded_at, hardened_command

logger = logging.getLogger(__name__)

# The top-level `.git` of a candidate directory is the agent's scratch repository: never read, never applied.
SCRATCH_GIT = ".git"
# What tools leave behind when they run Python: dropped from a candidate, never applied nor evaluated.
CACHE_PARTS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
# Files above this size are told apart by size and modification time, never read (a planted 8 GiB file).
LARGE_FILE = 64 << 20


@dataclass(frozen=True)
class Entry:
    """One path of a snapshot.

    Attributes:
      kind: "file", "link" or "other" (a fifo, socket or device).
      digest: the sha256 of a file's bytes, a link's target, "" for other kinds.
    """

    kind: str
    digest: str


Snapshot = Mapping[str, Entry]


@dataclass(frozen=True)
class Changes:
    """What differs between a snapshot and the directory now.

    Attributes:
      files: changed paths -> new UTF-8 text, None when deleted (only regular files).
      problems: why some changes can never be a candidate (links, special files, `.git` paths, binary files).
      dropped: paths of tool caches that were left out.
    """

    files: Mapping[str, str | None]
    problems: tuple[str, ...]
    dropped: tuple[str, ...] = ()


@contextmanager
def copy_of(source: Path, prefix: str = "autoloop-candidate-", later: bool = False) -> Iterator[Path]:
    """Yields a fresh standalone copy of the tree at `source` (without its `.git`); removes it afterwards.

    later: nothing reads the copy again, so it is removed in a thread beside the caller's next steps (the
    interpreter joins it before it exits).
    """
    holder = tempdirs.make(prefix)  # marked with its owner: a later run removes it if this one is killed
    tree = holder / "repo"
    try:
        copy_tree(source, tree)
        yield tree
    finally:
        if later:
            threading.Thread(target=_remove, args=(holder,), name="autoloop-removal").start()
        else:
            _remove(holder)


def copy_tree(source: Path, dest: Path) -> None:
    """Copies every file and link under `source` into the new directory `dest`, leaving out the top-level `.git`."""
    dest.mkdir(parents=True)
    for folder, dirs, files in os.walk(source):
        here = Path(folder)
        rel = here.relative_to(source)
        if rel == Path("."):
            dirs[:] = [d for d in dirs if d != SCRATCH_GIT]
            files = [f for f in files if f != SCRATCH_GIT]
        for name in dirs:
            if (here / name).is_symlink():
                os.symlink(os.readlink(here / name), dest / rel / name)
            else:
                (dest / rel / name).mkdir()
        for name in files:
            origin, target = here / name, dest / rel / name
            if origin.is_symlink():
                os.symlink(os.readlink(origin), target)
            elif origin.is_file():
                shutil.copyfile(origin, target)
                shutil.copymode(origin, target)
        dirs[:] = [d for d in dirs if not (here / d).is_symlink()]


def snapshot(root: Path) -> dict[str, Entry]:
    """Returns every path under `root` (hidden and ignored ones included, not the top-level `.git`) -> its entry."""
    entries: dict[str, Entry] = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if here == root:
            dirs[:] = [d for d in dirs if d != SCRATCH_GIT]
            files = [f for f in files if f != SCRATCH_GIT]
        links = [d for d in dirs if (here / d).is_symlink()]
        dirs[:] = [d for d in dirs if d not in links]
        for name in [*files, *links]:
            path = here / name
            entries[path.relative_to(root).as_posix()] = _entry(path)
    return entries


def _entry(path: Path) -> Entry:
    """Returns the snapshot entry of one path (never following a link)."""
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        return Entry("link", os.readlink(path))
    if stat.S_ISREG(mode):
        info = path.lstat()
        if info.st_size > LARGE_FILE:
            # Not read: no candidate may be that large, and a change it hides only goes unapplied.
            return Entry("file", f"large:{info.st_size}:{info.st_mtime_ns}")
        with path.open("rb") as handle:
            return Entry("file", hashlib.file_digest(handle, "sha256").hexdigest())
    return Entry("other", "")


def changes(before: Snapshot, root: Path, max_bytes: int | None = None) -> Changes:
    """Returns what differs under `root` from the snapshot `before`, read from the files themselves.

    max_bytes: a changed file larger than this is a problem, and is never read.
    """
    after = snapshot(root)
    files: dict[str, str | None] = {}
    problems: list[str] = []
    dropped: list[str] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        parts = PurePosixPath(path).parts
        if ".git" in parts:
            problems.append(f"{path} is inside a `.git` directory; candidates may only change repository files")
        elif CACHE_PARTS.intersection(parts) or (old is None and path.endswith(".pyc")):
            dropped.append(path)
        elif new is None:
            files[path] = None
        elif new.kind == "link":
            problems.append(f"{path} is a symbolic link (to {new.digest}); candidates may only write regular files")
        elif new.kind != "file":
            problems.append(f"{path} is not a regular file; candidates may only write regular files")
        elif max_bytes is not None and (size := (root / path).lstat().st_size) > max_bytes:
            # Worded as the Target check words it; the file itself is never read.
            problems.append(f"{path} is {size} bytes, over the program's limit of {max_bytes} (`max-file-bytes`)")
        else:
            text = _text(root / path)
            if text is None:
                problems.append(f"{path} is not UTF-8 text; only text files can be candidates")
            else:
                files[path] = text
    return Changes(files, tuple(problems), tuple(dropped))


def _text(path: Path) -> str | None:
    """Returns the file's text, or None when it is not UTF-8."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None


def disk_bytes(root: Path) -> int:
    """Returns the bytes the files under root occupy on disk (links not followed, sparse files as allocated)."""
    total = 0
    for folder, dirs, names in os.walk(root):
        for name in [*names, *dirs]:
            with suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total


def init_scratch_repo(root: Path) -> None:
    """Makes `root` a throwaway git repository whose one commit is the tree as it is, for agents that need git.

    It is the agent's own: the runner runs git there only now, before the agent starts, and never reads it after.
    """
    env = git_environment(os.environ)
    env.update({"GIT_DIR": str(root / SCRATCH_GIT), "GIT_WORK_TREE": str(root)})
    env.update({"GIT_AUTHOR_NAME": DEFAULT_NAME, "GIT_AUTHOR_EMAIL": DEFAULT_EMAIL})
    env.update({"GIT_COMMITTER_NAME": DEFAULT_NAME, "GIT_COMMITTER_EMAIL": DEFAULT_EMAIL})
    steps = (
        ("init", "--quiet"),
        ("add", "--all"),
        ("commit", "--quiet", "--no-verify", "--no-gpg-sign", "--allow-empty", "-m", "autoloop: the program branch"),
    )
    for args in steps:
        # After `init`: the user's global filters and drivers stay off whatever the copy's .gitattributes say.
        scratch = root / SCRATCH_GIT
        guard = guarded_at(root, scratch, scratch, env).arguments if args[0] != "init" else ()
        done = subprocess.run(hardened_command(args, guard), cwd=root, env=env, capture_output=True, check=False)
        if done.returncode != 0:
            logger.warning("the agent's scratch repository is incomplete: git %s: %s", args[0], done.stderr[-300:])
            return


def _remove(path: Path) -> None:
    """Removes a directory tree, also one whose modes a candidate changed to make it undeletable."""
    def unlock(_func: object, failed: str, _exc: object) -> None:
        for parent in (Path(failed).parent, Path(failed)):
            with suppress(OSError, NotImplementedError):
                os.chmod(parent, 0o700, follow_symlinks=False)
        with suppress(OSError):
            if os.path.isdir(failed) and not os.path.islink(failed):
                shutil.rmtree(failed, ignore_errors=True)
            else:
                os.unlink(failed)

    shutil.rmtree(path, onerror=unlock)
