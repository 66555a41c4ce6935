"""Which paths a candidate may write: the ones git stores as plain files, each named once (a pure rule).

A path git refuses, or stores as something other than a file, fails only when the runner commits it, after the
evaluation ran and was paid for; some it does not even refuse (a `.git` file is committed as a gitlink to the user's
HEAD). So every proposer's paths (an agent's, an LLM reply's, an outcome's for `publish`) pass this rule before
anything is evaluated:

- plain, relative, `/`-separated, no empty, `.` or `..` component, no backslash, no control character;
- no component git reserves: `.git` in any case, nor its spellings Windows or macOS read as `.git`
  (`.git.`, `.git ` , `git~1`, with characters HFS+ ignores);
- no component over 255 bytes (no file system stores it);
- no two paths that differ only in case (`SOL.py` beside `sol.py`: one file on a case-insensitive checkout), and no
  path that is also another's folder;
- at most `MAX_CHANGED_PATHS` of them.
"""

from __future__ import annotations

import unicodedata
from typing import Iterable

MAX_CHANGED_PATHS = 500
MAX_COMPONENT_BYTES = 255
# Code points HFS+ ignores in names (git's is_hfs_dotgit): `.g\u200cit` is `.git` on a Mac.
_HFS_IGNORED = frozenset(
    "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u206a\u206b\u206c\u206d\u206e\u206f\ufeff"
)


def path_problems(changed: Iterable[str], existing: Iterable[str] = ()) -> list[str]:
    """Returns a reason for every changed path git would refuse or misstore, or that collides with another.

    existing: the paths the tree already has (a new path may not differ from one of them only in case, nor sit
    under one as if it were a folder).
    """
    paths = list(dict.fromkeys(changed))
    reasons = [f"{path!r}: {why}" for path in paths if (why := path_problem(path))]
    if len(paths) > MAX_CHANGED_PATHS:
        reasons.append(f"the candidate changes {len(paths)} files; at most {MAX_CHANGED_PATHS} may change at once")
    reasons += _collisions(paths, list(existing))
    return reasons


def path_problem(path: str) -> str | None:
    """Returns why git would refuse or misstore one path, or None."""
    if not path:
        return "an empty path"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "a control character in the name"
    if "\\" in path:
        return "a backslash in the name (a folder separator on Windows)"
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        return "an absolute path"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "an empty, `.` or `..` component; write a plain relative path"
    for part in parts:
        if is_dotgit(part):
            return f"`{part}` is git's own directory name; candidates may only change repository files"
        if len(part.encode("utf-8", "surrogateescape")) > MAX_COMPONENT_BYTES:
            return f"a name over {MAX_COMPONENT_BYTES} bytes"
    return None


def is_dotgit(name: str) -> bool:
    """Returns whether a path component names git's directory on some file system (as git's verify_path reads it)."""
    folded = "".join(c for c in unicodedata.normalize("NFC", name) if c not in _HFS_IGNORED).casefold()
    return folded.split(":")[0].rstrip(". ") in (".git", "git~1")  # `.git::$INDEX_ALLOCATION` is `.git` on NTFS


def _collisions(paths: list[str], existing: list[str]) -> list[str]:
    """Returns the paths that name one file twice up to case, or that are a file and a folder at once."""
    reasons = []
    spelled = {p.casefold(): p for p in existing}
    folders = {folder for p in existing for folder in _prefixes(p.casefold())}
    seen: dict[str, str] = {}
    for path in paths:
        key = path.casefold()
        other = seen.get(key) or (spelled[key] if key in spelled and spelled[key] != path else None)
        if other is not None and other != path:
            reasons.append(f"{path!r} and {other!r} differ only in case: one file on a case-insensitive checkout")
        seen.setdefault(key, path)
    changed_folders = {folder for p in paths for folder in _prefixes(p.casefold())}
    for path in paths:
        key = path.casefold()
        if key in folders or key in changed_folders:
            reasons.append(f"{path!r} is also a folder of another path; it cannot be both a file and a folder")
        elif (above := next((p for p in _prefixes(key) if p in spelled), None)) is not None:
            reasons.append(f"{path!r} puts a file under {spelled[above]!r}, which is a file")
    return reasons


def _prefixes(key: str) -> list[str]:
    """Returns the folders above a (case-folded) path, nearest last."""
    parts = key.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]
