"""Restoring a kept worktree: the files the runner wrote since it matched a commit are put back as that commit has
them, without a git process.

A run keeps one worktree per program between iterations (workspace.Worktrees). After an iteration that wrote a
candidate and did not commit it, the worktree differs from its commit only in the paths the runner wrote (agents
and evaluations work in standalone copies, never in it), so the next iteration on the same commit rewrites those
paths from the commit's tree instead of `git checkout --force` and `git clean -ffdx`. Anything unusual (a path
that is now a folder, a link, a tree the reader cannot read) makes it give up, and the caller checks out as before.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path, PurePosixPath
from typing import Iterable

from autoloop_py.git.objects import ObjectReader

logger = logging.getLogger(__name__)

_FILE_MODES = {b"100644": 0o644, b"100755": 0o755}


def restore(worktree: Path, objects: ObjectReader, commit: str, paths: Iterable[str]) -> bool:
    """Rewrites `paths` under worktree as `commit` has them (removing those it lacks); returns whether it could.

    Paths are repository-relative, as the runner wrote them (checked inside the worktree when written). False
    leaves the worktree for the caller to check out anew.
    """
    tree = objects.tree_of(commit)
    if tree is None:
        return False
    root = worktree.resolve()
    try:
        for rel in sorted(set(paths)):
            if not _restore_one(root, objects, tree, rel):
                return False
    except OSError as err:
        logger.debug("cannot restore the kept worktree %s: %s", worktree, err)
        return False
    return True


def _restore_one(root: Path, objects: ObjectReader, tree: str, rel: str) -> bool:
    """Puts one path back as the tree has it; False when it cannot be done here (the caller checks out)."""
    pure = PurePosixPath(rel)
    if pure.is_absolute() or not pure.parts or ".." in pure.parts or pure.parts[0] == ".git":
        return False
    target = root.joinpath(*pure.parts)
    if any(parent.is_symlink() for parent in [target, *target.parents] if root in parent.parents):
        return False  # a link on the way: leave it to git
    entry = objects.entry(tree, rel)
    if entry is None:
        if target.is_dir():
            return False
        target.unlink(missing_ok=True)
        _prune_empty(root, objects, tree, target.parent)
        return True
    mode = _FILE_MODES.get(entry[0])
    blob = objects.get(entry[1])
    if mode is None or blob is None or blob.kind != "blob" or target.is_dir():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(blob.data)
    os.chmod(target, mode)
    return True


def _prune_empty(root: Path, objects: ObjectReader, tree: str, folder: Path) -> None:
    """Removes the empty folders from `folder` up that the tree lacks (ones the runner made for a new file)."""
    while folder != root and root in folder.parents:
        rel = folder.relative_to(root).as_posix()
        if objects.entry(tree, rel) is not None or any(folder.iterdir()):
            return
        folder.rmdir()
        folder = folder.parent
