"""Tests for analysis/model_figures.py: per model, its candidates, the share kept, the metric gained and the spend."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import trace_samples as sample

from autoloop_py.analysis.model_figures import ModelFigures, figures_data, model_figures
from autoloop_py.state.trace import load_trace


def test_the_sample_runs_figures(tmp_path: Path) -> None:
    trace = load_trace(sample.write_run(tmp_path / "run"))
    (figures,) = model_figures(trace)
    # A (the first kept) sets the best; B, C and D each raise it by 1; E is rejected and F failed.
    assert figures == ModelFigures("test/model", 6, 4, 4 / 6, 3.0, 100 + 101 + 101 + 102 + 102 + 103,
                                   pytest.approx(0.06))
    assert figures_data(trace)[0]["accepted_share"] == pytest.approx(4 / 6)


def test_lower_is_better_and_rows_without_a_model(tmp_path: Path) -> None:
    trace = load_trace(sample.write_run(tmp_path / "run"))
    rows = [replace(row, model=None, model_name=None) if row.parent_id is None else row for row in trace.rows]
    lower = replace(trace, rows=tuple(rows), meta={**trace.meta, "direction": "lower"})
    assert lower.direction == "lower"
    (figures,) = model_figures(lower)
    # Lower is better: A (1, no model) sets the best; no later score is lower, so nothing gained.
    assert (figures.calls, figures.accepted, figures.improvement) == (5, 3, 0.0)
