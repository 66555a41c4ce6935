"""Hand-off iterations: an outside agent proposes; `autoloop prompt` renders the decision, `autoloop record` writes
the outcome.

Both sides recompute the same decision and prompt variant from the state file and the seeded RNG, so nothing has
to be carried between them and no table is ever edited by the agent. The hand-off calls no guide model: no variant
is written, the drawn one is credited when recorded.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from autoloop_py.git.command import call, changed_paths, open_repo
from autoloop_py.loop.checkout import stale_parents
from autoloop_py.loop.checkout.lock import program_lock
from autoloop_py.loop.checkout.workspace import Workspace
from autoloop_py.loop.evaluation.checks import violations
from autoloop_py.loop.evaluation.evaluate import EvaluationResult, evaluate
from autoloop_py.loop.evaluation.evaluation_report import Report
from autoloop_py.loop.iteration import lineage_store, prompt_use
from autoloop_py.loop.iteration.baseline import baseline_outcome, evaluate_baseline
from autoloop_py.loop.iteration.iteration import iteration_rng
from autoloop_py.loop.record import integrity
from autoloop_py.loop.record.ci_gate import ci_gate_enabled
from autoloop_py.loop.record.recording import (
    IterationData,
    artifacts_of_result,
    failure_note,
    load_state,
    primary_file,
    record_iteration,
    rejected_note,
    rejection_note,
    state_path,
)
from autoloop_py.loop.tick import handoff_report
from autoloop_py.program.model import Program
from autoloop_py.program.target import target_files
from autoloop_py.redact import from_environment
from autoloop_py.render import render
from autoloop_py.state import file as statefile
from autoloop_py.state import trace
from autoloop_py.state.memory_folder import FolderMemory, Memory, open_memory
from autoloop_py.strategies import registry
from autoloop_py.strategies import runner as strategy
from autoloop_py.strategies.base import Decision
from autoloop_py.strategies.prompt import (
    prompt_context,
    render_iteration_prompt,
    with_feedback_section,
    with_instruction,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Handoff:
    """The prompt of the next iteration and what was decided.

    Attributes:
      iteration: the iteration number the prompt is for.
      prompt: the rendered prompt.
      decision: the strategy's decision (None in the default flow).
      placed: Target files rewritten with the chosen parent's code (with place_parent).
      variant: the Prompts variant drawn, whose instruction the prompt shows (None: none).
    """

    iteration: int
    prompt: str
    decision: Decision | None
    placed: tuple[str, ...] = ()
    variant: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What the agent reports after editing the working tree.

    Attributes:
      summary: the 10–20-word summary of the change.
      approach: the one-line approach (for the Population).
      lesson: a transferable heuristic, if any.
      metric: the metric the agent measured (ignored with evaluate).
      error: why the candidate failed, when it did.
      evaluate: run the program's evaluation here instead of trusting a reported metric.
      commit: the commit holding the candidate, when already made.
      pending_ci: a kept candidate waits for CI (`⏳ pending-ci`, settled by `autoloop ci`) when the
        program's CI gate is on, instead of being accepted at once.
      report: the evaluation's report the agent handed in (`--report`): its metric, rejection and feedback.
    """

    summary: str
    approach: str | None = None
    lesson: str | None = None
    metric: float | None = None
    error: str | None = None
    evaluate: bool = False
    commit: str | None = None
    pending_ci: bool = False
    report: Report | None = None


def prepare(root: Path, program: Program, place_parent: bool = False, memory: Memory | None = None) -> Handoff:
    """Returns the next iteration's prompt; with place_parent the chosen parent's code is written to the Target file.

    memory: where the state files are (default: open_memory(root), the memory branch or AUTOLOOP_MEMORY_DIR).
    """
    memory = memory if memory is not None else open_memory(root)
    memory.sync()
    state = load_state(memory, program)
    iteration = state.machine.iteration_count + 1
    files = _target_texts(root, program)
    best = state.machine.best_metric
    runner = strategy.load_runner(program, root)
    reader, redactor = lineage_store.memory_reader(root, memory, program), from_environment(os.environ)
    choice = prompt_use.choose(program, state, iteration, None)
    variant = choice.variant.name if choice.variant is not None else None
    if runner is None:
        told = lineage_store.prompt_feedback(reader, trace.read_tip(memory.read, program.name), program, redactor)
        prompt = render_iteration_prompt(prompt_context(program, files, state, best, iteration))
        prompt = with_instruction(with_feedback_section(prompt, told), choice.instruction)
        return Handoff(iteration, prompt, None, variant=variant)
    decision = _decide(root, program, runner, state, iteration, memory)
    placed = strategy.with_parent(runner, decision, files)
    changed = tuple(path for path, text in placed.items() if files.get(path) != text)
    if place_parent:
        for path in changed:
            (root / path).write_text(placed[path], encoding="utf-8")
    tip = trace.read_tip(memory.read, program.name)
    told = lineage_store.prompt_feedback(reader, _parent_id(decision, tip), program, redactor, state)
    parents = [str(c.id) for c in decision.parents]
    others = lineage_store.other_parents_feedback(reader, parents, program, redactor, state)
    prompt = strategy.render_prompt(
        runner, decision, program, placed, state, best, load=memory.read, feedback=told, parent_feedback=others
    )
    prompt = with_instruction(prompt, choice.instruction)
    note = _guide_note(runner, state, program, memory.read)
    if note:
        prompt = prompt.rstrip("\n") + "\n\n" + note
    return Handoff(iteration, prompt, decision, changed if place_parent else (), variant)


def _guide_note(
    runner: strategy.StrategyRunner, state: statefile.StateFile, program: Program, load: Callable[[str], str | None]
) -> str:
    """Returns the note that the strategy would consult its guide LLM, which the hand-off has not ('' when not)."""
    reason = strategy.guide_wanted(runner, state, load)
    if reason is None:
        return ""
    log.warning(
        "%s: %s would consult its guide LLM (%s); the hand-off has none", program.name, runner.playbook.name, reason
    )
    max_uses = getattr(getattr(runner.engine, "config", None), "paradigm_max_uses", 2)
    name = registry.display_name(runner.engine.name)
    return render("handoff_guide_note.md.j2", strategy=name, reason=reason, program=program.name, max_uses=max_uses)


def record(
    root: Path,
    program: Program,
    outcome: Outcome,
    budget: int = statefile.DEFAULT_BUDGET,
    memory: Memory | None = None,
) -> statefile.IterationRecord:
    """Judges the working tree's candidate against the best, records it in memory (as prepare), and returns it."""
    with program_lock(root, program.name):
        memory = memory if memory is not None else open_memory(root)
        memory.sync()
        state = load_state(memory, program)
        integrity.check_records(memory, state_path(program), program.name, state)
        iteration = state.machine.iteration_count + 1
        runner = strategy.load_runner(program, root)
        decision = _decide(root, program, runner, state, iteration, memory) if runner is not None else None
        best, baseline = _best_or_baseline(root, program, state)
        result = _judge(root, program, outcome, best)
        if result.status == "accepted" and outcome.pending_ci and ci_gate_enabled(program):
            result = dataclasses.replace(result, status="pending-ci", notes=result.notes + "; waiting for CI")
        extra = strategy.history_bullets(decision, result.metric) if decision is not None else ()
        entry = statefile.IterationRecord(
            status=result.status,
            timestamp=datetime.now(timezone.utc),
            change=outcome.summary,
            metric=result.metric,
            commit=_kept_commit(root, outcome, result.status),
            notes=result.notes,
            lesson=outcome.lesson if result.status != "error" else None,
            baseline=baseline,
            extra=extra,
        )
        candidate = None
        if runner is not None and decision is not None and result.evaluated:
            source = (root / runner.primary).read_text(encoding="utf-8")
            candidate = strategy.candidate_for(runner, decision, entry, source, outcome.approach, iteration)
        evaluated = _evaluated(root, program, runner, decision, result, trace.read_tip(memory.read, program.name))
        entry, evaluated = prompt_use.with_choice(entry, evaluated, prompt_use.choose(program, state, iteration, None))
        # gh-aw's repo-memory folder holds at most 1000 files: its trace keeps rows (and artifacts), not sources.
        data = IterationData(runner, candidate, evaluated=evaluated, decision=decision,
                             base=stale_parents.default_tip(root), trace_sources=not isinstance(memory, FolderMemory))
        record_iteration(memory, program, entry, budget, data)
        return entry


def _parent_id(decision: Decision | None, tip: str | None) -> str | None:
    """Returns the trace row id of the program the candidate is derived from (the tip in the default flow)."""
    parents = getattr(decision, "parents", None)
    return str(parents[0].id) if parents else tip


def _evaluated(
    root: Path, program: Program, runner: strategy.StrategyRunner | None, decision: Decision | None,
    result: _Judgement, tip: str | None,
) -> trace.Evaluated | None:
    """Returns the candidate's trace data, what its evaluation said kept as artifacts (None when not evaluated)."""
    if not result.evaluated:
        return None
    primary = runner.primary if runner is not None else primary_file(program, root)
    source = (_read(root / primary) if primary else None) or ""
    island = getattr(decision, "island", None)
    return trace.Evaluated(
        source=source, metrics=dict(result.metrics), parent_id=_parent_id(decision, tip),
        operator=getattr(decision, "operator", None), language=strategy.language_of(primary or ""),
        metadata={"island": island} if island is not None else {}, artifacts=dict(result.artifacts),
    )


def _decide(
    root: Path, program: Program, runner: strategy.StrategyRunner, state: statefile.StateFile, iteration: int,
    memory: Memory,
) -> Decision:
    """Returns the strategy's decision for the iteration, as `prepare` and `record` both recompute it: the seeded
    draw, with Population code brought up to date with the checkout as the runner does with its base."""
    rebase = stale_parents.rebaser(root, program.name, runner.primary, stale_parents.default_tip(root), memory.read)
    rng = iteration_rng(program, iteration)
    return strategy.decide(runner, state, state.machine.best_metric, iteration, program.direction, rng, memory.read,
                           None, rebase)


@dataclass(frozen=True)
class _Judgement:
    status: str
    metric: float | None
    notes: str
    evaluated: bool
    metrics: Mapping[str, Any] = field(default_factory=dict)
    artifacts: Mapping[str, str] = field(default_factory=dict)


def _judge(root: Path, program: Program, outcome: Outcome, best: float | None) -> _Judgement:
    """Returns the candidate's status: rejected before evaluation, error, accepted or rejected."""
    changed = changed_paths(open_repo(root))
    before = {path: text for path in changed if (text := _at_head(root, path)) is not None}
    after = {path: _read(root / path) for path in changed}
    problems = violations(program, before, after)
    if problems:
        return _Judgement("rejected", None, "Rejected before evaluation: " + "; ".join(problems), False)
    result = _result(root, program, outcome)
    redactor = from_environment(os.environ)
    metrics = handoff_report.kept_metrics(result.metrics, program.metric or "metric", result.metric, redactor)
    artifacts = handoff_report.kept_artifacts(artifacts_of_result(result), redactor)
    judged = functools.partial(_Judgement, evaluated=True, metrics=metrics, artifacts=artifacts)
    metric = result.metric
    if not result.ok or (metric is None and not result.rejection):
        return judged("error", None, handoff_report.safe_text(failure_note(result), redactor))
    if result.rejection or result.stopped:
        return judged("rejected", metric, handoff_report.safe_text(rejected_note(result), redactor))
    if statefile.is_improvement(metric, best, program.direction, program.config.min_delta):
        return judged("accepted", metric, f"{program.metric or 'metric'} improved to {metric:g}")
    return judged("rejected", metric, rejection_note(metric, best, program))


def _result(root: Path, program: Program, outcome: Outcome) -> EvaluationResult:
    """Returns the candidate's evaluation: run here (`--evaluate`), or as the agent reports it (untrusted)."""
    if outcome.evaluate:
        return evaluate(program, root)
    if outcome.report is not None:
        return handoff_report.result_of_report(outcome.report)
    return handoff_report.result_of_claim(outcome.metric, outcome.error)


def _best_or_baseline(root: Path, program: Program, state: statefile.StateFile) -> tuple[float | None, float | None]:
    """Returns (best, baseline): on a first run the unchanged code is evaluated in a private worktree."""
    if state.machine.best_metric is not None:
        return state.machine.best_metric, None
    with Workspace(root, program.name) as workspace:
        workspace.prepare()
        best, baseline, failure = baseline_outcome(state, evaluate_baseline(program, workspace.path, state, None))
    if failure:
        log.warning(
            "%s: the baseline evaluation failed (%s); the candidate becomes the baseline", program.name, failure
        )
    return best, baseline


def _kept_commit(root: Path, outcome: Outcome, status: str) -> str | None:
    """Returns the commit of a kept candidate: the one given, or for pending-ci the tree it will commit."""
    if status == "accepted":
        return outcome.commit
    if status != "pending-ci":
        return None
    # The workflow pushes the commit after this job; until then a stash commit of the working tree names it.
    return outcome.commit or call(open_repo(root), "stash", "create").stdout.decode().strip() or "uncommitted"


def _at_head(root: Path, path: str) -> str | None:
    """Returns a file's text at HEAD (None when HEAD does not have it)."""
    result = call(open_repo(root), "show", f"HEAD:{path}")
    return result.stdout.decode("utf-8", "replace") if result.ok else None


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def _target_texts(root: Path, program: Program) -> dict[str, str]:
    texts = {}
    for path in target_files(program.target, root):
        try:
            texts[path] = (root / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            log.warning("%s is not UTF-8 text; left out of the prompt", path)
    return texts
