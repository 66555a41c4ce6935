"""The Mermaid charts: what they show, how they stay small, and that they parse (our grammar, and mermaid.js)."""

from __future__ import annotations

from pathlib import Path

from autoloop_py.analysis.mermaid import charts_markdown, lineage_chart, metric_chart, metric_points
from autoloop_py.analysis.run_view import RunNode, best_lineage, run_nodes
from autoloop_py.state.trace import load_trace
from tests.browser import mermaid_errors, mermaid_js
from tests.mermaid_grammar import check, mermaid_blocks
from tests.trace_samples import write_run


def _chain(count: int, direction: str = "higher") -> list[RunNode]:
    """A straight lineage it0 → it1 → … whose metric improves by 1 each step (every third one failed)."""
    step = 1 if direction == "higher" else -1
    nodes = []
    for i in range(count):
        failed = i % 3 == 2
        parent = None if i == 0 else f"it{i - 1 if (i - 1) % 3 != 2 else i - 2}"
        nodes.append(RunNode(f"it{i}", parent, i, None if failed else float(step * i), "failed" if failed else "accepted",
                             operator="mutation" if i else None))
    return nodes


def test_the_sample_run_charts_the_metric_and_the_lineage_of_its_best(tmp_path: Path) -> None:
    trace = load_trace(write_run(tmp_path / "run"))
    markdown = charts_markdown(run_nodes(trace), trace.direction, "value")
    blocks = mermaid_blocks(markdown)
    assert len(blocks) == 2 and all(check(block) == [] for block in blocks), [check(b) for b in blocks]
    chart, lineage = blocks
    # F failed: five evaluated candidates; the line is the best so far.
    assert 'x-axis "iteration" ["A", "1", "1", "2", "3"]' in chart
    assert "bar [1, 2, 1.5, 3, 4]" in chart and "line [1, 2, 2, 3, 4]" in chart
    # D's lineage A → B → C → D, the operator on each edge, D highlighted.
    assert lineage.count('-->|"mutation"|') == 3 and 'n3["D<br/>4"]' in lineage and "class n3 best" in lineage


def test_lower_is_better_keeps_the_lowest_as_the_best_so_far() -> None:
    nodes = [RunNode("a", None, 0, 5.0, "accepted"), RunNode("b", "a", 1, 7.0, "rejected"),
             RunNode("c", "a", 2, 3.0, "accepted")]
    assert [n.id for n in best_lineage(nodes, "lower")] == ["a", "c"]
    assert "line [5, 5, 3]" in metric_chart(nodes, "lower", "loss")


def test_a_long_run_folds_its_old_iterations_into_buckets() -> None:
    nodes = _chain(600)
    points, folded = metric_points(nodes, "higher")
    evaluated = sum(1 for n in nodes if n.metric is not None)
    assert folded == evaluated - 24 and len(points) <= 24 + 16
    assert points[-1].label == "598" and points[0].label.startswith("0-")  # 599 failed
    # A bucket shows its best and the best so far at its end; the last point's best is the run's best.
    assert points[-1].best == 598.0 and all(p.metric <= p.best for p in points)
    chart = metric_chart(nodes, "higher", "score")
    assert check(chart) == [] and f"oldest {folded} folded" in chart


def test_a_long_lineage_keeps_its_root_and_newest_ancestors() -> None:
    chart = lineage_chart(_chain(60), "higher", limit=12)
    assert check(chart) == []
    assert chart.count('["') == 12 and "more ancestors" in chart
    assert 'n0["iteration 0<br/>0"]' in chart and "iteration 58<br/>58" in chart


def test_labels_cannot_break_out_of_their_quotes() -> None:
    nodes = [RunNode('x"]; click n0 call alert(1) %%', None, 0, 1.0, "accepted"),
             RunNode("y", 'x"]; click n0 call alert(1) %%', 1, 2.0, "accepted", operator='evil"|op')]
    for block in (metric_chart(nodes, "higher", 'metric "name"'), lineage_chart(nodes, "higher")):
        assert check(block) == [], block


def test_strategy_candidates_show_their_island() -> None:
    nodes = [RunNode("c1", None, 0, 1.0, "accepted", island="0"), RunNode("c2", "c1", 1, 2.0, "accepted", "crossover", "2")]
    assert 'n1["c2 · island 2<br/>2"]' in lineage_chart(nodes, "higher")


def test_nothing_evaluated_gives_no_chart() -> None:
    nodes = [RunNode("it1", None, 1, None, "failed")]
    assert metric_chart(nodes, "higher", "m") == "" and lineage_chart(nodes, "higher") == ""
    assert "mermaid" not in charts_markdown(nodes, "higher", "m")


def test_mermaid_js_renders_every_chart_we_emit(tmp_path: Path) -> None:
    script = mermaid_js()
    trace = load_trace(write_run(tmp_path / "run"))
    blocks = mermaid_blocks(charts_markdown(run_nodes(trace), trace.direction, "value"))
    blocks += [metric_chart(_chain(600), "higher", "score"), lineage_chart(_chain(60), "higher"),
               metric_chart(_chain(40, "lower"), "lower", "loss")]
    results = mermaid_errors(blocks + ['flowchart LR\n  n0[broken" -->'], script, tmp_path)
    assert results[:-1] == [None] * len(blocks)
    assert "Parse error" in (results[-1] or "")  # the check would notice a block mermaid cannot read
