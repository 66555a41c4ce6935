"""Record integrity: the iterations the runner recorded are still in the state file, or nothing runs.

Every record the runner commits to the memory branch carries its idempotency key
(`Autoloop-Key: <program>:<iteration>:<token>`) in the commit message and in its history entry. A
commit made from a stale copy of the file (a worktree whose branch the runner moved meanwhile, an
old download pasted into GitHub's editor) silently puts back an older file: fewer iterations, the
newest records gone. The next iteration would then reuse their numbers. Before an iteration the
runner finds its newest record on the branch and checks that the file still holds it; when it does
not, it names the commit that removed it and how to restore it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from autoloop_py.errors import StateError
from autoloop_py.git.command import call, open_repo
from autoloop_py.loop.record.recording import parse_or_new, state_path
from autoloop_py.loop.record.recovery import key_slug, read_trailers
from autoloop_py.program.model import Program
from autoloop_py.state import file as statefile
from autoloop_py.state.history import KEY_TRAILER
from autoloop_py.state.memory import MemoryCommit, MemoryStore


@dataclass(frozen=True)
class Recorded:
    """The runner's newest record of a program on the memory branch.

    Attributes:
      key: its idempotency key.
      iteration: the iteration number its key names.
      commit: the memory-branch commit that recorded it.
    """

    key: str
    iteration: int
    commit: str


def key_iteration(key: str) -> int | None:
    """Returns the iteration number an idempotency key `<program>:<iteration>:<token>` names."""
    parts = key.rsplit(":", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def lost(state: statefile.StateFile, recorded: Recorded) -> str | None:
    """Returns what of the record the state file lost (None when it still holds it).

    The record is held when an entry carries its key, or a folded `Iters A–B` range covers its
    iteration; and Iteration Count must not be below its iteration, or the next one would reuse it.
    """
    count = state.machine.iteration_count
    if count < recorded.iteration:
        return f"Iteration Count is {count}, but iteration {recorded.iteration} was already recorded"
    for entry in state.history:
        if entry.key == recorded.key:
            return None
        if entry.is_range and (entry.iteration or 0) <= recorded.iteration <= (entry.last_iteration or 0):
            return None
    if recorded.key in statefile.render_state(state):
        return None  # the entry is there, out of place (e.g. its section's heading was deleted)
    return f"the history entry of iteration {recorded.iteration} (key {recorded.key}) is gone"


def numbering(state: statefile.StateFile) -> str | None:
    """Returns why the next iteration's number would repeat one in the history (None when it would not)."""
    count = state.machine.iteration_count
    numbers = [entry.last_iteration or entry.iteration or 0 for entry in state.history if entry.iteration is not None]
    highest = max(numbers, default=0)
    if highest > count:
        return f"Iteration Count is {count}, but the history already has iteration {highest}"
    return None


def problem_of(state: statefile.StateFile, recorded: Recorded | None) -> str | None:
    """Returns what makes the state file unsafe to record the next iteration in (None when it is safe)."""
    return numbering(state) or (lost(state, recorded) if recorded is not None else None)


def newest_record(memory: MemoryStore, path: str, program: str, at: str | None = None) -> Recorded | None:
    """Returns the runner's newest keyed record of `program` in the history of `path` (None before the first).

    at: the memory commit to look back from (None: the branch's tip).
    """
    needle = f"{KEY_TRAILER}: {key_slug(program)}:"
    # Usually the tip is the record the previous iteration made: read from its object, no `git log`.
    tip = memory.tip_commit(path, at)
    key = read_trailers(tip.message).get(KEY_TRAILER) if tip is not None and needle in tip.message else None
    iteration = key_iteration(key) if key else None
    if tip is not None and key is not None and iteration is not None:
        return Recorded(key, iteration, tip.sha)
    for commit in memory.commits(path, grep=needle, limit=5, at=at):
        key = read_trailers(commit.message).get(KEY_TRAILER)
        iteration = key_iteration(key) if key else None
        if key is None or iteration is None:
            continue
        if memory.commits(path, since=commit.sha, deleted=True, limit=1, at=at):
            return None  # the file was deleted since: the program was started afresh
        return Recorded(key, iteration, commit.sha)
    return None


def checked_state(memory: MemoryStore, program: Program, budget: int) -> statefile.StateFile:
    """Returns the program's state file once check_records found it still holds the runner's records.

    The file and the newest record are read at one commit: the slots of a run without a barrier read while the
    run records the slots that ended, and a file read just before a record would pass for one that lost it.
    """
    path = state_path(program)
    tip = memory.tip()
    state = parse_or_new(memory.read_at(tip, path) if tip is not None else memory.read(path), program, path, budget)
    check_records(memory, path, program.name, state, tip)
    return state


def check_records(
    memory: MemoryStore, path: str, program: str, state: statefile.StateFile, at: str | None = None
) -> None:
    """Raises StateError naming the commit that removed the runner's records (or lowered the count), when one did.

    at: the memory commit the state was read at (None: the branch's tip).
    """
    found = blocked(memory, path, program, state, at)
    if found is not None:
        raise found[1]


def blocked(
    memory: MemoryStore, path: str, program: str, state: statefile.StateFile, at: str | None = None
) -> tuple[str, StateError] | None:
    """Returns (what the file lost, the error saying how to restore it) when no iteration may run, else None.

    at: the memory commit the state was read at (None: the branch's tip).
    """
    recorded = newest_record(memory, path, program, at)
    # A file the runner never recorded in (e.g. one upstream's agent kept) is taken as it is.
    problem = problem_of(state, recorded) if recorded is not None else None
    if recorded is None or problem is None:
        return None
    culprit = _culprit(memory, path, recorded, at)
    return problem, StateError(_message(memory, program, problem, culprit), path)


def _culprit(memory: MemoryStore, path: str, recorded: Recorded, at: str | None) -> MemoryCommit | None:
    """Returns the commit that made the file unsafe: the oldest of the newest run of commits after the record whose file
    is."""
    later = memory.commits(path, since=recorded.commit, at=at)
    culprit = None
    for commit in later:
        text = memory.read_at(commit.sha, path)
        try:
            parsed = statefile.parse_state(text or "", path)
        except StateError:
            culprit = commit
            continue
        if problem_of(parsed, recorded) is None:
            break
        culprit = commit
    return culprit


def _message(memory: MemoryStore, program: str, problem: str, culprit: MemoryCommit | None) -> str:
    """Returns the error: what was lost, which commit lost it, and how to restore it."""
    branch = memory.config.branch
    text = f"records the runner wrote are missing from the state file on {branch}: {problem}. "
    if culprit is None:
        text += "The branch no longer holds the commit that recorded them (was it force-pushed?). "
        return text + f"Nothing ran. Restore the file with `autoloop edit {program}`, then rerun."
    sha = culprit.sha[:12]
    text += (
        f"Commit {sha} by {culprit.author} ({culprit.date}, \"{culprit.subject}\") replaced the file with an "
        "older copy, as a commit from a stale checkout of the branch does. Nothing ran and no iteration number "
        f"is reused. Restore the records: {_restore(memory, sha)} (the revert also undoes that commit's own "
        f"edit: make it again with `autoloop edit {program}`), then rerun."
    )
    return text


def _restore(memory: MemoryStore, sha: str) -> str:
    """Returns the commands that revert sha on the branch, to run where the branch is checked out, if it is."""
    branch, remote = memory.config.branch, memory.config.remote
    revert = f"git revert --no-edit {sha} && git push {remote} {branch}"
    holder = checked_out_at(memory.repo_root, branch)
    if holder is None:
        return f"`git fetch {remote} {branch} && git checkout {branch} && {revert}`"
    # `git checkout` of a branch another worktree holds fails ("already checked out"): work in that worktree.
    return (f"{branch} is checked out in the worktree {holder}; run there "
            f"`cd {shlex.quote(str(holder))} && git pull --ff-only {remote} {branch} && {revert}`")


def checked_out_at(root: Path, branch: str) -> Path | None:
    """Returns the worktree (the main one included) that has branch checked out, None when none has."""
    listed = call(open_repo(root), "worktree", "list", "--porcelain")
    path: Path | None = None
    for line in listed.text.splitlines() if listed.ok else []:
        if line.startswith("worktree "):
            path = Path(line.removeprefix("worktree "))
        elif line == f"branch refs/heads/{branch}" and path is not None:
            return path
    return None
