"""The memory branch: state files kept on `memory/autoloop`, read and written through git objects only.

Nothing here touches the user's working tree, index or HEAD: blobs and the trees on the changed paths
are written to the object database (git_trees.overlay computes the trees), commits are made with
`commit-tree`, and the branch moves only by compare-and-swap (`update-ref <ref> <new> <old>`).
"""

from __future__ import annotations

import builtins
import functools
import logging
import os
import random
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, NamedTuple

import git

from autoloop_py import faults
from autoloop_py.errors import GitError, StateError
from autoloop_py.git.command import (
    call,
    GitResult,
    Running,
    failure,
    fetch_branches,
    finish_push,
    is_ancestor,
    push_branch,
    run,
    start,
    start_push,
    tree_paths,
    update_ref,
)
from autoloop_py.git.objects import GitSession
from autoloop_py.git.push_refusal import ACCESS, SIZE, describe, read_refusal
from autoloop_py.git.trees import overlay
from autoloop_py.redact import Redactor, from_environment

logger = logging.getLogger(__name__)

MEMORY_BRANCH = "memory/autoloop"
ORPHANED_PREFIX = "refs/autoloop/orphaned/"

Change = Callable[[str | None], str]
Extra = Callable[[], Mapping[str, str | bytes]]


@dataclass(frozen=True)
class MemoryConfig:
    """Where the memory branch lives and how hard update() tries.

    Attributes:
        branch: the branch holding state files (`<program>.md` at its root).
        remote: the remote to sync and push to, when the repository has it.
        max_attempts: read-modify-write attempts before update() gives up.
        backoff: seconds before the first retry; doubles each retry, with jitter, up to max_backoff.
        max_backoff: the longest pause between two attempts.
    """

    branch: str = MEMORY_BRANCH
    remote: str = "origin"
    # Sixteen runners on two cores lost a record after 6 attempts; 12 wait up to ~35 s in all.
    max_attempts: int = 12
    backoff: float = 0.2
    max_backoff: float = 4.0


@dataclass(frozen=True)
class MemoryCommit:
    """One commit of the memory branch, as `git log` shows it.

    Attributes:
        sha: the commit.
        author: its author's name.
        date: its author date, ISO 8601.
        message: its full message.
    """

    sha: str
    author: str
    date: str
    message: str

    @property
    def subject(self) -> str:
        """Returns the message's first line."""
        return _subject(self.message)


class Update(NamedTuple):
    """One update() of the memory branch, kept to redo it when its push loses to another writer."""

    path: str
    change: Change
    message: str
    extra: Extra | None


class _Retry(Exception):
    """One update() attempt lost a race; `sha` is the commit it left on the local branch, if any."""

    def __init__(self, reason: str, sha: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sha = sha


def _subject(message: str) -> str:
    """Returns the first line of a commit message, for the reflog."""
    return (message.splitlines() or ["autoloop memory"])[0]


def check_path(path: str) -> None:
    """Raises StateError unless `path` is a plain relative path inside the memory branch."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise StateError(f"invalid memory path {path!r}; use a relative path such as 'name.md'")


class MemoryStore:
    """Files on the memory branch, with a concurrency-safe read-modify-write."""

    def __init__(
        self,
        repo_root: Path,
        config: MemoryConfig = MemoryConfig(),
        rng: random.Random | None = None,
        session: GitSession | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.repo_root = Path(repo_root)
        # Every byte written to the branch (state files, trace rows and blobs, messages) passes through it.
        self._redactor = redactor if redactor is not None else from_environment(os.environ)
        self.config = config
        # A run passes its session so that one git process serves all its reads; else the store has its own.
        self.session = session if session is not None else GitSession(self.repo_root)
        self._repo = self.session.repo
        self._ref = f"refs/heads/{config.branch}"
        self._rng = rng if rng is not None else random.Random(os.getpid())
        self._pushing = f"push {config.remote} {config.branch}"  # the session's name of a push left running
        self._recording = f"record {config.branch}"  # and of a record left to commit (update_later)

    def has_remote(self) -> bool:
        """Returns whether the configured remote exists in this repository."""
        return self.session.has_remote(self.config.remote)

    def sync(self, reuse_listing: bool = False) -> None:
        """Brings the local branch up to date with the remote; diverged local commits are kept aside.

        reuse_listing: take the remote's tip from the listing the session keeps for this iteration, if any.
        """
        if not self.has_remote():
            logger.debug("no remote %r; memory stays local", self.config.remote)
            return
        heard = reuse_listing and self.session.listed(self.config.remote, [self.config.branch])
        if heard and self.session.deferred(self._pushing):
            return  # nothing new was heard from the remote since this run's last update, whose push is on its way
        if not heard:
            # What the remote says now is compared with a local branch whose push is over. A record left to commit
            # stays so: when the remote moved, its commit is made on the remote's records (update()'s retry).
            self.session.settle(self._pushing)
        remote_tip = self._fetch(reuse_listing)
        local = self.tip()
        if remote_tip is None or remote_tip == local:
            return
        if local is None or is_ancestor(self._repo, local, remote_tip):
            self._move(remote_tip, local, "sync memory from remote")
        elif is_ancestor(self._repo, remote_tip, local):
            logger.info("%s is ahead of %s; keeping the local commits", self.config.branch, self.config.remote)
        else:
            kept = self._orphan(local)
            self._move(remote_tip, local, "reset memory to remote")
            logger.warning(
                "%s diverged from %s; local commits kept at %s, branch reset to the remote",
                self.config.branch,
                self.config.remote,
                kept,
            )

    def publish(self) -> bool:
        """Pushes local commits the remote lacks (an interrupted run's); returns whether it pushed any."""
        if not self.has_remote() or self.session.deferred(self._pushing):
            return False  # a push of this run's last update is on its way (settle() finishes it)
        local = self.tip()
        remote_tip = self._tracking_tip()
        if local is None or local == remote_tip or (remote_tip and not is_ancestor(self._repo, remote_tip, local)):
            return False
        pushed = push_branch(self._repo, self.config.remote, local, self.config.branch, remote_tip,
                             resolve=self.session.objects.commit_sha)
        if not pushed.ok:
            logger.warning("could not push %s: %s; the next update retries", self.config.branch, pushed.stderr.strip())
        else:
            self.session.landed(self.config.remote, self.config.branch, local)
        return pushed.ok

    def read(self, path: str, at: str | None = None) -> str | None:
        """Returns the text of `path` at the branch tip (or commit `at`), or as a record left to commit wrote it."""
        check_path(path)
        return self.read_many([path], at)[path]

    def read_many(self, paths: builtins.list[str], at: str | None = None) -> dict[str, str | None]:
        """Returns each path's text at one branch tip (or commit `at`), or as a record left to commit wrote it."""
        tip, unwritten = at or self.tip(), self.unwritten()
        return {path: _text(unwritten[path]) if path in unwritten else self._read_at(tip, path) for path in paths}

    def unwritten(self) -> Mapping[str, str | bytes]:
        """Returns the files of a record left to commit (update_later) by this session, path → content."""
        return self.session.unwritten.get(self.config.branch, {})

    def tip(self) -> str | None:
        """Returns the sha of the local branch (None when it does not exist)."""
        return self.session.objects.commit_sha(self._ref)

    def read_at(self, commit: str, path: str) -> str | None:
        """Returns the text of `path` in `commit` (None when the file is absent there)."""
        check_path(path)
        return self._read_at(commit, path)

    def commits(
        self,
        path: str,
        *,
        since: str | None = None,
        grep: str | None = None,
        limit: int | None = None,
        deleted: bool = False,
        at: str | None = None,
    ) -> builtins.list[MemoryCommit]:
        """Returns the branch's commits that changed `path`, newest first (at: up to that commit, not the tip).

        Only those after `since`, whose message holds `grep` (fixed text), or that deleted the file (`deleted`).
        """
        check_path(path)
        tip = at or self.tip()
        if tip is None or since == tip:  # `tip..tip` names no commit
            return []
        args = ["log", "--format=%H%x1f%an%x1f%aI%x1f%B%x1e"]
        args += [f"-n{limit}"] if limit else []
        args += ["-F", f"--grep={grep}"] if grep else []
        args += ["--diff-filter=D"] if deleted else []
        found = call(self._repo, *args, f"{since}..{tip}" if since else tip, "--", path)
        if not found.ok:
            raise failure(found, self._repo, "the repository may be corrupt; run `git fsck`")
        records = (record.strip("\n").split("\x1f", 3) for record in found.text.split("\x1e"))
        return [MemoryCommit(*parts) for parts in records if len(parts) == 4]

    def tip_commit(self, path: str, at: str | None = None) -> MemoryCommit | None:
        """Returns the branch tip (or the commit `at`) as commits(path) lists it when it changed `path`, else None.

        Read through the session's object reader (no git process): the tip's parent is its only one (or it has
        none) and the file's entry differs from the parent's.
        """
        check_path(path)
        tip = at or self.tip()
        commit = self.session.objects.commit(tip) if tip is not None else None
        if commit is None or len(commit.parents) > 1:
            return None
        entry = self.session.objects.entry(commit.tree, path)
        parent = self.session.objects.commit(commit.parents[0]) if commit.parents else None
        before = self.session.objects.entry(parent.tree, path) if parent is not None else None
        if entry is None and before is None or entry == before or (commit.parents and parent is None):
            return None
        return MemoryCommit(commit.sha, commit.author, commit.date, commit.message)

    def list(self, prefix: str = "", at: str | None = None) -> builtins.list[str]:
        """Returns the sorted paths at the tip (or commit `at`) starting with `prefix`, a waiting record's too."""
        tip = at or self.tip()
        paths = set() if tip is None else set(tree_paths(self._repo, tip, prefix))
        return sorted(paths.union(path for path in self.unwritten() if path.startswith(prefix)))

    def commit(self, files: Mapping[str, str | bytes], message: str) -> str:
        """Commits `files` on top of the local branch (a root commit if it is absent); returns the sha."""
        for path in files:
            check_path(path)
        self.settle()
        for _ in range(max(1, self.config.max_attempts)):
            tip = self.tip()
            sha = self._write_commit(tip, files, message)
            if sha == tip or update_ref(self._repo, self._ref, sha, tip, _subject(message)):
                return sha
        raise GitError(
            f"{self.config.branch} kept moving while committing; stop other autoloop runs and retry",
            path=self.repo_root,
        )

    def update(self, path: str, change: Change, message: str, extra: Extra | None = None) -> str:
        """Applies `change` to the text at `path`, commits and pushes, redoing it on fresh text if raced.

        In a session that owns its pushes, the push is left running (the next update, sync or the session's
        close finishes it, see settle): the local commit is the record, and reconcile pushes it after a crash.
        """
        check_path(path)
        self.settle()
        tip = self.tip()
        return self._update(Update(path, change, message, extra), tip, tip, None, 0, self.session.owns_pushes)

    def update_later(self, path: str, change: Change, message: str, extra: Extra | None = None) -> None:
        """update(), with the commit left for later: `change` is applied now, and this session's stores read the files
        at once (read, read_many, unwritten); commit_unwritten(), the next update or commit, or the session's close
        commits them, redone on fresh text as update() does when the branch moved meanwhile.
        """
        check_path(path)
        self.settle()
        before = self._read_at(self.tip(), path)
        text = change(before)
        files = {**(extra() if extra else {}), path: text}
        for written in files:
            check_path(written)

        def same(current: str | None) -> str:
            return text if current == before else change(current)  # change() also renders extra()'s files again

        def commit() -> None:
            self.session.unwritten.pop(self.config.branch, None)
            tip = self.tip()
            self._update(Update(path, same, message, extra), tip, tip, None, 0, self.session.owns_pushes)

        self.session.defer(self._recording, commit)
        self.session.unwritten[self.config.branch] = files

    def commit_unwritten(self) -> None:
        """Commits the record update_later() left, if any; its push is left running in a session that owns them."""
        self.session.settle(self._recording)

    def settle(self) -> None:
        """Commits a record left for later, then finishes the push an earlier update left running; a push another
        writer beat is redone on their records."""
        self.session.settle(self._recording)
        self.session.settle(self._pushing)

    def _update(
        self, update: Update, base: str | None, expected: str | None, mine: str | None, first: int, defer: bool
    ) -> str:
        """Runs update()'s attempts from number `first` on (after the first: on the remote's fresh tip)."""
        reason = "no attempt made"
        for attempt in range(first, max(1, self.config.max_attempts)):
            if attempt:
                self._pause(attempt)
                base, expected = self._rebase_point(base, mine)
            try:
                return self._attempt(base, expected, update, defer and not attempt)
            except _Retry as retry:
                mine, reason = retry.sha, retry.reason
                logger.info("memory update of %s, attempt %d: %s", update.path, attempt + 1, reason)
        raise GitError(
            f"could not record {update.path} on {self.config.branch} after {self.config.max_attempts} attempts "
            f"({reason}); check access to '{self.config.remote}' and rerun",
            path=self.repo_root,
        )

    def _attempt(self, base: str | None, expected: str | None, update: Update, defer: bool = False) -> str:
        """Commits change(text at base) on base, moves the local branch from `expected`, and pushes (defer: starts
        the push and leaves it running, see settle)."""
        path, change, message, extra = update
        text = change(self._read_at(base, path))
        # extra() runs after change() so that files derived from the update (ids, iteration numbers) match it.
        files = dict(extra() if extra else {})
        for extra_path in files:
            check_path(extra_path)
        files[path] = text
        sha = self._write_commit(base, files, message)
        if sha != expected and not update_ref(self._repo, self._ref, sha, expected, _subject(message)):
            raise _Retry("the local branch moved during the update")
        self.session.pushed[self._ref] = sha  # the runner's own move, when made while the model is asked
        faults.checkpoint("after-state-commit")
        if self.has_remote():
            seen = self._tracking_tip()
            # _write_commit returned base itself or a child of it.
            pushing = start_push(self._repo, self.config.remote, sha, self.config.branch, seen, built_on=base)
            if defer and not isinstance(pushing, GitResult):
                self.session.pushed[f"refs/remotes/{self.config.remote}/{self.config.branch}"] = sha
                self.session.defer(self._pushing, lambda: self._finish(pushing, sha, base, update))
                return sha
            self._landed(path, sha, self._pushed(pushing, sha))
        return sha

    def _pushed(self, pushing: Running | GitResult, sha: str) -> GitResult:
        """Returns the outcome of a push start_push started (the tracking ref moved when it landed)."""
        if isinstance(pushing, GitResult):
            return pushing
        resolve = self.session.objects.commit_sha
        return finish_push(self._repo, pushing, self.config.remote, sha, self.config.branch, resolve=resolve)

    def _landed(self, path: str, sha: str, pushed: GitResult) -> None:
        """Notes a push of `sha` that landed; raises GitError when retrying cannot help, _Retry when it can."""
        if not pushed.ok:
            refusal = read_refusal(pushed.stderr)
            if refusal.kind in (SIZE, ACCESS):  # retrying cannot help; say why at once
                raise GitError(f"could not record {path} on {self.config.branch}: "
                               f"{describe(refusal, self.config.remote)}", path=self.repo_root)
            raise _Retry(f"push rejected: {pushed.stderr.strip()}", sha)
        self.session.landed(self.config.remote, self.config.branch, sha)

    def _finish(self, pushing: Running, sha: str, base: str | None, update: Update) -> None:
        """Ends a push an update left running; one another writer beat redoes the update on the remote's records."""
        try:
            self._landed(update.path, sha, self._pushed(pushing, sha))
        except _Retry as retry:
            logger.info("memory update of %s, attempt 1: %s", update.path, retry.reason)
            self._update(update, base, sha, sha, 1, defer=False)

    def _rebase_point(self, prev_base: str | None, mine: str | None) -> tuple[str | None, str | None]:
        """Returns (base, expected local tip) for a retry: the fresh remote tip, unless local is ahead."""
        local = self.tip()
        # Our own failed commit is replaced; only what it was built on could hold unpushed work.
        keep = prev_base if mine is not None and local == mine else local
        remote_tip = self._fetch() if self.has_remote() else None
        if remote_tip is None or keep == remote_tip:
            return keep, local
        if keep is None or is_ancestor(self._repo, keep, remote_tip):
            return remote_tip, local
        if is_ancestor(self._repo, remote_tip, keep):
            return keep, local
        kept = self._orphan(keep)
        logger.warning("unpushed memory commits diverged from the remote; kept at %s", kept)
        return remote_tip, local

    def _pause(self, attempt: int) -> None:
        """Sleeps an exponential backoff with jitter before retry number `attempt`."""
        delay = min(self.config.max_backoff, self.config.backoff * (2 ** (attempt - 1))) * (0.5 + self._rng.random())
        time.sleep(delay)

    def _tracking_tip(self) -> str | None:
        """Returns what was last fetched of (or pushed to) the remote branch (see command.tracking_tip).

        Reads it without a process.
        """
        return self.session.objects.commit_sha(f"refs/remotes/{self.config.remote}/{self.config.branch}")

    def _fetch(self, reuse_listing: bool = False) -> str | None:
        """Fetches the branch from the remote; returns the remote tip or None if the remote lacks it."""
        remote, branch = self.config.remote, self.config.branch
        listed = self.session.remote_tips(remote, [branch], reuse=reuse_listing)
        found = fetch_branches(self._repo, remote, [branch], self.session.objects.commit_sha, listed)
        return found.get(branch)

    def _move(self, new: str, old: str | None, reason: str) -> None:
        """Moves the local branch from `old` to `new`, or raises GitError if someone moved it first."""
        if not update_ref(self._repo, self._ref, new, old, reason):
            raise GitError(
                f"{self.config.branch} moved while syncing (another autoloop run?); rerun", path=self.repo_root
            )

    def _orphan(self, sha: str) -> str:
        """Keeps `sha` reachable under refs/autoloop/orphaned/<utc-timestamp>; returns that ref."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        for suffix in range(100):
            ref = ORPHANED_PREFIX + stamp + (f"-{suffix}" if suffix else "")
            if update_ref(self._repo, ref, sha, None, "keep diverged memory commits"):
                return ref
        raise GitError(f"cannot create a ref under {ORPHANED_PREFIX}; prune old ones and rerun", path=self.repo_root)

    def _read_at(self, commit: str | None, path: str) -> str | None:
        """Returns the text of `path` in `commit` (None if commit or file is absent)."""
        if commit is None:
            return None
        blob = self.session.objects.get(f"{commit}:{path}")
        if blob is None or blob.kind != "blob":
            return None
        try:
            return blob.data.decode("utf-8")
        except UnicodeDecodeError as err:
            line = blob.data.count(b"\n", 0, err.start) + 1
            message = f"not UTF-8 text on {self.config.branch} (byte {err.start}); fix or delete the file"
            raise StateError(message, path=path, line=line) from err

    def _write_commit(self, parent: str | None, files: Mapping[str, str | bytes], message: str) -> str:
        """Returns a new commit of `files` over parent's tree, or `parent` itself if nothing changes."""
        tree = self._write_tree(parent, files)
        if parent is not None and tree == self.session.objects.tree_of(parent):
            return parent
        parents = ["-p", parent] if parent else []
        env = self.session.identity_env()
        return run(self._repo, "commit-tree", tree, *parents, "-m", self._redactor.text(message), env=env)

    def _write_tree(self, parent: str | None, files: Mapping[str, str | bytes]) -> str:
        """Returns the tree of `parent` with `files` written over it.

        No git process in a SHA-1 repository, whatever the number of files or the size of the branch: the
        blobs and the trees on the changed paths (computed by git_trees.overlay) go to the object database.
        """
        base = self.session.objects.tree_of(parent) if parent is not None else None
        if parent is not None and base is None:
            raise GitError(f"cannot read the tree of {parent}; run `git fsck`", path=self.repo_root)
        # Every byte written to the branch passes the redactor: no secret value lands in a blob.
        blobs = self.session.write_objects("blob", [
            self._redactor.data(content.encode("utf-8") if isinstance(content, str) else content)
            for content in files.values()
        ])
        root, trees = overlay(self._raw_tree, base, dict(zip(files, blobs)), self.session.object_format())
        written = self.session.write_objects("tree", list(trees.values()))
        if written != list(trees):
            raise GitError("git stored different trees than the runner computed; run `git fsck`", path=self.repo_root)
        return root

    def _raw_tree(self, sha: str) -> bytes | None:
        found = self.session.objects.get(sha)
        return found.data if found is not None and found.kind == "tree" else None


def _text(content: str | bytes) -> str:
    return content if isinstance(content, str) else content.decode("utf-8")


# A memory commit leaves about eight loose objects (blobs, trees, the commit); packing every
# PACK_EVERY recorded iterations keeps them in the hundreds instead of tens of thousands.
PACK_EVERY = 25
PACK_EVERY_ENV = "AUTOLOOP_PACK_EVERY"  # another interval (0: never), for stress runs of the packing


def pack_if_due(repo_root: Path, iteration: int, every: int | None = None, session: GitSession | None = None) -> bool:
    """Packs the repository's loose objects after every `every`-th recorded iteration; returns whether it did.

    `git repack -d` moves reachable loose objects into one new pack; `git gc --auto` then merges packs
    once there are many (git's own thresholds). Called after the program lock is released. In a session that
    owns its pushes (a run on this machine) both are left running beside the next iterations, and the session
    finishes them (the next packing or its close); returns True once they are started.
    """
    every = pack_every(os.environ) if every is None else every
    if every <= 0 or iteration <= 0 or iteration % every:
        return False
    if session is not None and session.owns_pushes:
        session.defer("pack", functools.partial(_packed, session.repo, start(session.repo, "repack", "-d", "-q")))
        return True
    session = GitSession(repo_root)
    try:
        return _packed(session.repo, start(session.repo, "repack", "-d", "-q"))
    finally:
        session.close()


def pack_every(environ: Mapping[str, str]) -> int:
    """Returns the packing interval: AUTOLOOP_PACK_EVERY when it is a whole number, else PACK_EVERY."""
    text = environ.get(PACK_EVERY_ENV, "").strip()
    return int(text) if text.isdigit() else PACK_EVERY


def _packed(repo: git.Repo, repacking: Running) -> bool:
    """Waits for the repack, then lets `git gc --auto` merge packs; returns whether the repack succeeded."""
    packed = repacking.result()
    if not packed.ok:
        logger.warning("could not pack the repository's objects: %s", packed.stderr.strip())
        return False
    call(repo, "-c", "gc.autoDetach=false", "gc", "--auto", "--quiet")
    return True
