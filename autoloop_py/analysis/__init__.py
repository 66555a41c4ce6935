"""Analysis: diagnostics of a recorded run (lineage, cycling, tuning share) over a simple view of its programs."""

from __future__ import annotations

from dataclasses import dataclass

from autoloop_py.state.trace import Trace


@dataclass(frozen=True)
class Node:
    """One program of a run, as the analyses see it.

    Attributes:
        id: the program's id.
        parent_id: its parent's id (None for a seed; may name a program missing from the trace).
        iteration: iteration_found.
        score: the primary score, None when the program is invalid or unscored.
        status: accepted, rejected or failed.
        source: the full source, None when the trace has no blob for it.
    """

    id: str
    parent_id: str | None
    iteration: int
    score: float | None
    status: str
    source: str | None


def nodes_of(trace: Trace) -> tuple[Node, ...]:
    """Returns the trace's programs as nodes, in trace order (iteration, ties in programs.jsonl order)."""
    return tuple(
        Node(row.id, row.parent_id, row.iteration_found, trace.score(row), row.status, trace.source(row))
        for row in trace.rows
    )


def oriented(score: float, direction: str) -> float:
    """Returns the score so that larger is better ('lower' flips the sign)."""
    return -score if direction == "lower" else score
