"""Tests of analysis/lineage.py on hand-built runs with known answers."""

from __future__ import annotations

import dataclasses

import pytest
import trace_samples as sample

from autoloop_py.analysis import Node
from autoloop_py.analysis.lineage import BestEvent, analyze_lineage, ancestry, record_holders


def _node(id: str, iteration: int, parent: str | None, score: float | None, source: str | None = None) -> Node:
    return Node(id, parent, iteration, score, "accepted" if score is not None else "failed", source)


def test_the_sample_run_ends_on_a_four_generation_lineage() -> None:
    report = analyze_lineage(sample.nodes(), "higher")
    assert report is not None
    assert (report.best_id, report.best_score, report.best_iteration) == ("D", 4.0, 3)
    assert report.lineage == ("A", "B", "C", "D") and report.depth == 4
    assert report.normalized_best_iteration == 1.0
    assert report.dead_share == pytest.approx(1 - 4 / 6)
    assert report.n_programs == 6 and report.n_events_in_lineage == 4


def test_best_so_far_events_carry_score_and_line_deltas() -> None:
    report = analyze_lineage(sample.nodes(), "higher")
    assert report is not None
    third = 1 / 3
    assert report.events == (
        BestEvent("A", 0, 1.0, None, None, None, True),
        # A→B removes three lines and adds two; B→C changes one; C→D removes one and adds three.
        BestEvent("B", 1, 2.0, 1.0, pytest.approx(third), 5, True),
        BestEvent("C", 2, 3.0, 1.0, pytest.approx(third), 2, True),
        BestEvent("D", 3, 4.0, 1.0, pytest.approx(third), 4, True),
    )


def test_a_best_on_the_sibling_branch_has_its_own_lineage() -> None:
    nodes = [dataclasses.replace(n, score=10.0, status="accepted") if n.id == "F" else n for n in sample.nodes()]
    report = analyze_lineage(nodes, "higher")
    assert report is not None
    assert [e.id for e in report.events] == ["A", "B", "C", "F"]
    assert report.lineage == ("A", "E", "F") and report.depth == 3
    assert report.normalized_best_iteration == pytest.approx(2 / 3)
    assert report.dead_share == 0.5 and report.n_events_in_lineage == 2
    assert [e.in_lineage for e in report.events] == [True, False, False, True]


def test_a_seed_that_stays_best_has_depth_one() -> None:
    nodes = [_node("s", 0, None, 5.0), _node("a", 1, "s", 4.0), _node("b", 2, "a", 5.0), _node("c", 4, "b", None)]
    report = analyze_lineage(nodes, "higher")
    assert report is not None
    assert (report.best_id, report.depth, report.lineage) == ("s", 1, ("s",))
    assert report.normalized_best_iteration == 0.0 and report.dead_share == 0.75
    # An equal later score is not a new best.
    assert [e.id for e in report.events] == ["s"]


def test_lower_is_better_flips_the_events_and_keeps_gains_positive() -> None:
    nodes = [_node("s", 0, None, 9.0), _node("a", 1, "s", 4.0), _node("b", 2, "a", 6.0), _node("c", 3, "a", 1.0)]
    report = analyze_lineage(nodes, "lower")
    assert report is not None
    assert [(e.id, e.delta_score) for e in report.events] == [("s", None), ("a", 5.0), ("c", 3.0)]
    assert [e.delta_score_norm for e in report.events] == [None, 5 / 8, 3 / 8]
    assert report.lineage == ("s", "a", "c") and report.normalized_best_iteration == 1.0


def test_ties_within_an_iteration_go_to_the_smaller_id() -> None:
    nodes = [_node("z", 0, None, 1.0), _node("b", 1, "z", 2.0), _node("a", 1, "z", 2.0)]
    assert [n.id for n in record_holders(nodes, "higher")] == ["z", "a"]


def test_a_run_without_valid_scores_has_no_lineage_report() -> None:
    assert analyze_lineage([_node("s", 0, None, None)], "higher") is None


def test_ancestry_stops_at_missing_parents_and_cycles() -> None:
    nodes = {n.id: n for n in [_node("a", 1, "gone", 1.0), _node("b", 2, "a", 1.0),
                                _node("x", 1, "y", 1.0), _node("y", 2, "x", 1.0)]}
    assert ancestry(nodes, "b") == ("a", "b")
    assert ancestry(nodes, "y") == ("x", "y")
