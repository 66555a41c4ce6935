"""State file: the `<name>.md` on the memory branch — parse, render losslessly, update and compact.

The file is kept as its level-2 sections in source order, each holding its exact text, so
`render_state(parse_state(text)) == text`. Updates replace only the regions the runner owns:
the Machine State table lines, the history entries it prepends or folds, placeholder lines it
removes and the bullets it appends to Lessons Learned. Every other byte is re-emitted as read.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Callable, Union

from autoloop_py import markdown as md
from autoloop_py.errors import StateError
from autoloop_py.render import environment, render

logger = logging.getLogger(__name__)

STATUSES = ("accepted", "rejected", "error", "ci-fix-exhausted", "pending-ci")
RECORD_STATUSES = ("accepted", "rejected", "error")
DIRECTIONS = ("higher", "lower")
DEFAULT_BUDGET = 30720
RECENT_LIMIT = 10
KEEP_DETAILED = 10
KEEP_DETAILED_TIGHT = 5
TIGHT_FRACTION = 0.8
SUMMARY_LIMIT = 200
REASON_LIMIT = 100

MACHINE = "machine state"
HISTORY = "iteration history"
LESSONS = "lessons learned"
PRIORITIES = "current priorities"
FORECLOSED = "foreclosed avenues"
FUTURE = "future directions"

_PARTS_TEMPLATE = "state_parts.md.j2"
_SECTION_MACROS = {
    PRIORITIES: "priorities_section",
    LESSONS: "lessons_section",
    FORECLOSED: "foreclosed_section",
    FUTURE: "future_section",
    HISTORY: "history_section",
}
_STATUS_LABELS = {"accepted": "✅ Accepted", "rejected": "❌ Rejected", "error": "⚠️ Error"}
_NO_ACCEPTED = "no accepted changes"
_ODD_BREAKS_RE = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_DELIMITER_RE = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_CELL_SPLIT_RE = re.compile(r"(?<!\\)\|")
_MARKUP_RE = re.compile(r"([\\`*_\[\]<>&!~#])")
_BREAK_RE = re.compile(r"([-*_])(?:[ \t]*\1){2,}")
_ITEM_BLOCK_RE = re.compile(r"(?:[-+*](?:\s|[-*_]|$)|#{1,6}(?:\s|$)|>|```|~~~|_{3}|<[A-Za-z!/?])")
_BLOCK_START_RE = re.compile(r"^(?:[-*_](?:[ \t]*[-*_]){2,}\s*$|#|<|>|```|~~~|\|)")
_NO_ITERATIONS_RE = re.compile(r"^\s*[*_]*\(?\s*no iterations yet\.?\s*\)?[*_]*\s*$", re.IGNORECASE)
_PLACEHOLDER_ITEM_RE = re.compile(r"^\s*[-*+]\s+[*_]*\(\s*none yet\.?\s*\)[*_]*\s*$", re.IGNORECASE)
_PLACEHOLDER_RE = re.compile(r"^\((?:none yet|no specific priorities.*|no iterations yet)\.?\)$", re.IGNORECASE)
_ITERATION_RE = re.compile(r"^iteration\s+#?(\d{1,9})\b", re.IGNORECASE)
_RANGE_RE = re.compile(r"^iters?\s+#?(\d{1,9})\s*[-–—]\s*#?(\d{1,9})\b(.*)$", re.IGNORECASE | re.DOTALL)
_WHEN_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?")
_NUMBER_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_RANGE_METRIC_RE = re.compile(r"\(\s*metrics?\s+([^()]*?)\s*(?:→|->)\s*([^()]*?)\s*\)\s*:?", re.IGNORECASE)
_COUNT_RES = tuple(re.compile(p + r"\s*(\d{1,9})") for p in ("✅", "❌", "⚠\ufe0f?"))


@dataclass(frozen=True)
class MachineState:
    """The `⚙️ Machine State` table: the fields the scheduler and the runner decide on.

    Attributes:
      last_run: when the last iteration finished (aware, UTC), None before the first.
      iteration_count: iterations recorded so far.
      best_metric: the best metric accepted so far (or the baseline).
      initial_metric: the metric of the unchanged code, measured on the first run.
      target_metric: the program's halting target, None when open-ended.
      metric_direction: "higher" or "lower".
      branch: the program branch, `autoloop/<name>`.
      pr: the draft PR as `#n`, None when there is none.
      issue: the program issue as `#n`, None when there is none.
      paused: whether the scheduler must skip the program.
      pause_reason: why it is paused.
      completed: whether the target metric was reached.
      completed_reason: the sentence saying which value reached the target.
      consecutive_errors: errors since the last accepted iteration.
      recent_statuses: the last statuses, oldest first, at most ten.
      extra: rows this version does not know, as (field, value) plain text, in table order.
    """

    last_run: datetime | None = None
    iteration_count: int = 0
    best_metric: float | None = None
    initial_metric: float | None = None
    target_metric: float | None = None
    metric_direction: str = "higher"
    branch: str | None = None
    pr: str | None = None
    issue: str | None = None
    paused: bool = False
    pause_reason: str | None = None
    completed: bool = False
    completed_reason: str | None = None
    consecutive_errors: int = 0
    recent_statuses: tuple[str, ...] = ()
    extra: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class HistoryEntry:
    """One `### ` entry of the Iteration History: a detailed iteration, a folded range, or other text.

    Attributes:
      iteration: N of `Iteration N`, or the first iteration of a range; None for other headings.
      last_iteration: the last iteration of a folded range; None for single entries.
      status: the Status bullet as one of STATUSES (None for ranges or when unreadable).
      text: the entry's exact source, heading to the line before the next entry.
      timestamp: when the iteration ran (aware, UTC), when the heading says.
      metric: a detailed entry's metric; the newest metric of a range.
      first_metric: the oldest metric of a range.
      change: the Change bullet of a detailed entry.
      counts: accepted, rejected and other outcomes folded into a range.
      summary: a range's summary of accepted changes.
    """

    iteration: int | None
    last_iteration: int | None
    status: str | None
    text: str
    timestamp: datetime | None = None
    metric: float | None = None
    first_metric: float | None = None
    change: str | None = None
    counts: tuple[int, int, int] = (0, 0, 0)
    summary: str = ""

    @property
    def is_range(self) -> bool:
        """Returns whether this is a folded `### Iters A–B` entry."""
        return self.last_iteration is not None

    @property
    def is_detailed(self) -> bool:
        """Returns whether this is a single `### Iteration N` entry."""
        return self.iteration is not None and self.last_iteration is None


@dataclass(frozen=True)
class RawSection:
    """A section the runner reads but never rewrites as a whole (prose, unknown, preamble).

    Attributes:
      key: the normalised heading ('' for the text before the first heading).
      text: the exact source text.
    """

    key: str
    text: str


@dataclass(frozen=True)
class MachineSection:
    """The Machine State section split around its table.

    Attributes:
      key: the normalised heading.
      head: the heading and the text before the table.
      table: the table lines, as read or as last rendered.
      tail: the text after the table.
      machine: the values the table holds.
      extra_lines: (field, value, source line) of each unknown row, to re-emit unchanged rows as written.
    """

    key: str
    head: str
    table: str
    tail: str
    machine: MachineState
    extra_lines: tuple[tuple[str, str, str], ...] = ()

    @property
    def text(self) -> str:
        """Returns the section's text."""
        return self.head + self.table + self.tail


@dataclass(frozen=True)
class HistorySection:
    """The Iteration History section split into its entries.

    Attributes:
      key: the normalised heading.
      head: the heading, intro, marker and placeholder: everything before the first entry.
      entries: the `### ` entries, newest first.
      tail: trailing blank lines and `---` separators after the last entry.
    """

    key: str
    head: str
    entries: tuple[HistoryEntry, ...]
    tail: str

    @property
    def text(self) -> str:
        """Returns the section's text."""
        return self.head + "".join(e.text for e in self.entries) + self.tail


Section = Union[RawSection, MachineSection, HistorySection]


@dataclass(frozen=True)
class StateFile:
    """A parsed state file: its sections in source order, each with its exact text.

    Attributes:
      sections: the preamble and every level-2 section, in file order.
      path: where the file was read from, for messages.
    """

    sections: tuple[Section, ...]
    path: str = "state.md"

    @property
    def machine(self) -> MachineState:
        """Returns the Machine State values."""
        for section in self.sections:
            if isinstance(section, MachineSection):
                return section.machine
        return MachineState()

    @property
    def history(self) -> tuple[HistoryEntry, ...]:
        """Returns the Iteration History entries, newest first."""
        for section in self.sections:
            if isinstance(section, HistorySection):
                return section.entries
        return ()

    @property
    def lessons(self) -> tuple[str, ...]:
        """Returns the Lessons Learned items."""
        return _items(self.section_text(LESSONS))

    @property
    def priorities(self) -> tuple[str, ...]:
        """Returns the Current Priorities items (its paragraphs when it has no list)."""
        return _items(self.section_text(PRIORITIES), paragraphs=True)

    @property
    def foreclosed(self) -> tuple[str, ...]:
        """Returns the Foreclosed Avenues items."""
        return _items(self.section_text(FORECLOSED))

    @property
    def future(self) -> tuple[str, ...]:
        """Returns the Future Directions items."""
        return _items(self.section_text(FUTURE))

    def section_text(self, key: str) -> str | None:
        """Returns the text of the first section whose normalised heading is `key`."""
        for section in self.sections:
            if section.key == key:
                return section.text
        return None


@dataclass(frozen=True)
class IterationRecord:
    """The outcome of one iteration, as the runner records it.

    Attributes:
      status: accepted, rejected or error.
      timestamp: when the iteration finished (aware UTC; naive is read as UTC).
      change: a one-line summary of the change.
      metric: the candidate's metric (None on error).
      commit: the accepted commit's (short) sha.
      notes: what the iteration revealed, or the error.
      lesson: a transferable heuristic to append to Lessons Learned.
      run_url: the CI run, linked from the entry heading.
      baseline: the metric of the unchanged code, measured when Best Metric was empty.
      tokens: model tokens spent, when known.
      cost: model cost in dollars, when known.
      extra: further (label, value) bullets, rendered before Notes.
    """

    status: str
    timestamp: datetime
    change: str
    metric: float | None
    commit: str | None = None
    notes: str = ""
    lesson: str | None = None
    run_url: str | None = None
    baseline: float | None = None
    tokens: int | None = None
    cost: float | None = None
    extra: tuple[tuple[str, str], ...] = ()


# ---------------------------------------------------------------- creating and reading


def new_state(name: str, goal: str, metric: str, direction: str, target_metric: float | None) -> StateFile:
    """Returns the state of a program that has never run, rendered from the skeleton."""
    _check_direction(direction)
    machine = MachineState(metric_direction=direction, target_metric=target_metric, branch=f"autoloop/{name}")
    text = render(
        "state.md.j2",
        name=name,
        goal=_trim(_one_line(goal.strip().split("\n\n")[0]), SUMMARY_LIMIT) or "—",
        metric=metric,
        direction=direction,
        branch=machine.branch,
        rows=_table_rows(machine, ()),
    )
    return parse_state(text, f"{name}.md")


def load_state(
    text: str | None, path: str, *, name: str, goal: str, metric: str, direction: str, target_metric: float | None
) -> StateFile:
    """Returns the parsed state, or a fresh one when the file is absent or empty (a first run)."""
    if text is None or not text.strip():
        return replace(new_state(name, goal, metric, direction, target_metric), path=path)
    return parse_state(text, path)


def parse_state(text: str, path: str = "state.md") -> StateFile:
    """Parses a state file; raises StateError naming the line when it cannot be trusted."""
    if not text.strip():
        raise StateError("the state file is empty; delete it to start the program afresh", path, 1)
    _check_line_breaks(text, path)
    sections: list[Section] = []
    seen: dict[str, int] = {}
    for found in md.split_sections(text, 2):
        if found.key in (MACHINE, HISTORY) and found.key in seen:
            raise StateError(
                f"a second '{found.heading.text if found.heading else ''}' section (the first is at line "
                f"{seen[found.key]}); merge them into one",
                path,
                found.start + 1,
            )
        seen.setdefault(found.key, found.start + 1)
        sections.append(_parse_section(found, path))
    if MACHINE not in seen:
        raise StateError(
            "no '## ⚙️ Machine State' section, so pause and completion cannot be read; "
            "restore the section (see the state template) or delete the file to start afresh",
            path,
            1,
        )
    return StateFile(tuple(sections), path)


def render_state(state: StateFile) -> str:
    """Returns the file text: every section's text, in order."""
    return "".join(section.text for section in state.sections)


def _check_line_breaks(text: str, path: str) -> None:
    found = _ODD_BREAKS_RE.search(text)
    if found:
        line = text.count("\n", 0, found.start()) + 1
        raise StateError(
            f"unusual line-break character U+{ord(found.group()):04X}; replace it with a newline", path, line
        )


def _parse_section(found: md.Section, path: str) -> Section:
    if found.key == MACHINE:
        return _parse_machine_section(found, path)
    if found.key == HISTORY:
        return _parse_history_section(found)
    return RawSection(found.key, found.text)


# ---------------------------------------------------------------- Machine State table


def _parse_machine_section(found: md.Section, path: str) -> MachineSection:
    lines = found.text.splitlines(keepends=True)
    start = next((i for i in range(1, len(lines)) if lines[i].lstrip().startswith("|")), None)
    if start is None:
        raise StateError(
            "the Machine State section has no `| Field | Value |` table; restore it from the state template",
            path,
            found.start + 1,
        )
    end = start
    while end < len(lines) and lines[end].lstrip().startswith("|"):
        end += 1
    table_lines = lines[start:end]
    rows = _table_cells(table_lines, path, found.start + start)
    machine, extra_lines = _read_rows(rows, path)
    head, tail = "".join(lines[:start]), "".join(lines[end:])
    return MachineSection(found.key, head, "".join(table_lines), tail, machine, extra_lines)


def _table_cells(lines: list[str], path: str, first: int) -> list[tuple[str, str, str, int]]:
    """Returns (field, value, source line, 1-based line) of each body row, checking the table's shape."""
    if len(lines) < 2 or not _DELIMITER_RE.match(lines[1]):
        at = first + (2 if len(lines) >= 2 else 1)
        raise StateError("the Machine State table has no `|-------|-------|` line under its header", path, at)
    for i, line in enumerate(lines):
        count = len(_split_cells(line))
        if count != 2:
            what = "the Machine State table's header" if i < 2 else "this Machine State row"
            raise StateError(
                f"{what} has {count} cells, expected 2 (`| Field | Value |`); fix the row "
                "(write a literal `|` as `\\|`)",
                path,
                first + i + 1,
            )
    parsed = md.tables("".join(lines))
    if len(parsed) != 1 or len(parsed[0].rows) != len(lines) - 2:
        raise StateError("the Machine State table cannot be read as a markdown table", path, first + 1)
    return [
        (row.cells[0], row.cells[1], lines[i + 2].rstrip("\r\n"), first + i + 3)
        for i, row in enumerate(parsed[0].rows)
    ]


def _split_cells(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return _CELL_SPLIT_RE.split(body)


def _read_rows(
    rows: list[tuple[str, str, str, int]], path: str
) -> tuple[MachineState, tuple[tuple[str, str, str], ...]]:
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    extra: list[tuple[str, str, str]] = []
    for label, value, source, line in rows:
        key = re.sub(r"[\s_\-]+", "_", label.strip().lower())
        if key not in _FIELDS:
            extra.append((label, value, source))
            continue
        if key in lines:
            raise StateError(f"'{label}' appears twice (also at line {lines[key]}); keep one row", path, line)
        lines[key] = line
        values[key] = _read_value(key, label, value, path, line)
    machine = MachineState(**values, extra=tuple((label, value) for label, value, _ in extra))
    return machine, tuple(extra)


def _read_value(key: str, label: str, value: str, path: str, line: int) -> Any:
    text = value.strip()
    if text in ("", "—", "–", "-"):
        return getattr(MachineState(), key)
    reader, expected = _FIELDS[key][1], _FIELDS[key][2]
    try:
        return reader(text)
    except ValueError:
        raise StateError(f"'{label}' is '{text}', which is not {expected}; correct the value", path, line) from None


def _read_time(text: str) -> datetime:
    iso = re.sub(r"\s*(?:Z|UTC)$", "+00:00", text, flags=re.IGNORECASE)
    try:
        when = datetime.fromisoformat(iso)
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return when.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        raise ValueError(text) from None


def _read_count(text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,12}", text):
        raise ValueError(text)
    return int(text)


def _read_float(text: str) -> float:
    try:
        number = float(text)
    except (ValueError, OverflowError):
        raise ValueError(text) from None
    if not math.isfinite(number):
        raise ValueError(text)
    return number


def _read_bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(text)
    return text.lower() == "true"


def _read_direction(text: str) -> str:
    if text.lower() not in DIRECTIONS:
        raise ValueError(text)
    return text.lower()


def _read_ref(text: str) -> str:
    number = re.fullmatch(r"#?\s*([0-9]+)", text)
    return f"#{number.group(1)}" if number else text


def _read_statuses(text: str) -> tuple[str, ...]:
    statuses = tuple(s.strip().lower() for s in text.split(",") if s.strip())
    if any(s not in STATUSES for s in statuses):
        raise ValueError(text)
    return statuses


def _read_text(text: str) -> str:
    return text


# key -> (label, reader, what the reader expects); the order is the table's row order.
_FIELDS: dict[str, tuple[str, Callable[[str], Any], str]] = {
    "last_run": ("Last Run", _read_time, "an ISO timestamp such as 2026-11-21T16:40:00Z"),
    "iteration_count": ("Iteration Count", _read_count, "a whole number"),
    "best_metric": ("Best Metric", _read_float, "a number"),
    "initial_metric": ("Initial Metric", _read_float, "a number"),
    "target_metric": ("Target Metric", _read_float, "a number"),
    "metric_direction": ("Metric Direction", _read_direction, "`higher` or `lower`"),
    "branch": ("Branch", _read_text, "a branch name"),
    "pr": ("PR", _read_ref, "a PR number"),
    "issue": ("Issue", _read_ref, "an issue number"),
    "paused": ("Paused", _read_bool, "`true` or `false`"),
    "pause_reason": ("Pause Reason", _read_text, "text"),
    "completed": ("Completed", _read_bool, "`true` or `false`"),
    "completed_reason": ("Completed Reason", _read_text, "text"),
    "consecutive_errors": ("Consecutive Errors", _read_count, "a whole number"),
    "recent_statuses": ("Recent Statuses", _read_statuses, "a comma-separated list of " + ", ".join(STATUSES)),
}


def with_machine(state: StateFile, machine: MachineState) -> StateFile:
    """Returns the state with new Machine State values; only the table lines are rewritten."""
    sections = list(state.sections)
    for i, section in enumerate(sections):
        if isinstance(section, MachineSection):
            rows = _table_rows(machine, section.extra_lines)
            table = _macro("machine_table", rows=rows)
            sections[i] = replace(section, table=_end_line(table), machine=machine)
    return replace(state, sections=tuple(sections))


def _table_rows(machine: MachineState, extra_lines: tuple[tuple[str, str, str], ...]) -> list[dict[str, Any]]:
    rows = [
        {"label": label, "value": _format_field(key, getattr(machine, key)), "raw": None}
        for key, (label, _, _) in _FIELDS.items()
    ]
    for label, value in machine.extra:
        raw = next((line for l, v, line in extra_lines if (l, v) == (label, value)), None)
        rows.append({"label": _cell(label), "value": _cell(value), "raw": raw})
    return rows


def _format_field(key: str, value: Any) -> str:
    if value is None or value == ():
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return _utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, tuple):
        return ", ".join(value)
    if key == "branch":
        return f"`{value}`"
    return _cell(str(value))


def format_number(value: float) -> str:
    """Returns a number as the shortest text that reads back the same (`3` for 3.0, `0.364237`)."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _cell(text: str) -> str:
    """Returns text as a table cell that reads back as the same text (markup escaped only when it would not)."""
    value = _one_line(text)
    plain = value.replace("|", "\\|")
    if not _MARKUP_RE.search(value) or _cell_value(plain) == value:
        return plain
    return _MARKUP_RE.sub(r"\\\1", value).replace("|", "\\|")


def _cell_value(cell: str) -> str | None:
    found = md.tables(f"| a | b |\n|---|---|\n| x | {cell} |\n")
    return found[0].rows[0].cells[1] if found and found[0].rows else None


# ---------------------------------------------------------------- Iteration History


def _parse_history_section(found: md.Section) -> HistorySection:
    lines = found.text.splitlines(keepends=True)
    titles = {h.line: h.text for h in md.headings(found.text) if h.level == 3}
    cuts = sorted(titles)
    end = _tail_start(lines, max(cuts, default=0) + 1)
    bounds = list(zip(cuts, [*cuts[1:], end]))
    entries = tuple(_parse_entry("".join(lines[a:b]), titles[a]) for a, b in bounds)
    head = "".join(lines[: cuts[0] if cuts else end])
    return HistorySection(found.key, head, entries, "".join(lines[end:]))


def _tail_start(lines: list[str], floor: int) -> int:
    end = len(lines)
    while end > floor and (not lines[end - 1].strip() or _BREAK_RE.fullmatch(lines[end - 1].strip())):
        end -= 1
    return end


def _parse_entry(text: str, title: str | None = None) -> HistoryEntry:
    """Reads one `### ` entry: its numbers from the heading, status/metric/change from the bullets."""
    if title is None:
        found = md.headings(text)
        title = found[0].text if found else ""
    ranged = _RANGE_RE.match(title)
    if ranged:
        return _parse_range(text, int(ranged.group(1)), int(ranged.group(2)), ranged.group(3))
    single = _ITERATION_RE.match(title)
    if not single:
        return HistoryEntry(None, None, None, text)
    bullets = _bullets(text)
    return HistoryEntry(
        iteration=int(single.group(1)),
        last_iteration=None,
        status=_read_status(bullets.get("status", "")),
        text=text,
        timestamp=_read_when(title),
        metric=_first_number(bullets.get("metric", "")),
        change=bullets.get("change"),
    )


def _parse_range(text: str, first: int, last: int, rest: str) -> HistoryEntry:
    counts = tuple(int(m.group(1)) if m else 0 for m in (r.search(rest) for r in _COUNT_RES))
    metrics = _RANGE_METRIC_RE.search(rest)
    if metrics:
        low, high, summary = _number(metrics.group(1)), _number(metrics.group(2)), rest[metrics.end() :]
    else:
        low = high = None
        summary = rest.split(":", 1)[1] if ":" in rest else ""
    return HistoryEntry(
        iteration=first,
        last_iteration=last,
        status=None,
        text=text,
        metric=high,
        first_metric=low,
        counts=(counts[0], counts[1], counts[2]),
        summary=summary.strip(),
    )


def _bullets(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for item, _ in md.list_items(text):
        label, sep, value = item.partition(":")
        if sep:
            found.setdefault(label.strip().lower(), value.strip())
    return found


def _read_status(text: str) -> str | None:
    lowered = re.sub(r"[\s_]+", "-", text.lower())
    for status in ("ci-fix-exhausted", "pending-ci", "accepted", "rejected", "error"):
        if status in lowered:
            return status
    for mark, status in (("✅", "accepted"), ("❌", "rejected"), ("⚠", "error")):
        if mark in text:
            return status
    return None


def _read_when(title: str) -> datetime | None:
    found = _WHEN_RE.search(title)
    if not found:
        return None
    year, month, day, hour, minute, second = (int(p) for p in found.groups(default="0"))
    try:
        return datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
    except ValueError:
        return None


def _first_number(text: str) -> float | None:
    found = _NUMBER_RE.search(text)
    return _number(found.group()) if found else None


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def _history_index(state: StateFile) -> int | None:
    return next((i for i, s in enumerate(state.sections) if isinstance(s, HistorySection)), None)


def _get_history(state: StateFile) -> HistorySection:
    index = _history_index(state)
    assert index is not None
    history = state.sections[index]
    assert isinstance(history, HistorySection)
    return history


def _set_history(state: StateFile, history: HistorySection) -> StateFile:
    index = _history_index(state)
    assert index is not None
    sections = list(state.sections)
    sections[index] = history
    return replace(state, sections=tuple(sections))


def _prepend_entry(state: StateFile, entry_text: str) -> StateFile:
    state = _ensure_section(state, HISTORY)
    history = _get_history(state)
    head = "".join(line for line in _end_line(history.head).splitlines(True) if not _NO_ITERATIONS_RE.match(line))
    text = entry_text + ("\n" if history.entries else "")
    entries = (_parse_entry(text), *history.entries)
    return _set_history(state, replace(history, head=head, entries=entries))


# ---------------------------------------------------------------- prose sections


def _items(text: str | None, paragraphs: bool = False) -> tuple[str, ...]:
    if not text:
        return ()
    items = [item for item, _ in md.list_items(text) if not _is_placeholder(item)]
    if not items and paragraphs:
        blocks = md.parse_blocks(text)
        found = (md.inline_text(b.get("children", [])) for b in blocks if b["type"] == "paragraph")
        items = [item for item in found if item and not _is_placeholder(item)]
    return tuple(items)


def _is_placeholder(item: str) -> bool:
    return bool(_PLACEHOLDER_RE.match(item.replace("*", "").replace("_", " ").strip()))


def _normalize_item(item: str) -> str:
    text = re.sub(r"[*_`]", "", item).lower()
    return " ".join(text.split()).rstrip(".;!")


def add_lesson(state: StateFile, lesson: str) -> StateFile:
    """Returns the state with a lesson appended to Lessons Learned, unless it is already there."""
    return add_item(state, LESSONS, lesson)


def add_item(state: StateFile, key: str, item: str) -> StateFile:
    """Returns the state with `- item` appended to the list of a prose section (created if missing)."""
    if key not in _SECTION_MACROS or key == HISTORY:
        raise ValueError(f"{key!r} is not a prose section of the state file")
    item = _one_line(item)
    existing = {_normalize_item(i) for i in _items(state.section_text(key))}
    if not item or _normalize_item(item) in existing:
        return state
    state = _ensure_section(state, key)
    sections = list(state.sections)
    index = next(i for i, s in enumerate(sections) if s.key == key)
    sections[index] = RawSection(key, _append_bullet(sections[index].text, _escape_block_start(item)))
    return replace(state, sections=tuple(sections))


def _escape_block_start(item: str) -> str:
    """Returns the item with a leading block marker escaped, so `- <item>` stays one plain list item."""
    ordered = re.match(r"\d{1,9}(?=[.)](?:\s|$))", item)
    if ordered:
        return f"{ordered.group()}\\{item[ordered.end():]}"
    return "\\" + item if _ITEM_BLOCK_RE.match(item) else item


def _append_bullet(text: str, item: str) -> str:
    lines = text.splitlines(keepends=True)
    # Nested items sharing a line with their parent shift list_items' line numbers; stay inside the text.
    listed = [(found, min(line, len(lines) - 1)) for found, line in md.list_items(text)]
    real = [line for found, line in listed if not _is_placeholder(found)]
    empty = {line for found, line in listed if _is_placeholder(found) and _PLACEHOLDER_ITEM_RE.match(lines[line])}
    insert = [f"- {item}\n"]
    if real:
        at = _list_end(lines, max(real))
    elif empty:
        at = min(empty)
    else:
        at = _content_end(lines)
        if lines[at - 1].strip():
            insert.insert(0, "\n")
    lines[at - 1] = _end_line(lines[at - 1])
    kept = [line for i, line in enumerate(lines) if i not in empty]
    at -= sum(1 for i in empty if i < at)
    return "".join(kept[:at] + insert + kept[at:])


def _list_end(lines: list[str], last_item: int) -> int:
    """Returns the index after the last line of the list item starting at `last_item`."""
    end, blank = last_item + 1, False
    for i in range(last_item + 1, len(lines)):
        line = lines[i]
        if not line.strip():
            blank = True
        elif line[0] in " \t" or not (blank or _BLOCK_START_RE.match(line)):
            end, blank = i + 1, False
        else:
            break
    return end


def _content_end(lines: list[str]) -> int:
    end = len(lines)
    while end > 1 and (not lines[end - 1].strip() or _BREAK_RE.fullmatch(lines[end - 1].strip())):
        end -= 1
    return end


def _ensure_section(state: StateFile, key: str) -> StateFile:
    """Returns the state with a section for `key`; a missing one is added from the skeleton, logged."""
    if state.section_text(key) is not None:
        return state
    skeleton = _macro(_SECTION_MACROS[key])
    sections = list(state.sections)
    at = _history_index(state)
    if at is not None:
        sections.insert(at, RawSection(key, skeleton + "\n---\n\n"))
    else:
        sections[-1] = _append_text(sections[-1], _separator_after(sections[-1].text))
        found = md.split_sections(skeleton)[-1]
        sections.append(_parse_history_section(found) if key == HISTORY else RawSection(key, skeleton))
    logger.info("%s: added the missing '%s' section", state.path, key)
    return replace(state, sections=tuple(sections))


def _separator_after(text: str) -> str:
    """Returns what to append to the last section so that a new one follows a `---` line."""
    lines = text.splitlines(keepends=True)
    newline = "" if text.endswith(("\n", "\r")) else "\n"
    if any(_BREAK_RE.fullmatch(line.strip()) for line in lines[_content_end(lines) :]):
        return newline + ("" if (text + newline).endswith("\n\n") else "\n")
    return newline + "\n---\n\n"


def _append_text(section: Section, suffix: str) -> Section:
    if isinstance(section, RawSection):
        return replace(section, text=section.text + suffix)
    return replace(section, tail=section.tail + suffix)


# ---------------------------------------------------------------- updates


def is_improvement(new: float, best: float | None, direction: str, min_delta: float = 0.0) -> bool:
    """Returns whether `new` beats `best` strictly, by at least `min_delta`; anything beats no best."""
    _check_direction(direction)
    if best is None:
        return True
    gain = new - best if direction == "higher" else best - new
    return gain > 0 and gain >= min_delta


def target_reached(best: float | None, target: float | None, direction: str) -> bool:
    """Returns whether the best metric reaches the target (>= for higher, <= for lower)."""
    if best is None or target is None:
        return False
    return best >= target if direction == "higher" else best <= target


def apply_iteration(
    state: StateFile,
    record: IterationRecord,
    *,
    direction: str,
    target_metric: float | None,
    min_delta: float = 0.0,
    budget: int = DEFAULT_BUDGET,
) -> StateFile:
    """Returns the state after one iteration: table updated, entry prepended, lesson added, compacted."""
    _check_record(record)
    _check_direction(direction)
    before = _with_baseline(state.machine, record.baseline)
    after = _advance(before, record, direction, target_metric, min_delta)
    state = with_machine(state, after)
    state = _prepend_entry(state, _entry_text(record, after.iteration_count, before.best_metric))
    if record.lesson:
        state = add_lesson(state, record.lesson)
    return compact(state, budget)


def _check_record(record: IterationRecord) -> None:
    if record.status not in RECORD_STATUSES:
        raise ValueError(f"record status {record.status!r} is not one of {RECORD_STATUSES}")
    if record.status == "accepted" and record.metric is None:
        raise ValueError("an accepted record needs its metric")
    for value in (record.metric, record.baseline):
        if value is not None and not math.isfinite(value):
            raise ValueError(f"metric {value!r} is not a finite number")


def _check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"metric direction {direction!r} is not one of {DIRECTIONS}")


def _with_baseline(machine: MachineState, baseline: float | None) -> MachineState:
    if baseline is None:
        return machine
    if machine.initial_metric is None:
        machine = replace(machine, initial_metric=baseline)
    if machine.best_metric is None:
        machine = replace(machine, best_metric=baseline)
    return machine


def _advance(
    machine: MachineState, record: IterationRecord, direction: str, target: float | None, min_delta: float
) -> MachineState:
    machine = replace(
        machine,
        iteration_count=machine.iteration_count + 1,
        last_run=_utc(record.timestamp).replace(microsecond=0),
        recent_statuses=(*machine.recent_statuses, record.status)[-RECENT_LIMIT:],
        metric_direction=direction,
        target_metric=target,
    )
    if record.status == "accepted":
        assert record.metric is not None
        return _accept(machine, record.metric, direction, target, min_delta)
    if record.status == "error":
        return _count_error(machine, record)
    return machine


def _accept(
    machine: MachineState, metric: float, direction: str, target: float | None, min_delta: float
) -> MachineState:
    best = machine.best_metric
    if is_improvement(metric, best, direction, min_delta):
        best = metric
    else:
        # A concurrent runner may have recorded a better best meanwhile; never move the best backwards.
        logger.warning("accepted metric %s does not beat the recorded best %s; keeping the best", metric, best)
    machine = replace(machine, best_metric=best, consecutive_errors=0, paused=False, pause_reason=None)
    if target_reached(best, target, direction):
        assert best is not None and target is not None
        reason = f"target metric {format_number(target)} reached with value {format_number(best)}"
        machine = replace(machine, completed=True, completed_reason=reason)
    return machine


def _count_error(machine: MachineState, record: IterationRecord) -> MachineState:
    errors = machine.consecutive_errors + 1
    machine = replace(machine, consecutive_errors=errors)
    if errors >= 3:
        summary = _trim(_one_line(record.notes) or _one_line(record.change) or "no details", REASON_LIMIT)
        machine = replace(machine, paused=True, pause_reason=f"{errors} consecutive errors: {summary}")
    return machine


def _entry_text(record: IterationRecord, iteration: int, previous_best: float | None) -> str:
    return render(
        "history_entry.md.j2",
        iteration=iteration,
        when=_utc(record.timestamp).strftime("%Y-%m-%d %H:%M UTC"),
        run_url=record.run_url,
        status_label=_STATUS_LABELS[record.status],
        change=_one_line(record.change) or "—",
        metric=_metric_text(record.metric, previous_best),
        commit=record.commit if record.status == "accepted" else None,
        cost=_cost_text(record.tokens, record.cost),
        extra=[(_one_line(label), _one_line(value)) for label, value in record.extra],
        notes=_one_line(record.notes),
    )


def _metric_text(metric: float | None, previous_best: float | None) -> str:
    if metric is None:
        return ""
    if previous_best is None:
        return format_number(metric)
    # Rounding to 12 digits hides float noise such as 0.52 - 0.49 = 0.030000000000000027.
    delta = float(f"{metric - previous_best:.12g}")
    signed = ("-" if delta < 0 else "+") + format_number(abs(delta))
    return f"{format_number(metric)} (previous best: {format_number(previous_best)}, delta: {signed})"


def _cost_text(tokens: int | None, cost: float | None) -> str:
    parts = []
    if tokens is not None:
        parts.append(f"{tokens} tokens")
    if cost is not None:
        parts.append(f"${cost:.4f}" if cost < 1 else f"${cost:.2f}")
    return ", ".join(parts)


# ---------------------------------------------------------------- compaction


def compact(state: StateFile, budget: int = DEFAULT_BUDGET) -> StateFile:
    """Returns the state with old history folded: 10 detailed entries kept (5 above 80 % of the budget)."""
    if _history_index(state) is None:
        return state
    keep = KEEP_DETAILED_TIGHT if _size(state) > TIGHT_FRACTION * budget else KEEP_DETAILED
    state = _map_history(state, lambda entries: _fold_old(entries, keep))
    if _size(state) > budget:
        state = _map_history(state, _merge_ranges)
    if _size(state) > budget:
        logger.warning(
            "%s: %d bytes after compaction, over the %d-byte budget; shorten the prose sections",
            state.path,
            _size(state),
            budget,
        )
    return state


def _size(state: StateFile) -> int:
    return len(render_state(state).encode("utf-8"))


def _map_history(
    state: StateFile, change: Callable[[tuple[HistoryEntry, ...]], tuple[HistoryEntry, ...]]
) -> StateFile:
    history = _get_history(state)
    entries = change(history.entries)
    return state if entries == history.entries else _set_history(state, replace(history, entries=entries))


def _fold_old(entries: tuple[HistoryEntry, ...], keep: int) -> tuple[HistoryEntry, ...]:
    """Folds the detailed entries beyond the newest `keep` (and the range right after them) into one range."""
    old = [i for i, e in enumerate(entries) if e.is_detailed][keep:]
    if not old:
        return entries
    low, high = old[0], old[-1]
    if high + 1 < len(entries) and entries[high + 1].is_range:
        high += 1
    span = entries[low : high + 1]
    members = [e for e in span if e.is_detailed or e.is_range]
    others = tuple(e for e in span if not (e.is_detailed or e.is_range))
    rest = others + entries[high + 1 :]
    return (*entries[:low], _range_entry(members, last=not rest), *rest)


def _merge_ranges(entries: tuple[HistoryEntry, ...]) -> tuple[HistoryEntry, ...]:
    """Merges every range entry into one, at the place of the newest range."""
    ranges = [i for i, e in enumerate(entries) if e.is_range]
    if len(ranges) < 2:
        return entries
    kept = [e for i, e in enumerate(entries) if i not in ranges[1:]]
    at = ranges[0]
    kept[at] = _range_entry([entries[i] for i in ranges], last=at == len(kept) - 1)
    return tuple(kept)


def _range_entry(members: list[HistoryEntry], last: bool) -> HistoryEntry:
    chrono = sorted(members, key=lambda e: (e.iteration or 0, e.last_iteration or 0))
    counts = [0, 0, 0]
    metrics: list[float] = []
    summaries: list[str] = []
    for entry in chrono:
        _tally(entry, counts, metrics, summaries)
    summary = _trim_front("; ".join(summaries), SUMMARY_LIMIT) or _NO_ACCEPTED
    heading = _macro(
        "range_heading",
        first=min(e.iteration or 0 for e in chrono),
        last=max(e.last_iteration or e.iteration or 0 for e in chrono),
        accepted=counts[0],
        rejected=counts[1],
        errors=counts[2],
        metrics=(format_number(metrics[0]), format_number(metrics[-1])) if metrics else None,
        summary=summary,
    )
    return _parse_entry(_end_line(heading) + ("" if last else "\n"))


def _tally(entry: HistoryEntry, counts: list[int], metrics: list[float], summaries: list[str]) -> None:
    """Adds one folded entry's outcome, accepted metric and summary to the running range."""
    if entry.is_range:
        for i, count in enumerate(entry.counts):
            counts[i] += count
        metrics.extend(m for m in (entry.first_metric, entry.metric) if m is not None)
        if entry.summary and entry.summary != _NO_ACCEPTED:
            summaries.append(entry.summary)
        return
    counts[{"accepted": 0, "rejected": 1}.get(entry.status or "", 2)] += 1
    if entry.status == "accepted":
        if entry.metric is not None:
            metrics.append(entry.metric)
        if entry.change and entry.change != "—":
            summaries.append(entry.change)


# ---------------------------------------------------------------- text helpers


def _macro(name: str, **context: Any) -> str:
    module = environment().get_template(_PARTS_TEMPLATE).module
    return str(getattr(module, name)(**context))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _trim(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _trim_front(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :].lstrip()


def _end_line(text: str) -> str:
    return text if not text or text.endswith(("\n", "\r")) else text + "\n"


def _utc(when: datetime) -> datetime:
    if when.tzinfo is None:
        return when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)
