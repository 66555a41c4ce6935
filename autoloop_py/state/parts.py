"""State-file parts: the shared template macros and the number, time and line conventions of every section."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Generic, Protocol, TypeVar

from autoloop_py.errors import StateError
# The time in UTC, a naive time read as UTC: the standalone scheduler's rule (it reads Last Run so too).
from autoloop_py.github.agentic_scheduler import as_utc as utc
from autoloop_py.render import environment

PARTS_TEMPLATE = "state_parts.md.j2"
SUMMARY_LIMIT = 200
NO_VALUE = ("", "—", "–", "-")
# The icon and the words of each iteration status, as every page and command show them.
STATUS_ICONS = {"accepted": "✅", "rejected": "❌", "error": "⚠️", "pending-ci": "⏳", "ci-fix-exhausted": "🛑"}
STATUS_WORDS = {
    "accepted": "Accepted",
    "rejected": "Rejected",
    "error": "Error",
    "pending-ci": "Pending CI",
    "ci-fix-exhausted": "CI fix exhausted",
}

_BREAK_RE = re.compile(r"([-*_])(?:[ \t]*\1){2,}")
_CELL_SPLIT_RE = re.compile(r"(?<!\\)\|")
DELIMITER_RE = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def macro(name: str, **context: Any) -> str:
    """Renders one macro of the state parts template."""
    module = environment().get_template(PARTS_TEMPLATE).module
    return str(getattr(module, name)(**context))


def format_number(value: float) -> str:
    """Returns a number as the shortest text that reads back the same (`3` for 3.0, `0.364237`)."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def finite_number(text: str) -> float | None:
    """Returns the text as a finite float, None when it is not one."""
    try:
        value = float(text.strip())
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def one_line(text: str) -> str:
    """Returns the text with every run of whitespace, line breaks included, collapsed to one space."""
    return " ".join(text.split())


def trim(text: str, limit: int) -> str:
    """Returns the text cut to `limit` characters, its end replaced by `…` when cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def trim_front(text: str, limit: int) -> str:
    """Returns the text cut to its last `limit` characters, its start replaced by `…` when cut."""
    return text if len(text) <= limit else "…" + text[-(limit - 1) :].lstrip()


def end_line(text: str) -> str:
    """Returns non-empty text ending with a line break."""
    return text if not text or text.endswith(("\n", "\r")) else text + "\n"


def is_break(line: str) -> bool:
    """Returns whether the line is a thematic break such as `---`."""
    return bool(_BREAK_RE.fullmatch(line.strip()))


def content_end(lines: list[str], floor: int = 1) -> int:
    """Returns the index after the last line that is neither blank nor a break, never below `floor`."""
    end = len(lines)
    while end > floor and (not lines[end - 1].strip() or is_break(lines[end - 1])):
        end -= 1
    return end


def split_cells(line: str) -> list[str]:
    """Returns the cells of a markdown table line, split at pipes not escaped as `\\|` (unstripped)."""
    body = line.strip().removeprefix("|")
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return _CELL_SPLIT_RE.split(body)


class Named(Protocol):
    """A table row with a name (a Models or Prompts row)."""

    @property
    def name(self) -> str:
        """Returns the row's name, unique in its table."""


Row = TypeVar("Row", bound=Named)


@dataclass(frozen=True)
class Table(Generic[Row]):
    """A table section (Models, Prompts) split around its table.

    Attributes:
      rows: the rows, in table order.
      head: the heading and the text before the table.
      tail: the text after the table.
    """

    rows: tuple[Row, ...] = ()
    head: str = ""
    tail: str = ""

    def row(self, name: str) -> Row | None:
        """Returns the row of a name (None when it has none yet)."""
        return next((row for row in self.rows if row.name == name), None)


def read_table(
    text: str | None, path: str, first_line: int, what: str, header: tuple[str, ...],
    row: Callable[[list[str], str, int], Row], twice: str,
) -> tuple[tuple[Row, ...], str, str]:
    """Returns (the rows, the text before the table, the text after) of a section's first table (no rows when it has
    none); raises StateError naming a line without the header's cell count, or the second row of a name.

    first_line: the 0-based line of the section in its file; what: the table's name in messages; row: reads one
    row's stripped cells at a 1-based file line; twice: the message for a repeated name (`{}`: the name).
    """
    lines = (text or "").splitlines(keepends=True)
    start = next((i for i in range(1, len(lines)) if lines[i].lstrip().startswith("|")), None)
    if start is None:
        return (), text or "", ""
    end = next((i for i in range(start, len(lines)) if not lines[i].lstrip().startswith("|")), len(lines))
    if end - start < 2 or not DELIMITER_RE.match(lines[start + 1]):
        raise StateError(f"the {what} table has no `|---|` line under its header", path, first_line + start + 2)
    rows: list[Row] = []
    for i in range(start, end):
        cells = [cell.strip() for cell in split_cells(lines[i])]
        if len(cells) != len(header):
            raise StateError(
                f"this {what} row has {len(cells)} cells, expected {len(header)} ({' | '.join(header)})",
                path, first_line + i + 1,
            )
        if i >= start + 2:
            rows.append(row(cells, path, first_line + i + 1))
            if any(other.name == rows[-1].name for other in rows[:-1]):
                raise StateError(twice.format(rows[-1].name), path, first_line + i + 1)
    return tuple(rows), "".join(lines[:start]), "".join(lines[end:])


def render_table(head: str, tail: str, cells: list[dict[str, str]], table_macro: str, section_macro: str) -> str:
    """Returns a table section: the head and tail as read (the section macro's when there is no head), the table's
    rows re-rendered by its macro."""
    body = end_line(macro(table_macro, rows=cells))
    if not head:
        return end_line(macro(section_macro, table=body.rstrip("\n")))
    return head + body + tail


def cell_number(label: str, cell: str, path: str, line: int, whole: bool) -> float | None:
    """Returns a table cell's number >= 0 (None for `—`); raises StateError naming the line for any other text."""
    text = cell.strip().removeprefix("$").strip()
    if text in NO_VALUE:
        return None
    number = finite_number(text)
    if number is None or number < 0 or (whole and not float(number).is_integer()):
        kind = "a whole number" if whole else "a number"
        raise StateError(f"{label} is '{cell}', which is not {kind} >= 0; correct the value", path, line)
    return number
