"""Git session: one long-lived `git cat-file --batch` per run, and the per-run lookups (remotes, identity) it caches.

An iteration reads dozens of objects (state file, trace rows, sources, ref tips); starting a git process
for each cost more than the rest of the iteration. Objects are immutable, so one process answers every
read of a run; refs are resolved by the same process, which reads the ref files anew on each request.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Hashable, TypeVar

import git

from autoloop_py.errors import GitError
from autoloop_py.git.command import (
    call,
    default_branch,
    git_environment,
    hardened_command,
    identity_env,
    location,
    open_repo,
    run,
    where,
)

T = TypeVar("T")

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class GitObject:
    """One object as `cat-file --batch` returned it.

    Attributes:
        sha: the object id.
        kind: blob, tree, commit or tag.
        data: the raw contents.
    """

    sha: str
    kind: str
    data: bytes


class ObjectReader:
    """Reads objects by any revision expression (`<sha>`, `<ref>`, `<commit>:<path>`) through one process."""

    def __init__(self, repo: git.Repo) -> None:
        self._repo = repo
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.requests = 0  # how many objects were asked for (tests count them)
        self.starts = 0  # how many processes were started
        self._finalizer: weakref.finalize | None = None

    def get(self, spec: str) -> GitObject | None:
        """Returns the object `spec` names, or None when it names none."""
        if not spec or "\n" in spec or "\r" in spec:
            return None
        with self._lock:
            self.requests += 1
            for attempt in range(2):
                process = self._started()
                try:
                    return _exchange(process, spec)
                except (BrokenPipeError, OSError, EOFError) as err:
                    self._stop()
                    if attempt:
                        raise GitError(f"`git cat-file --batch` stopped ({err}); run `git fsck`", path=where(self._repo)) from err
        return None

    def text(self, spec: str) -> str | None:
        """Returns a blob's text (None when spec names no blob or the blob is not UTF-8)."""
        found = self.get(spec)
        if found is None or found.kind != "blob":
            return None
        try:
            return found.data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def commit_sha(self, ref: str) -> str | None:
        """Returns the commit `ref` names (peeling tags), or None when it names no commit."""
        found = self.get(f"{ref}^{{commit}}")
        return found.sha if found is not None and found.kind == "commit" else None

    def tree_of(self, commit: str) -> str | None:
        """Returns the root tree of a commit."""
        found = self.get(commit)
        if found is None or found.kind != "commit" or not found.data.startswith(b"tree "):
            return None
        return found.data[5:45].decode("ascii")

    def names(self, spec: str) -> list[str]:
        """Returns the sorted entry names of the tree `spec` names ([] when it names no tree)."""
        found = self.get(spec)
        return [] if found is None or found.kind != "tree" else tree_entries(found.data)

    def close(self) -> None:
        """Stops the process (a later read starts a new one)."""
        with self._lock:
            self._stop()

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            # The same hardened command line and scrubbed environment as every other runner git command.
            command = hardened_command(["cat-file", "--batch"])
            env = {**git_environment(os.environ), **location(self._repo)}
            self._process = subprocess.Popen(
                command, cwd=where(self._repo), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            self.starts += 1
            self._finalizer = weakref.finalize(self, _terminate, self._process)
        return self._process

    def _stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._process = self._finalizer = None


def _exchange(process: subprocess.Popen[bytes], spec: str) -> GitObject | None:
    """Asks for one object and reads its answer."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(spec.encode("utf-8", "surrogateescape") + b"\n")
    process.stdin.flush()
    header = process.stdout.readline()
    if not header.endswith(b"\n"):
        raise EOFError("no answer")
    parts = header.rstrip(b"\n").split(b" ")
    if len(parts) != 3 or parts[-1] in (b"missing", b"ambiguous") or not parts[2].isdigit():
        return None
    sha, kind, size = parts[0].decode("ascii"), parts[1].decode("ascii"), int(parts[2])
    data = _read_exact(process.stdout, size + 1)[:size]
    return GitObject(sha, kind, data)


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("cut answer")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _terminate(process: subprocess.Popen[bytes]) -> None:
    """Closes the process's input (it exits at end of input) and reaps it."""
    try:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        process.kill()
        process.wait()
    finally:
        if process.stdout is not None:
            process.stdout.close()


def tree_entries(data: bytes) -> list[str]:
    """Returns the entry names of a raw tree object (`<mode> <name>\\0<20-byte id>` repeated), sorted."""
    names, at = [], 0
    while at < len(data):
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        names.append(data[space + 1:nul].decode("utf-8", "surrogateescape"))
        at = nul + 21
    return sorted(names)


class GitSession:
    """What one run asks the repository again and again: objects, whether a remote exists, the commit identity,
    the default branch, which ref names are valid, and answers that only depend on immutable objects.

    Made once per `autoloop run` (or per MemoryStore when none is passed) and closed at its end.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.repo = open_repo(self.root)
        self.objects = ObjectReader(self.repo)
        self._remotes: set[str] | None = None
        self._identity: dict[str, str] | None = None
        self._default_branches: dict[str, str] = {}
        self._valid_refs: set[str] = set()
        self._answers: dict[str, tuple[Hashable, object]] = {}  # kind → its last (key, answer)

    def default_branch(self, remote: str) -> str:
        """Returns the remote's default branch (see command.default_branch), asked once per session."""
        if remote not in self._default_branches:
            self._default_branches[remote] = default_branch(self.root, remote)
        return self._default_branches[remote]

    def check_ref_format(self, ref: str, hint: str) -> None:
        """Raises GitError unless `ref` is a valid ref name (`git check-ref-format`, asked once per name)."""
        if ref not in self._valid_refs:
            run(self.repo, "check-ref-format", ref, hint=hint)
            self._valid_refs.add(ref)

    def cached(self, kind: str, key: Hashable, compute: Callable[[], T]) -> T:
        """Returns compute(), reused while the same `key` is asked for again (one answer kept per kind).

        Only for answers fixed by their key, such as a log read from a commit named by its sha; keeping
        the last one only holds memory flat over a long run.
        """
        last = self._answers.get(kind)
        if last is not None and last[0] == key:
            return last[1]  # type: ignore[return-value]
        answer = compute()
        self._answers[kind] = (key, answer)
        return answer

    def has_remote(self, remote: str) -> bool:
        """Returns whether the repository has this remote (asked once per session)."""
        if self._remotes is None:
            listed = call(self.repo, "remote")
            self._remotes = set(listed.text.split()) if listed.ok else set()
        return remote in self._remotes

    def object_format(self) -> str:
        """Returns the repository's object hash, sha1 or sha256 (read from its config, no process)."""
        reader = self.repo.config_reader("repository")
        return str(reader.get_value("extensions", "objectformat", "sha1")).lower()

    def identity_env(self) -> dict[str, str]:
        """Returns the commit identity environment (asked once per session)."""
        if self._identity is None:
            self._identity = identity_env(self.repo)
        return dict(self._identity)

    def close(self) -> None:
        """Stops the session's git process."""
        self.objects.close()

    def __enter__(self) -> GitSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
