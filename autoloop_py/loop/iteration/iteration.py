"""One iteration of a program, top to bottom: propose, check, evaluate, ratchet, commit, record."""

from __future__ import annotations

import functools
import logging
import os
import random
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping

from autoloop_py.git import checkout_guard
from autoloop_py.git.command import common_dir
from autoloop_py.git.objects import GitSession
from autoloop_py.loop.checkout.lock import held_program_lock, others_running, program_lock, taken_by
from autoloop_py.loop.checkout.workspace import Workspace, Worktrees
from autoloop_py.loop.iteration import incumbent_check, lineage_store, rejudge
from autoloop_py.loop.iteration.attempt import Attempt, AttemptContext, proposer_for, try_candidate, with_kept_vector
from autoloop_py.loop.iteration.baseline import baseline_outcome, evaluate_baseline
from autoloop_py.loop.iteration.committed_strategy import committed_runner
from autoloop_py.loop.iteration.options import Clock, RunOptions
from autoloop_py.loop.record import integrity, recovery
from autoloop_py.loop.record.outcome import Outcome, write_outcome
from autoloop_py.loop.record.publishing import branch_tree
from autoloop_py.loop.record.recording import (
    IterationData,
    error_record,
    load_state,
    record_iteration,
    record_pause,
    record_recheck,
    seed_data,
    with_baseline,
)
from autoloop_py.program.model import Program, load_program, require_on_base
from autoloop_py.proposers.setup import start_setup_check
from autoloop_py.sandbox.run import Isolation, run_isolation
from autoloop_py.state import budget
from autoloop_py.state import file as statefile
from autoloop_py.state import trace
from autoloop_py.state.memory import MemoryStore, pack_if_due
from autoloop_py.strategies.slots import Slot, slot_iteration, slot_rng
from autoloop_py.strategies.state_reading import check_everything

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IterationOutcome:
    """What one iteration did.

    Attributes:
      program: the program's name.
      iteration: the iteration number recorded.
      status: accepted | rejected | error.
      summary: the candidate's one-line summary.
      metric: the candidate's metric (None on error).
      best_before: the best metric before this iteration (the baseline on a first run).
      commit: the accepted commit's sha.
      reason: why it was rejected or errored.
      timings: seconds spent per step.
    """

    program: str
    iteration: int
    status: str
    summary: str
    metric: float | None
    best_before: float | None
    commit: str | None = None
    reason: str | None = None
    timings: Mapping[str, float] = field(default_factory=dict)


def run_iteration(
    root: Path, program: Program, options: RunOptions, now: datetime | None = None, session: GitSession | None = None,
    worktrees: Worktrees | None = None, pipelined: bool = False,
) -> IterationOutcome:
    """Runs one iteration of program in the repository at root and records it on the memory branch.

    session: the run's git session (one `cat-file --batch` for all its iterations); None makes one for this iteration.
    worktrees: the run's kept worktrees (one checkout reused by all its iterations); None: a worktree of its own.
    pipelined: another iteration of this run follows, in the same session: the record is rendered now and its commit
    is left to that iteration, which makes it while its model request is in flight (see attempt._proposed).
    """
    # The slots of a tick only read (they write outcomes): each holds a lock of its own, so they run at once.
    lock = program.name if options.slot is None else f"{program.name}.slot-{options.slot.index}"
    with held_program_lock(root, lock) as held:
        try:
            # The remote's tips listed just before (by the run's pick) still hold unless another run held the lock.
            outcome = _run_locked(root, program, options, now, session, worktrees, reuse_listing=not held.waited,
                                  pipelined=pipelined and session is not None, own_lock=held.previous == os.getpid())
        except BaseException:
            if session is not None:  # the last iteration's record, left to commit, is committed under the lock
                MemoryStore(root, session=session).commit_unwritten()
            raise
        finally:
            if session is not None:
                session.forget_listing()  # the next iteration asks the remote afresh (see GitSession.owns_pushes)
    if options.writes:
        pack_if_due(root, outcome.iteration, session=session)  # outside the lock: other runners need not wait
    return outcome


def _run_locked(
    root: Path, program: Program, options: RunOptions, now: datetime | None, session: GitSession | None = None,
    worktrees: Worktrees | None = None, reuse_listing: bool = False, pipelined: bool = False, own_lock: bool = False,
) -> IterationOutcome:
    """Runs the iteration while holding the program's lock.

    reuse_listing: the memory sync and reconcile may take the remote's tips from the session's last listing (the
    run's pick, moments ago); prepare asks the remote again, so that it builds on what was pushed meanwhile.
    pipelined: leave the record's commit to the next iteration (run_iteration). own_lock: this process took the
    program's lock last before, so no other run of it wrote since this run's last record.
    """
    clock = Clock()
    memory = MemoryStore(root, session=session)
    with clock("load state"):
        if memory.unwritten() and not own_lock:
            memory.commit_unwritten()  # another run held the lock meanwhile: it is checked and reconciled below
        memory.sync(reuse_listing)
        if memory.unwritten():
            # The last record, this run's own, is read as it will be committed: it passed these checks before it.
            state = load_state(memory, program, options.budget)
        else:
            # Before reconcile records anything: a stale copy of the file must not get a reused iteration number.
            state = integrity.checked_state(memory, program, options.budget)
            recovered = recovery.reconcile(
                root, program, memory, options.budget, ci_gate=options.ci_gate, dry_run=not options.writes,
                state=state, reuse_listing=True,
            )
            if recovered:
                state = load_state(memory, program, options.budget)  # the records it recovered are in the file now
    over = _over_budget(memory, program, state, options, now)
    if over is not None:
        return over
    iteration = slot_iteration(state.machine.iteration_count + 1, options.slot)
    key = recovery.new_key(program.name, iteration)
    with Workspace(
        root, program.name, base_branch=options.base_branch, session=memory.session, worktrees=worktrees
    ) as workspace:
        with clock("prepare branch"):
            workspace.prepare()
            require_on_base(program, workspace.path, workspace.base_ref, workspace.base_ref.startswith("origin/"))
            base_tree = branch_tree(root, workspace.branch, memory.session)
            # The worktree holds the branch's tree: its program.md parses as it did while that tree stays.
            read = (workspace.path, workspace.base_ref, base_tree, program.path, program.text, program.issue)
            program = memory.session.cached(
                "committed program", read, functools.partial(committed_program, program, workspace.path,
                                                             workspace.base_ref))
        # The committed program's direction and settings; its playbook, prompts and config.yaml from the same commit.
        runner = committed_runner(program, root, workspace.path, workspace.base_ref)
        check_everything(state, runner)  # what `autoloop edit` checks: a bad table stops here, before any evaluation
        rng = iteration_rng(program, iteration, options.slot)
        proposer = proposer_for(program, options)
        # Checked in the model worker while the baseline is evaluated (it may still be importing litellm).
        setup_checked = start_setup_check(proposer, program)
        sandbox = _isolation(root, program, options, memory.session)
        # Before any candidate code runs (the baseline is the branch's code): compared after each step that ran some.
        own = (f"refs/heads/{memory.config.branch}",)
        git_dir = common_dir(memory.session.repo_at(root))
        checkout = checkout_guard.snapshot(git_dir, own)
        verify = functools.partial(checkout_guard.verify, checkout, own)
        # The runner's own refs, over each step that runs candidate code (the runner moves none meanwhile).
        hold_refs = functools.partial(
            checkout_guard.runner_refs_held, git_dir, program.name, own[0],
            busy=functools.partial(others_running, root, program.name),
            recorder=_recorder(root, program.name, options.slot), pushed=memory.session.pushed,
        )
        found = None
        if not options.dry_run:
            with hold_refs(during="the best was re-checked on the moved default branch"):
                found = incumbent_check.recheck(program, workspace.path, state.machine, workspace.base_sha, clock,
                                                sandbox)
        if found is not None and options.writes:  # recorded first: this iteration and any rejudging see it
            record_recheck(memory, program, found)
            state = load_state(memory, program, options.budget)
        elif found is not None:  # an outcome carries it, for publish to record first; this iteration sees it now
            state = statefile.with_machine(state, found.applied_to(state.machine))
        with hold_refs(during="the baseline evaluation ran"):
            measured = evaluate_baseline(program, workspace.path, state, clock, sandbox)
        setup_checked()  # a missing setting stops the run here, before anything is recorded
        best, baseline, failure = baseline_outcome(state, measured)
        if measured is None and not options.ci_gate:
            best = rejudge.branch_bar(root, memory, program, state, best)
        seed = seed_data(program, workspace.path, baseline, measured)
        if failure is not None:
            attempt = Attempt(error_record(now, "baseline", f"baseline evaluation failed: {failure}", options.run_url))
        else:
            tip = trace.SEED_ID if seed is not None else trace.read_tip(memory.read, program.name)
            reader = lineage_store.trace_reader(root, memory.config.branch, program, memory.session.objects,
                                                memory.unwritten())
            context = AttemptContext(
                program, workspace, proposer, state, best, iteration, rng, options, clock, now, runner, memory, tip,
                key, reader if program.config.novelty_filter else None, baseline=measured, sandbox=sandbox,
                history=reader, verify_checkout=verify, hold_refs=hold_refs,
            )
            seed = with_kept_vector(context, seed)
            attempt = try_candidate(replace(context, seed=seed), root)
        verify(during="the proposer and the evaluations ran")
        record = replace(with_baseline(attempt.record, baseline), key=key)
        base = workspace.base_sha
    if options.outcome_dir is not None:
        changes = attempt.changes if record.status == "accepted" else {}
        write_outcome(options.outcome_dir, Outcome(
            program.name, iteration, key, base_tree, best, record, changes, attempt.prompt, attempt.evaluated, seed,
            decision=attempt.decision, candidate_source=attempt.source if attempt.candidate else None,
            approach=attempt.approach, base_commit=base, recheck=found,
        ))
    elif not options.dry_run:
        with clock("record"):
            record = rejudge.rejudged(root, memory, program, record, best, options.budget)
            data = IterationData(
                runner, attempt.candidate, attempt.prompt, attempt.evaluated, seed, attempt.decision, base
            )
            recheck = functools.partial(rejudge.recheck, program, best)
            record = record_iteration(memory, program, record, options.budget, data, recheck, later=pipelined)
    return IterationOutcome(
        program=program.name,
        iteration=iteration,
        status=record.status,
        summary=record.change,
        metric=record.metric,
        best_before=best,
        commit=record.commit,
        reason=record.notes if record.status != "accepted" else None,
        timings=clock.timings,
    )


def committed_program(program: Program, tree: Path, base: str) -> Program:
    """Returns the program as the commit checked out at tree has it (iterations run on the base branch).

    The working tree's program.md may hold edits not yet committed or pushed: they are not used, and a
    warning says so.
    """
    if program.path.is_absolute() or program.path.parts[:1] == (".git",):
        return program  # an issue program, materialised outside the tree
    committed = replace(load_program(tree, program.path), issue=program.issue)
    if committed.text != program.text:
        log.warning(
            "%s differs from the copy on %s: this iteration uses %s's (commit and push the edit to use it)",
            program.path, base, base,
        )
    return committed


def enforce_budget(root: Path, program: Program, now: datetime | None = None) -> str | None:
    """Pauses the program (or lifts yesterday's daily pause) by its budgets on the fresh memory branch.

    What `autoloop publish` does for an outcome in which no iteration ran, since the proposing job may
    not write; returns the pause reason, None when no budget is reached.
    """
    with program_lock(root, program.name):
        memory = MemoryStore(root)
        memory.sync()
        over = _over_budget(memory, program, load_state(memory, program), RunOptions(), now)
    return over.reason if over is not None else None


def _over_budget(
    memory: MemoryStore, program: Program, state: statefile.StateFile, options: RunOptions, now: datetime | None
) -> IterationOutcome | None:
    """Pauses the program, before any model call, when its recorded spend reached a budget; returns that outcome."""
    moment = now or datetime.now(timezone.utc)
    machine = state.machine
    if budget.daily_pause_over(machine.paused, machine.pause_reason, moment) and options.writes:
        record_pause(memory, program, False, None)
    limit = budget.reached(program.config, machine, moment)
    if limit is None:
        return None
    reason = budget.pause_reason(limit, program.name, moment.date())
    log.warning("%s: %s", program.name, reason)
    if options.writes:
        record_pause(memory, program, True, reason)
    return IterationOutcome(
        program.name, machine.iteration_count, "paused", "no model call", None, machine.best_metric, reason=reason
    )


def _isolation(root: Path, program: Program, options: RunOptions, session: GitSession) -> Isolation:
    """Returns the isolation of the program's evaluations, resolved once per run (it reads the machine: PATH's
    folders, the process limit, bubblewrap) while nothing it depends on changes."""
    key = (root, program.config.isolation, program.config.evaluation_network, program.config.max_memory,
           program.config.max_disk, program.config.agent_network, options.isolation, options.agent_network,
           tuple(sorted(os.environ.items())))
    return session.cached("isolation", key, lambda: run_isolation(root, program, options.isolation,
                                                                  options.agent_network))


def iteration_rng(program: Program, iteration: int, slot: Slot | None = None) -> random.Random:
    """Returns the random source of one iteration, seeded from (program seed, name, iteration, slot of its tick)."""
    return slot_rng(program.config.seed, program.name, iteration, slot)


def _recorder(root: Path, program: str, slot: Slot | None) -> Callable[[float], bool]:
    """Returns whether the run that launched this slot recorded a sibling since a time (a run without a barrier
    records each slot as it ends, in the lanes' parent process); never for a plain iteration or a tick's slot."""
    if slot is None or slot.launch is None:
        return lambda start: False
    return functools.partial(taken_by, root, program, os.getppid())
