"""End to end: `autoloop analyze` on trace directories and on the memory branch, and `autoloop trace export`."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import trace_samples as sample

from autoloop_py.cli import main
from autoloop_py.commands import analyze
from autoloop_py.errors import AutoloopError
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.trace import load_trace

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["analyze", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def recorded(git_repo: Path) -> Path:
    """A repository whose memory branch holds the sample run's trace."""
    MemoryStore(git_repo).commit(sample.memory_files(), "record the sample trace")
    return git_repo


def test_analyze_json_reports_the_known_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _json(capsys, str(sample.write_run(tmp_path / "run")))
    lineage = report["lineage"]
    assert (lineage["best_id"], lineage["depth"], lineage["lineage"]) == ("D", 4, ["A", "B", "C", "D"])
    assert lineage["normalized_best_iteration"] == 1.0 and lineage["n_events"] == 4
    assert lineage["dead_share"] == pytest.approx(1 / 3)
    run_wide, in_lineage = report["cycling"]["run_wide"], report["cycling"]["lineage"]
    assert run_wide["counts"] == {"literal": 2, "tuning": 1, "trivial": 1, "any": 4}
    assert in_lineage["counts"] == {"literal": 1, "tuning": 1, "trivial": 1, "any": 3}
    assert run_wide["share_of_added_lines"]["any"] == pytest.approx(4 / 7)
    assert run_wide["slopes"]["any"] == pytest.approx(0.5)
    assert run_wide["spans"]["bins"]["1"] == 2 and run_wide["top_lines"][0]["count"] == 1
    assert report["tuning_share"]["share_of_code_lines"] == pytest.approx(4 / 11)
    assert report["tuning_share"]["buckets"] == {"pure-tuning": 1, "mostly-tuning": 0, "mixed": 1,
                                                 "mostly-structural": 0, "pure-structural": 3}
    assert report["run"]["statuses"] == {"accepted": 4, "failed": 1, "rejected": 1}
    assert {p["id"]: p["score"] for p in report["points"]}["F"] is None


def test_analyze_prints_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(sample.write_run(tmp_path / "run"))]) == 0
    out = capsys.readouterr().out
    assert "Final best D = 4 at iteration 3 (normalized 1.00); lineage depth 4 of 6 programs" in out
    assert "│ run-wide │ 5     │ 7     │ 28.6%   │ 14.3%  │ 14.3%   │ 57.1%" in out
    assert "Tuning share of changed code lines: 36.4% over 5 edits" in out


def test_analyze_reads_a_program_trace_from_the_memory_branch(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from_memory = _json(capsys, sample.PROGRAM, "--repo", str(recorded))
    from_directory = _json(capsys, str(sample.write_run(tmp_path / "run")))
    assert from_memory["run"]["directory"] == "memory/autoloop:traces/sample"
    for key in ("lineage", "cycling", "tuning_share", "points"):
        assert from_memory[key] == from_directory[key]


def test_analyze_names_a_program_without_a_trace(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "nothing", "--repo", str(git_repo)]) == 1
    assert "no trace recorded for 'nothing' on memory/autoloop; run `autoloop run --program nothing` first" in (
        capsys.readouterr().err
    )


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed (pip install 'autoloop-py[plot]')")
def test_analyze_png_writes_a_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "figures" / "run.png"
    assert main(["analyze", str(sample.write_run(tmp_path / "run")), "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"figure written to {png}" in capsys.readouterr().out


def test_analyze_png_without_matplotlib_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert main(["analyze", str(sample.write_run(tmp_path / "run")), "--png", str(tmp_path / "x.png")]) == 1
    # cli.py prints errors as rich markup, which currently swallows `[plot]`; the message itself is exact.
    assert capsys.readouterr().err.startswith("error: --png needs matplotlib; install it with: pip install 'autoloop-py")
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(AutoloopError) as caught:
        analyze.figure_class()
    assert str(caught.value) == "--png needs matplotlib; install it with: pip install 'autoloop-py[plot]'"


def test_trace_export_writes_the_evotrace_layout(recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "exported"
    assert main(["trace", "export", sample.PROGRAM, str(out), "--repo", str(recorded)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 6 programs of sample to {out}"
    assert {p.name for p in out.iterdir()} == {"meta.json", "programs.jsonl", "blobs", "replay_env.json"}
    assert load_trace(out).rows == load_trace(sample.write_run(tmp_path / "direct")).rows


def test_trace_export_refuses_a_directory_in_use(recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("keep me")
    assert main(["trace", "export", sample.PROGRAM, str(tmp_path / "busy"), "--repo", str(recorded)]) == 1
    assert "is not an empty directory; choose a new directory" in capsys.readouterr().err
    assert (tmp_path / "busy" / "notes.txt").read_text() == "keep me"


def test_a_run_of_autoloop_loads_and_round_trips(git_repo: Path, run_git, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    example = Path(__file__).parents[2] / ".autoloop/programs/function_minimization"
    shutil.copytree(example, git_repo / ".autoloop/programs/function_minimization",
                    ignore=shutil.ignore_patterns("__pycache__"))
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "program")
    assert main(["run", "--repo", str(git_repo), "--program", "function_minimization", "--iterations", "6"]) == 0
    capsys.readouterr()
    report = _json(capsys, "function_minimization", "--repo", str(git_repo))
    assert report["run"]["n_programs"] == 7  # the seed and six candidates
    from autoloop_py.state import file as statefile

    best = statefile.parse_state(MemoryStore(git_repo).read("function_minimization.md") or "").machine.best_metric
    assert report["lineage"]["best_score"] == pytest.approx(best)
    assert report["lineage"]["lineage"][0] == "seed"
    out = tmp_path / "exported"
    assert main(["trace", "export", "function_minimization", str(out), "--repo", str(git_repo)]) == 0
    capsys.readouterr()
    exported = load_trace(out)
    assert [row.id for row in exported.rows] == ["seed"] + [f"it{i}" for i in range(1, 7)]
    assert all(exported.source(row) for row in exported.rows)
    assert exported.rows[1].parent_id == "seed" and exported.rows[1].timestamp
    again = _json(capsys, str(out))
    assert again["lineage"] == report["lineage"]


@pytest.mark.parametrize(("rows", "events", "per_edit"), [
    # EvoReplay's classify_cycles on the same directories: events (child, kind, line, removed in, span) and the
    # per-program rows (id, added, literal, tuning, trivial) of its cycle_classes.programs.csv.
    (sample.ONE_EDIT, [("b", "tuning", "rate = 0.9", "a", 1)], [("a", 0, 0, 0, 0), ("b", 1, 0, 1, 0)]),
    (sample.SIBLINGS, [("c", "literal", "rate = 0.9", "m1", 1)],
     [("p9", 1, 0, 0, 0), ("p7", 1, 0, 0, 0), ("p5", 1, 0, 0, 0), ("m1", 0, 0, 0, 0), ("z1", 0, 0, 0, 0),
      ("a1", 0, 0, 0, 0), ("c", 1, 1, 0, 0)]),
    (sample.TWICE, [("b", "literal", "value = helper(x)", "a", 1)], [("a", 1, 0, 0, 0), ("b", 4, 1, 0, 0)]),
], ids=["one-edit", "siblings", "re-added-twice"])
def test_analyze_gives_evoreplays_per_edit_classes_on_an_evotrace_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: sample.Rows, events: list[tuple], per_edit: list[tuple]
) -> None:
    report = _json(capsys, str(sample.write_evotrace(tmp_path / "run", rows)))
    run_wide = report["cycling"]["run_wide"]
    assert [(e["child_id"], e["kind"], e["line"], e["removed_in"], e["span"]) for e in run_wide["events"]] == events
    assert [(r["child_id"], r["added"], r["literal"], r["tuning"], r["trivial"]) for r in run_wide["per_edit"]] == (
        per_edit)


def test_analyze_raw_detector_matches_evoreplay_on_repeated_and_short_re_adds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # EvoReplay's detect_cycles: 1/5 (a line re-added twice in one edit counts once), and `k=10` → `k=100` 0/1,
    # 0/2 with --collapse-numbers (the minimum length applies to `k=#`; `10, 20, 30,` is kept as `#, #, #,`).
    twice = _json(capsys, str(sample.write_evotrace(tmp_path / "twice", sample.TWICE)))["cycling"]["raw"]
    assert (twice["identical"], twice["n_added_lines"], twice["skeleton"], twice["n_added_lines_skeleton"]) == (
        1, 5, 1, 5)
    short = _json(capsys, str(sample.write_evotrace(tmp_path / "short", sample.SHORT)))["cycling"]["raw"]
    assert (short["identical"], short["n_added_lines"], short["skeleton"], short["n_added_lines_skeleton"]) == (
        0, 1, 0, 2)


def test_trace_export_to_csv_writes_a_header_and_a_row_per_candidate(
        recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "runs" / "sample.csv"
    assert main(["trace", "export", sample.PROGRAM, "--to", "csv", "--out", str(out), "--repo", str(recorded)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 6 candidates of sample to {out}"
    lines = out.read_text().splitlines()
    assert lines[0].startswith("step,id,iteration,status,parent,model") and len(lines) == 7


def test_trace_export_says_where_to_write_when_told_nowhere(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "export", sample.PROGRAM, "--to", "csv", "--repo", str(recorded)]) == 1
    assert "trace export needs where to write: DIRECTORY, or --out PATH" in capsys.readouterr().err
