"""Experiment tracking: a recorded run sent where researchers look (a CSV file, MLflow, Weights & Biases).

One `Tracked` per evaluated candidate, in the order they were found: its metrics, status, model, tokens, spend
and the diff from its parent. MLflow and W&B are optional: each is imported only when asked for, and their
offline modes (an MLflow file store, `WANDB_MODE=offline`) need no server.
"""

from __future__ import annotations

import csv
import difflib
import io
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from autoloop_py.errors import AutoloopError
from autoloop_py.state.trace import Trace, TraceRow

logger = logging.getLogger(__name__)

DESTINATIONS = ("csv", "mlflow", "wandb")
_FIELDS = ("step", "id", "iteration", "status", "parent", "model", "operator", "tokens", "cost", "changes")


@dataclass(frozen=True)
class Tracked:
    """One evaluated candidate as a tracker sees it.

    Attributes:
        step: its place in the run, from 0.
        row: the trace row it comes from.
        numbers: its finite numeric metrics.
        diff: a unified diff from its parent's source to its own ("" without both sources).
    """

    step: int
    row: TraceRow
    numbers: Mapping[str, float]
    diff: str


def tracked(trace: Trace) -> list[Tracked]:
    """Returns the run's candidates in the order they were found, each with its numbers and its diff."""
    by_id = {row.id: row for row in trace.rows}
    found = []
    for step, row in enumerate(trace.rows):
        parent = by_id.get(row.parent_id) if row.parent_id else None
        found.append(Tracked(step, row, _numbers(row.metrics), _diff(trace, parent, row)))
    return found


def csv_text(items: Sequence[Tracked]) -> str:
    """Returns a header and one row per candidate, its metrics as columns."""
    metrics = sorted({name for item in items for name in item.numbers})
    handle = io.StringIO()
    writer = csv.writer(handle, lineterminator="\n")
    writer.writerow([*_FIELDS, *metrics])
    for item in items:
        writer.writerow([*_columns(item), *(item.numbers.get(name, "") for name in metrics)])
    return handle.getvalue()


def to_mlflow(items: Sequence[Tracked], program: str, uri: str) -> str:
    """Logs the run as one MLflow run (a step per candidate, diffs as artifacts) at `uri`; returns its id."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise AutoloopError("--to mlflow needs MLflow: `python3 -m pip install mlflow-skinny`") from None
    if uri.startswith("file:") or "://" not in uri:
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for it; a file store is our offline mode
        uri = uri if uri.startswith("file:") else Path(uri).resolve().as_uri()
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(f"autoloop/{program}")
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(f"autoloop/{program}")
    run_id = client.create_run(experiment_id, run_name=program, tags={"autoloop.program": program}).info.run_id
    for item in items:
        for name, value in {**item.numbers, **_spend(item.row)}.items():
            client.log_metric(run_id, name, value, step=item.step)
        if item.diff:
            client.log_text(run_id, item.diff, f"diffs/{item.step:04d}-{item.row.id}.diff")
    client.log_text(run_id, csv_text(items), "iterations.csv")
    client.set_terminated(run_id)
    return run_id


def to_wandb(items: Sequence[Tracked], program: str, directory: Path) -> str:
    """Logs the run to Weights & Biases (offline unless WANDB_MODE says otherwise) under `directory`."""
    try:
        import wandb
    except ImportError:
        raise AutoloopError("--to wandb needs wandb: `python3 -m pip install wandb`") from None
    directory.mkdir(parents=True, exist_ok=True)
    run = wandb.init(project=f"autoloop-{program}", dir=str(directory),
                     mode=os.environ.get("WANDB_MODE", "offline"), config={"program": program})
    for item in items:
        run.log({**item.numbers, **_spend(item.row), "status": item.row.status}, step=item.step)
    table = wandb.Table(columns=list(_FIELDS), data=[_columns(item) for item in items])
    run.log({"iterations": table})
    run.finish()
    return run.id


def _numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    return {name: float(value) for name, value in metrics.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
            and abs(value) != float("inf")}


def _spend(row: TraceRow) -> dict[str, float]:
    spend = {"tokens": row.tokens, "cost": row.cost}
    return {f"autoloop.{name}": float(value) for name, value in spend.items() if value is not None}


def _diff(trace: Trace, parent: TraceRow | None, row: TraceRow) -> str:
    mine = trace.source(row)
    theirs = trace.source(parent) if parent is not None else None
    if mine is None or theirs is None:
        return ""
    lines = difflib.unified_diff(theirs.splitlines(keepends=True), mine.splitlines(keepends=True),
                                 fromfile=parent.id if parent else "", tofile=row.id)
    return "".join(lines)


def _columns(item: Tracked) -> list[Any]:
    row = item.row
    model = row.model or row.model_name or ""
    return [item.step, row.id, row.iteration_found, row.status, row.parent_id or "", model, row.operator or "",
            "" if row.tokens is None else row.tokens, "" if row.cost is None else row.cost, row.changes]

