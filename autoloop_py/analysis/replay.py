"""Same-prompt replay, pure part: the event to replay, applying a replayed reply, and the measures over trials.

A replay re-sends the exact prompt that produced a candidate and asks of each replayed child: does the
reply parse and apply to the parent, does the child evaluate, is it the original program byte for
byte, and how does its score compare with the original's (EvoReplay's counterfactual replay).
"""

from __future__ import annotations

import math
import statistics
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from autoloop_py.analysis import nodes_of, oriented
from autoloop_py.analysis.lineage import record_holders
from autoloop_py.analysis.replay_prompts import ContextProgram, retry_prompt
from autoloop_py.errors import AutoloopError, EditError
from autoloop_py.program.edits import EditFailure, apply_reply
from autoloop_py.program.reply import Reply, parse_reply
from autoloop_py.state.trace import Trace, TraceRow

BEST = "best"
ALL = "all"
# Other frameworks keep planner calls next to the generating prompt; those are not the candidate's prompt.
_SKIPPED_KEYS = ("planner", "strategy_sampling")
NO_CHANGE = "the reply leaves the parent unchanged"
NO_EDIT = "the reply contains no edit"
TOLERANCE = 1e-3
# A best-so-far event must beat the running best by more than this (EvoReplay's counterfactuals).
IMPROVEMENT = 1e-12
CLASSES = ("better", "similar", "still_improves_parent", "worse", "not_evaluated", "eval_failed", "parse_failed")


@dataclass(frozen=True)
class ReplayEvent:
    """A candidate whose generating prompt can be re-sent.

    Attributes:
        id: the candidate's row id.
        iteration: its iteration_found.
        parent_id: the row id of its parent (the program the reply is applied to).
        prompt_key: the key of the prompts payload entry that is re-sent.
        system: the system prompt ('' when there was none).
        user: the user prompt.
        response: the model's original first reply, None when the trace kept none.
        source: the candidate's full source (what an exact match must equal).
        parent_source: the parent's full source.
        score: the candidate's primary score, None when it was not valid.
        parent_score: the parent's primary score, None when unknown.
        model: the model recorded in the row, None when the trace names none.
    """

    id: str
    iteration: int
    parent_id: str
    prompt_key: str
    system: str
    user: str
    response: str | None
    source: str
    parent_source: str
    score: float | None
    parent_score: float | None
    model: str | None


@dataclass(frozen=True)
class Applied:
    """A replayed reply applied to the parent's files.

    Attributes:
        changed: repo-relative path -> new content of every file the reply changed.
        error: why the reply does not count as parsed (unreadable, an edit failed, nothing changed), else None.
        unreadable: the reply could not be parsed at all (error is the parse error).
        failures: the edits that could not be applied, with the nearest real lines (for the retry prompt).
    """

    changed: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None
    unreadable: bool = False
    failures: tuple[EditFailure, ...] = ()


@dataclass(frozen=True)
class Trial:
    """One replay of an event.

    Attributes:
        reply: the model's reply ('' when the call failed).
        parse_error: why the reply could not be applied to the parent, None when it was.
        source: the replayed child's primary source, None when the reply was not applied.
        eval_ok: whether the child evaluated; None when no evaluation was available (a bare trace directory).
        eval_error: why the evaluation failed, None otherwise.
        score: the child's metric when it evaluated.
        attempts: how many replies were asked for (the last one is this trial's).
        earlier_errors: why each earlier attempt failed, in order.
    """

    reply: str
    parse_error: str | None
    source: str | None = None
    eval_ok: bool | None = None
    eval_error: str | None = None
    score: float | None = None
    attempts: int = 1
    earlier_errors: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """Returns whether the trial failed to parse or to evaluate (what another attempt may fix)."""
        return not self.parsed or self.eval_ok is False

    @property
    def parsed(self) -> bool:
        """Returns whether the reply applied to the parent and changed it."""
        return self.parse_error is None


@dataclass(frozen=True)
class ReplayMeasures:
    """What the replays of one event show.

    Attributes:
        repeats: how many replays were made.
        parse_success_rate: share of replies that applied to the parent and changed it.
        evaluation_success_rate: share of replays whose child evaluated (None without an evaluation).
        exact_solution_match_rate: share of children equal to the original program byte for byte.
        exact_response_match_rate: share of replies equal to the original reply (None when none was kept).
        score_mean: mean score of the children that evaluated (None when none did).
        score_median: their median score.
        score_std: their population standard deviation.
        score_ratio: score_mean / the original score ("Replay/Orig."); None when either is unknown or it is 0.
        classes: trial class -> count (better, similar, still_improves_parent, worse, not_evaluated,
            eval_failed, parse_failed), against the original score within 1e-3 × max(|original|, 1).
        attempts_mean: the mean number of replies asked for per replay (1 without retries).
    """

    repeats: int
    parse_success_rate: float
    evaluation_success_rate: float | None
    exact_solution_match_rate: float
    exact_response_match_rate: float | None
    score_mean: float | None
    score_median: float | None
    score_std: float | None
    score_ratio: float | None
    classes: Mapping[str, int]
    attempts_mean: float = 1.0


def prompt_entry(prompts: Mapping[str, Any] | None) -> tuple[str, Mapping[str, Any]] | None:
    """Returns (key, entry) of the generating prompt in a prompts payload, skipping planner entries."""
    for key, entry in (prompts or {}).items():
        if any(skipped in key for skipped in _SKIPPED_KEYS) or not isinstance(entry, Mapping):
            continue
        if isinstance(entry.get("user"), str) and entry["user"]:
            return key, entry
    return None


def best_row(trace: Trace) -> TraceRow | None:
    """Returns the row of the run's final best (the first to reach the best score), None if none is valid."""
    holders = record_holders(nodes_of(trace), trace.direction)
    return next(row for row in trace.rows if row.id == holders[-1].id) if holders else None


def choose_event(trace: Trace, which: str) -> ReplayEvent:
    """Returns the event `which` names (`best` or a row id); raises when it cannot be replayed."""
    row = best_row(trace) if which == BEST else next((r for r in trace.rows if r.id == which), None)
    if row is None:
        known = ", ".join(r.id for r in trace.rows[-8:]) or "none"
        what = "no program of the run has a valid score" if which == BEST else f"no row has id '{which}'"
        raise AutoloopError(
            f"{what}; pass --event with one of the run's ids (last ones: {known})", path=trace.directory
        )
    return _event_of(trace, row)


def choose_events(trace: Trace, which: str) -> list[ReplayEvent]:
    """Returns the events `which` names: `all` (the best-so-far events), `best` or a row id."""
    if which != ALL:
        return [choose_event(trace, which)]
    events = select_events(trace)
    if not events:
        raise AutoloopError("no best-so-far program of the run has a parent and a saved prompt to replay; "
                            "pass --event with a row id", path=trace.directory)
    return events


def _event_of(trace: Trace, row: TraceRow) -> ReplayEvent:
    """Returns the replay event of a row, or raises naming what the trace lacks."""
    hint = "pick another candidate with --event ID (`autoloop analyze` lists the best-so-far events)"
    parent = next((r for r in trace.rows if r.id == row.parent_id), None) if row.parent_id else None
    entry = prompt_entry(trace.prompts(row))
    source = trace.source(row)
    parent_source = trace.source(parent) if parent is not None else None
    if parent is None or parent_source is None:
        raise AutoloopError(f"candidate '{row.id}' has no parent with a saved source to apply a reply to; {hint}",
                            path=trace.directory)
    if entry is None or source is None:
        raise AutoloopError(f"candidate '{row.id}' has no saved prompt or source; {hint}", path=trace.directory)
    key, prompt = entry
    system = prompt.get("system")
    responses = prompt.get("responses")
    response = responses[0] if isinstance(responses, list) and responses and isinstance(responses[0], str) else None
    return ReplayEvent(
        id=row.id, iteration=row.iteration_found, parent_id=parent.id, prompt_key=key,
        system=system if isinstance(system, str) else "", user=prompt["user"],
        response=response, source=source, parent_source=parent_source, score=trace.score(row),
        parent_score=trace.score(parent), model=row.model or row.model_name,
    )


def select_events(trace: Trace) -> list[ReplayEvent]:
    """Returns the best-so-far events that can be replayed, at most `event_cap` of them, always with the final best."""
    found: list[tuple[float, ReplayEvent]] = []
    best: float | None = None
    for row in sorted(trace.rows, key=lambda r: (r.iteration_found, r.timestamp or "", r.id)):
        score = trace.score(row)
        metadata = row.extra.get("metadata")  # a migrant copies another island's program: no new proposal
        if score is None or (isinstance(metadata, Mapping) and metadata.get("migrant")):
            continue
        value = oriented(score, trace.direction)
        if best is not None and value <= best + IMPROVEMENT:
            continue
        gain, best = (value - best if best is not None else 0.0), value
        with suppress(AutoloopError):  # a row without a parent, a saved prompt or a source is no event
            found.append((gain, _event_of(trace, row)))
    return _capped(found, event_cap(trace))


def event_cap(trace: Trace) -> int:
    """Returns how many events `--event all` replays: max(1, ceil(15 · iterations / 100))."""
    iterations = max((row.iteration_found for row in trace.rows), default=0)
    return max(1, math.ceil(15 * iterations / 100))


def _capped(found: Sequence[tuple[float, ReplayEvent]], cap: int) -> list[ReplayEvent]:
    """Returns the final event and the cap - 1 others with the largest gains, in run order."""
    if len(found) <= cap:
        return [event for _, event in found]
    *others, final = found
    kept = sorted(others, key=lambda pair: -pair[0])[: cap - 1]
    return [event for _, event in sorted(kept, key=lambda pair: found.index(pair))] + [final[1]]


def context_pool(trace: Trace, event: ReplayEvent) -> list[ContextProgram]:
    """Returns the valid programs found before the event (not it, not its parent) that may stand in as context."""
    pool = []
    for row in trace.rows:
        score, source = trace.score(row), trace.source(row)
        if row.iteration_found >= event.iteration or row.id in (event.id, event.parent_id):
            continue
        if score is not None and source is not None:
            pool.append(ContextProgram(row.id, row.iteration_found, score, source, row.changes, row.language))
    return pool


def retry_user(user: str, trial: Trial, applied: Applied | None) -> str:
    """Returns the user prompt of the next attempt after a failed trial (the failure fed back)."""
    if applied is None or applied.error is None:
        return retry_prompt(user, trial.reply, eval_error=trial.eval_error)
    if applied.unreadable:
        return retry_prompt(user, trial.reply, parse_error=applied.error)
    return retry_prompt(user, trial.reply, failures=applied.failures or (EditFailure(None, applied.error),))


def apply_text(
    text: str, files: Mapping[str, str], primary: str, allows: Callable[[str], bool] | None = None
) -> Applied:
    """Parses a reply and applies it to files as the llm proposer does; allows=None maps every edit to `primary`."""
    try:
        reply = parse_reply(text)
    except EditError as err:
        return Applied(error=str(err), unreadable=True)
    if not reply.blocks and not reply.rewrites:
        return Applied(error=NO_EDIT)
    if allows is None:
        reply = _onto(reply, primary)
    default = primary if len(files) == 1 or allows is None else None
    changed, failures = apply_reply(reply, files, default)
    refused = [path for path in changed if allows is not None and not allows(path)]
    if failures or refused:
        reason = failures[0].reason if failures else f"the reply changes {refused[0]}, outside the Target"
        return Applied(error=reason, failures=tuple(failures))
    return Applied(changed) if changed else Applied(error=NO_CHANGE)


def _onto(reply: Reply, primary: str) -> Reply:
    """Returns the reply with every edit aimed at `primary` (a trace keeps one source, whatever the paths said)."""
    blocks = tuple(replace(block, path=None) for block in reply.blocks)
    rewrites = tuple(replace(rewrite, path=primary) for rewrite in reply.rewrites)
    return replace(reply, blocks=blocks, rewrites=rewrites)


def classify(trial: Trial, event: ReplayEvent, direction: str, tolerance: float = TOLERANCE) -> str:
    """Returns the trial's class against the original score (and the parent's, for a worse child)."""
    if not trial.parsed:
        return "parse_failed"
    if trial.eval_ok is False:
        return "eval_failed"
    if trial.score is None or event.score is None:
        return "not_evaluated"
    slack = tolerance * max(abs(event.score), 1.0)
    gain = oriented(trial.score, direction) - oriented(event.score, direction)
    if gain > slack:
        return "better"
    if gain >= -slack:
        return "similar"
    parent = event.parent_score
    if parent is not None and oriented(trial.score, direction) > oriented(parent, direction) + slack:
        return "still_improves_parent"
    return "worse"


def measure(trials: Sequence[Trial], event: ReplayEvent, direction: str) -> ReplayMeasures:
    """Returns the replay measures of an event's trials."""
    count = max(len(trials), 1)
    scores = [t.score for t in trials if t.eval_ok and t.score is not None]
    mean = statistics.fmean(scores) if scores else None
    evaluated = [t for t in trials if t.eval_ok is not None]
    classes = {name: 0 for name in CLASSES}
    for trial in trials:
        classes[classify(trial, event, direction)] += 1
    return ReplayMeasures(
        repeats=len(trials),
        parse_success_rate=sum(t.parsed for t in trials) / count,
        evaluation_success_rate=sum(bool(t.eval_ok) for t in trials) / count if evaluated else None,
        exact_solution_match_rate=sum(t.source == event.source for t in trials) / count,
        exact_response_match_rate=(
            None if event.response is None else sum(t.reply == event.response for t in trials) / count
        ),
        score_mean=mean,
        score_median=statistics.median(scores) if scores else None,
        score_std=statistics.pstdev(scores) if scores else None,
        score_ratio=mean / event.score if mean is not None and event.score else None,
        classes=classes,
        attempts_mean=sum(t.attempts for t in trials) / count,
    )
