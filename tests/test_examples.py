"""Tests for the example programs under `.autoloop/programs/`: they load, check clean and evaluate."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from autoloop_py.loop.evaluation.evaluate import evaluate
from autoloop_py.program.model import check_all, load_program

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "function_minimization": Path(".autoloop/programs/function_minimization/program.md"),
    "circle_packing": Path(".autoloop/programs/circle_packing/program.md"),
    "docstring_coverage": Path(".autoloop/programs/docstring_coverage.md"),
}


def _copy_example(tmp_path: Path, name: str) -> Path:
    """Copies one folder example into a fresh repository under tmp_path; returns its code folder."""
    shutil.copytree(ROOT / EXAMPLES[name].parent, tmp_path / EXAMPLES[name].parent)
    return tmp_path / EXAMPLES[name].parent / "code"


def test_examples_check_clean() -> None:
    programs, problems = check_all(ROOT)
    assert problems == []
    assert set(EXAMPLES) <= {p.name for p in programs}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_loads_configured(name: str) -> None:
    program = load_program(ROOT, EXAMPLES[name])
    assert not program.unconfigured
    assert program.direction == "higher"
    assert program.evaluation is not None and program.config.schedule


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_evaluates_to_a_finite_metric(name: str) -> None:
    result = evaluate(load_program(ROOT, EXAMPLES[name]), ROOT)
    assert result.ok, result.error
    assert result.metric is not None and math.isfinite(result.metric)


def test_function_minimization_is_deterministic_and_in_range() -> None:
    program = load_program(ROOT, EXAMPLES["function_minimization"])
    first, second = evaluate(program, ROOT), evaluate(program, ROOT)
    assert first.stdout_tail == second.stdout_tail
    assert first.metric is not None and 0.0 < first.metric < 1.5
    assert set(first.metrics) >= {"combined_score", "avg_value", "avg_distance", "reliability"}


def test_function_minimization_baseline_leaves_room_to_improve() -> None:
    result = evaluate(load_program(ROOT, EXAMPLES["function_minimization"]), ROOT)
    assert result.metric is not None and result.metric < 0.6


def _run_edited(tmp_path: Path, name: str, file: str, old: str, new: str) -> str | None:
    """Evaluates a copy of an example whose `file` has `old` replaced by `new`; returns its error."""
    code = _copy_example(tmp_path, name)
    source = (code / file).read_text()
    assert old in source
    (code / file).write_text(source.replace(old, new))
    result = evaluate(load_program(tmp_path, EXAMPLES[name]), tmp_path)
    assert not result.ok and result.metric is None
    return result.error


def test_function_minimization_time_overrun_is_an_error(tmp_path: Path) -> None:
    code = _copy_example(tmp_path, "function_minimization")
    for file, old, new in [("evaluate.py", "SEARCH_SECONDS = 30.0", "SEARCH_SECONDS = 1.0"),
                           ("search.py", "    return best\n", "    while True:\n        pass\n")]:
        (code / file).write_text((code / file).read_text().replace(old, new))
    result = evaluate(load_program(tmp_path, EXAMPLES["function_minimization"]), tmp_path)
    assert result.error is not None and "trial_point() did not return within 1 s; it was killed" in result.error


def test_function_minimization_crashing_search_is_an_error_not_zero(tmp_path: Path) -> None:
    error = _run_edited(
        tmp_path, "function_minimization", "search.py", "    (x_lo, x_hi), (y_lo, y_hi) = bounds\n",
        "    raise RuntimeError('broken search')\n",
    )  # fmt: skip
    assert error == "exited with status 1: CandidateError: search.py: trial_point() raised RuntimeError: broken search"


def test_function_minimization_non_finite_point_is_an_error(tmp_path: Path) -> None:
    error = _run_edited(
        tmp_path, "function_minimization", "search.py", "    return best\n", "    return (math.nan, 0.0, 0.0)\n"
    )
    assert error is not None and "non-finite point" in error


def test_function_minimization_better_constants_score_higher(tmp_path: Path) -> None:
    code = _copy_example(tmp_path, "function_minimization")
    source = (code / "search.py").read_text()
    for old, new in [("iterations = 60", "iterations = 1000"), ("restarts = 1\n", "restarts = 10\n"),
                     ("step_size = 3.0", "step_size = 1.0"), ("cooling = 0.5", "cooling = 0.99")]:
        source = source.replace(old, new)
    (code / "search.py").write_text(source)
    baseline = evaluate(load_program(ROOT, EXAMPLES["function_minimization"]), ROOT)
    tuned_result = evaluate(load_program(tmp_path, EXAMPLES["function_minimization"]), tmp_path)
    assert tuned_result.ok and baseline.metric is not None and tuned_result.metric is not None
    assert tuned_result.metric > baseline.metric + 0.5


def test_circle_packing_reports_sum_of_radii() -> None:
    result = evaluate(load_program(ROOT, EXAMPLES["circle_packing"]), ROOT)
    assert result.metrics["validity"] == 1.0
    assert result.metric == pytest.approx(result.metrics["sum_radii"] / 2.635, abs=1e-5)


def test_circle_packing_overlap_is_a_rejection_naming_the_constraint(tmp_path: Path) -> None:
    code = _copy_example(tmp_path, "circle_packing")
    source = (code / "packing.py").read_text()
    (code / "packing.py").write_text(source.replace("    return radii\n", "    return [r + 0.05 for r in radii]\n"))
    result = evaluate(load_program(tmp_path, EXAMPLES["circle_packing"]), tmp_path)
    assert result.ok and result.metric == 0.0 and result.channel == "file"
    assert "overlap" in result.rejection or "leaves the square" in result.rejection
    assert result.feedback.startswith("invalid packing, rejected: ") and "no two may overlap" in result.feedback
    assert result.stopped.startswith("stage 1 of 2 (validity): ") and len(result.stages) == 1


def test_circle_packing_valid_packing_says_how_it_scores() -> None:
    result = evaluate(load_program(ROOT, EXAMPLES["circle_packing"]), ROOT)
    assert result.feedback.startswith("valid packing: sum of radii ") and not result.rejection


def test_circle_packing_crash_is_an_error(tmp_path: Path) -> None:
    error = _run_edited(tmp_path, "circle_packing", "packing.py", "circles = 26", "circles = None")
    assert error is not None
    assert error.startswith("exited with status 1: CandidateError: packing.py: construct_packing() raised TypeError")


def test_docstring_coverage_is_a_percentage() -> None:
    result = evaluate(load_program(ROOT, EXAMPLES["docstring_coverage"]), ROOT)
    assert result.metric is not None and 0.0 <= result.metric <= 100.0
    assert result.metrics["public"] > 0


def test_function_minimization_reports_its_best_point_as_feedback() -> None:
    result = evaluate(load_program(ROOT, EXAMPLES["function_minimization"]), ROOT)
    assert result.channel == "file" and result.feedback.startswith("best point over 10 trials: (")
    assert "of 10 trials ended within 0.5" in result.feedback
