"""A program's model use: the model drawn to propose (from the Models table) and what every model call cost.

The draw reads the state file's Models rows and the program's `model-selection`, seeded from
(seed, program, iteration); what the iteration spent goes back into its record, per model, as the
`Model` and `Model spend` history bullets, which the state file adds to the Models table. Calls made
by commands outside an iteration (customize, judge, replay) are added to Spent and the table directly.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from autoloop_py.errors import AutoloopError, ConfigurationError, GitError
from autoloop_py.loop.checkout.lock import program_lock
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.loop.record.recording import load_state, parse_or_new, state_path
from autoloop_py.program import models
from autoloop_py.program.model import Program
from autoloop_py.program.models import ModelSpec
from autoloop_py.proposers import llm
from autoloop_py.proposers.base import Usage
from autoloop_py.proposers.llm_call import CallLimits
from autoloop_py.proposers.model_choice import choose, draw_rng
from autoloop_py.state import budget
from autoloop_py.state import file as statefile
from autoloop_py.state import trace
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.model_stats import ModelUse, use_bullets

log = logging.getLogger(__name__)


def uses_llm(program: Program, options: RunOptions) -> bool:
    """Returns whether this run's proposals come from the llm proposer."""
    return (options.proposer or program.config.proposer or "tune") == "llm"


def draw(program: Program, options: RunOptions, state: statefile.StateFile, iteration: int) -> ModelSpec | None:
    """Returns the model that proposes in this iteration (None: no llm proposer, or no model configured)."""
    if not uses_llm(program, options):
        return None
    specs = llm.resolve_models(program, options.model)
    if not specs:
        return None
    table = statefile.models_of(state)
    rng = draw_rng("models", program.config.seed, program.name, iteration)
    return choose(specs, table, program.config.model_selection, rng)


def guide_model(program: Program, drawn: ModelSpec | None) -> ModelSpec | None:
    """Returns the model of a strategy's guide and meta calls: the `role: guide` entry, else the drawn one."""
    return models.with_role(program.config.models, models.GUIDE) or drawn


def ask_guide(
    model: ModelSpec | str, listed: bool, prompt: str, *, limits: CallLimits, spent: list[Usage] | None = None,
    models: llm.ModelCalls | None = None,
) -> str:
    """Returns the guide model's reply to a strategy's prompt (listed: it is the `role: guide` entry).

    A setting that keeps the guide from answering (a 404 model, a refused key, an api-base nothing answers
    at) raises ConfigurationError naming the guide, which stops the run as the proposer's would; any other
    failure reaches the strategy, which goes on without the guide's advice.
    """
    try:
        return llm.complete(model, prompt, limits=limits, spent=spent, models=models)
    except ConfigurationError as err:
        which = "the `role: guide` entry of `models:`" if listed else "the iteration's model, no `role: guide` entry"
        raise ConfigurationError(f"the strategy's guide call ({which}) failed: {err}") from None


def with_use(
    record: statefile.IterationRecord, proposer: ModelSpec | None, others: Sequence[Usage]
) -> statefile.IterationRecord:
    """Returns the record with the other calls' usage (guide, meta) added to its spend, and the per-model bullets."""
    if proposer is None and not others:
        return record
    use = iteration_use(proposer, record.tokens, record.cost, others)
    tokens, cost = record.tokens or 0, record.cost
    for used, usd in _per_model(others).values():
        tokens, cost = tokens + used, _plus(cost, usd)
    return replace(record, tokens=tokens or None, cost=cost, extra=(*record.extra, *use_bullets(use)))


def iteration_use(
    proposer: ModelSpec | None, tokens: int | None, cost: float | None, others: Sequence[Usage]
) -> ModelUse:
    """Returns the iteration's model use: the proposer's tokens and cost plus its guide and meta calls', per model."""
    spend: dict[str, tuple[int, float | None]] = {}
    if proposer is not None:
        spend[proposer.name] = (tokens or 0, cost)
    for name, (used, usd) in _per_model(others).items():
        before_tokens, before_usd = spend.get(name, (0, None))
        spend[name] = (before_tokens + used, _plus(before_usd, usd))
    return ModelUse(proposer.name if proposer else None, spend)


def guide_metadata(others: Sequence[Usage]) -> dict[str, object]:
    """Returns the trace row metadata naming what the other calls (guide, meta) cost, per model (empty: none)."""
    spent = [{"model": name, "tokens": tokens, "cost": usd} for name, (tokens, usd) in _per_model(others).items()]
    return {trace.GUIDE_SPEND: spent} if spent else {}


def check_budget(root: Path, program: Program, what: str, now: datetime | None = None) -> None:
    """Raises AutoloopError before a command's model calls (customize, judge, replay) when a budget is reached."""
    moment = now or datetime.now(timezone.utc)
    try:
        machine = load_state(MemoryStore(root), program).machine
    except GitError as err:  # no memory branch to read: nothing was spent yet
        log.debug("%s: no state to check the budgets of %s against: %s", program.name, what, err)
        return
    limit = budget.reached(program.config, machine, moment)
    if limit is not None:
        why = budget.pause_reason(limit, program.name, moment.date())
        raise AutoloopError(f"{program.name}: no {what} call: {why}")


def record_spend(root: Path, program: Program, spent: Sequence[Usage], what: str, now: datetime | None = None) -> None:
    """Adds model calls made outside an iteration (customize, judge, replay) to the program's Spent and Models table.

    They count against the program's budgets from the next iteration on. A memory branch that cannot be
    written (no repository remote, a race lost too often) is logged: the command's own result still stands.
    """
    if not spent:
        return
    use = ModelUse(None, _per_model(spent))
    when = now or datetime.now(timezone.utc)
    path = state_path(program)

    def change(text: str | None) -> str:
        return statefile.render_state(statefile.with_model_spend(parse_or_new(text, program, path), use, when))

    try:
        with program_lock(root, program.name):
            memory = MemoryStore(root)
            memory.sync()
            memory.update(path, change, f"[Autoloop: {program.name}] spend of {what}"[:200])
    except GitError as err:
        log.warning("%s: the spend of %s could not be recorded on the memory branch: %s", program.name, what, err)


def _per_model(spent: Sequence[Usage]) -> dict[str, tuple[int, float | None]]:
    totals: dict[str, tuple[int, float | None]] = {}
    for usage in spent:
        name = usage.model or "unknown"
        tokens, usd = totals.get(name, (0, None))
        totals[name] = (tokens + usage.prompt_tokens + usage.completion_tokens, _plus(usd, usage.cost))
    return totals


def _plus(total: float | None, more: float | None) -> float | None:
    return total if more is None else (total or 0.0) + more
