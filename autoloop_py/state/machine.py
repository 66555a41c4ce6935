"""Machine State: the `⚙️ Machine State` table — its values read, rendered and advanced after each iteration."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any, Callable

from autoloop_py import markdown as md
from autoloop_py.errors import StateError
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.parts import (DELIMITER_RE, NO_VALUE, end_line, finite_number, format_number, macro, one_line,
                                     split_cells, trim, utc)

logger = logging.getLogger(__name__)

STATUSES = ("accepted", "rejected", "error", "ci-fix-exhausted", "pending-ci")
DIRECTIONS = ("higher", "lower")
RECENT_LIMIT = 10
REASON_LIMIT = 100
# The history bullets of a held-out evaluation (loop/evaluation/holdout.py): the candidate's value, and the
# incumbent's when it was measured for the comparison. No prompt shows them (history.prompt_text).
HOLDOUT_BULLET = "Holdout"
INCUMBENT_HOLDOUT_BULLET = "Incumbent holdout"
_LEADING_NUMBER_RE = re.compile(r"^\s*`?([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
_MARKUP_RE = re.compile(r"([\\`*_\[\]<>&!~#])")


@dataclass(frozen=True)
class Spend:
    """Model usage added up: tokens and dollars (a day's, when `day` is set).

    Attributes:
      tokens: prompt + completion tokens.
      usd: dollars, as the model's price list gives them (0 when unknown).
      day: the UTC day this spend belongs to (None for the total).
    """

    tokens: int = 0
    usd: float = 0.0
    day: date | None = None

    def plus(self, tokens: int | None, usd: float | None) -> Spend:
        """Returns the spend with one more iteration's usage added."""
        # Rounded as the table writes it, so the values held in memory are those the file reads back.
        return replace(self, tokens=self.tokens + (tokens or 0), usd=round(self.usd + (usd or 0.0), 10))


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
      resumed_at: the Iteration Count when `autoloop resume` last ran (a plateau counts only later statuses);
        None when never resumed (the row is then left out, as upstream's table has no such row).
      spent: the model usage of every iteration recorded (None before any).
      spent_today: the model usage of the day of the last iteration that spent any (UTC).
      holdout_metric: the best's value on the program's held-out evaluation (`evaluation-holdout`), None when
        not measured; never shown to the model.
      best_base: the default-branch commit the best was measured on (None: not known yet).
      stale_reason: why the best no longer holds on today's default branch (None: it holds, or was not re-checked).
      kept_front: under `objectives:`, the raw objective values of the kept candidates (and measured baselines)
        that no other kept one dominates, as (name, value) pairs; acceptance reads it, so it never leaves the file
        when the history is folded (empty, and the row left out, for a program with one metric).
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
    resumed_at: int | None = None
    spent: Spend | None = None
    spent_today: Spend | None = None
    holdout_metric: float | None = None
    best_base: str | None = None
    stale_reason: str | None = None
    kept_front: tuple[tuple[tuple[str, float], ...], ...] = ()
    extra: tuple[tuple[str, str], ...] = ()


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


# ---------------------------------------------------------------- parsing


def parse_machine_section(found: md.Section, path: str) -> MachineSection:
    """Splits the section around its table and reads the rows; raises StateError naming the line."""
    lines = found.text.splitlines(keepends=True)
    start = next((i for i in range(1, len(lines)) if lines[i].lstrip().startswith("|")), None)
    if start is None:
        raise StateError(
            "the Machine State section has no `| Field | Value |` table; restore it from the state template",
            path,
            found.start + 1,
        )
    end = next((i for i in range(start, len(lines)) if not lines[i].lstrip().startswith("|")), len(lines))
    table_lines = lines[start:end]
    rows = _table_cells(table_lines, path, found.start + start)
    machine, extra_lines = _read_rows(rows, path)
    head, tail = "".join(lines[:start]), "".join(lines[end:])
    return MachineSection(found.key, head, "".join(table_lines), tail, machine, extra_lines)


def _table_cells(lines: list[str], path: str, first: int) -> list[tuple[str, str, str, int]]:
    """Returns (field, value, source line, 1-based line) of each body row, checking the table's shape."""
    if len(lines) < 2 or not DELIMITER_RE.match(lines[1]):
        at = first + (2 if len(lines) >= 2 else 1)
        raise StateError("the Machine State table has no `|-------|-------|` line under its header", path, at)
    for i, line in enumerate(lines):
        count = len(split_cells(line))
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


def _read_rows(
    rows: list[tuple[str, str, str, int]], path: str
) -> tuple[MachineState, tuple[tuple[str, str, str], ...]]:
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    extra: list[tuple[str, str, str]] = []
    for label, value, source, line in rows:
        key = _key(label)
        if key not in _FIELDS:
            extra.append((label, value, source))
            continue
        if key in lines:
            raise StateError(f"'{label}' appears twice (also at line {lines[key]}); keep one row", path, line)
        lines[key] = line
        values[key] = _read_value(key, label, value, path, line)
    machine = MachineState(**values, extra=tuple((label, value) for label, value, _ in extra))
    return machine, tuple(extra)


def _key(label: str) -> str:
    return re.sub(r"[\s_\-]+", "_", label.strip().lower())


def _read_value(key: str, label: str, value: str, path: str, line: int) -> Any:
    text = value.strip()
    if text in NO_VALUE:
        return getattr(MachineState(), key)
    reader, expected = _FIELDS[key][1], _FIELDS[key][2]
    try:
        return reader(text)
    except ValueError:
        raise StateError(f"'{label}' is '{text}', which is not {expected}; correct the value", path, line) from None


# ---------------------------------------------------------------- field coercion


def _read_time(text: str) -> datetime:
    iso = re.sub(r"\s*(?:Z|UTC)$", "+00:00", text, flags=re.IGNORECASE)
    try:
        return utc(datetime.fromisoformat(iso))
    except (ValueError, OverflowError):
        raise ValueError(text) from None


def _read_count(text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,12}", text):
        raise ValueError(text)
    return int(text)


def _read_float(text: str) -> float:
    number = finite_number(text)
    if number is None:
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


_SPEND_RE = re.compile(r"^(?:([0-9]{1,15})\s*tokens?)?\s*,?\s*(?:\$\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?))?$")


def _read_spend(text: str) -> Spend:
    found = _SPEND_RE.match(text.strip())
    if not found or not any(found.groups()):
        raise ValueError(text)
    return Spend(int(found.group(1) or 0), float(found.group(2) or 0.0))


def _read_day_spend(text: str) -> Spend:
    day, sep, rest = text.partition(":")
    if not sep:
        raise ValueError(text)
    try:
        when = date.fromisoformat(day.strip())
    except ValueError:
        raise ValueError(text) from None
    return replace(_read_spend(rest), day=when)


def _read_front(text: str) -> tuple[tuple[tuple[str, float], ...], ...]:
    members = []
    for member in text.split(";"):
        pairs = []
        for part in member.split("·"):
            name, _, value = part.strip().rpartition(" ")
            number = finite_number(value)
            if not name.strip() or number is None:
                raise ValueError(text)
            pairs.append((name.strip(), number))
        members.append(tuple(pairs))
    return tuple(members)


# key -> (label, reader, what the reader expects); the order is the table's row order.
_FIELDS: dict[str, tuple[str, Callable[[str], Any], str]] = {
    "last_run": ("Last Run", _read_time, "an ISO timestamp such as 2026-11-21T16:40:00Z"),
    "iteration_count": ("Iteration Count", _read_count, "a whole number"),
    "best_metric": ("Best Metric", _read_float, "a number"),
    "initial_metric": ("Initial Metric", _read_float, "a number"),
    "target_metric": ("Target Metric", _read_float, "a number"),
    "metric_direction": ("Metric Direction", _read_direction, "`higher` or `lower`"),
    "branch": ("Branch", str, "a branch name"),
    "pr": ("PR", _read_ref, "a PR number"),
    "issue": ("Issue", _read_ref, "an issue number"),
    "paused": ("Paused", _read_bool, "`true` or `false`"),
    "pause_reason": ("Pause Reason", str, "text"),
    "completed": ("Completed", _read_bool, "`true` or `false`"),
    "completed_reason": ("Completed Reason", str, "text"),
    "consecutive_errors": ("Consecutive Errors", _read_count, "a whole number"),
    "recent_statuses": ("Recent Statuses", _read_statuses, "a comma-separated list of " + ", ".join(STATUSES)),
    "resumed_at": ("Resumed At", _read_count, "the Iteration Count at which the program was resumed"),
    "spent": ("Spent", _read_spend, "model usage such as `1234 tokens, $0.05`"),
    "spent_today": ("Spent Today", _read_day_spend, "a day's model usage such as `2026-11-24: 1234 tokens, $0.05`"),
    "holdout_metric": ("Holdout Metric", _read_float, "a number"),
    "best_base": ("Best Base", str, "a commit sha"),
    "stale_reason": ("Stale Reason", str, "text"),
    "kept_front": ("Kept Front", _read_front, "objective values such as `score 3 · cost 3; score 4 · cost 5`"),
}
# Rows written only once there is something in them, so a table without them stays as upstream writes it.
_OPTIONAL = frozenset(
    {"resumed_at", "spent", "spent_today", "holdout_metric", "best_base", "stale_reason", "kept_front"}
)


# ---------------------------------------------------------------- rendering


def with_values(section: MachineSection, machine: MachineState) -> MachineSection:
    """Returns the section holding new values; only its table lines are re-rendered."""
    table = end_line(macro("machine_table", rows=table_rows(machine, section.extra_lines)))
    # The unknown rows as now written, as a parse of the new text would hold them.
    rows = _table_cells(table.splitlines(keepends=True), "", 0)
    extra_lines = tuple((label, value, source) for label, value, source, _ in rows if _key(label) not in _FIELDS)
    return replace(section, table=table, machine=machine, extra_lines=extra_lines)


def table_rows(
    machine: MachineState, extra_lines: tuple[tuple[str, str, str], ...] = ()
) -> list[dict[str, Any]]:
    """Returns the rows for the `machine_table` macro: known fields in order, then unknown rows as written."""
    rows = [
        {"label": label, "value": _format_field(key, getattr(machine, key)), "raw": None}
        for key, (label, _, _) in _FIELDS.items()
        if key not in _OPTIONAL or getattr(machine, key) not in (None, ())
    ]
    for label, value in machine.extra:
        raw = next((line for l, v, line in extra_lines if (l, v) == (label, value)), None)
        rows.append({"label": _cell(label), "value": _cell(value), "raw": raw})
    return rows


def _format_field(key: str, value: Any) -> str:
    if value is None or value == ():
        return "—"
    if key == "kept_front":  # `score 3 · cost 3; score 4 · cost 5`
        return _cell("; ".join(" · ".join(f"{name} {format_number(v)}" for name, v in member) for member in value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, tuple):
        return ", ".join(value)
    if isinstance(value, Spend):
        # Ten decimals: a sum of many small costs must read back without drifting.
        usage = f"{value.tokens} tokens, ${format_number(round(value.usd, 10))}"
        return f"{value.day.isoformat()}: {usage}" if value.day else usage
    if key == "branch":
        return f"`{value}`"
    return _cell(str(value))


def _cell(text: str) -> str:
    """Returns text as a table cell that reads back as the same text (markup escaped only when it would not)."""
    value = one_line(text)
    plain = value.replace("|", "\\|")
    if not _MARKUP_RE.search(value):
        return plain
    found = md.tables(f"| a | b |\n|---|---|\n| x | {plain} |\n")
    if found and found[0].rows and found[0].rows[0].cells[1] == value:
        return plain
    return _MARKUP_RE.sub(r"\\\1", value).replace("|", "\\|")


# ---------------------------------------------------------------- decisions


def is_improvement(new: float, best: float | None, direction: str, min_delta: float = 0.0) -> bool:
    """Returns whether `new` beats `best` strictly, by at least `min_delta`; anything beats no best."""
    check_direction(direction)
    if best is None:
        return True
    gain = new - best if direction == "higher" else best - new
    return gain > 0 and gain >= min_delta


def check_direction(direction: str) -> None:
    """Raises ValueError unless the direction is `higher` or `lower`."""
    if direction not in DIRECTIONS:
        raise ValueError(f"metric direction {direction!r} is not one of {DIRECTIONS}")


def with_baseline(machine: MachineState, baseline: float | None) -> MachineState:
    """Returns the values with a measured baseline filling an empty Initial Metric and Best Metric."""
    if baseline is None:
        return machine
    if machine.initial_metric is None:
        machine = replace(machine, initial_metric=baseline)
    if machine.best_metric is None:
        machine = replace(machine, best_metric=baseline)
    return machine


def advance(
    machine: MachineState, record: IterationRecord, direction: str, target: float | None, min_delta: float
) -> MachineState:
    """Returns the values after one recorded iteration: counters, best metric, pause and completion."""
    machine = replace(
        machine,
        iteration_count=machine.iteration_count + 1,
        last_run=utc(record.timestamp).replace(microsecond=0),
        recent_statuses=(*machine.recent_statuses, record.status)[-RECENT_LIMIT:],
        metric_direction=direction,
        target_metric=target,
    )
    machine = with_spend(machine, record)
    machine = with_holdout(machine, record)
    if record.status == "accepted":
        assert record.metric is not None
        return accept_metric(machine, record.metric, direction, target, min_delta)
    if record.status == "pending-ci":
        # The best metric moves only once CI passes (ci_gate.reconcile); the candidate itself ran fine.
        return replace(machine, consecutive_errors=0)
    if record.status == "error":
        return _count_error(machine, record)
    return machine


def with_holdout(machine: MachineState, record: IterationRecord) -> MachineState:
    """Returns the values with the held-out value of the best: a kept candidate's, or the incumbent's when measured."""
    values = {label: holdout_value(value) for label, value in record.extra}
    if record.status == "accepted" and HOLDOUT_BULLET in values:  # a failed held-out run leaves the best's unknown
        return replace(machine, holdout_metric=values[HOLDOUT_BULLET])
    if record.status != "accepted" and values.get(INCUMBENT_HOLDOUT_BULLET) is not None:
        return replace(machine, holdout_metric=values[INCUMBENT_HOLDOUT_BULLET])
    return machine


def holdout_value(text: str) -> float | None:
    """Returns the number a holdout bullet opens with (None when it opens with none, e.g. a failed evaluation)."""
    found = _LEADING_NUMBER_RE.match(text)
    return finite_number(found.group(1)) if found else None


def with_spend(machine: MachineState, record: IterationRecord) -> MachineState:
    """Returns the values with the record's tokens and cost added to the total and to its day's spend."""
    if not record.tokens and not record.cost:
        return machine
    day = utc(record.timestamp).date()
    today = machine.spent_today if machine.spent_today and machine.spent_today.day == day else Spend(day=day)
    return replace(
        machine,
        spent=(machine.spent or Spend()).plus(record.tokens, record.cost),
        spent_today=today.plus(record.tokens, record.cost),
    )


def accept_metric(
    machine: MachineState, metric: float, direction: str, target: float | None, min_delta: float = 0.0
) -> MachineState:
    """Returns the values after accepting `metric`: best moved if it improves, errors cleared, completion."""
    best = machine.best_metric
    if is_improvement(metric, best, direction, min_delta):
        best = metric
    else:
        # A concurrent runner may have recorded a better best meanwhile; never move the best backwards.
        logger.warning("accepted metric %s does not beat the recorded best %s; keeping the best", metric, best)
    # A pause stays: only `autoloop resume` clears it (a forced run of a paused program leaves it paused).
    # Without a measured baseline the first accepted metric is the initial one; it is never overwritten.
    initial = metric if machine.initial_metric is None else machine.initial_metric
    machine = replace(machine, best_metric=best, initial_metric=initial, consecutive_errors=0)
    # The target is reached at >= for higher, <= for lower.
    if best is not None and target is not None and (best >= target if direction == "higher" else best <= target):
        reason = f"target metric {format_number(target)} reached with value {format_number(best)}"
        machine = replace(machine, completed=True, completed_reason=reason)
    return machine


def _count_error(machine: MachineState, record: IterationRecord) -> MachineState:
    errors = machine.consecutive_errors + 1
    machine = replace(machine, consecutive_errors=errors)
    if errors >= 3:
        summary = trim(one_line(record.notes) or one_line(record.change) or "no details", REASON_LIMIT)
        machine = replace(machine, paused=True, pause_reason=f"{_errors_text(machine, errors)}: {summary}")
    return machine


def _errors_text(machine: MachineState, errors: int) -> str:
    """Returns how the pause reason counts the errors: consecutive only when no other status came between them.

    As upstream, a rejection does not reset Consecutive Errors (an accepted iteration or a resume does),
    so ⚠️⚠️❌⚠️ pauses too, and the reason must not call those errors consecutive.
    """
    tail = machine.recent_statuses[-errors:]
    if len(tail) == errors and all(status == "error" for status in tail):
        return f"{errors} consecutive errors"
    return f"{errors} errors with no accepted iteration between them"
