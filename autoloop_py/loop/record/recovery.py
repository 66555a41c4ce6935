"""Recovery: iteration keys, and the reconcile step that repairs what a killed run left behind.

Every iteration carries an idempotency key `<program>:<iteration>:<random token>`: in the
trailers of its candidate commit (with `Autoloop-Metric`, `Autoloop-Baseline`, `Autoloop-Runner`,
`Autoloop-Model` / `Autoloop-Model-Spend` when models were called, and `Autoloop-Prompt` /
`Autoloop-Prompt-Written` when a prompt variant was drawn or written), in a
hidden line of its history entry and in the trailer of its memory-branch commit. Before an
iteration, `reconcile` removes worktrees and temporary folders of dead runs, pushes memory commits the
remote lacks, and records every candidate commit on `autoloop/<name>` whose key no record has (a run killed between
its candidate commit and its state update), so no accepted commit goes unrecorded.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Collection, Container, Mapping, Sequence

import git

from autoloop_py import tempdirs
from autoloop_py.git.command import call, fetch_branches, is_ancestor, open_repo, push_branch, rev_parse, tracking_tip
from autoloop_py.git.objects import GitSession
from autoloop_py.loop.checkout.workspace import OWNER_FILE, worktree_admin
from autoloop_py.loop.record.recording import load_state, record_iteration
from autoloop_py.program.model import Program
from autoloop_py.sandbox.process import kill_marked
from autoloop_py.sandbox.run import RUN_TOKEN_ENV_VAR, run_token
from autoloop_py.state import file as statefile
from autoloop_py.state import prompt_stats
from autoloop_py.state.history import KEY_TRAILER, IterationRecord
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.model_stats import MODEL_BULLET, SPEND_BULLET, use_bullets, use_of
from autoloop_py.state.parts import finite_number

log = logging.getLogger(__name__)

KEY = KEY_TRAILER
METRIC = "Autoloop-Metric"
BASELINE = "Autoloop-Baseline"
RUNNER = "Autoloop-Runner"
# The iteration's model use and prompt variant, as its `Model` / `Model spend` / `Prompt` / `Prompt written` history
# bullets spell them: a recovered record carries them, so the Models and Prompts tables count the interrupted iteration.
MODEL = "Autoloop-Model"
MODEL_SPEND = "Autoloop-Model-Spend"
PROMPT = "Autoloop-Prompt"
PROMPT_WRITTEN = "Autoloop-Prompt-Written"
_BULLET_TRAILERS = ((MODEL, MODEL_BULLET), (MODEL_SPEND, SPEND_BULLET), (PROMPT, prompt_stats.PROMPT_BULLET),
                    (PROMPT_WRITTEN, prompt_stats.WRITTEN_BULLET))
# A candidate of a run that may still be alive (another machine's, or a live process here) is left to
# that run for this long: it records its own candidate moments after pushing it.
GRACE = timedelta(minutes=10)
RECOVERED_NOTE = (
    "recovered after an interrupted run: the candidate was committed, but the run stopped before recording it"
)
# How far back along autoloop/<name> to look for unrecorded candidates, and in the memory log for keys.
WALK_LIMIT = 50
KEY_LOG_LIMIT = 1000

_TRAILER_RE = re.compile(r"^([A-Za-z][A-Za-z0-9-]*): *(.*?)\s*$")
_SUBJECT_RE = re.compile(r"^\[Autoloop: [^\]]*\] Iteration \d+: (.*)$")
# Hyphens are folded too, so a key never holds `--` (it sits inside an HTML comment).
_UNSAFE_RE = re.compile(r"[^A-Za-z0-9_.]+")


@dataclass(frozen=True)
class Interrupted:
    """A candidate commit whose iteration was never recorded.

    Attributes:
      sha: the commit.
      key: its Autoloop-Key.
      summary: the change summary from its subject.
      metric: its Autoloop-Metric.
      baseline: its Autoloop-Baseline (the unchanged code's metric, when that iteration measured it).
      when: its committer date.
      runner: its Autoloop-Runner, `host:pid` of the process that committed it.
      bullets: the history bullets its Autoloop-Model(-Spend) and Autoloop-Prompt(-Written) trailers carry (the model
        use and prompt variant of the iteration).
    """

    sha: str
    key: str
    summary: str
    metric: float
    baseline: float | None
    when: datetime
    runner: str | None = None
    bullets: tuple[tuple[str, str], ...] = ()


def new_key(program: str, iteration: int) -> str:
    """Returns a fresh idempotency key for iteration `iteration` of `program`."""
    return f"{key_slug(program)}:{iteration}:{uuid.uuid4().hex[:16]}"


def key_slug(program: str) -> str:
    """Returns the program name as a key (or a ref) spells it."""
    return _UNSAFE_RE.sub("-", program).strip("-") or "program"


def trailers(
    key: str, metric: float, baseline: float | None, bullets: Sequence[tuple[str, str]] = ()
) -> dict[str, str]:
    """Returns the trailers of a candidate commit: its key, metric, the baseline it was measured against, its runner,
    and the models it called and the prompt variant as its history bullets say (bullets: the record's, or the
    iteration's so far)."""
    found = {KEY: key, METRIC: repr(float(metric))}
    if baseline is not None:
        found[BASELINE] = repr(float(baseline))
    found[RUNNER] = f"{socket.gethostname()}:{os.getpid()}"
    named = dict(bullets)
    for trailer, bullet in _BULLET_TRAILERS:
        if named.get(bullet):
            found[trailer] = " ".join(named[bullet].split())  # one line, whatever a model name or variant holds
    return found


def with_trailers(message: str, extra: Mapping[str, str]) -> str:
    """Returns the commit message with `Name: value` trailers appended in their own paragraph."""
    if not extra:
        return message
    return message.rstrip("\n") + "\n\n" + "\n".join(f"{name}: {value}" for name, value in extra.items())


def trailer_values(message: str, name: str) -> list[str]:
    """Returns every value of the `name` trailer in the message's last paragraph (a tick's commit has one per slot)."""
    return [value for found, value in _trailer_lines(message) if found == name]


def read_trailers(message: str) -> dict[str, str]:
    """Returns the `Name: value` lines of the message's last paragraph (the last value of a repeated name)."""
    return dict(_trailer_lines(message))


def _trailer_lines(message: str) -> list[tuple[str, str]]:
    paragraph = message.strip().split("\n\n")[-1]
    return [(m.group(1), m.group(2)) for line in paragraph.splitlines() if (m := _TRAILER_RE.match(line))]


def interrupted(commits: Sequence[tuple[str, str, datetime]], recorded: Container[str]) -> list[Interrupted]:
    """Returns the keyed commits no record has, oldest first; `commits` are (sha, message, date), newest first.

    The walk stops at the first recorded key: runs of one program are serialised, so everything
    older was reconciled before.
    """
    found: list[Interrupted] = []
    for sha, message, when in commits:
        fields = read_trailers(message)
        key = fields.get(KEY)
        if not key:
            continue
        if key in recorded:
            break
        item = _interrupted(sha, key, message, fields, when)
        if item is not None:
            found.append(item)
    return found[::-1]


def _interrupted(sha: str, key: str, message: str, fields: Mapping[str, str], when: datetime) -> Interrupted | None:
    """Returns the unrecorded candidate, or None when its trailers carry no readable metric."""
    metric, baseline = number(fields.get(METRIC)), number(fields.get(BASELINE))
    if metric is None:
        log.warning("commit %s has %s %s but no readable %s; not recovering it", sha[:12], KEY, key, METRIC)
        return None
    subject = message.strip().splitlines()[0] if message.strip() else ""
    match = _SUBJECT_RE.match(subject)
    bullets = tuple((bullet, fields[trailer]) for trailer, bullet in _BULLET_TRAILERS if fields.get(trailer))
    return Interrupted(sha, key, match.group(1) if match else subject, metric, baseline, when, fields.get(RUNNER),
                       bullets)


def number(text: str | None) -> float | None:
    """Returns a trailer's finite number (None when absent or unreadable)."""
    return finite_number(text) if text else None


def settled(item: Interrupted, now: datetime, host: str | None = None) -> bool:
    """Returns whether the run that committed `item` is surely over: a dead process on this host, or GRACE passed."""
    name, _, pid = (item.runner or "").rpartition(":")
    if name and name == (host or socket.gethostname()) and pid.isdigit() and tempdirs.pid_is_dead(int(pid)):
        return True
    return item.when <= now - GRACE


def recovered_record(item: Interrupted, pending_ci: bool = False) -> IterationRecord:
    """Returns the history record of an interrupted run's candidate: accepted (pending-ci under the CI gate).

    Its tokens, cost and `Model` / `Model spend` bullets are what its trailers say the models cost; its `Prompt` and
    `Prompt written` bullets the variant they say it drew and the one its guide wrote (read as the history's are).
    """
    carried = IterationRecord("accepted", item.when, "", item.metric, extra=item.bullets)
    use = use_of(carried)
    spent = use.spend.values()
    costs = [usd for _, usd in spent if usd is not None]
    return IterationRecord(
        status="pending-ci" if pending_ci else "accepted",
        timestamp=item.when,
        change=item.summary or "(no summary)",
        metric=item.metric,
        commit=item.sha,
        notes=RECOVERED_NOTE,
        baseline=item.baseline,
        key=item.key,
        tokens=sum(tokens for tokens, _ in spent) or None,
        cost=sum(costs) if costs else None,
        extra=(*use_bullets(use), *prompt_stats.use_bullets(*prompt_stats.use_of(carried))),
    )


def recorded_keys(state: statefile.StateFile) -> set[str]:
    """Returns the keys of the state file's detailed history entries."""
    return {entry.key for entry in state.history if entry.key}


class KnownKeys:
    """The keys of every iteration recorded for a program: in its history, or in a memory commit's trailers.

    The memory log is read only when asked about a key the history lacks: the newest candidate's key is
    almost always in the history, so most iterations need no `git log` of the memory branch.
    """

    def __init__(self, recorded: Collection[str], more: Callable[[], Collection[str]]) -> None:
        self._recorded = recorded
        self._more = more
        self._read: Collection[str] | None = None

    def __contains__(self, key: object) -> bool:
        if key in self._recorded:
            return True
        if self._read is None:
            self._read = self._more()
        return key in self._read


def known_keys(repo: git.Repo, memory: MemoryStore, program: Program, state: statefile.StateFile) -> KnownKeys:
    """Returns the keys of every iteration recorded for the program: in its history, or in a memory commit."""
    return KnownKeys(recorded_keys(state), lambda: _memory_keys(repo, memory, program.name))


# ---------------------------------------------------------------- effects


def reconcile(
    root: Path,
    program: Program,
    memory: MemoryStore,
    budget: int,
    *,
    ci_gate: bool = False,
    dry_run: bool = False,
    state: statefile.StateFile | None = None,
    reuse_listing: bool = False,
) -> tuple[IterationRecord, ...]:
    """Repairs what an interrupted run left: stale worktrees, unpushed memory, unrecorded candidates; returns records
    added.

    state: the program's state file as just read (None: read it here). reuse_listing: take the remote program
    branch's tip from the listing the session keeps for this iteration, if any.
    """
    repo = memory.session.repo_at(root)
    # Once per git session (a run): the worktrees of runs that died before this one started; one that dies
    # meanwhile is swept by the next run (a `git worktree list` per iteration is one more process each time).
    memory.session.cached("stale worktrees", str(root), lambda: remove_stale_worktrees(root, repo))
    tempdirs.sweep(before_remove=_kill_left_running)  # dead runs' temporary folders (agent prompts, indexes…)
    if dry_run:
        return ()
    memory.publish()
    branch, remote = f"autoloop/{program.name}", memory.config.remote
    listed = memory.session.remote_tips(remote, [branch], reuse=reuse_listing) if memory.has_remote() else None
    tip, unpushed = _branch_tip(repo, branch, remote, listed, memory.session.objects.commit_sha)
    if tip is None:
        return ()
    recorded = known_keys(repo, memory, program, state if state is not None else load_state(memory, program, budget))
    now = datetime.now(timezone.utc)
    found = [item for item in interrupted(first_parents(repo, tip, memory.session), recorded) if settled(item, now)]
    if not found or (unpushed and not _publish_branch(repo, branch, remote, memory.session)):
        return ()
    records = tuple(recovered_record(item, ci_gate) for item in found)
    for record in records:
        log.warning("recording %s of %s, left unrecorded by an interrupted run", record.commit, branch)
        record_iteration(memory, program, record, budget)
    return records


def _branch_tip(
    repo: git.Repo, branch: str, remote: str, listed: Mapping[str, str] | None, resolve: Callable[[str], str | None]
) -> tuple[str | None, bool]:
    """Returns (the newer of the local and the remote program branch, whether the remote lacks it).

    listed: what the remote holds of the branch (None: there is no remote). resolve: returns the commit a ref
    names (the session's object reader).
    """
    local = resolve(f"refs/heads/{branch}")
    if listed is None:
        return local, False
    theirs = fetch_branches(repo, remote, [branch], resolve, listed).get(branch)
    if theirs == local:
        return local, False
    if local is None or (theirs is not None and is_ancestor(repo, local, theirs)):
        return theirs, False
    return local, True


def first_parents(repo: git.Repo, tip: str, session: GitSession) -> tuple[tuple[str, str, datetime], ...]:
    """Returns (sha, message, committer date) of the newest WALK_LIMIT first-parent commits up to the commit `tip`.

    A commit's history never changes: the session keeps the last answer (an iteration asks at reconcile
    and again for the branch's bar).
    """
    return session.cached("first parents", tip, lambda: tuple(_walk(repo, tip)))


def _walk(repo: git.Repo, tip: str) -> list[tuple[str, str, datetime]]:
    """Returns (sha, message, committer date) of the newest first-parent commits up to `tip`."""
    raw = call(repo, "log", "--first-parent", f"-n{WALK_LIMIT}", "--format=%H%x1f%cI%x1f%B%x1e", tip)
    records = (record.strip("\n").split("\x1f", 2) for record in raw.text.split("\x1e"))
    return [(sha, message, _date(date)) for sha, date, message in (r for r in records if len(r) == 3)]


def _date(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        return datetime.now(timezone.utc)


def _memory_keys(repo: git.Repo, memory: MemoryStore, program: str) -> frozenset[str]:
    """Returns the keys in the trailers of the memory branch's commits for `program` (history folds drop them)."""
    tip = memory.tip()
    if tip is None:
        return frozenset()
    needle = f"{KEY}: {key_slug(program)}:"

    def read() -> frozenset[str]:
        found = call(repo, "log", f"-n{KEY_LOG_LIMIT}", "--format=%B%x1e", "-F", f"--grep={needle}", tip, "--")
        if not found.ok:
            return frozenset()
        return frozenset(key for message in found.text.split("\x1e") for key in trailer_values(message, KEY))

    # A commit's history never changes: an iteration asks twice (reconcile, then the branch's bar) at one tip.
    return memory.session.cached("memory keys", (tip, needle), read)


def _publish_branch(repo: git.Repo, branch: str, remote: str, session: GitSession) -> bool:
    """Pushes the local program branch, which holds a candidate the remote lacks; returns whether it got there."""
    local = rev_parse(repo, f"refs/heads/{branch}")
    if local is None:
        return False
    pushed = push_branch(repo, remote, local, branch, tracking_tip(repo, remote, branch))
    if not pushed.ok:
        log.warning("could not push %s to %s: %s; its unrecorded candidate stays local", branch, remote, pushed.stderr)
    else:
        session.landed(remote, branch, local)
    return pushed.ok


def remove_stale_worktrees(root: Path, repo: git.Repo | None = None) -> list[Path]:
    """Removes the worktrees whose owning autoloop process is gone; returns their paths (repo: the one at root)."""
    repo = repo if repo is not None else open_repo(root)
    removed = []
    with worktree_admin(repo):
        for line in call(repo, "worktree", "list", "--porcelain").text.splitlines():
            path = Path(line.removeprefix("worktree "))
            dead = tempdirs.dead_owner(path.parent / OWNER_FILE) if line.startswith("worktree ") else None
            if dead is not None:
                _kill_left_running(dead)
                call(repo, "worktree", "remove", "--force", str(path))
                shutil.rmtree(path.parent, ignore_errors=True)
                removed.append(path)
        if removed:
            call(repo, "worktree", "prune")
    if removed:
        log.info("removed %d worktree(s) left by interrupted runs", len(removed))
    return removed


def _kill_left_running(dead: int) -> None:
    """Kills what the dead run `dead` left running: its evaluation or agent outlives it in its own process group."""
    # Each carries its runner's token (a hash of the pid, not the pid).
    if kill_marked(RUN_TOKEN_ENV_VAR, run_token(dead)):
        log.warning("killed what the interrupted run %d left running", dead)
