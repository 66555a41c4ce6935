"""Mermaid charts of a run: the metric of every evaluated candidate with the best so far, and the best's lineage.

GitHub renders Mermaid in issues, PR bodies, job summaries and markdown files, so these charts need no
dependency where maintainers already look. Both are kept small enough to render: old iterations fold into
buckets and a long lineage keeps its root and newest ancestors.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Sequence

from autoloop_py.analysis import oriented
from autoloop_py.analysis.run_view import RunNode, best_lineage, run_nodes
from autoloop_py.program.model import Program
from autoloop_py.render import render
from autoloop_py.state import trace
from autoloop_py.state.memory import MemoryStore

RECENT_POINTS = 24
FOLDED_BUCKETS = 16
LINEAGE_NODES = 12
_UNSAFE_LABEL = re.compile(r'["<>\[\]{}|`#;%]')


@dataclass(frozen=True)
class ChartPoint:
    """One x position of the metric chart: a candidate, or a bucket of folded older candidates.

    Attributes:
        label: the x-axis category (`7` for iteration 7, `1-20` for a bucket).
        metric: the candidate's metric, or the bucket's best.
        best: the best so far at this point.
    """

    label: str
    metric: float
    best: float


def metric_points(
    nodes: Sequence[RunNode], direction: str, recent: int = RECENT_POINTS, buckets: int = FOLDED_BUCKETS
) -> tuple[list[ChartPoint], int]:
    """Returns the chart's points (newest `recent` candidates one by one, older ones in buckets) and how many folded."""
    evaluated = [node for node in nodes if node.metric is not None]
    best: float | None = None
    running: list[tuple[RunNode, float]] = []
    for node in evaluated:
        value = float(node.metric)  # type: ignore[arg-type]
        if best is None or oriented(value, direction) > oriented(best, direction):
            best = value
        running.append((node, best))
    fold = len(running) > recent + buckets
    older, newest = (running[:-recent], running[-recent:]) if fold else ([], running)
    points = _buckets(older, direction, buckets) + [
        ChartPoint(
            str(node.iteration) if node.iteration else _label(node.id),
            float(node.metric),  # type: ignore[arg-type]
            so_far,
        )
        for node, so_far in newest
    ]
    return points, len(older)


def _buckets(older: Sequence[tuple[RunNode, float]], direction: str, count: int) -> list[ChartPoint]:
    if not older:
        return []
    size = math.ceil(len(older) / count)
    points = []
    for start in range(0, len(older), size):
        chunk = older[start:start + size]
        metrics = (float(node.metric) for node, _ in chunk)  # type: ignore[arg-type]
        top = max(metrics, key=lambda v: oriented(v, direction))
        first, last = chunk[0][0].iteration, chunk[-1][0].iteration
        points.append(ChartPoint(f"{first}-{last}" if first != last else str(first), top, chunk[-1][1]))
    return points


def metric_chart(nodes: Sequence[RunNode], direction: str, metric_name: str) -> str:
    """Returns an `xychart-beta` of every evaluated candidate's metric (bars) and the best so far (line)."""
    points, folded = metric_points(nodes, direction)
    if not points:
        return ""
    values = [p.metric for p in points] + [p.best for p in points]
    low, high = min(values), max(values)
    pad = (high - low) * 0.1 or abs(high) * 0.1 or 1.0
    low, high = low - pad, high + pad
    title = f"{_label(metric_name)} per evaluated candidate ({direction} is better)"
    if folded:
        title += f", oldest {folded} folded"
    return render(
        "charts/metric_chart.mmd.j2",
        title=title,
        categories=[p.label for p in points],
        axis=_label(metric_name),
        low=_number(low),
        high=_number(high),
        bars=[_number(p.metric) for p in points],
        line=[_number(p.best) for p in points],
    )


def lineage_chart(nodes: Sequence[RunNode], direction: str, limit: int = LINEAGE_NODES) -> str:
    """Returns a `flowchart LR` of the best candidate's ancestors: operator on each edge, metric on each node."""
    chain = best_lineage(nodes, direction)
    if not chain:
        return ""
    shown: list[RunNode | int] = list(chain)
    if len(chain) > limit:
        hidden = len(chain) - (limit - 1)
        shown = [chain[0], hidden, *chain[-(limit - 2):]]
    boxes, edges = [], []
    for index, item in enumerate(shown):
        if isinstance(item, int):
            boxes.append((f"n{index}", f"… {item} more ancestors"))
        else:
            boxes.append((f"n{index}", _node_label(item)))
        if index:
            operator = item.operator if isinstance(item, RunNode) else None
            edges.append((f"n{index - 1}", f"n{index}", _label(operator or "")))
    return render("charts/lineage_chart.mmd.j2", boxes=boxes, edges=edges, best=f"n{len(shown) - 1}")


def charts_markdown(nodes: Sequence[RunNode], direction: str, metric_name: str) -> str:
    """Returns both charts as fenced ```mermaid blocks with a heading each ('' when nothing was evaluated)."""
    return render(
        "charts/charts.md.j2",
        metric=metric_chart(nodes, direction, metric_name),
        lineage=lineage_chart(nodes, direction),
    )


def program_charts(memory: MemoryStore, program: Program) -> str:
    """Returns the charts of a program's trace at the memory branch's tip ('' before anything was evaluated)."""
    metric, at = program.metric, memory.tip()
    paths = memory.list(trace.trace_dir(program.name) + "/rows/", at)
    run = trace.memory_trace(functools.partial(memory.read, at=at), paths, program.name, metric, program.direction)
    return charts_markdown(run_nodes(run), program.direction, metric or "metric")


def _node_label(node: RunNode) -> str:
    name = f"iteration {node.iteration}" if node.id == f"it{node.iteration}" else node.id
    where = f" · island {node.island}" if node.island is not None else ""
    metric = "—" if node.metric is None else _number(node.metric)
    return f"{_label(name + where)}<br/>{metric}"


def _label(text: str) -> str:
    # Mermaid labels are quoted; quotes, brackets and pipes inside would end them early.
    return _UNSAFE_LABEL.sub(" ", text).strip()


def _number(value: float) -> str:
    # Six significant digits, never in exponent form (Mermaid reads plain decimals).
    return f"{Decimal(f'{value:.6g}'):f}"
