"""An iteration's models: the one drawn to propose (from the Models table) and what every model call cost.

The draw reads the state file's Models rows and the program's `model-selection`, seeded from
(seed, program, iteration); what the iteration spent goes back into its record, per model, as the
`Model` and `Model spend` history bullets, which the state file adds to the Models table.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from autoloop_py.loop.options import RunOptions
from autoloop_py.program import models
from autoloop_py.program.model import Program
from autoloop_py.program.models import ModelSpec
from autoloop_py.proposers import llm
from autoloop_py.proposers.base import Usage
from autoloop_py.proposers.model_choice import choose, model_rng
from autoloop_py.state import file as statefile
from autoloop_py.state.model_stats import ModelUse, use_bullets


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
    rng = model_rng(program.config.seed, program.name, iteration)
    return choose(specs, table, program.config.model_selection, rng)


def guide_model(program: Program, drawn: ModelSpec | None) -> ModelSpec | None:
    """Returns the model of a strategy's guide and meta calls: the `role: guide` entry, else the drawn one."""
    return models.guide(program.config.models) or drawn


def with_use(
    record: statefile.IterationRecord, proposer: ModelSpec | None, others: Sequence[Usage]
) -> statefile.IterationRecord:
    """Returns the record with the other calls' usage (guide, meta) added to its spend, and the per-model bullets."""
    if proposer is None and not others:
        return record
    spend: dict[str, tuple[int, float | None]] = {}
    if proposer is not None:
        spend[proposer.name] = (record.tokens or 0, record.cost)
    tokens, cost = record.tokens or 0, record.cost
    for usage in others:
        name = usage.model or "unknown"
        used = usage.prompt_tokens + usage.completion_tokens
        before_tokens, before_usd = spend.get(name, (0, None))
        spend[name] = (before_tokens + used, _plus(before_usd, usage.cost))
        tokens, cost = tokens + used, _plus(cost, usage.cost)
    use = ModelUse(proposer.name if proposer else None, spend)
    return replace(record, tokens=tokens or None, cost=cost, extra=(*record.extra, *use_bullets(use)))


def _plus(total: float | None, more: float | None) -> float | None:
    return total if more is None else (total or 0.0) + more
