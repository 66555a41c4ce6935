"""State-file parts: the shared template macros and the number, time and line conventions of every section."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any

from autoloop_py.render import environment

PARTS_TEMPLATE = "state_parts.md.j2"
SUMMARY_LIMIT = 200

_BREAK_RE = re.compile(r"([-*_])(?:[ \t]*\1){2,}")


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


def utc(when: datetime) -> datetime:
    """Returns the time in UTC; a naive time is read as UTC."""
    if when.tzinfo is None:
        return when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


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
