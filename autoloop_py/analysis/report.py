"""Report: every diagnostic of one trace assembled into a JSON-ready dict (what `autoloop analyze` shows)."""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter
from typing import Any, Sequence

from autoloop_py.analysis import Node, cycling, nodes_of
from autoloop_py.analysis.lineage import LineageReport, analyze_lineage
from autoloop_py.analysis.model_figures import PROMPT, figures_data
from autoloop_py.analysis.tuning_share import edit_tuning
from autoloop_py.state.trace import Trace

TOP_LINES = 5
BUCKETS = ("pure-tuning", "mostly-tuning", "mixed", "mostly-structural", "pure-structural")


def build_report(trace: Trace) -> dict[str, Any]:
    """Returns the report of a trace: run facts, lineage, cycling (both variants), tuning share, points."""
    nodes = nodes_of(trace)
    lineage = analyze_lineage(nodes, trace.direction)
    edits = cycling.edits_of(nodes)
    run_wide = cycling.classify_run_wide(edits)
    in_lineage = cycling.classify_lineage(edits, nodes)
    return {
        "run": run_facts(trace, nodes),
        "lineage": lineage_dict(lineage),
        "cycling": {
            "run_wide": _summary_dict(cycling.summarize("run_wide", edits, run_wide), run_wide, lineage),
            "lineage": _summary_dict(cycling.summarize("lineage", edits, in_lineage), in_lineage, lineage),
            "raw": raw_dict(edits),
        },
        "tuning_share": tuning_dict(edits),
        "models": figures_data(trace),
        "prompts": figures_data(trace, PROMPT),
        "points": [{"id": n.id, "iteration": n.iteration, "score": n.score, "status": n.status} for n in nodes],
    }


def run_facts(trace: Trace, nodes: Sequence[Node]) -> dict[str, Any]:
    """Returns what the run is: where it came from, its metric, size and statuses."""
    statuses = Counter(node.status for node in nodes)
    return {
        "directory": str(trace.directory),
        "backend": trace.meta.get("backend"),
        "program": trace.meta.get("program"),
        "metric": trace.metric,
        "direction": trace.direction,
        "n_programs": len(nodes),
        "n_valid": sum(1 for node in nodes if node.score is not None),
        "statuses": dict(sorted(statuses.items())),
        "max_iteration": max((node.iteration for node in nodes), default=0),
    }


def lineage_dict(lineage: LineageReport | None) -> dict[str, Any] | None:
    """Returns the lineage diagnostics as plain data (None when no program has a valid score)."""
    if lineage is None:
        return None
    data = dataclasses.asdict(lineage)
    data["n_events"] = len(lineage.events)
    data["lineage"] = list(lineage.lineage)
    data["events"] = [dataclasses.asdict(event) for event in lineage.events]
    return data


def raw_dict(edits: Sequence[cycling.Edit]) -> dict[str, Any]:
    """Returns the raw detector's share of added lines, byte-identical and with numbers collapsed."""
    exact, added = cycling.raw_events(edits)
    # Collapsing numbers changes which lines are noise (`1, 2,` is kept as `#, #,`), so it has its own denominator.
    collapsed, added_collapsed = cycling.raw_events(edits, collapse_numbers=True)
    return {"n_added_lines": added, "identical": exact, "identical_share": exact / added if added else 0.0,
            "n_added_lines_skeleton": added_collapsed, "skeleton": collapsed,
            "skeleton_share": collapsed / added_collapsed if added_collapsed else 0.0}


def tuning_dict(edits: Sequence[cycling.Edit]) -> dict[str, Any]:
    """Returns the tuning share of code lines over the run, its bucket counts and the per-edit values."""
    per_edit = [t for t in (edit_tuning(edit) for edit in edits) if t is not None]
    tuning = sum(t.tuning for t in per_edit)
    total = tuning + sum(t.structural for t in per_edit)
    return {
        "share_of_code_lines": tuning / total if total else None,
        "median_per_edit": statistics.median([t.share for t in per_edit]) if per_edit else None,
        "n_edits": len(per_edit),
        "buckets": {bucket: sum(1 for t in per_edit if t.bucket == bucket) for bucket in BUCKETS},
        "per_edit": [dataclasses.asdict(t) for t in per_edit],
    }


def top_lines(events: Sequence[cycling.RecycleEvent], limit: int = TOP_LINES) -> list[dict[str, Any]]:
    """Returns the most often re-introduced lines with their kind and count (ties by first appearance)."""
    counts = Counter((event.line, event.kind) for event in events)
    return [{"line": line, "kind": kind, "count": count} for (line, kind), count in counts.most_common(limit)]


def _summary_dict(
    summary: cycling.CyclingSummary, events: Sequence[cycling.RecycleEvent], lineage: LineageReport | None
) -> dict[str, Any]:
    data = dataclasses.asdict(summary)
    data["top_lines"] = top_lines(events)
    data["events"] = [dataclasses.asdict(event) for event in events]
    data["per_iteration"] = [
        {"iteration": r.iteration, "added": r.added, **{f"frac_{k}": v for k, v in r.fractions.items()},
         "rolling_any": r.rolling_any}
        for r in summary.per_iteration
    ]
    if lineage is not None:
        data["around_best"] = cycling.around(summary.per_iteration, lineage.best_iteration)
    return data
