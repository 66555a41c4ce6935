"""Publishing a decided iteration: commit and push a kept candidate, then record the iteration on the memory branch.

`autoloop run` does this in the same process that proposed; `autoloop publish` does it in a job that
runs no candidate code, from an Outcome the proposing job handed over (outcome.py), after checking it.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from autoloop_py import faults, tempdirs
from autoloop_py.errors import GitError
from autoloop_py.git import push_refusal
from autoloop_py.git.command import call, open_repo, rev_parse, run
from autoloop_py.git.objects import GitSession
from autoloop_py.loop.checkout.lock import program_lock
from autoloop_py.loop.checkout.workspace import Workspace, remove_worktree, worktree_admin
from autoloop_py.loop.evaluation import checks
from autoloop_py.loop.record import publish_guard as guard
from autoloop_py.loop.record import recovery
from autoloop_py.loop.record.outcome import Outcome, OutcomeError, problems
from autoloop_py.loop.record.recording import (
    IterationData, load_state, record_iteration, record_recheck, recorded_before, state_path,
)
from autoloop_py.program.model import Program
from autoloop_py.program.playbook import find_playbook, playbook_pointer
from autoloop_py.redact import from_environment
from autoloop_py.state.file import StateFile
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.machine import is_improvement
from autoloop_py.state.memory import MemoryStore
from autoloop_py.strategies import runner as strategy

log = logging.getLogger(__name__)

CI_PENDING_NOTE = "; kept until the commit's CI checks pass"


def branch_tree(root: Path, branch: str, session: GitSession | None = None) -> str | None:
    """Returns the tree id at the tip of a local branch (None when it does not exist).

    session: the run's git session, whose object reader answers without starting a process.
    """
    if session is not None:
        tip = session.objects.commit_sha(f"refs/heads/{branch}")
        return session.objects.tree_of(tip) if tip is not None else None
    found = call(open_repo(root), "rev-parse", "-q", "--verify", f"refs/heads/{branch}^{{tree}}")
    return found.text if found.ok else None


def keep_candidate(
    workspace: Workspace, program: Program, summary: str, iteration: int, run_url: str | None, marks: Mapping[str, str]
) -> tuple[str | None, tuple[str, str] | None]:
    """Commits the workspace's changes and pushes the program branch.

    Returns (commit, None), or (None, (why, status)) when the push was refused: the candidate is withdrawn
    (kept under refs/autoloop/orphaned/). A lost race or a size limit makes it a rejection, anything else an
    error, and the note says which (git's own reason, not a guess).
    """
    # One line: a summary's own paragraphs could pass for trailers (Autoloop-Key, Autoloop-Metric).
    message = f"[Autoloop: {program.name}] Iteration {iteration}: {' '.join(summary.split())}"
    if run_url:
        message += f"\n\nRun: {run_url}"
    # The summary came from a model or an agent: a secret value in it is masked before it is pushed.
    message = from_environment(os.environ).text(message)
    commit = workspace.commit_candidate(recovery.with_trailers(message, marks))
    faults.checkpoint("after-candidate-commit")
    try:
        workspace.push()
        faults.checkpoint("after-candidate-push")
    except GitError as err:
        kept = workspace.withdraw(commit)
        refusal = push_refusal.read_refusal(err.message)
        if refusal.is_race:
            why = (f"another run advanced autoloop/{program.name} first, so this candidate was judged against a "
                   f"stale best; it is kept at {kept} ({refusal.detail[:120]})")
        else:
            why = (f"the push of autoloop/{program.name} failed, so the candidate is not kept on the branch "
                   f"(it is at {kept}): {push_refusal.describe(refusal, workspace.remote)}")
        return None, (why, "rejected" if refusal.kind in (push_refusal.RACE, push_refusal.SIZE) else "error")
    return commit, None


def settle_kept(
    record: IterationRecord, commit: str | None, withdrawn: tuple[str, str] | None, ci_gate: bool
) -> IterationRecord:
    """Returns the record of an improving candidate once keep_candidate ran: accepted, pending-ci, rejected or error."""
    if withdrawn is not None:
        why, status = withdrawn
        return replace(record, status=status, notes=why, commit=None)
    if ci_gate and commit is not None:
        return replace(record, status="pending-ci", commit=commit, notes=record.notes + CI_PENDING_NOTE)
    return replace(record, commit=commit)


def check_outcome(root: Path, program: Program, outcome: Outcome) -> None:
    """Raises OutcomeError unless the program's own definition allows publishing the outcome."""
    # Whether it runs one, not the working tree's settings (which may differ from the commit the outcome ran on).
    runs_strategy = find_playbook(program, root) is not None
    if not runs_strategy and (outcome.decision is not None or outcome.candidate_source is not None):
        raise OutcomeError(f"refusing the outcome of '{program.name}': it carries a strategy decision, and the "
                           "program runs no strategy")
    guard.refuse(program.name, problems(outcome, program.name, program.target.allows, program.config.max_file_bytes))


def publish_outcome(
    root: Path, program: Program, outcome: Outcome, *, budget: int, run_url: str | None = None,
    base_branch: str | None = None, ci_gate: bool = False,
) -> IterationRecord | None:
    """Checks the outcome, keeps its candidate (if accepted) and records it; returns the record written.

    Nothing is written when the outcome is refused. An accepted candidate whose base tree is no longer
    the program branch's (another run kept a candidate meanwhile) is recorded as rejected, not kept, unless
    it beats the best recorded since and its files rebuild the tree it was evaluated on (keep_outcome).
    """
    check_outcome(root, program, outcome)
    if outcome.record is None:
        return None
    with program_lock(root, program.name):
        memory = MemoryStore(root)
        memory.sync()
        recovery.reconcile(root, program, memory, budget, ci_gate=ci_gate)
        state = rechecked_state(memory, program, [outcome], load_state(memory, program, budget), budget)
        outcome = next_of_state(outcome, program, state, budget, memory)
        record = replace(outcome.record, key=outcome.key, run_url=run_url, commit=None)
        base = known_commit(root, outcome.base_commit)
        if record.status == "accepted":
            record, base = keep_outcome(root, program, outcome, record, base_branch, ci_gate, state)
        with runner_of_commit(root, program, known_commit(root, outcome.base_commit)) as runner:
            record_iteration(memory, program, record, budget, iteration_data(runner, outcome, record, base))
    return record


def iteration_data(
    runner: strategy.StrategyRunner | None, outcome: Outcome, record: IterationRecord, base: str | None
) -> IterationData:
    """Returns what record_iteration writes of an outcome beside its record: its Population entry, traces, base."""
    candidate = None
    if runner is not None and outcome.decision is not None and outcome.candidate_source is not None:
        candidate = strategy.candidate_for(runner, outcome.decision, record, outcome.candidate_source,
                                           outcome.approach, outcome.iteration)
    return IterationData(runner, candidate, outcome.prompt, outcome.evaluated, outcome.seed, outcome.decision, base)


@contextmanager
def runner_of_commit(root: Path, program: Program, commit: str | None) -> Iterator[strategy.StrategyRunner | None]:
    """Yields the program's strategy runner as `commit` has it: the playbook, prompts and code/config.yaml the
    iteration proposed with (iteration.py reads them from the same commit), not the working tree's copies.

    commit: the default-branch commit the outcome was made on (None: unknown here, root's copies are read).
    The checkout is a private detached worktree, removed when the block ends.
    """
    if commit is None or playbook_pointer(program) is None:
        yield strategy.load_runner(program, root)
        return
    repo = open_repo(root)
    folder = tempdirs.make("autoloop-strategy-")
    try:
        with worktree_admin(repo):
            run(repo, "worktree", "add", "--detach", "--quiet", str(folder / "worktree"), commit)
        yield strategy.load_runner(program, folder / "worktree")  # the proposing iteration warned of differences
    finally:
        remove_worktree(repo, folder)


def rechecked_state(
    memory: MemoryStore, program: Program, outcomes: Sequence[Outcome], state: StateFile, budget: int
) -> StateFile:
    """Records the first re-check of the best the outcomes carry that the state still awaits; returns the state then.

    The proposing job judged its candidate against the re-based best, so it is recorded before the iteration.
    """
    for outcome in outcomes:
        found = guard.recheck_to_record(outcome, state, program.direction)
        if found is not None:
            record_recheck(memory, program, found)
            return load_state(memory, program, budget)
    return state


def next_of_state(outcome: Outcome, program: Program, state: StateFile, budget: int, memory: MemoryStore) -> Outcome:
    """Returns the outcome as the state's next iteration; raises OutcomeError, writing nothing, when its
    number was never handed out or its record would leave a state file that does not parse."""
    assert outcome.record is not None
    guard.refuse(program.name, guard.numbered_claims([outcome], state))
    if recorded_before(state, outcome.key, memory, state_path(program)):
        return outcome  # published before: recording it again changes nothing
    outcome = guard.renumbered(outcome, state.machine.iteration_count + 1)
    guard.refuse(program.name, guard.state_problems(state, program, [outcome.record], budget))
    return outcome


def known_commit(root: Path, sha: str | None) -> str | None:
    """Returns sha when this repository has that commit (a claimed base it lacks is dropped)."""
    return sha if sha is not None and rev_parse(open_repo(root), sha) == sha else None


def keep_outcome(
    root: Path, program: Program, outcome: Outcome, record: IterationRecord, base_branch: str | None, ci_gate: bool,
    best_now: StateFile | None = None,
) -> tuple[IterationRecord, str | None]:
    """Applies the outcome's files on the program branch as fetched now, commits and pushes them.

    best_now: the state as recorded now. With it, a candidate whose branch moved since it was made (a slot
    recorded meanwhile kept another) is still kept when it beats the best recorded now and its files,
    written on the branch, give exactly the tree it was evaluated on (see rebuilds).
    Returns the record and the default-branch commit the branch now stands on.
    """
    with Workspace(root, program.name, base_branch=base_branch) as workspace:
        workspace.prepare()
        base = workspace.base_sha
        tree = branch_tree(root, workspace.branch)
        if tree != outcome.base_tree:
            stale = _stale_note(root, program, outcome, record, tree, best_now)
            if stale is not None:
                return replace(record, status="rejected", notes=stale), base
        guard.refuse(program.name, checks.violations(program, workspace.files(outcome.changes), outcome.changes))
        workspace.write(outcome.changes)
        assert record.metric is not None
        marks = recovery.trailers(outcome.key, record.metric, record.baseline, record.extra)
        commit, withdrawn = keep_candidate(workspace, program, record.change, outcome.iteration, record.run_url, marks)
    return settle_kept(record, commit, withdrawn, ci_gate), base


def _stale_note(root: Path, program: Program, outcome: Outcome, record: IterationRecord, tree: str | None,
                best_now: StateFile | None) -> str | None:
    """Returns why a candidate made on an older branch tree is not kept, None when it may be (see keep_outcome)."""
    stale = (f"autoloop/{program.name} changed after this candidate was evaluated (another run kept one, or the base "
             "branch moved), so it was judged against a stale base")
    if best_now is None or program.config.objectives or record.metric is None:
        return f"{stale}; not kept"
    best = best_now.machine.best_metric
    if not is_improvement(record.metric, best, program.direction, program.config.min_delta or 0.0):
        return f"{stale}, and it does not beat the best recorded since ({best:g}); not kept"
    if tree is None or outcome.base_tree is None or not rebuilds(root, outcome.base_tree, tree, outcome.changes):
        return (f"{stale}; it beats the best recorded since ({best:g}), but the branch changed files it does not "
                "rewrite, so the branch would not hold the code that was evaluated; not kept")
    return None


def rebuilds(root: Path, old_tree: str, new_tree: str, changes: Mapping[str, str | None]) -> bool:
    """Returns whether writing `changes` on new_tree gives old_tree with the changes written: every path the two
    trees differ in is one the changes rewrite (or delete)."""
    found = call(open_repo(root), "diff-tree", "-r", "-z", "--name-only", "--no-renames", old_tree, new_tree)
    return found.ok and {path for path in found.text.split("\0") if path} <= set(changes)
