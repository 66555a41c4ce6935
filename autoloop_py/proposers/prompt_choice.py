"""Which instruction variant a proposal gets, and the prompt asking a guide model for a new one.

The draw is the models' bandit (proposers/model_choice.py) over the rows of the state file's Prompts table
(state/prompt_stats.py): `prompt-selection` takes the same methods as `model-selection`, a row's Weight and counts
are read as a Models row's, and the reward is the improvement its kept candidates bought per token. Every
`prompt-evolve-every` iterations a guide model is shown the best and the worst variant with their figures and
writes a new one, which the draw tries first under ucb and thompson (a variant never drawn goes first).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from autoloop_py.program.models import ModelSpec
from autoloop_py.proposers.model_choice import choose
from autoloop_py.render import render
from autoloop_py.state.model_stats import ModelRow, ModelTable
from autoloop_py.state.prompt_stats import BASE, INSTRUCTION_LIMIT, PromptRow, PromptTable, instruction_text
from autoloop_py.strategies.prompt import fence_for

_REPLY_RE = re.compile(r"^\W*INSTRUCTION\W*:\s*(.+)$", re.MULTILINE | re.IGNORECASE)
_NAME_RE = re.compile(r"p(\d{1,9})")


@dataclass(frozen=True)
class PromptChoice:
    """An iteration's prompt variant.

    Attributes:
      variant: the variant drawn (None: the table is empty and evolution is off, so the prompt is as rendered).
      written: the variant the guide wrote this iteration (None: none was due, or its reply was unusable).
    """

    variant: PromptRow | None = None
    written: PromptRow | None = None

    @property
    def instruction(self) -> str:
        """Returns the drawn variant's instruction ('' for none)."""
        return self.variant.instruction if self.variant else ""


def choose_variant(table: PromptTable, method: str, rng: random.Random, evolving: bool) -> PromptRow | None:
    """Returns the variant drawn by `method` from the rows (an empty table: `base` when evolving, else None)."""
    rows = table.rows or ((PromptRow(BASE),) if evolving else ())
    if not rows:
        return None
    specs = [ModelSpec(row.name) for row in rows]
    stats = ModelTable(tuple(ModelRow(r.name, r.weight, r.calls, r.accepted, r.improvement, r.tokens) for r in rows))
    name = choose(specs, stats, method, rng).name
    return next(row for row in rows if row.name == name)


def due(iteration: int, every: int) -> bool:
    """Returns whether this iteration's guide writes a new variant (every `every` iterations; never for 0)."""
    return every > 0 and iteration % every == 0


def ranked(table: PromptTable) -> tuple[PromptRow, PromptRow] | None:
    """Returns (the best, the worst) variant by improvement per call, tried ones first (None: the table is empty)."""
    rows = table.rows or (PromptRow(BASE),)
    tried = [row for row in rows if row.calls] or list(rows)
    order = sorted(tried, key=lambda row: (row.improvement / max(row.calls, 1), row.accepted / max(row.calls, 1)))
    return order[-1], order[0]


def evolve_prompt(table: PromptTable, goal: str) -> str:
    """Returns the guide's prompt: the program's goal, the best and the worst variant as data, the reply format."""
    best, worst = ranked(table) or (PromptRow(BASE), PromptRow(BASE))
    shown = [best] if worst == best else [best, worst]
    fence = fence_for("\n".join(row.instruction for row in shown))
    return render("prompt_evolve.md.j2", goal=goal.strip(), rows=shown, fence=fence, limit=INSTRUCTION_LIMIT)


def parse_variant(reply: str) -> str | None:
    """Returns the instruction of a guide's reply, made safe for the table and the prompt (None: no usable line)."""
    found = _REPLY_RE.search(reply or "")
    text = instruction_text(found.group(1)) if found else ""
    return text or None


def next_name(table: PromptTable, iteration: int) -> str:
    """Returns the name of the variant written in an iteration: `p<iteration>` (slots of one tick never share one),
    else `p<N>` above every `p<n>` in the table when a person took that name."""
    numbers = [int(found.group(1)) for row in table.rows if (found := _NAME_RE.fullmatch(row.name))]
    return f"p{iteration}" if table.row(f"p{iteration}") is None else f"p{max(numbers) + 1}"
