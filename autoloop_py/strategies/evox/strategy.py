"""EvoX bookkeeping (strategies.md §3): the strategy score J, stagnation, the window and each iteration's decision.

Everything here is pure: the sandboxed `sample` call comes in as `sample_fn`, and the LLM steps
(label texts, the meta rewrite, validating a hand edit) arrive already done, as an `EvoXRefresh`.
Fitness is oriented (higher is better) throughout; the markdown shows raw values.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import replace
from typing import Callable, Sequence

from autoloop_py.program.objectives import Objective
from autoloop_py.state.population import Candidate, oriented
from autoloop_py.strategies import pareto
from autoloop_py.strategies.backoff import backoff_wait
from autoloop_py.strategies.evox.config import EvoXConfig
from autoloop_py.strategies.evox.sandbox import Genome, Sample, StrategyFailure
from autoloop_py.strategies.evox.state import (
    LABEL_STATES,
    LABEL_WORDS,
    STATUSES,
    EditCheck,
    EvoXDecision,
    EvoXRefresh,
    EvoXState,
    LabelTexts,
    MetaOutcome,
    StrategyRecord,
)
from autoloop_py.strategies.prompt import with_newline

__all__ = [
    "LABEL_STATES", "LABEL_WORDS", "STATUSES", "EditCheck", "EvoXDecision", "EvoXRefresh", "EvoXState", "LabelTexts",
    "MetaOutcome", "SampleFn", "StrategyRecord", "apply_edit", "apply_labels", "checksum", "context_ids",
    "current_best", "db_parent", "decide", "edited", "end_turn", "evolve", "genomes_of", "initial_state",
    "meta_references", "reset_window", "rollback", "score_active", "stagnation_step", "start_first_window",
    "strategy_parent", "strategy_score",
]

SampleFn = Callable[[str, Sequence[Genome], int, int], Sample]

# ---------------------------------------------------------------- the numbers of §3.2


def strategy_score(start: float, bests: Sequence[float], horizon: int) -> float:
    """Returns J = (max(start, bests) − start)·(1 + ln(1 + max(0, start)))/√H (E1–E4)."""
    gain = max([start, *bests]) - start
    return gain * (1 + math.log1p(max(0.0, start))) / math.sqrt(horizon)


def stagnation_step(
    count: int, last: float | None, current: float, interval: int, threshold: float = 0.01
) -> tuple[int, float, bool]:
    """Returns (count, last, fired) after one turn whose best is current (E6)."""
    count = 0 if last is None or current - last > threshold else count + 1
    return (0, current, True) if count >= interval else (count, current, False)


def db_parent(scores: Sequence[tuple[int, object]]) -> int | None:
    """Returns the id with the highest J, as the reference's `max` over its strategy database (E8).

    A non-numeric J counts as −inf and ties go to the first. A NaN J compares false both ways, so it wins only
    when it comes first (no later J is greater than it) and is passed over anywhere else.
    """
    best_id: int | None = None
    best = -math.inf
    for strategy_id, j in scores:
        value = float(j) if isinstance(j, (int, float)) and not isinstance(j, bool) else -math.inf
        if best_id is None or value > best:
            best_id, best = strategy_id, value
    return best_id


def checksum(code: str) -> str:
    """Returns the first 12 hex digits of the code's sha256."""
    return hashlib.sha256(code.encode("utf-8")).hexdigest()[:12]


def initial_state(config: EvoXConfig) -> EvoXState:
    """Returns the state of a run that has not started: the initial strategy S0 active and pending."""
    code = with_newline(config.initial_code)
    s0 = StrategyRecord(0, code, window_start=1, checksum=checksum(code), note="the initial strategy")
    return EvoXState(switch_interval=config.interval, window_start_iteration=1, rng_seed=config.random_seed,
                     strategies=(s0,))


# ---------------------------------------------------------------- the window and the turn


def current_best(candidates: Sequence[Candidate], direction: str) -> float | None:
    """Returns the best oriented fitness among the evaluated candidates (None when none has one)."""
    # oriented() gives None for a missing, NaN or infinite fitness.
    found = [v for c in candidates if c.status != "error" and (v := oriented(c.fitness, direction)) is not None]
    return max(found) if found else None


def start_first_window(state: EvoXState, seed_score: float | None) -> EvoXState:
    """Returns the state after the seed turn: the first window starts at the seed's own score, with no step.

    As the reference, which evaluates the seed before any strategy runs and resets the window from it; the
    seed turn is no stagnation step either (the first strategy turn starts the count).
    """
    if seed_score is None or state.window_start_score is not None:
        return state
    return replace(state, window_start_score=seed_score, window_bests=())


def end_turn(state: EvoXState, bests: Sequence[float | None], config: EvoXConfig) -> EvoXState:
    """Returns the state after a turn of len(bests) attempts: one window step each, one stagnation step (E7)."""
    known = [b for b in bests if b is not None]
    if not known:
        return state
    start = state.window_start_score if state.window_start_score is not None else known[0]
    count, last, fired = stagnation_step(
        state.stagnant_count, state.last_tracked_best, known[-1], state.switch_interval, config.improvement_threshold
    )
    backoff = state.meta_backoff
    if fired and backoff > 0:  # the meta LLM failed lately: this stagnation signal passes without a call
        fired, backoff = False, backoff - 1
    return replace(
        state, window_start_score=start, window_bests=(*state.window_bests, *known), stagnant_count=count,
        last_tracked_best=last, evolve_due=state.evolve_due or fired, meta_backoff=backoff,
    )


def score_active(state: EvoXState, best: float | None, iteration: int) -> EvoXState:
    """Returns the state with the pending strategy scored on the current window (unchanged when none is pending)."""
    if state.pending is None or state.window_start_score is None:
        return replace(state, pending=None)
    start = state.window_start_score
    bests = state.window_bests or ((best,) if best is not None else ())
    j = strategy_score(start, bests, state.switch_interval)
    record = state.strategy(state.pending)
    record = replace(record, j=j, window_end=iteration, end_score=max([start, *bests]),
                     start_score=start if record.start_score is None else record.start_score)
    top = j if state.best_strategy_j is None else max(state.best_strategy_j, j)
    return replace(_with(state, record), pending=None, best_strategy_j=top)


def reset_window(state: EvoXState, best: float | None, iteration: int) -> EvoXState:
    """Returns the state with a fresh window starting at iteration from best."""
    return replace(state, window_start_iteration=iteration, window_start_score=best, window_bests=())


def strategy_parent(state: EvoXState) -> int | None:
    """Returns the strategy a rewrite starts from: argmax J among those that ran and stayed valid."""
    return db_parent([(s.id, s.j) for s in state.strategies if s.status in ("active", "scored")])


def meta_references(state: EvoXState, parent: int, rng: random.Random) -> tuple[int, ...]:
    """Returns up to two other usable strategies drawn uniformly (Ref: sample min(2, N), minus the parent)."""
    usable = [s.id for s in state.strategies if s.status in ("active", "scored")]
    drawn = rng.sample(usable, min(2, len(usable)))
    return tuple(i for i in drawn if i != parent)


# ---------------------------------------------------------------- applying the refresh


def apply_labels(state: EvoXState, labels: LabelTexts | None, defaults: LabelTexts) -> EvoXState:
    """Returns the state with new label texts, or the defaults when none were ever set."""
    if labels is not None:
        return replace(state, diverge_label=labels.diverge, refine_label=labels.refine, labels=labels.source)
    if state.labels == "pending":
        return replace(state, diverge_label=defaults.diverge, refine_label=defaults.refine, labels="default")
    return state


def edited(state: EvoXState) -> bool:
    """Returns whether the active strategy's code differs from the code last validated."""
    record = state.strategy(state.active)
    return checksum(record.code) != record.checksum


def apply_edit(state: EvoXState, edit: EditCheck | None, config: EvoXConfig, iteration: int) -> EvoXState:
    """Returns the state after a hand edit's validation: accepted, or marked failed-validation and replaced."""
    if edit is None or edit.strategy_id != state.active or checksum(state.strategy(state.active).code) != edit.checksum:
        return state
    record = state.strategy(state.active)
    if not edit.problems:
        note = _joined(record.note, f"edited by hand; the edit passed validation at iteration {iteration}")
        return _with(state, replace(record, checksum=edit.checksum, validation="passed", note=note))
    failed = replace(record, status="failed-validation", validation="; ".join(edit.problems),
                     note=_joined(record.note, f"a hand edit failed validation at iteration {iteration}"))
    return _fall_back(_with(state, failed), config, iteration)


def evolve(state: EvoXState, meta: MetaOutcome, best: float | None, iteration: int) -> EvoXState:
    """Returns the state after a meta step: the window scored and reset, the rewrite swapped in or recorded failed.

    A failed step passes over the next 1, 2, 4 or at most 8 stagnation signals (doubling with each failure in a
    row) rather than spend meta_attempts calls every switch_interval turns on a model that cannot write one.
    """
    state = reset_window(score_active(state, best, iteration), best, iteration)
    state = replace(state, evolve_due=False, stagnant_count=0, evolutions=state.evolutions + 1)
    new_id = max(s.id for s in state.strategies) + 1
    code = with_newline(meta.code or "")
    if meta.code is None or meta.problems:
        reasons = "; ".join(meta.problems) or "the reply held no code"
        failed = StrategyRecord(new_id, code, "failed-validation", parent=meta.parent, validation=reasons,
                                checksum=checksum(code), note=meta.summary)
        in_row = state.meta_failures_in_row + 1
        return replace(state, strategies=(*state.strategies, failed), meta_failures=state.meta_failures + 1,
                       meta_failures_in_row=in_row, meta_backoff=backoff_wait(in_row, 1))
    state = replace(state, meta_failures_in_row=0, meta_backoff=0)
    old = replace(state.strategy(state.active), status="scored")
    new = StrategyRecord(new_id, code, "active", window_start=iteration, start_score=best, parent=meta.parent,
                         checksum=checksum(code), note=meta.summary)
    state = _with(state, old)
    return replace(state, strategies=(*state.strategies, new), active=new_id, pending=new_id, fallback=old.id)


def rollback(state: EvoXState, reason: str, config: EvoXConfig, iteration: int) -> EvoXState:
    """Returns the state with the active strategy marked rolled-back and the previous valid one running."""
    record = state.strategy(state.active)
    note = _joined(record.note, f"rolled back at iteration {iteration}: {reason}")
    failed = replace(record, status="rolled-back", note=note)
    state = replace(_with(state, failed), evolutions=state.evolutions + 1)
    return _fall_back(state, config, iteration)


def _fall_back(state: EvoXState, config: EvoXConfig, iteration: int) -> EvoXState:
    """Returns the state running the fallback, else the latest scored strategy, else a copy of the initial one."""
    usable = [s for s in state.strategies if s.status == "scored"]
    chosen = next((s for s in usable if s.id == state.fallback), usable[-1] if usable else None)
    if chosen is None:
        code = with_newline(config.initial_code)
        chosen = StrategyRecord(max(s.id for s in state.strategies) + 1, code, window_start=iteration,
                                start_score=state.window_start_score, checksum=checksum(code),
                                note=f"the initial strategy, restored at iteration {iteration}")
        state = replace(state, strategies=(*state.strategies, chosen))
    state = _with(state, replace(chosen, status="active"))
    return replace(state, active=chosen.id, pending=None, fallback=None)


def _with(state: EvoXState, record: StrategyRecord) -> EvoXState:
    return replace(state, strategies=tuple(record if s.id == record.id else s for s in state.strategies))


def _joined(note: str, addition: str) -> str:
    return f"{note}; {addition}" if note else addition


# ---------------------------------------------------------------- the decision


def genomes_of(candidates: Sequence[Candidate], direction: str, objectives: Sequence[Objective] = ()
               ) -> tuple[Genome, ...]:
    """Returns the evaluated candidates as the strategy sees them, in the order they were found.

    With Pareto objectives each genome's metrics also hold every objective's raw value and its `front` (0: not
    dominated by any other scored genome), computed as the reference ranks them (strategies/pareto.py).
    """
    found = []
    scored = [c for c in sorted(candidates, key=lambda c: (c.gen, c.id))
              if c.status != "error" and oriented(c.fitness, direction) is not None]
    fronts = _fronts(scored, objectives)
    for c in scored:
        label = next((v for k, v in c.extra if k == "Label"), "none")
        metrics: dict[str, float] = {"score": float(oriented(c.fitness, direction) or 0.0)}
        if objectives:
            values = pareto.raw_values(c) or {}
            metrics.update({o.name: values[o.name] for o in objectives if o.name in values and o.name != "score"})
            metrics["front"] = float(fronts[c.id])
        found.append(Genome(c.id, c.code or "", metrics, c.parents[0] if c.parents else None, c.gen,
                            label if label in ("diverge", "refine") else "", context_ids(c)))
    return tuple(found)


def _fronts(scored: Sequence[Candidate], objectives: Sequence[Objective]) -> dict[int, int]:
    """Returns each scored candidate's front among them (stored order breaks no tie: fronts are sets)."""
    if not objectives:
        return {}
    ordered = sorted(scored, key=lambda c: c.id)
    ranks = pareto.front_ranks([pareto.vector_of(c, objectives) for c in ordered])
    return {c.id: rank for c, rank in zip(ordered, ranks)}


def context_ids(candidate: Candidate) -> tuple[int, ...]:
    """Returns the ids of the candidate's `- **Context**: #3, #9` bullet (() when absent or unreadable)."""
    text = next((v for k, v in candidate.extra if k == "Context"), "")
    ids = [part.strip().lstrip("#") for part in text.split(",")]
    return tuple(int(i) for i in ids if i.isdigit())


def decide(
    state: EvoXState,
    population: Sequence[Candidate],
    config: EvoXConfig,
    rng: random.Random,
    sample_fn: SampleFn,
    *,
    iteration: int,
    defaults: LabelTexts,
    reply: EvoXRefresh | None = None,
) -> EvoXDecision:
    """Returns the iteration's parent, label and context, after applying the refresh and any rollback."""
    best = current_best(population, config.direction)
    state, events = _refreshed(state, reply, config, defaults, best, iteration)
    genomes = genomes_of(population, config.direction, config.objectives)
    if not population:
        return EvoXDecision(None, (), "", state.active, state,
                            "no program yet: evaluate the Target as it is, the first window's start", tuple(events),
                            as_is=True)
    if not genomes:
        return EvoXDecision(None, (), "", state.active, state, "no program scored yet: improve the code as it is",
                            tuple(events))
    seed = rng.randrange(2**31)
    state = replace(state, rng_draws=state.rng_draws + 1)
    state, sample, faults = _sampled(state, genomes, config, seed, sample_fn, iteration)
    by_id = {c.id: c for c in population}
    if sample is None:
        top = max(genomes, key=lambda g: float(g.metrics["score"]))
        reason = "every strategy failed at run time; the best program is the parent"
        return EvoXDecision(by_id[top.id], (), "", state.active, state, reason, (*events, *faults), seed)
    context = tuple(by_id[i] for i in sample.context_ids if i in by_id)
    word = LABEL_WORDS.get(sample.label, "none")
    happened = (*events, *faults)
    reason = "; ".join((f"S{state.active} chose parent {sample.parent_id} under label {word}", *happened))
    return EvoXDecision(by_id[sample.parent_id], context, sample.label, state.active, state, reason, happened, seed)


def _refreshed(
    state: EvoXState, reply: EvoXRefresh | None, config: EvoXConfig, defaults: LabelTexts, best: float | None,
    iteration: int,
) -> tuple[EvoXState, list[str]]:
    """Returns the state with the refresh's labels, hand-edit check and meta step applied, and what happened."""
    reply = reply or EvoXRefresh()
    events: list[str] = []
    state = apply_labels(state, reply.labels, defaults)
    if reply.edit is not None:
        before = state.active
        state = apply_edit(state, reply.edit, config, iteration)
        verdict = "passed" if state.active == before else f"failed; S{state.active} runs instead"
        events.append(f"the hand edit of S{reply.edit.strategy_id} was validated: {verdict}")
    if reply.meta is not None and state.evolve_due:
        state = evolve(state, reply.meta, best, iteration)
        newest = state.strategies[-1]
        events.append(f"meta step: S{newest.id} ({newest.status}) rewritten from S{reply.meta.parent}")
    elif state.evolve_due:
        state = replace(state, evolve_due=False)
        events.append("the search stagnated, but no meta LLM is available: the strategy stays")
    return state, events


def _sampled(
    state: EvoXState, genomes: Sequence[Genome], config: EvoXConfig, seed: int, sample_fn: SampleFn, iteration: int
) -> tuple[EvoXState, Sample | None, list[str]]:
    """Returns the sample of the active strategy, rolling back past every strategy that fails at run time."""
    faults: list[str] = []
    for _ in range(len(state.strategies) + 1):
        failed = state.active
        try:
            return state, sample_fn(state.strategy(failed).code, genomes, seed, config.num_context_programs), faults
        except StrategyFailure as err:
            state = rollback(state, f"{err.kind}: {err.message}", config, iteration)
            faults.append(f"S{failed} failed at run time ({err.kind}); rolled back to S{state.active}")
    return state, None, faults
