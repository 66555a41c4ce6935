"""Lineage: best-so-far events, the final best's ancestry, its depth and the share of dead branches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from autoloop_py.analysis import Node, oriented
from autoloop_py.analysis.cycling import diff_lines


@dataclass(frozen=True)
class BestEvent:
    """A strictly new best score, in iteration order.

    Attributes:
        id: the program that set it.
        iteration: its iteration_found.
        score: its primary score.
        delta_score: the improvement over the previous best (oriented, > 0); None for the first event.
        delta_score_norm: delta_score divided by the run's total gain (final best − first best); None if no gain.
        delta_lines: lines added plus lines removed against the previous best's source; None if unknown.
        in_lineage: whether the program lies on the final best's lineage.
    """

    id: str
    iteration: int
    score: float
    delta_score: float | None
    delta_score_norm: float | None
    delta_lines: int | None
    in_lineage: bool


@dataclass(frozen=True)
class LineageReport:
    """The final best and how the run reached it.

    Attributes:
        best_id: the final best program (the first to reach the best score).
        best_score: its score.
        best_iteration: its iteration_found.
        lineage: ids from the root to the final best, both ends included.
        depth: len(lineage); a best that is the seed has depth 1.
        normalized_best_iteration: best_iteration / the run's largest iteration_found (0 when that is 0).
        dead_share: 1 − depth / n_programs, the share of programs off the final best's lineage.
        n_programs: programs in the run, valid or not.
        events: the best-so-far events.
        n_events_in_lineage: events whose program lies on the final best's lineage.
    """

    best_id: str
    best_score: float
    best_iteration: int
    lineage: tuple[str, ...]
    depth: int
    normalized_best_iteration: float
    dead_share: float
    n_programs: int
    events: tuple[BestEvent, ...]
    n_events_in_lineage: int


def record_holders(nodes: Sequence[Node], direction: str) -> list[Node]:
    """Returns the nodes that set a strictly new best, by iteration then id (invalid nodes skipped)."""
    holders: list[Node] = []
    best: float | None = None
    for node in sorted(nodes, key=lambda n: (n.iteration, n.id)):
        if node.score is None:
            continue
        value = oriented(node.score, direction)
        if best is None or value > best:
            holders.append(node)
            best = value
    return holders


def ancestry(by_id: Mapping[str, Node], node_id: str) -> tuple[str, ...]:
    """Returns the ids from the root to node_id, following parents present in the run (cycles cut)."""
    chain: list[str] = []
    current: str | None = node_id
    while current is not None and current in by_id and current not in chain:
        chain.append(current)
        current = by_id[current].parent_id
    return tuple(reversed(chain))


def analyze_lineage(nodes: Sequence[Node], direction: str) -> LineageReport | None:
    """Returns the lineage diagnostics of a run, or None when no program has a valid score."""
    holders = record_holders(nodes, direction)
    if not holders:
        return None
    by_id = {node.id: node for node in nodes}
    best = holders[-1]
    lineage = ancestry(by_id, best.id)
    max_iteration = max(node.iteration for node in nodes)
    events = _events(holders, set(lineage), direction)
    return LineageReport(
        best_id=best.id,
        best_score=float(best.score or 0.0),
        best_iteration=best.iteration,
        lineage=lineage,
        depth=len(lineage),
        normalized_best_iteration=best.iteration / max_iteration if max_iteration > 0 else 0.0,
        dead_share=1.0 - len(lineage) / len(nodes),
        n_programs=len(nodes),
        events=events,
        n_events_in_lineage=sum(1 for event in events if event.in_lineage),
    )


def _events(holders: Sequence[Node], lineage: set[str], direction: str) -> tuple[BestEvent, ...]:
    """Returns the best-so-far events with their score and line deltas."""
    first = oriented(holders[0].score or 0.0, direction)
    total = oriented(holders[-1].score or 0.0, direction) - first
    events: list[BestEvent] = []
    for previous, node in zip([None, *holders[:-1]], holders):
        delta = None if previous is None else oriented(node.score or 0.0, direction) - oriented(
            previous.score or 0.0, direction
        )
        events.append(
            BestEvent(
                id=node.id,
                iteration=node.iteration,
                score=float(node.score or 0.0),
                delta_score=delta,
                delta_score_norm=delta / total if delta is not None and total > 0 else None,
                delta_lines=_changed_lines(previous, node),
                in_lineage=node.id in lineage,
            )
        )
    return tuple(events)


def _changed_lines(previous: Node | None, node: Node) -> int | None:
    """Returns lines added plus lines removed from previous's source to node's (None if unknown)."""
    if previous is None or previous.source is None or node.source is None:
        return None
    removed, added = diff_lines(previous.source, node.source)
    return len(removed) + len(added)
