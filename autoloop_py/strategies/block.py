"""Reading a strategy's `### ⚙️ Strategy State` block: errors at the file's line, typed cells, Field tables."""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from autoloop_py import markdown as md
from autoloop_py.errors import StateError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BlockReader:
    """Turns a block-relative 0-based line into a StateError at the file's 1-based line.

    Attributes:
      path: the state file.
      first_line: the 0-based line of the block in its file.
    """

    path: str
    first_line: int

    def error(self, message: str, line: int) -> StateError:
        """Returns the error for a block-relative 0-based line."""
        return StateError(message, self.path, self.first_line + line + 1)

    def value(self, text: str, line: int, kind: Callable[[str], Any], what: str) -> Any:
        """Returns kind(text); raises a StateError naming what the value should be (kind's ValueError says it)."""
        try:
            return kind(text.strip())
        except ValueError as expected:
            raise self.error(f"{what} {text.strip()!r} is not {expected}; fix the value", line) from None

    def field(self, rows: Mapping[str, tuple[str, int]], name: str, kind: Callable[[str], Any], default: Any) -> Any:
        """Returns kind(the value of the field's row), or default when the block has no such row."""
        return default if name not in rows else self.value(rows[name][0], rows[name][1], kind, name)

    def fields(self, tables: Iterable[md.Table], known: Sequence[str], strict: bool) -> dict[str, tuple[str, int]]:
        """Returns the `| Field | Value |` rows as {field: (value, line)}; an unknown field raises when strict,
        else it is logged and ignored."""
        names = {field_name(name): name for name in known}
        rows: dict[str, tuple[str, int]] = {}
        for table in tables:
            if tuple(md.normalize_heading(h) for h in table.header[:2]) != ("field", "value"):
                continue
            for row in table.rows:
                name = names.get(field_name(row.cells[0])) if row.cells else None
                if name is None:
                    given = field_name(row.cells[0]) if row.cells else ""
                    if strict:
                        raise self.error(f"unknown field {given!r}; the fields are {', '.join(known)}", row.line)
                    logger.warning("%s:%d: unknown field %r ignored", self.path, self.first_line + row.line + 1, given)
                    continue
                if name in rows:
                    raise self.error(f"field {name} appears twice; keep one row", row.line)
                rows[name] = (row.cells[1] if len(row.cells) > 1 else "", row.line)
        return rows

    def columns(self, table: md.Table, wanted: Sequence[str], what: str = "table") -> dict[str, int]:
        """Returns each wanted column's index: the first header starting with its name (case aside), `*` columns
        (recomputed on render) excluded; raises naming the first one missing."""
        names = [md.normalize_heading(h) if "*" not in h else "" for h in table.header]
        found: dict[str, int] = {}
        for name in wanted:
            found[name] = next((i for i, n in enumerate(names) if n and n.startswith(name.lower())), -1)
            if found[name] < 0:
                raise self.error(f"the {what} has no `{name}` column; restore it", table.start)
        return found


def cell_text(row: md.TableRow, column: int) -> str:
    """Returns a row's stripped cell ('' past its last one)."""
    return row.cells[column].strip() if column < len(row.cells) else ""


def field_name(cell: str) -> str:
    """Returns a Field cell as a field name: `Best program id` → best_program_id."""
    return "_".join(md.normalize_heading(cell).split())


def count(text: str) -> int:
    """Converts a whole number >= 0 (digits only)."""
    if not re.fullmatch(r"[0-9]{1,15}", text):
        raise ValueError("a whole number >= 0")
    return int(text)


def finite(text: str) -> float:
    """Converts a finite number."""
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise ValueError("a finite number")
    return number
