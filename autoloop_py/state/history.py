"""Iteration History: the `### ` entries of the state file — parsed, rendered from records, folded into ranges."""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Callable

from autoloop_py import markdown as md
from autoloop_py.render import render
from autoloop_py.state.parts import (
    STATUS_ICONS,
    STATUS_WORDS,
    SUMMARY_LIMIT,
    content_end,
    end_line,
    finite_number,
    format_number,
    macro,
    one_line,
    trim_front,
    utc,
)

RECORD_STATUSES = ("accepted", "rejected", "error", "pending-ci")
# The trailer that carries an iteration's idempotency key in commit messages.
KEY_TRAILER = "Autoloop-Key"
KEEP_DETAILED = 10
KEEP_DETAILED_TIGHT = 5
TIGHT_FRACTION = 0.8

_NO_ACCEPTED = "no accepted changes"
_NO_ITERATIONS_RE = re.compile(r"^\s*[*_]*\(?\s*no iterations yet\.?\s*\)?[*_]*\s*$", re.IGNORECASE)
_ITERATION_RE = re.compile(r"^iteration\s+#?(\d{1,9})\b", re.IGNORECASE)
_RANGE_RE = re.compile(r"^iters?\s+#?(\d{1,9})\s*[-–—]\s*#?(\d{1,9})\b(.*)$", re.IGNORECASE | re.DOTALL)
_WHEN_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?")
_NUMBER_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_COMMENT_RE = re.compile(r"[ \t]*<!--.*?-->[ \t]*(?:\r?\n)?", re.DOTALL)
# The bullets no prompt shows: the commit, spend and model (for people), the held-out evaluation's (`Holdout`,
# `Incumbent holdout`: the model never learns those values), and a note that only restates the Metric bullet.
_UNSHOWN_BULLET_RE = re.compile(
    r"^[ \t]*[-*][ \t]+\*\*(?:(?:Commit|Cost|Model|Model spend|Holdout|Incumbent holdout)\*\*:.*"
    r"|Notes\*\*: (?:metric \S+ did not improve on best .*\(\w+ is better\)|\S+ improved to \S+)[ \t]*)$(?:\r?\n)?",
    re.MULTILINE,
)
_WHEN_HEADING_RE = re.compile(r"^(#+ [^\n]*?) — \d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?(?: UTC)?", re.MULTILINE)
_RUN_LINK_RE = re.compile(r" — \[Run\]\([^)]*\)")
# A commit sha: 7 to 40 hex digits with at least one letter and one digit (so no plain number matches).
_SHA_RE = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
_PREVIOUS_BEST_RE = re.compile(r"previous best:\s*([^,)\s]+)")
_RANGE_METRIC_RE = re.compile(r"\(\s*metrics?\s+([^()]*?)\s*(?:→|->)\s*([^()]*?)\s*\)\s*:?", re.IGNORECASE)
_STATUS_BULLET_RE = re.compile(
    r"^([ \t]*[-*+][ \t]+(?:\*\*|__)?status(?:\*\*|__)?[ \t]*:(?:\*\*|__)?[ \t]*)(.*?)([ \t]*\r?)$",
    re.IGNORECASE | re.MULTILINE,
)
_COUNT_RES = tuple(re.compile(p + r"\s*(\d{1,9})") for p in ("✅", "❌", "⚠\ufe0f?"))
_KEY_RE = re.compile(r"<!--\s*autoloop-key:\s*([A-Za-z0-9_.:-]+)\s*-->")
# The runner's own hidden line stands alone; every text a candidate supplies (change, notes, extra bullets)
# is rendered on one bullet line, so a key it wrote into its summary never starts a line.
_KEY_LINE_RE = re.compile(r"^<!--[ \t]*autoloop-key:[ \t]*([A-Za-z0-9_.:-]+)[ \t]*-->[ \t]*\r?$", re.MULTILINE)


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
      key: the iteration's idempotency key, from the entry's hidden `<!-- autoloop-key: … -->` line.
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
    key: str | None = None

    @property
    def is_range(self) -> bool:
        """Returns whether this is a folded `### Iters A–B` entry."""
        return self.last_iteration is not None

    @property
    def is_detailed(self) -> bool:
        """Returns whether this is a single `### Iteration N` entry."""
        return self.iteration is not None and self.last_iteration is None


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


@dataclass(frozen=True)
class IterationRecord:
    """The outcome of one iteration, as the runner records it.

    Attributes:
      status: accepted, rejected, error, or pending-ci (kept, awaiting the commit's CI checks).
      timestamp: when the iteration finished (aware UTC; naive is read as UTC).
      change: a one-line summary of the change.
      metric: the candidate's metric (None on error).
      commit: the accepted (or pending-ci) commit's sha.
      notes: what the iteration revealed, or the error.
      lesson: a transferable heuristic to append to Lessons Learned.
      run_url: the CI run, linked from the entry heading.
      baseline: the metric of the unchanged code, measured when Best Metric was empty.
      tokens: model tokens spent, when known.
      cost: model cost in dollars, when known.
      extra: further (label, value) bullets, rendered before Notes.
      key: the iteration's idempotency key, so a retried or re-run record is not added twice.
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
    key: str | None = None


# ---------------------------------------------------------------- parsing


def parse_history_section(found: md.Section) -> HistorySection:
    """Splits the section into its head, its `### ` entries and its trailing separators.

    When the section carries the document's parse (md.Section.blocks), the entries' bullets are read from
    it: a file of 15,000 entries is parsed once, not once more per entry.
    """
    lines = found.text.splitlines(keepends=True)
    titles = {h.line: h.text for h in md.section_headings(found) if h.level == 3}
    cuts = sorted(titles)
    end = content_end(lines, max(cuts, default=0) + 1)
    bounds = list(zip(cuts, [*cuts[1:], end]))
    items = _entry_items(found, bounds)
    entries = tuple(parse_entry("".join(lines[a:b]), titles[a], items[i] if items else None)
                    for i, (a, b) in enumerate(bounds))
    head = "".join(lines[: cuts[0] if cuts else end])
    return HistorySection(found.key, head, entries, "".join(lines[end:]))


def _entry_items(found: md.Section, bounds: list[tuple[int, int]]) -> list[list[str]] | None:
    """Returns the list item texts of each entry (lines [a, b) of the section), from the section's block
    tokens; None when the section carries none."""
    if found.blocks is None or found.env is None:
        return None
    lists = [token for token in found.blocks if token["type"] == "list" and "line" in token]
    starts = [token["line"] for token in lists]  # in document order, so sorted
    return [md.list_item_texts(lists[bisect_left(starts, a) : bisect_left(starts, b)], found.env) for a, b in bounds]


def parse_entry(text: str, title: str | None = None, items: list[str] | None = None) -> HistoryEntry:
    """Reads one `### ` entry: its numbers from the heading, status/metric/change from the bullets.

    items: the plain texts of the entry's list items, when its caller has them (else the entry is parsed).
    """
    if title is None:
        found = md.headings(text)
        title = found[0].text if found else ""
    ranged = _RANGE_RE.match(title)
    if ranged:
        return _parse_range(text, int(ranged.group(1)), int(ranged.group(2)), ranged.group(3))
    single = _ITERATION_RE.match(title)
    if not single:
        return HistoryEntry(None, None, None, text)
    bullets = _bullets(text, items)
    return HistoryEntry(
        iteration=int(single.group(1)),
        last_iteration=None,
        status=_read_status(bullets.get("status", "")),
        text=text,
        timestamp=_read_when(title),
        metric=_entry_metric(bullets.get("metric", "")),
        change=bullets.get("change"),
        # The key of the entry's own hidden line (the last one standing alone), never one inside a bullet.
        key=(_KEY_LINE_RE.findall(text) or [None])[-1],
    )


def _parse_range(text: str, first: int, last: int, rest: str) -> HistoryEntry:
    counts = tuple(int(m.group(1)) if m else 0 for m in (r.search(rest) for r in _COUNT_RES))
    metrics = _RANGE_METRIC_RE.search(rest)
    if metrics:
        low, high = finite_number(metrics.group(1)), finite_number(metrics.group(2))
        summary = rest[metrics.end() :]
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


def _bullets(text: str, items: list[str] | None = None) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in items if items is not None else (item for item, _ in md.list_items(text)):
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


def _entry_metric(text: str) -> float | None:
    """Returns the metric of a `**Metric**:` bullet; `— (previous best: 0.5, …)` (an error entry) has none."""
    found = _NUMBER_RE.search(text.split("(", 1)[0])
    return finite_number(found.group()) if found else None


def prompt_text(text: str) -> str:
    """Returns a history entry as a prompt shows it: no hidden key comment, time, run link, sha, nor the bullets of
    its commit, spend, model and held-out evaluation, nor a note that restates its metric.

    They matter to the runner and to people on GitHub, not to the model; in a prompt they only cost tokens.
    """
    text = _UNSHOWN_BULLET_RE.sub("", _COMMENT_RE.sub("", text))
    return _SHA_RE.sub("(commit)", _WHEN_HEADING_RE.sub(r"\1", _RUN_LINK_RE.sub("", text)))


def _previous_best(entry: HistoryEntry) -> float | None:
    """Returns the "previous best" an entry's Metric bullet compares with (None when it shows none)."""
    found = _PREVIOUS_BEST_RE.search(_bullets(entry.text).get("metric", ""))
    return finite_number(found.group(1)) if found else None


# ---------------------------------------------------------------- new entries


def prepend_entry(history: HistorySection, entry_text: str) -> HistorySection:
    """Returns the section with a new newest entry; a `(No iterations yet.)` placeholder line is dropped."""
    head = "".join(line for line in end_line(history.head).splitlines(True) if not _NO_ITERATIONS_RE.match(line))
    text = entry_text + ("\n" if history.entries else "")
    return replace(history, head=head, entries=(parse_entry(text), *history.entries))


def relabel_entry(history: HistorySection, iteration: int, label: str) -> HistorySection:
    """Returns the section with the Status bullet of `Iteration N` set to `label`; the rest stays byte-identical.

    Unchanged when no detailed entry for N (or no Status bullet in it) is left, e.g. after a hand edit.
    """
    for index, entry in enumerate(history.entries):
        if entry.is_detailed and entry.iteration == iteration:
            text = _STATUS_BULLET_RE.sub(lambda m: m.group(1) + one_line(label) + m.group(3), entry.text, count=1)
            entries = list(history.entries)
            entries[index] = parse_entry(text)
            return replace(history, entries=tuple(entries))
    return history


def render_entry(record: IterationRecord, iteration: int, previous_best: float | None) -> str:
    """Renders the `### Iteration N` entry of a record, its metric shown against the previous best."""
    return render(
        "history_entry.md.j2",
        iteration=iteration,
        when=utc(record.timestamp).strftime("%Y-%m-%d %H:%M UTC"),
        run_url=record.run_url,
        status_label=f"{STATUS_ICONS[record.status]} {STATUS_WORDS[record.status]}",
        change=one_line(record.change) or "—",
        metric=_metric_text(record.metric, previous_best),
        commit=record.commit if record.status in ("accepted", "pending-ci") else None,
        cost=_cost_text(record.tokens, record.cost),
        extra=[(one_line(label), one_line(value)) for label, value in record.extra],
        notes=one_line(record.notes),
        key=record.key if record.key and _KEY_RE.fullmatch(f"<!-- autoloop-key: {record.key} -->") else None,
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
    parts = [] if tokens is None else [f"{tokens} tokens"]
    if cost is not None:
        parts.append(f"${cost:.4f}" if cost < 1 else f"${cost:.2f}")
    return ", ".join(parts)


# ---------------------------------------------------------------- compaction


def compact_entries(
    entries: tuple[HistoryEntry, ...], budget: int, size: Callable[[tuple[HistoryEntry, ...]], int]
) -> tuple[HistoryEntry, ...]:
    """Folds old entries: 10 detailed kept (5 above 80 % of the budget), all ranges merged when still over.

    `size` returns the file's size in bytes with the given entries in place.
    """
    keep = KEEP_DETAILED_TIGHT if size(entries) > TIGHT_FRACTION * budget else KEEP_DETAILED
    entries = fold_old(entries, keep)
    return merge_ranges(entries) if size(entries) > budget else entries


def fold_old(entries: tuple[HistoryEntry, ...], keep: int) -> tuple[HistoryEntry, ...]:
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


def merge_ranges(entries: tuple[HistoryEntry, ...]) -> tuple[HistoryEntry, ...]:
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
    metrics: list[tuple[float | None, float]] = []  # per accepted step: (the best before it, the best after it)
    summaries: list[str] = []
    for entry in chrono:
        _tally(entry, counts, metrics, summaries)
    first = (metrics[0][0] if metrics[0][0] is not None else metrics[0][1]) if metrics else None
    summary = trim_front("; ".join(summaries), SUMMARY_LIMIT) or _NO_ACCEPTED
    heading = macro(
        "range_heading",
        first=min(e.iteration or 0 for e in chrono),
        last=max(e.last_iteration or e.iteration or 0 for e in chrono),
        accepted=counts[0],
        rejected=counts[1],
        errors=counts[2],
        metrics=(format_number(first), format_number(metrics[-1][1])) if first is not None else None,
        summary=summary,
    )
    return parse_entry(end_line(heading) + ("" if last else "\n"))


def _tally(
    entry: HistoryEntry, counts: list[int], metrics: list[tuple[float | None, float]], summaries: list[str]
) -> None:
    """Adds one folded entry's outcome, accepted metric (with the best before it) and summary to the running range.

    The range heading then reads `(metric first→best)`: the best before its first accepted iteration
    (that entry's "previous best") and the best after its last one.
    """
    if entry.is_range:
        counts[:] = [total + count for total, count in zip(counts, entry.counts)]
        if entry.metric is not None:
            metrics.append((entry.first_metric, entry.metric))
        if entry.summary and entry.summary != _NO_ACCEPTED:
            summaries.append(entry.summary)
        return
    counts[{"accepted": 0, "rejected": 1}.get(entry.status or "", 2)] += 1
    if entry.status == "accepted":
        if entry.metric is not None:
            metrics.append((_previous_best(entry), entry.metric))
        if entry.change and entry.change != "—":
            summaries.append(entry.change)
