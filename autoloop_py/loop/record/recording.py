"""Recording: the state file on the memory branch, the IterationRecord entries written into it, and trace data."""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping

from autoloop_py.errors import AutoloopError, ProgramError, StateError
from autoloop_py.loop.checkout import stale_parents
from autoloop_py.loop.evaluation import acceptance
from autoloop_py.loop.evaluation.evaluate import EvaluationResult
from autoloop_py.loop.evaluation.evaluation_report import one_line
from autoloop_py.loop.record import ci_gate
from autoloop_py.loop.record.outcome import BestRecheck
from autoloop_py.program.model import Program
from autoloop_py.program.repository_settings import load_repository_settings
from autoloop_py.program.regions import primary_target
from autoloop_py.proposers.base import Proposal
from autoloop_py.state import feedback
from autoloop_py.state import file as statefile
from autoloop_py.state import schedule_table, trace, untrusted_text
from autoloop_py.state.history import KEY_TRAILER
from autoloop_py.state.machine import MachineState
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.memory_folder import Memory
from autoloop_py.state.population import Candidate
from autoloop_py.strategies import runner as strategy
from autoloop_py.strategies.runner import StrategyRunner

logger = logging.getLogger(__name__)
_UNLIMITED = 1 << 40
Recheck = Callable[[statefile.IterationRecord, statefile.StateFile], statefile.IterationRecord]
# A state file is refused, unparsed, past HARD_CAP_FACTOR times its budget (never below HARD_CAP_FLOOR, so
# that a hand-edited file of a few MB is still read and compacted): 50 MB took 81 s and 1.4 GB to parse.
HARD_CAP_FACTOR = 10
HARD_CAP_FLOOR = 8 << 20


def _trace_kept(kept: Mapping[str, str], program: Program, sources: bool) -> dict[str, str]:
    """Returns the files an iteration writes beside its state file (without the trace's sources unless asked)."""
    if sources:
        return dict(kept)
    base = trace.trace_dir(program.name)
    dropped = (f"{base}/blobs/", f"{base}/{trace.SOURCES_DIR}/")
    return {path: text for path, text in kept.items() if not path.startswith(dropped)}


def _schedule_table(
    memory: Memory, program: Program, before: float | None, after: float | None, record: statefile.IterationRecord
) -> str | None:
    """Returns schedule.md with this iteration counted, when the gain scheduler keeps one (else None).

    It is kept under `schedule-policy: gain` and, once there, always. An iteration counts as one runner minute
    (its job's time is not recorded). A table made unreadable by hand is left as it is, with a warning.
    """
    try:
        text = memory.read(schedule_table.SCHEDULE_PATH)
        if text is None:
            # A memory store knows its checkout (BatchMemory, a tick's batch, does not: its table is already there).
            root = getattr(memory, "repo_root", None)
            if root is None or load_repository_settings(Path(root), os.environ).schedule_policy != "gain":
                return None
        gain = schedule_table.improvement(before, after, program.direction)
        return schedule_table.observed_table(text, program.name, gain, 1.0, record.cost or 0.0)
    except AutoloopError as err:
        # The iteration is recorded all the same: a broken table or config must not lose it.
        logger.warning("not counting this iteration in the gain schedule: %s", err)
        return None


def hard_cap(budget: int) -> int:
    """Returns the size in bytes above which a state file is refused without parsing it."""
    return max(HARD_CAP_FACTOR * budget, HARD_CAP_FLOOR)


def load_state(memory: Memory, program: Program, budget: int = statefile.DEFAULT_BUDGET) -> statefile.StateFile:
    """Returns the program's state file as the memory branch holds it (a fresh one when it has none)."""
    path = state_path(program)
    return parse_or_new(memory.read(path), program, path, budget)


def recorded_before(state: statefile.StateFile, key: str, memory: Memory, path: str) -> bool:
    """Returns whether the iteration of idempotency key `key` is recorded already (by its token, which a slot
    renumbered at publish keeps): a history entry carries it, or its number is in a folded range, which drops keys,
    and a memory commit of `path` carries it (folding never drops those)."""
    prefix, _, token = key.rpartition(":")
    if any(entry.key and entry.key.rpartition(":")[2] == token for entry in state.history):
        return True
    number = prefix.rpartition(":")[2]
    folded = max((entry.last_iteration or 0 for entry in state.history if entry.is_range), default=0)
    if not (isinstance(memory, MemoryStore) and number.isdigit() and int(number) <= folded):
        return False  # a number past every range: its entry would be detailed (a tick's batch: checked before it)
    return bool(memory.commits(path, grep=f":{token}", limit=1))  # `Autoloop-Key: <program>:<any number>:<token>`


def state_path(program: Program) -> str:
    """Returns the state file's path on the memory branch."""
    return f"{program.name}.md"


def parse_or_new(
    text: str | None, program: Program, path: str, budget: int = statefile.DEFAULT_BUDGET
) -> statefile.StateFile:
    """Returns the parsed state file, or a fresh one when the program has none yet; refuses one over the hard cap."""
    if text is not None and len(text) > hard_cap(budget) // 4:  # a character is at most 4 bytes: measure only then
        size = len(text.encode("utf-8"))
        if size > hard_cap(budget):
            raise StateError(
                f"the state file is {size} bytes, over the hard cap of {hard_cap(budget)} "
                f"({HARD_CAP_FACTOR}x its {budget}-byte budget, at least {HARD_CAP_FLOOR}), so it is not read; "
                "fold or delete old history entries on the memory branch by hand",
                path=path,
            )
    if text is None or not text.strip():
        metric = program.metric or "metric"
        return statefile.new_state(program.name, program.goal, metric, program.direction, program.config.target_metric)
    return statefile.parse_state(text, path)


@dataclass(frozen=True)
class IterationData:
    """What an iteration leaves on the memory branch beside its history record.

    Attributes:
      runner: the program's strategy (None for the default flow).
      candidate: the evaluated candidate's Population entry (None when nothing was evaluated).
      prompt: the prompt that produced it ('' for none), kept under traces/<name>/prompts/.
      evaluated: the candidate's trace data (its row).
      seed: the unchanged code's trace data, on the run's first iteration.
      decision: the strategy's decision (booked even when no candidate came of it).
      base: the default-branch commit the candidate was made on, kept for its Population entry.
      trace_sources: the trace keeps each row's source (blobs/ and the source index); off, its rows alone (with
        their artifacts and the children index): gh-aw's repo-memory refuses a folder of over 1000 files.
    """

    runner: StrategyRunner | None = None
    candidate: Candidate | None = None
    prompt: str = ""
    evaluated: trace.Evaluated | None = None
    seed: trace.Evaluated | None = None
    decision: object = None
    base: str | None = None
    trace_sources: bool = True


def record_iteration(
    memory: Memory,
    program: Program,
    record: statefile.IterationRecord,
    budget: int,
    data: IterationData = IterationData(),
    recheck: Recheck | None = None,
    later: bool = False,
) -> statefile.IterationRecord:
    """Applies the record (and data) to the freshest state file and commits it; re-applied on a concurrent update.

    recheck(record, the fresh state) returns the record to apply there (an accepted one may have lost
    to a concurrent better candidate meanwhile). Returns the record as applied. later: the commit is left to
    the memory store's commit_unwritten() (MemoryStore.update_later), its files read through the store meanwhile.
    """
    runner, candidate, prompt, evaluated = data.runner, data.candidate, data.prompt, data.evaluated
    seed, decision, base = data.seed, data.decision, data.base
    path = state_path(program)
    kept: dict[str, str] = {}
    applied = [record]

    def change(text: str | None) -> str:
        current = parse_or_new(text, program, path, budget)
        if text is not None and record.key and recorded_before(current, record.key, memory, path):
            kept.clear()  # a retried or re-run record that is already there is not added twice
            return text
        applied[0] = recheck(record, current) if recheck is not None else record
        return _applied(current, applied[0])

    def _applied(current: statefile.StateFile, record: statefile.IterationRecord) -> str:
        apply = ci_gate.record_pending if record.status == "pending-ci" else statefile.apply_iteration
        updated = apply(
            current,
            record,
            direction=program.direction,
            target_metric=program.config.target_metric,
            min_delta=program.config.min_delta,
            # With a Population, folding code comes before folding history (record_candidate compacts).
            budget=budget if runner is None else _UNLIMITED,
        )
        updated = acceptance.with_kept(acceptance.with_targets(updated, record, program), record, program)
        updated = with_best_base(updated, record, base)
        kept.clear()
        table = _schedule_table(memory, program, current.machine.best_metric, updated.machine.best_metric, record)
        if table is not None:
            kept[schedule_table.SCHEDULE_PATH] = table
        iteration = updated.machine.iteration_count
        if prompt:
            kept[f"traces/{program.name}/prompts/{iteration}.md"] = prompt
        row_id = f"it{iteration}"
        if runner is not None and candidate is not None:
            metrics = evaluated.metrics if evaluated is not None else {}
            updated, recorded = strategy.record_candidate(
                updated, runner, candidate, program, budget, decision, metrics, iteration, memory.read, kept
            )
            kept[strategy.code_path(program, recorded)] = recorded.code or ""
            if base is not None:
                where = stale_parents.bases_path(program.name)
                kept[where] = stale_parents.with_base(memory.read(where), recorded.id, base)
            row_id = str(recorded.id)
        elif runner is not None and decision is not None:
            # The proposal failed or was rejected before evaluation: the strategy still books the iteration.
            updated = strategy.advance_state(updated, runner, decision, program, iteration, budget, memory.read, kept)
        stamp = record.timestamp.isoformat()
        if seed is not None:
            kept.update(trace.iteration_files(program, seed, trace.SEED_ID, 0, "accepted", stamp, "the unchanged code"))
        if evaluated is not None:
            kept.update(
                trace.iteration_files(program, evaluated, row_id, iteration, record.status, stamp, record.change)
            )
        text = statefile.render_state(updated)
        statefile.remember(updated, text)  # the next iteration reads it back without parsing it
        return text

    metric = "—" if record.metric is None else f"{record.metric:g}"
    message = f"[Autoloop: {program.name}] {record.status} ({metric}): {record.change}"[:200]
    if record.key:
        message += f"\n\n{KEY_TRAILER}: {record.key}"
    extra = functools.partial(_trace_kept, kept, program, data.trace_sources)
    if later and isinstance(memory, MemoryStore):
        memory.update_later(path, change, message, extra)
    else:
        memory.update(path, change, message, extra=extra)
    return applied[0]


def with_best_base(state: statefile.StateFile, record: statefile.IterationRecord, base: str | None
                   ) -> statefile.StateFile:
    """Returns the state knowing which default-branch commit its best was measured on (a kept candidate's base,
    or this iteration's when none is known yet); a kept candidate's PR is no longer stale."""
    machine = state.machine
    if base is None or (record.status != "accepted" and machine.best_base is not None):
        return state
    stale = None if record.status == "accepted" else machine.stale_reason
    return statefile.with_machine(state, replace(machine, best_base=base, stale_reason=stale))


def record_recheck(memory: Memory, program: Program, found: BestRecheck) -> None:
    """Records the best re-checked on a new default-branch commit: its (re-based) value and why it is stale."""
    verb = f"best re-checked on {found.base[:12]}" + (f": stale, {found.stale}" if found.stale else ": it holds")
    _update_machine(memory, program, found.applied_to, verb)


def record_pause(memory: Memory, program: Program, paused: bool, reason: str | None) -> None:
    """Sets (or clears) Paused and its reason in the program's state file, on the freshest text."""
    verb = f"paused: {reason}" if paused else "resumed"
    _update_machine(memory, program, lambda m: replace(m, paused=paused, pause_reason=reason if paused else None), verb)


def _update_machine(memory: Memory, program: Program, edit: Callable[[MachineState], MachineState], verb: str) -> None:
    """Commits the state file with its Machine State edited, on the freshest text."""
    path = state_path(program)

    def change(text: str | None) -> str:
        state = parse_or_new(text, program, path)
        return statefile.render_state(statefile.with_machine(state, edit(state.machine)))

    memory.update(path, change, f"[Autoloop: {program.name}] {verb}"[:200])


def rejection_note(metric: float, best: float | None, program: Program) -> str:
    """Returns the history note of a candidate that did not improve on the best."""
    if best is None:
        return f"metric {metric:g}"
    floor = f" by at least {program.config.min_delta:g}" if program.config.min_delta else ""
    return f"metric {metric:g} did not improve on best {best:g}{floor} ({program.direction} is better)"


def rejected_note(result: EvaluationResult, saved: float | None = None) -> str:
    """Returns the history note of a candidate its evaluator judged invalid, or that a stage stopped early.

    saved: seconds the stages it never ran took on the last candidate that ran them (None: unknown).
    """
    metric = "" if result.metric is None else f" (metric {result.metric:g})"
    if not result.stopped:
        return f"the evaluation rejected it: {one_line(result.rejection)}{metric}"
    spared = f"; saved about {saved:.1f} s" if saved is not None else ""
    return f"stopped at {one_line(result.stopped)}{metric}; later stages not run{spared}"


def failure_note(result: EvaluationResult) -> str:
    """Returns the history note of a failed evaluation: its stage, reason and the last line of its feedback."""
    told = [line.strip() for line in result.feedback.splitlines() if line.strip()]
    reason = f"stopped at {result.stopped}" if result.stopped else result.error or result.rejection or "no metric"
    return f"evaluation failed: {reason}" + (f" — {one_line(told[-1])}" if told else "")


def stages_metadata(result: EvaluationResult) -> dict[str, object]:
    """Returns the trace row's record of an evaluation's stages: each one's seconds and whether it passed."""
    if not result.stages:
        return {}
    runs = [
        {"stage": number, "seconds": round(seconds, 3), "passed": passed} for number, seconds, passed in result.stages
    ]
    return {"stages": runs}


def artifacts_of_result(result: EvaluationResult) -> dict[str, str]:
    """Returns what the candidate's trace row keeps of its evaluation beside the metrics (state/feedback.py)."""
    return feedback.artifacts_of(result.feedback, result.rejection or result.error or "", result.stdout_tail,
                                 result.stderr_tail)


def usage_of(proposal: Proposal) -> dict[str, object]:
    """Returns the record fields (tokens, cost) of the proposal's model usage."""
    if proposal.usage is None:
        return {}
    tokens = proposal.usage.prompt_tokens + proposal.usage.completion_tokens
    return {"tokens": tokens or None, "cost": proposal.usage.cost}


def record_of(
    status: str,
    now: datetime | None,
    change: str,
    *,
    metric: float | None = None,
    notes: str = "",
    lesson: str | None = None,
    run_url: str | None = None,
    **extra: object,
) -> statefile.IterationRecord:
    """Returns the history record of one iteration, its change cut to the summary's first line.

    Its texts may hold what a model, an agent or candidate code printed: escape sequences and control characters
    are stripped (the record reaches the terminal, the state file and commit messages).
    """
    change = untrusted_text.plain(change or "")
    return statefile.IterationRecord(
        status=status,
        timestamp=now or datetime.now(timezone.utc),
        change=change.strip().splitlines()[0] if change.strip() else "(no summary)",
        metric=metric,
        notes=untrusted_text.plain(notes),
        lesson=untrusted_text.plain(lesson) if lesson is not None else None,
        run_url=run_url,
        **extra,  # type: ignore[arg-type]
    )


def error_record(
    now: datetime | None, change: str, reason: str, run_url: str | None, **extra: object
) -> statefile.IterationRecord:
    """Returns the history record of an iteration that errored."""
    return record_of("error", now, change, notes=reason, run_url=run_url, **extra)


def with_baseline(record: statefile.IterationRecord, baseline: float | None) -> statefile.IterationRecord:
    """Returns the record carrying the baseline this iteration measured (unchanged when it measured none)."""
    return replace(record, baseline=baseline) if baseline is not None else record


def primary_file(program: Program, workdir: Path) -> str | None:
    """Returns the Target file whose source a trace row keeps (None when the Target has no file yet)."""
    try:
        return primary_target(program, workdir)
    except ProgramError:
        return None


def candidate_data(
    primary: str | None,
    workdir: Path,
    parent_id: str | None,
    operator: str | None,
    proposal: Proposal,
    metrics: Mapping[str, object],
    prompt: str,
    source: str | None = None,
    metadata: Mapping[str, object] | None = None,
    runs: tuple[float, ...] = (),
) -> trace.Evaluated:
    """Returns the trace data of a candidate (its source read from the worktree unless given).

    `metrics` hold the median of the runs (the number compared); `runs` keeps each run's metric.
    """
    path = workdir / primary if primary else None
    if source is None:
        source = path.read_text(encoding="utf-8", errors="replace") if path and path.is_file() else ""
    return trace.Evaluated(
        source=source,
        metrics=dict(metrics),
        prompt=prompt,
        replies=tuple(text for role, text in proposal.transcript if role in ("assistant", "agent")),
        parent_id=parent_id,
        operator=operator,
        model=proposal.usage.model if proposal.usage else None,
        **usage_of(proposal),  # type: ignore[arg-type]
        language=strategy.language_of(primary or ""),
        metadata=dict(metadata or {}),
        runs=tuple(runs),
    )


def seed_data(
    program: Program, workdir: Path, baseline: float | None, result: EvaluationResult | None = None
) -> trace.Evaluated | None:
    """Returns the trace data of the unchanged code when this iteration measured the baseline (result: its
    evaluation)."""
    if baseline is None:
        return None
    primary = primary_file(program, workdir)
    source = (workdir / primary).read_text(encoding="utf-8", errors="replace") if primary else ""
    metric = program.metric or "metric"
    metrics = {**(result.metrics if result is not None else {}), metric: baseline}
    artifacts = artifacts_of_result(result) if result is not None else {}
    stages = stages_metadata(result) if result is not None else {}
    return trace.Evaluated(source=source, metrics=metrics, language=strategy.language_of(primary or ""),
                           metadata=stages, artifacts=artifacts)
