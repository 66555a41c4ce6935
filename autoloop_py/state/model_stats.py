"""Model statistics: the state file's `## 🎰 Models` table — what each model was asked, what it bought, what it cost.

The runner adds each recorded iteration to the row of the model that proposed it (Calls, Accepted,
Improvement) and to the rows of every model the iteration paid for (Tokens, Spend; a strategy's guide
calls included). `model-selection` draws the next proposal's model from these rows, so a person steers
the draw by editing them: a Weight overrides the frontmatter's (`—`: the frontmatter's), a count edited
by hand is what the next draw sees. A row that cannot be read is a StateError naming its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Mapping

from autoloop_py.errors import StateError
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.parts import Table, cell_number, finite_number, format_number, read_table, render_table

MODELS = "models"
MODEL_BULLET = "Model"
SPEND_BULLET = "Model spend"
_HEADER = ("Model", "Weight", "Calls", "Accepted", "Improvement", "Tokens", "Spend")
_USAGE_RE = re.compile(r"^\s*(\S+?):\s*([0-9]{1,15}) tokens?(?:, \$([0-9.eE+-]+))?\s*$")


@dataclass(frozen=True)
class ModelRow:
    """One model's row.

    Attributes:
      name: the litellm model string.
      weight: the hand-set weight (None: the frontmatter's).
      calls: iterations whose proposal this model made.
      accepted: of those, the ones kept (accepted, or pending CI).
      improvement: the metric gained by its kept candidates, summed (in the better direction, so >= 0).
      tokens: tokens of every call it answered (proposals, retries and guide calls).
      usd: dollars of those calls (0 when its price is unknown).
    """

    name: str
    weight: float | None = None
    calls: int = 0
    accepted: int = 0
    improvement: float = 0.0
    tokens: int = 0
    usd: float = 0.0

    @property
    def accepted_share(self) -> float | None:
        """Returns the share of its proposals that were kept (None before any)."""
        return self.accepted / self.calls if self.calls else None


ModelTable = Table[ModelRow]  # the Models section split around its table


@dataclass(frozen=True)
class ModelUse:
    """What one iteration asked of the models, as its history bullets carry it.

    Attributes:
      proposer: the model that proposed (None: no model proposed, e.g. the tune proposer).
      spend: model -> (tokens, dollars or None) of every model the iteration paid for.
    """

    proposer: str | None = None
    spend: Mapping[str, tuple[int, float | None]] = field(default_factory=dict)


# ---------------------------------------------------------------- the section


def parse_models_section(text: str | None, path: str, first_line: int = 0) -> ModelTable:
    """Returns the table of a Models section (empty when there is none); raises StateError naming a bad line.

    first_line: the 0-based line of the section in its file, so errors name the file's line.
    """
    twice = "model {} has two rows; merge them into one"
    return ModelTable(*read_table(text, path, first_line, "Models", _HEADER, _row, twice))


def render_models_section(table: ModelTable) -> str:
    """Returns the section's text: the head and tail as read (the skeleton's when new), the table re-rendered."""
    cells = [_cells(row) for row in table.rows]
    return render_table(table.head, table.tail, cells, "models_table", "models_section")


def _row(cells: list[str], path: str, line: int) -> ModelRow:
    name = cells[0].strip().removeprefix("`").removesuffix("`").strip()
    if not readable_name(name):
        raise StateError(f"'{cells[0]}' is not a model string; write the litellm model name", path, line)
    values = [cell_number(label, cell, path, line, whole) for label, cell, whole in zip(
        _HEADER[1:], cells[1:], (False, True, True, False, True, False))]
    weight, calls, accepted, improvement, tokens, usd = values
    if accepted is not None and calls is not None and accepted > calls:
        raise StateError(f"{name}: Accepted ({int(accepted)}) exceeds Calls ({int(calls)}); correct one", path, line)
    return ModelRow(name, weight, int(calls or 0), int(accepted or 0), improvement or 0.0, int(tokens or 0), usd or 0.0)


def readable_name(name: str) -> bool:
    """Returns whether a model name can stand in a row and read back (a name from --model is not checked before)."""
    return bool(name) and not any(c.isspace() or c in "`|<>\\;" for c in name)


def _cells(row: ModelRow) -> dict[str, str]:
    return {
        "model": f"`{row.name}`",
        "weight": "—" if row.weight is None else format_number(row.weight),
        "calls": str(row.calls),
        "accepted": str(row.accepted),
        "improvement": format_number(round(row.improvement, 10)),
        "tokens": str(row.tokens),
        # Ten decimals: a sum of many small costs must read back without drifting.
        "spend": f"${format_number(round(row.usd, 10))}",
    }


def summary_rows(table: ModelTable) -> list[dict[str, str]]:
    """Returns each model's figures as people read them (status, the report, the status comment)."""
    return [
        {
            "model": row.name,
            "calls": str(row.calls),
            "accepted": "—" if row.accepted_share is None else f"{row.accepted} ({row.accepted_share:.0%})",
            "improvement": format_number(round(row.improvement, 6)),
            "spend": f"{row.tokens} tokens, ${row.usd:.4f}" if row.usd else f"{row.tokens} tokens",
        }
        for row in table.rows
    ]


# ---------------------------------------------------------------- one iteration


def use_bullets(use: ModelUse) -> tuple[tuple[str, str], ...]:
    """Returns the history bullets saying which model proposed and what each model cost."""
    bullets = [(MODEL_BULLET, use.proposer)] if use.proposer else []
    spent = [
        f"{name}: {tokens} tokens" + ("" if usd is None else f", ${format_number(round(usd, 10))}")
        for name, (tokens, usd) in use.spend.items()
    ]
    return (*bullets, (SPEND_BULLET, "; ".join(spent))) if spent else tuple(bullets)


def use_of(record: IterationRecord) -> ModelUse:
    """Returns the model use a record's bullets carry (a record without them used no model)."""
    bullets = dict(record.extra)
    usages = (parse_usage(part) for part in (bullets.get(SPEND_BULLET) or "").split(";"))
    spend = {usage[0]: usage[1:] for usage in usages if usage}
    return ModelUse(bullets.get(MODEL_BULLET) or None, spend)


def parse_usage(part: str) -> tuple[str, int, float | None] | None:
    """Returns (model, tokens, dollars or None) of one `<model>: <n> tokens, $<usd>` spend part (None: not one)."""
    found = _USAGE_RE.match(part)
    if found is None:
        return None
    return found.group(1), int(found.group(2)), finite_number(found.group(3)) if found.group(3) else None


def with_record(table: ModelTable, record: IterationRecord, improvement: float) -> ModelTable:
    """Returns the table with one recorded iteration added (unchanged when it used no model).

    improvement: how much the record's metric beat the best before it (0 unless it was kept).
    """
    use = use_of(record)
    # A name that could not be read back (a --model value is not checked) stays out of the table.
    use = ModelUse(use.proposer if use.proposer and readable_name(use.proposer) else None,
                   {name: spent for name, spent in use.spend.items() if readable_name(name)})
    rows = list(table.rows)
    for name in ([use.proposer] if use.proposer else []) + [n for n in use.spend if n != use.proposer]:
        if table.row(name) is None and all(row.name != name for row in rows):
            rows.append(ModelRow(name))
    kept = record.status in ("accepted", "pending-ci")
    for i, row in enumerate(rows):
        tokens, usd = use.spend.get(row.name, (0, None))
        if row.name == use.proposer:
            row = replace(row, calls=row.calls + 1, accepted=row.accepted + kept,
                          improvement=row.improvement + (max(improvement, 0.0) if kept else 0.0))
        rows[i] = replace(row, tokens=row.tokens + tokens, usd=row.usd + (usd or 0.0))
    return replace(table, rows=tuple(rows)) if use.proposer or use.spend else table
