"""Git session: one long-lived `git cat-file --batch` per run, and the per-run lookups (remotes, identity) it caches.

An iteration reads dozens of objects (state file, trace rows, sources, ref tips); starting a git process
for each cost more than the rest of the iteration. Objects are immutable, so one process answers every
read of a run; refs are resolved by the same process, which reads the ref files anew on each request.
"""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Hashable, Iterable, Sequence, TypeVar

import git
from gitdb import IStream, LooseObjectDB

from autoloop_py.errors import GitError
from autoloop_py.git.command import (
    call,
    common_dir,
    default_branch,
    git_environment,
    guarded,
    hardened_command,
    hash_objects,
    identity_env,
    list_remote,
    location,
    open_repo,
    run,
    where,
)
from autoloop_py.git.trees import parse_tree

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


# A revision expression that starts at an object id (`<sha>`, `<sha>:<path>`, `<sha>^{commit}`) always names the
# same object: its answer is kept. One that starts at a ref name is asked anew each time.
_FIXED_RE = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})(?:$|[:^])")
KEPT_OBJECTS = 256
KEPT_SIZE = 256 << 10  # larger objects are not kept: the kept ones hold at most 64 MB


class ObjectReader:
    """Reads objects by any revision expression (`<sha>`, `<ref>`, `<commit>:<path>`) through one process.

    The answers to expressions that start at an object id are kept (the last KEPT_OBJECTS of up to KEPT_SIZE
    bytes): an iteration reads the same state file, trees and commits several times.
    """

    def __init__(self, repo: git.Repo) -> None:
        self._repo = repo
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.requests = 0  # how many objects were asked for (tests count them)
        self.exchanges = 0  # how many of them the process answered (the others were kept)
        self.starts = 0  # how many processes were started
        self._finalizer: weakref.finalize | None = None
        self._kept: OrderedDict[str, GitObject] = OrderedDict()

    def get(self, spec: str) -> GitObject | None:
        """Returns the object `spec` names, or None when it names none."""
        if not spec or "\n" in spec or "\r" in spec:
            return None
        with self._lock:
            self.requests += 1
            kept = self._kept.get(spec)
            if kept is not None:
                self._kept.move_to_end(spec)
                return kept
            for attempt in range(2):
                process = self._started()
                try:
                    self.exchanges += 1
                    return self._keep(spec, _exchange(process, spec))
                except (BrokenPipeError, OSError, EOFError) as err:
                    self._stop()
                    if attempt:
                        raise GitError(
                            f"`git cat-file --batch` stopped ({err}); run `git fsck`", path=where(self._repo)
                        ) from err
        return None

    def _keep(self, spec: str, found: GitObject | None) -> GitObject | None:
        """Returns `found`, kept when `spec` always names it (an absent object may arrive: it is asked again)."""
        if found is not None and len(found.data) <= KEPT_SIZE and _FIXED_RE.match(spec):
            self._kept[spec] = found
            if len(self._kept) > KEPT_OBJECTS:
                self._kept.popitem(last=False)
        return found

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

    def commit(self, sha: str) -> CommitInfo | None:
        """Returns the parts of the commit `sha` (None when it names no commit)."""
        found = self.get(sha)
        return parse_commit(found.sha, found.data) if found is not None and found.kind == "commit" else None

    def entry(self, tree: str, path: str) -> tuple[bytes, str] | None:
        """Returns (mode, id) of the entry at `path` (slash-separated) under the tree `tree`, None when absent."""
        parts = path.encode("utf-8", "surrogateescape").split(b"/")
        current = tree
        for depth, part in enumerate(parts):
            found = self.get(current)
            if found is None or found.kind != "tree":
                return None
            match = next(((mode, oid) for mode, name, oid in parse_tree(found.data, len(current) // 2) if name == part),
                         None)
            if match is None:
                return None
            if depth == len(parts) - 1:
                return match[0], match[1].hex()
            current = match[1].hex()
        return None

    def files(self, spec: str) -> list[str] | None:
        """Returns the sorted paths (relative to it) of every non-tree entry under the tree `spec` names, as
        `git ls-files` lists them in a checkout of it; None when spec names no tree."""
        found = self.get(spec)
        if found is None or found.kind != "tree":
            return None
        paths: list[str] = []
        for mode, name, oid in parse_tree(found.data, len(found.sha) // 2):
            path = name.decode("utf-8", "surrogateescape")
            if mode == b"40000":
                paths += [f"{path}/{inner}" for inner in self.files(oid.hex()) or []]
            else:
                paths.append(path)
        return sorted(paths)

    def names(self, spec: str) -> list[str]:
        """Returns the sorted entry names of the tree `spec` names ([] when it names no tree)."""
        found = self.get(spec)
        if found is None or found.kind != "tree":
            return []
        entries = parse_tree(found.data, len(found.sha) // 2)
        return sorted(name.decode("utf-8", "surrogateescape") for _, name, _ in entries)

    def close(self) -> None:
        """Stops the process (a later read starts a new one) and drops the kept answers."""
        with self._lock:
            self._stop()
            self._kept.clear()

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            # The same hardened command line and scrubbed environment as every other runner git command.
            env = {**git_environment(os.environ), **location(self._repo)}
            command = hardened_command(["cat-file", "--batch"], guarded(self._repo, env).arguments)
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


@dataclass(frozen=True)
class CommitInfo:
    """One commit object's parts.

    Attributes:
        sha: the commit.
        tree: its root tree.
        parents: its parents, in order.
        author: its author's name.
        date: its author date, ISO 8601 with the author's offset (as `git log --format=%aI` shows it).
        message: its message (as `git log --format=%B` shows it).
    """

    sha: str
    tree: str
    parents: tuple[str, ...]
    author: str
    date: str
    message: str


def parse_commit(sha: str, data: bytes) -> CommitInfo | None:
    """Returns the parts of a raw commit object (None when it has no tree header)."""
    head, _, body = data.partition(b"\n\n")
    tree, parents, author, date = "", [], "", ""
    for line in head.decode("utf-8", "replace").split("\n"):
        field, _, value = line.partition(" ")
        if field == "tree":
            tree = value
        elif field == "parent":
            parents.append(value)
        elif field == "author":
            author, date = _person(value)
    if not tree:
        return None
    return CommitInfo(sha, tree, tuple(parents), author, date, body.decode("utf-8", "replace"))


def _person(value: str) -> tuple[str, str]:
    """Returns (name, ISO 8601 date) of an `author`/`committer` header value: `Name <email> <epoch> <+hhmm>`."""
    name, _, rest = value.partition(" <")
    stamp = rest.rpartition("> ")[2].split()
    try:
        seconds, offset = int(stamp[0]), stamp[1]
        sign = -1 if offset.startswith("-") else 1
        zone = timezone(sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[3:5])))
        return name, datetime.fromtimestamp(seconds, zone).isoformat()
    except (IndexError, ValueError, OverflowError):
        return name, ""


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
    data = process.stdout.read(size + 1)  # a buffered reader: blocks until it has them all, or the end of output
    if len(data) != size + 1:
        raise EOFError("cut answer")
    return GitObject(sha, kind, data[:size])


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


# gitdb writes an object to a temporary file in objects/, makes objects/xx/, then renames the file into it. A
# `git prune-packed` (repack -d, gc) running beside it removes objects/xx/ once it has emptied it, so the rename
# may find no folder (ENOENT); git's own writers make their temporary file inside objects/xx/, which keeps it.
# Writing again makes the folder again: prune-packed empties each folder once, so a second loss is rare already.
_WRITE_TRIES = 8


def _store_loose(database: LooseObjectDB, kind: str, data: bytes) -> str:
    """Returns the id of `data` stored as a loose `kind` object, written again when a pruner removed its folder."""
    for _ in range(_WRITE_TRIES - 1):
        try:
            return _store(database, kind, data)
        except FileNotFoundError as err:
            orphan = Path(str(err.filename or ""))
            if orphan.parent == Path(database.root_path()) and orphan.name.startswith("obj"):
                orphan.unlink(missing_ok=True)  # gitdb's temporary file, which the failed rename left behind
            logger.debug("an object folder was pruned while %s was written to it; writing it again", err.filename2)
    return _store(database, kind, data)


def _store(database: LooseObjectDB, kind: str, data: bytes) -> str:
    return database.store(IStream(kind.encode(), len(data), io.BytesIO(data))).hexsha.decode("ascii")


class GitSession:
    """What one run asks the repository again and again: objects, whether a remote exists, the commit identity,
    the default branch, which ref names are valid, and answers that only depend on immutable objects.

    Made once per `autoloop run` (or per MemoryStore when none is passed) and closed at its end.

    A run that is the only writer of its own records (`autoloop run` on a machine, not an Actions job) passes
    owns_pushes: its memory pushes are then left running while the next iteration goes on (see `defer`), and the
    remote's listing is kept between iterations for `listing_seconds` (a push that lost to another writer is
    refused by its lease, and the branch is fetched then).
    """

    def __init__(self, root: Path, *, owns_pushes: bool = False, listing_seconds: float = 0.0) -> None:
        self.root = Path(root)
        self.owns_pushes = owns_pushes
        self.listing_seconds = listing_seconds
        self._deferred: dict[str, Callable[[], object]] = {}  # what → how to finish it
        self.repo = open_repo(self.root)
        self.objects = ObjectReader(self.repo)
        self._remotes: set[str] | None = None
        self._identity: dict[str, str] | None = None
        self._default_branches: dict[str, str] = {}
        self._valid_refs: set[str] = set()
        self._answers: dict[str, tuple[Hashable, object]] = {}  # kind → its last (key, answer)
        self._loose: LooseObjectDB | None = None
        self._format: str | None = None
        self._asked: dict[str, set[str]] = {}  # remote → every branch asked about in this session
        self._listings: dict[str, tuple[frozenset[str], dict[str, str]]] = {}  # remote → (branches listed, tips)
        self._listed_at: dict[str, float] = {}  # remote → time.monotonic() of its listing
        # Ref → the sha this run moved it to while candidate code may run: a remote-tracking ref when a push left
        # running lands, the memory branch when a record is committed while the model is asked (see `unwritten`).
        self.pushed: dict[str, str] = {}
        # Branch → path → content this run rendered and has not committed yet (a record left to commit while the
        # next model request is in flight): its memory stores read them over the branch's tip.
        self.unwritten: dict[str, dict[str, str | bytes]] = {}

    def repo_at(self, root: Path) -> git.Repo:
        """Returns the session's repository when `root` is its top-level directory, else opens the one at root."""
        return self.repo if Path(root) == self.root else open_repo(root)

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

    def remote_tips(self, remote: str, branches: Iterable[str], *, reuse: bool = False) -> dict[str, str]:
        """Returns branch → sha of those `branches` the remote has.

        One `git ls-remote` lists every branch this session asked about, so the next asker of the same
        iteration finds its branches listed. reuse: answer from the listing kept since the last
        forget_listing() when it covers `branches` (for the steps that start one iteration, moments apart);
        otherwise the remote is asked now.
        """
        names = set(branches)
        asked = self._asked.setdefault(remote, set())
        asked.update(names)
        kept = self._listings.get(remote)
        if not reuse or kept is None or not names <= kept[0]:
            listed = frozenset(asked)
            kept = (listed, list_remote(self.repo, remote, sorted(listed)))
            self._listings[remote] = kept
            self._listed_at[remote] = time.monotonic()
        return {branch: sha for branch, sha in kept[1].items() if branch in names}

    def listed(self, remote: str, branches: Iterable[str]) -> bool:
        """Returns whether remote_tips(remote, branches, reuse=True) answers from the kept listing, asking nothing."""
        kept = self._listings.get(remote)
        return kept is not None and set(branches) <= kept[0]

    def landed(self, remote: str, branch: str, sha: str) -> None:
        """Notes that this runner's push moved the remote's `branch` to `sha` (the kept listing says so now)."""
        kept = self._listings.get(remote)
        if kept is not None and branch in kept[0]:
            kept[1][branch] = sha

    def forget_listing(self) -> None:
        """Drops the kept listings older than `listing_seconds`: the next remote_tips() asks the remote for those,
        whatever `reuse` says (all of them unless the session owns its pushes)."""
        now = time.monotonic()
        for remote in [r for r, at in self._listed_at.items() if now - at >= self.listing_seconds]:
            self._listings.pop(remote, None)
            self._listed_at.pop(remote, None)

    def defer(self, what: str, finish: Callable[[], object]) -> None:
        """Keeps `finish` (the end of work left running, e.g. a push) until settle(what) or close() calls it."""
        self.settle(what)
        self._deferred[what] = finish

    def deferred(self, what: str) -> bool:
        """Returns whether work named `what` was left running and is not settled yet."""
        return what in self._deferred

    def settle(self, what: str) -> None:
        """Finishes the work named `what` that was left running, if any (its errors are raised here)."""
        finish = self._deferred.pop(what, None)
        if finish is not None:
            finish()

    def has_remote(self, remote: str) -> bool:
        """Returns whether the repository has this remote (asked once per session)."""
        if self._remotes is None:
            listed = call(self.repo, "remote")
            self._remotes = set(listed.text.split()) if listed.ok else set()
        return remote in self._remotes

    def write_objects(self, kind: str, contents: Sequence[bytes]) -> list[str]:
        """Stores every content as a `kind` object (blob, tree); returns their ids in order.

        In a SHA-1 repository through gitdb (GitPython's object database), with no git process: each object is
        written to a temporary file and renamed into place, as git does. Otherwise with one `git hash-object`.
        """
        if self.object_format() != "sha1":
            return hash_objects(self.repo, kind, contents)
        # gitdb's own loose database: GitPython's repo.odb would start a `git hash-object` per object.
        if self._loose is None:
            self._loose = LooseObjectDB(str(common_dir(self.repo) / "objects"))
        database = self._loose
        try:
            return [_store_loose(database, kind, data) for data in contents]
        except OSError as err:
            raise GitError(f"cannot write to the object database ({err}); check that you may write to "
                           f"{database.root_path()}", path=self.root) from err

    def object_format(self) -> str:
        """Returns the repository's object hash, sha1 or sha256 (read once per session from its config, no process)."""
        if self._format is None:  # fixed when the repository is made: git cannot convert one in place
            reader = self.repo.config_reader("repository")
            self._format = str(reader.get_value("extensions", "objectformat", "sha1")).lower()
        return self._format

    def identity_env(self) -> dict[str, str]:
        """Returns the commit identity environment (asked once per session)."""
        if self._identity is None:
            self._identity = identity_env(self.repo)
        return dict(self._identity)

    def close(self) -> None:
        """Finishes the work left running (see defer), then stops the session's git process."""
        try:
            while self._deferred:  # a record committed here leaves its push running: that is finished too
                self.settle(next(iter(self._deferred)))
        finally:
            self.objects.close()

    def __enter__(self) -> GitSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
