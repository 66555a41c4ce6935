"""Judging under concurrency: the best a candidate must beat, and an accepted record re-judged when the best moved.

Runs of one program on several machines race: one pushes its candidate to `autoloop/<name>` and records
it moments later. A run that loaded the state file in between builds on that candidate's code while
judging against the older best, and its record may land onto a state whose best moved past it. So:

- `bar`: the best to beat is also the metric of the newest candidate commit on the branch the run builds on,
  when its record has not reached the state file yet;
- `lost_record`: an accepted record applied onto a better best is recorded as rejected, saying so;
- `withdraw`: its commit leaves the branch (compare-and-swap), unless a later candidate builds on it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Container

import git

from autoloop_py.errors import GitError
from autoloop_py.git.command import call, fetch_branches, has_remote, is_ancestor, open_repo, rev_parse, update_ref
from autoloop_py.git.objects import GitSession
from autoloop_py.git.push_refusal import read_refusal
from autoloop_py.loop.evaluation import acceptance
from autoloop_py.loop.record import recovery
from autoloop_py.loop.record.recording import load_state
from autoloop_py.program.model import Program
from autoloop_py.state.file import StateFile
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.machine import is_improvement
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.parts import format_number
from autoloop_py.strategies import pareto

log = logging.getLogger(__name__)

WALK = 20  # first-parent commits searched for the newest candidate commit


@dataclass(frozen=True)
class TipClaim:
    """The newest candidate commit on a branch: its key and the metric its trailer claims."""

    key: str
    metric: float


def tip_claim(repo: git.Repo, rev: str, session: GitSession) -> TipClaim | None:
    """Returns the key and metric of the newest keyed candidate commit among rev's first parents (None if none).

    session: the run's git session; the first parents it read for recovery are reused when rev is at that commit.
    """
    tip = session.objects.commit_sha(rev)
    messages = [message for _, message, _ in recovery.first_parents(repo, tip, session)[:WALK]] if tip else []
    for message in messages:
        fields = recovery.read_trailers(message)
        key, metric = fields.get(recovery.KEY), recovery.number(fields.get(recovery.METRIC))
        if key and metric is not None:
            return TipClaim(key, metric)
    return None


def bar(best: float | None, claim: TipClaim | None, recorded: Container[str], direction: str) -> float | None:
    """Returns the best a candidate built on the claimed commit must beat: the better of the two when unrecorded."""
    if claim is None or claim.key in recorded or best is None:
        return best
    return claim.metric if is_improvement(claim.metric, best, direction) else best


def lost(record: IterationRecord, fresh: StateFile, program: Program) -> str | None:
    """Returns what an accepted record lost to in the state it is applied to (None: it still improves on it).

    With objectives it is judged as acceptance judges it: against the Kept Front, by dominance (or its scalarisation).
    """
    if record.status != "accepted" or record.metric is None:
        return None
    config = program.config
    if config.objectives:
        values = pareto.parse_values(dict(record.extra).get(pareto.BULLET, ""))
        kept = acceptance.kept_metrics(fresh)
        if not kept or any(objective.name not in values for objective in config.objectives):
            return None  # nothing kept to compare with, or values it never had: it stays as judged
        verdict = pareto.keep(values, kept, config.objectives, config.objective_scalarisation, config.min_delta)
        return None if verdict.kept else verdict.rule
    best = fresh.machine.best_metric
    if best is None or is_improvement(record.metric, best, program.direction, config.min_delta):
        return None
    return f"best is now {format_number(best)}"


def lost_record(record: IterationRecord, judged: float | None, lost_to: str, branch: str) -> IterationRecord:
    """Returns the record as rejected: it improved on the best it was judged against, but a concurrent one did better.

    lost_to: what it lost to (lost).
    """
    against = f" ({format_number(judged)})" if judged is not None else ""
    notes = (f"improved on the best it was judged against{against} but lost to a concurrent better candidate "
             f"({lost_to}); {branch}")
    return replace(record, status="rejected", notes=notes)


def withdraw(root: Path, program: str, sha: str, remote: str = "origin") -> str:
    """Takes the candidate `sha` off `autoloop/<program>` (local and remote, by compare-and-swap); returns what
    happened.

    The commit stays under refs/autoloop/orphaned/. A branch that moved on past it is left as it is.
    """
    repo = open_repo(root)
    branch = f"autoloop/{program}"
    parent = rev_parse(repo, f"{sha}^")
    if parent is None:
        return f"its commit {sha[:12]} stays on {branch}"
    keep = f"refs/autoloop/orphaned/{recovery.key_slug(program)}-{sha[:12]}"
    update_ref(repo, keep, sha, None, "autoloop: candidate that lost to a concurrent better one")
    if has_remote(repo, remote):
        tip = fetch_branches(repo, remote, [branch]).get(branch)
        if tip is not None and tip != sha:
            if is_ancestor(repo, sha, tip):
                return f"a later candidate builds on its commit {sha[:12]}, which stays on {branch}"
            return f"its commit {sha[:12]} is no longer on {branch}"
        if tip == sha:
            # The one step back (push_branch moves branches only forward), leased on the runner's own commit.
            lease = f"--force-with-lease=refs/heads/{branch}:{sha}"
            pushed = call(repo, "push", "--quiet", "--no-verify", lease, remote, f"{parent}:refs/heads/{branch}")
            if not pushed.ok:
                why = read_refusal(pushed.stderr).detail
                return f"its commit {sha[:12]} stays on {branch} (withdrawing it failed: {why})"
            update_ref(repo, f"refs/remotes/{remote}/{branch}", parent, sha, "autoloop: withdraw")
    update_ref(repo, f"refs/heads/{branch}", parent, sha, "autoloop: withdraw a candidate that lost")
    log.warning("withdrew %s from %s: a concurrent candidate did better", sha[:12], branch)
    return f"its commit was withdrawn from {branch} (kept at {keep})"


def recheck(program: Program, judged: float | None, record: IterationRecord, fresh: StateFile) -> IterationRecord:
    """Returns the record to apply onto the state `fresh` (the memory update's last look)."""
    lost_to = lost(record, fresh, program)
    if lost_to is None:
        return record
    return lost_record(record, judged, lost_to, f"it was recorded after that one, so its commit stays on "
                                                f"autoloop/{program.name}")


# ---------------------------------------------------------------- effects


def branch_bar(root: Path, memory: MemoryStore, program: Program, state: StateFile, best: float | None) -> float | None:
    """Returns the best to beat: also the metric of the branch's newest candidate when its record has not landed yet."""
    repo = memory.session.repo_at(root)
    claim = tip_claim(repo, f"refs/heads/autoloop/{program.name}", memory.session)
    found = bar(best, claim, recovery.known_keys(repo, memory, program, state) if claim else (), program.direction)
    if found != best:
        log.info("%s: judging against %s, the metric of the unrecorded candidate its branch builds on",
                 program.name, format_number(found))
    return found


def rejudged(root: Path, memory: MemoryStore, program: Program, record: IterationRecord, judged: float | None,
             budget: int) -> IterationRecord:
    """Returns the record re-judged against the freshest best before recording: a kept candidate that lost to a
    concurrent better one is withdrawn from the branch and recorded as rejected."""
    if record.status != "accepted" or record.commit is None:
        return record
    try:
        memory.sync()  # a kept candidate asks the remote itself: a best raised meanwhile withdraws it
    except GitError as err:  # e.g. runs in one clone fetching at once; the memory update re-checks anyway
        log.info("could not fetch %s before recording (%s); judging against the local copy", memory.config.branch, err)
    lost_to = lost(record, load_state(memory, program, budget), program)
    if lost_to is None:
        return record
    try:
        said = withdraw(root, program.name, record.commit, memory.config.remote)
    except GitError as err:
        said = (
            f"its commit {record.commit[:12]} stays on autoloop/{program.name} "
            f"(withdrawing it failed: {err.message[:120]})"
        )
    return lost_record(record, judged, lost_to, said)
