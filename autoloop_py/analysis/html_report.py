"""The static HTML report of a run: metric curve, evolution tree, per-candidate diffs, the Population, the
MAP-Elites grid of a strategy with feature cells, with Pareto objectives the front, the prompt variants' figures, and
the candidates the novelty filter did not evaluate.

One self-contained file (inline CSS and JS, the run's data as JSON in the page), so it opens from disk
or as a CI artifact with no server and no network. Building the data is pure; `autoloop report` does
the reading and writing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from autoloop_py.analysis.model_figures import PROMPT, figures_data
from autoloop_py.analysis.run_view import RunNode, best_lineage, run_nodes, unified_diff
from autoloop_py.render import render
from autoloop_py.state.population import oriented
from autoloop_py.state.population_model import Candidate
from autoloop_py.state.trace import Trace
from autoloop_py.strategies import pareto

DIFF_CONTEXT = 2
MAX_DIFF_CHARS = 20_000


@dataclass(frozen=True)
class ReportSource:
    """Where the report's run came from, shown in its header.

    Attributes:
        program: the program's name (or the trace's own name for another framework's run).
        origin: `memory/autoloop:traces/<program>` or the EvoTrace directory.
        metric: the primary metric's name.
        direction: "higher" or "lower" (is better).
    """

    program: str
    origin: str
    metric: str
    direction: str


def report_payload(trace: Trace, source: ReportSource, population: Sequence[Candidate] = ()) -> dict[str, Any]:
    """Returns the data the report page draws: nodes, diffs against parents, the best lineage, the Population."""
    nodes = _with_copies(run_nodes(trace), population)
    sources: dict[str, str | None] = {row.id: trace.source(row) for row in trace.rows}
    sources.update({str(c.id): c.code for c in population if str(c.id) not in sources and c.code is not None})
    return {
        "program": source.program,
        "origin": source.origin,
        "metric": source.metric,
        "direction": source.direction,
        "nodes": [_node_data(node) for node in nodes],
        "diffs": _diffs(nodes, sources),
        "best": [node.id for node in best_lineage(nodes, source.direction)],
        "population": [_candidate_data(candidate) for candidate in population],
        "models": figures_data(trace),
        "prompts": figures_data(trace, PROMPT),
        "objectives": objectives_data(population),
        "grid": grid_data(population, source.direction),
        "skipped": skipped_data(trace),
    }


def skipped_data(trace: Trace) -> list[dict[str, Any]]:
    """Returns the candidates the novelty filter did not evaluate: id, iteration, verdict, the candidate it
    repeats or is nearest to, and the similarity (under `novelty: embedding`)."""
    found = []
    for row in trace.rows:
        metadata = row.extra.get("metadata")
        verdict = metadata.get("novelty") if isinstance(metadata, dict) else None
        if isinstance(verdict, dict) and verdict.get("evaluated") is False:
            found.append({"id": row.id, "it": row.iteration_found, "verdict": verdict.get("verdict"),
                          "of": verdict.get("of"), "sim": verdict.get("similarity"), "by": verdict.get("embedder")})
    return found


def render_report(payload: dict[str, Any]) -> str:
    """Returns the report page (one HTML file) for a payload."""
    return render("report/report.html.j2", data=payload, title=f"autoloop report: {payload['program']}")


def _with_copies(nodes: Sequence[RunNode], population: Sequence[Candidate]) -> list[RunNode]:
    """Returns the nodes plus the Population entries the trace lacks (AdaEvolve's seed, spawn and migration copies).

    A copy is not evaluated again, so it has no trace row; without it the tree would lose the edges through it.
    """
    known = {node.id for node in nodes}
    islands = {str(c.id): str(c.island) for c in population if c.island is not None}
    out = [replace(node, island=node.island or islands.get(node.id)) for node in nodes]
    for candidate in sorted(population, key=lambda c: (c.gen, c.id)):
        if str(candidate.id) in known:
            continue
        out.append(RunNode(
            id=str(candidate.id),
            parent_id=str(candidate.parents[0]) if candidate.parents else None,
            iteration=candidate.gen,
            metric=candidate.fitness,
            status=candidate.status if candidate.status in ("accepted", "rejected") else "failed",
            operator=candidate.operator,
            island=None if candidate.island is None else str(candidate.island),
            summary=f"{candidate.approach} (a copy kept by the strategy, not evaluated again)".strip(),
        ))
    return sorted(out, key=lambda node: (node.iteration, node.id))


def _node_data(node: RunNode) -> dict[str, Any]:
    # Short keys: a 5,000-candidate run carries this object 5,000 times.
    return {
        "id": node.id, "p": node.parent_id, "it": node.iteration, "m": node.metric, "s": node.status,
        "op": node.operator, "isl": node.island, "sum": node.summary,
        **({"fb": node.feedback} if node.feedback else {}), **({"stg": node.stages} if node.stages else {}),
    }


def _diffs(nodes: Sequence[RunNode], sources: dict[str, str | None]) -> dict[str, str]:
    diffs: dict[str, str] = {}
    for node in nodes:
        child = sources.get(node.id)
        if node.parent_id is None or node.parent_id not in sources:
            if child:
                diffs[node.id] = "".join(f" {line}\n" for line in child.splitlines())[:MAX_DIFF_CHARS]
            continue
        text = unified_diff(sources[node.parent_id], child, DIFF_CONTEXT)
        if text:
            diffs[node.id] = text[:MAX_DIFF_CHARS]
    return diffs


def objectives_data(population: Sequence[Candidate]) -> dict[str, Any]:
    """Returns the Pareto plot's data: the objective names (as the entries' Objectives bullets list them) and each
    entry's values and front (0: not dominated), for the entries that record them."""
    names: list[str] = []
    points = []
    for candidate in sorted(population, key=lambda c: c.id):
        values = pareto.raw_values(candidate)
        if values is None:
            continue
        names += [name for name in values if name not in names]
        points.append({"id": str(candidate.id), "v": values, "front": pareto.front_of(candidate),
                       "s": candidate.status, "sum": candidate.approach})
    return {"names": names, "points": points}


def grid_data(population: Sequence[Candidate], direction: str) -> dict[str, Any]:
    """Returns the MAP-Elites grid: the feature cells' row and column buckets (first seen first) and, per cell,
    its entries and its best (the newer on ties), for the entries that have a cell (AlphaEvolve's)."""
    rows: list[str] = []
    cols: list[str] = []
    cells: dict[str, dict[str, Any]] = {}
    for candidate in sorted(population, key=lambda c: c.id):
        if candidate.cell is None:
            continue
        row, col = candidate.cell
        rows += [row] if row not in rows else []
        cols += [col] if col not in cols else []
        cell = cells.setdefault(f"{row}\u0000{col}", {"row": row, "col": col, "n": 0, "best": None, "f": None})
        cell["n"] += 1
        f = oriented(candidate.fitness, direction)
        if f is not None and (cell["f"] is None or f >= oriented(cell["f"], direction)):
            cell["best"], cell["f"] = str(candidate.id), candidate.fitness
    return {"rows": rows, "cols": cols, "cells": list(cells.values())}


def _candidate_data(candidate: Candidate) -> dict[str, Any]:
    values = pareto.raw_values(candidate)
    return {
        "id": candidate.id,
        "island": candidate.island,
        "cell": " × ".join(candidate.cell) if candidate.cell else None,
        "fitness": candidate.fitness,
        "gen": candidate.gen,
        "operator": candidate.operator,
        "parents": ", ".join(str(p) for p in candidate.parents),
        "status": candidate.status,
        "approach": candidate.approach,
        "objectives": None if values is None else " · ".join(f"{k} {v:g}" for k, v in values.items()),
        "front": pareto.front_of(candidate),
    }
