"""Tests of analysis/cycling.py: line extraction, both classifiers, the summaries and the tuning share."""

from __future__ import annotations

import time

import pytest
import trace_samples as sample

from autoloop_py.analysis import Node, cycling
from autoloop_py.analysis.cycling import (
    Edit,
    classify_lineage,
    classify_run_wide,
    diff_lines,
    edits_of,
    is_noise,
    normalize,
    skeleton,
    summarize,
)


def _kinds(events: tuple[cycling.RecycleEvent, ...]) -> set[tuple[str, str, str, str, int]]:
    return {(e.child_id, e.kind, e.line, e.removed_in, e.span) for e in events}


def _node(id: str, iteration: int, parent: str | None, source: str) -> Node:
    return Node(id, parent, iteration, 1.0, "accepted", source)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("    total = a // 2  ", "total = a"),  # Python floor division reads as a C++ comment, as in EvoReplay
        ("url = 'http://example.org'", "url = 'http:"),
        ("x = 1; /* note */ y = 2;", "x = 1;  y = 2;"),
        ("# python comments stay", "# python comments stay"),
        ("\tint n = 3; // count", "int n = 3;"),
    ],
)
def test_normalize_drops_c_comments_and_surrounding_space(line: str, expected: str) -> None:
    assert normalize(line) == expected


@pytest.mark.parametrize("line", ["", "ab", "}", "});", "else {", "return;", "#include <vector>", "1, 2.5e-3;",
                                  "(3 + 4) * [5]"])
def test_noise_lines_are_skipped(line: str) -> None:
    assert is_noise(line)


@pytest.mark.parametrize("line", ["x = 1", "pass", "else:", "return x"])
def test_code_lines_are_kept(line: str) -> None:
    assert not is_noise(line)


def test_skeletons_replace_every_number_also_inside_identifiers() -> None:
    assert skeleton("x1 = 0.5e-3 + 12.") == "x# = # + #"


def test_diff_lines_drop_the_header_by_position() -> None:
    assert diff_lines("--i;\nkeep\n+j;\n", "keep\n++j;\n") == (["--i;", "+j;"], ["++j;"])


def test_run_wide_classifier_on_the_sample_run() -> None:
    events = classify_run_wide(edits_of(sample.nodes()))
    assert _kinds(events) == {
        ("C", "tuning", "rate = 0.5", "B", 1),
        ("D", "trivial", "# step size 0.75", "B", 2),
        ("D", "literal", "value = helper(x)", "B", 2),
        ("D", "literal", "cache = memo(x)", "F", 1),  # deleted only on the sibling branch
    }


def test_lineage_classifier_ignores_the_sibling_deletion() -> None:
    nodes = sample.nodes()
    events = classify_lineage(edits_of(nodes), nodes)
    assert _kinds(events) == {
        ("C", "tuning", "rate = 0.5", "B", 1),
        ("D", "trivial", "# step size 0.75", "B", 2),
        ("D", "literal", "value = helper(x)", "B", 2),
    }


def test_an_identical_re_add_after_a_later_tuned_removal_is_tuning_run_wide() -> None:
    # TV2: the most recent same-skeleton removal had other numbers, so run-wide calls it tuning.
    nodes = [
        _node("s", 0, None, "k = 1\nbody = run()\n"),
        _node("a", 1, "s", "k = 2\nbody = run()\n"),
        _node("b", 2, "a", "k = 3\nbody = run()\n"),
        _node("c", 3, "b", "k = 1\nbody = run()\n"),
    ]
    run_wide = {(e.child_id, e.kind, e.removed_line) for e in classify_run_wide(edits_of(nodes))}
    lineage = {(e.child_id, e.kind, e.removed_line) for e in classify_lineage(edits_of(nodes), nodes)}
    assert ("c", "tuning", "k = 2") in run_wide
    assert ("c", "literal", "k = 1") in lineage


def test_each_skeleton_is_credited_once_per_child_and_same_iteration_removals_do_not_count() -> None:
    nodes = [
        _node("s", 0, None, "w = 1\nhold = 0\n"),
        _node("a", 1, "s", "hold = 0\n"),
        _node("b", 1, "s", "w = 1\n"),  # removes `hold = 0` at iteration 1
        _node("c", 2, "a", "w = 5\nw = 6\nhold = 0\n"),
        _node("d", 1, "a", "hold = 0\nhold = 0\n"),
    ]
    events = classify_run_wide(edits_of(nodes))
    assert _kinds(events) == {("c", "tuning", "w = 5", "a", 1)}


def test_deep_lineages_are_handled_without_recursion() -> None:
    nodes = [_node("n0", 0, None, "v = 0\n")]
    nodes += [_node(f"n{i}", i, f"n{i - 1}", f"v = {i}\n") for i in range(1, 3000)]
    started = time.perf_counter()
    events = classify_lineage(edits_of(nodes), nodes)
    assert len(events) == 2998 and {e.kind for e in events} == {"tuning"}
    assert time.perf_counter() - started < 10


def test_summary_of_the_sample_run() -> None:
    edits = edits_of(sample.nodes())
    summary = summarize("run_wide", edits, classify_run_wide(edits))
    assert (summary.n_edits, summary.n_added_lines) == (5, 7)
    assert summary.counts == {"literal": 2, "tuning": 1, "trivial": 1, "any": 4}
    assert summary.share_of_added_lines == pytest.approx({"literal": 2 / 7, "tuning": 1 / 7, "trivial": 1 / 7, "any": 4 / 7})
    # B, E and F re-add nothing; an edit that adds no line counts 0.
    assert summary.median_per_edit_ratios == {"literal": 0.0, "tuning": 0.0, "trivial": 0.0, "any": 0.0}
    assert summary.spans["median"] == 1.5 and summary.spans["bins"] == {
        "1": 2, "2-5": 2, "6-10": 0, "11-20": 0, "21-50": 0, "51+": 0}
    assert [(r.iteration, r.added, r.fractions["any"]) for r in summary.per_iteration] == [(1, 3, 0.0), (2, 1, 1.0),
                                                                                          (3, 3, 1.0)]
    assert [r.rolling_any for r in summary.per_iteration] == pytest.approx([0.0, 0.5, 2 / 3])
    assert summary.slopes == pytest.approx({"literal": 1 / 3, "tuning": 0.0, "trivial": 1 / 6, "any": 0.5})


def test_lineage_summary_of_the_sample_run() -> None:
    nodes = sample.nodes()
    edits = edits_of(nodes)
    summary = summarize("lineage", edits, classify_lineage(edits, nodes))
    assert summary.counts == {"literal": 1, "tuning": 1, "trivial": 1, "any": 3}
    assert summary.share_of_added_lines["any"] == pytest.approx(3 / 7)
    assert summary.slopes["any"] == pytest.approx(1 / 3)


def test_median_per_edit_ratio_uses_every_edit() -> None:
    edits = [Edit("a", "s", 1, ("x = 1",), ("x = 2",)), Edit("b", "a", 2, ("x = 2",), ("x = 1", "y = run()")),
             Edit("c", "b", 3, ("y = run()",), ("y = run()",))]
    summary = summarize("run_wide", edits, classify_run_wide(edits))
    # a adds nothing recycled (0), b recycles 1 of 2 (0.5), c re-adds its own iteration's removal only (0).
    assert summary.median_per_edit_ratios["any"] == 0.0
    assert summary.counts["any"] == 1


def test_spans_fall_into_the_paper_bins() -> None:
    events = [cycling.RecycleEvent("c", 0, "literal", "l", "l", "p", span) for span in (1, 2, 5, 6, 10, 11, 20, 21, 50, 51, 99)]
    assert cycling.span_stats(events)["bins"] == {"1": 1, "2-5": 2, "6-10": 2, "11-20": 2, "21-50": 2, "51+": 2}


def test_raw_detector_counts_identical_and_skeleton_matches() -> None:
    edits = edits_of(sample.nodes())
    assert cycling.raw_events(edits) == (2, 7)
    assert cycling.raw_events(edits, collapse_numbers=True) == (4, 7)


def test_raw_detector_counts_short_lines_only_in_the_denominator() -> None:
    edits = [Edit("a", "s", 1, ("x=1",), ()), Edit("b", "a", 2, (), ("x=1",))]
    assert cycling.raw_events(edits) == (0, 1)


def test_slope_needs_two_iterations_and_around_splits_at_the_breakthrough() -> None:
    assert cycling.ols_slope([3], [1.0]) is None
    edits = edits_of(sample.nodes())
    series = summarize("run_wide", edits, classify_run_wide(edits)).per_iteration
    assert cycling.around(series, 2) == {"before": 0.0, "after": 1.0}


# ---- EvoReplay's own classifier (1773db1) run once on these runs; its outputs are written below.

def _run(rows: tuple[tuple[str, int, str | None, str], ...]) -> tuple[Node, ...]:
    """Returns nodes in the given (programs.jsonl) order."""
    return tuple(_node(i, it, parent, source) for i, it, parent, source in rows)


def _events(nodes: tuple[Node, ...]) -> list[tuple[str, str, str, str, str, int]]:
    return [(e.child_id, e.kind, e.line, e.removed_line, e.removed_in, e.span)
            for e in classify_run_wide(edits_of(nodes))]


ONE_EDIT, SIBLINGS, TWICE, SHORT, CPP = (_run(rows) for rows in (
    sample.ONE_EDIT, sample.SIBLINGS, sample.TWICE, sample.SHORT, sample.CPP))


def test_same_iteration_removals_in_one_edit_pair_with_the_first_like_reference() -> None:
    # EvoReplay: [('b', 'tuning', 'rate = 0.9', 'rate = 0.5', 'a', 1)] (pairing with the last would say literal).
    assert _events(ONE_EDIT) == [("b", "tuning", "rate = 0.9", "rate = 0.5", "a", 1)]


def test_same_iteration_sibling_removals_pair_with_the_first_in_programs_jsonl_order_like_reference() -> None:
    # EvoReplay: [('c', 'literal', 'rate = 0.9', 'rate = 0.9', 'm1', 1)]; by id order a1's `rate = 0.5` would be first.
    assert _events(SIBLINGS) == [("c", "literal", "rate = 0.9", "rate = 0.9", "m1", 1)]
    assert cycling.raw_events(edits_of(SIBLINGS)) == (1, 4)


def test_raw_detector_counts_a_line_re_added_twice_in_one_edit_once_like_reference() -> None:
    # EvoReplay's detect_cycles: 1 recycled of 5 added, with and without --collapse-numbers.
    edits = edits_of(TWICE)
    assert cycling.raw_events(edits) == (1, 5)
    assert cycling.raw_events(edits, collapse_numbers=True) == (1, 5)
    assert _events(TWICE) == [("b", "literal", "value = helper(x)", "value = helper(x)", "a", 1)]


def test_raw_detector_applies_the_minimum_length_after_collapsing_numbers_like_reference() -> None:
    # `k=10` → `k=100`: `k=#` is 3 characters, so no event (0/1); collapsed, `10, 20, 30,` is kept as
    # `#, #, #,` (0/2).
    edits = edits_of(SHORT)
    assert cycling.raw_events(edits) == (0, 1)
    assert cycling.raw_events(edits, collapse_numbers=True) == (0, 2)
    assert _events(SHORT) == []


def test_cpp_increments_are_lines_not_diff_headers_the_one_intended_difference() -> None:
    # EvoReplay drops `+++counter;`/`---x;` as diff headers and finds nothing here (events [], raw 0/0).
    assert _events(CPP) == [("b", "literal", "++counter;", "++counter;", "a", 1)]
    assert cycling.raw_events(edits_of(CPP)) == (1, 1)


def test_per_edit_counts_follow_the_edits_like_reference_programs_csv() -> None:
    edits = edits_of(TWICE)
    summary = summarize("run_wide", edits, classify_run_wide(edits))
    # EvoReplay's per-program rows: a (1 added, nothing re-added), b (4 added, 1 literal).
    assert [(r.child_id, r.added, r.literal, r.tuning, r.trivial) for r in summary.per_edit] == [
        ("a", 1, 0, 0, 0), ("b", 4, 1, 0, 0)]
