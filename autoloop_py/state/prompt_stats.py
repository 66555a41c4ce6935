"""Prompt variants: the state file's `## 🧪 Prompts` table — the instructions proposals are given, what each bought.

Each row is a variant: a name, the one-line instruction rendered into the prompt (`—`: the prompt as it is), and
the figures `prompt-selection` draws from (Calls, Accepted, Improvement and Tokens, as the Models table has them).
The runner credits the variant each recorded iteration drew (its `Prompt` history bullet) and adds the variant a
guide model wrote (its `Prompt written` bullet); a person adds a row, edits an instruction, a Weight or a count, and
the next draw sees it. A row that cannot be read is a StateError naming its line.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace

from autoloop_py.errors import StateError
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.model_stats import readable_name
from autoloop_py.state.parts import (
    NO_VALUE,
    Table,
    cell_number,
    format_number,
    one_line,
    read_table,
    render_table,
    trim,
)
from autoloop_py.state.untrusted_text import plain

log = logging.getLogger(__name__)

PROMPTS = "prompts"
PROMPT_BULLET = "Prompt"
WRITTEN_BULLET = "Prompt written"
TRACE_FIELD = "prompt"  # the trace row metadata naming the variant drawn
# The variant drawn when the table is empty and prompt evolution is on: the prompt as the templates render it.
BASE = "base"
INSTRUCTION_LIMIT = 600
_HEADER = ("Variant", "Weight", "Calls", "Accepted", "Improvement", "Tokens", "Instruction")
_LEADING_MARKUP_RE = re.compile(r"^[\s#>|*=-]+")


@dataclass(frozen=True)
class PromptRow:
    """One variant's row.

    Attributes:
      name: the variant's name (a word: `base`, `p3`, `terse`).
      instruction: the one-line instruction the prompt shows ('' for none).
      weight: the hand-set weight of `prompt-selection: weighted` (None: 1; 0: never drawn).
      calls: iterations whose prompt held this variant.
      accepted: of those, the ones kept (accepted, or pending CI).
      improvement: the metric gained by its kept candidates, summed (>= 0).
      tokens: the tokens of those iterations, their guide calls included.
    """

    name: str
    instruction: str = ""
    weight: float | None = None
    calls: int = 0
    accepted: int = 0
    improvement: float = 0.0
    tokens: int = 0


PromptTable = Table[PromptRow]  # the Prompts section split around its table


def instruction_text(text: str) -> str:
    """Returns an instruction as a table cell and a prompt can hold it: plain text on one line, no leading markup
    (a guide model's text must not open a heading, quote or row), at most INSTRUCTION_LIMIT characters."""
    return trim(_LEADING_MARKUP_RE.sub("", one_line(plain(text))), INSTRUCTION_LIMIT)


# ---------------------------------------------------------------- the section


def parse_prompts_section(text: str | None, path: str, first_line: int = 0) -> PromptTable:
    """Returns the table of a Prompts section (empty when there is none); raises StateError naming a bad line.

    first_line: the 0-based line of the section in its file, so errors name the file's line.
    """
    twice = "variant {} has two rows; rename one"
    return PromptTable(*read_table(text, path, first_line, "Prompts", _HEADER, _row, twice))


def render_prompts_section(table: PromptTable) -> str:
    """Returns the section's text: the head and tail as read (the skeleton's when new), the table re-rendered."""
    cells = [_cells(row) for row in table.rows]
    return render_table(table.head, table.tail, cells, "prompts_table", "prompts_section")


def _row(cells: list[str], path: str, line: int) -> PromptRow:
    name = cells[0].removeprefix("`").removesuffix("`").strip()
    if not readable_name(name):
        raise StateError(f"'{cells[0]}' is not a variant name; write one word (e.g. `p4`)", path, line)
    weight, calls, accepted, improvement, tokens = (cell_number(label, cell, path, line, whole) for label, cell, whole
                                                    in zip(_HEADER[1:], cells[1:], (False, True, True, False, True)))
    if accepted is not None and calls is not None and accepted > calls:
        raise StateError(f"{name}: Accepted ({int(accepted)}) exceeds Calls ({int(calls)}); correct one", path, line)
    instruction = "" if cells[6] in NO_VALUE else cells[6].replace("\\|", "|")
    return PromptRow(name, instruction, weight, int(calls or 0), int(accepted or 0), improvement or 0.0,
                     int(tokens or 0))


def _cells(row: PromptRow) -> dict[str, str]:
    return {
        "variant": f"`{row.name}`",
        "weight": "—" if row.weight is None else format_number(row.weight),
        "calls": str(row.calls),
        "accepted": str(row.accepted),
        "improvement": format_number(round(row.improvement, 10)),
        "tokens": str(row.tokens),
        # Each pipe escaped, so that the instruction stays one cell and reads back as written.
        "instruction": row.instruction.replace("|", "\\|") if row.instruction else "—",
    }


# ---------------------------------------------------------------- one iteration


def use_bullets(variant: str | None, written: PromptRow | None = None) -> tuple[tuple[str, str], ...]:
    """Returns the history bullets naming the variant an iteration drew and the variant its guide wrote."""
    bullets = [(PROMPT_BULLET, variant)] if variant else []
    if written is not None:
        bullets.append((WRITTEN_BULLET, f"{written.name}: {written.instruction}"))
    return tuple(bullets)


def use_of(record: IterationRecord) -> tuple[str | None, PromptRow | None]:
    """Returns (the variant a record drew, the variant its guide wrote) as its bullets say (None: none, unreadable)."""
    bullets = dict(record.extra)
    variant = bullets.get(PROMPT_BULLET) or None
    name, _, text = (bullets.get(WRITTEN_BULLET) or "").partition(": ")
    written = PromptRow(name, instruction_text(text)) if readable_name(name) and instruction_text(text) else None
    return (variant if variant and readable_name(variant) else None), written


def with_record(table: PromptTable, record: IterationRecord, improvement: float) -> PromptTable:
    """Returns the table with one recorded iteration added: the written variant appended, the drawn one credited.

    improvement: how much the record's metric beat the best before it (0 unless it was kept).
    """
    variant, written = use_of(record)
    rows = list(table.rows)
    if written is not None and table.row(written.name) is None:
        rows.append(written)
    if variant == BASE and all(row.name != BASE for row in rows):
        rows.insert(0, PromptRow(BASE))
    index = next((i for i, row in enumerate(rows) if row.name == variant), None)
    if variant is not None and index is None:  # deleted by hand meanwhile: nothing to credit
        log.info("no Prompts row %s to credit; the iteration is not counted there", variant)
    if index is not None:
        row, kept = rows[index], record.status in ("accepted", "pending-ci")
        gain = max(improvement, 0.0) if kept else 0.0
        rows[index] = replace(row, calls=row.calls + 1, accepted=row.accepted + kept,
                              improvement=row.improvement + gain, tokens=row.tokens + (record.tokens or 0))
    return replace(table, rows=tuple(rows)) if variant or written else table
