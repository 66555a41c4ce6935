"""Model figures of a run: per model (or per prompt variant), its candidates, the share kept, the metric it gained and
what it spent.

Read from the trace (any run, ours or another framework's), in trace order: a kept candidate's improvement
is how far it moved the best so far in the better direction; candidates without a model (seeds) only set
the starting best. A row's guide and meta calls (`metadata.guide_spend`) add to their model's tokens and cost,
not to its calls. Per prompt variant the rows are grouped by the `metadata.prompt` naming the variant drawn, and a
row's guide calls count in its variant's tokens and cost (as the state file's Prompts table counts them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from autoloop_py.analysis import oriented
from autoloop_py.state.prompt_stats import TRACE_FIELD
from autoloop_py.state.trace import GUIDE_SPEND, Trace, TraceRow

MODEL = "model"
PROMPT = TRACE_FIELD


@dataclass(frozen=True)
class ModelFigures:
    """One model's figures in a run.

    Attributes:
      model: the model's name as the trace gives it.
      calls: candidates it proposed.
      accepted: of those, the ones kept.
      accepted_share: accepted / calls.
      improvement: the metric its kept candidates gained over the best before each (>= 0).
      tokens: tokens the trace records for its candidates and for its guide and meta calls (`metadata.guide_spend`).
      cost: dollars likewise (0 when the trace records none).
    """

    model: str
    calls: int = 0
    accepted: int = 0
    accepted_share: float = 0.0
    improvement: float = 0.0
    tokens: int = 0
    cost: float = 0.0


def model_figures(trace: Trace, by: str = MODEL) -> list[ModelFigures]:
    """Returns the figures of every model (by=PROMPT: prompt variant) that proposed a candidate of the trace, in order
    of first appearance."""
    figures: dict[str, dict[str, Any]] = {}
    best: float | None = None
    for row in trace.rows:
        score = trace.score(row)
        mine = oriented(score, trace.direction) if score is not None else None
        gain = mine - best if mine is not None and best is not None and mine > best else 0.0
        if mine is not None and row.status == "accepted" and (best is None or mine > best):
            best = mine
        name = row.model or row.model_name if by == MODEL else _variant(row)
        if name:
            entry = figures.setdefault(name, _empty())
            kept = row.status == "accepted"
            entry["calls"] += 1
            entry["accepted"] += kept
            entry["improvement"] += gain if kept else 0.0
            entry["tokens"] += row.tokens or 0
            entry["cost"] += row.cost or 0.0
        for other, tokens, cost in _guide_spend(row):  # a variant's are its iteration's, as the Prompts table counts
            owner = other if by == MODEL else name
            if owner:
                entry = figures.setdefault(owner, _empty())
                entry["tokens"] += tokens
                entry["cost"] += cost
    return [
        ModelFigures(name, accepted_share=entry["accepted"] / entry["calls"] if entry["calls"] else 0.0, **entry)
        for name, entry in figures.items()
    ]


def _variant(row: TraceRow) -> str | None:
    """Returns the prompt variant the row's metadata names (None: none, or not a string)."""
    metadata = row.extra.get("metadata")
    name = metadata.get(PROMPT) if isinstance(metadata, dict) else None
    return name if isinstance(name, str) else None


def _empty() -> dict[str, Any]:
    return {"calls": 0, "accepted": 0, "improvement": 0.0, "tokens": 0, "cost": 0.0}


def _guide_spend(row: TraceRow) -> list[tuple[str, int, float]]:
    """Returns (model, tokens, dollars) of the row's guide and meta calls; what cannot be read is skipped.

    A trace may come from anywhere: only a list of objects with a string model, whole tokens >= 0 and a
    finite cost >= 0 (or none) counts.
    """
    metadata = row.extra.get("metadata")
    listed = metadata.get(GUIDE_SPEND) if isinstance(metadata, dict) else None
    found = []
    for item in listed if isinstance(listed, list) else []:
        if not isinstance(item, dict):
            continue
        name, tokens, cost = item.get("model"), item.get("tokens"), item.get("cost")
        cost = 0.0 if cost is None else cost
        if (isinstance(name, str) and name and isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0
                and isinstance(cost, (int, float)) and not isinstance(cost, bool) and 0 <= cost < float("inf")):
            found.append((name, tokens, float(cost)))
    return found


def figures_data(trace: Trace, by: str = MODEL) -> list[dict[str, Any]]:
    """Returns the figures (per model, or per prompt variant) as plain data for the JSON report and the HTML page."""
    return [asdict(figures) for figures in model_figures(trace, by)]
