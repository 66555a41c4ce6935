"""AlphaEvolve's MAP-Elites feature dimensions: read from the playbook, bucketed from the island, lines or a metric.

A dimension is the island (`approach_family`), the evolved block's line count (only when the playbook's
bullet says lines, e.g. `<40 / 40–100 / >100 lines`), or else a metric of the evaluator named as the
playbook names it, binned by the running min–max of the values seen into the playbook's number of bins
(OpenEvolve's feature map), or by fixed thresholds the bullet gives (`latency_ms: thresholds 10, 50` → three
bins: below 10, 10 up to 50, 50 and above). The running range lives in the Population's `### ⚙️ Strategy State`
block.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from autoloop_py import markdown as md
from autoloop_py.errors import ProgramError
from autoloop_py.program.objectives import metric_value
from autoloop_py.render import render
from autoloop_py.state.population import complexity_bucket, evolved_lines

ISLANDS, LINES, METRIC = "islands", "lines", "metric"
DEFAULT_BINS = 3
ISLAND_NAMES = ("approach_family", "island", "islands", "family")
LINE_NAMES = ("code_complexity", "complexity", "lines", "line_count", "code_length", "length")
UNKNOWN = "n/a"
_INT_RE = re.compile(r"\d+")
_BINS_RE = re.compile(r"(\d+)\s*(?:equal[- ]width\s+)?(?:bins|buckets)", re.IGNORECASE)
_CODESPAN_RE = re.compile(r"`([^`]+)`")
_BUCKET_WORDS = ("small", "medium", "large")
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")
_RANGE_DASH_RE = re.compile(r"(?<=\d)\s*[-–—]\s*(?=\d)")


@dataclass(frozen=True)
class FeatureDimension:
    """One MAP-Elites dimension.

    Attributes:
      name: the playbook's name for it (an evaluator metric's key when kind is metric).
      kind: islands (the island's name), lines (the evolved block's line count) or metric.
      bins: how many bins a metric's running range is cut into (len(thresholds) + 1 with fixed thresholds).
      thresholds: a metric's fixed bin edges, ascending (empty: the running min–max decides).
    """

    name: str
    kind: str
    bins: int = DEFAULT_BINS
    thresholds: tuple[float, ...] = ()


@dataclass(frozen=True)
class FeatureRange:
    """The running min–max of a metric dimension over every candidate recorded with it."""

    low: float
    high: float


def parse_dimensions(
    text: str, items: list[tuple[str, int]], path: Path, default_thresholds: tuple[int, int]
) -> tuple[tuple[FeatureDimension, FeatureDimension], tuple[int, int]]:
    """Returns the playbook's two dimensions and the line thresholds of a line-count dimension."""
    lines = text.splitlines()
    dimensions = [FeatureDimension("approach_family", ISLANDS), FeatureDimension("code_complexity", LINES)]
    thresholds = default_thresholds
    for item, line in items:
        for index in (0, 1):
            if item.lower().startswith(f"dimension {index + 1}"):
                dimension = _dimension(item, lines[line], index)
                dimensions[index] = dimension
                if dimension.kind == LINES:
                    thresholds = _thresholds(item, path, line + 1, index + 1) or thresholds
    return (dimensions[0], dimensions[1]), thresholds


def _dimension(item: str, raw: str, index: int) -> FeatureDimension:
    """Returns a dimension bullet's name and kind: islands for dimension 1's family, lines when it says lines."""
    name = _dimension_name(item, raw)
    rest = item.split(":", 1)[-1].lower()
    key = name.lower()
    if key in ISLAND_NAMES or (index == 0 and "island" in rest and not _BINS_RE.search(rest)):
        return FeatureDimension(name, ISLANDS)
    if key in LINE_NAMES or re.search(r"\blines?\b", rest):
        return FeatureDimension(name, LINES)
    edges = _metric_thresholds(rest)
    if edges:
        return FeatureDimension(name, METRIC, len(edges) + 1, edges)
    return FeatureDimension(name, METRIC, _bins(rest))


def _metric_thresholds(text: str) -> tuple[float, ...]:
    """Returns the fixed bin edges after `threshold(s)` in a metric bullet (e.g. `thresholds 10, 50`), ascending."""
    at = text.find("threshold")
    if at == -1 or _BINS_RE.search(text):  # `N bins` asks for the running range, whatever else the bullet says
        return ()
    segment = _RANGE_DASH_RE.sub(" ", text[at:])
    return tuple(sorted({float(n) for n in _NUMBER_RE.findall(segment)}))


def _dimension_name(item: str, raw: str) -> str:
    """Returns the backticked name on the bullet's line, else the text between the dash and the colon."""
    span = _CODESPAN_RE.search(raw)
    if span:
        return span.group(1).strip()
    head = item.split(":", 1)[0]
    return re.split(r"[—–-]", head, maxsplit=1)[-1].strip()


def _bins(text: str) -> int:
    """Returns the number of bins a metric dimension's bullet asks for: `N bins`, else its bucket names, else 3."""
    found = _BINS_RE.search(text)
    if found and int(found.group(1)) >= 1:
        return int(found.group(1))
    named = [word for word in _BUCKET_WORDS if word in text]
    return len(named) if len(named) >= 2 else DEFAULT_BINS


def _thresholds(item: str, path: Path, line: int, number: int) -> tuple[int, int] | None:
    """Returns the two distinct numbers after `threshold` (or the colon), e.g. `<40 / 40–100 / >100` → (40, 100)."""
    lowered = item.lower()
    at = lowered.find("threshold")
    segment = item[at:] if at != -1 else item.split(":", 1)[-1]
    numbers = sorted({int(n) for n in _INT_RE.findall(segment)})
    if not numbers:
        return None
    if len(numbers) != 2:
        raise ProgramError(
            f"the Dimension {number} threshold names {len(numbers)} distinct numbers; give two, as in "
            "`<40 / 40–100 / >100` lines, or name a metric of the evaluator with `N bins`",
            path, line,
        )
    return numbers[0], numbers[1]


# --- buckets -------------------------------------------------------------------------------------------


def bucket(
    dimension: FeatureDimension,
    island_name: str,
    code: str,
    thresholds: tuple[int, int],
    metrics: Mapping[str, Any],
    ranges: Mapping[str, FeatureRange],
) -> str:
    """Returns a candidate's bucket on one dimension (ranges: the running min–max, its own value included)."""
    if dimension.kind == ISLANDS:
        return island_name
    if dimension.kind == LINES:
        return complexity_bucket(evolved_lines(code), thresholds)
    value = metric_value(metrics, dimension.name)
    if value is not None and dimension.thresholds:
        return f"{dimension.name} {bisect.bisect_right(dimension.thresholds, value) + 1}/{dimension.bins}"
    span = ranges.get(dimension.name)
    if value is None or span is None:
        return UNKNOWN
    return f"{dimension.name} {bin_of(value, span, dimension.bins) + 1}/{dimension.bins}"


def bin_of(value: float, span: FeatureRange, bins: int) -> int:
    """Returns the 0-based bin of value in the range cut into equal bins (the middle one for an empty range)."""
    width = span.high - span.low
    scaled = 0.5 if width <= 0 else (value - span.low) / width
    return min(bins - 1, max(0, int(scaled * bins)))


def updated_ranges(
    ranges: Mapping[str, FeatureRange], dimensions: tuple[FeatureDimension, ...], metrics: Mapping[str, Any]
) -> dict[str, FeatureRange]:
    """Returns the running ranges widened by this candidate's metric values."""
    found = dict(ranges)
    for dimension in dimensions:
        value = metric_value(metrics, dimension.name) if dimension.kind == METRIC else None
        if value is None:
            continue
        span = found.get(dimension.name)
        found[dimension.name] = FeatureRange(value, value) if span is None else FeatureRange(
            min(span.low, value), max(span.high, value)
        )
    return found


# --- the Strategy State block ------------------------------------------------------------------------


def parse_ranges(block: str) -> dict[str, FeatureRange]:
    """Returns the `| Feature | Min | Max |` rows of the Strategy State block (unreadable rows are skipped)."""
    found: dict[str, FeatureRange] = {}
    for table in md.tables(block):
        if not table.header or md.normalize_heading(table.header[0]) != "feature":
            continue
        for row in table.rows:
            try:
                found[row.cells[0].strip().strip("`")] = FeatureRange(float(row.cells[1]), float(row.cells[2]))
            except (IndexError, ValueError):
                continue
    return found


def render_ranges(ranges: Mapping[str, FeatureRange]) -> str:
    """Returns the Strategy State block holding the running ranges ('' when there is none)."""
    if not ranges:
        return ""
    rows = [(name, repr(span.low), repr(span.high)) for name, span in sorted(ranges.items())]
    return render("alphaevolve_state.md.j2", rows=rows)
