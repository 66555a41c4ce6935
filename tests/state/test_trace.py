"""Tests of trace.py: memory-branch row files, EvoTrace export, and loading ours and other frameworks' runs."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
import trace_samples as sample
from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.errors import AutoloopError
from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.program.target import Target
from autoloop_py.state import trace
from autoloop_py.state.trace import TraceRow, load_trace, primary_score, row_files, row_from_json, row_to_json

PROMPTS = {"diff_user": {"system": "You improve code.", "user": "Make it faster ✓", "responses": ["<<<<<<< SEARCH"]}}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_row_files_write_the_row_and_both_blobs_named_by_their_sha() -> None:
    row = TraceRow(id="it3", iteration_found=3, parent_id="it2", metrics={"score": 0.5}, status="accepted")
    files = row_files("fm", row, "x = 1\n", PROMPTS)
    payload = json.dumps(PROMPTS, sort_keys=True, ensure_ascii=False)
    source_sha, prompts_sha = _sha("x = 1\n"), _sha(payload)
    assert files[f"traces/fm/blobs/{source_sha[:2]}/{source_sha}.txt"] == "x = 1\n"
    assert files[f"traces/fm/blobs/{prompts_sha[:2]}/{prompts_sha}.json"] == payload
    assert "✓" in payload and payload.index('"responses"') < payload.index('"system"')
    stored = json.loads(files["traces/fm/rows/000003-it3.json"])
    assert (stored["solution_sha256"], stored["prompts_sha256"]) == (source_sha, prompts_sha)
    assert stored["source"] == "autoloop" and stored["metadata"] == {"changes": "", "parent_metrics": None,
                                                                      "model_name": None}


def test_row_files_without_prompts_write_no_prompt_blob() -> None:
    row = TraceRow(id="it0", iteration_found=0, parent_id=None, metrics={}, status="accepted")
    files = row_files("fm", row, "seed\n", {})
    assert [path for path in files if path.endswith(".json") and "/blobs/" in path] == []
    assert json.loads(files["traces/fm/rows/000000-it0.json"])["prompts_sha256"] is None


def test_row_file_names_are_safe_for_any_id() -> None:
    row = TraceRow(id="island 2/c#7", iteration_found=12, parent_id=None, metrics={}, status="rejected")
    assert trace.row_file_name(row) == "000012-island_2_c_7.json"


def test_export_then_load_gives_back_the_recorded_rows(tmp_path: Path) -> None:
    files = sample.memory_files()
    recorded = {json.loads(text)["id"]: row_from_json(json.loads(text)) for path, text in files.items() if "/rows/" in path}
    loaded = load_trace(sample.write_run(tmp_path / "run"))
    assert [row.id for row in loaded.rows] == ["A", "B", "E", "C", "F", "D"]
    assert list(loaded.rows) == [recorded[row.id] for row in loaded.rows]
    by_id = {row.id: row for row in loaded.rows}
    assert loaded.source(by_id["D"]) == sample.D
    assert loaded.prompts(by_id["B"]) == {"diff_user": {"system": "sys", "user": "improve A", "responses": ["reply for B ✓"]}}
    assert loaded.prompts(by_id["A"]) is None
    assert by_id["C"].timestamp == "2025-01-03T00:00:00+00:00" and by_id["C"].tokens == 102
    assert by_id["C"].operator == "mutation" and by_id["C"].model == "test/model"


def test_export_writes_meta_counts_and_the_metric(tmp_path: Path) -> None:
    out = sample.write_run(tmp_path / "run")
    meta = json.loads((out / "meta.json").read_text())
    assert meta["backend"] == "autoloop" and meta["schema_version"] == 1
    assert (meta["metric"], meta["direction"], meta["program"]) == ("value", "higher", "sample")
    assert meta["counts"] == {
        "checkpoints": 0, "accepted_unique": 4, "accepted_dup_skipped": 0, "rejected_unique": 1,
        "rejected_dup_skipped": 0, "failed_unique": 1, "failed_dup_skipped": 0,
        # F has A's source: git and the blob store keep it once.
        "blobs_solution": 5, "blobs_prompts": 5,
    }
    assert json.loads((out / "replay_env.json").read_text())["evaluation"]["metric"] == "value"


def test_export_keeps_the_first_row_of_a_duplicated_id(tmp_path: Path) -> None:
    files = sample.memory_files()
    again = TraceRow(id="B", iteration_found=4, parent_id="A", metrics={"value": 9.0}, status="rejected")
    files.update(row_files(sample.PROGRAM, again, "later\n", {}))
    out = trace.export(files.get, sorted(files), sample.PROGRAM, tmp_path / "run")
    loaded = load_trace(out)
    assert [row.metrics for row in loaded.rows if row.id == "B"] == [{"value": 2.0}]
    assert json.loads((out / "meta.json").read_text())["counts"]["rejected_dup_skipped"] == 1


def test_exported_blobs_keep_their_exact_bytes(tmp_path: Path) -> None:
    files = {}
    row = TraceRow(id="w", iteration_found=0, parent_id=None, metrics={"score": 1}, status="accepted")
    files.update(row_files("win", row, "a = 1\r\nb = 2\r\n", {}))
    loaded = load_trace(trace.export(files.get, sorted(files), "win", tmp_path / "run"))
    source = loaded.source(loaded.rows[0])
    assert source == "a = 1\r\nb = 2\r\n" and _sha(source) == loaded.rows[0].solution_sha256


FOREIGN_ROWS = [
    {"id": "6f1c0c1e-0000-4000-8000-000000000001", "language": "cpp", "metrics": {"combined_score": 10.5},
     "iteration_found": 0, "parent_id": None, "other_context_ids": [], "parent_info": None, "context_info": None,
     "timestamp": None, "metadata": {"changes": "seed", "parent_metrics": None, "model_name": "m", "migrant": False},
     "generation": 0, "status": "accepted", "source": "checkpoint.programs", "solution_sha256": "ab" * 32,
     "prompts_sha256": None, "artifacts": {"stdout": "ok"}},
    {"id": "6f1c0c1e-0000-4000-8000-000000000002", "metrics": {"combined_score": float("nan")}, "iteration_found": 2,
     "parent_id": "6f1c0c1e-0000-4000-8000-000000000001", "timestamp": None, "status": "accepted"},
    {"id": "6f1c0c1e-0000-4000-8000-000000000003", "metrics": {"combined_score": -(2**63)}, "iteration_found": 1,
     "parent_id": "6f1c0c1e-0000-4000-8000-000000000001", "metadata": None, "status": "accepted"},
    {"id": "6f1c0c1e-0000-4000-8000-000000000004", "metrics": {"overall_score": 3, "score": 99},
     "iteration_found": 3, "parent_id": "6f1c0c1e-0000-4000-8000-000000000003", "other_context_ids": None},
    {"id": "6f1c0c1e-0000-4000-8000-000000000005", "metrics": {"combined_score": 50, "judge_result": "COMPILE_ERROR"},
     "iteration_found": 4, "parent_id": None, "status": "rejected"},
    {"id": "6f1c0c1e-0000-4000-8000-000000000006", "metrics": {"combined_score": 70, "error": "timeout"},
     "iteration_found": 5, "parent_id": None, "status": "rejected", "source": "gepa.rejection_history"},
    {"id": "6f1c0c1e-0000-4000-8000-000000000001", "metrics": {"combined_score": 1}, "iteration_found": 9},
    {"metrics": {"combined_score": 1}, "iteration_found": 9},
]


def _foreign_run(directory: Path) -> Path:
    directory.mkdir()
    lines = [json.dumps(row) for row in FOREIGN_ROWS]
    lines.insert(3, "")
    (directory / "programs.jsonl").write_text("\n".join(lines) + "\n")
    (directory / "meta.json").write_text(json.dumps({"backend": "openevolve_native", "refined_at": None}))
    return directory


def test_load_trace_reads_another_frameworks_run(tmp_path: Path) -> None:
    loaded = load_trace(_foreign_run(tmp_path / "openevolve_run"))
    ids = [row.id[-1] for row in loaded.rows]
    assert ids == ["1", "3", "2", "4", "5", "6"]
    scores = {row.id[-1]: loaded.score(row) for row in loaded.rows}
    # NaN and the -2**63 sentinel are invalid; `error` and a hard judge failure make a row invalid.
    assert scores == {"1": 10.5, "2": None, "3": None, "4": 3.0, "5": None, "6": None}
    first = loaded.rows[0]
    assert (first.language, first.timestamp, first.model_name, first.generation) == ("cpp", None, "m", 0)
    assert first.extra == {"parent_info": None, "context_info": None, "artifacts": {"stdout": "ok"},
                           "metadata": {"migrant": False}}
    assert loaded.source(first) is None and loaded.direction == "higher" and loaded.metric is None
    assert loaded.rows[3].status == "accepted" and loaded.rows[3].other_context_ids == ()


def test_unknown_fields_survive_a_round_trip_through_json(tmp_path: Path) -> None:
    loaded = load_trace(_foreign_run(tmp_path / "run"))
    again = [row_from_json(json.loads(json.dumps(row_to_json(row)))) for row in loaded.rows]
    assert [row.id for row in again] == [row.id for row in loaded.rows]
    assert again[0] == loaded.rows[0]
    assert row_to_json(again[0])["metadata"]["migrant"] is False


def test_primary_score_prefers_the_programs_metric_then_the_evotrace_keys() -> None:
    metrics = {"value": 2.0, "combined_score": 1.0, "score": 3.0}
    assert primary_score(metrics, "value") == 2.0
    assert primary_score(metrics) == 1.0
    assert primary_score({"overall_score": "4.5"}) == 4.5
    assert primary_score({"combined_score": float("inf"), "score": 1.0}) is None
    assert primary_score({"combined_score": True}) is None
    assert primary_score({"other": 1.0}) is None


def test_load_trace_names_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(AutoloopError, match="no programs.jsonl"):
        load_trace(tmp_path)


def test_load_trace_names_the_line_of_a_broken_row(tmp_path: Path) -> None:
    (tmp_path / "programs.jsonl").write_text('{"id": "a", "metrics": {}}\n{"id": \n')
    with pytest.raises(AutoloopError) as caught:
        load_trace(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / 'programs.jsonl'}:2: not a JSON object")


def test_replay_env_names_the_evaluation_and_the_installed_versions() -> None:
    program = Program(
        name="fm", path=Path(".autoloop/programs/fm/program.md"), directory=Path(".autoloop/programs/fm"),
        goal="g", target=Target(("code/*.py",)), evaluation=Evaluation("python score.py", "score", 20),
        strategy_text="", config=ProgramConfig(evaluation_timeout=60.0, metric_direction="lower"),
        unconfigured=False, text="",
    )
    path, text = trace.replay_env_file(program)
    env = json.loads(text)
    assert path == "traces/fm/replay_env.json"
    assert env["evaluation"] == {"command": "python score.py", "metric": "score", "direction": "lower",
                                 "timeout_seconds": 60.0, "repeats": 1, "working_directory": ".",
                                 "program_dir": ".autoloop/programs/fm"}
    assert env["python"]["version"].count(".") == 2
    assert "pytest" in {name.lower() for name in env["dependencies"]}


def test_installed_distributions_read_as_the_metadata_parser_reads_them() -> None:
    import importlib.metadata

    parsed: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        if dist.metadata and dist.metadata["Name"]:
            parsed.setdefault(str(dist.metadata["Name"]), str(dist.metadata["Version"]))
    assert trace.installed_distributions() == dict(sorted(parsed.items(), key=lambda item: item[0].lower()))


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_METRIC = st.one_of(st.floats(allow_nan=False), st.integers(-(2**63), 2**63), _TEXT, st.none())


@given(
    id=_TEXT.filter(bool),
    iteration=st.integers(0, 10**6),
    parent=st.one_of(st.none(), _TEXT.filter(bool)),
    metrics=st.dictionaries(_TEXT, _METRIC, max_size=4),
    status=st.sampled_from(trace.STATUSES),
    context=st.lists(_TEXT, max_size=3).map(tuple),
    tokens=st.one_of(st.none(), st.integers(0, 10**9)),
)
def test_rows_round_trip_through_programs_jsonl(
    id: str, iteration: int, parent: str | None, metrics: dict, status: str, context: tuple, tokens: int | None
) -> None:
    row = TraceRow(id=id, iteration_found=iteration, parent_id=parent, metrics=metrics, status=status,
                   other_context_ids=context, tokens=tokens, cost=0.5, changes="c", timestamp="2025-01-01T00:00:00Z")
    line = json.dumps(row_to_json(row), sort_keys=True, ensure_ascii=False)
    assert row_from_json(json.loads(line)) == row


def test_a_nan_metric_is_kept_but_never_scores(tmp_path: Path) -> None:
    row = TraceRow(id="n", iteration_found=1, parent_id=None, metrics={"score": math.nan}, status="accepted")
    files = row_files("p", row, "x\n", {})
    loaded = load_trace(trace.export(files.get, sorted(files), "p", tmp_path / "run"))
    assert math.isnan(loaded.rows[0].metrics["score"]) and loaded.score(loaded.rows[0]) is None
