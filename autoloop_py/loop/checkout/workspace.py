"""The workspace: a program's branch `autoloop/<name>` checked out in the runner's private, detached worktree.

The user's own checkout is never touched, even when it has the program branch checked out:
the branch moves only by compare-and-swap (`update-ref <ref> <new> <old>`), and every file
operation happens in a worktree under the system temp directory. Only the runner works in that
worktree: agents and evaluations get standalone copies of it (candidate_dir.py), never the worktree,
whose `.git` file leads to the user's repository.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterable, Iterator, Mapping

import git

from autoloop_py import tempdirs
from autoloop_py.errors import AutoloopError, EditError, GitError
from autoloop_py.git.command import (
    call,
    changed_paths,
    common_dir,
    default_branch,
    failure,
    fetch_branches,
    has_remote,
    identity_env,
    is_ancestor,
    open_repo,
    push_branch,
    rev_parse,
    run,
    update_ref,
)
from autoloop_py.git.objects import GitSession
from autoloop_py.loop.checkout.worktree_restore import restore

__all__ = ["BranchSync", "Workspace", "Worktrees", "default_branch"]

logger = logging.getLogger(__name__)

# Beside each worktree, the process that owns it: a later run removes worktrees whose owner died.
OWNER_FILE = tempdirs.OWNER_FILE


@dataclass(frozen=True)
class BranchSync:
    """How prepare() brought the program branch up to date with its base.

    Attributes:
        action: "created" (new branch), "fast-forwarded" (moved to the base or remote, nothing lost),
            "merged" (the base merged in), "up-to-date", or "ahead" (has commits the base lacks).
    """

    action: str


@dataclass(frozen=True)
class Written:
    """What a kept worktree holds: the commit it was checked out at, and the paths the runner wrote since.

    Attributes:
        commit: the commit its HEAD, index and files matched.
        paths: the repository-relative paths written since (nothing else changed).
    """

    commit: str
    paths: frozenset[str]


class Worktrees:
    """The private worktrees one `autoloop run` keeps between its iterations, one per program, removed at its end.

    A kept worktree is checked out anew (`checkout --force`, `clean -ffdx`) by the next iteration's
    prepare(): two git processes instead of adding and removing a worktree every iteration. When that
    iteration runs on the commit the worktree was left at, the files written since are put back from the
    commit instead (worktree_restore.py), with no git process.
    """

    def __init__(self, repo_root: Path) -> None:
        self.repo_root = Path(repo_root)
        # program → the temporary folder holding its `worktree`, and what that holds when known
        self._kept: dict[str, tuple[Path, Written | None]] = {}

    def take(self, program: str) -> tuple[Path | None, Written | None]:
        """Returns the folder of the program's kept worktree (no longer kept; None when there is none) and what it
        held when kept (None: unknown, it is checked out anew)."""
        return self._kept.pop(program, (None, None))

    def keep(self, program: str, folder: Path, written: Written | None = None) -> None:
        """Keeps the program's worktree folder for its next iteration (one that was kept already is removed)."""
        previous, _ = self._kept.pop(program, (None, None))
        if previous is not None and previous != folder:
            with open_repo(self.repo_root) as repo:
                remove_worktree(repo, previous)
        self._kept[program] = (folder, written)

    def close(self) -> None:
        """Removes every kept worktree."""
        if not self._kept:
            return
        folders, self._kept = [folder for folder, _ in self._kept.values()], {}
        with open_repo(self.repo_root) as repo:
            for folder in folders:
                remove_worktree(repo, folder)

    def __enter__(self) -> Worktrees:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Workspace:
    """The program branch autoloop/<name> checked out in a private worktree."""

    def __init__(
        self, repo_root: Path, program: str, *, base_branch: str | None = None, remote: str = "origin",
        session: GitSession | None = None, worktrees: Worktrees | None = None,
    ) -> None:
        """session: the run's git session, whose lookups (remotes, default branch, identity) it reuses;
        worktrees: the run's kept worktrees, where close() leaves this one for the next prepare()."""
        self.repo_root = Path(repo_root)
        self._session = session
        self._worktrees = worktrees
        self.program = program
        self.branch = f"autoloop/{program}"
        self.remote = remote
        self.base_branch = base_branch
        self._repo = session.repo_at(self.repo_root) if session is not None else open_repo(self.repo_root)
        self._ref = f"refs/heads/{self.branch}"
        self._tmp: Path | None = None
        self._worktree: git.Repo | None = None
        self._tip: str | None = None
        self._remote_tip: str | None = None
        self.base_ref = base_branch or "the default branch"  # what the branch starts from, for messages
        # The commit the worktree matches but for the paths written since (None: unknown, e.g. a failed commit).
        self._written: Written | None = None
        # The base branch's commit prepare() brought the program branch up to date with.
        self.base_sha: str | None = None

    @property
    def path(self) -> Path:
        """Returns the worktree root; only valid between prepare() and close()."""
        if self._worktree is None or self._tmp is None:
            raise AutoloopError(f"the workspace of {self.branch} is not prepared; call prepare() first")
        return self._tmp / "worktree"

    def prepare(self) -> BranchSync:
        """Brings the program branch up to date with the base and checks it out in a private worktree.

        The remote is asked afresh: what another run pushed while this one loaded its state is built on.
        """
        self.close()
        hint = f"rename program {self.program!r}"
        if self._session is not None:
            self._session.check_ref_format(self._ref, hint)
            base_name = self.base_branch or self._session.default_branch(self.remote)
        else:
            run(self._repo, "check-ref-format", self._ref, hint=hint)
            base_name = self.base_branch or default_branch(self.repo_root, self.remote)
        tips: dict[str, str] = {}
        if self._has_remote():
            wanted = [base_name, self.branch]
            resolve = self._session.objects.commit_sha if self._session is not None else None
            # A run that owns its pushes keeps the remote's listing a while (see GitSession); else it is asked now.
            listed = (self._session.remote_tips(self.remote, wanted, reuse=self._session.owns_pushes)
                      if self._session is not None else None)
            tips = fetch_branches(self._repo, self.remote, wanted, resolve, listed)
        self._remote_tip = tips.get(self.branch)
        self.base_ref = f"{self.remote}/{base_name}" if base_name in tips else base_name
        base = self._base_sha(base_name, tips)
        local = self._rev_parse(self._ref)
        start, action = self._start_point(local, tips.get(self.branch), base)
        self._add_worktree(start)
        try:
            tip, action = self._catch_up(start, base, base_name, action)
            self._move_branch(local, tip, "rerun; another run may be preparing this program")
        except AutoloopError:
            self.close(keep=False)  # a worktree a failed merge left is not handed on
            raise
        self._tip, self.base_sha = tip, base
        self._written = Written(tip, frozenset())
        logger.info("%s %s (worktree %s)", self.branch, action, self.path)
        return BranchSync(action)

    def files(self, paths: Iterable[str]) -> dict[str, str]:
        """Returns the current contents of those paths that exist as UTF-8 files in the worktree."""
        contents: dict[str, str] = {}
        for rel in paths:
            target = self._checked(rel)
            if not target.is_file():
                continue
            try:
                contents[rel] = target.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                logger.warning("skipping %s: not UTF-8 text", rel)
        return contents

    def write(self, changes: Mapping[str, str | None]) -> None:
        """Writes (str) or deletes (None) files in the worktree; refuses any path outside it."""
        targets = {rel: self._checked(rel) for rel in changes}
        if self._written is not None:
            self._written = Written(self._written.commit, self._written.paths | frozenset(changes))
        for rel, content in changes.items():
            target = targets[rel]
            if content is None:
                if target.is_symlink() or target.is_file():
                    target.unlink()
                elif target.exists():
                    raise EditError(f"cannot delete {rel!r}: it is a directory; name the files inside it")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode("utf-8"))

    def tracked(self, folder: Path) -> set[str] | None:
        """Returns the repo-relative paths of the files the checkout tracks under `folder`, read from the tip's tree
        (which the index holds after prepare()) without a git process; None without the run's session."""
        if self._session is None or self._tip is None:
            return None
        listed = self._session.objects.files(f"{self._tip}:{folder.as_posix()}")
        return {f"{folder.as_posix()}/{path}" for path in listed or []}

    def changed_paths(self) -> list[str]:
        """Returns the sorted paths changed versus the worktree's HEAD, tracked and untracked."""
        return changed_paths(self._wt())

    def reset(self) -> None:
        """Discards every change in the worktree, untracked and ignored files included."""
        worktree = self._wt()
        self._written = None
        run(worktree, "reset", "--hard", "--quiet", "HEAD")
        run(worktree, "clean", "-fdxq")

    def commit_candidate(self, message: str) -> str:
        """Commits all changes in the worktree, moves the program branch to it, and returns the sha."""
        sha = self._commit_all(message, f"on {self.branch}")
        self._written = Written(sha, frozenset())  # everything written is in the commit
        self._move_branch(self._tip, sha, f"the candidate is kept at {sha}; rerun prepare()")
        self._tip = sha
        return sha

    def keep_aside(self, message: str, ref: str) -> str:
        """Commits the worktree's changes without moving the program branch, at `ref` here (not yet on the remote).

        For a tick's improving candidate that lost to a sibling: it is not the branch's, but it is kept. The
        publish pushes the ref (`push_aside`) only once the tick's records are on the memory branch.
        Returns the commit's sha.
        """
        sha = self._commit_all(message, f"for {ref}")
        update_ref(self._repo, ref, sha, None, "autoloop: a tick's losing candidate")
        return sha

    def _commit_all(self, message: str, where: str) -> str:
        """Commits every change in the worktree (none: GitError naming `where`); returns the commit's sha."""
        worktree = self._wt()
        self._written = None  # until the caller knows what the worktree matches: the index is changed
        run(worktree, "add", "-A")
        if call(worktree, "diff", "--cached", "--quiet").ok:
            raise GitError(f"nothing to commit {where}; write a change first", path=self.path)
        env = self._session.identity_env() if self._session is not None else identity_env(worktree)
        run(worktree, "commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", message, env=env)
        return run(worktree, "rev-parse", "HEAD")

    def withdraw(self, sha: str) -> str:
        """Moves the program branch back to the candidate's parent; keeps the candidate under refs/autoloop/orphaned/.

        Used when another run advanced the remote branch first: the candidate was judged against a
        stale best, so it is not kept, but nothing is lost. Returns the ref that holds it.
        """
        parent = run(self._wt(), "rev-parse", f"{sha}^")
        keep = f"refs/autoloop/orphaned/{_slug(self.branch)}-{sha[:12]}"
        update_ref(self._repo, keep, sha, None, "autoloop: withdrawn candidate")
        self._move_branch(sha, parent, f"the candidate stays at {keep}")
        self._tip = parent
        return keep

    def push(self) -> None:
        """Pushes the runner's own tip to the remote branch by compare-and-swap against what prepare() fetched."""
        if not self._has_remote():
            logger.debug("no remote %r; %s stays local", self.remote, self.branch)
            return
        sha = self._tip
        if sha is None:
            raise AutoloopError(f"the workspace of {self.branch} is not prepared; call prepare() first")
        resolve = self._session.objects.commit_sha if self._session is not None else None
        first = push_branch(self._repo, self.remote, sha, self.branch, self._remote_tip, resolve=resolve)
        if not first.ok:
            remote_tip = fetch_branches(self._repo, self.remote, [self.branch]).get(self.branch)
            if remote_tip is not None and not is_ancestor(self._repo, remote_tip, sha):
                next_step = f"{self.remote} has commits {self.branch} lacks; rerun prepare() to merge them, then push"
                raise failure(first, self._repo, next_step)
            again = push_branch(self._repo, self.remote, sha, self.branch, remote_tip)
            if not again.ok:
                raise failure(again, self._repo, f"rerun prepare() and push {self.branch} again")
        self._remote_tip = sha
        if self._session is not None:
            self._session.landed(self.remote, self.branch, sha)

    def close(self, keep: bool = True) -> None:
        """Removes the private worktree, if any, or leaves it to the run's kept worktrees (when given and `keep`)."""
        if self._tmp is None:
            return
        if self._worktree is not None:
            self._worktree.close()
        if self._worktrees is not None and keep:
            self._worktrees.keep(self.program, self._tmp, self._written)
        else:
            remove_worktree(self._repo, self._tmp)
        self._tmp = self._worktree = self._tip = self._written = None

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _has_remote(self) -> bool:
        """Returns whether the configured remote exists."""
        if self._session is not None:
            return self._session.has_remote(self.remote)
        return has_remote(self._repo, self.remote)

    def _rev_parse(self, ref: str) -> str | None:
        """Returns the commit `ref` names (None: none), through the session's object reader when there is one."""
        return self._session.objects.commit_sha(ref) if self._session is not None else rev_parse(self._repo, ref)

    def _wt(self) -> git.Repo:
        """Returns the worktree's repository, or raises if prepare() has not run."""
        if self._worktree is None:
            raise AutoloopError(f"the workspace of {self.branch} is not prepared; call prepare() first")
        return self._worktree

    def _base_sha(self, base_name: str, tips: Mapping[str, str]) -> str:
        """Returns the base branch tip: the remote's when it has one, else the local branch's."""
        sha = tips.get(base_name) or self._rev_parse(f"refs/heads/{base_name}")
        if sha is None:
            raise GitError(
                f"base branch {base_name!r} exists neither locally nor on {self.remote!r}; "
                "create it (a new repository: commit your files first) or name another with --base-branch",
                path=self.repo_root,
            )
        return sha

    def _start_point(self, local: str | None, remote_tip: str | None, base: str) -> tuple[str, str | None]:
        """Returns the commit the program branch starts from, and the action that took, if any."""
        if local is None:
            return (remote_tip or base), "created"
        if remote_tip is None or remote_tip == local or is_ancestor(self._repo, remote_tip, local):
            return local, None
        if is_ancestor(self._repo, local, remote_tip):
            return remote_tip, "fast-forwarded"
        raise GitError(
            f"{self.branch} and {self.remote}/{self.branch} have diverged; merge them "
            f"(`git checkout {self.branch} && git pull {self.remote} {self.branch}`), push, and rerun",
            path=self.repo_root,
        )

    def _catch_up(self, start: str, base: str, base_name: str, action: str | None) -> tuple[str, str]:
        """Fast-forwards or merges the worktree onto the base; returns the new tip and the action."""
        behind, ahead = self._behind_ahead(base, start)
        if behind == 0:
            return start, action or ("ahead" if ahead else "up-to-date")
        if ahead == 0:
            run(self._wt(), "checkout", "--quiet", "--detach", base)
            return base, "fast-forwarded"
        return self._merge(base, base_name), "merged"

    def _behind_ahead(self, base: str, start: str) -> tuple[int, int]:
        """Returns how many commits `start` lacks of `base` and has beyond it.

        Fixed by the two shas: the run's session keeps the last answer, so an iteration after a rejected one
        (neither branch moved) asks no git process.
        """
        def count() -> tuple[int, int]:
            behind, ahead = run(self._repo, "rev-list", "--left-right", "--count", f"{base}...{start}").split()
            return int(behind), int(ahead)

        return self._session.cached("behind ahead", (base, start), count) if self._session is not None else count()

    def _merge(self, base: str, base_name: str) -> str:
        """Merges the base into the worktree's HEAD and returns the merge commit; aborts on conflict."""
        worktree = self._wt()
        message = f"Merge {base_name} into {self.branch}"
        flags = ["--no-ff", "--no-edit", "--no-verify", "--no-gpg-sign"]
        merged = call(worktree, "merge", *flags, "-m", message, base, env=identity_env(worktree))
        if merged.ok:
            return run(worktree, "rev-parse", "HEAD")
        conflicts = run(worktree, "diff", "--name-only", "--diff-filter=U").split("\n")
        call(worktree, "merge", "--abort")
        if not any(conflicts):
            raise failure(merged, worktree, f"merge {base_name} into {self.branch} by hand, then rerun")
        raise GitError(
            f"merging {base_name} into {self.branch} conflicts in {', '.join(conflicts)}; resolve it by hand "
            f"(`git checkout {self.branch} && git merge {base_name}`, fix, commit, push) and rerun",
            path=self.repo_root,
        )

    def _add_worktree(self, sha: str) -> None:
        """Checks `sha` out, detached, in the run's kept worktree or in a new one under the system temp directory."""
        kept, written = self._worktrees.take(self.program) if self._worktrees is not None else (None, None)
        if kept is not None and self._reuse(kept, sha, written):
            return
        self._tmp = tempdirs.make(f"autoloop-{_slug(self.program)}-")
        try:
            with worktree_admin(self._repo):
                run(self._repo, "worktree", "prune")
                run(self._repo, "worktree", "add", "--detach", str(self._tmp / "worktree"), sha)
        except AutoloopError:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
            raise
        self._worktree = git.Repo(self._tmp / "worktree")

    def _reuse(self, folder: Path, sha: str, written: Written | None = None) -> bool:
        """Checks `sha` out in a worktree an earlier iteration left, every other file removed; False (and the
        worktree removed) when it cannot be. written: what the worktree holds (the files written since it was at
        `sha` are put back from it, without git)."""
        same = written is not None and written.commit == sha and (folder / "worktree").is_dir()
        if same and written is not None and self._session is not None:
            if restore(folder / "worktree", self._session.objects, sha, written.paths):
                self._tmp, self._worktree = folder, git.Repo(folder / "worktree")
                return True
        try:
            worktree = git.Repo(folder / "worktree")
            # --detach: no branch moves whatever HEAD was on; a switch also drops a merge's or cherry-pick's state.
            run(worktree, "checkout", "--quiet", "--detach", "--force", sha)
            run(worktree, "clean", "-ffdxq")
        except (AutoloopError, git.GitError, OSError) as err:
            logger.debug("not reusing the worktree in %s: %s", folder, err)
            remove_worktree(self._repo, folder)
            return False
        self._tmp, self._worktree = folder, worktree
        return True

    def _move_branch(self, old: str | None, new: str, next_step: str) -> None:
        """Moves the program branch from `old` to `new` by compare-and-swap, or raises GitError."""
        if old == new:
            return
        if not update_ref(self._repo, self._ref, new, old, f"autoloop: {self.branch}"):
            moved = f"{self.branch} moved meanwhile (another run or a manual commit?)"
            raise GitError(f"{moved}; {next_step}", path=self.repo_root)

    def _checked(self, rel: str) -> Path:
        """Returns the worktree path for `rel`, or raises EditError if it escapes the worktree."""
        root = self.path.resolve()
        pure = PurePosixPath(rel)
        if not rel or pure.is_absolute() or Path(rel).is_absolute() or pure.parts[:1] == (".git",):
            raise EditError(f"refusing path {rel!r}: give a path relative to the repository root")
        target = root / rel
        resolved = target.resolve()
        if resolved == root or root not in resolved.parents:
            raise EditError(f"refusing path {rel!r}: it leads outside the worktree; name a file inside the repository")
        return target


def remove_worktree(repo: git.Repo, folder: Path) -> None:
    """Removes the private worktree in `folder` (and the folder): its files, then git's record of it (a prune drops
    the record of a worktree whose folder is gone, as `git worktree remove` would, one git process fewer)."""
    with worktree_admin(repo):
        shutil.rmtree(folder, ignore_errors=True)
        pruned = call(repo, "worktree", "prune")
        if not pruned.ok:
            logger.debug("git worktree prune: %s", pruned.stderr)


@contextmanager
def worktree_admin(repo: git.Repo) -> Iterator[None]:
    """Holds the repository's lock on worktree bookkeeping for the block.

    Runs of different programs share one repository: a `git worktree prune` deletes the empty
    `worktrees` folder that a concurrent `git worktree add` is about to fill, so these commands take turns.
    """
    path = common_dir(repo) / "autoloop" / "locks" / "worktrees.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # closing the descriptor releases the flock


def _slug(name: str) -> str:
    """Returns `name` reduced to characters safe in a directory name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "program"


def push_aside(root: Path, refs: Mapping[str, str], remote: str = "origin") -> None:
    """Pushes the side refs (ref → sha) a tick's losing candidates were kept at; a refused push is logged (the
    local ref still holds the commit)."""
    repo = open_repo(root)
    if not refs or not has_remote(repo, remote):
        return
    for ref, sha in refs.items():
        pushed = call(repo, "push", "--quiet", "--no-verify", "--force", remote, f"{sha}:{ref}")
        if not pushed.ok:
            logger.warning("could not push %s: %s; it stays in this clone", ref, pushed.stderr.strip())
