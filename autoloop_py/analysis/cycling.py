"""Cycling: added lines that re-introduce deleted ones (literal, tuning, trivial), run-wide and per lineage.

Line extraction, skeletons, the run-wide classifier and the raw detector follow EvoReplay's `classify_cycles.py`
and `detect_cycling.py` (commit 1773db1) exactly: edits in iteration order, ties in the order of the run's
`programs.jsonl`; a re-add pairs with the first of the most recent same-skeleton removals; the raw detector
counts a line once per edit and, with numbers collapsed, filters and measures the collapsed line. The one
intended difference: the diff's two header lines are dropped by position, so that a C++ line `--x;` or `++x;`
counts as a removed or added line (EvoReplay drops every line starting with `---`/`+++` as a header).
The lineage-restricted variant counts only deletions on the child's own ancestry, as the paper describes.
"""

from __future__ import annotations

import difflib
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence

from autoloop_py.analysis import Node

NUMBER = re.compile(r"[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?")
_LINE_COMMENT = re.compile(r"//.*$")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/")
_NUMERIC_PUNCTUATION = re.compile(r"[=+\-*/()<>,;:{}.|&!~^%?\[\]\s]")
_TRIVIAL_LINES = frozenset({"{", "}", "};", "});", "else {", "else{", "return;"})
_COMMENT_PREFIXES = ("/*", "*/", "*", "//", "#")
_WHITESPACE = re.compile(r"\s+")
MIN_LENGTH = 5
KINDS = ("literal", "tuning", "trivial")
SPAN_BINS: tuple[tuple[str, int, int | None], ...] = (
    ("1", 1, 1), ("2-5", 2, 5), ("6-10", 6, 10), ("11-20", 11, 20), ("21-50", 21, 50), ("51+", 51, None)
)
ROLLING_WINDOW = 5


@dataclass(frozen=True)
class Edit:
    """One parent→child edit with its normalized diff lines (comments stripped; nothing else dropped yet).

    Attributes:
        child_id: the child program.
        parent_id: its parent.
        iteration: the child's iteration_found.
        removed: normalized non-empty lines the edit removed, in diff order.
        added: normalized non-empty lines the edit added, in diff order.
    """

    child_id: str
    parent_id: str
    iteration: int
    removed: tuple[str, ...]
    added: tuple[str, ...]

    def removed_counted(self) -> tuple[str, ...]:
        """Returns the removed lines the three-way classifier counts (not noise, at least MIN_LENGTH characters)."""
        return tuple(line for line in self.removed if not is_noise(line) and len(line) >= MIN_LENGTH)

    def added_counted(self) -> tuple[str, ...]:
        """Returns the added lines the three-way classifier counts (not noise, at least MIN_LENGTH characters)."""
        return tuple(line for line in self.added if not is_noise(line) and len(line) >= MIN_LENGTH)


@dataclass(frozen=True)
class RecycleEvent:
    """An added line that re-introduces an earlier removal with the same skeleton.

    Attributes:
        child_id: the program whose edit added the line.
        iteration: the child's iteration.
        kind: literal, tuning or trivial.
        line: the added line (normalized).
        removed_line: the earlier removed line it matched.
        removed_in: the program whose edit removed it.
        span: the child's iteration minus the removal's.
    """

    child_id: str
    iteration: int
    kind: str
    line: str
    removed_line: str
    removed_in: str
    span: int


class _Removal(NamedTuple):
    iteration: int
    line: str
    node_id: str


def diff_lines(parent: str, child: str) -> tuple[list[str], list[str]]:
    """Returns the raw (removed, added) lines of a zero-context unified diff from parent to child."""
    # The two header lines are dropped by position: a removed C++ line `--i;` would look like a header.
    body = list(difflib.unified_diff(parent.splitlines(), child.splitlines(), n=0, lineterm=""))[2:]
    return [line[1:] for line in body if line.startswith("-")], [line[1:] for line in body if line.startswith("+")]


def normalize(line: str) -> str:
    """Returns the line without `//` and one-line `/*…*/` comments, stripped (Python `#` comments stay)."""
    return _BLOCK_COMMENT.sub("", _LINE_COMMENT.sub("", line)).strip()


def skeleton(line: str) -> str:
    """Returns the line with every number (also digits inside identifiers) replaced by `#`."""
    return NUMBER.sub("#", line)


def is_noise(line: str) -> bool:
    """Returns whether a normalized line is too trivial to count (short, a brace, an include, numbers only)."""
    if len(line) <= 2 or line in _TRIVIAL_LINES or line.startswith("#include"):
        return True
    return not _NUMERIC_PUNCTUATION.sub("", NUMBER.sub("", line))


def is_comment(line: str) -> bool:
    """Returns whether a normalized line is (the start or inside of) a comment."""
    return line.startswith(_COMMENT_PREFIXES)


def classify_pair(added: str, removed: str) -> str:
    """Returns how an added line re-introduces a removed line of the same skeleton."""
    if added == removed:
        return "literal"
    if is_comment(added) or is_comment(removed):
        return "trivial"
    if _WHITESPACE.sub("", added) == _WHITESPACE.sub("", removed):
        return "trivial"
    return "tuning"


def edits_of(nodes: Sequence[Node]) -> tuple[Edit, ...]:
    """Returns the edits of a run in iteration order, ties in the nodes' order (a trace's `programs.jsonl` order).

    A child counts when its parent is in the run and both sources are known and non-empty.
    """
    by_id = {node.id: node for node in nodes}
    edits: list[Edit] = []
    for node in sorted(nodes, key=lambda n: n.iteration):
        parent = by_id.get(node.parent_id) if node.parent_id is not None else None
        if parent is None or not parent.source or not node.source or parent.id == node.id:
            continue
        removed, added = diff_lines(parent.source, node.source)
        edits.append(Edit(node.id, parent.id, node.iteration, _normalized(removed), _normalized(added)))
    return tuple(edits)


def classify_run_wide(edits: Sequence[Edit]) -> tuple[RecycleEvent, ...]:
    """Returns recycling events where the matching removal may lie on any branch (EvoReplay's classifier).

    Edits are taken in iteration order, ties in the given order; a re-add pairs with the most recent earlier
    removal of its skeleton, and among removals at that same iteration with the first one recorded.
    """
    history: dict[str, list[_Removal]] = {}
    events: list[RecycleEvent] = []
    for edit in sorted(edits, key=lambda e: e.iteration):
        for line in edit.removed_counted():
            history.setdefault(skeleton(line), []).append(_Removal(edit.iteration, line, edit.child_id))
        events += _readds(edit, lambda line, key: _latest_before(history.get(key, ()), edit.iteration))
    return tuple(events)


def classify_lineage(edits: Sequence[Edit], nodes: Sequence[Node]) -> tuple[RecycleEvent, ...]:
    """Returns recycling events where the removal lies on the child's own lineage (D(parent))."""
    deleted = _DeletionSets(edits, nodes)
    events: list[RecycleEvent] = []
    for edit in sorted(edits, key=lambda e: (e.iteration, e.child_id)):
        lines, skeletons = deleted.of(edit.parent_id)
        events += _readds(edit, lambda line, key: lines.get(line) or skeletons.get(key))
    return tuple(events)


def _readds(edit: Edit, removal_of: Callable[[str, str], _Removal | None]) -> list[RecycleEvent]:
    """Returns an event per added line that removal_of(line, skeleton) matches, once per skeleton per edit."""
    events: list[RecycleEvent] = []
    credited: set[str] = set()
    for line in edit.added_counted():
        key = skeleton(line)
        removal = removal_of(line, key)
        if key in credited or removal is None:
            continue
        credited.add(key)
        events.append(RecycleEvent(edit.child_id, edit.iteration, classify_pair(line, removal.line), line,
                                   removal.line, removal.node_id, edit.iteration - removal.iteration))
    return events


def raw_events(edits: Sequence[Edit], collapse_numbers: bool = False) -> tuple[int, int]:
    """Returns (recycled, added) lines by the raw detector: a line whose identical line was removed earlier.

    Each distinct line counts once per edit; only lines of at least MIN_LENGTH characters are matched, but every
    kept line counts as added. With numbers collapsed, lines are collapsed first, then filtered and measured.
    """
    def lines(raw: tuple[str, ...]) -> list[str]:
        shown = [skeleton(line) for line in raw] if collapse_numbers else list(raw)
        return [line for line in shown if not is_noise(line)]

    removed_at: dict[str, int] = {}
    recycled = added = 0
    for edit in sorted(edits, key=lambda e: e.iteration):
        for line in lines(edit.removed):
            if len(line) >= MIN_LENGTH:
                removed_at.setdefault(line, edit.iteration)
        new = lines(edit.added)
        added += len(new)
        recycled += sum(1 for line in set(new)
                        if len(line) >= MIN_LENGTH and removed_at.get(line, edit.iteration) < edit.iteration)
    return recycled, added


def kind_counts(events: Iterable[RecycleEvent]) -> dict[str, int]:
    """Returns events per kind, plus `any`."""
    found = Counter(event.kind for event in events)
    counts = {kind: found[kind] for kind in KINDS}
    return {**counts, "any": sum(counts.values())}


def span_stats(events: Sequence[RecycleEvent]) -> dict[str, object]:
    """Returns n, median, mean, min and max of the spans and their counts per bin."""
    spans = [event.span for event in events]
    bins = {label: sum(1 for s in spans if s >= low and (high is None or s <= high)) for label, low, high in SPAN_BINS}
    if not spans:
        return {"n": 0, "median": None, "mean": None, "min": None, "max": None, "bins": bins}
    return {"n": len(spans), "median": statistics.median(spans), "mean": statistics.fmean(spans),
            "min": min(spans), "max": max(spans), "bins": bins}


def _normalized(lines: Iterable[str]) -> tuple[str, ...]:
    return tuple(line for line in (normalize(line) for line in lines) if line)


def _latest_before(removals: Sequence[_Removal], iteration: int) -> _Removal | None:
    """Returns the first recorded of the most recent removals at an iteration strictly below `iteration`."""
    earlier = (removal for removal in removals if removal.iteration < iteration)
    return max(earlier, key=lambda removal: removal.iteration, default=None)  # max keeps the first of equals


_Deleted = tuple[Mapping[str, _Removal], Mapping[str, _Removal]]


class _DeletionSets:
    """D(v): the lines removed on the edges from the root to v, by line and by skeleton (latest wins)."""

    def __init__(self, edits: Sequence[Edit], nodes: Sequence[Node]) -> None:
        self._edits = {edit.child_id: edit for edit in edits}
        self._parents = {node.id: node.parent_id for node in nodes}
        self._memo: dict[str, _Deleted] = {}

    def of(self, node_id: str) -> _Deleted:
        """Returns D(node_id), computed iteratively from the nearest known ancestor down."""
        chain: list[str] = []
        current: str | None = node_id
        while current is not None and current in self._parents and current not in self._memo and current not in chain:
            chain.append(current)
            current = self._parents[current]
        base: _Deleted = self._memo.get(current, ({}, {})) if current is not None else ({}, {})
        for node in reversed(chain):
            base = self._memo[node] = self._extend(base, self._edits.get(node))
        return self._memo.get(node_id, ({}, {}))

    @staticmethod
    def _extend(base: _Deleted, edit: Edit | None) -> _Deleted:
        if edit is None or not edit.removed_counted():
            return base
        lines, skeletons = dict(base[0]), dict(base[1])
        for line in edit.removed_counted():
            removal = _Removal(edit.iteration, line, edit.child_id)
            lines[line] = removal
            skeletons[skeleton(line)] = removal
        return lines, skeletons


@dataclass(frozen=True)
class IterationRate:
    """Recycling among the lines added by the edits of one child iteration.

    Attributes:
        iteration: the child iteration.
        added: counted lines added at that iteration.
        counts: events per kind and `any`.
        fractions: counts divided by max(added, 1), per kind and `any`.
        rolling_any: the trailing mean of fractions['any'] over ROLLING_WINDOW iterations with edits.
    """

    iteration: int
    added: int
    counts: Mapping[str, int]
    fractions: Mapping[str, float]
    rolling_any: float


@dataclass(frozen=True)
class EditCycling:
    """The re-adds of one edit by kind, as EvoReplay's `cycle_classes.programs.csv` lists them.

    Attributes:
        child_id: the child program.
        iteration: its iteration.
        added: its counted added lines.
        literal: re-adds classified literal.
        tuning: re-adds classified tuning.
        trivial: re-adds classified trivial.
    """

    child_id: str
    iteration: int
    added: int
    literal: int
    tuning: int
    trivial: int


@dataclass(frozen=True)
class CyclingSummary:
    """Per-run and per-edit recycling shares of one classifier variant.

    Attributes:
        variant: run_wide or lineage.
        n_edits: parent→child edits with both sources.
        n_added_lines: counted added lines over all edits.
        counts: events per kind and `any`.
        share_of_added_lines: counts / n_added_lines (0 when nothing was added).
        median_per_edit_ratios: the median over edits of events / added lines (edits adding nothing count 0).
        spans: span statistics and bins (1, 2-5, 6-10, 11-20, 21-50, 51+).
        per_iteration: the rate per child iteration.
        slopes: OLS slope of the per-iteration fraction against iteration, per kind and `any` (None if < 2 points).
        per_edit: each edit's added lines and re-adds by kind, in edit order.
    """

    variant: str
    n_edits: int
    n_added_lines: int
    counts: Mapping[str, int]
    share_of_added_lines: Mapping[str, float]
    median_per_edit_ratios: Mapping[str, float]
    spans: Mapping[str, object]
    per_iteration: tuple[IterationRate, ...]
    slopes: Mapping[str, float | None]
    per_edit: tuple[EditCycling, ...] = ()


def summarize(variant: str, edits: Sequence[Edit], events: Sequence[RecycleEvent]) -> CyclingSummary:
    """Returns the per-run, per-edit and per-iteration recycling statistics of one variant."""
    added = sum(len(edit.added_counted()) for edit in edits)
    counts = kind_counts(events)
    by_child: dict[str, list[RecycleEvent]] = {}
    for event in events:
        by_child.setdefault(event.child_id, []).append(event)
    ratios = {kind: [_ratio(kind_counts(by_child.get(e.child_id, []))[kind], len(e.added_counted())) for e in edits]
              for kind in (*KINDS, "any")}
    series = per_iteration(edits, events)
    return CyclingSummary(
        variant=variant,
        n_edits=len(edits),
        n_added_lines=added,
        counts=counts,
        share_of_added_lines={kind: _ratio(count, added) for kind, count in counts.items()},
        median_per_edit_ratios={kind: statistics.median(values) if values else 0.0 for kind, values in ratios.items()},
        spans=span_stats(events),
        per_iteration=series,
        slopes={kind: ols_slope([r.iteration for r in series], [r.fractions[kind] for r in series])
                for kind in (*KINDS, "any")},
        per_edit=tuple(
            EditCycling(e.child_id, e.iteration, len(e.added_counted()),
                        *(kind_counts(by_child.get(e.child_id, []))[kind] for kind in KINDS))
            for e in edits
        ),
    )


def per_iteration(edits: Sequence[Edit], events: Sequence[RecycleEvent]) -> tuple[IterationRate, ...]:
    """Returns the recycling fraction per child iteration, with a trailing rolling mean of `any`."""
    added: dict[int, int] = {}
    for edit in edits:
        added[edit.iteration] = added.get(edit.iteration, 0) + len(edit.added_counted())
    rates: list[IterationRate] = []
    for iteration in sorted(added):
        counts = kind_counts(e for e in events if e.iteration == iteration)
        fractions = {kind: count / max(added[iteration], 1) for kind, count in counts.items()}
        window = [r.fractions["any"] for r in rates[-(ROLLING_WINDOW - 1):]] + [fractions["any"]]
        rates.append(IterationRate(iteration, added[iteration], counts, fractions, statistics.fmean(window)))
    return tuple(rates)


def ols_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Returns the least-squares slope of ys on xs (None with fewer than two distinct xs)."""
    return statistics.linear_regression(xs, ys).slope if len(set(xs)) >= 2 else None


def around(series: Sequence[IterationRate], iteration: int, width: int = 5) -> dict[str, float | None]:
    """Returns the mean `any` fraction over [iteration − width, iteration) and (iteration, iteration + width]."""
    before = [r.fractions["any"] for r in series if iteration - width <= r.iteration < iteration]
    after = [r.fractions["any"] for r in series if iteration < r.iteration <= iteration + width]
    return {"before": statistics.fmean(before) if before else None,
            "after": statistics.fmean(after) if after else None}


def _ratio(count: int, total: int) -> float:
    return count / total if total else 0.0
