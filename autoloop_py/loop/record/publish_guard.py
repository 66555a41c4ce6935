"""What publish checks of an outcome's fields before it writes them: nothing the proposing job forged lands.

The proposing job runs candidate code, so every field it hands over is untrusted. outcome.py checks the
layout and the types; this module checks the values against what the publishing job knows itself: the
program its workflow names, the time window of the run, the next iteration number of the state file,
ranges, that the state file would still parse once the records are written, and the bullets of the record that
feed a table or a decision (the Models table and the model draw, the objectives acceptance compares against).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import AbstractSet, Mapping, Sequence

from autoloop_py.errors import AutoloopError
from autoloop_py.loop.evaluation import acceptance
from autoloop_py.loop.record.outcome import BestRecheck, Outcome, OutcomeError
from autoloop_py.loop.record.recovery import key_slug
from autoloop_py.program.model import Program
from autoloop_py.program.objectives import Objective
from autoloop_py.proposers.llm import MODEL_ENV
from autoloop_py.state import file as statefile
from autoloop_py.state.model_stats import MODEL_BULLET, SPEND_BULLET, parse_usage
from autoloop_py.state.machine import HOLDOUT_BULLET, INCUMBENT_HOLDOUT_BULLET, is_improvement
from autoloop_py.state.prompt_stats import PROMPT_BULLET, WRITTEN_BULLET
from autoloop_py.strategies import pareto
from autoloop_py.strategies.slots import MAX_SLOTS

log = logging.getLogger(__name__)

# Clocks of two runners disagree by seconds; a minute's slack each way is plenty.
SLACK = timedelta(minutes=5)
# Without the plan job's start: the workflow's artifacts live 3 days, so no outcome is older.
DEFAULT_WINDOW = timedelta(days=3)
MAX_TOKENS = 10**12
MAX_COST = 10.0**9
# The bullets a proposing runner writes into a record: its model use (model_use.with_use), its prompt variant
# (prompt_use.with_choice; the state file reads a written variant as untrusted text), the objectives and the rule
# that kept it (acceptance.bullets), a strategy's (strategies/runner.history_bullets). Any other label could pass
# for one of the runner's own bullets in the history.
KNOWN_BULLETS = (MODEL_BULLET, SPEND_BULLET, PROMPT_BULLET, WRITTEN_BULLET, pareto.BULLET, acceptance.BASELINE,
                 acceptance.RULE, "Operator", "Parent(s)", "Island", "Fitness", "Attempts", HOLDOUT_BULLET,
                 INCUMBENT_HOLDOUT_BULLET)


@dataclass(frozen=True)
class PublishWindow:
    """What the publishing job knows of the run whose outcome it publishes.

    Attributes:
      not_before: no record of the run is older (the plan job's start, minus slack).
      not_after: no record is newer (now, plus slack).
    """

    not_before: datetime
    not_after: datetime


def publish_window(now: datetime, started: datetime | None = None) -> PublishWindow:
    """Returns the window of a run that started at `started` (None: at most DEFAULT_WINDOW ago), published now."""
    return PublishWindow((started or now - DEFAULT_WINDOW) - SLACK, now + SLACK)


def field_problems(outcome: Outcome, program: str, window: PublishWindow) -> list[str]:
    """Returns why the outcome's fields cannot be published for `program` (the one the workflow names)."""
    found = []
    if outcome.program != program:
        found.append(f"program: the outcome is for {outcome.program!r}, the workflow publishes {program!r}")
    record = outcome.record
    if record is not None:
        if outcome.key.rsplit(":", 2)[0] != key_slug(program):
            found.append(f"key: {outcome.key!r} is not a key of {program!r}")
        if outcome.iteration < 1:
            found.append(f"iteration: {outcome.iteration} is not an iteration number (they start at 1)")
        found += _time_problems(record.timestamp, window)
        found += _usage_problems("record", record.tokens, record.cost)
    for name, data in (("evaluated", outcome.evaluated), ("seed", outcome.seed)):
        if data is not None:
            found += _usage_problems(name, data.tokens, data.cost)
    return found


def program_models(program: Program, environ: Mapping[str, str]) -> frozenset[str]:
    """Returns the models the program may call: its `models:` entries, its `model:`, and AUTOLOOP_MODEL here."""
    names = [spec.name for spec in program.config.models] + [program.config.model or "", environ.get(MODEL_ENV, "")]
    return frozenset(name.strip() for name in names if name.strip())


def bullet_problems(outcome: Outcome, objectives: Sequence[Objective], models: AbstractSet[str]) -> list[str]:
    """Returns why the record's bullets cannot be published: an unknown or repeated label, a model use that is not
    the program's (models: program_models) or not a count, objectives that are not the program's values."""
    record = outcome.record
    if record is None:
        return []
    labels = [label for label, _ in record.extra]
    found = [f"record.extra: {label!r} is not a bullet autoloop writes" for label in dict.fromkeys(labels)
             if label not in KNOWN_BULLETS]
    found += [f"record.extra: {label!r} appears {labels.count(label)} times" for label in dict.fromkeys(labels)
              if labels.count(label) > 1]
    bullets = dict(record.extra)
    found += _model_problems(bullets, outcome.evaluated.model if outcome.evaluated else None, models)
    for label in (pareto.BULLET, acceptance.BASELINE):
        if label in bullets:
            found += _objective_problems(label, bullets[label], objectives)
    return found


def _model_problems(bullets: Mapping[str, str], proposed_by: str | None, models: AbstractSet[str]) -> list[str]:
    """Returns why the Model and Model spend bullets cannot go into the Models table.

    proposed_by: the model the candidate's trace data names (None: no model proposed it).
    """
    listed = ", ".join(sorted(models)) or "none: the program names no `model:`/`models:` and AUTOLOOP_MODEL is unset"
    found = []
    credited = bullets.get(MODEL_BULLET)
    for where, name in (("record.extra Model", credited), ("evaluated.model", proposed_by)):
        if name is not None and name not in models:
            found.append(f"{where}: {name!r} is not one of the program's models ({listed})")
    if credited is not None and proposed_by is not None and credited != proposed_by:
        found.append(f"record.extra Model: credits {credited!r}, but {proposed_by!r} proposed the candidate")
    spent: list[str] = []
    for part in bullets.get(SPEND_BULLET, "").split(";") if SPEND_BULLET in bullets else []:
        usage = parse_usage(part)
        if usage is None:
            found.append(f"record.extra Model spend: {part.strip()!r} is not `<model>: <n> tokens, $<usd>`")
            continue
        name, tokens, usd = usage
        spent.append(name)
        if name not in models:
            found.append(f"record.extra Model spend: {name!r} is not one of the program's models ({listed})")
        if tokens > MAX_TOKENS:
            found.append(f"record.extra Model spend: {name} used {tokens} tokens, over {MAX_TOKENS}")
        if (usd is None and "$" in part) or (usd is not None and not (math.isfinite(usd) and 0 <= usd <= MAX_COST)):
            found.append(f"record.extra Model spend: {name}'s {part.partition('$')[2].strip()!r} is not a cost "
                         f"between 0 and {MAX_COST:g}")
    found += [f"record.extra Model spend: {name!r} is listed twice" for name in dict.fromkeys(spent)
              if spent.count(name) > 1]
    if credited is not None and credited not in spent:
        found.append(f"record.extra Model: {credited!r} is credited without a spend of its own")
    return found


def _objective_problems(label: str, text: str, objectives: Sequence[Objective]) -> list[str]:
    """Returns why an Objectives bullet is not the program's objectives, as acceptance.bullets writes them."""
    if not objectives:
        return [f"record.extra {label}: the program declares no objectives"]
    canonical = pareto.objectives_text(pareto.parse_values(text), objectives)
    if text != canonical:
        return [f"record.extra {label}: {text!r} is not each of the program's objectives with a finite value "
                f"(`{canonical}`)"]
    return []


def _time_problems(when: datetime, window: PublishWindow) -> list[str]:
    shown = when.isoformat()
    try:
        moment = when.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        return [f"record.timestamp: {shown} is out of range"]
    if moment < window.not_before:
        return [f"record.timestamp: {shown} is before this run started ({window.not_before.isoformat()})"]
    if moment > window.not_after:
        return [f"record.timestamp: {shown} is in the future (now is {(window.not_after - SLACK).isoformat()})"]
    return []


def _usage_problems(where: str, tokens: int | None, cost: float | None) -> list[str]:
    found = []
    if tokens is not None and tokens > MAX_TOKENS:
        found.append(f"{where}.tokens: {tokens} is over {MAX_TOKENS}")
    if cost is not None and not 0 <= cost <= MAX_COST:
        found.append(f"{where}.cost: {cost:g} is not between 0 and {MAX_COST:g}")
    return found


def refuse(program: str, found: Sequence[str]) -> None:
    """Raises OutcomeError naming every problem when there is one."""
    if found:
        raise OutcomeError(f"refusing the outcome of '{program}', nothing was written: " + "; ".join(found))


def recheck_to_record(outcome: Outcome, state: statefile.StateFile, direction: str) -> BestRecheck | None:
    """Returns the outcome's re-check of the best when the state still awaits it (None when there is none, or the
    state moved past it: another outcome recorded a re-check or a new best meanwhile).

    Raises OutcomeError when it cannot be a re-check's: measured on another commit than the outcome's base, or
    re-basing the best upwards (a re-check only confirms the best or lowers it to what its code scores now).
    """
    found = outcome.recheck
    if found is None:
        return None
    if found.base != outcome.base_commit:
        refuse(outcome.program, [f"recheck: measured on {found.base[:12]}, not on the outcome's base commit"])
    if found.stale is None and found.best != found.recorded or is_improvement(found.best, found.recorded, direction):
        refuse(outcome.program, [f"recheck: best {found.best:g} is not what a re-check of {found.recorded:g} records"])
    machine = state.machine
    if machine.best_metric != found.recorded or machine.best_base in (None, found.base):
        log.info("%s: the best re-checked on %s is recorded already or was replaced", outcome.program, found.base[:12])
        return None
    return found


def numbered_claims(outcomes: Sequence[Outcome], state: statefile.StateFile) -> list[str]:
    """Returns the outcomes whose iteration is past any the state handed out.

    Slot i of a tick numbers itself next+i (i below MAX_SLOTS; the slots that failed leave gaps), and an
    older number is a run recorded meanwhile: the caller renumbers both to the next ones. A newer number
    was never handed out.
    """
    recorded = {entry.key for entry in state.history if entry.key}
    first = state.machine.iteration_count + 1
    last = state.machine.iteration_count + max(len(outcomes), MAX_SLOTS)
    return [f"iteration: {o.iteration} is not the next iteration of '{o.program}' ({first}, or up to {last} "
            "for the slots of a tick)"
            for o in outcomes if o.record is not None and o.key not in recorded and o.iteration > last]


def renumbered(outcome: Outcome, number: int, expected: bool = False) -> Outcome:
    """Returns the outcome as iteration `number`, its key renamed to match (the token stays).

    expected: the caller knew the slot's number could not be known at its launch (slots without a barrier): no warning.
    """
    if outcome.iteration == number:
        return outcome
    (log.debug if expected else log.warning)(
        "%s: iteration %d is recorded as iteration %d", outcome.program, outcome.iteration, number)
    prefix, _, token = outcome.key.rsplit(":", 2)
    return replace(outcome, iteration=number, key=f"{prefix}:{number}:{token}")


def state_problems(state: statefile.StateFile, program: Program, records: Sequence[statefile.IterationRecord],
                   budget: int) -> list[str]:
    """Returns why the state file, with the records applied, would not parse back ([] when it would)."""
    try:
        for record in records:
            state = statefile.apply_iteration(state, record, direction=program.direction,
                                              target_metric=program.config.target_metric,
                                              min_delta=program.config.min_delta, budget=budget)
        text = statefile.render_state(state)
        statefile.parse_state(text, f"{program.name}.md")
    except (AutoloopError, ValueError, OverflowError) as err:
        return [f"record: the state file would not parse back once written ({err})"]
    return []
