"""Program names: the one safe spelling, the names autoloop keeps for itself, and names used twice."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

# A name becomes a folder, a git branch `autoloop/<name>`, a state file `<name>.md`, a lock file and a
# CI matrix entry, so it is held to what every one of those accepts.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_LENGTH = 64
# Files of autoloop's own bookkeeping under `.git/autoloop/` (a program once named `worktrees` took the
# worktree lock as its program lock and waited for itself forever) and names git reads specially.
RESERVED = frozenset({"worktrees", "locks", "issue-programs", "head", "fetch_head", "orig_head", "merge_head"})


def name_problem(name: str) -> str | None:
    """Returns why `name` cannot name a program, or None when it can."""
    if not NAME_RE.fullmatch(name):
        return (f"program name {name!r} has characters outside letters, digits, `.`, `_` and `-` "
                "(or does not start with a letter or digit)")
    if len(name) > MAX_LENGTH:
        return f"program name {name!r} is longer than {MAX_LENGTH} characters"
    if ".." in name or name.endswith((".", ".lock")):
        return f"program name {name!r} holds `..` or ends with `.` or `.lock`, which git refuses in a branch name"
    if name.casefold() in RESERVED:
        return f"program name {name!r} is reserved for autoloop's own files or git's"
    return None


def duplicates(named: Iterable[tuple[str, Path]]) -> dict[str, list[Path]]:
    """Returns each name given to more than one program, with their files.

    Names are case-folded: one file on a case-insensitive disk.
    """
    seen: dict[str, list[Path]] = {}
    for name, path in named:
        seen.setdefault(name.casefold(), []).append(path)
    return {key: paths for key, paths in seen.items() if len(paths) > 1}


def duplicate_message(name: str, paths: list[Path], path: Path) -> str:
    """Returns the error for one of the programs sharing `name`, naming the others."""
    others = ", ".join(str(p) for p in paths if p != path)
    return f"two programs are named '{name}' (also {others}); neither runs until one is renamed"
