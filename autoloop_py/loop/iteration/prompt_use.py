"""A program's prompt variants in an iteration: the guide writing a new one when due, the draw, and the record.

The variant is drawn from the state file's Prompts table by `prompt-selection`, seeded from (seed, program,
iteration) apart from the iteration's own random source. Every `prompt-evolve-every` iterations the guide model
(the `role: guide` entry, else the drawn model; its call counted in the iteration's spend) first writes a new
variant from the best and the worst. The record's `Prompt` and `Prompt written` bullets and the trace row's
`prompt` say which variant the candidate came from; the state file credits and adds rows from those bullets.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable

from autoloop_py.errors import AutoloopError, ConfigurationError
from autoloop_py.program.model import Program
from autoloop_py.proposers import prompt_choice
from autoloop_py.proposers.model_choice import draw_rng
from autoloop_py.proposers.prompt_choice import PromptChoice
from autoloop_py.state import file as statefile
from autoloop_py.state import prompt_stats, trace

log = logging.getLogger(__name__)


def choose(
    program: Program, state: statefile.StateFile, iteration: int, guide: Callable[[str], str] | None
) -> PromptChoice:
    """Returns the iteration's variant, after the guide (None: no llm proposer) wrote a new one when one is due."""
    table = statefile.prompts_of(state)
    every = program.config.prompt_evolve_every
    written = _written(program, table, guide, iteration) if guide and prompt_choice.due(iteration, every) else None
    if written is not None:
        table = replace(table, rows=(*table.rows, written))
    rng = draw_rng("prompts", program.config.seed, program.name, iteration)
    return PromptChoice(prompt_choice.choose_variant(table, program.config.prompt_selection, rng, every > 0), written)


def _written(
    program: Program, table: prompt_stats.PromptTable, guide: Callable[[str], str], iteration: int
) -> prompt_stats.PromptRow | None:
    """Returns the variant the guide writes from the best and worst (None when it gave no usable one)."""
    try:
        reply = guide(prompt_choice.evolve_prompt(table, program.goal))
    except ConfigurationError:
        raise  # a setting (404 model, refused key): the run stops, as for the proposer's
    except AutoloopError as err:  # a timeout or 5xx: the table keeps its variants, the iteration goes on
        log.warning("%s: the guide call for a new prompt variant failed (%s)", program.name, err)
        return None
    text = prompt_choice.parse_variant(reply)
    if text is None:
        log.warning("%s: the guide's reply held no `INSTRUCTION:` line; no new prompt variant", program.name)
        return None
    name = prompt_choice.next_name(table, iteration)
    log.info("%s: the guide wrote prompt variant %s", program.name, name)
    return prompt_stats.PromptRow(name, text)


def with_choice(
    record: statefile.IterationRecord, evaluated: trace.Evaluated | None, choice: PromptChoice, used: bool = True
) -> tuple[statefile.IterationRecord, trace.Evaluated | None]:
    """Returns the record with bullets naming the variant (used: a prompt held it) and the one written, and the trace
    row's metadata naming it."""
    if used_bullets := bullets(choice, used):
        record = replace(record, extra=(*record.extra, *used_bullets))
    if evaluated is not None and used and choice.variant is not None:
        evaluated = replace(evaluated, metadata={**evaluated.metadata, prompt_stats.TRACE_FIELD: choice.variant.name})
    return record, evaluated


def bullets(choice: PromptChoice, used: bool = True) -> tuple[tuple[str, str], ...]:
    """Returns the history bullets naming the variant drawn (used: a prompt held it) and the one written."""
    return prompt_stats.use_bullets(choice.variant.name if choice.variant is not None and used else None,
                                    choice.written)
