"""The working tree as git sees it: the tree of its tracked and untracked files (`.gitignore` honoured), and a copy.

Written through a private index (a copy of the repository's own, so unchanged files are not hashed again):
the repository's index, refs and files stay as they are; only the objects of new file contents are added.
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import git

from autoloop_py import tempdirs
from autoloop_py.git.command import run


@dataclass(frozen=True)
class WorkTree:
    """The working tree written as a git tree.

    Attributes:
      sha: the tree's id: the same text gives the same id, whatever is committed.
      index: the private index holding it (valid inside `work_tree`'s block).
    """

    sha: str
    index: Path


@contextmanager
def work_tree(repo: git.Repo) -> Iterator[WorkTree]:
    """Yields the working tree's tree (tracked files as they are now, untracked ones not ignored)."""
    with tempdirs.temporary("autoloop-index-") as holder:
        index = holder / "index"
        own = Path(repo.git_dir) / "index"
        if own.is_file():
            shutil.copy2(own, index)  # its mtime too: git re-reads a file changed in the index's second (racy git)
        env = {"GIT_INDEX_FILE": str(index)}
        run(repo, "add", "--all", "--", ".", env=env, hint="the working tree could not be read")
        yield WorkTree(run(repo, "write-tree", env=env), index)


def export(repo: git.Repo, tree: WorkTree, dest: Path) -> None:
    """Writes the tree's files into the new directory dest (no `.git`)."""
    dest.mkdir(parents=True)
    run(repo, "checkout-index", "--all", f"--prefix={dest}/", env={"GIT_INDEX_FILE": str(tree.index)})
