"""Memory in a plain folder: gh-aw's repo-memory clone, which the framework pushes after the agent job.

In a GitHub Agentic Workflows run the agent cannot push: gh-aw clones `memory/autoloop` into the folder
of the workflow's repo-memory id, `/tmp/gh-aw/repo-memory/<id>` (`default` in autoloop.md), and commits and
pushes what the job leaves in that folder alone.
`FolderMemory` reads and writes the same `<program>.md` files there that `MemoryStore` keeps on the
branch; `open_memory` picks one of the two.

gh-aw refuses the whole save of a folder that breaks one of its rules (save_limits.py), so the folder keeps to
them as it writes: a file of another extension is refused here, a write whose diff would pass
`max-patch-size` stores its candidate sources compressed (`<id>.py.gz.b64.txt`, read back as `<id>.py`), and
past FILE_LIMIT files the oldest trace rows and unneeded sources go (source_pruning.prune_plan).
"""

from __future__ import annotations

import base64
import builtins
import gzip
import logging
import os
import tempfile
from pathlib import Path
from typing import Mapping, Union

from autoloop_py.errors import StateError
from autoloop_py.git.objects import GitSession
from autoloop_py.state import save_limits
from autoloop_py.state.memory import Change, Extra, MemoryCommit, MemoryStore, check_path
from autoloop_py.state.source_pruning import is_source, prune_plan

logger = logging.getLogger(__name__)

MEMORY_DIR_ENV = "AUTOLOOP_MEMORY_DIR"
# gh-aw refuses the whole save of a repo-memory folder holding more files than its `max-file-count`
# (1000 in autoloop.md, gh-aw's ceiling): old trace rows and unneeded sources go to stay under this.
FILE_LIMIT = save_limits.FILE_LIMIT
# What one write may add to the memory branch's diff (gh-aw allows max-patch-size and its tolerance).
PATCH_LIMIT = save_limits.MAX_PATCH_SIZE
# A candidate source kept compressed, so that one iteration's write stays under PATCH_LIMIT.
PACKED = ".gz.b64.txt"


class FolderMemory:
    """State files in a folder, with the read/update interface of MemoryStore (no git, no push)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def has_remote(self) -> bool:
        """Returns False: the workflow, not autoloop, pushes the folder."""
        return False

    def sync(self) -> None:
        """Creates the folder if missing; the workflow cloned what there is before the job."""
        self.folder.mkdir(parents=True, exist_ok=True)

    def publish(self) -> bool:
        """Returns False: nothing to push from here."""
        return False

    def read(self, path: str, at: str | None = None) -> str | None:
        """Returns the text of `path` in the folder (None when absent); a folder has one version, whatever `at`."""
        check_path(path)
        file = self.folder / path
        if not file.is_file():
            packed = self.folder / (path + PACKED)
            return gzip.decompress(base64.b64decode(packed.read_bytes())).decode("utf-8") if packed.is_file() else None
        data = file.read_bytes()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as err:
            line = data.count(b"\n", 0, err.start) + 1
            message = f"not UTF-8 text (byte {err.start}); fix or delete the file"
            raise StateError(message, path=file, line=line) from err

    def commits(self, path: str, **options: object) -> builtins.list[MemoryCommit]:
        """Returns [] whatever MemoryStore.commits' options: a folder keeps no history, so the record check takes its
        file as it is."""
        check_path(path)
        return []

    def tip(self) -> None:
        """Returns None: a folder has no commits."""
        return None

    def tip_commit(self, path: str, at: str | None = None) -> MemoryCommit | None:
        """Returns None: a folder keeps no history."""
        check_path(path)
        return None

    def read_at(self, commit: str, path: str) -> str | None:
        """Returns None: a folder has no earlier versions to read."""
        check_path(path)
        return None

    def list(self, prefix: str = "") -> builtins.list[str]:
        """Returns the sorted relative paths of files in the folder that start with `prefix` (no `.git`)."""
        if not self.folder.is_dir():
            return []
        found = (p.relative_to(self.folder).as_posix() for p in self.folder.rglob("*") if p.is_file())
        return sorted(p for p in found if p.startswith(prefix) and not p.startswith(".git/"))

    def commit(self, files: Mapping[str, str | bytes], message: str) -> str:
        """Writes `files` into the folder within gh-aw's save rules; returns the message's first line (no commit id).

        Raises StateError for a path whose extension gh-aw would refuse, before anything is written.
        """
        for path in files:
            check_path(path)
            if not save_limits.allowed(path):
                raise StateError(f"gh-aw refuses to save a memory folder holding {path!r}; keep to the extensions "
                                 f"{', '.join(save_limits.ALLOWED_EXTENSIONS)}", path=self.folder / path)
        fitted = self._fitted(files)
        for path, content in fitted.items():
            self._write(path, content)
        for path in files:  # one copy of each: a packed one written above replaces the plain one, and back
            stale = self.folder / (path if path not in fitted else path + PACKED)
            if stale.is_file():
                stale.unlink()
        self._prune(FILE_LIMIT)
        return (message.splitlines() or [""])[0]

    def _fitted(self, files: Mapping[str, str | bytes]) -> dict[str, str | bytes]:
        """Returns files with candidate sources compressed, largest first, while the write's diff passes PATCH_LIMIT."""
        texts = {path: content if isinstance(content, str) else content.decode("utf-8", "replace")
                 for path, content in files.items()}
        sizes = {path: save_limits.added_bytes(self.read(path), text) for path, text in texts.items()}
        fitted: dict[str, str | bytes] = dict(files)
        for path in sorted((p for p in texts if is_source(p)), key=lambda p: -sizes[p]):
            if sum(sizes.values()) <= PATCH_LIMIT:
                break
            packed = base64.encodebytes(gzip.compress(texts[path].encode("utf-8"), mtime=0)).decode("ascii")
            del fitted[path]
            fitted[path + PACKED] = packed
            sizes[path] = save_limits.added_bytes(self.read(path + PACKED), packed)
        if sum(sizes.values()) > PATCH_LIMIT:
            logger.warning("%s: this write adds about %d bytes to the memory branch's diff, over gh-aw's "
                           "max-patch-size of %d; gh-aw may refuse the save", self.folder, sum(sizes.values()),
                           PATCH_LIMIT)
        return fitted

    def _prune(self, limit: int) -> None:
        """Deletes old trace rows and unneeded candidate sources, oldest first (source_pruning.prune_plan),
        while the folder holds over `limit` files."""
        paths = self.list()
        doomed = prune_plan(paths, limit, self.read)
        for path in doomed:
            (self.folder / path).unlink()
        if len(paths) - len(doomed) > limit:
            logger.warning("the memory folder %s still holds %d files with its trace pruned (limit %d): "
                           "gh-aw refuses a save of too many", self.folder, len(paths) - len(doomed), limit)

    def update(self, path: str, change: Change, message: str, extra: Extra | None = None) -> str:
        """Writes change(current text) to `path`, plus the extra files; the caller holds the program lock."""
        check_path(path)
        text = change(self.read(path))
        files: dict[str, str | bytes] = dict(extra() if extra else {})
        files[path] = text
        return self.commit(files, message)

    def _write(self, path: str, content: str | bytes) -> None:
        """Replaces one file atomically, so a killed run leaves the old or the new text, never half."""
        target = self.folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8") if isinstance(content, str) else content
        handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(partial, target)


Memory = Union[MemoryStore, FolderMemory]


def memory_folder(given: Path | None = None, environ: Mapping[str, str] | None = None) -> Path | None:
    """Returns the memory folder to use: `given`, else AUTOLOOP_MEMORY_DIR, else None (the git branch)."""
    if given is not None:
        return given
    value = (os.environ if environ is None else environ).get(MEMORY_DIR_ENV, "").strip()
    return Path(value) if value else None


def open_memory(root: Path, folder: Path | None = None, session: GitSession | None = None) -> Memory:
    """Returns the memory of this run: the folder (`--memory-dir` or AUTOLOOP_MEMORY_DIR) or the memory branch.

    session: the run's git session, so the branch's reads share its one `cat-file --batch`.
    """
    chosen = memory_folder(folder)
    return FolderMemory(chosen) if chosen is not None else MemoryStore(root, session=session)
