"""The HTML report's data and page: nodes, diffs against parents, the best lineage, and no way for run text to become markup."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from autoloop_py.analysis.html_report import ReportSource, render_report, report_payload
from autoloop_py.program.objectives import Objective
from autoloop_py.state.population import empty_population
from autoloop_py.state.population_model import Candidate
from autoloop_py.strategies.pareto import with_fronts, with_objectives
from autoloop_py.state.trace import load_trace
from tests.trace_samples import write_run

SOURCE = ReportSource(program="sample", origin="runs/sample", metric="value", direction="higher")


def _data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="run-data">(.*?)</script>', page, re.S)
    assert match, "the page carries its data"
    return json.loads(match.group(1))


def test_the_payload_has_every_candidate_its_diff_and_the_best_lineage(tmp_path: Path) -> None:
    payload = report_payload(load_trace(write_run(tmp_path / "run")), SOURCE)
    assert [n["id"] for n in payload["nodes"]] == ["A", "B", "E", "C", "F", "D"]
    assert payload["best"] == ["A", "B", "C", "D"]
    assert {n["id"]: n["m"] for n in payload["nodes"]}["F"] is None
    # D against C: helper(x) comes back, fallback goes.
    assert "-value = fallback(x)\n" in payload["diffs"]["D"] and "+value = helper(x)\n" in payload["diffs"]["D"]
    # A seed has no parent: its source is shown instead.
    assert payload["diffs"]["A"].startswith(" import math\n")


def test_the_page_is_self_contained_and_carries_the_payload(tmp_path: Path) -> None:
    payload = report_payload(load_trace(write_run(tmp_path / "run")), SOURCE)
    page = render_report(payload)
    assert _data(page) == json.loads(json.dumps(payload))
    # No server, no network at view time: nothing is loaded from anywhere.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<script src" not in page and "<link" not in page


def test_run_text_cannot_close_the_data_script(tmp_path: Path) -> None:
    trace = load_trace(write_run(tmp_path / "run"))
    evil = "</script><script>document.title='owned'</script><img src=x onerror=alert(1)>"
    trace = replace(trace, rows=tuple(replace(row, changes=evil) for row in trace.rows))
    page = render_report(report_payload(trace, SOURCE))
    assert page.count("</script>") == 2  # the data block's and the code block's own
    assert "<img" not in page and _data(page)["nodes"][0]["sum"] == evil


def test_the_population_table_rows_come_from_the_state_file_entries(tmp_path: Path) -> None:
    population = [Candidate(id=3, island=1, fitness=0.5, gen=2, operator="crossover", parents=(1, 2),
                            cell=("low", "high"), approach="mix the two", status="accepted")]
    payload = report_payload(load_trace(write_run(tmp_path / "run")), SOURCE, population)
    assert payload["population"] == [{
        "id": 3, "island": 1, "cell": "low × high", "fitness": 0.5, "gen": 2, "operator": "crossover",
        "parents": "1, 2", "status": "accepted", "approach": "mix the two", "objectives": None, "front": None,
    }]
    assert payload["objectives"] == {"names": [], "points": []}


def test_the_pareto_plot_data_comes_from_the_entries_objectives_and_fronts(tmp_path: Path) -> None:
    objectives = (Objective("accuracy", "higher"), Objective("cost", "lower"))
    entries = tuple(with_objectives(Candidate(id=i, island=None, fitness=a, gen=i, operator="x", status="accepted",
                                              approach=f"a{i}"), {"accuracy": a, "cost": c}, objectives)
                    for i, a, c in ((1, 0.9, 30.0), (2, 0.8, 10.0), (3, 0.7, 40.0)))
    population = with_fronts(replace(empty_population("AdaEvolve"), candidates=entries, next_id=4), objectives)
    payload = report_payload(load_trace(write_run(tmp_path / "run")), SOURCE, population.candidates)
    assert payload["objectives"] == {"names": ["accuracy", "cost"], "points": [
        {"id": "1", "v": {"accuracy": 0.9, "cost": 30.0}, "front": 0, "s": "accepted", "sum": "a1"},
        {"id": "2", "v": {"accuracy": 0.8, "cost": 10.0}, "front": 0, "s": "accepted", "sum": "a2"},
        {"id": "3", "v": {"accuracy": 0.7, "cost": 40.0}, "front": 1, "s": "accepted", "sum": "a3"},
    ]}
    assert [(row["objectives"], row["front"]) for row in payload["population"]] == [
        ("accuracy 0.9 · cost 30", 0), ("accuracy 0.8 · cost 10", 0), ("accuracy 0.7 · cost 40", 1)]
    page = render_report(payload)
    assert '<svg id="pareto"' in page and "Pareto front" in page


def test_the_map_elites_grid_holds_each_cells_best_and_count(tmp_path: Path) -> None:
    def entry(id: int, fitness: float | None, cell: tuple[str, str]) -> Candidate:
        return Candidate(id=id, island=0, fitness=fitness, gen=id, operator="x", cell=cell, status="accepted")

    population = [entry(1, 0.5, ("greedy", "small")), entry(2, 0.9, ("greedy", "small")),
                  entry(3, 0.7, ("exact", "latency_ms 2/3")), entry(4, None, ("exact", "small")),
                  Candidate(id=5, island=None, fitness=1.0, gen=5, operator="x")]
    grid = report_payload(load_trace(write_run(tmp_path / "run")), SOURCE, population)["grid"]
    assert grid == {"rows": ["greedy", "exact"], "cols": ["small", "latency_ms 2/3"], "cells": [
        {"row": "greedy", "col": "small", "n": 2, "best": "2", "f": 0.9},
        {"row": "exact", "col": "latency_ms 2/3", "n": 1, "best": "3", "f": 0.7},
        {"row": "exact", "col": "small", "n": 1, "best": None, "f": None},
    ]}
    lower = replace(SOURCE, direction="lower")
    assert report_payload(load_trace(write_run(tmp_path / "run2")), lower, population)["grid"]["cells"][0]["best"] == "1"
    assert '<div id="grid">' in render_report(report_payload(load_trace(write_run(tmp_path / "run3")), SOURCE, population))


def test_the_candidates_the_novelty_filter_skipped_are_listed(tmp_path: Path) -> None:
    trace = load_trace(write_run(tmp_path / "run"))
    similar = {"verdict": "similar", "evaluated": False, "of": "C", "similarity": 0.9995, "threshold": 0.999,
               "embedder": "local"}
    rows = tuple(replace(row, extra={**row.extra, "metadata": {"novelty": similar}}) if row.id == "F" else row
                 for row in trace.rows)
    payload = report_payload(replace(trace, rows=rows), SOURCE)
    assert payload["skipped"] == [{"id": "F", "it": next(r.iteration_found for r in rows if r.id == "F"),
                                   "verdict": "similar", "of": "C", "sim": 0.9995, "by": "local"}]
    assert report_payload(trace, SOURCE)["skipped"] == []
    page = render_report(payload)
    assert 'id="skipped-section" hidden' in page and "data.skipped.length" in page


def test_the_prompt_variants_figures_come_from_the_rows_naming_them(tmp_path: Path) -> None:
    trace = load_trace(write_run(tmp_path / "run"))
    assert report_payload(trace, SOURCE)["prompts"] == []
    rows = tuple(replace(row, extra={**row.extra, "metadata": {"prompt": "terse"}}) if row.id in "BE" else row
                 for row in trace.rows)
    payload = report_payload(replace(trace, rows=rows), SOURCE)
    assert [(p["model"], p["calls"], p["accepted"], p["improvement"]) for p in payload["prompts"]] == [("terse", 2, 1, 1.0)]
    page = render_report(payload)
    assert _data(page)["prompts"] == payload["prompts"] and 'id="prompts-section" hidden' in page
    assert 'figureTable(document.getElementById("prompts"), data.prompts, "variant", true)' in page
