"""Tests for autoloop_py.loop.evaluation.evaluation_report: a run's report read into metric, rejection and feedback."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.loop.evaluation.evaluation_report import (
    FILE,
    STDOUT,
    Report,
    channel_of,
    read_report,
    report_of,
)

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def test_upstream_invalid_packing_is_a_rejection_with_its_score() -> None:
    report = read_report('{"combined_score": 0.0, "error": "negative radii"}\n', "combined_score")
    assert report == Report(0.0, {"combined_score": 0.0, "error": "negative radii"}, None, rejection="negative radii")


def test_an_error_without_a_metric_is_an_error() -> None:
    report = read_report('{"error": "no circles"}', "combined_score")
    assert report.metric is None and report.rejection == ""
    assert report.error == "evaluation reported an error: no circles"


def test_a_run_that_reported_nothing_says_how_its_output_ended() -> None:
    printed = ("warming up\n", "Traceback: no module named numpy\n")
    assert read_report("warming up\n", "score", printed=printed).error == (
        'the evaluation printed no JSON object; print one such as {"score": 0.5} as its last line; '
        "its stdout ended: 'warming up'")
    assert read_report("", "score", whole=True, printed=("", printed[1])).error.endswith(
        "; its stderr ended: 'Traceback: no module named numpy'")
    assert read_report("", "score", printed=("", "")).error.endswith("; it printed nothing")
    assert read_report('{"error": "no circles"}', "score", printed=printed).error == (
        "evaluation reported an error: no circles")  # an object was read: it says enough
    assert "ended" not in (read_report("warming up\n", "score").error or "")  # a handed-off report: no run's output


def test_feedback_log_tail_and_other_values() -> None:
    text = '{"score": 2, "feedback": "circle 3 overlaps circle 7", "log_tail": "step 9\\n", "best_x": [1, 2]}'
    report = read_report(text, "score")
    assert report.metric == 2.0
    assert report.feedback == "circle 3 overlaps circle 7\nstep 9"
    assert report.values == {"best_x": [1, 2]}


def test_feedback_that_is_not_text_is_shown_as_json() -> None:
    assert report_of({"score": 1, "feedback": {"worst": 3}}, "score").feedback == '{"worst": 3}'


def test_the_file_channel_reads_one_whole_object_only() -> None:
    assert read_report(' {"score": 1}\n', "score", whole=True).metric == 1.0
    two = read_report('{"score": 1}\n{"score": 1e9}\n', "score", whole=True)
    assert two.metric is None and "not one JSON object" in (two.error or "")
    empty = read_report("", "score", whole=True)
    assert empty.metric is None and "wrote no report to $AUTOLOOP_RESULT" in (empty.error or "")


def test_stdout_keeps_upstreams_last_object() -> None:
    assert read_report('{"score": 1}\nnoise\n{"score": 3}\n', "score").metric == 3.0


def test_channel_auto_is_file_only_when_the_evaluator_names_it() -> None:
    assert channel_of("auto", ["python3 evaluate.py", "open(os.environ['AUTOLOOP_RESULT'], 'w')"]) == FILE
    assert channel_of("auto", ["python3 evaluate.py", "print(json.dumps(result))"]) == STDOUT
    assert channel_of("stdout", ["AUTOLOOP_RESULT"]) == STDOUT
    assert channel_of("file", []) == FILE


@given(st.dictionaries(st.text(max_size=10), _JSON, max_size=6), st.sampled_from(["score", "error", "x"]))
def test_report_of_any_object_is_a_metric_xor_an_error(found: dict, metric: str) -> None:
    report = report_of(found, metric)
    assert (report.metric is None) == (report.error is not None)
    if report.metric is not None:
        assert math.isfinite(report.metric)
    assert not report.rejection or report.metric is not None
    assert metric not in report.values and "error" not in report.values and "feedback" not in report.values


@given(st.dictionaries(st.text(max_size=10), _JSON, max_size=6), st.floats(allow_nan=False, allow_infinity=False))
def test_a_written_object_reads_back_whole(found: dict, value: float) -> None:
    found = {**found, "score": value}
    report = read_report(json.dumps(found), "score", whole=True)
    assert report.metrics == found
    assert report.metric == value


@given(st.text(max_size=300))
def test_any_text_gives_a_report_and_never_raises(text: str) -> None:
    for whole in (True, False):
        report = read_report(text, "score", whole=whole)
        assert (report.metric is None) == (report.error is not None)
