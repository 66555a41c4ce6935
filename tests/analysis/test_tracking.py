"""Experiment tracking: a recorded run as CSV rows and as an MLflow run (a file store, read back with MLflow)."""

from __future__ import annotations

import csv
import json
import io
from pathlib import Path

import pytest

from autoloop_py.analysis import tracking
from autoloop_py.state.trace import load_trace
from tests import trace_samples as sample


def test_each_candidate_is_tracked_in_order_with_its_diff_from_its_parent(tmp_path: Path) -> None:
    items = tracking.tracked(load_trace(sample.write_run(tmp_path / "run")))
    assert [(i.step, i.row.id) for i in items] == [(0, "A"), (1, "B"), (2, "E"), (3, "C"), (4, "F"), (5, "D")]
    by_id = {i.row.id: i for i in items}
    assert by_id["A"].diff == ""  # a seed has no parent
    assert "-rate = 0.25\n+rate = 0.5\n" in by_id["C"].diff
    assert by_id["D"].numbers["value"] == 4.0 and "value" not in by_id["F"].numbers


def test_csv_has_a_header_and_a_row_per_candidate_with_its_metrics(tmp_path: Path) -> None:
    items = tracking.tracked(load_trace(sample.write_run(tmp_path / "run")))
    rows = list(csv.DictReader(io.StringIO(tracking.csv_text(items))))
    assert [r["id"] for r in rows] == ["A", "B", "E", "C", "F", "D"]
    assert [r["value"] for r in rows] == ["1.0", "2.0", "1.5", "3.0", "", "4.0"]
    assert [r["status"] for r in rows] == [row.status for row in (i.row for i in items)]


def test_mlflow_gets_one_run_with_a_step_per_candidate_and_the_diffs(tmp_path: Path) -> None:
    client_module = pytest.importorskip("mlflow.tracking", reason="the mlflow extra is not installed")
    items = tracking.tracked(load_trace(sample.write_run(tmp_path / "run")))
    store = tmp_path / "mlruns"
    run_id = tracking.to_mlflow(items, sample.PROGRAM, str(store))
    client = client_module.MlflowClient(tracking_uri=store.resolve().as_uri())
    experiment = client.get_experiment_by_name(f"autoloop/{sample.PROGRAM}")
    runs = client.search_runs([experiment.experiment_id])
    assert [r.info.run_id for r in runs] == [run_id]
    history = client.get_metric_history(run_id, "value")
    assert sorted((m.step, m.value) for m in history) == [(0, 1.0), (1, 2.0), (2, 1.5), (3, 3.0), (5, 4.0)]
    artifacts = {a.path for a in client.list_artifacts(run_id, "diffs")}
    assert "diffs/0003-C.diff" in artifacts and "diffs/0000-A.diff" not in artifacts


def test_wandb_gets_an_offline_run_holding_a_row_per_candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    items = tracking.tracked(load_trace(sample.write_run(tmp_path / "run")))
    run_id = tracking.to_wandb(items, sample.PROGRAM, tmp_path / "wandb")
    (run_dir,) = (tmp_path / "wandb" / "wandb").glob(f"offline-run-*-{run_id}")
    assert (run_dir / f"run-{run_id}.wandb").stat().st_size > 0  # the logged steps, in wandb's own format
    (table,) = (run_dir / "files" / "media" / "table").glob("iterations_*.table.json")
    data = json.loads(table.read_text())
    assert data["columns"][:4] == ["step", "id", "iteration", "status"]
    assert [row[1] for row in data["data"]] == ["A", "B", "E", "C", "F", "D"]
