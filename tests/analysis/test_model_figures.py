"""Tests for analysis/model_figures.py: per model, its candidates, the share kept, the metric gained and the spend."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import trace_samples as sample

from autoloop_py.analysis.model_figures import PROMPT, ModelFigures, figures_data, model_figures
from autoloop_py.state.trace import GUIDE_SPEND, load_trace


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


def test_guide_calls_add_to_their_models_spend_not_its_calls(tmp_path: Path) -> None:
    trace = load_trace(sample.write_run(tmp_path / "run"))
    guide = [{"model": "test/guide", "tokens": 50, "cost": 0.25}, {"model": "test/model", "tokens": 7, "cost": None}]
    rows = [replace(row, extra={**row.extra, "metadata": {GUIDE_SPEND: guide}}) if i == 1 else row
            for i, row in enumerate(trace.rows)]
    proposer, meta = model_figures(replace(trace, rows=tuple(rows)))
    assert (proposer.model, proposer.calls, proposer.tokens) == ("test/model", 6, 609 + 7)
    assert proposer.cost == pytest.approx(0.06)
    assert meta == ModelFigures("test/guide", 0, 0, 0.0, 0.0, 50, 0.25)


@pytest.mark.parametrize("listed", [
    "50 tokens", [1, "x", None], [{"model": 3, "tokens": 5}], [{"model": "m", "tokens": -5}],
    [{"model": "m", "tokens": True}], [{"model": "m", "tokens": 5, "cost": "free"}],
    [{"model": "m", "tokens": 5, "cost": float("inf")}], [{"model": "m", "tokens": 5, "cost": -1}],
])
def test_a_guide_spend_that_cannot_be_read_is_skipped(tmp_path: Path, listed: object) -> None:
    trace = load_trace(sample.write_run(tmp_path / "run"))
    rows = (replace(trace.rows[0], extra={"metadata": {GUIDE_SPEND: listed}}), *trace.rows[1:])
    assert model_figures(replace(trace, rows=rows)) == model_figures(trace)


def test_per_prompt_variant_the_rows_naming_it_and_their_guide_calls(tmp_path: Path) -> None:
    trace = load_trace(sample.write_run(tmp_path / "run"))
    guide = [{"model": "test/guide", "tokens": 50, "cost": 0.25}]
    names = ["terse", "bold", "bold", "terse", 7, None]  # a name that is no string counts nowhere
    rows = tuple(replace(row, extra={**row.extra, "metadata": {PROMPT: name, GUIDE_SPEND: guide if i == 3 else []}})
                 for i, (row, name) in enumerate(zip(trace.rows, names)))
    assert [row.id for row in rows] == ["A", "B", "E", "C", "F", "D"]
    terse, bold = model_figures(replace(trace, rows=rows), PROMPT)
    # A (terse) sets the best; B (bold) and C (terse, with a guide call) raise it by 1 each; E (bold) is rejected.
    assert (terse.model, terse.calls, terse.accepted, terse.improvement, terse.tokens) == ("terse", 2, 2, 1.0, 100 + 102 + 50)
    assert terse.cost == pytest.approx(0.02 + 0.25)
    assert (bold.model, bold.calls, bold.accepted, bold.improvement, bold.tokens) == ("bold", 2, 1, 1.0, 101 + 101)
    assert model_figures(trace, PROMPT) == []
