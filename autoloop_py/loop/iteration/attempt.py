"""One candidate attempt: decide, prompt, propose, check, evaluate and ratchet, retried as the strategy allows."""

from __future__ import annotations

import functools
import logging
import os
import random
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, ContextManager, Mapping

from autoloop_py import faults
from autoloop_py.errors import GitError
from autoloop_py.loop.checkout import stale_parents
from autoloop_py.loop.checkout.workspace import Workspace
from autoloop_py.loop.evaluation import acceptance, checks, holdout
from autoloop_py.loop.evaluation.checks import violations
from autoloop_py.loop.evaluation.evaluate import EvaluationResult
from autoloop_py.loop.iteration import lineage_store, model_use, novelty, prompt_use, similarity
from autoloop_py.loop.evaluation.fresh_copies import evaluate_copy
from autoloop_py.loop.iteration.baseline import evaluation_policy
from autoloop_py.loop.iteration.options import Clock, RunOptions
from autoloop_py.loop.record import island_claims, recovery
from autoloop_py.loop.record.publishing import keep_candidate, settle_kept
from autoloop_py.loop.record.recording import (
    artifacts_of_result,
    candidate_data,
    error_record,
    failure_note,
    primary_file,
    record_of,
    rejected_note,
    rejection_note,
    stages_metadata,
    usage_of,
)
from autoloop_py.program import models
from autoloop_py.program.model import Program
from autoloop_py.program.models import ModelSpec
from autoloop_py.program.target import target_files
from autoloop_py.proposers import llm
from autoloop_py.proposers.base import Proposal, ProposalRequest, Proposer, Usage
from autoloop_py.proposers.llm_call import CallLimits, limits_for
from autoloop_py.proposers.prompt_choice import PromptChoice
from autoloop_py.redact import Redactor, from_environment
from autoloop_py.sandbox.run import Isolation
from autoloop_py.state import budget
from autoloop_py.state import file as statefile
from autoloop_py.state import trace, untrusted_text
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.model_stats import use_bullets
from autoloop_py.state.population import Candidate, population_of
from autoloop_py.strategies import pareto
from autoloop_py.strategies import runner as strategy
from autoloop_py.strategies.engine import DecisionLike
from autoloop_py.strategies.prompt import (
    RECENTLY_DELETED,
    prompt_context,
    render_iteration_prompt,
    with_data_section,
    with_feedback_section,
    with_instruction,
)
from autoloop_py.strategies.runner import StrategyRunner

log = logging.getLogger(__name__)
_ERROR_TAIL_LINES = 20


@dataclass(frozen=True)
class AttemptContext:
    """Everything one candidate attempt needs, so the steps take one argument."""

    program: Program
    workspace: Workspace
    proposer: Proposer
    state: statefile.StateFile
    best: float | None
    iteration: int
    rng: random.Random
    options: RunOptions
    clock: Clock
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
    history: lineage_store.TraceReader | None = None
    model: ModelSpec | None = None
    # Usage of the strategy's guide and meta calls this iteration made (appended to by the guide call).
    guide_spent: list[Usage] = field(default_factory=list)
    verify_checkout: Callable[..., None] = lambda during="": None
    # A context manager over a step that runs candidate code: the runner's refs must not move meanwhile.
    hold_refs: Callable[..., ContextManager[None]] = lambda during="": nullcontext()
    # The prompt variant drawn for this iteration (its instruction goes into every prompt of it).
    prompt_variant: PromptChoice = PromptChoice()
    # The baseline measured this iteration, as its row (written with the record) keeps it: the tip's code.
    seed: trace.Evaluated | None = None


@dataclass(frozen=True)
class Attempt:
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


def try_candidate(ctx: AttemptContext, root: Path) -> Attempt:
    """Decides, then proposes, checks, evaluates and ratchets a candidate; returns what to record."""
    with ctx.clock("propose"):
        files = ctx.workspace.files(target_files(ctx.program.target, ctx.workspace.path))
        drawn = model_use.draw(ctx.program, ctx.options, ctx.state, ctx.iteration)
        # A fresh list, holding what was spent before (embedding the seed, under `novelty: embedding`).
        ctx = replace(ctx, base_files=files, model=drawn, guide_spent=list(ctx.guide_spent))
        guide = guide_for(ctx.program, ctx.options, drawn, ctx.guide_spent, ctx.proposer)
        ctx = replace(ctx, prompt_variant=prompt_use.choose(ctx.program, ctx.state, ctx.iteration, guide))
        decision, files, prompt = _prepare_prompt(ctx, files, root)
    # The decision records the Target as it is, without a proposal (its `as_is`: the seed).
    as_is = decision is not None and ctx.runner is not None and bool(getattr(decision, "as_is", False))
    if as_is:
        attempt, drawn = _as_is(ctx, decision, files), None
    else:
        attempt = _with_retries(ctx, decision, files, prompt, root)
    evaluated = attempt.evaluated
    if evaluated is not None and ctx.guide_spent:  # the trace row's own tokens and cost are the proposer's
        evaluated = replace(evaluated, metadata={**evaluated.metadata, **model_use.guide_metadata(ctx.guide_spent)})
    record, evaluated = prompt_use.with_choice(attempt.record, evaluated, ctx.prompt_variant, used=not as_is)
    return replace(attempt, record=model_use.with_use(record, drawn, ctx.guide_spent), evaluated=evaluated)


def _with_retries(
    ctx: AttemptContext, decision: DecisionLike | None, files: dict[str, str], prompt: str, root: Path
) -> Attempt:
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


def _now(ctx: AttemptContext) -> datetime:
    return ctx.now or datetime.now(timezone.utc)


def _with_spent(attempt: Attempt, earlier: list[statefile.IterationRecord]) -> Attempt:
    """Returns the attempt whose record also counts the tokens and cost of the earlier, failed attempts."""
    if not earlier:
        return attempt
    records = [*earlier, attempt.record]
    tokens = sum(r.tokens or 0 for r in records) or None
    costs = [r.cost for r in records if r.cost is not None]
    return replace(attempt, record=replace(attempt.record, tokens=tokens, cost=sum(costs) if costs else None))


def _as_is(ctx: AttemptContext, decision: DecisionLike, files: dict[str, str]) -> Attempt:
    """Records the Target as it is, with no proposal (FunSearch's seed): the baseline's evaluation, else a new one."""
    result = ctx.baseline
    if result is None:
        with ctx.clock("evaluate"):
            result = evaluate_copy(ctx.program, ctx.workspace.path, sandbox=evaluation_policy(ctx.sandbox))
    summary = f"{decision.operator}: the Target as it is"
    proposal = Proposal({}, summary, approach="the unchanged Target")
    usage: dict[str, object] = {"extra": strategy.history_bullets(decision, result.metric)}
    if not result.ok or result.metric is None:
        record = error_record(ctx.now, summary, failure_note(result), ctx.options.run_url, **usage)
    else:
        notes = f"the unchanged code scores {result.metric:g}; recorded without a proposal, nothing to commit"
        usage["extra"] = (*strategy.history_bullets(decision, result.metric), *acceptance.baseline_bullets(
            ctx.program, result.metrics))
        record = record_of(
            "rejected", ctx.now, summary,
            metric=result.metric, notes=notes, run_url=ctx.options.run_url, **usage,
        )
    evaluated = with_kept_vector(ctx, _evaluated(ctx, decision, proposal, result.metrics, "", runs=result.runs))
    source = _candidate_source(ctx, proposal, files)
    candidate = _candidate(ctx, decision, record, proposal, files)
    return Attempt(record, candidate, "", evaluated, decision, source=source, approach=proposal.approach)


def _attempt(ctx: AttemptContext, decision: DecisionLike | None, files: dict[str, str], prompt: str) -> Attempt:
    """Proposes, checks, evaluates and ratchets one candidate; returns what to record."""
    program, workspace, now, run_url = ctx.program, ctx.workspace, ctx.now, ctx.options.run_url
    # Hashed before any proposer runs, from the runner's own worktree, which no candidate process ever sees.
    guarded = checks.protected_hashes(program, workspace.path, workspace.tracked)
    with ctx.clock("propose"):
        agent_sandbox = ctx.sandbox.agent if ctx.sandbox else None
        request = ProposalRequest(
            program, files, prompt, workspace.path, ctx.iteration, sandbox=agent_sandbox, model=ctx.model
        )
        with ctx.hold_refs(during="the proposer ran"):
            proposal = _plain_text(_proposed(ctx, request))
    ctx.verify_checkout(during="the proposer ran")
    faults.checkpoint("after-propose")
    usage = usage_of(proposal)
    if decision is not None:
        usage["extra"] = strategy.history_bullets(decision, None)
    if proposal.failure:
        record = error_record(now, proposal.summary or "no candidate", proposal.failure, run_url, **usage)
        return Attempt(record, prompt=prompt, decision=decision, failure=proposal.failure)
    with ctx.clock("check"):
        real, clashes = checks.real_paths(workspace.path, proposal.files)
        proposal = replace(proposal, files=real)
        problems = [*proposal.problems, *clashes, *violations(program, files, proposal.files)]
        problems += checks.links(workspace.path, proposal.files) + checks.protected_changes(guarded, proposal.files)
        problems += _secrets_in(proposal.files, ctx.redactor)
    if problems:
        notes = "Rejected before evaluation: " + "; ".join(problems)
        record = _judged("rejected", now, proposal, run_url, usage, notes)
        return Attempt(record, prompt=prompt, decision=decision)
    verdict, embedded = _screen(ctx, decision, proposal, files)
    if verdict is not None:
        record = _judged("rejected", now, proposal, run_url, usage, verdict.note(), verdict.metric)
        source = proposal.files.get(_primary_of(ctx) or "")
        row = _evaluated(ctx, decision, proposal, verdict.metrics, prompt, source, {"novelty": verdict.metadata()})
        return Attempt(record, prompt=prompt, evaluated=row, decision=decision)
    workspace.write(proposal.files)
    with ctx.clock("evaluate"):
        faults.checkpoint("during-evaluation")
        with ctx.hold_refs(during="the evaluation ran"):
            result = evaluate_copy(program, workspace.path, guarded, evaluation_policy(ctx.sandbox))
    ctx.verify_checkout(during="the evaluation ran")
    evaluated = _evaluated(ctx, decision, proposal, result.metrics, prompt, runs=result.runs,
                           metadata={**stages_metadata(result), **embedded})
    evaluated = replace(evaluated, artifacts=artifacts_of_result(result))
    failure = None
    if result.tampered:
        note = f"the candidate changed protected files: {result.tampered}"
        record = error_record(now, proposal.summary, note, run_url, **usage)
    elif not result.ok or (result.metric is None and not result.rejection):
        record = error_record(now, proposal.summary, failure_note(result), run_url, **usage)
        failure = _failure_text(result)
    elif result.rejection or result.stopped:  # a stage, or the evaluator, judged the candidate: never an error
        if decision is not None:
            usage["extra"] = strategy.history_bullets(decision, result.metric)
        saved = lineage_store.stage_seconds(ctx.history, len(result.stages)) if result.stopped else None
        record = _judged("rejected", now, proposal, run_url, usage, rejected_note(result, saved), result.metric)
    else:
        if decision is not None:
            usage["extra"] = strategy.history_bullets(decision, result.metric)
        baseline = ctx.best if ctx.state.machine.best_metric is None else None
        # The models called so far and the prompt variant ride in the trailers too, so a record rebuilt after a crash
        # counts them.
        tokens, cost = usage.get("tokens"), usage.get("cost")
        use = model_use.iteration_use(ctx.model, tokens, cost, ctx.guide_spent)  # type: ignore[arg-type]
        bullets = (*use_bullets(use), *prompt_use.bullets(ctx.prompt_variant))
        marks = recovery.trailers(ctx.key, result.metric, baseline, bullets) if ctx.key else {}
        measured = ctx.baseline.metrics if ctx.baseline is not None and ctx.baseline.ok else None
        verdict = acceptance.judge(program, result.metrics, ctx.state, measured)
        extra: tuple[tuple[str, str], ...] = usage.get("extra", ())  # type: ignore[assignment]
        usage["extra"] = (*extra, *acceptance.bullets(program, result.metrics, verdict, measured))
        record = _ratchet(ctx, proposal, result, usage, marks, verdict, files)
    candidate = _candidate(ctx, decision, record, proposal, files)
    # What the candidate changed on the branch: the parent the strategy placed, then the proposal.
    changes = {path: text for path, text in files.items() if ctx.base_files.get(path) != text} | dict(proposal.files)
    source = _candidate_source(ctx, proposal, files)
    return Attempt(record, candidate, prompt, evaluated, decision, failure, changes, source, proposal.approach)


def _judged(
    status: str, now: datetime | None, proposal: Proposal, run_url: str | None, usage: Mapping[str, object],
    notes: str, metric: float | None = None,
) -> statefile.IterationRecord:
    """Returns the record of a proposal that reached a verdict, with its summary and lesson."""
    return record_of(status, now, proposal.summary, metric=metric, notes=notes, lesson=proposal.lesson, run_url=run_url,
                     **usage)


def _proposed(ctx: AttemptContext, request: ProposalRequest) -> Proposal:
    """Returns the proposer's proposal; the last iteration's record, left to commit, is committed meanwhile.

    Ordering invariant: the last record is committed (durable) before this iteration acts on the reply (no check,
    evaluation or record of it, no fault step, comes earlier), so a run killed between a reply and its record keeps
    every earlier record; its push is left running. The decision that prompted this request read that record as
    it was rendered (MemoryStore.unwritten), so it saw it before it was committed.
    """
    if not ctx.memory.unwritten():
        return ctx.proposer.propose(request, ctx.rng)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="autoloop-record")
    try:
        committed = pool.submit(ctx.memory.commit_unwritten)
        try:
            return ctx.proposer.propose(request, ctx.rng)
        finally:
            committed.result()
    finally:
        pool.shutdown(wait=False)


def _plain_text(proposal: Proposal) -> Proposal:
    """Returns the proposal with its texts (summary, lesson, approach, failure) stripped of escape sequences and
    control characters: they reach the terminal, the state file and the commit message."""
    def clean(text: str | None) -> str | None:
        return untrusted_text.plain(text) if text is not None else None

    return replace(proposal, summary=untrusted_text.plain(proposal.summary), lesson=clean(proposal.lesson),
                   approach=clean(proposal.approach), failure=clean(proposal.failure))  # fmt: skip


def _secrets_in(files: Mapping[str, str | None], redactor: Redactor) -> list[str]:
    """Returns a problem for each changed file holding the value of a secret variable (it would be pushed)."""
    found = (path for path, text in files.items() if text and redactor.found_in(text))
    return [f"{path} holds the value of a secret variable" for path in found]


def _failure_text(result: EvaluationResult) -> str:
    """Returns why an evaluation failed, with its feedback (an upstream `log_tail`) and stderr's end, for a retry."""
    ends = ("\n".join(text.strip().splitlines()[-_ERROR_TAIL_LINES:]) for text in (result.feedback, result.stderr_tail))
    return "\n".join(part for part in (f"evaluation failed: {result.error}", *ends) if part)


def _prepare_prompt(
    ctx: AttemptContext, files: dict[str, str], root: Path
) -> tuple[DecisionLike | None, dict[str, str], str]:
    """Returns (strategy decision or None, Target files as the proposer sees them, the prompt)."""
    if ctx.runner is None:
        deleted = lineage_store.deleted_items(ctx.reader, ctx.tip)
        context = prompt_context(
            ctx.program, files, ctx.state, ctx.best, ctx.iteration, ctx.options.directives, deleted
        )
        told = _feedback(ctx, ctx.tip)
        prompt = with_feedback_section(render_iteration_prompt(context), told)
        return None, files, with_instruction(prompt, ctx.prompt_variant.instruction)
    rebase = stale_parents.rebaser(root, ctx.program.name, ctx.runner.primary, ctx.workspace.base_sha, ctx.memory.read)
    decision = strategy.decide(
        ctx.runner, ctx.state, ctx.best, ctx.iteration, ctx.program.direction, ctx.rng, ctx.memory.read,
        guide_for(ctx.program, ctx.options, ctx.model, ctx.guide_spent, ctx.proposer), rebase, ctx.options.slot,
    )
    slot, island = ctx.options.slot, strategy.island_of(ctx.runner, decision)
    if slot is not None and slot.launch is not None and island is not None and ctx.options.outcome_dir is not None:
        island_claims.claim(ctx.options.outcome_dir, island)  # the run keeps the slots it starts next off it
    placed = strategy.with_parent(ctx.runner, decision, files)
    changed = {path: text for path, text in placed.items() if files.get(path) != text}
    if changed:
        ctx.workspace.write(changed)
    return decision, placed, _strategy_prompt(ctx, decision, placed, root)


def _strategy_prompt(ctx: AttemptContext, decision: DecisionLike, files: dict[str, str], root: Path) -> str:
    """Returns the strategy's prompt for the decision, with the recently deleted items as data."""
    assert ctx.runner is not None
    others = lineage_store.other_parents_feedback(
        ctx.history, [str(c.id) for c in decision.parents], ctx.program, ctx.redactor, ctx.state
    )
    prompt = strategy.render_prompt(
        ctx.runner, decision, ctx.program, files, ctx.state, ctx.best, ctx.options.directives, ctx.memory.read,
        _feedback(ctx, _parent_id(ctx, decision)), others,
    )
    deleted = lineage_store.deleted_items(ctx.reader, _parent_id(ctx, decision))
    return with_instruction(with_data_section(prompt, RECENTLY_DELETED, deleted), ctx.prompt_variant.instruction)


def _feedback(ctx: AttemptContext, parent_id: str | None) -> tuple[str, ...]:
    """Returns what evaluations said of the parent and its latest attempts not kept, redacted, for the prompt."""
    seed = None  # the baseline this iteration measured is recorded with it, after the prompt
    if ctx.baseline is not None and parent_id == trace.SEED_ID:
        seed = trace.TraceRow(trace.SEED_ID, 0, None, dict(ctx.baseline.metrics), "accepted",
                              extra={"artifacts": artifacts_of_result(ctx.baseline)})
    state = ctx.state if ctx.runner is not None else None
    return lineage_store.prompt_feedback(ctx.history, parent_id, ctx.program, ctx.redactor, state, seed)


def _screen(
    ctx: AttemptContext, decision: DecisionLike | None, proposal: Proposal, files: Mapping[str, str]
) -> tuple[novelty.NoveltyVerdict | None, dict[str, Any]]:
    """Returns (why the candidate is not worth evaluating: a repeat, mostly re-added deleted lines, or under
    `novelty: embedding` too similar to an evaluated candidate, else None; its trace row's kept vector, if any)."""
    twin = checks.duplicate_of(ctx.runner, ctx.state, proposal, files, ctx.memory.read)
    if twin is not None:
        # FunSearch's own check (its population's code hashes) runs even with the novelty filter off.
        return novelty.NoveltyVerdict(novelty.DUPLICATE, of=str(twin.id)), {}
    if ctx.reader is None:
        return None, {}
    verdict = lineage_store.screen(
        ctx.reader, ctx.program, _primary_of(ctx), files, proposal.files, _parent_id(ctx, decision), ctx.best
    )
    if verdict is not None or ctx.program.config.novelty != "embedding":
        return verdict, {}
    return _similar(ctx, ctx.reader, decision, proposal, files)


def _similar(
    ctx: AttemptContext, reader: lineage_store.TraceReader, decision: DecisionLike | None, proposal: Proposal,
    files: Mapping[str, str],
) -> tuple[novelty.NoveltyVerdict | None, dict[str, Any]]:
    """Returns the similar verdict on a single-file candidate too close to an evaluated one of its island (else None)
    and its trace row's kept vector; the neighbours' vectors are read from their rows when kept there."""
    primary = _primary_of(ctx)
    source = proposal.files.get(primary) if primary is not None else None
    if primary is None or source is None or set(files) | set(proposal.files) != {primary}:
        return None, {}
    origins: dict[str, str] = {}
    if ctx.runner is not None:
        population = population_of(ctx.state, ctx.memory.read)
        neighbours = similarity.population_neighbours(population, strategy.island_of(ctx.runner, decision))
        origins = lineage_store.copy_origins(population)
    else:
        # the parent's lineage and the newest rows, evaluated and scored
        neighbours = reader.evaluated_sources(reader.lineage(_parent_id(ctx, decision)))
        if ctx.seed is not None and ctx.tip == trace.SEED_ID:
            neighbours[trace.SEED_ID] = ctx.seed.source
    threshold = ctx.program.config.novelty_threshold or novelty.DEFAULT_SIMILARITY
    unwritten = {trace.SEED_ID: ctx.seed.metadata} if ctx.seed is not None else {}
    kept = similarity.stored_vectors(reader, neighbours, origins, unwritten)
    return similarity.screen(source, neighbours, threshold, _embedder(ctx), strategy.language_of(primary), kept)


def _embedder(ctx: AttemptContext) -> similarity.Embedder:
    calls = ctx.proposer.models if isinstance(ctx.proposer, llm.LLMProposer) else None
    return similarity.embedder_for(ctx.program, llm_limits(ctx.program, ctx.options), ctx.guide_spent, calls)


def with_kept_vector(ctx: AttemptContext, seed: trace.Evaluated | None) -> trace.Evaluated | None:
    """Returns the seed's trace data with its vector kept, as a screened candidate's row keeps its own, under
    `novelty: embedding`: later screens then read it instead of embedding the seed again."""
    primary = _primary_of(ctx)
    if seed is None or primary is None or ctx.reader is None or ctx.program.config.novelty != "embedding":
        return seed
    _, row = similarity.screen(seed.source, {}, 1.0, _embedder(ctx), strategy.language_of(primary))
    return replace(seed, metadata={**seed.metadata, **row})


def _parent_id(ctx: AttemptContext, decision: DecisionLike | None) -> str | None:
    """Returns the trace row id of the program the candidate is derived from."""
    return str(decision.parents[0].id) if decision is not None and decision.parents else ctx.tip


def _primary_of(ctx: AttemptContext) -> str | None:
    """Returns the Target file whose source a trace row keeps."""
    return ctx.runner.primary if ctx.runner else primary_file(ctx.program, ctx.workspace.path)


def _evaluated(
    ctx: AttemptContext, decision: DecisionLike | None, proposal: Proposal, metrics: Mapping[str, object], prompt: str,
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
    ctx: AttemptContext,
    decision: DecisionLike | None,
    record: statefile.IterationRecord,
    proposal: Proposal,
    files: Mapping[str, str],
) -> Candidate | None:
    """Returns the Population entry of an evaluated strategy candidate (None in the default flow)."""
    source = _candidate_source(ctx, proposal, files)
    if ctx.runner is None or decision is None or source is None:
        return None
    return strategy.candidate_for(ctx.runner, decision, record, source, proposal.approach, ctx.iteration)


def _candidate_source(ctx: AttemptContext, proposal: Proposal, files: Mapping[str, str]) -> str | None:
    """Returns the source of the strategy's primary file a Population entry keeps (None without a strategy)."""
    if ctx.runner is None:
        return None
    primary = ctx.runner.primary
    return proposal.files.get(primary) or files.get(primary, "")


def _ratchet(
    ctx: AttemptContext, proposal: Proposal, result: EvaluationResult, usage: dict[str, object],
    marks: Mapping[str, str], verdict: pareto.Verdict | None, files: Mapping[str, str],
) -> statefile.IterationRecord:
    """Keeps the candidate only when it improves on the best (under objectives: when `verdict` keeps it) and the
    held-out check (`evaluation-holdout`, run only then) allows it; commits and pushes it then (`marks`: its
    trailers)."""
    assert result.metric is not None
    program, now, run_url = ctx.program, ctx.now, ctx.options.run_url
    metric = program.metric or "metric"
    improved = statefile.is_improvement(result.metric, ctx.best, program.direction, program.config.min_delta)
    if not (improved if verdict is None else verdict.kept):
        notes = (rejection_note(result.metric, ctx.best, program) if verdict is None
                 else "not kept for its objectives (see Acceptance)")
        return _judged("rejected", now, proposal, run_url, usage, notes, result.metric)
    if program.config.evaluation_holdout is not None:
        with ctx.clock("holdout"):
            # The incumbent is the branch's tree: the candidate's changes (the placed parent and the proposal) undone.
            changed = {path for path, text in files.items() if ctx.base_files.get(path) != text} | set(proposal.files)
            incumbent = {path: ctx.base_files.get(path) for path in changed}
            with ctx.hold_refs(during="the held-out evaluation ran"):
                held = holdout.check(ctx.program, ctx.workspace.path, incumbent, ctx.state.machine.holdout_metric,
                                     evaluation_policy(ctx.sandbox))
            ctx.verify_checkout(during="the held-out evaluation ran")
        extra: tuple[tuple[str, str], ...] = usage.get("extra", ())  # type: ignore[assignment]
        usage = {**usage, "extra": (*extra, *held.bullets(result.metric, metric))}
        if held.refusal:
            return _judged("rejected", now, proposal, run_url, usage, holdout.note(held), result.metric)
    notes = f"{metric} improved to {result.metric:g}"
    if verdict is not None:
        notes = "kept for its objectives (see Acceptance)"
    record = _judged("accepted", now, proposal, run_url, usage, notes, result.metric)
    if not ctx.options.writes:
        return record
    with ctx.clock("commit"):
        try:
            commit, withdrawn = keep_candidate(ctx.workspace, program, proposal.summary, ctx.iteration, run_url, marks)
        except GitError as error:
            # Evaluated and paid for: recorded as an error with its metric and cost, not lost with the run.
            reason = f"the evaluated candidate could not be committed: {error}"
            return error_record(now, proposal.summary, reason, run_url, metric=result.metric, **usage)
    return settle_kept(record, commit, withdrawn, ctx.options.ci_gate)


def guide_for(
    program: Program, options: RunOptions, drawn: ModelSpec | None = None, spent: list[Usage] | None = None,
    proposer: Proposer | None = None,
) -> Callable[[str], str] | None:
    """Returns a one-prompt LLM call for a strategy's guide (None unless the llm proposer has a model).

    drawn: the iteration's model (the guide's unless a `role: guide` entry is listed); spent: gets each
    call's usage, which the iteration's record counts in its spend; proposer: the iteration's, whose
    model calls (the run's model worker) the guide's call goes through too.
    """
    if not model_use.uses_llm(program, options):
        return None
    model = model_use.guide_model(program, drawn) or llm.resolve_model(program, options.model)
    limits = llm_limits(program, options)
    listed = models.with_role(program.config.models, models.GUIDE) is not None
    calls = proposer.models if isinstance(proposer, llm.LLMProposer) else None
    return None if model is None else functools.partial(
        model_use.ask_guide, model, listed, limits=limits, spent=spent, models=calls
    )


def llm_limits(program: Program, options: RunOptions) -> CallLimits:
    """Returns the bounds of this iteration's model calls: CLI over frontmatter, ending before the job's deadline."""
    config = program.config
    timeout = options.llm_timeout if options.llm_timeout is not None else config.llm_timeout
    retries = options.llm_retries if options.llm_retries is not None else config.llm_retries
    return limits_for(timeout, retries, options.job_deadline, reserve=config.evaluation_timeout * config.repeats)


def proposer_for(program: Program, options: RunOptions) -> Proposer:
    name = options.proposer or program.config.proposer or "tune"
    limits = llm_limits(program, options)
    return options.proposer_factory(name, model=options.model, agent_command=options.agent_command, limits=limits)
