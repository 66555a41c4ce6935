"""Experiment tracking: a recorded run as CSV rows and as an MLflow run (a file store, read back with MLflow)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

import pytest

import autoloop_py as al
from autoloop_py.analysis import tracking
from autoloop_py.state.trace import load_trace
from tests import trace_samples as sample
from tests.programs import program_md


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
    run_id = tracking.send_all(items, "mlflow", str(store), sample.PROGRAM)
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
    run_id = tracking.send_all(items, "wandb", str(tmp_path / "wandb"), sample.PROGRAM)
    (run_dir,) = (tmp_path / "wandb" / "wandb").glob(f"offline-run-*-{run_id}")
    assert (run_dir / f"run-{run_id}.wandb").stat().st_size > 0  # the logged steps, in wandb's own format
    (table,) = (run_dir / "files" / "media" / "table").glob("iterations_*.table.json")
    data = json.loads(table.read_text())
    assert data["columns"][:4] == ["step", "id", "iteration", "status"]
    assert [row[1] for row in data["data"]] == ["A", "B", "E", "C", "F", "D"]


def _tracked_repo(repo: Path, tracking_key: str | None) -> None:
    """Commits and pushes the small program (with `tracking:` when given) to repo's origin."""
    folder = repo / ".autoloop/programs/demo"
    (folder / "code").mkdir(parents=True)
    (folder / "code/value.py").write_text("x = 1\n")
    (folder / "code/evaluate.py").write_text(
        "import json, runpy\nprint(json.dumps({'score': runpy.run_path('code/value.py')['x']}))\n")
    frontmatter = {"tracking": tracking_key} if tracking_key else None
    (folder / "program.md").write_text(program_md("Demo", "Grow x.", frontmatter=frontmatter))
    for args in (["add", "-A"], ["commit", "-q", "-m", "demo"], ["push", "-q", "origin", "main"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_a_run_with_tracking_writes_the_csv_as_it_goes(git_repo_with_origin: Path) -> None:
    _tracked_repo(git_repo_with_origin, "csv:tracked/runs.csv")
    table = git_repo_with_origin / "tracked/runs.csv"
    seen: list[int] = []
    result = al.run("demo", repo=git_repo_with_origin, iterations=2, proposer="tune", quiet=True,
                    on_iteration=lambda outcome: seen.append(len(table.read_text().splitlines()) - 1))
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert seen == [2, 3]  # the seed (the unchanged code), then a row per iteration, there when it was told
    assert [(r["iteration"], r["status"]) for r in rows[1:]] == [(str(o.iteration), o.status) for o in result.outcomes]
    assert [r["score"] for r in rows] == ["1.0", *(str(o.metric) for o in result.outcomes)]


def test_autoloop_tracking_sends_a_run_to_an_mlflow_file_store_a_step_per_iteration(
    git_repo_with_origin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client_module = pytest.importorskip("mlflow.tracking", reason="the mlflow extra is not installed")
    _tracked_repo(git_repo_with_origin, None)
    store = tmp_path / "mlruns"
    monkeypatch.setenv("AUTOLOOP_TRACKING", f"mlflow:{store}")
    result = al.run("demo", repo=git_repo_with_origin, iterations=2, proposer="tune", quiet=True)
    client = client_module.MlflowClient(tracking_uri=store.resolve().as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("autoloop/demo").experiment_id])
    scores = [1.0, *(o.metric for o in result.outcomes)]  # the seed's, then one step per iteration
    assert sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "score")) == list(
        enumerate(scores))
    assert run.info.status == "FINISHED"


def test_a_bad_tracking_value_is_refused_before_the_run(git_repo_with_origin: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _tracked_repo(git_repo_with_origin, None)
    monkeypatch.setenv("AUTOLOOP_TRACKING", "tensorboard:runs")
    with pytest.raises(al.AutoloopError, match="AUTOLOOP_TRACKING: must be DESTINATION:WHERE"):
        al.run("demo", repo=git_repo_with_origin, iterations=1, proposer="tune", quiet=True)
