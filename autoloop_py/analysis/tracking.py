"""Experiment tracking: a recorded run sent where researchers look (a CSV file, MLflow, Weights & Biases).

One `Tracked` per evaluated candidate, in the order they were found: its metrics, status, model, tokens, spend
and the diff from its parent. MLflow and W&B are optional: each is imported only when asked for, and their
offline modes (an MLflow file store, `WANDB_MODE=offline`) need no server. `run` sends as it goes when a
program's `tracking:` (or AUTOLOOP_TRACKING) names a destination.
"""

from __future__ import annotations

import csv
import importlib
import io
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from autoloop_py.analysis.run_view import unified_diff
from autoloop_py.errors import AutoloopError
from autoloop_py.git.objects import GitSession
from autoloop_py.program.frontmatter import TRACKERS, parse_tracking
from autoloop_py.program.model import Program
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.trace import Trace, TraceRow, export, load_trace, trace_dir

logger = logging.getLogger(__name__)

DESTINATIONS = TRACKERS
TRACKING_ENV = "AUTOLOOP_TRACKING"
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
        before = trace.source(parent) if parent is not None else None
        diff = unified_diff(before, trace.source(row), 3, (parent.id if parent else "", row.id))
        found.append(Tracked(step, row, _numbers(row.metrics), diff))
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


class Tracker:
    """Sends one program's candidates to a destination; each `send` adds those not sent yet, `close` ends the run.

    csv rewrites its file whole (a new metric is a new column); MLflow and W&B keep one run open until close.
    """

    def __init__(self, to: str, where: str, program: str) -> None:
        self.to, self.where, self.program = to, where, program
        self._sent: set[str] = set()
        self._items: list[Tracked] = []
        self._run: Any = None  # MLflow's (client, run id), or the W&B run: opened by the first send
        if to == "mlflow":
            self._module = _optional("mlflow.tracking", "mlflow-skinny")
        elif to == "wandb":
            self._module = _optional("wandb", "wandb")

    def send(self, items: Sequence[Tracked]) -> None:
        """Sends the candidates of items not sent yet (the csv file gets them all)."""
        new = [item for item in items if item.row.id not in self._sent]
        self._items = list(items)
        if not new:
            return
        self._sent.update(item.row.id for item in new)
        if self.to == "csv":
            Path(self.where).parent.mkdir(parents=True, exist_ok=True)
            Path(self.where).write_text(csv_text(items), encoding="utf-8")
        elif self.to == "mlflow":
            self._to_mlflow(new)
        else:
            self._to_wandb(new)

    def close(self) -> str:
        """Ends the run (the rows as a table or file beside it); returns its id, or the csv file's path."""
        if self._run is None:
            return self.where
        if self.to == "mlflow":
            client, run_id = self._run
            client.log_text(run_id, csv_text(self._items), "iterations.csv")
            client.set_terminated(run_id)
            return str(run_id)
        table = self._module.Table(columns=list(_FIELDS), data=[_columns(item) for item in self._items])
        self._run.log({"iterations": table})
        self._run.finish()
        return str(self._run.id)

    def _to_mlflow(self, items: Sequence[Tracked]) -> None:
        if self._run is None:
            uri = self.where
            if uri.startswith("file:") or "://" not in uri:
                os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for it: our offline mode
                uri = uri if uri.startswith("file:") else Path(uri).resolve().as_uri()
            client = self._module.MlflowClient(tracking_uri=uri)
            name = f"autoloop/{self.program}"
            experiment = client.get_experiment_by_name(name)
            experiment_id = experiment.experiment_id if experiment else client.create_experiment(name)
            tags = {"autoloop.program": self.program}
            self._run = client, client.create_run(experiment_id, run_name=self.program, tags=tags).info.run_id
        client, run_id = self._run
        for item in items:
            for name, value in {**item.numbers, **_spend(item.row)}.items():
                client.log_metric(run_id, name, value, step=item.step)
            if item.diff:
                client.log_text(run_id, item.diff, f"diffs/{item.step:04d}-{item.row.id}.diff")

    def _to_wandb(self, items: Sequence[Tracked]) -> None:
        if self._run is None:
            Path(self.where).mkdir(parents=True, exist_ok=True)
            self._run = self._module.init(project=f"autoloop-{self.program}", dir=self.where, config={
                "program": self.program}, mode=os.environ.get("WANDB_MODE", "offline"))
        for item in items:
            self._run.log({**item.numbers, **_spend(item.row), "status": item.row.status}, step=item.step)


def send_all(items: Sequence[Tracked], to: str, where: str, program: str) -> str:
    """Sends a recorded run whole; returns the MLflow or W&B run's id, or the csv file's path."""
    tracker = Tracker(to, where, program)
    tracker.send(items)
    return tracker.close()


class LiveTracker:
    """Sends a program's trace as a run records it: `update` reads the local memory branch and sends what is new."""

    def __init__(self, root: Path, program: str, to: str, where: str, session: GitSession | None = None) -> None:
        if to != "mlflow" or ("://" not in where and not where.startswith("file:")):
            where = str(root / where)  # a file or a folder, relative to the repository
        self.tracker = Tracker(to, where, program)
        self.memory = MemoryStore(root, session=session)
        self._owns_session = session is None

    def update(self) -> None:
        """Sends the candidates recorded since the last update; a failure is logged, never the run's."""
        program = self.tracker.program
        try:
            with tempfile.TemporaryDirectory(prefix="autoloop-tracking-") as folder:
                paths = self.memory.list(trace_dir(program) + "/")
                self.tracker.send(tracked(load_trace(export(self.memory.read, paths, program, Path(folder)))))
        except Exception as err:  # noqa: BLE001 - a tracker's outage must not stop the iterations
            logger.warning("tracking %s to %s failed: %s; `autoloop trace export` sends it later", program,
                           self.tracker.where, err)

    def close(self) -> None:
        """Ends the tracker's run and the memory branch's git session."""
        try:
            self.tracker.close()
        finally:
            if self._owns_session:
                self.memory.session.close()


def live_trackers(
    root: Path, programs: Sequence[Program], environ: Mapping[str, str], session: GitSession | None = None
) -> dict[str, LiveTracker]:
    """Returns a LiveTracker per program whose `tracking:` names a destination (AUTOLOOP_TRACKING: every program),
    reading the memory branch through the run's `session` when given."""
    told = environ.get(TRACKING_ENV, "").strip()
    try:
        every = parse_tracking(told) if told else None
    except ValueError as err:
        raise AutoloopError(f"{TRACKING_ENV}: {err}") from None
    wanted = {program.name: every or program.config.tracking for program in programs}
    return {name: LiveTracker(root, name, *where, session) for name, where in wanted.items() if where is not None}


def _optional(module: str, package: str) -> Any:
    """Returns an optional module, imported only when asked for; raises AutoloopError naming what to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        name = module.split(".")[0]
        raise AutoloopError(f"tracking to {name} needs it: `python3 -m pip install {package}`") from None


def _numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    return {name: float(value) for name, value in metrics.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
            and abs(value) != float("inf")}


def _spend(row: TraceRow) -> dict[str, float]:
    spend = {"tokens": row.tokens, "cost": row.cost}
    return {f"autoloop.{name}": float(value) for name, value in spend.items() if value is not None}


def _columns(item: Tracked) -> list[Any]:
    row = item.row
    model = row.model or row.model_name or ""
    return [item.step, row.id, row.iteration_found, row.status, row.parent_id or "", model, row.operator or "",
            "" if row.tokens is None else row.tokens, "" if row.cost is None else row.cost, row.changes]

