"""One iteration of a program, top to bottom: propose, check, evaluate, ratchet, commit, record."""

from __future__ import annotations

import functools
import logging
import os
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, Mapping

from autoloop_py import faults
from autoloop_py.git.objects import GitSession
from autoloop_py.loop import checks, integrity, lineage_store, novelty, recovery, rejudge, stale_parents
from autoloop_py.loop.checks import violations
from autoloop_py.loop.evaluate import EvaluationResult, evaluate
from autoloop_py.loop.lock import program_lock
from autoloop_py.loop.outcome import Outcome, write_outcome
from autoloop_py.loop.publishing import branch_tree, keep_candidate, settle_kept
from autoloop_py.loop.recording import (
    candidate_data,
    error_record,
    load_state,
    parse_or_new,
    primary_file,
    record_iteration,
    record_of,
    record_pause,
    rejection_note,
    seed_data,
    state_path,
    usage_of,
    with_baseline,
)
from autoloop_py.loop.workspace import Workspace
from autoloop_py.program.model import Program, require_on_base
from autoloop_py.program.target import target_files
from autoloop_py.proposers import get_proposer, llm
from autoloop_py.proposers.base import Proposal, ProposalRequest, Proposer
from autoloop_py.proposers.llm_call import CallLimits, limits_for
from autoloop_py.redact import Redactor, from_environment
from autoloop_py.sandbox import candidate_dir
from autoloop_py.sandbox.policy import SandboxPolicy
from autoloop_py.sandbox.run import Isolation, run_isolation
from autoloop_py.state import budget
from autoloop_py.state import file as statefile
from autoloop_py.state import trace
from autoloop_py.state.memory import MemoryStore, pack_if_due
from autoloop_py.state.population import Candidate
from autoloop_py.strategies import runner as strategy
from autoloop_py.strategies.engine import DecisionLike
from autoloop_py.strategies.prompt import RECENTLY_DELETED, prompt_context, render_iteration_prompt, with_data_section
from autoloop_py.strategies.runner import StrategyRunner

# load_state, parse_or_new, record_iteration, rejection_note, state_path and violations are re-exported
# from their own modules for callers that import them from here.
__all__ = [
    "IterationOutcome", "RunOptions", "guide_for", "iteration_rng", "measure_baseline",
    "run_iteration",
    "load_state", "parse_or_new", "record_iteration", "rejection_note", "state_path", "violations",
]

log = logging.getLogger(__name__)
_ERROR_TAIL_LINES = 20


@dataclass(frozen=True)
class RunOptions:
    """How iterations run.

    Attributes:
      proposer: tune | llm | agent; None takes the program's `proposer:` or `tune`.
      model: litellm model for the llm proposer (overrides nothing set in program.md).
      agent_command: the external agent command for the agent proposer.
      dry_run: propose and evaluate, but write no branch.
      run_url: link to the CI run, written into history entries.
      budget: byte budget of the state file.
      base_branch: the default branch program branches start from (None: detect).
      proposer_factory: builds a Proposer from its name (tests inject fakes here).
      ci_gate: keep an improving candidate as `pending-ci` until its commit's checks pass.
      directives: steering for this iteration (people's comments, a CI fix request), quoted as data.
      isolation: auto | bwrap | none, overriding the program's `isolation` (None: AUTOLOOP_ISOLATION, else the program's).
      llm_timeout: seconds per model request (overrides `llm-timeout`); llm_retries: likewise `llm-retries`.
      job_deadline: time.monotonic() at which the job is stopped (AUTOLOOP_JOB_TIMEOUT_MINUTES); model calls
        end early enough to leave the evaluation its time.
      outcome_dir: write the decided iteration there as an Outcome instead of committing, pushing or
        recording anything (`autoloop publish` does that, in a job that runs no candidate code).
    """

    proposer: str | None = None
    model: str | None = None
    agent_command: str | None = None
    dry_run: bool = False
    run_url: str | None = None
    budget: int = statefile.DEFAULT_BUDGET
    base_branch: str | None = None
    proposer_factory: Callable[..., Proposer] = get_proposer
    ci_gate: bool = False
    directives: tuple[str, ...] = ()
    isolation: str | None = None
    llm_timeout: float | None = None
    llm_retries: int | None = None
    job_deadline: float | None = None
    outcome_dir: Path | None = None

    @property
    def writes(self) -> bool:
        """Returns whether the iteration itself commits, pushes and records (not a dry run, no outcome directory)."""
        return not self.dry_run and self.outcome_dir is None


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
    root: Path, program: Program, options: RunOptions, now: datetime | None = None, session: GitSession | None = None
) -> IterationOutcome:
    """Runs one iteration of program in the repository at root and records it on the memory branch.

    session: the run's git session (one `cat-file --batch` for all its iterations); None makes one for this iteration.
    """
    with program_lock(root, program.name):
        outcome = _run_locked(root, program, options, now, session)
    if options.writes:
        pack_if_due(root, outcome.iteration)  # outside the lock: other runners need not wait for it
    return outcome


def _run_locked(
    root: Path, program: Program, options: RunOptions, now: datetime | None, session: GitSession | None = None
) -> IterationOutcome:
    """Runs the iteration while holding the program's lock."""
    clock = _Clock()
    memory = MemoryStore(root, session=session)
    with clock("load state"):
        memory.sync()
        # Before reconcile records anything: a stale copy of the file must not get a reused iteration number.
        integrity.check_records(memory, state_path(program), program.name, load_state(memory, program))
        recovery.reconcile(root, program, memory, options.budget, ci_gate=options.ci_gate, dry_run=not options.writes)
        state = load_state(memory, program, options.budget)
        runner = strategy.load_runner(program, root)
    over = _over_budget(memory, program, state, options, now)
    if over is not None:
        return over
    iteration = state.machine.iteration_count + 1
    rng = iteration_rng(program, iteration)
    key = recovery.new_key(program.name, iteration)
    proposer = _proposer(program, options)
    sandbox = run_isolation(root, program, options.isolation)
    with Workspace(root, program.name, base_branch=options.base_branch) as workspace:
        with clock("prepare branch"):
            workspace.prepare()
            require_on_base(program, workspace.path, workspace.base_ref, workspace.base_ref.startswith("origin/"))
        base_tree = branch_tree(root, workspace.branch)
        measured = _evaluate_baseline(program, workspace.path, state, clock, sandbox)
        best, baseline, failure = _baseline_outcome(state, measured)
        if measured is None and not options.ci_gate:
            best = rejudge.branch_bar(root, memory, program, state, best)
        seed = seed_data(program, workspace.path, baseline)
        if failure is not None:
            attempt = _Attempt(error_record(now, "baseline", f"baseline evaluation failed: {failure}", options.run_url))
        else:
            tip = "seed" if seed is not None else (memory.read(trace.tip_path(program.name)) or "").strip() or None
            context = _Context(
                program, workspace, proposer, state, best, iteration, rng, options, clock, now, runner, memory, tip, key,
                lineage_store.reader_for(root, memory.config.branch, program, memory.session.objects), baseline=measured,
                sandbox=sandbox,
            )
            attempt = _try_candidate(context, root)
        record = replace(with_baseline(attempt.record, baseline), key=key)
        base = workspace.base_sha
    if options.outcome_dir is not None:
        changes = attempt.changes if record.status == "accepted" else {}
        write_outcome(options.outcome_dir, Outcome(
            program.name, iteration, key, base_tree, best, record, changes, attempt.prompt, attempt.evaluated, seed,
            decision=attempt.decision, candidate_source=attempt.source if attempt.candidate else None,
            approach=attempt.approach, base_commit=base,
        ))
    elif not options.dry_run:
        with clock("record"):
            record = rejudge.rejudged(root, memory, program, record, best, options.budget)
            record = record_iteration(
                memory, program, record, options.budget, runner, attempt.candidate, attempt.prompt, attempt.evaluated,
                seed, attempt.decision, base, functools.partial(rejudge.recheck, program, best),
            )
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


@dataclass(frozen=True)
class _Context:
    """Everything one candidate attempt needs, so the steps take one argument."""

    program: Program
    workspace: Workspace
    proposer: Proposer
    state: statefile.StateFile
    best: float | None
    iteration: int
    rng: random.Random
    options: RunOptions
    clock: _Clock
    now: datetime | None
    runner: StrategyRunner | None
    memory: MemoryStore
    tip: str | None = None
    key: str = ""
    reader: lineage_store.TraceReader | None = None
    baseline: EvaluationResult | None = None
    sandbox: Isolation | None = None
    redactor: Redactor = field(default_factory=lambda: from_environment(os.environ))
    base_files: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Attempt:
    """What a candidate attempt produced: its history record, Population entry, prompt and trace data.

    failure is set when the proposal or its evaluation failed, so that the strategy may retry.
    """

    record: statefile.IterationRecord
    candidate: Candidate | None = None
    prompt: str = ""
    evaluated: trace.Evaluated | None = None
    decision: object = None
    failure: str | None = None
    changes: Mapping[str, str | None] = field(default_factory=dict)
    source: str | None = None
    approach: str | None = None


def _try_candidate(ctx: _Context, root: Path) -> _Attempt:
    """Decides, then proposes, checks, evaluates and ratchets a candidate; returns what to record."""
    with ctx.clock("propose"):
        files = ctx.workspace.files(target_files(ctx.program.target, ctx.workspace.path))
        ctx = replace(ctx, base_files=files)
        decision, files, prompt = _prepare_prompt(ctx, files, root)
    if decision is not None and strategy.evaluates_as_is(ctx.runner, decision):
        return _as_is(ctx, decision, files)
    return _with_retries(ctx, decision, files, prompt, root)


def _with_retries(
    ctx: _Context, decision: DecisionLike | None, files: dict[str, str], prompt: str, root: Path
) -> _Attempt:
    """Runs attempts with the same decision until one does not fail or the strategy allows no more retries."""
    attempt = _attempt(ctx, decision, files, prompt)
    spent: list[statefile.IterationRecord] = []
    while (
        attempt.failure
        # Its calls so far may have reached a budget: then no retry calls the model again.
        and budget.reached_after(ctx.program.config, ctx.state.machine, [*spent, attempt.record], _now(ctx)) is None
        and (again := strategy.retry(ctx.runner, decision, attempt.failure)) is not None
    ):
        decision, spent = again, [*spent, attempt.record]
        log.info("%s: attempt %d, after: %s", ctx.program.name, strategy.attempts_of(decision), attempt.failure)
        ctx.workspace.reset()
        ctx.workspace.write(files)
        prompt = _strategy_prompt(ctx, decision, files, root)
        attempt = _attempt(ctx, decision, files, prompt)
    return _with_spent(attempt, spent)


def _now(ctx: _Context) -> datetime:
    return ctx.now or datetime.now(timezone.utc)


def _with_spent(attempt: _Attempt, earlier: list[statefile.IterationRecord]) -> _Attempt:
    """Returns the attempt whose record also counts the tokens and cost of the earlier, failed attempts."""
    if not earlier:
        return attempt
    records = [*earlier, attempt.record]
    tokens = sum(r.tokens or 0 for r in records) or None
    costs = [r.cost for r in records if r.cost is not None]
    return replace(attempt, record=replace(attempt.record, tokens=tokens, cost=sum(costs) if costs else None))


def _as_is(ctx: _Context, decision: DecisionLike, files: dict[str, str]) -> _Attempt:
    """Records the Target as it is, with no proposal (FunSearch's seed): the baseline's evaluation, else a new one."""
    result = ctx.baseline
    if result is None:
        with ctx.clock("evaluate"):
            result, _ = evaluate_copy(ctx.program, ctx.workspace.path, sandbox=_policy(ctx.sandbox))
    summary = f"{decision.operator}: the Target as it is"
    proposal = Proposal({}, summary, approach="the unchanged Target")
    usage: dict[str, object] = {"extra": strategy.history_bullets(decision, result.metric)}
    if not result.ok or result.metric is None:
        record = error_record(ctx.now, summary, f"evaluation failed: {result.error}", ctx.options.run_url, **usage)
    else:
        notes = f"the unchanged code scores {result.metric:g}; recorded without a proposal, nothing to commit"
        record = record_of("rejected", ctx.now, summary, result.metric, notes, None, ctx.options.run_url, **usage)
    evaluated = _evaluated(ctx, decision, proposal, result.metrics, "", runs=result.runs)
    source = _candidate_source(ctx, proposal, files)
    candidate = _candidate(ctx, decision, record, proposal, files)
    return _Attempt(record, candidate, "", evaluated, decision, source=source, approach=proposal.approach)


def _attempt(ctx: _Context, decision: DecisionLike | None, files: dict[str, str], prompt: str) -> _Attempt:
    """Proposes, checks, evaluates and ratchets one candidate; returns what to record."""
    program, workspace, now, options = ctx.program, ctx.workspace, ctx.now, ctx.options
    run_url = options.run_url
    # Hashed before any proposer runs, from the runner's own worktree, which no candidate process ever sees.
    guarded = checks.protected_hashes(program, workspace.path)
    with ctx.clock("propose"):
        agent_sandbox = ctx.sandbox.agent if ctx.sandbox else None
        request = ProposalRequest(program, files, prompt, workspace.path, ctx.iteration, sandbox=agent_sandbox)
        proposal = ctx.proposer.propose(request, ctx.rng)
    faults.checkpoint("after-propose")
    usage = usage_of(proposal)
    if decision is not None:
        usage["extra"] = strategy.history_bullets(decision, None)
    if proposal.failure:
        record = error_record(now, proposal.summary or "no candidate", proposal.failure, run_url, **usage)
        return _Attempt(record, prompt=prompt, decision=decision, failure=proposal.failure)
    with ctx.clock("check"):
        real, clashes = checks.real_paths(workspace.path, proposal.files)
        proposal = replace(proposal, files=real)
        problems = [*proposal.problems, *clashes, *violations(program, files, proposal.files)]
        problems += checks.links(workspace.path, proposal.files) + checks.protected_changes(guarded, proposal.files)
        problems += _secrets_in(proposal.files, ctx.redactor)
    if problems:
        notes = "Rejected before evaluation: " + "; ".join(problems)
        record = record_of("rejected", now, proposal.summary, None, notes, proposal.lesson, run_url, **usage)
        return _Attempt(record, prompt=prompt, decision=decision)
    verdict = _screen(ctx, decision, proposal, files)
    if verdict is not None:
        record = record_of("rejected", now, proposal.summary, verdict.metric, verdict.note(), proposal.lesson, run_url, **usage)
        source = proposal.files.get(_primary_of(ctx) or "")
        row = _evaluated(ctx, decision, proposal, verdict.metrics, prompt, source, {"novelty": verdict.metadata()})
        return _Attempt(record, prompt=prompt, evaluated=row, decision=decision)
    workspace.write(proposal.files)
    with ctx.clock("evaluate"):
        faults.checkpoint("during-evaluation")
        result, tampered = evaluate_copy(program, workspace.path, guarded, _policy(ctx.sandbox))
    evaluated = _evaluated(ctx, decision, proposal, result.metrics, prompt, runs=result.runs)
    failure = None
    if tampered:
        record = error_record(now, proposal.summary, f"the candidate changed protected files: {tampered}", run_url, **usage)
    elif not result.ok or result.metric is None:
        record = error_record(now, proposal.summary, f"evaluation failed: {result.error}", run_url, **usage)
        failure = _failure_text(result)
    else:
        if decision is not None:
            usage["extra"] = strategy.history_bullets(decision, result.metric)
        baseline = ctx.best if ctx.state.machine.best_metric is None else None
        marks = recovery.trailers(ctx.key, result.metric, baseline) if ctx.key else {}
        record = _ratchet(program, workspace, proposal, result, ctx.best, ctx.iteration, options, ctx.clock, now, usage, marks)
    candidate = _candidate(ctx, decision, record, proposal, files)
    # What the candidate changed on the branch: the parent the strategy placed, then the proposal.
    changes = {path: text for path, text in files.items() if ctx.base_files.get(path) != text} | dict(proposal.files)
    source = _candidate_source(ctx, proposal, files)
    return _Attempt(record, candidate, prompt, evaluated, decision, failure, changes, source, proposal.approach)


def _secrets_in(files: Mapping[str, str | None], redactor: Redactor) -> list[str]:
    """Returns a problem for each changed file holding the value of a secret variable (it would be pushed)."""
    return [f"{path} holds the value of a secret variable" for path, text in files.items() if text and redactor.found_in(text)]


def _failure_text(result: EvaluationResult) -> str:
    """Returns why an evaluation failed, with the end of its stderr, for a retry's prompt."""
    tail = "\n".join(result.stderr_tail.strip().splitlines()[-_ERROR_TAIL_LINES:])
    return f"evaluation failed: {result.error}" + (f"\n{tail}" if tail else "")


def _prepare_prompt(ctx: _Context, files: dict[str, str], root: Path) -> tuple[DecisionLike | None, dict[str, str], str]:
    """Returns (strategy decision or None, Target files as the proposer sees them, the prompt)."""
    if ctx.runner is None:
        deleted = lineage_store.deleted_items(ctx.reader, ctx.tip)
        context = prompt_context(ctx.program, files, ctx.state, ctx.best, ctx.iteration, ctx.options.directives, deleted)
        return None, files, render_iteration_prompt(context)
    rebase = stale_parents.rebaser(root, ctx.program.name, ctx.runner.primary, ctx.workspace.base_sha, ctx.memory.read)
    decision = strategy.decide(
        ctx.runner, ctx.state, ctx.best, ctx.iteration, ctx.program.direction, ctx.rng, ctx.memory.read,
        guide_for(ctx.program, ctx.options), rebase,
    )
    placed = strategy.with_parent(ctx.runner, decision, files)
    changed = {path: text for path, text in placed.items() if files.get(path) != text}
    if changed:
        ctx.workspace.write(changed)
    return decision, placed, _strategy_prompt(ctx, decision, placed, root)


def _strategy_prompt(ctx: _Context, decision: DecisionLike, files: dict[str, str], root: Path) -> str:
    """Returns the strategy's prompt for the decision, with the recently deleted items as data."""
    assert ctx.runner is not None
    prompt = strategy.render_prompt(
        ctx.runner, decision, ctx.program, files, ctx.state, ctx.best, root, ctx.options.directives, ctx.memory.read
    )
    deleted = lineage_store.deleted_items(ctx.reader, _parent_id(ctx, decision))
    return with_data_section(prompt, RECENTLY_DELETED, deleted)


def _screen(
    ctx: _Context, decision: DecisionLike | None, proposal: Proposal, files: Mapping[str, str]
) -> novelty.NoveltyVerdict | None:
    """Returns why the candidate is not worth evaluating (a repeat, or mostly re-added deleted lines), else None."""
    twin = checks.duplicate_of(ctx.runner, ctx.state, proposal, files, ctx.memory.read)
    if twin is not None:
        # FunSearch's own check (its population's code hashes) runs even with the novelty filter off.
        return novelty.NoveltyVerdict(novelty.DUPLICATE, of=str(twin.id))
    if ctx.reader is None:
        return None
    return lineage_store.screen(
        ctx.reader, ctx.program, _primary_of(ctx), files, proposal.files, _parent_id(ctx, decision), ctx.best
    )


def _parent_id(ctx: _Context, decision: DecisionLike | None) -> str | None:
    """Returns the trace row id of the program the candidate is derived from."""
    return str(decision.parents[0].id) if decision is not None and decision.parents else ctx.tip


def _primary_of(ctx: _Context) -> str | None:
    """Returns the Target file whose source a trace row keeps."""
    return ctx.runner.primary if ctx.runner else primary_file(ctx.program, ctx.workspace.path)


def _evaluated(
    ctx: _Context, decision: DecisionLike | None, proposal: Proposal, metrics: Mapping[str, object], prompt: str,
    source: str | None = None, metadata: Mapping[str, object] | None = None, runs: tuple[float, ...] = (),
) -> trace.Evaluated:
    """Returns the trace data of a candidate (its source read from the workspace unless given)."""
    island = getattr(decision, "island", None)
    if island is not None:  # the report and the lineage chart place strategy candidates by island
        metadata = {**(metadata or {}), "island": island}
    return candidate_data(
        _primary_of(ctx), ctx.workspace.path, _parent_id(ctx, decision), decision.operator if decision else None,
        proposal, metrics, prompt, source, metadata, runs,
    )


def _candidate(
    ctx: _Context, decision: DecisionLike | None, record: statefile.IterationRecord, proposal: Proposal, files: Mapping[str, str]
) -> Candidate | None:
    """Returns the Population entry of an evaluated strategy candidate (None in the default flow)."""
    source = _candidate_source(ctx, proposal, files)
    if ctx.runner is None or decision is None or source is None:
        return None
    return strategy.candidate_for(ctx.runner, decision, record, source, proposal.approach, ctx.iteration)


def _candidate_source(ctx: _Context, proposal: Proposal, files: Mapping[str, str]) -> str | None:
    """Returns the source of the strategy's primary file a Population entry keeps (None without a strategy)."""
    if ctx.runner is None:
        return None
    primary = ctx.runner.primary
    return proposal.files.get(primary) or files.get(primary, "")


def _ratchet(
    program: Program,
    workspace: Workspace,
    proposal: Proposal,
    result: EvaluationResult,
    best: float | None,
    iteration: int,
    options: RunOptions,
    clock: _Clock,
    now: datetime | None,
    usage: dict[str, object],
    marks: Mapping[str, str] | None = None,
) -> statefile.IterationRecord:
    """Keeps the candidate only when it improves on the best; commits and pushes it then (`marks`: its trailers)."""
    assert result.metric is not None
    run_url = options.run_url
    if not statefile.is_improvement(result.metric, best, program.direction, program.config.min_delta):
        notes = rejection_note(result.metric, best, program)
        return record_of("rejected", now, proposal.summary, result.metric, notes, proposal.lesson, run_url, **usage)
    notes = f"{program.evaluation.metric if program.evaluation else 'metric'} improved to {result.metric:g}"
    record = record_of("accepted", now, proposal.summary, result.metric, notes, proposal.lesson, run_url, **usage)
    if not options.writes:
        return record
    with clock("commit"):
        commit, withdrawn = keep_candidate(workspace, program, proposal.summary, iteration, run_url, marks or {})
    return settle_kept(record, commit, withdrawn, options.ci_gate)


def measure_baseline(
    program: Program, workdir: Path, state: statefile.StateFile, clock: _Clock | None = None
) -> tuple[float | None, float | None, str | None]:
    """Returns (best, baseline, failure): evaluates the unchanged code when no best is known yet."""
    return _baseline_outcome(state, _evaluate_baseline(program, workdir, state, clock))


def _evaluate_baseline(
    program: Program, workdir: Path, state: statefile.StateFile, clock: _Clock | None, sandbox: Isolation | None = None
) -> EvaluationResult | None:
    """Returns the evaluation of the unchanged code, made only when no best is known yet (else None)."""
    if state.machine.best_metric is not None:
        return None
    with (clock or _Clock())("evaluate baseline"):
        return evaluate_copy(program, workdir, sandbox=_policy(sandbox))[0]


def evaluate_copy(
    program: Program, workdir: Path, guarded: Mapping[str, str] | None = None, sandbox: SandboxPolicy | None = None
) -> tuple[EvaluationResult, str]:
    """Evaluates a fresh standalone copy of the tree at `workdir`; returns the result and the protected files it changed.

    The evaluated code never runs in the runner's worktree (its `.git` file leads to the user's repository),
    and sees exactly the tree the runner wrote, nothing an agent left behind.
    """
    with candidate_dir.copy_of(workdir, prefix="autoloop-eval-") as tree:
        result = evaluate(program, tree, sandbox=sandbox)
        return result, checks.tampered(program, tree, guarded) if guarded is not None else ""


def _policy(sandbox: Isolation | None) -> SandboxPolicy | None:
    """Returns the evaluation's policy (None: evaluate() derives it from the program)."""
    return sandbox.evaluation if sandbox else None


def _baseline_outcome(
    state: statefile.StateFile, result: EvaluationResult | None
) -> tuple[float | None, float | None, str | None]:
    """Returns (best, baseline, failure) from the baseline's evaluation (None: the recorded best stands)."""
    if result is None:
        return state.machine.best_metric, None, None
    if not result.ok or result.metric is None:
        return None, None, result.error or "no metric"
    return result.metric, result.metric, None


def iteration_rng(program: Program, iteration: int) -> random.Random:
    """Returns the random source of one iteration, seeded from (program seed, name, iteration)."""
    return random.Random(f"{program.config.seed}:{program.name}:{iteration}")


def guide_for(program: Program, options: RunOptions) -> Callable[[str], str] | None:
    """Returns a one-prompt LLM call for a strategy's guide (None unless the llm proposer has a model)."""
    if (options.proposer or program.config.proposer or "tune") != "llm":
        return None
    model = llm.resolve_model(program, options.model)
    return None if model is None else functools.partial(llm.complete, model, limits=llm_limits(program, options))


def llm_limits(program: Program, options: RunOptions) -> CallLimits:
    """Returns the bounds of this iteration's model calls: CLI over frontmatter, ending before the job's deadline."""
    config = program.config
    timeout = options.llm_timeout if options.llm_timeout is not None else config.llm_timeout
    retries = options.llm_retries if options.llm_retries is not None else config.llm_retries
    return limits_for(timeout, retries, options.job_deadline, reserve=config.evaluation_timeout * config.repeats)


def _proposer(program: Program, options: RunOptions) -> Proposer:
    name = options.proposer or program.config.proposer or "tune"
    limits = llm_limits(program, options)
    return options.proposer_factory(name, model=options.model, agent_command=options.agent_command, limits=limits)


class _Clock:
    """Accumulates wall time per named step."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    @contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[step] = self.timings.get(step, 0.0) + time.perf_counter() - start
