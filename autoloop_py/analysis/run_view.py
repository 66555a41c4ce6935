"""Run view: the candidates of a trace as the pictures show them (metric, status, parent, island, best-so-far)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Mapping, Sequence

from autoloop_py.analysis import oriented
from autoloop_py.analysis.lineage import ancestry
from autoloop_py.state.trace import Trace, TraceRow


@dataclass(frozen=True)
class RunNode:
    """One candidate of a run, as a chart or the report draws it.

    Attributes:
        id: the candidate's id (`it7`, `c012`, `seed`, or another framework's id).
        parent_id: the id of the program it was derived from, None for a seed.
        iteration: the iteration that produced it.
        metric: its valid primary score, None when it failed or has none.
        status: accepted, rejected or failed (errors are `failed` in traces).
        operator: how it was made (mutation, crossover, ...), None when unknown.
        island: the island or cell it belongs to, None outside strategy programs.
        summary: the one-line description of the change.
        feedback: what its evaluation said beside the metric (its error, then its feedback), cut to FEEDBACK_CHARS.
        stages: its evaluation stages, e.g. `1 ✓ 0.1 s, 2 ✗ 3.0 s` ('' without stages).
    """

    id: str
    parent_id: str | None
    iteration: int
    metric: float | None
    status: str
    operator: str | None = None
    island: str | None = None
    summary: str = ""
    feedback: str = ""
    stages: str = ""


FEEDBACK_CHARS = 2000


def run_nodes(trace: Trace) -> tuple[RunNode, ...]:
    """Returns the trace's candidates as run nodes, in trace order."""
    return tuple(_node(trace, row) for row in trace.rows)


def _node(trace: Trace, row: TraceRow) -> RunNode:
    metadata = row.extra.get("metadata") if isinstance(row.extra.get("metadata"), Mapping) else {}
    island = row.extra.get("island", metadata.get("island") if metadata else None)
    return RunNode(
        id=row.id,
        parent_id=row.parent_id,
        iteration=row.iteration_found,
        metric=trace.score(row),
        status=row.status,
        operator=row.operator,
        island=None if island is None else str(island),
        summary=row.changes,
        feedback=_feedback(row),
        stages=_stages(metadata.get("stages") if metadata else None),
    )


def _feedback(row: TraceRow) -> str:
    """Returns the error and feedback text a row's evaluation left (its artifacts), cut to FEEDBACK_CHARS."""
    artifacts = row.extra.get("artifacts")
    if not isinstance(artifacts, Mapping):
        return ""
    parts = [str(artifacts.get(key) or "").strip() for key in ("error", "feedback")]
    text = "\n".join(part for part in parts if part)
    return text if len(text) <= FEEDBACK_CHARS else text[: FEEDBACK_CHARS - 1] + "…"


def _stages(runs: object) -> str:
    """Returns a row's evaluation stages as one line: number, passed or not, seconds."""
    if not isinstance(runs, list):
        return ""
    shown = [f"{run.get('stage')} {'✓' if run.get('passed') else '✗'} {run.get('seconds')} s"
             for run in runs if isinstance(run, Mapping)]
    return ", ".join(shown)


def best_lineage(nodes: Sequence[RunNode], direction: str) -> list[RunNode]:
    """Returns the ancestors of the best candidate, root first, ending with the best itself."""
    scored = [node for node in nodes if node.metric is not None]
    # the first node that holds the best valid metric
    best = max(scored, key=lambda node: (oriented(node.metric or 0.0, direction), -node.iteration), default=None)
    if best is None:
        return []
    by_id = {node.id: node for node in nodes}
    return [by_id[node_id] for node_id in ancestry(by_id, best.id)]  # type: ignore[arg-type]


def unified_diff(
    parent: str | None, child: str | None, context: int = 2, names: tuple[str, str] = ("parent", "candidate")
) -> str:
    """Returns the child's source as a unified diff against its parent's ('' when either is unknown).

    names: the diff's from-file and to-file; a last line without its newline gets one, so lines never run together.
    """
    if parent is None or child is None:
        return ""
    lines = difflib.unified_diff(
        parent.splitlines(keepends=True), child.splitlines(keepends=True), *names, n=context
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
